"""Transparency-log proofs checked offline: signed entry timestamps, RFC 6962 inclusion proofs
and signed checkpoints, against the log keys of a pinned Sigstore trusted root.

Shared by the key-based bundle verifier, cosign's legacy bundle annotation and our own path for
log entry kinds that sigstore-python does not take.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from msgspec import Struct

from scanner.loaders import load_json
from scanner.verify.dsse import Envelope, b64decode
from scanner.verify.errors import Rejected
from scanner.verify.trusted_roots import LogKey, SigstoreRoot


class InclusionProof(Struct, frozen=True):
    log_index: int
    root_hash: bytes
    tree_size: int
    hashes: tuple[bytes, ...]
    checkpoint: str | None


class LogEntry(Struct, frozen=True):
    """One Rekor entry as a Sigstore bundle (or cosign annotation) carries it."""

    log_index: int
    log_id: bytes
    kind: str
    version: str
    integrated_time: int | None
    set_signature: bytes | None
    proof: InclusionProof | None
    body: bytes

    @classmethod
    def from_bundle(cls, obj: object) -> LogEntry:
        """Parse a `tlogEntries[]` item of a Sigstore bundle."""
        try:
            if not isinstance(obj, dict):
                raise TypeError("not an object")
            kv = obj["kindVersion"]
            promise = obj.get("inclusionPromise")
            proof_doc = obj.get("inclusionProof")
            proof = None
            if proof_doc:
                checkpoint = (proof_doc.get("checkpoint") or {}).get("envelope")
                if checkpoint is not None and not isinstance(checkpoint, str):
                    raise TypeError("checkpoint envelope is not text")
                proof = InclusionProof(
                    _uint(proof_doc["logIndex"]),
                    base64.b64decode(proof_doc["rootHash"], validate=True),
                    _uint(proof_doc["treeSize"]),
                    tuple(base64.b64decode(h, validate=True) for h in proof_doc.get("hashes", [])),
                    checkpoint,
                )
            integrated = obj.get("integratedTime")
            return cls(
                _uint(obj["logIndex"]),
                base64.b64decode(obj["logId"]["keyId"], validate=True),
                str(kv["kind"]),
                str(kv["version"]),
                _uint(integrated) if integrated not in (None, "", "0", 0) else None,
                base64.b64decode(promise["signedEntryTimestamp"], validate=True)
                if promise
                else None,
                proof,
                base64.b64decode(obj["canonicalizedBody"], validate=True),
            )
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as e:
            raise Rejected(f"malformed transparency log entry: {e}") from e

    @classmethod
    def from_cosign_bundle(cls, annotation: str) -> LogEntry:
        """Parse cosign's `dev.sigstore.cosign/bundle` annotation (a Rekor v1 SET, no proof)."""
        try:
            doc = load_json(annotation)
            payload = doc["Payload"]
            kind = load_json(base64.b64decode(payload["body"]))
            return cls(
                _uint(payload["logIndex"]),
                bytes.fromhex(payload["logID"]),
                str(kind["kind"]),
                str(kind["apiVersion"]),
                _uint(payload["integratedTime"]),
                base64.b64decode(doc["SignedEntryTimestamp"], validate=True),
                None,
                base64.b64decode(payload["body"], validate=True),
            )
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as e:
            raise Rejected(f"malformed cosign bundle annotation: {e}") from e

    def body_json(self) -> dict[str, Any]:
        """The canonicalized body as JSON; its kind and version must equal the entry's."""
        try:
            doc = load_json(self.body)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise Rejected(f"log entry body is not JSON: {e}") from e
        if not isinstance(doc, dict):
            raise Rejected("log entry body is not a JSON object")
        if doc.get("kind") != self.kind or doc.get("apiVersion") != self.version:
            raise Rejected(
                f"log entry body is {doc.get('kind')}/{doc.get('apiVersion')}, "
                f"entry says {self.kind}/{self.version}"
            )
        return doc

    @property
    def integrated_at(self) -> datetime | None:
        if self.integrated_time is None:
            return None
        return datetime.fromtimestamp(self.integrated_time, tz=UTC)


