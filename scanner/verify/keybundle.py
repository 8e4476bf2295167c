"""Sigstore bundles signed with a public key (no certificate), verified with `cryptography`.

sigstore-python cannot parse these (sigstore-python#1244), so this module checks them itself:
the signature with a trusted key, the transparency-log body against the signed material, the
signed entry timestamp, and the inclusion proof with its checkpoint against the log keys of a
pinned trusted root.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from msgspec import Struct

from scanner.verify import tlog
from scanner.verify.dsse import Envelope, b64decode, verify_envelope
from scanner.verify.errors import Rejected
from scanner.verify.keys import TrustedKey
from scanner.verify.trusted_roots import SigstoreRoot

BUNDLE_V01 = "application/vnd.dev.sigstore.bundle+json;version=0.1"
BUNDLE_V02 = "application/vnd.dev.sigstore.bundle+json;version=0.2"
BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
BUNDLE_V03_ALT = "application/vnd.dev.sigstore.bundle+json;version=0.3"
BUNDLE_MEDIA_TYPES = (BUNDLE_V01, BUNDLE_V02, BUNDLE_V03, BUNDLE_V03_ALT)


class KeyBundleResult(Struct, frozen=True):
    key: TrustedKey
    kind: str  # "message-signature" | "dsse"
    payload_type: str | None
    payload: bytes | None
    signed_at: datetime | None
    root: str


def bundle_shape(doc: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], tlog.LogEntry]:
    """Check the parts every bundle needs; return media type, verification material, entry."""
    media = doc.get("mediaType")
    if media not in BUNDLE_MEDIA_TYPES:
        raise Rejected(f"unsupported Sigstore bundle media type {media!r}")
    material = doc.get("verificationMaterial")
    if not isinstance(material, dict):
        raise Rejected("bundle has no verificationMaterial")
    entries = material.get("tlogEntries")
    if not isinstance(entries, list) or len(entries) != 1:
        raise Rejected("bundle must carry exactly one transparency log entry")
    if ("messageSignature" in doc) == ("dsseEnvelope" in doc):
        raise Rejected("bundle must carry exactly one of messageSignature, dsseEnvelope")
    entry = tlog.LogEntry.from_bundle(entries[0])
    if media == BUNDLE_V01:
        if entry.set_signature is None:
            raise Rejected("a v0.1 bundle must carry a signed entry timestamp")
    else:
        if entry.proof is None or entry.proof.checkpoint is None:
            raise Rejected("bundle log entry has no inclusion proof with a checkpoint")
        if entry.set_signature is None and not material.get("timestampVerificationData"):
            raise Rejected("bundle has neither a signed entry timestamp nor a signed timestamp")
    return str(media), material, entry


def message_signature(
    doc: Mapping[str, Any], artifact: bytes | None, digest: bytes | None
) -> tuple[bytes, bytes]:
    """Return (signature, artifact SHA-256) of a message-signature bundle, digests checked."""
    part = doc["messageSignature"]
    if not isinstance(part, dict) or "signature" not in part:
        raise Rejected("messageSignature has no signature")
    try:
        signature = base64.b64decode(part["signature"], validate=True)
    except (binascii.Error, TypeError) as e:
        raise Rejected(f"messageSignature signature is not base64: {e}") from e
    if artifact is not None:
        digest = hashlib.sha256(artifact).digest()
    if digest is None:
        raise Rejected("a message-signature bundle needs the artifact or its digest")
    declared = part.get("messageDigest")
    if declared is not None and not isinstance(declared, dict):
        raise Rejected("messageDigest is not an object")
    if declared:
        if declared.get("algorithm") != "SHA2_256":
            raise Rejected(f"unsupported message digest algorithm {declared.get('algorithm')}")
        if b64decode(declared.get("digest", "")) != digest:
            raise Rejected("bundle message digest does not match the artifact")
    return signature, digest


def verify_key_bundle(
    doc: Mapping[str, Any],
    *,
    artifact: bytes | None,
    digest: bytes | None,
    keys: Sequence[TrustedKey],
    roots: Sequence[SigstoreRoot],
) -> KeyBundleResult:
    """Verify a public-key bundle; any failure raises `Rejected` with the reason."""
    if not keys:
        raise Rejected("bundle is signed with a public key but no trusted key may sign it")
    # (1) Shape: media type, one log entry, one kind of content, proofs the version requires.
    media, _material, entry = bundle_shape(doc)
    body = entry.body_json()
    # (2) Signature with a trusted key, and (3) the log body's consistency with it (the log
    # must record this very signature and key, or it proves nothing: CVE-2022-36056 style).
    if "messageSignature" in doc:
        signature, digest = message_signature(doc, artifact, digest)
        key = _verify_message(signature, artifact, digest, keys)
        if entry.kind != "hashedrekord":
            raise Rejected(f"message signature logged as {entry.kind}, expected hashedrekord")
        problem = tlog.hashedrekord_matches(
            body, digest=digest, signature=signature, public_der=key.spki_der
        )
        kind, payload_type, payload = "message-signature", None, None
    else:
        envelope = Envelope.from_dict(doc["dsseEnvelope"])
        key = verify_envelope(envelope, keys)
        problem = tlog.dsse_entry_matches(body, envelope, key.spki_der)
        kind, payload_type, payload = "dsse", envelope.payload_type, envelope.payload
    if problem:
        raise Rejected(f"transparency log entry is inconsistent with the bundle: {problem}")
    # (4) Log proofs: SET, inclusion proof and checkpoint against the pinned log keys.
    root, _log_key, signed_at = tlog.verify_entry(entry, roots, require_proof=media != BUNDLE_V01)
    return KeyBundleResult(key, kind, payload_type, payload, signed_at, root.name)


def _verify_message(
    signature: bytes, artifact: bytes | None, digest: bytes, keys: Sequence[TrustedKey]
) -> TrustedKey:
    for key in keys:
        ok = key.verify(signature, artifact) if artifact is not None else None
        if ok is None:
            ok = key.verify_digest(signature, digest)
        if ok:
            return key
    tried = ", ".join(k.describe() for k in keys)
    raise Rejected(f"bundle signature does not verify with a trusted key (tried {tried})")
