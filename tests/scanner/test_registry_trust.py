"""End to end: images in a real registry (docker-registry on loopback), signed and attested in
cosign's formats with test keys and a private Sigstore instance, checked by
`gpuprov scan registry:... --trust POLICY`; and local attestation files for an OCI layout.

Every case says what a security reviewer expects: accepted with the signer named (and the SLSA
Build level the builder may claim, in the BOM), or rejected with the precise reason, the image
reported unsigned and `--fail-on unsigned` exiting 1.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from gpuprov.cli import app
from tests.fixtures import cosign as cs
from tests.fixtures import keys
from tests.fixtures.images import Image, Layer, file, oci_layout_files, write_oci_layout
from tests.fixtures.registry import (
    PushClient,
    Registry,
    layout_digest,
    push_built,
    registry_fixture,
)
from tests.fixtures.sigstore_private import ISSUER, SUBJECT, PrivateSigstore

runner = CliRunner()
trust_registry = registry_fixture("trust_registry")

BUILDER = (
    "https://git.example.test/slsa/builder/.github/workflows/generator_container_slsa3.yml"
    "@refs/tags/v2.1.0"
)
LOCAL_BUILDER = "https://ci.acme.test/runners/local@v1"
SOURCE = "https://git.example.test/acme/ml"
LAYOUT_NAME = "registry.acme.test/ml/train"
EXPIRED = datetime(2025, 1, 1, tzinfo=UTC)  # before the instance signs anything (2025-06-01)


def _policy_text(host: str, root: str, *, unsafe: bool = False) -> str:
    images = json.dumps([f"{host}/ml/*", f"{LAYOUT_NAME}*"])
    unsafe_line = "    unsafe: [ignore-tlog]\n" if unsafe else ""
    return f"""\
version: 1
roots:
  - path: {root}
    name: acme-private
signers:
  - name: release-key
    key: release.pub
    images: {images}
{unsafe_line}  - name: ci
    issuer: {ISSUER}
    subject: {SUBJECT}
    images: {images}
slsa:
  builders:
    - id: {BUILDER}
      level: 3
      signers: [ci]
    - id_regex: 'https://ci\\.acme\\.test/runners/local@.*'
      level: 1
  expect:
    - images: {images}
      source_repo: {SOURCE}
"""


@dataclass
class World:
    """The running registry, the private instance, keys and policy files."""

    registry: Registry
    client: PushClient
    base: Path
    instance: PrivateSigstore
    release: Any  # the trusted key
    intruder: Any  # a key nobody trusts
    policy: Path
    expired_ca: Path
    expired_log: Path
    unsafe: Path

    @property
    def host(self) -> str:
        return self.registry.host

    def push_image(self, repository: str, tag: str = "v1", *, arch: str = "amd64") -> str:
        """A small image whose bytes are unique to (repository, tag); its manifest digest."""
        built = _image(f"{repository}:{tag}", arch).build()
        return push_built(self.client, repository, built, tag)

    def descriptor(self, repository: str, digest: str) -> dict[str, Any]:
        manifest = self.client.get_manifest(repository, digest)
        assert manifest is not None
        return {"mediaType": manifest.media_type, "digest": digest, "size": len(manifest.raw)}

    def ref(self, repository: str, tag: str = "v1") -> str:
        return f"registry:{self.host}/{repository}:{tag}"

    def reference(self, repository: str) -> str:
        """The docker-reference cosign puts in the payload (no tag)."""
        return f"{self.host}/{repository}"


def _image(unique: str, arch: str = "amd64") -> Image:
    return Image(
        [Layer([file("usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", f"ELF {unique}".encode())])],
        architecture=arch,
        labels={"case": unique},
    )


@pytest.fixture(scope="module")
def world(trust_registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("registry-trust")
    instance = PrivateSigstore()
    (base / "private-root.json").write_bytes(instance.trusted_root_json())
    (base / "expired-ca-root.json").write_bytes(instance.trusted_root_json(ca_end=EXPIRED))
    (base / "expired-log-root.json").write_bytes(instance.trusted_root_json(log_end=EXPIRED))
    release = keys.generate("ecdsa")
    keys.write_keypair(base, "release", release)
    host = trust_registry.host
    files = {
        "policy": ("trust.yaml", "private-root.json", False),
        "expired_ca": ("trust-expired-ca.yaml", "expired-ca-root.json", False),
        "expired_log": ("trust-expired-log.yaml", "expired-log-root.json", False),
        "unsafe": ("trust-unsafe.yaml", "private-root.json", True),
    }
    paths = {}
    for key, (name, root, unsafe) in files.items():
        paths[key] = base / name
        paths[key].write_text(_policy_text(host, root, unsafe=unsafe))
    with PushClient(host) as client:
        yield World(
            trust_registry,
            client,
            base,
            instance,
            release,
            keys.generate("ecdsa"),
            paths["policy"],
            paths["expired_ca"],
            paths["expired_log"],
            paths["unsafe"],
        )


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never read the user's cache (a refreshed public-good root may live there)."""
    cache = tmp_path / "gpuprov-cache"
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(cache))
    return cache


