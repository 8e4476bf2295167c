"""Signed catalogs: DSSE with keys, Sigstore bundles (keyless), signer scope, rejections."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from scanner.model import Sha256
from scanner.refcatalog.model import Catalog, CatalogEntry, CatalogSource, RefCatalogError
from scanner.verify.catalogs import load_catalog, load_private_key, sign_catalog
from scanner.verify.dsse import Envelope, sign_envelope
from scanner.verify.errors import Rejected
from scanner.verify.keys import TrustedKey
from scanner.verify.provenance import Provenance, provenance_verdict
from scanner.verify.trust import IdentityRule, Scope, Signer, TrustPolicy
from scanner.verify.trusted_roots import SigstoreRoot
from tests.fixtures import keys
from tests.fixtures.sigstore_private import ISSUER, SUBJECT, PrivateSigstore

GRAPH = Sha256(hashlib.sha256(b"graph").hexdigest())
NCCL = Sha256(hashlib.sha256(b"nccl").hexdigest())


def _catalog() -> Catalog:
    return Catalog(
        "test catalog",
        (
            CatalogEntry("lib/libcudnn_graph.so.9.1.0", GRAPH, "cudnn", "cudnn_graph", "9.1.0.70"),
            CatalogEntry("lib/libnccl.so.2.21.5", NCCL, "nccl", "nccl", "2.21.5"),
        ),
        (CatalogSource("redist", "a.tar.xz", "00" * 32),),
    )


def _key_policy(families: tuple[str, ...] = ("*",), kind: str = "ecdsa") -> TrustPolicy:
    key = TrustedKey.from_pem(keys.public_pem(keys.shared(kind)))
    return TrustPolicy((Signer("nvidia", Scope(families), key=key),), ())


@pytest.mark.parametrize("kind", keys.KINDS)
def test_key_signed_catalog(kind: str) -> None:
    envelope = sign_catalog(_catalog().to_bytes(), keys.shared(kind))
    verified = load_catalog(envelope.to_json().encode(), _key_policy(kind=kind), "c.json")
    assert verified.name == "test catalog" and len(verified.entries) == 2
    assert verified.signer.startswith("nvidia (")
    verdict = provenance_verdict("/x/libnccl.so.2", "nccl", "2.21.5", NCCL, [verified])
    assert verdict.provenance is Provenance.VERIFIED and verdict.signer == verified.signer


def test_scope_drops_other_families() -> None:
    envelope = sign_catalog(_catalog().to_bytes(), keys.shared("ecdsa"))
    verified = load_catalog(envelope.to_json().encode(), _key_policy(("cudnn",)), "c")
    assert [e.family for e in verified.entries] == ["cudnn"] and verified.out_of_scope == 1
    # The signer may not vouch for NCCL: its entry neither verifies nor conflicts.
    verdict = provenance_verdict("/x/libnccl.so.2", "nccl", "2.21.5", NCCL, [verified])
    assert verdict.provenance is Provenance.UNKNOWN


def test_rejections() -> None:
    raw = sign_catalog(_catalog().to_bytes(), keys.shared("ecdsa")).to_json().encode()
    with pytest.raises(Rejected, match="no DSSE signature verifies"):
        load_catalog(raw, _key_policy(kind="ed25519"), "c")
    doc = json.loads(raw)
    doc["payload"] = doc["payload"][:-8] + "AAAAAAA="
    with pytest.raises(Rejected):
        load_catalog(json.dumps(doc).encode(), _key_policy(), "c")
    with pytest.raises(Rejected, match="is not signed"):
        load_catalog(_catalog().to_bytes(), _key_policy(), "c")
    with pytest.raises(Rejected, match="not JSON"):
        load_catalog(b"{", _key_policy(), "c")
    other = sign_envelope("application/vnd.in-toto+json", b'{"_type": "x"}', keys.shared("ecdsa"))
    with pytest.raises(Rejected, match="not an in-toto Statement"):
        load_catalog(other.to_json().encode(), _key_policy(), "c")
    text = sign_envelope("text/plain", _catalog().to_bytes(), keys.shared("ecdsa"))
    with pytest.raises(Rejected, match="not in-toto"):
        load_catalog(text.to_json().encode(), _key_policy(), "c")


def test_keyless_catalog_bundle(instance: PrivateSigstore) -> None:
    root = SigstoreRoot.from_bytes(instance.trusted_root_json(), "private")
    signer = Signer("release-ci", Scope(("*",)), identity=IdentityRule(ISSUER, subject=SUBJECT))
    policy = TrustPolicy((signer,), (root,))
    bundle = json.dumps(instance.sign_dsse(_catalog().to_bytes())).encode()
    verified = load_catalog(bundle, policy, "c.sigstore.json")
    assert SUBJECT in verified.signer and verified.signer.startswith("release-ci")
    wrong = TrustPolicy(
        (Signer("x", Scope(("*",)), identity=IdentityRule(ISSUER, subject="someone")),), (root,)
    )
    with pytest.raises(Rejected, match="not trusted"):
        load_catalog(bundle, wrong, "c")


def test_signing_refuses_non_catalogs(tmp_path: Path) -> None:
    with pytest.raises(RefCatalogError):
        sign_catalog(b'{"_type": "https://in-toto.io/Statement/v1"}', keys.shared("ecdsa"))
    path = tmp_path / "k.pem"
    path.write_bytes(keys.private_pem(keys.shared("ecdsa"), b"pw"))
    with pytest.raises(RefCatalogError, match="GPUPROV_KEY_PASSWORD"):
        load_private_key(path)
    envelope = Envelope.from_json(
        sign_catalog(_catalog().to_bytes(), keys.shared("ecdsa")).to_json()
    )
    assert envelope.payload_type == "application/vnd.in-toto+json"


def test_encrypted_key_with_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "k.pem"
    path.write_bytes(keys.private_pem(keys.shared("ecdsa"), b"pw"))
    monkeypatch.setenv("GPUPROV_KEY_PASSWORD", "pw")
    assert load_private_key(path) is not None
