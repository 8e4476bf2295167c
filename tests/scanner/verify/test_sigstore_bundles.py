"""Keyless Sigstore bundles from a private instance: accepted, and each rejection's reason."""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from scanner.verify.errors import Rejected
from scanner.verify.sigstore_bundles import ArtifactDigest, verify_bundle
from scanner.verify.trust import TrustPolicy
from scanner.verify.trusted_roots import SigstoreRoot
from tests.fixtures.sigstore_private import (
    INTOTO,
    ISSUER,
    MEDIA,
    SUBJECT,
    WHEN,
    PrivateSigstore,
    b64,
    pae,
    statement,
)
from tests.scanner.verify.conftest import keyless_policy

BLOB = b"libcudnn_graph.so.9 pretend bytes\x00\x01"


def _raw(bundle: dict[str, Any]) -> bytes:
    return json.dumps(bundle).encode()


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3"])
def test_blob_bundles_verify(instance: PrivateSigstore, policy: TrustPolicy, version: str) -> None:
    bundle = instance.sign_blob(BLOB, version=version)
    result = verify_bundle(_raw(bundle), policy, artifact=BLOB)
    assert result.kind == "message-signature"
    assert SUBJECT in result.identity and ISSUER in result.identity
    assert result.signed_at == WHEN
    assert result.root == "private"
    # Digest-only: what the scanner does for 0.7 GB libraries.
    digest = ArtifactDigest(hashlib.sha256(BLOB).digest())
    assert verify_bundle(_raw(bundle), policy, artifact=digest).signer == result.signer


def test_dsse_attestation_verifies_and_subject_is_checked(
    instance: PrivateSigstore, policy: TrustPolicy
) -> None:
    stmt = statement([("lib.so", hashlib.sha256(BLOB).hexdigest())], "https://p.test/v1", {"a": 1})
    bundle = instance.sign_dsse(stmt)
    result = verify_bundle(_raw(bundle), policy, artifact=BLOB)
    assert result.statement().predicate == {"a": 1}
    assert verify_bundle(_raw(bundle), policy).kind == "dsse"  # caller checks the subject
    with pytest.raises(Rejected, match="in-toto subject does not match"):
        verify_bundle(_raw(bundle), policy, artifact=b"another artifact")