def scan(target: str, policy: Path | None, *extra: str, fmt: str = "json") -> Result:
    args = ["scan", target, "--no-cache", "-q", "-f", fmt]
    if policy is not None:
        args += ["--trust", str(policy)]
    return runner.invoke(app, [*args, *extra])


def trust_of(result: Result) -> dict[str, Any]:
    """The report's image_trust (the command must have produced a report)."""
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output
    trust: dict[str, Any] = json.loads(result.stdout)["image_trust"]
    assert trust is not None
    return trust


def bom_properties(result: Result) -> dict[str, list[str]]:
    """`metadata.component` properties of a CycloneDX report, each name to its values."""
    assert result.exit_code in (0, 1), result.output
    bom = json.loads(result.stdout)
    out: dict[str, list[str]] = {}
    for prop in bom["metadata"]["component"].get("properties", []):
        out.setdefault(prop["name"], []).append(prop["value"])
    return out


def rejected(trust: dict[str, Any]) -> str:
    return " | ".join(trust["rejected"])


def assert_unsigned(world: World, target: str, reason: str, policy: Path | None = None) -> None:
    """Unsigned with `reason` in the report, and `--fail-on unsigned` exits 1 naming it."""
    trust = trust_of(scan(target, policy or world.policy))
    assert trust["signed"] is False and trust["signer"] is None
    assert reason in rejected(trust), rejected(trust)
    failed = scan(target, policy or world.policy, "--fail-on", "unsigned")
    assert failed.exit_code == 1, failed.output
    assert "fail-on unsigned:" in failed.stderr and reason in failed.stderr


# --- accepted -----------------------------------------------------------------------------------


def test_key_signed_image_is_accepted_and_named(world: World) -> None:
    repo = "ml/key-signed"
    digest = world.push_image(repo)
    payload = cs.simple_signing(digest, world.reference(repo))
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "sig",
        [cs.key_signature(payload, world.release, world.instance)],
    )
    result = scan(world.ref(repo), world.policy, "--fail-on", "unsigned")
    assert result.exit_code == 0, result.output
    trust = trust_of(result)
    assert trust["signed"] is True
    assert trust["signer"].startswith("release-key (ecdsa-p256 key sha256:")
    assert trust["rejected"] == [] and trust["checked"] == 1
    props = bom_properties(scan(world.ref(repo), world.policy, fmt="cyclonedx"))
    assert props["gpuprov:image:signer"] == [trust["signer"]]
    assert "gpuprov:image:signature-rejected" not in props


