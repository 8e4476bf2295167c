"""Transparency-log entry checks, one rejection per comparison: log bodies against the signed
material (hashedrekord 0.0.1/0.0.2, dsse, intoto), entry parsing and the proof rules."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from scanner.verify import tlog
from scanner.verify.dsse import INTOTO_PAYLOAD_TYPE, Envelope, Signature
from scanner.verify.errors import Rejected
from scanner.verify.trusted_roots import SigstoreRoot
from tests.fixtures import keys
from tests.fixtures.sigstore_private import WHEN, PrivateSigstore, b64

DIGEST = hashlib.sha256(b"artifact").digest()
SIG = b"\x30signature"


def spki(key: Any) -> bytes:
    der: bytes = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return der


KEY = keys.shared("ecdsa", "tlog")
OTHER = keys.shared("ecdsa", "tlog-other")


def rekord_v1(digest: bytes = DIGEST, sig: bytes = SIG, key: Any = KEY) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(
        PrivateSigstore.hashedrekord_body(digest, sig, keys.public_pem(key))
    )
    return body


def rekord_v2(
    digest: bytes = DIGEST, sig: bytes = SIG, key: Any = KEY, algorithm: str = "SHA2_256"
) -> dict[str, Any]:
    return {
        "kind": "hashedrekord",
        "apiVersion": "0.0.2",
        "spec": {
            "hashedRekordV002": {
                "data": {"algorithm": algorithm, "digest": b64(digest)},
                "signature": {
                    "content": b64(sig),
                    "verifier": {"publicKey": {"rawBytes": b64(spki(key))}},
                },
            }
        },
    }


def matches(body: dict[str, Any]) -> str | None:
    return tlog.hashedrekord_matches(body, digest=DIGEST, signature=SIG, public_der=spki(KEY))


@pytest.mark.parametrize("make", [rekord_v1, rekord_v2])
def test_hashedrekord_bodies(make: Any) -> None:
    assert matches(make()) is None
    assert matches(make(digest=hashlib.sha256(b"other").digest())) == (
        "log entry records another artifact digest"
    )
    assert matches(make(sig=b"\x30other")) == "log entry records another signature"
    assert matches(make(key=OTHER)) == "log entry records another signing key"


def test_hashedrekord_details() -> None:
    sha512 = rekord_v1()
    sha512["spec"]["data"]["hash"]["algorithm"] = "sha512"
    assert matches(sha512) == "log entry records another artifact digest"
    upper = rekord_v1()
    upper["spec"]["data"]["hash"]["value"] = DIGEST.hex().upper()
    assert matches(upper) is None
    assert matches(rekord_v2(algorithm="SHA2_384")) == "log entry records another artifact digest"
    cert = rekord_v2()
    verifier = cert["spec"]["hashedRekordV002"]["signature"]["verifier"]
    verifier["x509Certificate"] = verifier.pop("publicKey")
    assert matches(cert) is None
    future = rekord_v1()
    future["apiVersion"] = "0.0.3"
    assert matches(future) == "unsupported hashedrekord version 0.0.3"
    broken = rekord_v1()
    del broken["spec"]["signature"]
    assert (matches(broken) or "").startswith("malformed hashedrekord log entry")


def test_spki_of_every_encoding(instance: PrivateSigstore) -> None:
    key, cert = instance.issue("someone@acme.test", email=True)
    der = spki(key)
    for encoded in (
        cert.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.DER),
        keys.public_pem(key),
        der,
    ):
        assert tlog.spki_of(encoded) == der


PAYLOAD = b'{"_type": "https://in-toto.io/Statement/v1"}'


def envelope(key: Any = KEY, sig: bytes = SIG) -> Envelope:
    return Envelope(INTOTO_PAYLOAD_TYPE, PAYLOAD, (Signature(sig),))


def dsse_body(payload: bytes = PAYLOAD, sig: bytes = SIG, key: Any = KEY) -> dict[str, Any]:
    doc = {"payload": b64(payload), "payloadType": INTOTO_PAYLOAD_TYPE, "signatures": []}
    body: dict[str, Any] = json.loads(
        PrivateSigstore.dsse_body(doc, payload, [(sig, keys.public_pem(key))])
    )
    return body


def intoto_body(
    payload: bytes = PAYLOAD, sig: bytes = SIG, key: Any = KEY, kind: str = INTOTO_PAYLOAD_TYPE
) -> dict[str, Any]:
    doc = {"payload": b64(payload), "payloadType": kind, "signatures": []}
    body: dict[str, Any] = json.loads(
        PrivateSigstore.intoto_body(doc, payload, [(sig, keys.public_pem(key))])
    )
    return body


def dsse_matches(body: dict[str, Any]) -> str | None:
    return tlog.dsse_entry_matches(body, envelope(), spki(KEY))


@pytest.mark.parametrize("make", [dsse_body, intoto_body])
def test_dsse_and_intoto_bodies(make: Any) -> None:
    assert dsse_matches(make()) is None
    assert "another" in (dsse_matches(make(payload=b"{}")) or "")
    assert dsse_matches(make(sig=b"\x30other")) == (
        "log entry records other signatures or another signing key"
    )
    assert dsse_matches(make(key=OTHER)) == (
        "log entry records other signatures or another signing key"
    )


def test_dsse_body_details() -> None:
    assert dsse_matches(dsse_body(payload=b"{}")) == "log entry records another DSSE payload"
    other_algorithm = dsse_body()
    other_algorithm["spec"]["payloadHash"]["algorithm"] = "sha512"
    assert dsse_matches(other_algorithm) == "log entry records another DSSE payload"
    upper = dsse_body()
    upper["spec"]["payloadHash"]["value"] = upper["spec"]["payloadHash"]["value"].upper()
    assert dsse_matches(upper) is None
    assert dsse_matches(intoto_body(payload=b"{}")) == "log entry records another in-toto payload"
    retyped = intoto_body(kind="text/plain")
    assert dsse_matches(retyped) == "log entry records another payload type"
    swapped = intoto_body()
    swapped["spec"]["content"]["envelope"]["payload"] = b64(b64(b"{}").encode())
    assert dsse_matches(swapped) == "log entry records another in-toto payload"
    single = intoto_body()  # the payload is optional in intoto/0.0.2: the hash suffices
    del single["spec"]["content"]["envelope"]["payload"]
    assert dsse_matches(single) is None
    other_hash = intoto_body()
    other_hash["spec"]["content"]["payloadHash"]["algorithm"] = "sha512"
    assert dsse_matches(other_hash) == "log entry records another in-toto payload"
    assert dsse_matches({"kind": "rekord", "apiVersion": "0.0.1", "spec": {}}) == (
        "unsupported log entry kind rekord/0.0.1 for a DSSE envelope"
    )
    assert dsse_matches({"kind": "dsse", "apiVersion": "0.0.2", "spec": {}}) == (
        "unsupported log entry kind dsse/0.0.2 for a DSSE envelope"
    )
    assert dsse_matches({"kind": "intoto", "apiVersion": "0.0.1", "spec": {}}) == (
        "unsupported log entry kind intoto/0.0.1 for a DSSE envelope"
    )
    assert (dsse_matches({"kind": "dsse", "apiVersion": "0.0.1", "spec": {}}) or "").startswith(
        "malformed dsse log entry"
    )
    extra = dsse_body()
    extra["spec"]["signatures"].append(dict(extra["spec"]["signatures"][0], signature=b64(b"x")))
    assert dsse_matches(extra) == "log entry records other signatures or another signing key"


def test_hashedrekord_of_a_dsse_envelope_signs_pae() -> None:
    pae_digest = hashlib.sha256(envelope().pae()).digest()
    body = rekord_v2(digest=pae_digest)
    assert dsse_matches(body) is None
    assert dsse_matches(rekord_v2(digest=hashlib.sha256(PAYLOAD).digest())) == (
        "log entry records another artifact digest"
    )
    two = Envelope(INTOTO_PAYLOAD_TYPE, PAYLOAD, (Signature(SIG), Signature(SIG)))
    none = Envelope(INTOTO_PAYLOAD_TYPE, PAYLOAD, ())
    for envelope_ in (two, none):
        assert tlog.dsse_entry_matches(body, envelope_, spki(KEY)) == (
            "a hashedrekord DSSE entry needs exactly one signature"
        )


def test_dsse_entry_kinds_are_compared_by_value_and_exact_version() -> None:
    """A body parsed from the log (strings built at run time, not interned literals) matches;
    a later hashedrekord version is not read as 0.0.2."""
    pae_digest = hashlib.sha256(envelope().pae()).digest()
    parsed = json.loads(json.dumps(rekord_v2(digest=pae_digest)))
    assert dsse_matches(parsed) is None
    for version in ("0.0.3", "0.1.0", "1.0.0"):
        later = {**parsed, "apiVersion": version}
        assert (
            dsse_matches(later)
            == f"unsupported log entry kind hashedrekord/{version} for a DSSE envelope"
        )


# -- entries and proofs -------------------------------------------------------------------


def entry_doc(instance: PrivateSigstore) -> dict[str, Any]:
    body = PrivateSigstore.hashedrekord_body(DIGEST, SIG, keys.public_pem(KEY))
    return instance.log_entry(body)


def test_entry_parsing(instance: PrivateSigstore) -> None:
    doc = entry_doc(instance)
    entry = tlog.LogEntry.from_bundle(doc)
    assert (entry.kind, entry.version, entry.integrated_at) == ("hashedrekord", "0.0.1", WHEN)
    assert entry.proof is not None and entry.proof.checkpoint is not None
    assert entry.body_json()["kind"] == "hashedrekord"
    for zero in ("0", 0, "", None):
        assert tlog.LogEntry.from_bundle(dict(doc, integratedTime=zero)).integrated_at is None
    no_promise = copy.deepcopy(doc)
    del no_promise["inclusionPromise"]
    assert tlog.LogEntry.from_bundle(no_promise).set_signature is None
    no_checkpoint = copy.deepcopy(doc)
    del no_checkpoint["inclusionProof"]["checkpoint"]
    parsed = tlog.LogEntry.from_bundle(no_checkpoint)
    assert parsed.proof is not None and parsed.proof.checkpoint is None
    bad = copy.deepcopy(doc)
    bad["inclusionProof"]["checkpoint"]["envelope"] = 7
    with pytest.raises(Rejected, match="checkpoint envelope is not text"):
        tlog.LogEntry.from_bundle(bad)
    for key, value in (("logIndex", "-1"), ("canonicalizedBody", "!!"), ("logId", {})):
        with pytest.raises(Rejected, match="malformed transparency log entry"):
            tlog.LogEntry.from_bundle(dict(doc, **{key: value}))
    with pytest.raises(Rejected, match="malformed transparency log entry"):
        tlog.LogEntry.from_bundle([])


def test_entry_body_must_be_what_the_entry_says(instance: PrivateSigstore) -> None:
    doc = entry_doc(instance)
    for body, message in (
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({"kind": "hashedrekord", "apiVersion": "0.0.2"}).encode(), "entry says"),
        (json.dumps({"kind": "dsse", "apiVersion": "0.0.1"}).encode(), "entry says"),
    ):
        entry = tlog.LogEntry.from_bundle(dict(doc, canonicalizedBody=b64(body)))
        with pytest.raises(Rejected, match=message):
            entry.body_json()


def test_cosign_annotation(instance: PrivateSigstore) -> None:
    body = PrivateSigstore.hashedrekord_body(DIGEST, SIG, keys.public_pem(KEY))
    entry = tlog.LogEntry.from_cosign_bundle(instance.cosign_bundle_annotation(body))
    assert entry.body == body and entry.proof is None and entry.integrated_at == WHEN
    assert entry.log_id == instance.log_id and entry.kind == "hashedrekord"
    root = SigstoreRoot.from_bytes(instance.trusted_root_json(), "private")
    assert tlog.verify_entry(entry, [root], require_proof=False)[2] == WHEN
    for broken in ("{}", "not json", json.dumps({"Payload": {"body": "!!"}})):
        with pytest.raises(Rejected, match="malformed cosign bundle annotation"):
            tlog.LogEntry.from_cosign_bundle(broken)


def test_set_payload_is_canonical(instance: PrivateSigstore) -> None:
    entry = tlog.LogEntry.from_bundle(entry_doc(instance))
    payload = json.loads(tlog.set_payload(entry))
    assert list(payload) == ["body", "integratedTime", "logID", "logIndex"]
    assert base64.b64decode(payload["body"]) == entry.body
    assert payload["logID"] == entry.log_id.hex() and payload["logIndex"] == entry.log_index
    assert b" " not in tlog.set_payload(entry)


def test_verify_entry_rules(instance: PrivateSigstore) -> None:
    root = SigstoreRoot.from_bytes(instance.trusted_root_json(), "private")
    doc = entry_doc(instance)
    neither = copy.deepcopy(doc)
    del neither["inclusionPromise"], neither["inclusionProof"]
    with pytest.raises(Rejected, match="neither a signed entry timestamp nor an inclusion proof"):
        tlog.verify_entry(tlog.LogEntry.from_bundle(neither), [root], require_proof=False)
    proof_only = copy.deepcopy(doc)
    del proof_only["inclusionPromise"]
    found, _log, when = tlog.verify_entry(
        tlog.LogEntry.from_bundle(proof_only), [root], require_proof=True
    )
    assert found is root and when is None  # no SET: the integrated time is not a verified time
    no_time = dict(doc, integratedTime="0")
    with pytest.raises(Rejected, match="no signed entry timestamp"):
        tlog.verify_entry(tlog.LogEntry.from_bundle(no_time), [root], require_proof=True)
    late = instance.trusted_root_json(log_end=WHEN - timedelta(seconds=1))
    late_root = SigstoreRoot.from_bytes(late, "late")
    with pytest.raises(Rejected, match="outside the validity of log key"):
        tlog.verify_entry(tlog.LogEntry.from_bundle(doc), [late_root], require_proof=True)
    edge = SigstoreRoot.from_bytes(instance.trusted_root_json(log_end=WHEN), "edge")
    assert tlog.verify_entry(tlog.LogEntry.from_bundle(doc), [edge], require_proof=True)[2] == WHEN
    other = PrivateSigstore(name="no-such-log")
    unknown = SigstoreRoot.from_bytes(other.trusted_root_json(), "other")
    found, _log, _when = tlog.verify_entry(
        tlog.LogEntry.from_bundle(doc), [unknown, root], require_proof=True
    )
    assert found is root


def _checkpoint_proof(note: str, name: str, hint: bytes, signature: bytes) -> tlog.InclusionProof:
    envelope = f"{note}\n\u2014 {name} {b64(hint + signature)}\n"
    size, root = int(note.split("\n")[1]), base64.b64decode(note.split("\n")[2])
    return tlog.InclusionProof(0, root, size, (), envelope)


def test_ed25519_checkpoint_key_hash() -> None:
    """C2SP signed-note: an Ed25519 log signs with key hash SHA-256(name \\n 0x01 key)[:4]."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from scanner.verify.keys import TrustedKey
    from scanner.verify.trusted_roots import LogKey

    private = ed25519.Ed25519PrivateKey.generate()
    key = TrustedKey.from_public_key(private.public_key())
    log = LogKey(hashlib.sha256(key.spki_der).digest(), key, None, None, "https://log.test")
    name = "log.test/origin"
    raw = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    c2sp = hashlib.sha256(name.encode() + b"\n\x01" + raw).digest()[:4]
    root_hash = b64(bytes(32))
    note = f"{name}\n3\n{root_hash}\n"
    signature = private.sign(note.encode())
    tlog.verify_checkpoint(_checkpoint_proof(note, name, c2sp, signature), log)
    tlog.verify_checkpoint(_checkpoint_proof(note, name, log.key_id[:4], signature), log)
    for hint in (b"\x00\x00\x00\x00", hashlib.sha256(b"other\n\x01" + raw).digest()[:4]):
        with pytest.raises(Rejected, match="checkpoint is not signed by the log key"):
            tlog.verify_checkpoint(_checkpoint_proof(note, name, hint, signature), log)
    with pytest.raises(Rejected, match="no checkpoint"):
        tlog.verify_checkpoint(tlog.InclusionProof(0, b"", 1, (), None), log)