def _uint(value: object) -> int:
    number = int(str(value))
    if number < 0:
        raise ValueError(f"negative value {number}")
    return number


def leaf_hash(body: bytes) -> bytes:
    """RFC 6962 §2.1 leaf hash."""
    return hashlib.sha256(b"\x00" + body).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 §2.1 interior node hash."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """Recompute the tree root from an audit path (RFC 9162 §2.1.3.2)."""
    if index >= size:
        raise Rejected(f"inclusion proof index {index} is outside the tree of size {size}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise Rejected("inclusion proof has too many hashes")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while fn and not fn & 1:  # RFC 9162: right-shift fn and sn until fn's LSB is set
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise Rejected("inclusion proof has too few hashes")
    return r


_SIG_LINE = re.compile(r"^\u2014 (\S+) (\S+)$")


class Checkpoint(Struct, frozen=True):
    origin: str
    size: int
    root_hash: bytes
    note: bytes  # the signed text, through its final newline
    signatures: tuple[tuple[str, bytes, bytes], ...]  # (name, key hint, signature)

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Parse a signed note carrying a log checkpoint (C2SP tlog-checkpoint, signed-note)."""
        if text.count("\n\n") < 1:
            raise Rejected("checkpoint has no blank line before its signatures")
        head, _, tail = text.partition("\n\n")
        lines = head.split("\n")
        if len(lines) < 3 or not lines[0]:
            raise Rejected("checkpoint needs an origin, a tree size and a root hash")
        try:
            size = int(lines[1])
            root = base64.b64decode(lines[2], validate=True)
        except (ValueError, binascii.Error) as e:
            raise Rejected(f"malformed checkpoint: {e}") from e
        sigs = []
        for line in tail.split("\n"):
            if not line:
                continue
            match = _SIG_LINE.match(line)
            if not match:
                raise Rejected(f"malformed checkpoint signature line {line!r}")
            try:
                raw = base64.b64decode(match.group(2), validate=True)
            except binascii.Error as e:
                raise Rejected(f"malformed checkpoint signature: {e}") from e
            if len(raw) < 5:
                raise Rejected("checkpoint signature is too short")
            sigs.append((match.group(1), raw[:4], raw[4:]))
        if not sigs:
            raise Rejected("checkpoint carries no signature")
        return cls(lines[0], size, root, (head + "\n").encode(), tuple(sigs))


def _note_key_hints(name: str, log: LogKey) -> set[bytes]:
    hints = {log.key_id[:4]}
    if log.key.algorithm.value == "ed25519":
        # C2SP signed-note: key hash = SHA-256(name || "\n" || 0x01 || raw Ed25519 key)[:4].
        raw = log.key.spki_der[-32:]
        hints.add(hashlib.sha256(name.encode() + b"\n\x01" + raw).digest()[:4])
    return hints


def verify_checkpoint(proof: InclusionProof, log: LogKey) -> None:
    """A checkpoint signature by the log's key must cover the proof's root and size."""
    if proof.checkpoint is None:
        raise Rejected("inclusion proof has no checkpoint")
    checkpoint = Checkpoint.parse(proof.checkpoint)
    signed = False
    for name, hint, signature in checkpoint.signatures:
        if hint in _note_key_hints(name, log) and log.key.verify(signature, checkpoint.note):
            signed = True
            break
    if not signed:
        raise Rejected(f"checkpoint is not signed by the log key of {log.url or 'the log'}")
    if checkpoint.root_hash != proof.root_hash:
        raise Rejected("checkpoint root hash differs from the inclusion proof's root hash")
    if checkpoint.size != proof.tree_size:
        raise Rejected("checkpoint tree size differs from the inclusion proof's tree size")