def test_keyless_signature_is_accepted_only_for_the_trusted_identity(world: World) -> None:
    good, bad = "ml/keyless", "ml/keyless-forged"
    good_digest = world.push_image(good)
    cs.push_legacy(
        world.client,
        good,
        good_digest,
        "sig",
        [
            cs.keyless_signature(
                cs.simple_signing(good_digest, world.reference(good)), world.instance
            )
        ],
    )
    trust = trust_of(scan(world.ref(good), world.policy))
    assert trust["signed"] is True
    assert trust["signer"] == f"ci ({SUBJECT} (issuer {ISSUER}))"

    # The same CA and log, but another workflow, and the right subject from another issuer.
    bad_digest = world.push_image(bad)
    payload = cs.simple_signing(bad_digest, world.reference(bad))
    fork = SUBJECT.replace("/acme/", "/evil-fork/")
    cs.push_legacy(
        world.client,
        bad,
        bad_digest,
        "sig",
        [
            cs.keyless_signature(payload, world.instance, subject=fork),
            cs.keyless_signature(payload, world.instance, issuer="https://issuer.evil.test"),
        ],
    )
    assert_unsigned(world, world.ref(bad), f"certificate identity {fork}")
    trust = trust_of(scan(world.ref(bad), world.policy))
    assert len(trust["rejected"]) == 2
    assert all(f"is not trusted (expected {SUBJECT}" in r for r in trust["rejected"])
    assert "https://issuer.evil.test" in rejected(trust)


def test_v3_referrers_sign_and_attest_with_slsa_level_in_the_bom(world: World) -> None:
    repo = "ml/v3"
    digest = world.push_image(repo)
    subject = world.descriptor(repo, digest)
    cs.push_referrer(
        world.client, repo, subject, world.instance.sign_dsse(cs.cosign_sign_statement(digest))
    )
    cs.push_referrer(
        world.client,
        repo,
        subject,
        world.instance.sign_dsse(cs.slsa_provenance(digest, BUILDER, SOURCE)),
    )
    result = scan(world.ref(repo), world.policy, "--fail-on", "unsigned", fmt="cyclonedx")
    assert result.exit_code == 0, result.output
    props = bom_properties(result)
    assert props["gpuprov:image:signer"] == [f"ci ({SUBJECT} (issuer {ISSUER}))"]
    assert props["gpuprov:slsa:build-level"] == ["3"]
    assert props["gpuprov:slsa:builder"] == [BUILDER]
    assert props["gpuprov:slsa:source-repo"] == [SOURCE]
    assert "gpuprov:image:signature-rejected" not in props

    # A message-signature bundle over the manifest (the other v3 form), with the annotations
    # kept on the referrers index entry.
    other = "ml/v3-message"
    digest = world.push_image(other)
    manifest = world.client.get_manifest(other, digest)
    assert manifest is not None
    cs.push_referrer(
        world.client,
        other,
        world.descriptor(other, digest),
        world.instance.sign_blob(manifest.raw),
        predicate_type=cs.COSIGN_SIGN,
        index_annotations=True,
    )
    trust = trust_of(scan(world.ref(other), world.policy))
    assert trust["signed"] is True and trust["signer"].startswith("ci (")


def test_referrer_annotations_that_lie_about_the_bundle(world: World) -> None:
    repo = "ml/v3-lying"
    digest = world.push_image(repo)
    subject = world.descriptor(repo, digest)
    sign_bundle = world.instance.sign_dsse(cs.cosign_sign_statement(digest))
    cs.push_referrer(world.client, repo, subject, sign_bundle, predicate_type=cs.SLSA_V1)
    trust = trust_of(scan(world.ref(repo), world.policy))
    assert trust["signed"] is False
    assert f"annotation says predicate {cs.SLSA_V1}" in rejected(trust)


