"""Provenance commands of the CLI: `gpuprov verify`, `gpuprov catalog ...`, `gpuprov trust ...`.

`register(app)` adds them to the main Typer app. Exit codes follow the CLI's: 0 verified or done,
1 rejected (the reason on stderr), 2 usage error or unreadable input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scanner.cli_common import PROG, StrictCommand, fail, out, say, typer_app, write_output
from scanner.errors import ScannerError, VerifyError
from scanner.refcatalog.model import Catalog, RefCatalogError
from scanner.verify.errors import Rejected
from scanner.verify.keys import TrustedKey
from scanner.verify.trust import TrustPolicy, with_roots
from scanner.verify.trust_file import load_trust_policy
from scanner.verify.trusted_roots import SigstoreRoot
from scanner.wording import counted

if TYPE_CHECKING:
    from scanner.policy.vsa import VsaExpectations

#: the help panel of the options that pin a gate's VSA
_VSA = "VSA checks"

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2

Output = Annotated[
    Path | None, typer.Option("-o", "--output", help="Write to FILE (default: stdout).")
]

#: Files up to this size are verified from their bytes; larger ones by streamed digest.
_IN_MEMORY = 64 << 20


def _rejected(message: str) -> typer.Exit:
    """A verification that ran and said no: exit 1, the reason on stderr."""
    say(f"{PROG}: rejected: {message}")
    return typer.Exit(EXIT_REJECTED)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise fail(f"cannot read {path}: {e.strerror}", EXIT_USAGE) from None


def _policy(trust: Path | None, trust_key: Path | None) -> TrustPolicy:
    if (trust is None) == (trust_key is None):
        raise fail("give exactly one of --trust POLICY.yaml, --trust-key PUB.pem", EXIT_USAGE)
    try:
        if trust is not None:
            return load_trust_policy(trust)
        assert trust_key is not None
        return TrustPolicy.for_key(trust_key)
    except VerifyError as e:
        raise fail(str(e), EXIT_USAGE) from None


def verify(
    artifact: Annotated[str, typer.Argument(help="A file, or sha256:HEX for digest-only checks.")],
    bundle: Annotated[
        Path, typer.Option("--bundle", help="Sigstore bundle (or, with --key, a DSSE envelope).")
    ],
    certificate_identity: Annotated[
        str | None, typer.Option("--certificate-identity", help="Expected certificate subject.")
    ] = None,
    certificate_identity_regexp: Annotated[
        str | None,
        typer.Option("--certificate-identity-regexp", help="Subject as a full-match regex."),
    ] = None,
    certificate_oidc_issuer: Annotated[
        str | None, typer.Option("--certificate-oidc-issuer", help="Expected OIDC issuer.")
    ] = None,
    key: Annotated[Path | None, typer.Option("--key", help="Trusted public key (PEM).")] = None,
    trusted_root: Annotated[
        Path | None,
        typer.Option("--trusted-root", help="Sigstore trusted_root.json (default: public-good)."),
    ] = None,
    policy_name: Annotated[
        str | None,
        typer.Option(
            "--policy-name", help="VSA: the gate policy it must name.", rich_help_panel=_VSA
        ),
    ] = None,
    policy_digest: Annotated[
        str | None,
        typer.Option(
            "--policy-digest",
            help="VSA: the policy document's digest (sha256:HEX or HEX).",
            rich_help_panel=_VSA,
        ),
    ] = None,
    verifier_id: Annotated[
        str | None,
        typer.Option(
            "--verifier-id", help="VSA: the verifier.id it must carry.", rich_help_panel=_VSA
        ),
    ] = None,
    max_age: Annotated[
        str | None,
        typer.Option(
            "--max-age",
            help="VSA: the oldest timeVerified accepted (90s, 15m, 12h, 30d, 2w).",
            rich_help_panel=_VSA,
        ),
    ] = None,
    verified_level: Annotated[
        list[str] | None,
        typer.Option(
            "--verified-level",
            help="VSA: a level it must state (repeatable, all required; SLSA_BUILD_LEVEL_n is "
            "met by n or higher).",
            rich_help_panel=_VSA,
        ),
    ] = None,
) -> None:
    """Verify ARTIFACT against a Sigstore bundle, offline (like `cosign verify-blob`). A gate's
    VSA (a DSSE envelope, with --key) must say PASSED and meet every --policy-name,
    --policy-digest, --verifier-id, --max-age and --verified-level given."""
    from scanner.verify.sigstore_bundles import ArtifactDigest, verify_bundle

    expect = _vsa_expectations(policy_name, policy_digest, verifier_id, max_age, verified_level)

    keyless = certificate_identity is not None or certificate_identity_regexp is not None
    if keyless == (key is not None):
        raise fail(
            "give --key PUB.pem, or --certificate-identity (or -regexp) with "
            "--certificate-oidc-issuer",
            EXIT_USAGE,
        )
    if keyless and not certificate_oidc_issuer:
        raise fail("--certificate-oidc-issuer is required with an identity", EXIT_USAGE)
    if certificate_identity is not None and certificate_identity_regexp is not None:
        raise fail("give only one of --certificate-identity and -regexp", EXIT_USAGE)
    raw_bundle = _read(bundle)
    trusted_key: TrustedKey | None
    try:
        roots = (
            [SigstoreRoot.from_file(trusted_root)]
            if trusted_root is not None
            else [SigstoreRoot.public_good()]
        )
        if key is not None:
            policy = with_roots(TrustPolicy.for_key(key), roots)
            trusted_key = policy.signers[0].key
        else:
            assert certificate_oidc_issuer is not None
            trusted_key = None
            policy = TrustPolicy.for_identity(
                certificate_oidc_issuer,
                roots,
                subject=certificate_identity,
                subject_regex=certificate_identity_regexp,
            )
    except VerifyError as e:
        raise fail(str(e), EXIT_USAGE) from None
    subject: bytes | ArtifactDigest
    if artifact.startswith("sha256:"):
        try:
            subject = ArtifactDigest.from_hex(artifact)
        except Rejected as e:
            raise fail(str(e), EXIT_USAGE) from None
    else:
        path = Path(artifact)
        if not path.is_file():
            raise fail(f"{artifact} is not a file (or give sha256:HEX)", EXIT_USAGE)
        # Ed25519 signs the whole message: such keys need the bytes, however large.
        needs_bytes = trusted_key is not None and trusted_key.algorithm.value == "ed25519"
        if path.stat().st_size <= _IN_MEMORY or needs_bytes:
            subject = _read(path)
        else:
            subject = ArtifactDigest.of_file(path)
    try:
        if b'"payloadType"' in raw_bundle and b'"verificationMaterial"' not in raw_bundle:
            identity = _verify_plain_envelope(raw_bundle, policy, subject, expect)
            where = "DSSE envelope, no transparency log"
        elif expect is not None:
            # the VSA options pin a gate's VSA; a bundle verified without them would pass
            raise _rejected(
                "the VSA options (--policy-name, --policy-digest, --verifier-id, --max-age, "
                "--verified-level) check a gate's VSA, a DSSE envelope verified with --key; "
                f"{bundle} is a Sigstore bundle"
            )
        else:
            result = verify_bundle(raw_bundle, policy, artifact=subject)
            identity = result.identity
            when = f", logged {result.signed_at:%Y-%m-%dT%H:%M:%SZ}" if result.signed_at else ""
            where = f"trusted root {result.root}{when}"
    except Rejected as e:
        raise _rejected(str(e)) from None
    except ScannerError as e:
        raise _rejected(str(e)) from None
    out(f"OK: {artifact} signed by {identity} ({where})")


_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def _vsa_expectations(
    policy_name: str | None,
    policy_digest: str | None,
    verifier_id: str | None,
    max_age: str | None,
    levels: list[str] | None,
) -> VsaExpectations | None:
    """The VSA pins given on the command line (None: none given)."""
    from scanner.policy.vsa import VsaExpectations, parse_max_age

    if all(v is None for v in (policy_name, policy_digest, verifier_id, max_age)) and not levels:
        return None
    for option, value in (
        ("--policy-name", policy_name),
        ("--verifier-id", verifier_id),
        *(("--verified-level", v) for v in levels or ()),
    ):
        if value is not None and not value.strip():
            raise fail(f"{option} is empty", EXIT_USAGE)
    digest = None
    if policy_digest is not None:
        digest = policy_digest.removeprefix("sha256:")
        if not _HEX64.fullmatch(digest):
            raise fail(
                f"--policy-digest {policy_digest[:80]!r} is not sha256:HEX (64 digits)", EXIT_USAGE
            )
    try:
        age = parse_max_age(max_age) if max_age is not None else None
    except ValueError as e:
        raise fail(f"--max-age: {e}", EXIT_USAGE) from None
    return VsaExpectations(
        policy_name=policy_name,
        policy_sha256=digest.lower() if digest else None,
        verifier_id=verifier_id,
        max_age=age,
        levels=tuple(levels or ()),
    )


def _verify_plain_envelope(
    raw: bytes, policy: TrustPolicy, subject: object, expect: VsaExpectations | None
) -> str:
    """A DSSE envelope signed with --key: its in-toto statement must name the artifact."""
    import hashlib

    from scanner.policy.vsa import VSA_PREDICATE, check_vsa
    from scanner.verify.intoto import Statement
    from scanner.verify.sigstore_bundles import ArtifactDigest, verify_envelope_with_keys

    signer, envelope = verify_envelope_with_keys(raw, policy)
    if isinstance(subject, ArtifactDigest):
        digest = subject.hex
    else:
        assert isinstance(subject, bytes)
        digest = hashlib.sha256(subject).hexdigest()
    statement = Statement.from_bytes(envelope.payload)
    statement.require_subject(digest)
    if statement.predicate_type == VSA_PREDICATE:
        # a gate's VSA: signed and about this artifact is not enough, it must say PASSED and
        # meet what the caller pinned
        return f"{signer.describe()}; {check_vsa(statement, expect)}"
    if expect is not None:
        raise Rejected(
            f"not a VSA (predicateType {statement.predicate_type!r}): the VSA options were given"
        )
    return signer.describe()


catalog_app = typer_app(
    help="Build, sign and verify reference catalogs of known-good GPU library files."
)


@catalog_app.command("from-wheel", cls=StrictCommand)
def catalog_from_wheel(
    wheels: Annotated[list[Path], typer.Argument(help="NVIDIA wheels (.whl).")],
    output: Output = None,
    name: Annotated[str | None, typer.Option("--name", help="Catalog name.")] = None,
) -> None:
    """Catalog the shared libraries of wheels (RECORD digests checked against the bytes)."""
    from scanner.refcatalog.wheel import catalog_from_wheels

    _emit(lambda: catalog_from_wheels(wheels, name), output)


@catalog_app.command("from-redist", cls=StrictCommand)
def catalog_from_redist(
    manifest: Annotated[Path, typer.Argument(help="NVIDIA redistrib_X.Y.Z.json.")],
    archives: Annotated[list[Path], typer.Argument(help="Archives listed in the manifest.")],
    output: Output = None,
    name: Annotated[str | None, typer.Option("--name", help="Catalog name.")] = None,
) -> None:
    """Catalog the libraries inside redistrib archives (archive SHA-256 checked first)."""
    from scanner.refcatalog.redist import catalog_from_redist as build

    _emit(lambda: build(manifest, archives, name), output)


@catalog_app.command("from-scan", cls=StrictCommand)
def catalog_from_scan(
    report: Annotated[Path, typer.Argument(help="A gpuprov CycloneDX report of a golden asset.")],
    output: Output = None,
    name: Annotated[str | None, typer.Option("--name", help="Catalog name.")] = None,
    include_modified: Annotated[
        bool, typer.Option("--include-modified", help="Also list files whose integrity failed.")
    ] = False,
) -> None:
    """Catalog the GPU library files of a trusted golden scan."""
    from scanner.refcatalog.scan import catalog_from_scan as build

    _emit(lambda: build(report, name, include_modified=include_modified), output)


def _emit(build: Callable[[], Catalog], output: Path | None) -> None:
    try:
        catalog: Catalog = build()
    except RefCatalogError as e:
        raise fail(str(e), EXIT_REJECTED) from None
    except ScannerError as e:
        raise fail(str(e), EXIT_USAGE) from None
    write_output(catalog.to_bytes(), output)
    say(f"catalog {catalog.name!r}: {counted(len(catalog.entries), 'file')}")


@catalog_app.command("sign", cls=StrictCommand)
def catalog_sign(
    statement: Annotated[Path, typer.Argument(help="Unsigned catalog (from catalog from-*).")],
    key: Annotated[Path, typer.Option("--key", help="PEM private key ($GPUPROV_KEY_PASSWORD).")],
    output: Output = None,
    keyid: Annotated[str, typer.Option("--keyid", help="DSSE keyid hint.")] = "",
) -> None:
    """Sign a catalog with a key: writes a DSSE envelope."""
    from scanner.verify.catalogs import load_private_key, sign_catalog

    raw = _read(statement)
    try:
        envelope = sign_catalog(raw, load_private_key(key), keyid)
    except RefCatalogError as e:
        raise fail(str(e), EXIT_USAGE) from None
    write_output(envelope.to_json().encode(), output)


@catalog_app.command("verify", cls=StrictCommand)
def catalog_verify(
    catalogs: Annotated[list[Path], typer.Argument(help="Signed catalogs.")],
    trust: Annotated[Path | None, typer.Option("--trust", help="Trust policy (YAML).")] = None,
    trust_key: Annotated[
        Path | None, typer.Option("--trust-key", help="The one trusted key (PEM).")
    ] = None,
) -> None:
    """Verify signed catalogs against a trust policy; exit 1 if any is rejected."""
    from scanner.verify.catalogs import load_catalog_file

    policy = _policy(trust, trust_key)
    failed = False
    for path in catalogs:
        try:
            verified = load_catalog_file(path, policy)
        except Rejected as e:
            say(f"{PROG}: rejected: {path}: {e}")
            failed = True
            continue
        except VerifyError as e:
            raise fail(str(e), EXIT_USAGE) from None
        scope = (
            f", {verified.out_of_scope} outside the signer's scope" if verified.out_of_scope else ""
        )
        out(
            f"OK: {path}: catalog {verified.name!r} signed by {verified.signer}: "
            f"{counted(len(verified.entries), 'file')}{scope}"
        )
    if failed:
        raise typer.Exit(EXIT_REJECTED)


trust_app = typer_app(help="Trust policies and pinned Sigstore roots.")


@trust_app.command("refresh-root", cls=StrictCommand)
def trust_refresh_root(
    metadata_dir: Annotated[
        Path,
        typer.Argument(
            help="A copy of Sigstore's TUF repository metadata (tuf-repo-cdn.sigstore.dev): "
            "N.root.json, timestamp.json, snapshot, targets and targets/ (docs/provenance.md)."
        ),
    ],
) -> None:
    """Pin a newer public-good trusted_root.json, accepted only through TUF verification.

    The trusted_root.json target is verified offline from the TUF root shipped with gpuprov
    (signature thresholds, root rotation, versions, expiry, hashes) and pinned with its
    metadata in the cache directory; anything that does not verify is refused (exit 1).
    """
    from scanner.verify.trusted_roots import refresh_public_good
    from scanner.verify.tuf_refresh import TufRejected

    try:
        target, root = refresh_public_good(metadata_dir)
    except TufRejected as e:
        raise _rejected(str(e)) from None
    except VerifyError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except OSError as e:
        raise fail(f"cannot write the pinned root: {e.strerror}", EXIT_USAGE) from None
    out(
        f"pinned {target}: {len(root.authorities)} CAs, {len(root.tlogs)} transparency logs, "
        f"{len(root.ctlogs)} CT logs"
    )


@trust_app.command("check", cls=StrictCommand)
def trust_check(
    policy_file: Annotated[Path, typer.Argument(help="Trust policy (YAML).")],
) -> None:
    """Load a trust policy and list what it trusts (and any unsafe option)."""
    policy = _policy(policy_file, None)
    for signer in policy.signers:
        scope = ", ".join(
            [f"families {','.join(signer.scope.families)}"] * bool(signer.scope.families)
            + [f"images {','.join(signer.scope.images)}"] * bool(signer.scope.images)
        )
        unsafe = f" UNSAFE: {','.join(sorted(signer.unsafe))}" if signer.unsafe else ""
        out(f"signer {signer.describe()}: {scope}{unsafe}")
    for root in policy.roots:
        out(f"root {root.name}")
    for rule in policy.builders:
        out(f"builder {rule.id or '/' + str(rule.id_regex) + '/'}: up to Build L{rule.level}")


def register(app: typer.Typer) -> None:
    """Add `verify`, `catalog` and `trust` to the gpuprov CLI."""
    app.command("verify", cls=StrictCommand)(verify)
    app.add_typer(catalog_app, name="catalog")
    app.add_typer(trust_app, name="trust")
