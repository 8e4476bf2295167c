"""Sigstore bundles (v0.1-v0.3) verified offline against the trust policy's pinned roots.

Certificate (keyless) bundles go through sigstore-python's `Verifier` with an identity policy
built from the trust policy; public-key bundles through `keybundle`; intoto/0.0.2 log entries,
which sigstore-python refuses, through our own `fulcio` + `tlog` path. The result names the
trusted signer, so callers can check what that signer may vouch for.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from cryptography import x509
from msgspec import Struct

from scanner.loaders import load_json
from scanner.verify import fulcio, keybundle, tlog
from scanner.verify.dsse import INTOTO_PAYLOAD_TYPE, Envelope, verify_envelope
from scanner.verify.errors import Rejected
from scanner.verify.intoto import Statement
from scanner.verify.keys import TrustedKey
from scanner.verify.trust import Signer, TrustPolicy
from scanner.verify.trusted_roots import SigstoreRoot

_log = logging.getLogger("gpuprov.verify")

_CHUNK = 1 << 20


class ArtifactDigest(Struct, frozen=True):
    """The SHA-256 of an artifact, for digest-only verification of large files."""

    sha256: bytes

    @classmethod
    def from_hex(cls, text: str) -> ArtifactDigest:
        """Parse `sha256:HEX` or bare HEX."""
        value = text.lower().removeprefix("sha256:")
        try:
            raw = bytes.fromhex(value)
        except ValueError as e:
            raise Rejected(f"not a SHA-256 digest: {text!r}") from e
        if len(raw) != 32:
            raise Rejected(f"not a SHA-256 digest: {text!r}")
        return cls(raw)

    @classmethod
    def of_stream(cls, stream: BinaryIO) -> ArtifactDigest:
        h = hashlib.sha256()
        while chunk := stream.read(_CHUNK):
            h.update(chunk)
        return cls(h.digest())

    @classmethod
    def of_file(cls, path: Path) -> ArtifactDigest:
        with path.open("rb") as f:
            return cls.of_stream(f)

    @property
    def hex(self) -> str:
        return self.sha256.hex()


class BundleVerification(Struct, frozen=True):
    """What a verified bundle proves."""

    signer: Signer  # the policy entry that matched
    identity: str  # what the signature proved: certificate identity or key
    kind: str  # "message-signature" | "dsse"
    payload_type: str | None
    payload: bytes | None
    signed_at: datetime | None
    root: str

    def statement(self) -> Statement:
        """The in-toto statement of a DSSE bundle."""
        if self.kind != "dsse" or self.payload is None:
            raise Rejected("bundle carries no DSSE statement")
        if self.payload_type != INTOTO_PAYLOAD_TYPE:
            raise Rejected(f"DSSE payload type {self.payload_type!r} is not an in-toto statement")
        return Statement.from_bytes(self.payload)


def parse_bundle(raw: bytes | str) -> dict[str, Any]:
    """Parse bundle JSON into a dict; malformed input is rejected with the reason."""
    try:
        doc = load_json(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise Rejected(f"bundle is not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise Rejected("bundle is not a JSON object")
    return doc


def verify_bundle(
    raw: bytes | str,
    policy: TrustPolicy,
    *,
    artifact: bytes | ArtifactDigest | None = None,
    signers: Sequence[Signer] | None = None,
) -> BundleVerification:
    """Verify a Sigstore bundle by a signer of `policy` (restricted to `signers` when given).

    With `artifact`, a message signature must cover it and a DSSE statement must name it as a
    subject. Without it, only DSSE bundles verify; the caller checks the statement's subject.
    """
    doc = parse_bundle(raw)
    candidates = tuple(signers if signers is not None else policy.signers)
    material = doc.get("verificationMaterial")
    if not isinstance(material, dict):
        raise Rejected("bundle has no verificationMaterial")
    data = artifact if isinstance(artifact, bytes) else None
    digest = artifact.sha256 if isinstance(artifact, ArtifactDigest) else None
    if data is not None:
        digest = hashlib.sha256(data).digest()
    try:
        result = _dispatch(raw, doc, material, data, digest, candidates, policy)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
        # Our own paths parse untrusted JSON; whatever slipped past their checks fails closed.
        raise Rejected(f"malformed Sigstore bundle: {type(e).__name__}: {e}") from e
    if result.kind == "dsse" and digest is not None:
        result.statement().require_subject(digest.hex())
    elif result.kind == "message-signature" and digest is None:
        raise Rejected("a message-signature bundle needs the artifact or its digest")
    return result


def _dispatch(
    raw: bytes | str,
    doc: Mapping[str, Any],
    material: Mapping[str, Any],
    data: bytes | None,
    digest: bytes | None,
    candidates: Sequence[Signer],
    policy: TrustPolicy,
) -> BundleVerification:
    if "publicKey" in material:
        return _verify_key(doc, data, digest, candidates, policy)
    keyless = tuple(s for s in candidates if s.identity is not None)
    if not keyless:
        raise Rejected("bundle is signed keyless but no trusted keyless identity may sign it")
    if not policy.roots:
        raise Rejected("no Sigstore trusted root is pinned for keyless verification")
    if _entry_kind(material) == ("intoto", "0.0.2"):
        return _verify_intoto_entry(doc, keyless, policy.roots)
    return _verify_with_sigstore(raw, doc, data, digest, keyless, policy.roots)


def _entry_kind(material: Mapping[str, Any]) -> tuple[str, str] | None:
    try:
        kv = material["tlogEntries"][0]["kindVersion"]
        return str(kv["kind"]), str(kv["version"])
    except (KeyError, IndexError, TypeError):
        return None


def _verify_key(
    doc: Mapping[str, Any],
    data: bytes | None,
    digest: bytes | None,
    candidates: Sequence[Signer],
    policy: TrustPolicy,
) -> BundleVerification:
    by_key: dict[str, Signer] = {}
    for s in candidates:
        if s.key is not None:
            by_key.setdefault(s.key.key_id, s)
    keys = [s.key for s in candidates if s.key is not None]
    roots = policy.roots or (SigstoreRoot.public_good(),)
    result = keybundle.verify_key_bundle(doc, artifact=data, digest=digest, keys=keys, roots=roots)
    signer = by_key[result.key.key_id]
    return BundleVerification(
        signer,
        result.key.describe(),
        result.kind,
        result.payload_type,
        result.payload,
        result.signed_at,
        result.root,
    )


class _IdentityPolicy:
    """A sigstore-python verification policy: the certificate must match a trusted identity."""

    def __init__(self, signers: Sequence[Signer]) -> None:
        self.signers = signers
        self.matched: Signer | None = None
        self.seen = ""

    def verify(self, cert: x509.Certificate) -> None:
        issuer, subjects = fulcio.cert_identity(cert)
        self.seen = fulcio.describe_identity(cert)
        for signer in self.signers:
            assert signer.identity is not None
            if signer.identity.matches(issuer, subjects):
                self.matched = signer
                return
        expected = "; ".join(s.identity.describe() for s in self.signers if s.identity)
        raise Rejected(f"certificate identity {self.seen} is not trusted (expected {expected})")


def _verify_with_sigstore(
    raw: bytes | str,
    doc: Mapping[str, Any],
    data: bytes | None,
    digest: bytes | None,
    signers: Sequence[Signer],
    roots: Sequence[SigstoreRoot],
) -> BundleVerification:
    # Imported here, not at the top: sigstore-python takes seconds to import on a cold cache,
    # and only keyless bundles need it.
    from sigstore.hashes import Hashed
    from sigstore.models import Bundle
    from sigstore.verify import Verifier
    from sigstore_models.common.v1 import HashAlgorithm

    try:
        bundle = Bundle.from_json(raw)
    except Exception as e:  # sigstore and pydantic errors: the bundle is malformed
        raise Rejected(f"malformed Sigstore bundle: {_first_line(e)}") from e
    is_dsse = "dsseEnvelope" in doc
    if not is_dsse and data is None and digest is None:
        raise Rejected("a message-signature bundle needs the artifact or its digest")
    reasons = []
    entry = tlog.LogEntry.from_bundle(doc["verificationMaterial"]["tlogEntries"][0])
    for root in roots:
        policy = _IdentityPolicy(signers)
        if root.tlog(entry.log_id) is None:
            reasons.append(
                (
                    root.name,
                    f"log entry is from a transparency log that {root.name} "
                    f"does not know (log ID {entry.log_id.hex()[:16]}…)",
                )
            )
            continue
        try:
            verifier = Verifier(trusted_root=root.sigstore())
            if is_dsse:
                payload_type, payload = verifier.verify_dsse(bundle, policy)
            else:
                subject: Any = data
                if data is None:
                    assert digest is not None
                    subject = Hashed(algorithm=HashAlgorithm.SHA2_256, digest=digest)
                verifier.verify_artifact(subject, bundle, policy)
                payload_type, payload = None, None
            times = _signing_times(doc, bundle, root)
            # sigstore-python does not check the root's validity windows for the CA and the log.
            fulcio.check_authority_windows(bundle.signing_certificate, root, times)
            _check_log_window(doc, root, times)
        except Rejected as e:
            reasons.append((root.name, str(e)))
            continue
        except Exception as e:  # fail closed on anything the verifier raises
            reasons.append((root.name, _explain(_first_line(e))))
            continue
        assert policy.matched is not None
        return BundleVerification(
            policy.matched,
            policy.seen,
            "dsse" if is_dsse else "message-signature",
            payload_type,
            payload,
            min(times) if times else None,
            root.name,
        )
    raise Rejected(_join(reasons))


def _signing_times(doc: Mapping[str, Any], bundle: Any, root: SigstoreRoot) -> list[datetime]:
    """The times sigstore-python verified: SET-bound integrated time and TSA timestamps."""
    entry = tlog.LogEntry.from_bundle(doc["verificationMaterial"]["tlogEntries"][0])
    times = []
    if entry.set_signature is not None and entry.integrated_at is not None:
        times.append(entry.integrated_at)
    stamps = _timestamps(doc)
    if stamps:
        times += fulcio.tsa_times(stamps, bundle.signature, root)
    return times


def _timestamps(doc: Mapping[str, Any]) -> list[bytes]:
    data = doc["verificationMaterial"].get("timestampVerificationData") or {}
    try:
        return [base64.b64decode(t["signedTimestamp"]) for t in data.get("rfc3161Timestamps", [])]
    except (KeyError, TypeError, binascii.Error) as e:
        raise Rejected(f"malformed signed timestamp: {e}") from e


def _check_log_window(
    doc: Mapping[str, Any], root: SigstoreRoot, times: Sequence[datetime]
) -> None:
    entry = tlog.LogEntry.from_bundle(doc["verificationMaterial"]["tlogEntries"][0])
    log = root.tlog(entry.log_id)
    at = entry.integrated_at if entry.set_signature is not None else None
    if log is not None and at is not None and not log.valid_at(at):
        raise Rejected(
            f"log entry time {at:%Y-%m-%dT%H:%M:%SZ} is outside the validity of log key "
            f"{log.url} in trusted root {root.name}"
        )


def _verify_intoto_entry(
    doc: Mapping[str, Any], signers: Sequence[Signer], roots: Sequence[SigstoreRoot]
) -> BundleVerification:
    """Keyless DSSE bundle logged as intoto/0.0.2 (older cosign attest): our own full path."""
    media, material, entry = keybundle.bundle_shape(doc)
    if "dsseEnvelope" not in doc:
        raise Rejected("an intoto log entry needs a DSSE envelope")
    leaf = _leaf(material)
    envelope = Envelope.from_dict(doc["dsseEnvelope"])
    reasons = []
    for root in roots:
        try:
            # (1) Log proofs; (2) signing times: SET-bound integrated time and TSA timestamps.
            _root, _log, log_time = tlog.verify_entry(
                entry, [root], require_proof=media != keybundle.BUNDLE_V01
            )
            times = [log_time] if log_time is not None else []
            stamps = _timestamps(doc)
            if stamps:
                verified = fulcio.tsa_times(stamps, envelope.signatures[0].sig, root)
                if not verified:
                    raise Rejected("no signed timestamp verifies with a timestamp authority")
                times += verified
            # (3) Certificate: chain, root windows, SCT, usage, validity at every time.
            fulcio.verify_certificate(leaf, root, times)
            # (4) Identity, (5) DSSE signature, (6) log body consistency.
            policy = _IdentityPolicy(signers)
            policy.verify(leaf)
            key = TrustedKey.from_public_key(leaf.public_key())
            if not any(key.verify(s.sig, envelope.pae()) for s in envelope.signatures):
                raise Rejected("DSSE signature does not verify with the signing certificate")
            problem = tlog.dsse_entry_matches(entry.body_json(), envelope, key.spki_der)
            if problem:
                raise Rejected(f"transparency log entry is inconsistent with the bundle: {problem}")
        except Rejected as e:
            reasons.append((root.name, str(e)))
            continue
        assert policy.matched is not None
        return BundleVerification(
            policy.matched,
            policy.seen,
            "dsse",
            envelope.payload_type,
            envelope.payload,
            min(times),
            root.name,
        )
    raise Rejected(_join(reasons))


def _leaf(material: Mapping[str, Any]) -> x509.Certificate:
    try:
        if "certificate" in material:
            raw = material["certificate"]["rawBytes"]
        else:
            raw = material["x509CertificateChain"]["certificates"][0]["rawBytes"]
        return x509.load_der_x509_certificate(base64.b64decode(raw))
    except (KeyError, IndexError, TypeError, ValueError, binascii.Error) as e:
        raise Rejected(f"bundle has no readable signing certificate: {e}") from e


#: sigstore-python's messages, prefixed with what they mean for the user.
_MEANINGS = (
    (
        "certificate chain",
        "signing certificate does not chain to a trusted CA valid at signing time",
    ),
    ("SCT", "signing certificate has no valid certificate-transparency timestamp"),
    ("SET:", "signed entry timestamp is not the transparency log's signature"),
    ("inclusion proof", "transparency log inclusion proof is not valid"),
    ("checkpoint", "transparency log checkpoint is not valid"),
    ("message digest mismatch", "the artifact differs from the signed one"),
    ("Signature is invalid for input", "the signature does not match the artifact"),
    ("DSSE: invalid signature", "the DSSE signature does not verify"),
    ("inconsistent with other materials", "the log entry records other material (replayed?)"),
    ("does not match bundle", "the log entry records other material (replayed?)"),
    ("code signing", "signing certificate is not for code signing"),
    ("verified time", "no trusted time source for the signature"),
)


def _explain(message: str) -> str:
    if len(message) > 240:  # sigstore-python embeds whole proofs in some messages
        message = message[:240] + "…"
    for needle, meaning in _MEANINGS:
        if needle in message:
            return f"{meaning} ({message})"
    return message


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0] if "validation error" not in text else " ".join(text.split())


def _join(reasons: Sequence[tuple[str, str]]) -> str:
    if len(reasons) == 1:
        return reasons[0][1]
    return "; ".join(f"root {name}: {why}" for name, why in reasons)


def verify_envelope_with_keys(
    raw: bytes | str, policy: TrustPolicy, *, signers: Sequence[Signer] | None = None
) -> tuple[Signer, Envelope]:
    """A bare DSSE envelope (no transparency log) signed by a trusted key of the policy."""
    envelope = Envelope.from_json(raw)
    candidates = [s for s in (signers if signers is not None else policy.signers) if s.key]
    key = verify_envelope(envelope, [s.key for s in candidates if s.key is not None])
    signer = next(s for s in candidates if s.key is not None and s.key.key_id == key.key_id)
    return signer, envelope