def test_key_attestation_gets_only_the_level_its_builder_allows(world: World) -> None:
    repo = "ml/key-attested"
    digest = world.push_image(repo)
    name = world.reference(repo)
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "sig",
        [cs.key_signature(cs.simple_signing(digest, name), world.release, world.instance)],
    )
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "att",
        [
            cs.key_attestation(
                cs.slsa_provenance(digest, LOCAL_BUILDER, SOURCE, name=name),
                world.release,
                world.instance,
            ),
            # A project key claiming the hosted L3 builder: only "ci" may attest for it.
            cs.key_attestation(
                cs.slsa_provenance(digest, BUILDER, SOURCE, name=name),
                world.release,
                world.instance,
            ),
        ],
    )
    result = scan(world.ref(repo), world.policy, fmt="cyclonedx")
    assert result.exit_code == 0, result.output
    props = bom_properties(result)
    assert props["gpuprov:slsa:build-level"] == ["1"]
    assert props["gpuprov:slsa:builder"] == [LOCAL_BUILDER]
    assert props["gpuprov:image:signer"][0].startswith("release-key (")
    (reason,) = props["gpuprov:image:signature-rejected"]
    assert f"signer release-key may not attest for builder {BUILDER}" in reason


def test_legacy_keyless_attestation_reaches_the_hosted_builder_level(world: World) -> None:
    repo = "ml/keyless-attested"
    digest = world.push_image(repo)
    name = world.reference(repo)
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "sig",
        [cs.keyless_signature(cs.simple_signing(digest, name), world.instance)],
    )
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "att",
        [
            cs.keyless_attestation(
                cs.slsa_provenance(digest, BUILDER, SOURCE, name=name), world.instance
            ),
            # The hosted builder, but attested by a forked workflow.
            cs.keyless_attestation(
                cs.slsa_provenance(digest, BUILDER, SOURCE, name=name),
                world.instance,
                subject=SUBJECT.replace("@refs/heads/main", "@refs/heads/evil"),
            ),
        ],
    )
    trust = trust_of(scan(world.ref(repo), world.policy))
    assert trust["signed"] is True
    assert (trust["slsa_level"], trust["builder"], trust["source_repo"]) == (3, BUILDER, SOURCE)
    (reason,) = trust["rejected"]
    assert "@refs/heads/evil (issuer" in reason and "is not trusted" in reason


def test_signature_on_a_multi_platform_index(world: World) -> None:
    repo = "ml/multi"
    children = [_image("multi-amd64").build(), _image("multi-arm64", "arm64").build()]
    for built in children:
        for blob in [*built.layer_blobs, built.config]:
            world.client.push_blob(repo, blob)
        world.client.push_manifest(repo, built.manifest, cs.OCI_MANIFEST)
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": cs.OCI_INDEX,
            "manifests": [b.descriptor() for b in children],
        }
    ).encode()
    top = world.client.push_manifest(repo, index, cs.OCI_INDEX, "v1")
    # `cosign sign IMAGE:TAG` signs what the tag names: the index.
    payload = cs.simple_signing(top, world.reference(repo))
    cs.push_legacy(
        world.client, repo, top, "sig", [cs.key_signature(payload, world.release, world.instance)]
    )
    result = scan(world.ref(repo), world.policy, "--platform", "linux/arm64")
    trust = trust_of(result)
    assert trust["signed"] is True and trust["rejected"] == []
    assert json.loads(result.stdout)["asset"]["digest"] == children[1].manifest_digest


# --- rejected -----------------------------------------------------------------------------------


def test_unsigned_image(world: World) -> None:
    repo = "ml/unsigned"
    world.push_image(repo)
    result = scan(world.ref(repo), world.policy)
    assert result.exit_code == 0, result.output
    trust = trust_of(result)
    assert trust["rejected"] == ["no signature or attestation found for the image"]
    assert trust["checked"] == 0 and trust["slsa_level"] is None
    assert_unsigned(world, world.ref(repo), "no signature or attestation found for the image")
    props = bom_properties(scan(world.ref(repo), world.policy, fmt="cyclonedx"))
    assert "gpuprov:image:signer" not in props


