"""Public-key Sigstore bundles (our own verifier) and the transparency-log proof code."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from scanner.verify import keybundle, tlog
from scanner.verify.errors import Rejected
from scanner.verify.keys import TrustedKey
from scanner.verify.sigstore_bundles import ArtifactDigest, verify_bundle
from scanner.verify.trusted_roots import SigstoreRoot
from tests.fixtures import keys
from tests.fixtures.sigstore_private import PrivateSigstore, audit_path, b64, mth, statement
from tests.scanner.verify.conftest import key_policy

DATA = b"catalog bytes \x00\xff"


def _raw(bundle: dict[str, Any]) -> bytes:
    return json.dumps(bundle).encode()


@pytest.mark.parametrize("size", range(1, 18))
def test_inclusion_proofs_match_an_independent_tree(size: int) -> None:
    bodies = [f"entry {i}".encode() for i in range(size)]
    root = mth(bodies)
    for index in range(size):
        path = audit_path(index, bodies)
        got = tlog.root_from_inclusion_proof(index, size, tlog.leaf_hash(bodies[index]), path)
        assert got == root
        if path:
            with pytest.raises(Rejected, match="too few"):
                tlog.root_from_inclusion_proof(
                    index, size, tlog.leaf_hash(bodies[index]), path[:-1]
                )
        with pytest.raises(Rejected):
            tlog.root_from_inclusion_proof(
                index, size, tlog.leaf_hash(bodies[index]), [*path, root]
            )
    with pytest.raises(Rejected, match="outside the tree"):
        tlog.root_from_inclusion_proof(size, size, b"x" * 32, [])


@pytest.mark.parametrize("kind", keys.KINDS)
def test_key_bundles_verify(instance: PrivateSigstore, root: SigstoreRoot, kind: str) -> None:
    key = keys.shared(kind)
    policy = key_policy(root, key)
    result = verify_bundle(_raw(instance.key_bundle(key, data=DATA)), policy, artifact=DATA)
    assert result.kind == "message-signature" and result.signer.name == "key0"
    assert result.signed_at is not None and result.root == "private"
    stmt = statement([("f", hashlib.sha256(DATA).hexdigest())], "https://p.test/v1", {})
    dsse = verify_bundle(_raw(instance.key_bundle(key, payload=stmt)), policy, artifact=DATA)
    assert dsse.statement().predicate_type == "https://p.test/v1"


@pytest.mark.parametrize("kind", ["ecdsa", "rsa"])
def test_digest_only(instance: PrivateSigstore, root: SigstoreRoot, kind: str) -> None:
    key = keys.shared(kind)
    digest = ArtifactDigest(hashlib.sha256(DATA).digest())
    verify_bundle(_raw(instance.key_bundle(key, data=DATA)), key_policy(root, key), artifact=digest)


def test_ed25519_needs_the_bytes(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    key = keys.shared("ed25519")
    digest = ArtifactDigest(hashlib.sha256(DATA).digest())
    with pytest.raises(Rejected, match="give the file, not its digest"):
        verify_bundle(
            _raw(instance.key_bundle(key, data=DATA)), key_policy(root, key), artifact=digest
        )


def test_wrong_key_and_tampering(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    key = keys.shared("ecdsa")
    bundle = _raw(instance.key_bundle(key, data=DATA))
    with pytest.raises(Rejected, match="does not verify with a trusted key"):
        verify_bundle(bundle, key_policy(root, keys.generate("ecdsa")), artifact=DATA)
    with pytest.raises(Rejected, match="message digest does not match"):
        verify_bundle(bundle, key_policy(root, key), artifact=DATA + b"x")
    with pytest.raises(Rejected, match="no trusted key may sign it"):
        verify_bundle(bundle, key_policy(root, key), artifact=DATA, signers=())


def test_replayed_entry(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    key = keys.shared("ecdsa")
    first = instance.key_bundle(key, data=DATA)
    second = instance.key_bundle(key, data=b"second")
    second["verificationMaterial"]["tlogEntries"] = first["verificationMaterial"]["tlogEntries"]
    with pytest.raises(Rejected, match="inconsistent with the bundle: .*another artifact digest"):
        verify_bundle(_raw(second), key_policy(root, key), artifact=b"second")


def _entry(bundle: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = bundle["verificationMaterial"]["tlogEntries"][0]
    return entry


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (
            lambda b: _entry(b)["inclusionPromise"].update(signedEntryTimestamp=b64(b"0" * 70)),
            "signed entry timestamp is not a valid signature",
        ),
        (lambda b: _entry(b).update(integratedTime="1700000000"), "signed entry timestamp"),
        # An extra hash breaks any proof (reversing a one-hash proof changes nothing).
        (
            lambda b: _entry(b)["inclusionProof"]["hashes"].append(b64(b"\x11" * 32)),
            "inclusion proof",
        ),
        (
            lambda b: _entry(b)["inclusionProof"].update(rootHash=b64(b"\x00" * 32)),
            "inclusion proof does not lead",
        ),
        (
            lambda b: _entry(b)["inclusionProof"]["checkpoint"].update(
                envelope=_entry(b)["inclusionProof"]["checkpoint"]["envelope"].replace(
                    "4242", "4243"
                )
            ),
            "checkpoint is not signed by the log key",
        ),
        (lambda b: _entry(b).pop("inclusionProof"), "no inclusion proof"),
        (lambda b: _entry(b).update(logId={"keyId": b64(b"\x01" * 32)}), "no trusted root knows"),
        (lambda b: b.update(mediaType="application/vnd.dev.sigstore.bundle.v9+json"), "media type"),
        (lambda b: b["verificationMaterial"]["tlogEntries"].append({}), "exactly one"),
        (lambda b: b.update(dsseEnvelope={}), "exactly one of messageSignature"),
        (lambda b: _entry(b).update(logIndex="-1"), "malformed transparency log entry"),
        (
            lambda b: _entry(b).update(kindVersion={"kind": "hashedrekord", "version": "0.0.2"}),
            "body is hashedrekord/0.0.1",
        ),
    ],
)
def test_log_proof_rejections(
    instance: PrivateSigstore, root: SigstoreRoot, mutate: Any, reason: str
) -> None:
    key = keys.shared("ecdsa")
    bundle = copy.deepcopy(instance.key_bundle(key, data=DATA))
    mutate(bundle)
    with pytest.raises(Rejected, match=reason):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


def test_checkpoint_by_another_key(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    checkpoint = _entry(bundle)["inclusionProof"]["checkpoint"]
    note = checkpoint["envelope"].split("\n\n")[0] + "\n"
    rogue = ec.generate_private_key(ec.SECP256R1())
    forged = rogue.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
    hint = instance.log_id[:4]  # claims to be the real log
    checkpoint["envelope"] = f"{note}\n\u2014 {instance.name}-rekor {b64(hint + forged)}\n"
    with pytest.raises(Rejected, match="checkpoint is not signed by the log key"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


def test_checkpoint_hint_of_the_ed25519_form_for_an_ecdsa_log(
    instance: PrivateSigstore, root: SigstoreRoot
) -> None:
    """The C2SP key-hash hint is the Ed25519 form only: an ECDSA log's checkpoint names its key
    by the log ID, even when the signature itself is the log's."""
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    checkpoint = _entry(bundle)["inclusionProof"]["checkpoint"]
    note = checkpoint["envelope"].split("\n\n")[0] + "\n"
    name = f"{instance.name}-rekor"
    spki = instance.log_key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    hint = hashlib.sha256(name.encode() + b"\n\x01" + spki[-32:]).digest()[:4]
    signature = instance.log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
    checkpoint["envelope"] = f"{note}\n\u2014 {name} {b64(hint + signature)}\n"
    with pytest.raises(Rejected, match="checkpoint is not signed by the log key"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


@pytest.mark.parametrize("field", ["rootHash", "hashes"])
def test_proof_hashes_in_loose_base64(
    instance: PrivateSigstore, root: SigstoreRoot, field: str
) -> None:
    """Base64 with characters outside its alphabet is malformed, not decoded around."""
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    proof = _entry(bundle)["inclusionProof"]
    if field == "rootHash":
        proof["rootHash"] = "!" + proof["rootHash"]
    else:
        proof["hashes"] = ["!" + h for h in proof["hashes"]] or pytest.fail("a proof with hashes")
    with pytest.raises(Rejected, match="malformed transparency log entry"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


def test_dsse_key_bundle_tampering(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    key = keys.shared("ecdsa")
    stmt = statement([("f", hashlib.sha256(DATA).hexdigest())], "https://p.test/v1", {})
    bundle = instance.key_bundle(key, payload=stmt)
    bundle["dsseEnvelope"]["payload"] = b64(stmt.replace(b"p.test", b"q.test"))
    with pytest.raises(Rejected, match="no DSSE signature verifies"):
        verify_bundle(_raw(bundle), key_policy(root, key))


def test_checkpoint_parsing() -> None:
    with pytest.raises(Rejected, match="blank line"):
        tlog.Checkpoint.parse("origin\n1\nAAAA\n")
    with pytest.raises(Rejected, match="origin, a tree size"):
        tlog.Checkpoint.parse("origin\n1\n\n\u2014 name AAAAAAAA\n")
    with pytest.raises(Rejected, match="no signature"):
        tlog.Checkpoint.parse("origin\n1\nAAAA\n\n")
    parsed = tlog.Checkpoint.parse("o\n7\nAAAA\nextra\n\n\u2014 n AQIDBAU=\n")
    assert (parsed.size, parsed.note, parsed.signatures[0][1]) == (
        7,
        b"o\n7\nAAAA\nextra\n",
        b"\x01\x02\x03\x04",
    )


# --- rejections that each need their own test (issue 7 §7: planted bugs that survived) ----------


def _relogged(instance: PrivateSigstore, bundle: dict[str, Any], body: bytes) -> None:
    """Replace the bundle's log entry by a validly logged entry for `body`."""
    bundle["verificationMaterial"]["tlogEntries"] = [instance.log_entry(body)]


def test_log_entry_recording_another_signature(
    instance: PrivateSigstore, root: SigstoreRoot
) -> None:
    """The log proves another signature by the same key over the same artifact: not this one."""
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    digest = hashlib.sha256(DATA).digest()
    other_signature = key.sign(DATA, ec.ECDSA(hashes.SHA256()))  # ECDSA: a fresh nonce
    body = instance.hashedrekord_body(digest, other_signature, keys.public_pem(key))
    _relogged(instance, bundle, body)
    with pytest.raises(Rejected, match="log entry records another signature"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


@pytest.mark.parametrize("side", ["lower", "higher"])
def test_log_entry_recording_another_signature_on_either_side(
    instance: PrivateSigstore, root: SigstoreRoot, side: str
) -> None:
    """Another signature whose bytes sort below, then above, the bundle's: only equality passes
    (an ordering comparison in place of `!=` would let one side through)."""
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    digest = hashlib.sha256(DATA).digest()
    # fresh ECDSA nonces give distinct signatures: the bundle carries the middle one of nine, so
    # the lowest and the highest lie on either side of it whatever was drawn (drawing until one
    # fell on the asked side failed when the bundle's own signature was near an end)
    pool = sorted({key.sign(DATA, ec.ECDSA(hashes.SHA256())) for _ in range(9)})
    assert len(pool) >= 3
    signature = pool[len(pool) // 2]
    bundle["messageSignature"]["signature"] = b64(signature)
    other = pool[0] if side == "lower" else pool[-1]
    assert (other < signature) == (side == "lower")
    _relogged(instance, bundle, instance.hashedrekord_body(digest, other, keys.public_pem(key)))
    with pytest.raises(Rejected, match="log entry records another signature"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


def test_log_entry_recording_another_key(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    digest = hashlib.sha256(DATA).digest()
    signature = tlog.b64decode(bundle["messageSignature"]["signature"])
    other = keys.generate("ecdsa")
    _relogged(
        instance, bundle, instance.hashedrekord_body(digest, signature, keys.public_pem(other))
    )
    with pytest.raises(Rejected, match="log entry records another signing key"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


@pytest.mark.parametrize("field", ["root", "root-below", "root-above", "size"])
def test_signed_checkpoint_for_another_tree(
    instance: PrivateSigstore, root: SigstoreRoot, field: str
) -> None:
    """A checkpoint validly signed by the log, but for another tree than the inclusion proof's:
    the proof is then anchored to nothing the log signed."""
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    proof = _entry(bundle)["inclusionProof"]
    origin, size, root_hash = proof["checkpoint"]["envelope"].split("\n")[:3]
    # below and above: any order between the two roots is refused, only equality passes
    if field.startswith("root"):
        fill = {"root": b"\x07", "root-below": b"\x00", "root-above": b"\xff"}[field]
        root_hash = b64(fill * 32)
    else:
        size = str(int(size) + 1)
    note = f"{origin}\n{size}\n{root_hash}\n"
    signature = instance.log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
    proof["checkpoint"]["envelope"] = (
        f"{note}\n\u2014 {instance.name}-rekor {b64(instance.log_id[:4] + signature)}\n"
    )
    expected = "root hash differs" if field.startswith("root") else "tree size differs"
    with pytest.raises(Rejected, match=f"checkpoint {expected} from the inclusion proof"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


@pytest.mark.parametrize("stated", [b"\x00" * 32, b"\xff" * 32], ids=["below", "above"])
def test_inclusion_proof_to_another_root_under_a_signed_checkpoint(
    instance: PrivateSigstore, root: SigstoreRoot, stated: bytes
) -> None:
    """The proof states a root below, then above, the one its hashes lead to, and the log signs
    a checkpoint for that stated root: the recomputed root must equal it, not merely order."""
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    proof = _entry(bundle)["inclusionProof"]
    origin, size = proof["checkpoint"]["envelope"].split("\n")[:2]
    proof["rootHash"] = b64(stated)
    note = f"{origin}\n{size}\n{b64(stated)}\n"
    signature = instance.log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
    proof["checkpoint"]["envelope"] = (
        f"{note}\n\u2014 {instance.name}-rekor {b64(instance.log_id[:4] + signature)}\n"
    )
    with pytest.raises(Rejected, match="inclusion proof does not lead to the stated root hash"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


def test_verify_entry_requires_a_proof_when_asked(
    instance: PrivateSigstore, root: SigstoreRoot
) -> None:
    """A v0.2+ bundle's entry with a signed entry timestamp but no inclusion proof."""
    doc = copy.deepcopy(_entry(instance.key_bundle(keys.shared("ecdsa"), data=DATA)))
    del doc["inclusionProof"]
    entry = tlog.LogEntry.from_bundle(doc)
    with pytest.raises(Rejected, match="no inclusion proof"):
        tlog.verify_entry(entry, [root], require_proof=True)
    assert tlog.verify_entry(entry, [root], require_proof=False)[2] is not None


def _material(b: dict[str, Any]) -> dict[str, Any]:
    material: dict[str, Any] = b["verificationMaterial"]
    return material


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b.pop("verificationMaterial"), "no verificationMaterial"),
        (lambda b: b.update(verificationMaterial=[]), "no verificationMaterial"),
        (lambda b: _material(b).update(tlogEntries={}), "exactly one transparency log entry"),
        (lambda b: _material(b).update(tlogEntries=[]), "exactly one transparency log entry"),
        (lambda b: b.pop("messageSignature"), "exactly one of messageSignature"),
        (
            lambda b: _entry(b)["inclusionProof"].pop("checkpoint"),
            "no inclusion proof with a checkpoint",
        ),
        (lambda b: _entry(b).pop("inclusionPromise"), "neither a signed entry timestamp"),
        (lambda b: b["messageSignature"].pop("signature"), "messageSignature has no signature"),
        (lambda b: b.update(messageSignature="sig"), "messageSignature has no signature"),
        (lambda b: b["messageSignature"].update(signature="!!"), "not base64"),
        (
            lambda b: b["messageSignature"].update(messageDigest="x"),
            "messageDigest is not an object",
        ),
        (
            lambda b: b["messageSignature"]["messageDigest"].update(algorithm="SHA2_384"),
            "unsupported message digest algorithm SHA2_384",
        ),
        (
            lambda b: _entry(b).update(kindVersion={"kind": "dsse", "version": "0.0.1"}),
            "body is hashedrekord/0.0.1",
        ),
    ],
)
def test_bundle_shape_rejections(
    instance: PrivateSigstore, root: SigstoreRoot, mutate: Any, reason: str
) -> None:
    key = keys.shared("ecdsa")
    bundle = copy.deepcopy(instance.key_bundle(key, data=DATA))
    mutate(bundle)
    with pytest.raises(Rejected, match=reason):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


def test_v01_and_v02_bundles(instance: PrivateSigstore, root: SigstoreRoot) -> None:
    """v0.1 needs a signed entry timestamp and no proof; v0.2 and later need the proof, and a
    signed entry timestamp or a signed timestamp."""
    key = keys.shared("ecdsa")
    policy = key_policy(root, key)
    for media in (
        "application/vnd.dev.sigstore.bundle+json;version=0.1",
        "application/vnd.dev.sigstore.bundle+json;version=0.2",
        "application/vnd.dev.sigstore.bundle+json;version=0.3",
    ):
        bundle = copy.deepcopy(instance.key_bundle(key, data=DATA))
        bundle["mediaType"] = media
        assert verify_bundle(_raw(bundle), policy, artifact=DATA).signed_at is not None
        no_proof = copy.deepcopy(bundle)
        _entry(no_proof).pop("inclusionProof")
        if media.endswith("0.1"):
            verify_bundle(_raw(no_proof), policy, artifact=DATA)
            no_set = copy.deepcopy(bundle)
            _entry(no_set).pop("inclusionPromise")
            with pytest.raises(Rejected, match="v0.1 bundle must carry a signed entry timestamp"):
                verify_bundle(_raw(no_set), policy, artifact=DATA)
        else:
            with pytest.raises(Rejected, match="no inclusion proof"):
                verify_bundle(_raw(no_proof), policy, artifact=DATA)
    stamped = copy.deepcopy(instance.key_bundle(key, data=DATA))
    _entry(stamped).pop("inclusionPromise")
    _material(stamped)["timestampVerificationData"] = {"rfc3161Timestamps": [{}]}
    result = verify_bundle(_raw(stamped), policy, artifact=DATA)
    assert result.signed_at is None  # the integrated time is bound by no signature


def test_message_digest_is_optional_but_checked(
    instance: PrivateSigstore, root: SigstoreRoot
) -> None:
    key = keys.shared("ecdsa")
    bundle = copy.deepcopy(instance.key_bundle(key, data=DATA))
    bundle["messageSignature"].pop("messageDigest")
    verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)
    digest_only = ArtifactDigest(hashlib.sha256(DATA).digest())
    verify_bundle(_raw(bundle), key_policy(root, key), artifact=digest_only)
    with pytest.raises(Rejected, match="does not verify with a trusted key"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA + b"!")


def test_results_are_frozen(instance: PrivateSigstore, root: SigstoreRoot) -> None:

    key = keys.shared("ecdsa")
    result = keybundle.verify_key_bundle(
        instance.key_bundle(key, data=DATA),
        artifact=DATA,
        digest=None,
        keys=[TrustedKey.from_pem(keys.public_pem(key))],
        roots=[root],
    )
    with pytest.raises(AttributeError):
        result.root = "other"  # type: ignore[misc]


@pytest.mark.parametrize("kind", ["dsse", "intoto"])
def test_message_signature_logged_as_another_kind(
    instance: PrivateSigstore, root: SigstoreRoot, kind: str
) -> None:
    """A validly logged entry of another kind (sorting before or after hashedrekord) proves
    nothing about a message signature."""
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    envelope = {"payload": b64(b"{}"), "payloadType": "t", "signatures": []}
    build = instance.dsse_body if kind == "dsse" else instance.intoto_body
    body = build(envelope, b"{}", [(b"sig", keys.public_pem(key))])
    bundle["verificationMaterial"]["tlogEntries"] = [instance.log_entry(body, kind=kind)]
    with pytest.raises(
        Rejected, match=f"message signature logged as {kind}, expected hashedrekord"
    ):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


@pytest.mark.parametrize("declared", [b"\x00" * 32, b"\xff" * 32])
def test_declared_message_digest_must_equal(
    instance: PrivateSigstore, root: SigstoreRoot, declared: bytes
) -> None:
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    bundle["messageSignature"]["messageDigest"]["digest"] = b64(declared)
    with pytest.raises(Rejected, match="message digest does not match"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)


@pytest.mark.parametrize("algorithm", ["SHA2_384", "SHA2_1"])
def test_declared_digest_algorithm_must_be_sha256(
    instance: PrivateSigstore, root: SigstoreRoot, algorithm: str
) -> None:
    key = keys.shared("ecdsa")
    bundle = instance.key_bundle(key, data=DATA)
    bundle["messageSignature"]["messageDigest"]["algorithm"] = algorithm
    with pytest.raises(Rejected, match=f"unsupported message digest algorithm {algorithm}"):
        verify_bundle(_raw(bundle), key_policy(root, key), artifact=DATA)