def test_checkpoint_signature_lines() -> None:
    note = "o\n1\nAAAA\n"
    with pytest.raises(Rejected, match="malformed checkpoint signature line"):
        tlog.Checkpoint.parse(note + "\nnot a signature line\n")
    with pytest.raises(Rejected, match="malformed checkpoint signature"):
        tlog.Checkpoint.parse(note + "\n\u2014 name !!!!\n")
    with pytest.raises(Rejected, match="too short"):
        tlog.Checkpoint.parse(note + "\n\u2014 name AQIDBA==\n")
    with pytest.raises(Rejected, match="malformed checkpoint"):
        tlog.Checkpoint.parse("o\nseven\nAAAA\n\n\u2014 n AQIDBAU=\n")
    with pytest.raises(Rejected, match="malformed checkpoint"):
        tlog.Checkpoint.parse("o\n7\n!!!!\n\n\u2014 n AQIDBAU=\n")
    two = tlog.Checkpoint.parse(note + "\n\u2014 a AQIDBAU=\n\u2014 b BQQDAgE=\n")
    assert [s[0] for s in two.signatures] == ["a", "b"] and two.signatures[1][2] == b"\x01"


@pytest.mark.parametrize("cls", [tlog.InclusionProof, tlog.LogEntry, tlog.Checkpoint])
def test_log_values_are_frozen(cls: type) -> None:
    """What was verified cannot be changed afterwards."""
    assert cls.__struct_config__.frozen  # type: ignore[attr-defined]