def test_signature_copied_from_another_image(world: World) -> None:
    repo = "ml/replay"
    a = world.push_image(repo, "a")
    b = world.push_image(repo, "b")
    payload = cs.simple_signing(a, world.reference(repo))
    cs.push_legacy(
        world.client, repo, a, "sig", [cs.key_signature(payload, world.release, world.instance)]
    )
    cs.copy_legacy(world.client, repo, a, b)
    assert trust_of(scan(world.ref(repo, "a"), world.policy))["signed"] is True
    assert_unsigned(
        world,
        world.ref(repo, "b"),
        f"signature is for image {a}, not {b} (a signature copied from another image)",
    )


def test_signature_by_an_untrusted_key(world: World) -> None:
    repo = "ml/wrong-key"
    digest = world.push_image(repo)
    payload = cs.simple_signing(digest, world.reference(repo))
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "sig",
        [cs.key_signature(payload, world.intruder, world.instance)],
    )
    assert_unsigned(
        world, world.ref(repo), "signature does not verify with a trusted key (release-key)"
    )


def test_tampered_payloads(world: World) -> None:
    repo = "ml/tampered"
    digest = world.push_image(repo)
    name = world.reference(repo)
    payload = cs.simple_signing(digest, name)
    # The payload is changed after signing (another docker-reference), the blob pushed honestly.
    evil = cs.simple_signing(digest, "evil.test/ml/tampered")
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "sig",
        [
            cs.key_signature(payload, world.release, world.instance).tampered(evil),
            cs.keyless_signature(payload, world.instance).tampered(evil),
        ],
    )
    # cosign v3: the DSSE payload of a signed bundle swapped for another statement.
    bundle = world.instance.sign_dsse(cs.cosign_sign_statement(digest))
    other = cs.statement(digest, cs.COSIGN_SIGN, {"evil": True})
    bundle["dsseEnvelope"]["payload"] = cs.b64(other)
    cs.push_referrer(world.client, repo, world.descriptor(repo, digest), bundle)
    trust = trust_of(scan(world.ref(repo), world.policy))
    assert trust["signed"] is False and len(trust["rejected"]) == 3, trust["rejected"]
    assert "signature does not verify with a trusted key (release-key)" in rejected(trust)
    assert "signature does not verify with the signing certificate" in rejected(trust)
    (v3,) = [r for r in trust["rejected"] if r.startswith(cs.BUNDLE_V03)]
    assert "the DSSE signature does not verify" in v3, v3
    assert_unsigned(world, world.ref(repo), "signature does not verify")


def test_signature_blob_tampered_in_registry_storage(world: World) -> None:
    repo = "ml/tampered-storage"
    digest = world.push_image(repo)
    layer = cs.key_signature(
        cs.simple_signing(digest, world.reference(repo)), world.release, world.instance
    )
    cs.push_legacy(world.client, repo, digest, "sig", [layer])
    stored = world.registry.blob_file(cs.sha256(layer.data))
    stored.write_bytes(stored.read_bytes().replace(b"ml/tampered-storage", b"ml/tampered-st0rage"))
    assert_unsigned(world, world.ref(repo), f"its descriptor says {cs.sha256(layer.data)}")


def test_attestation_whose_subject_is_another_image(world: World) -> None:
    repo = "ml/att-replay"
    a = world.push_image(repo, "a")
    b = world.push_image(repo, "b")
    name = world.reference(repo)
    for digest in (a, b):
        payload = cs.simple_signing(digest, name)
        cs.push_legacy(
            world.client,
            repo,
            digest,
            "sig",
            [cs.key_signature(payload, world.release, world.instance)],
        )
    # A's provenance copied onto B: the legacy .att tag and a v3 referrer listed for B.
    cs.push_legacy(
        world.client,
        repo,
        a,
        "att",
        [
            cs.key_attestation(
                cs.slsa_provenance(a, LOCAL_BUILDER, SOURCE, name=name),
                world.release,
                world.instance,
            )
        ],
    )
    cs.copy_legacy(world.client, repo, a, b, "att")
    cs.push_referrer(
        world.client,
        repo,
        world.descriptor(repo, b),
        world.instance.sign_dsse(cs.slsa_provenance(a, BUILDER, SOURCE)),
    )
    assert trust_of(scan(world.ref(repo, "a"), world.policy))["slsa_level"] == 1
    trust = trust_of(scan(world.ref(repo, "b"), world.policy))
    assert trust["signed"] is True and trust["slsa_level"] is None
    mismatches = [r for r in trust["rejected"] if f"in-toto subject does not match {b}" in r]
    assert len(mismatches) == 2, trust["rejected"]