def test_identity_forms(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    leaf = instance.issue("builder@acme.test", email=True)
    bundle = instance.sign_blob(BLOB, leaf=leaf)
    verify_bundle(_raw(bundle), keyless_policy(root, subject="builder@acme.test"), artifact=BLOB)
    regex = TrustPolicy.for_identity(ISSUER, [root], subject_regex=r"[a-z]+@acme\.test")
    verify_bundle(_raw(bundle), regex, artifact=BLOB)
    evil = TrustPolicy.for_identity(ISSUER, [root], subject_regex=r"acme\.test")
    with pytest.raises(Rejected, match="not trusted"):
        verify_bundle(_raw(bundle), evil, artifact=BLOB)


def test_wrong_identity_and_issuer(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    bundle = _raw(instance.sign_blob(BLOB))
    with pytest.raises(Rejected, match=r"identity .*release\.yml.* is not trusted"):
        verify_bundle(bundle, keyless_policy(root, subject=SUBJECT + "x"), artifact=BLOB)
    with pytest.raises(Rejected, match="is not trusted"):
        verify_bundle(
            bundle, keyless_policy(root, issuer="https://accounts.google.com"), artifact=BLOB
        )


def test_tampered_artifact(instance: PrivateSigstore, policy: TrustPolicy) -> None:
    bundle = _raw(instance.sign_blob(BLOB))
    with pytest.raises(Rejected, match="artifact differs from the signed one"):
        verify_bundle(bundle, policy, artifact=BLOB + b"!")
    with pytest.raises(Rejected, match="artifact differs from the signed one"):
        verify_bundle(bundle, policy, artifact=ArtifactDigest(b"\x00" * 32))


def test_tampered_dsse_payload(instance: PrivateSigstore, policy: TrustPolicy) -> None:
    stmt = statement([("x", hashlib.sha256(BLOB).hexdigest())], "https://p.test/v1", {})
    bundle = instance.sign_dsse(stmt)
    evil = statement([("x", hashlib.sha256(b"evil").hexdigest())], "https://p.test/v1", {})
    bundle["dsseEnvelope"]["payload"] = b64(evil)
    with pytest.raises(Rejected, match="DSSE signature does not verify"):
        verify_bundle(_raw(bundle), policy)


def test_untrusted_instance(
    instance: PrivateSigstore, other_instance: PrivateSigstore, policy: TrustPolicy
) -> None:
    with pytest.raises(Rejected, match="transparency log that private does not know"):
        verify_bundle(_raw(other_instance.sign_blob(BLOB)), policy, artifact=BLOB)
    # Same logs, another CA: only the certificate chain gives it away.
    rogue_ca = PrivateSigstore(name="rogue", log_key=instance.log_key, ct_key=instance.ct_key)
    with pytest.raises(Rejected, match="does not chain to a trusted CA"):
        verify_bundle(_raw(rogue_ca.sign_blob(BLOB)), policy, artifact=BLOB)


def test_expired_root_window(instance: PrivateSigstore) -> None:
    # The trusted root says this CA stopped being valid before the signature was made.
    ended = SigstoreRoot.from_bytes(
        instance.trusted_root_json(ca_end=WHEN - timedelta(days=1)), "ended"
    )
    bundle = _raw(instance.sign_blob(BLOB))
    with pytest.raises(Rejected, match="outside the validity window"):
        verify_bundle(bundle, keyless_policy(ended), artifact=BLOB)


def test_expired_root_certificate() -> None:
    old = PrivateSigstore(name="old", ca_years=1)  # CA certificates end in 2025-01
    root = SigstoreRoot.from_bytes(old.trusted_root_json(), "old")
    bundle = _raw(old.sign_blob(BLOB))
    with pytest.raises(Rejected, match="does not chain to a trusted CA valid at signing time"):
        verify_bundle(bundle, keyless_policy(root), artifact=BLOB)


def test_log_key_window(instance: PrivateSigstore) -> None:
    root = SigstoreRoot.from_bytes(
        instance.trusted_root_json(log_end=WHEN - timedelta(hours=1)), "log-ended"
    )
    with pytest.raises(Rejected, match="outside the validity of log key"):
        verify_bundle(_raw(instance.sign_blob(BLOB)), keyless_policy(root), artifact=BLOB)


def test_replayed_log_entry(instance: PrivateSigstore, policy: TrustPolicy) -> None:
    original = instance.sign_blob(BLOB)
    other = instance.sign_blob(b"other artifact")
    replayed = copy.deepcopy(other)
    replayed["verificationMaterial"]["tlogEntries"] = original["verificationMaterial"][
        "tlogEntries"
    ]
    with pytest.raises(Rejected, match=r"records other material \(replayed\?\)"):
        verify_bundle(_raw(replayed), policy, artifact=b"other artifact")


def test_broken_log_proofs(instance: PrivateSigstore, policy: TrustPolicy) -> None:
    bundle = instance.sign_blob(BLOB)
    entry = bundle["verificationMaterial"]["tlogEntries"][0]
    assert entry["inclusionPromise"]["signedEntryTimestamp"]
    bad_set = copy.deepcopy(bundle)
    promise = bad_set["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]
    promise["signedEntryTimestamp"] = b64(b"0" * 70)
    with pytest.raises(Rejected, match="signed entry timestamp is not the transparency log's"):
        verify_bundle(_raw(bad_set), policy, artifact=BLOB)
    bad_proof = copy.deepcopy(bundle)
    proof = bad_proof["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]
    proof["hashes"][0] = b64(b"\x11" * 32)
    with pytest.raises(Rejected, match="inclusion proof is not valid"):
        verify_bundle(_raw(bad_proof), policy, artifact=BLOB)
    bad_checkpoint = copy.deepcopy(bundle)
    cp = bad_checkpoint["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"]
    cp["envelope"] = cp["envelope"].replace(" - 4242", " - 4243")
    with pytest.raises(Rejected, match="checkpoint is not valid"):
        verify_bundle(_raw(bad_checkpoint), policy, artifact=BLOB)


def test_untrusted_log(instance: PrivateSigstore, policy: TrustPolicy) -> None:
    key, cert = instance.issue()
    rogue = ec.generate_private_key(ec.SECP256R1())
    signature = key.sign(BLOB, ec.ECDSA(hashes.SHA256()))
    body = instance.hashedrekord_body(
        hashlib.sha256(BLOB).digest(), signature, cert.public_bytes(serialization.Encoding.PEM)
    )
    bundle = instance.sign_blob(BLOB, leaf=(key, cert))
    bundle["verificationMaterial"]["tlogEntries"] = [instance.log_entry(body, log_key=rogue)]
    bundle["messageSignature"]["signature"] = b64(signature)
    with pytest.raises(Rejected, match="transparency log that private does not know"):
        verify_bundle(_raw(bundle), policy, artifact=BLOB)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"with_sct": False}, "no valid certificate-transparency timestamp"),
        ({"ct_key": ec.generate_private_key(ec.SECP256R1())}, "certificate-transparency"),
        ({"code_signing": False}, "not for code signing"),
    ],
)
def test_certificate_profile(
    instance: PrivateSigstore, policy: TrustPolicy, kwargs: dict[str, Any], reason: str
) -> None:
    bundle = instance.sign_blob(BLOB, leaf=instance.issue(**kwargs))
    with pytest.raises(Rejected, match=reason):
        verify_bundle(_raw(bundle), policy, artifact=BLOB)