def test_index_zero_and_malformed_bodies(instance: PrivateSigstore) -> None:
    doc = entry_doc(instance)
    zero = dict(doc, logIndex="0", inclusionProof=dict(doc["inclusionProof"], logIndex="0"))
    entry = tlog.LogEntry.from_bundle(zero)
    assert entry.log_index == 0 and entry.proof is not None and entry.proof.log_index == 0
    bad_sig = dsse_body()
    bad_sig["spec"]["signatures"][0]["signature"] = "!!"
    assert (dsse_matches(bad_sig) or "").startswith("malformed dsse log entry")
    single_b64 = intoto_body()  # payload base64-encoded once, not twice as intoto/0.0.2 does
    single_b64["spec"]["content"]["envelope"]["payload"] = b64(PAYLOAD)
    assert dsse_matches(single_b64) == "log entry records another in-toto payload"


# -- what mutation testing showed untested (docs/mutation.md) -------------------------------


def test_entry_base64_fields_are_strict(instance: PrivateSigstore) -> None:
    """A character outside the base64 alphabet is refused, never skipped, in every field."""
    doc = entry_doc(instance)
    key_id = copy.deepcopy(doc)
    key_id["logId"]["keyId"] = "!" + key_id["logId"]["keyId"]
    promise = copy.deepcopy(doc)
    promise["inclusionPromise"]["signedEntryTimestamp"] = (
        "!" + (promise["inclusionPromise"]["signedEntryTimestamp"])
    )
    for bad in (key_id, promise):
        with pytest.raises(Rejected, match="malformed transparency log entry"):
            tlog.LogEntry.from_bundle(bad)
    body = PrivateSigstore.hashedrekord_body(DIGEST, SIG, keys.public_pem(KEY))
    annotation = json.loads(instance.cosign_bundle_annotation(body))
    annotation["Payload"]["body"] = "!" + annotation["Payload"]["body"]
    with pytest.raises(Rejected, match="malformed cosign bundle annotation"):
        tlog.LogEntry.from_cosign_bundle(json.dumps(annotation))