def test_signatures_from_an_untrusted_sigstore_instance(world: World) -> None:
    repo = "ml/rogue"
    digest = world.push_image(repo)
    payload = cs.simple_signing(digest, world.reference(repo))
    rogue = PrivateSigstore(name="rogue")
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "sig",
        [
            # Its own CA and log: nothing in the pinned root knows them.
            cs.keyless_signature(payload, rogue),
            # Its own CA, but logged in the trusted log.
            cs.keyless_signature(payload, rogue, log=world.instance),
        ],
    )
    cs.push_referrer(
        world.client,
        repo,
        world.descriptor(repo, digest),
        rogue.sign_dsse(cs.cosign_sign_statement(digest)),
    )
    trust = trust_of(scan(world.ref(repo), world.policy))
    assert trust["signed"] is False and len(trust["rejected"]) == 3
    reasons = rejected(trust)
    assert "log entry is from a transparency log that no trusted root knows" in reasons
    assert "does not chain to trusted root acme-private" in reasons
    assert "log entry is from a transparency log that acme-private does not know" in reasons
    assert_unsigned(world, world.ref(repo), "no trusted root knows")


def test_expired_trusted_root(world: World) -> None:
    repo = "ml/expired-root"
    digest = world.push_image(repo)
    payload = cs.simple_signing(digest, world.reference(repo))
    cs.push_legacy(
        world.client, repo, digest, "sig", [cs.keyless_signature(payload, world.instance)]
    )
    cs.push_referrer(
        world.client,
        repo,
        world.descriptor(repo, digest),
        world.instance.sign_dsse(cs.cosign_sign_statement(digest)),
    )
    fine = trust_of(scan(world.ref(repo), world.policy))
    assert fine["signed"] is True and fine["rejected"] == []
    # The root's CA window closed before the signing time.
    trust = trust_of(scan(world.ref(repo), world.expired_ca))
    assert trust["signed"] is False and len(trust["rejected"]) == 2
    assert all(
        "is outside the validity window that trusted root acme-private gives the issuing "
        "certificate authority" in r
        for r in trust["rejected"]
    ), trust["rejected"]
    # The log key's window closed before the entry was integrated.
    trust = trust_of(scan(world.ref(repo), world.expired_log))
    assert trust["signed"] is False and len(trust["rejected"]) == 2
    assert all(
        "log entry time 2025-06-01T12:00:00Z is outside the validity of log key" in r
        for r in trust["rejected"]
    ), trust["rejected"]
    assert_unsigned(world, world.ref(repo), "outside the validity of", world.expired_log)


def test_repository_outside_the_signers_scope(world: World) -> None:
    repo = "other/app"
    digest = world.push_image(repo)
    payload = cs.simple_signing(digest, world.reference(repo))
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "sig",
        [cs.key_signature(payload, world.release, world.instance)],
    )
    assert_unsigned(
        world, world.ref(repo), f"no trusted signer may vouch for images of {world.host}/other/app"
    )