def verify_inclusion(entry: LogEntry, log: LogKey) -> None:
    """RFC 6962 inclusion of the entry body under a checkpoint signed by the log."""
    proof = entry.proof
    if proof is None:
        raise Rejected("log entry has no inclusion proof")
    root = root_from_inclusion_proof(
        proof.log_index, proof.tree_size, leaf_hash(entry.body), proof.hashes
    )
    if root != proof.root_hash:
        raise Rejected("inclusion proof does not lead to the stated root hash")
    verify_checkpoint(proof, log)


def set_payload(entry: LogEntry) -> bytes:
    """The RFC 8785 canonical JSON that a Rekor v1 signed entry timestamp signs.

    Its four members are ASCII-only strings and integers, for which sorted-key compact JSON is
    exactly RFC 8785.
    """
    payload = {
        "body": base64.b64encode(entry.body).decode(),
        "integratedTime": entry.integrated_time,
        "logID": entry.log_id.hex(),
        "logIndex": entry.log_index,
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def verify_set(entry: LogEntry, log: LogKey) -> None:
    """The signed entry timestamp (inclusion promise) must be the log's signature."""
    if entry.set_signature is None or entry.integrated_time is None:
        raise Rejected("log entry has no signed entry timestamp")
    if not log.key.verify(entry.set_signature, set_payload(entry)):
        raise Rejected("signed entry timestamp is not a valid signature of the log")


def find_log(entry: LogEntry, roots: Sequence[SigstoreRoot]) -> tuple[SigstoreRoot, LogKey]:
    """The pinned root and log key whose log ID the entry names."""
    for root in roots:
        log = root.tlog(entry.log_id)
        if log is not None:
            return root, log
    raise Rejected(
        f"log entry is from a transparency log that no trusted root knows "
        f"(log ID {entry.log_id.hex()[:16]}…)"
    )


def verify_entry(
    entry: LogEntry, roots: Sequence[SigstoreRoot], *, require_proof: bool
) -> tuple[SigstoreRoot, LogKey, datetime | None]:
    """Check the entry's log proofs; return the root, the log and the verified log time.

    The integrated time counts as a time source only when a signed entry timestamp binds it.
    """
    root, log = find_log(entry, roots)
    verified_time = None
    if entry.set_signature is not None:
        verify_set(entry, log)
        verified_time = entry.integrated_at
    if entry.proof is not None:
        verify_inclusion(entry, log)
    elif require_proof:
        raise Rejected("log entry has no inclusion proof")
    if entry.set_signature is None and entry.proof is None:
        raise Rejected("log entry has neither a signed entry timestamp nor an inclusion proof")
    if verified_time is not None and not log.valid_at(verified_time):
        raise Rejected(
            f"log entry time {verified_time:%Y-%m-%dT%H:%M:%SZ} is outside the validity of "
            f"log key {log.url} in trusted root {root.name}"
        )
    return root, log, verified_time


def hashedrekord_matches(
    body: Mapping[str, Any], *, digest: bytes, signature: bytes, public_der: bytes
) -> str | None:
    """Why a hashedrekord 0.0.1/0.0.2 body differs from the signed material, or None."""
    try:
        spec = body["spec"]
        if body["apiVersion"] == "0.0.1":
            hash_doc = spec["data"]["hash"]
            if hash_doc["algorithm"] != "sha256" or hash_doc["value"].lower() != digest.hex():
                return "log entry records another artifact digest"
            logged_sig = base64.b64decode(spec["signature"]["content"])
            logged_key = base64.b64decode(spec["signature"]["publicKey"]["content"])
        elif body["apiVersion"] == "0.0.2":
            rekord = spec["hashedRekordV002"]
            if (
                rekord["data"].get("algorithm") != "SHA2_256"
                or base64.b64decode(rekord["data"]["digest"]) != digest
            ):
                return "log entry records another artifact digest"
            logged_sig = base64.b64decode(rekord["signature"]["content"])
            verifier = rekord["signature"]["verifier"]
            raw = verifier.get("publicKey") or verifier.get("x509Certificate") or {}
            logged_key = base64.b64decode(raw["rawBytes"])
        else:
            return f"unsupported hashedrekord version {body['apiVersion']}"
        if logged_sig != signature:
            return "log entry records another signature"
        if spki_of(logged_key) != public_der:
            return "log entry records another signing key"
    except (KeyError, TypeError, ValueError, binascii.Error, AttributeError) as e:
        return f"malformed hashedrekord log entry: {e}"
    return None


def spki_of(pem_or_der: bytes) -> bytes:
    """DER SubjectPublicKeyInfo of a PEM/DER public key or certificate, as logs record them."""
    if pem_or_der.startswith(b"-----BEGIN CERTIFICATE"):
        key: Any = x509.load_pem_x509_certificate(pem_or_der).public_key()
    elif pem_or_der.startswith(b"-----BEGIN"):
        key = serialization.load_pem_public_key(pem_or_der)
    else:
        try:
            key = x509.load_der_x509_certificate(pem_or_der).public_key()
        except ValueError:
            key = serialization.load_der_public_key(pem_or_der)
    der: bytes = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return der


def dsse_entry_matches(
    body: Mapping[str, Any], envelope: Envelope, public_der: bytes
) -> str | None:
    """Why a dsse/0.0.1, intoto/0.0.2 or hashedrekord/0.0.2 body differs from the envelope."""
    payload_hash = hashlib.sha256(envelope.payload).hexdigest()
    mine: set[tuple[bytes | None, bytes]] = {(s.sig, public_der) for s in envelope.signatures}
    try:
        kind, version, spec = body["kind"], body["apiVersion"], body["spec"]
        if kind == "dsse" and version == "0.0.1":
            hashed = spec["payloadHash"]
            if hashed["algorithm"] != "sha256" or hashed["value"].lower() != payload_hash:
                return "log entry records another DSSE payload"
            logged: set[tuple[bytes | None, bytes]] = {
                (b64decode(s["signature"]), spki_of(b64decode(s["verifier"])))
                for s in spec["signatures"]
            }
        elif kind == "intoto" and version == "0.0.2":
            content = spec["content"]
            hashed = content["payloadHash"]
            if hashed["algorithm"] != "sha256" or hashed["value"].lower() != payload_hash:
                return "log entry records another in-toto payload"
            logged_env = content["envelope"]
            if logged_env.get("payloadType") != envelope.payload_type:
                return "log entry records another payload type"
            # intoto/0.0.2 stores the envelope's base64 fields base64-encoded once more.
            if "payload" in logged_env:
                if _double_b64(logged_env["payload"]) != envelope.payload:
                    return "log entry records another in-toto payload"
            logged = {
                (_double_b64(s["sig"]), spki_of(b64decode(s["publicKey"])))
                for s in logged_env["signatures"]
            }
        elif kind == "hashedrekord" and version == "0.0.2":
            if len(envelope.signatures) != 1:
                return "a hashedrekord DSSE entry needs exactly one signature"
            return hashedrekord_matches(
                body,
                digest=hashlib.sha256(envelope.pae()).digest(),
                signature=envelope.signatures[0].sig,
                public_der=public_der,
            )
        else:
            return f"unsupported log entry kind {kind}/{version} for a DSSE envelope"
    except (
        KeyError,
        TypeError,
        ValueError,
        binascii.Error,
        AttributeError,
        Rejected,
    ) as e:
        return f"malformed {body.get('kind')} log entry: {e}"
    if logged != mine:
        return "log entry records other signatures or another signing key"
    return None


def _double_b64(text: str) -> bytes | None:
    """intoto/0.0.2 fields are base64 of the envelope's base64 text; None if not so encoded."""
    try:
        return b64decode(b64decode(text).decode("ascii"))
    except (UnicodeDecodeError, Rejected):
        return None