def test_signature_after_certificate_expiry(instance: PrivateSigstore, policy: TrustPolicy) -> None:
    leaf = instance.issue(when=WHEN)
    bundle = instance.sign_blob(BLOB, leaf=leaf, when=WHEN + timedelta(hours=1))
    with pytest.raises(Rejected, match="does not chain to a trusted CA valid at signing time"):
        verify_bundle(_raw(bundle), policy, artifact=BLOB)


def test_no_keyless_signer_in_scope(instance: PrivateSigstore, policy: TrustPolicy) -> None:
    with pytest.raises(Rejected, match="no trusted keyless identity"):
        verify_bundle(_raw(instance.sign_blob(BLOB)), policy, artifact=BLOB, signers=())


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"mediaType": "x"}',
        json.dumps(
            {
                "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
                "verificationMaterial": {},
            }
        ).encode(),
    ],
)
def test_malformed_bundles(raw: bytes, policy: TrustPolicy) -> None:
    with pytest.raises(Rejected):
        verify_bundle(raw, policy, artifact=BLOB)


def test_message_bundle_needs_artifact(instance: PrivateSigstore, policy: TrustPolicy) -> None:
    with pytest.raises(Rejected, match="needs the artifact"):
        verify_bundle(_raw(instance.sign_blob(BLOB)), policy)


def test_second_root_is_tried(instance: PrivateSigstore, other_instance: PrivateSigstore) -> None:
    roots = [
        SigstoreRoot.from_bytes(other_instance.trusted_root_json(), "other"),
        SigstoreRoot.from_bytes(instance.trusted_root_json(), "private"),
    ]
    policy = TrustPolicy.for_identity(ISSUER, roots, subject=SUBJECT)
    assert verify_bundle(_raw(instance.sign_blob(BLOB)), policy, artifact=BLOB).root == "private"
    with pytest.raises(Rejected, match="root other: .*; root private: "):
        verify_bundle(_raw(instance.sign_blob(BLOB)), policy, artifact=b"x")


def test_dsse_bundle_of_another_payload_type_is_no_statement(
    instance: PrivateSigstore, policy: TrustPolicy
) -> None:
    """A validly signed DSSE bundle whose payloadType is not in-toto carries no in-toto
    statement, even when its payload parses as one."""
    stmt = statement([("lib.so", hashlib.sha256(BLOB).hexdigest())], "https://p.test/v1", {})
    bundle = instance.sign_dsse(stmt, payload_type="application/json")
    result = verify_bundle(_raw(bundle), policy)
    assert result.payload_type == "application/json"
    with pytest.raises(Rejected, match="'application/json' is not an in-toto statement"):
        result.statement()
    with pytest.raises(Rejected, match="is not an in-toto statement"):
        verify_bundle(_raw(bundle), policy, artifact=BLOB)


def _keyless_intoto_bundle(instance: PrivateSigstore, payload: bytes, signed: bytes) -> bytes:
    """A keyless DSSE bundle logged as intoto/0.0.2 (older cosign attest), whose signature is
    over `signed` (PAE for a genuine one)."""
    key, cert = instance.issue(SUBJECT, ISSUER)
    signature = key.sign(signed, ec.ECDSA(hashes.SHA256()))
    envelope = {
        "payload": b64(payload),
        "payloadType": INTOTO,
        "signatures": [{"sig": b64(signature), "keyid": ""}],
    }
    pem = cert.public_bytes(serialization.Encoding.PEM)
    entry = instance.log_entry(instance.intoto_body(envelope, payload, [(signature, pem)]))
    entry["kindVersion"] = {"kind": "intoto", "version": "0.0.2"}
    material = instance._material(cert, entry, "0.3")
    return _raw(
        {"mediaType": MEDIA["0.3"], "verificationMaterial": material, "dsseEnvelope": envelope}
    )


def test_keyless_intoto_entry_signature_must_cover_pae(
    instance: PrivateSigstore, policy: TrustPolicy
) -> None:
    stmt = statement([("lib.so", hashlib.sha256(BLOB).hexdigest())], "https://p.test/v1", {})
    genuine = _keyless_intoto_bundle(instance, stmt, pae(INTOTO, stmt))
    assert verify_bundle(genuine, policy, artifact=BLOB).kind == "dsse"
    with pytest.raises(Rejected, match="DSSE signature does not verify"):
        verify_bundle(_keyless_intoto_bundle(instance, stmt, stmt), policy, artifact=BLOB)