def test_builder_not_allowed_and_source_not_expected(world: World) -> None:
    repo = "ml/bad-builder"
    digest = world.push_image(repo)
    subject = world.descriptor(repo, digest)
    cs.push_referrer(
        world.client, repo, subject, world.instance.sign_dsse(cs.cosign_sign_statement(digest))
    )
    for builder, source in (
        ("https://builder.evil.test/build@v1", SOURCE),
        (BUILDER, "https://git.example.test/evil/ml"),
    ):
        bundle = world.instance.sign_dsse(cs.slsa_provenance(digest, builder, source))
        cs.push_referrer(world.client, repo, subject, bundle)
    result = scan(world.ref(repo), world.policy, "--fail-on", "unsigned", fmt="cyclonedx")
    assert result.exit_code == 0, result.output  # signed, but no Build level is granted
    props = bom_properties(result)
    assert props["gpuprov:image:signer"][0].startswith("ci (")
    assert "gpuprov:slsa:build-level" not in props and "gpuprov:slsa:builder" not in props
    reasons = " | ".join(props["gpuprov:image:signature-rejected"])
    assert (
        "builder https://builder.evil.test/build@v1 is not an allowed builder of the trust policy"
        in reasons
    )
    assert f"is not the expected {SOURCE}" in reasons


# --- --trust-key and local attestation files ----------------------------------------------------


def test_trust_key_checks_the_log_against_public_good(world: World, _isolated_cache: Path) -> None:
    """`--trust-key` is `cosign verify --key`: the signature's Rekor entry is checked against the
    public-good root. A private instance's root (which logged the signature) written over the
    pinned copy without the TUF metadata that `gpuprov trust refresh-root` verifies is refused,
    never trusted."""
    repo = "ml/trust-key"
    digest = world.push_image(repo)
    payload = cs.simple_signing(digest, world.reference(repo))
    cs.push_legacy(
        world.client,
        repo,
        digest,
        "sig",
        [cs.key_signature(payload, world.release, world.instance)],
    )
    pub = world.base / "release.pub"
    trust = trust_of(scan(world.ref(repo), None, "--trust-key", str(pub)))
    assert trust["signed"] is False
    assert "log entry is from a transparency log that no trusted root knows" in rejected(trust)
    pinned = _isolated_cache / "trust" / "public-good.json"
    pinned.parent.mkdir(parents=True)
    pinned.write_bytes(world.instance.trusted_root_json())
    result = scan(world.ref(repo), None, "--trust-key", str(pub))
    assert result.exit_code != 0 and "cannot be trusted" in result.output, result.output
    other = world.base / "intruder.pub"
    other.write_bytes(keys.public_pem(world.intruder))
    trust = trust_of(scan(world.ref(repo), None, "--trust-key", str(other)))
    assert "signature does not verify with a trusted key (intruder.pub)" in rejected(trust)


@pytest.fixture(scope="module")
def layout(world: World) -> dict[str, Any]:
    """An OCI layout image named registry.acme.test/ml/train:v1 and attestation files for it."""
    directory = world.base / "layout"
    built = write_oci_layout(
        directory,
        _image("layout"),
        "v1",
        annotations={"v1": {"io.containerd.image.name": f"{LAYOUT_NAME}:v1"}},
    )
    digest = built.manifest_digest
    instance = world.instance
    files = {
        "sign": instance.sign_dsse(cs.cosign_sign_statement(digest)),
        "provenance": instance.sign_dsse(cs.slsa_provenance(digest, BUILDER, SOURCE)),
        "key-sign": instance.key_bundle(world.release, payload=cs.cosign_sign_statement(digest)),
        "other-image": instance.sign_dsse(
            cs.slsa_provenance("sha256:" + "ab" * 32, BUILDER, SOURCE)
        ),
        "envelope": cs.envelope(
            cs.slsa_provenance(digest, LOCAL_BUILDER, SOURCE, name=LAYOUT_NAME), world.release
        ),
    }
    paths = {}
    for name, doc in files.items():
        paths[name] = world.base / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    return {"target": f"oci:{directory}:v1", "digest": digest, "files": paths}


def _attest(layout: dict[str, Any], *names: str) -> list[str]:
    return [arg for name in names for arg in ("--attestation", str(layout["files"][name]))]