def test_unknown_log_names_its_log_id(instance: PrivateSigstore) -> None:
    root = SigstoreRoot.from_bytes(instance.trusted_root_json(), "private")
    doc = dict(entry_doc(instance), logId={"keyId": b64(bytes(range(32)))})
    with pytest.raises(Rejected, match="no trusted root knows \\(log ID 0001020304050607…\\)"):
        tlog.verify_entry(tlog.LogEntry.from_bundle(doc), [root], require_proof=True)


def test_checkpoint_origin_and_blank_signature_lines() -> None:
    parsed = tlog.Checkpoint.parse(
        "origin.test\n1\nAAAA\n\n\u2014 a AQIDBAU=\n\n\u2014 b BQQDAgE=\n"
    )
    assert parsed.origin == "origin.test" and [s[0] for s in parsed.signatures] == ["a", "b"]


def _ed25519_log() -> tuple[Any, Any]:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from scanner.verify.keys import TrustedKey
    from scanner.verify.trusted_roots import LogKey

    private = ed25519.Ed25519PrivateKey.generate()
    key = TrustedKey.from_public_key(private.public_key())
    return private, LogKey(hashlib.sha256(key.spki_der).digest(), key, None, None, "https://l.test")


def test_checkpoint_must_cover_the_proofs_tree_size() -> None:
    private, log = _ed25519_log()
    root_hash = b64(bytes(32))
    for size in (3, 300):  # 300: compared by value (CPython shares only the ints up to 256)
        note = f"l.test/origin\n{size}\n{root_hash}\n"
        proof = _checkpoint_proof(
            note, "l.test/origin", log.key_id[:4], private.sign(note.encode())
        )
        tlog.verify_checkpoint(proof, log)
        for other in (size - 1, size + 1):
            with pytest.raises(Rejected, match="tree size differs"):
                tlog.verify_checkpoint(
                    tlog.InclusionProof(0, proof.root_hash, other, (), proof.checkpoint), log
                )
    note = f"l.test/origin\n3\n{root_hash}\n"
    foreign = _checkpoint_proof(note, "l.test/origin", log.key_id[:4], bytes(64))
    with pytest.raises(Rejected, match="not signed by the log key of https://l.test$"):
        tlog.verify_checkpoint(foreign, log)


