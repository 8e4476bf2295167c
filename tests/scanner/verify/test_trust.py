"""Trust policy: YAML schema, fail-closed loading, identities, scopes, roots, unsafe options."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from scanner.errors import VerifyError
from scanner.verify.errors import Rejected
from scanner.verify.keys import TrustedKey
from scanner.verify.trust import IdentityRule, Scope, TrustPolicy, UnsafeOption
from scanner.verify.trust_file import load_trust_policy
from scanner.verify.trusted_roots import (
    PUBLIC_GOOD,
    CertificateAuthority,
    LogKey,
    SigstoreRoot,
    refresh_public_good,
)
from tests.fixtures import keys
from tests.fixtures.sigstore_private import PrivateSigstore
from tests.fixtures.tuf_repo import TufRepo


def _write_policy(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "trust.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def setup(tmp_path: Path, instance: PrivateSigstore) -> Path:
    keys.write_keypair(tmp_path / "keys", "nvidia", keys.shared("ecdsa"))
    (tmp_path / "roots").mkdir()
    (tmp_path / "roots" / "private.json").write_bytes(instance.trusted_root_json())
    return tmp_path


def test_full_policy_loads(setup: Path, caplog: pytest.LogCaptureFixture) -> None:
    doc = {
        "version": 1,
        "roots": [PUBLIC_GOOD, {"path": "roots/private.json", "name": "acme"}],
        "signers": [
            {"name": "nvidia", "key": "keys/nvidia.pub", "families": ["cudnn", "cudart"]},
            {
                "name": "ngc",
                "key_pem": keys.public_pem(keys.shared("ed25519")).decode(),
                "images": ["nvcr.io/nvidia/*"],
                "unsafe": ["ignore-tlog"],
            },
            {
                "name": "ci",
                "issuer": "https://token.actions.githubusercontent.com",
                "subject_regex": r"https://github\.com/acme/[^/]+/\.github/workflows/.*",
                "images": ["registry.acme.test/ml/*"],
            },
        ],
        "slsa": {
            "builders": [{"id": "https://builder.test/b@v1", "level": 3, "signers": ["ci"]}],
            "expect": [
                {"images": ["registry.acme.test/ml/*"], "source_repo": "https://git.test/r"}
            ],
        },
    }
    with caplog.at_level(logging.WARNING, logger="gpuprov.trust"):
        policy = load_trust_policy(_write_policy(setup, doc))
    assert "UNSAFE ignore-tlog" in caplog.text
    assert [r.name for r in policy.roots] == [PUBLIC_GOOD, "acme"]
    nvidia, ngc, ci = policy.signers
    assert nvidia.scope.allows_family("cuDNN") and not nvidia.scope.allows_family("nccl")
    assert not nvidia.scope.allows_image("nvcr.io/nvidia/cuda")
    assert ngc.key is not None and ngc.key.algorithm.value == "ed25519"
    assert policy.for_image("nvcr.io/nvidia/pytorch") == (ngc,)
    assert policy.for_image("registry.acme.test/ml/train") == (ci,)
    assert policy.for_image("docker.io/library/ubuntu") == ()
    assert policy.builders[0].level == 3
    with caplog.at_level(logging.WARNING, logger="gpuprov.trust"):
        assert ngc.allows_unsafe(UnsafeOption.IGNORE_TLOG, "test use")
        assert not nvidia.allows_unsafe(UnsafeOption.IGNORE_TLOG, "test use")
    assert "UNSAFE ignore-tlog used for signer ngc: test use" in caplog.text


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"signers": []}, "trusts no signer"),
        ({}, "trusts no signer"),
        ({"signers": [{"name": "a", "key": "keys/nvidia.pub"}]}, "may vouch for nothing"),
        ({"signers": [{"key": "keys/nvidia.pub", "families": ["*"]}]}, "needs a name"),
        (
            {"signers": [{"name": "a", "families": ["*"]}]},
            "exactly one of a key or an identity",
        ),
        (
            {
                "signers": [
                    {
                        "name": "a",
                        "key": "keys/nvidia.pub",
                        "issuer": "i",
                        "subject": "s",
                        "families": ["*"],
                    }
                ]
            },
            "exactly one of a key or an identity",
        ),
        ({"signers": [{"name": "a", "issuer": "i", "families": ["*"]}]}, "exactly one of subject"),
        (
            {"signers": [{"name": "a", "issuer": "i", "subject_regex": "(", "families": ["*"]}]},
            "bad subject_regex",
        ),
        ({"signers": [{"name": "a", "key": "keys/missing.pub", "families": ["*"]}]}, "cannot read"),
        ({"signers": [{"name": "a", "key_pem": "garbage", "families": ["*"]}]}, "not a PEM"),
        (
            {
                "signers": [
                    {
                        "name": "a",
                        "key": "keys/nvidia.pub",
                        "families": ["*"],
                        "unsafe": ["skip-all"],
                    }
                ]
            },
            "skip-all",
        ),
        ({"signers": [], "extra": 1}, "unknown key"),
        ({"version": 2, "signers": []}, "unsupported policy version"),
        (
            {
                "roots": [{"path": "roots/missing.json"}],
                "signers": [{"name": "a", "key": "keys/nvidia.pub", "families": ["*"]}],
            },
            "cannot read trusted root",
        ),
        (
            {
                "signers": [{"name": "a", "key": "keys/nvidia.pub", "families": ["*"]}],
                "slsa": {"builders": [{"id": "b", "level": 5}]},
            },
            "level must be 0..3",
        ),
        (
            {
                "signers": [{"name": "a", "key": "keys/nvidia.pub", "families": ["*"]}],
                "slsa": {"builders": [{"id": "b", "level": 3}]},
            },
            "name the signers",
        ),
        (
            {
                "signers": [{"name": "a", "key": "keys/nvidia.pub", "families": ["*"]}],
                "slsa": {"builders": [{"id": "b", "level": 1, "signers": ["zz"]}]},
            },
            "unknown signer",
        ),
        (
            {
                "signers": [
                    {"name": "a", "key": "keys/nvidia.pub", "families": ["*"]},
                    {"name": "a", "key": "keys/nvidia.pub", "families": ["*"]},
                ]
            },
            "repeats a signer name",
        ),
    ],
)
def test_bad_policies_fail_closed(setup: Path, doc: object, message: str) -> None:
    with pytest.raises(VerifyError, match=message):
        load_trust_policy(_write_policy(setup, doc))


def test_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("signers: [unclosed")
    with pytest.raises(VerifyError, match="not valid YAML"):
        load_trust_policy(path)


def test_identity_rules_exact_and_anchored() -> None:
    exact = IdentityRule("https://issuer", subject="https://git.test/acme/repo")
    assert exact.matches("https://issuer", ["https://git.test/acme/repo"])
    assert not exact.matches("https://other-issuer", ["https://git.test/acme/repo"])
    assert not exact.matches("https://issuer", ["https://git.test/acme/repo2"])
    regex = IdentityRule("https://issuer", subject_regex=r"https://git\.test/acme/.*")
    assert regex.matches("https://issuer", ["https://git.test/acme/x"])
    # Anchored at both ends: a search would accept these.
    assert not regex.matches("https://issuer", ["https://evil.test/?u=https://git.test/acme/x"])
    loose = IdentityRule("https://issuer", subject_regex="acme")
    assert not loose.matches("https://issuer", ["https://git.test/acme/x"])
    # Anchored at the end too: `re.match` would let a longer subject through.
    repo = IdentityRule("https://issuer", subject_regex=r"https://github\.com/org/repo")
    assert repo.matches("https://issuer", ["https://github.com/org/repo"])
    assert not repo.matches("https://issuer", ["https://github.com/org/repo-evil"])
    assert not exact.matches("https://issuer", ["https://git.test/acme/repo-evil"])
    assert not regex.matches("https://other-issuer", ["https://git.test/acme/x"])


def test_key_types() -> None:
    for kind in keys.KINDS:
        assert TrustedKey.from_pem(keys.public_pem(keys.shared(kind))).algorithm
    p384 = ec.generate_private_key(ec.SECP384R1())
    assert TrustedKey.from_pem(keys.public_pem(p384)).algorithm.value == "ecdsa-p384"
    for bad in (
        ec.generate_private_key(ec.SECP521R1()),
        rsa.generate_private_key(public_exponent=65537, key_size=1024),
        dsa.generate_private_key(key_size=2048),
    ):
        pem = bad.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        with pytest.raises(VerifyError):
            TrustedKey.from_pem(pem)


def test_for_key_policy(tmp_path: Path) -> None:
    _, pub = keys.write_keypair(tmp_path, "k", keys.shared("ecdsa"))
    policy = TrustPolicy.for_key(pub)
    assert policy.signers[0].scope.allows_family("anything")
    assert policy.signers[0].scope.allows_image("any/repo")


def test_shipped_root_is_the_sigstore_production_root() -> None:
    from importlib import resources

    root = SigstoreRoot.public_good()
    assert root.name == PUBLIC_GOOD
    assert any("rekor.sigstore.dev" in t.url for t in root.tlogs)
    assert root.authorities and root.ctlogs
    embedded = resources.files("sigstore").joinpath(
        "_store/https%3A%2F%2Ftuf-repo-cdn.sigstore.dev/trusted_root.json"
    )
    # Informative cross-check: same CAs as the copy sigstore-python embeds.
    other = SigstoreRoot.from_bytes(embedded.read_bytes(), "embedded")
    assert {a.certificates[0].fingerprint(hashes.SHA256()) for a in root.authorities} <= {
        a.certificates[0].fingerprint(hashes.SHA256()) for a in other.authorities
    }


def test_refresh_root_goes_to_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: PrivateSigstore
) -> None:
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path / "cache"))
    repo = TufRepo()
    meta = repo.publish(tmp_path / "meta", instance.trusted_root_json())
    target, _ = refresh_public_good(meta, pinned_tuf_root=repo.pinned)
    assert target.is_relative_to(tmp_path / "cache")
    root = SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)
    assert root.tlogs[0].key_id == instance.log_id
    broken = json.dumps({"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"})
    meta = repo.publish(tmp_path / "broken", broken.encode(), version=2)
    with pytest.raises(VerifyError, match="no transparency log"):
        refresh_public_good(meta, pinned_tuf_root=repo.pinned)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(mediaType="text/plain"),
        lambda d: d["tlogs"][0]["publicKey"]["validFor"].pop("start"),
        lambda d: d["tlogs"][0]["publicKey"].update(rawBytes="AAAA"),
        lambda d: d["certificateAuthorities"][0]["certChain"]["certificates"][0].update(
            rawBytes="AAAA"
        ),
        # members of the wrong JSON type (these used to escape as AttributeError)
        lambda d: d["tlogs"][0]["publicKey"].update(validFor=[]),
        lambda d: d["tlogs"][0]["publicKey"]["validFor"].update(start=5),
        lambda d: d["certificateAuthorities"][0].update(certChain=[]),
    ],
)
def test_invalid_roots_rejected(
    instance: PrivateSigstore, mutate: Callable[[dict[str, Any]], object]
) -> None:
    doc = instance.trusted_root()
    mutate(doc)
    with pytest.raises(VerifyError, match="invalid|no transparency log"):
        SigstoreRoot.from_bytes(json.dumps(doc).encode(), "broken")


# -- the primitives every signature check relies on -------------------------------------------


def test_scope() -> None:
    scope = Scope(("cudnn", "NCCL"), ("nvcr.io/nvidia/*",))
    assert scope.allows_family("cuDNN") and scope.allows_family("nccl")
    assert not scope.allows_family("cublas") and not scope.allows_family(None)
    assert Scope(("*",)).allows_family(None) and Scope(("*",)).allows_family("x")
    assert not Scope().allows_family("cudnn")
    assert scope.allows_image("nvcr.io/nvidia/pytorch")
    assert not scope.allows_image("NVCR.IO/nvidia/pytorch")  # repositories are case-sensitive
    assert not scope.allows_image("nvcr.io/nvidia")
    assert not Scope(("*",)).allows_image("any/repo")


def test_identity_rule_construction() -> None:
    with pytest.raises(VerifyError, match="exactly one of subject, subject_regex"):
        IdentityRule("https://issuer")
    with pytest.raises(VerifyError, match="exactly one of subject, subject_regex"):
        IdentityRule("https://issuer", "a", "b")
    with pytest.raises(VerifyError, match="needs an OIDC issuer"):
        IdentityRule("", "a")
    with pytest.raises(VerifyError, match="bad subject_regex"):
        IdentityRule("https://issuer", subject_regex="(")
    rule = IdentityRule("https://issuer", subject_regex="a.c")
    assert rule.matches("https://issuer", ["x", "abc"]) and not rule.matches("https://issuer", [])
    assert rule.describe() == "/a.c/ (issuer https://issuer)"
    assert IdentityRule("i", "s").describe() == "s (issuer i)"
    assert not IdentityRule("i", "s").matches(None, ["s"])


@pytest.mark.parametrize("kind", [*keys.KINDS, "p384"])
def test_trusted_key_signatures(kind: str) -> None:
    private = ec.generate_private_key(ec.SECP384R1()) if kind == "p384" else keys.shared(kind)
    key = TrustedKey.from_pem(keys.public_pem(private))
    data = b"signed bytes"
    digest = hashlib.sha256(data).digest()
    if kind == "ed25519":
        signature = private.sign(data)
    elif kind == "rsa":
        signature = private.sign(data, padding.PKCS1v15(), hashes.SHA256())
    else:
        algorithm = hashes.SHA384() if kind == "p384" else hashes.SHA256()
        signature = private.sign(data, ec.ECDSA(algorithm))
    assert key.verify(signature, data)
    assert not key.verify(signature, data + b"!")
    assert not key.verify(b"\x00" * len(signature), data)
    if kind == "ed25519":
        with pytest.raises(Rejected, match="give the file, not its digest"):
            key.verify_digest(signature, digest)
    elif kind != "p384":  # digests are SHA-256; P-384 keys sign SHA-384
        assert key.verify_digest(signature, digest)
        assert not key.verify_digest(signature, hashlib.sha256(b"other").digest())
    der = key.spki_der
    assert key.key_id == hashlib.sha256(der).hexdigest()
    assert TrustedKey.from_der(der) == key
    assert key.describe() == f"{key.algorithm.value} key sha256:{key.key_id[:16]}"


def test_rsa_pss_signatures_verify() -> None:
    private = keys.shared("rsa")
    key = TrustedKey.from_pem(keys.public_pem(private))
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.MAX_LENGTH)
    assert key.verify(private.sign(b"data", pss, hashes.SHA256()), b"data")
    digest = hashlib.sha256(b"data").digest()
    signature = private.sign(digest, padding.PKCS1v15(), Prehashed(hashes.SHA256()))
    assert key.verify_digest(signature, digest)
    assert not key.verify(private.sign(b"data", pss, hashes.SHA256()), b"other")


def test_trusted_key_from_a_certificate_and_garbage() -> None:
    private = keys.shared("ecdsa")
    _key, cert = PrivateSigstore(name="certkey").issue("a@b.test", email=True)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    assert TrustedKey.from_pem(pem).spki_der == cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for garbage in (b"not a key", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"):
        with pytest.raises(VerifyError, match="not a PEM public key"):
            TrustedKey.from_pem(garbage)
    with pytest.raises(VerifyError, match="not a DER public key"):
        TrustedKey.from_der(b"\x30\x00")
    assert TrustedKey.from_pem(keys.public_pem(private)).algorithm.value == "ecdsa-p256"


def test_validity_windows_are_closed_intervals() -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    end = datetime(2025, 12, 31, tzinfo=UTC)
    key = TrustedKey.from_pem(keys.public_pem(keys.shared("ecdsa")))
    log = LogKey(b"id", key, start, end, "u")
    ca = CertificateAuthority((), start, end, "u")
    for window in (log, ca):
        assert window.valid_at(start) and window.valid_at(end)
        assert not window.valid_at(start - timedelta(microseconds=1))
        assert not window.valid_at(end + timedelta(microseconds=1))
    assert LogKey(b"id", key, None, None, "u").valid_at(start)
    assert CertificateAuthority((), None, end, "u").valid_at(start - timedelta(days=999))
    assert not CertificateAuthority((), start, None, "u").valid_at(start - timedelta(days=1))


def test_rsa_key_sizes() -> None:
    def pem(bits: int) -> bytes:
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        return key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    assert TrustedKey.from_pem(pem(3072)).algorithm.value == "rsa"
    with pytest.raises(VerifyError, match="RSA key of 2047 bits is too small"):
        TrustedKey.from_pem(pem(2047))


def test_issuer_is_compared_by_value() -> None:
    """Issuers come out of certificates as new strings: equal text is the same issuer."""
    rule = IdentityRule("https://issuer.test", "s")
    issuer = "".join(["https://", "issuer.test"])
    assert issuer is not rule.issuer and rule.matches(issuer, ["s"])