def test_local_attestations_for_an_oci_layout(world: World, layout: dict[str, Any]) -> None:
    target = layout["target"]
    result = scan(
        target, world.policy, "--fail-on", "unsigned", *_attest(layout, "sign", "provenance")
    )
    assert result.exit_code == 0, result.output
    trust = trust_of(result)
    assert trust["signed"] is True and trust["signer"].startswith("ci (")
    assert (trust["slsa_level"], trust["builder"]) == (3, BUILDER)
    assert trust["rejected"] == []
    key_signed = trust_of(scan(target, world.policy, *_attest(layout, "key-sign")))
    assert key_signed["signed"] is True and key_signed["signer"].startswith("release-key (")
    # Provenance alone is not a signature; provenance about another image is rejected.
    trust = trust_of(scan(target, world.policy, *_attest(layout, "other-image")))
    assert trust["signed"] is False and trust["slsa_level"] is None
    assert f"in-toto subject does not match {layout['digest']}" in rejected(trust)
    failed = scan(target, world.policy, "--fail-on", "unsigned", *_attest(layout, "other-image"))
    assert failed.exit_code == 1 and "in-toto subject does not match" in failed.stderr
    none = trust_of(scan(target, world.policy))
    assert none["rejected"] == ["no signature or attestation found for the image"]


def test_bare_dsse_envelope_needs_the_explicit_unsafe_option(
    world: World, layout: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    target = layout["target"]
    trust = trust_of(scan(target, world.policy, *_attest(layout, "envelope")))
    assert trust["slsa_level"] is None
    assert "unsafe ignore-tlog for this signer" in rejected(trust)
    with caplog.at_level(logging.WARNING, logger="gpuprov.trust"):
        trust = trust_of(scan(target, world.unsafe, *_attest(layout, "envelope")))
    assert (trust["slsa_level"], trust["builder"]) == (1, LOCAL_BUILDER)
    assert "UNSAFE ignore-tlog used for signer release-key" in caplog.text


def test_local_attestations_for_a_multi_platform_image(world: World) -> None:
    """`cosign sign IMAGE:TAG` signs the index: a local bundle about it counts for the platform
    image scanned, is not also rejected for the platform manifest, and the same holds for the
    image as a multi-platform OCI layout."""
    directory = world.base / "multi-layout"
    files, built = oci_layout_files(
        {"v1": [_image("local-amd64"), _image("local-arm64", "arm64")]},
        annotations={"v1": {"io.containerd.image.name": f"{LAYOUT_NAME}-multi:v1"}},
    )
    for name, data in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    children = built["v1"]
    assert isinstance(children, list)
    top = layout_digest(directory, "v1")
    repo = "ml/local-multi"
    for child in children:
        for blob in [*child.layer_blobs, child.config]:
            world.client.push_blob(repo, blob)
        world.client.push_manifest(repo, child.manifest, cs.OCI_MANIFEST)
    index = (directory / "blobs" / "sha256" / top.removeprefix("sha256:")).read_bytes()
    assert world.client.push_manifest(repo, index, cs.OCI_INDEX, "v1") == top
    bundles = {
        "index-sign": world.instance.sign_dsse(cs.cosign_sign_statement(top)),
        "child-provenance": world.instance.sign_dsse(
            cs.slsa_provenance(children[1].manifest_digest, BUILDER, SOURCE)
        ),
        "elsewhere": world.instance.sign_dsse(cs.cosign_sign_statement("sha256:" + "cd" * 32)),
    }
    args = ["--platform", "linux/arm64"]
    for name, doc in bundles.items():
        path = world.base / f"multi-{name}.json"
        path.write_text(json.dumps(doc))
        args += ["--attestation", str(path)]
    for target in (world.ref(repo), f"oci:{directory}:v1"):
        result = scan(target, world.policy, *args)
        assert json.loads(result.stdout)["asset"]["digest"] == children[1].manifest_digest
        trust = trust_of(result)
        assert trust["signed"] is True and trust["slsa_level"] == 3, (target, trust)
        (reason,) = trust["rejected"]  # only the bundle about neither digest, reported once
        assert "in-toto subject does not match" in reason and "cd" * 8 in reason