def _tree_hash(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1 Merkle tree hash of leaf hashes."""
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)  # the largest power of two below n
    return tlog.node_hash(_tree_hash(leaves[:k]), _tree_hash(leaves[k:]))


def _audit_path(m: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 audit path of leaf `m`."""
    if len(leaves) == 1:
        return []
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    if m < k:
        return [*_audit_path(m, leaves[:k]), _tree_hash(leaves[k:])]
    return [*_audit_path(m - k, leaves[k:]), _tree_hash(leaves[:k])]


def test_inclusion_proofs_in_a_tree_above_256_leaves() -> None:
    """Indices are compared by value (CPython shares only the ints up to 256)."""
    leaves = [hashlib.sha256(b"\x00" + str(i).encode()).digest() for i in range(300)]
    root = _tree_hash(leaves)
    for index in (0, 7, 256, 257, 299):
        path = _audit_path(index, leaves)
        assert tlog.root_from_inclusion_proof(index, 300, leaves[index], path) == root
    # The last leaf of a tree of odd size, at an even index above 256 (`fn == sn` decides).
    assert tlog.root_from_inclusion_proof(
        298, 299, leaves[298], _audit_path(298, leaves[:299])
    ) == (_tree_hash(leaves[:299]))


def test_hashedrekord_versions_and_algorithms() -> None:
    assert matches(json.loads(json.dumps(rekord_v2()))) is None  # parsed, not interned, strings
    assert matches(rekord_v2(algorithm="SHA1")) == "log entry records another artifact digest"
    older = dict(rekord_v2(), apiVersion="0.0.0")
    assert matches(older) == "unsupported hashedrekord version 0.0.0"


def test_dsse_entry_kinds_and_hashes() -> None:
    for kind, version in (
        ("alpine", "0.0.1"),
        ("dsse", "0.0.0"),
        ("intoto", "0.0.3"),
        ("hashedrekord", "0.0.1"),
    ):
        body = dict(dsse_body() if kind in ("alpine", "dsse") else intoto_body(), kind=kind)
        body["apiVersion"] = version
        assert dsse_matches(body) == (
            f"unsupported log entry kind {kind}/{version} for a DSSE envelope"
        )
    for field, value in (("algorithm", "sha1"), ("value", "f" * 64)):
        body = intoto_body()
        body["spec"]["content"]["payloadHash"][field] = value
        assert dsse_matches(body) == "log entry records another in-toto payload"


def test_only_ed25519_logs_have_a_c2sp_key_hash() -> None:
    """Other logs name their key by the log ID's first 4 bytes only (Sigstore's checkpoints)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    from scanner.verify.keys import TrustedKey
    from scanner.verify.trusted_roots import LogKey

    private: Any = keys.shared("rsa", "tlog")
    key = TrustedKey.from_public_key(private.public_key())
    log = LogKey(hashlib.sha256(key.spki_der).digest(), key, None, None, "https://l.test")
    name = "l.test/origin"
    note = f"{name}\n3\n{b64(bytes(32))}\n"
    signature = private.sign(note.encode(), padding.PKCS1v15(), hashes.SHA256())
    tlog.verify_checkpoint(_checkpoint_proof(note, name, log.key_id[:4], signature), log)
    c2sp = hashlib.sha256(name.encode() + b"\n\x01" + key.spki_der[-32:]).digest()[:4]
    with pytest.raises(Rejected, match="checkpoint is not signed by the log key"):
        tlog.verify_checkpoint(_checkpoint_proof(note, name, c2sp, signature), log)


def test_more_rejections_that_mutants_showed() -> None:
    with pytest.raises(Rejected, match="index 7 is outside the tree of size 6"):
        tlog.root_from_inclusion_proof(7, 6, bytes(32), [])
    sha1 = rekord_v1()
    sha1["spec"]["data"]["hash"]["algorithm"] = "sha1"
    assert matches(sha1) == "log entry records another artifact digest"
    # A payload type that sorts before in-toto's is still another one.
    retyped = intoto_body(kind="application/json")
    assert dsse_matches(retyped) == "log entry records another payload type"


def test_digests_hashes_and_kinds_that_sort_around_the_right_ones(
    instance: PrivateSigstore,
) -> None:
    assert matches(rekord_v2(digest=bytes(32))) == "log entry records another artifact digest"
    sha1 = dsse_body()
    sha1["spec"]["payloadHash"]["algorithm"] = "sha1"
    assert dsse_matches(sha1) == "log entry records another DSSE payload"
    rpm = dict(intoto_body(), kind="rpm")
    assert dsse_matches(rpm) == "unsupported log entry kind rpm/0.0.2 for a DSSE envelope"
    doc = entry_doc(instance)
    doc["inclusionProof"]["hashes"] = ["!" + h for h in doc["inclusionProof"]["hashes"]]
    with pytest.raises(Rejected, match="malformed transparency log entry"):
        tlog.LogEntry.from_bundle(doc)


def test_hashes_on_either_side_and_an_empty_origin(instance: PrivateSigstore) -> None:
    with pytest.raises(Rejected, match="needs an origin"):
        tlog.Checkpoint.parse("\n1\nAAAA\n\n\u2014 a AQIDBAU=\n")
    assert matches(rekord_v1(digest=bytes(32))) == "log entry records another artifact digest"
    for value in ("0" * 64, "f" * 64):
        dsse = dsse_body()
        dsse["spec"]["payloadHash"]["value"] = value
        assert dsse_matches(dsse) == "log entry records another DSSE payload"
        intoto = intoto_body()
        intoto["spec"]["content"]["payloadHash"]["value"] = value
        assert dsse_matches(intoto) == "log entry records another in-toto payload"
    body = PrivateSigstore.hashedrekord_body(DIGEST, SIG, keys.public_pem(KEY))
    annotation = json.loads(instance.cosign_bundle_annotation(body))
    annotation["SignedEntryTimestamp"] = "!" + annotation["SignedEntryTimestamp"]
    with pytest.raises(Rejected, match="malformed cosign bundle annotation"):
        tlog.LogEntry.from_cosign_bundle(json.dumps(annotation))
