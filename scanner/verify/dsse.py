"""DSSE envelopes (Dead Simple Signing Envelope v1) signed with keys.

Used for reference catalogs (`gpuprov catalog sign --key`), cosign `.att` layers and key-based
Sigstore bundles. PAE is computed exactly as the DSSE protocol specifies, and both the standard
and the URL-safe base64 alphabets are accepted, with or without padding.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from msgspec import Struct

from scanner.errors import VerifyError
from scanner.loaders import load_json
from scanner.verify.errors import Rejected
from scanner.verify.keys import TrustedKey

#: The payload type of in-toto statements.
INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
#: The media type of a DSSE envelope as a file or an OCI layer.
ENVELOPE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """Pre-Authentication Encoding (DSSE protocol v1): what is actually signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def b64decode(text: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not; anything else is an error."""
    if not isinstance(text, str):
        raise Rejected("base64 value is not a string")
    normalized = text.replace("-", "+").replace("_", "/")
    normalized += "=" * (-len(normalized) % 4)
    try:
        return base64.b64decode(normalized, validate=True)
    except (binascii.Error, ValueError) as e:
        raise Rejected(f"invalid base64: {e}") from e


class Signature(Struct, frozen=True):
    sig: bytes
    keyid: str = ""


class Envelope(Struct, frozen=True):
    """A parsed DSSE envelope."""

    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    @classmethod
    def from_dict(cls, doc: object) -> Envelope:
        """Parse the JSON form; refuses envelopes without a signature."""
        if not isinstance(doc, dict):
            raise Rejected("DSSE envelope is not a JSON object")
        payload_type = doc.get("payloadType")
        if not isinstance(payload_type, str) or not payload_type:
            raise Rejected("DSSE envelope has no payloadType")
        raw_payload = doc.get("payload")
        if not isinstance(raw_payload, str):
            raise Rejected("DSSE envelope has no payload")
        payload = b64decode(raw_payload)
        raw_sigs = doc.get("signatures")
        if not isinstance(raw_sigs, list) or not raw_sigs:
            raise Rejected("DSSE envelope has no signature")
        sigs = []
        for item in raw_sigs:
            if not isinstance(item, dict) or "sig" not in item:
                raise Rejected("DSSE signature entry has no sig")
            keyid = item.get("keyid") or ""
            sigs.append(Signature(b64decode(item["sig"]), keyid if isinstance(keyid, str) else ""))
        return cls(payload_type, payload, tuple(sigs))

    @classmethod
    def from_json(cls, raw: bytes | str) -> Envelope:
        try:
            doc = load_json(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise Rejected(f"DSSE envelope is not JSON: {e}") from e
        return cls.from_dict(doc)

    def to_dict(self) -> dict[str, Any]:
        return {
            "payloadType": self.payload_type,
            "payload": base64.b64encode(self.payload).decode(),
            "signatures": [
                {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode()} for s in self.signatures
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def pae(self) -> bytes:
        return pae(self.payload_type, self.payload)


def verify_envelope(envelope: Envelope, keys: Sequence[TrustedKey]) -> TrustedKey:
    """Return the first trusted key with a valid signature over PAE; else reject.

    keyid is an unauthenticated hint (DSSE protocol), so every signature is tried with every key.
    """
    if not keys:
        raise Rejected("no trusted key may sign this envelope")
    message = envelope.pae()
    for signature in envelope.signatures:
        for key in keys:
            if key.verify(signature.sig, message):
                return key
    tried = ", ".join(k.describe() for k in keys)
    raise Rejected(f"no DSSE signature verifies with a trusted key (tried {tried})")


def sign_envelope(
    payload_type: str, payload: bytes, private_key: PrivateKeyTypes, keyid: str = ""
) -> Envelope:
    """Sign `payload` with a PEM-loaded private key (ECDSA, Ed25519 or RSA-PSS).

    Only keys that verification accepts (`TrustedKey`) may sign: an envelope signed with a
    P-521 or a 1024-bit RSA key would be refused by every verifier, so it is refused here.
    """
    message = pae(payload_type, payload)
    try:
        TrustedKey.from_public_key(private_key.public_key())
    except VerifyError as e:
        raise Rejected(f"cannot sign with this key: {e}") from e
    if isinstance(private_key, ec.EllipticCurvePrivateKey):
        digest = hashes.SHA384() if private_key.curve.name == "secp384r1" else hashes.SHA256()
        sig = private_key.sign(message, ec.ECDSA(digest))
    elif isinstance(private_key, ed25519.Ed25519PrivateKey):
        sig = private_key.sign(message)
    else:
        assert isinstance(private_key, rsa.RSAPrivateKey)  # the one kind TrustedKey has left
        pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)
        sig = private_key.sign(message, pss, hashes.SHA256())
    return Envelope(payload_type, payload, (Signature(sig, keyid),))
