"""Public keys gpuprov accepts for signatures, and the one place that checks a signature with
one (ECDSA P-256/P-384, Ed25519, RSA >= 2048 bits with PKCS#1 v1.5 or PSS padding).
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from msgspec import Struct

from scanner.errors import VerifyError
from scanner.verify.errors import Rejected


class KeyAlgorithm(StrEnum):
    ECDSA_P256 = "ecdsa-p256"
    ECDSA_P384 = "ecdsa-p384"
    ED25519 = "ed25519"
    RSA = "rsa"


PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | rsa.RSAPublicKey


class TrustedKey(Struct, frozen=True):
    """A public key with the algorithm gpuprov accepts it for."""

    public_key: PublicKey
    algorithm: KeyAlgorithm
    key_id: str  # hex SHA-256 of the DER SubjectPublicKeyInfo

    @classmethod
    def from_public_key(cls, key: object) -> TrustedKey:
        """Accept ECDSA P-256/P-384, Ed25519 and RSA (2048 bits or more); refuse the rest."""
        if isinstance(key, ec.EllipticCurvePublicKey):
            curves = {"secp256r1": KeyAlgorithm.ECDSA_P256, "secp384r1": KeyAlgorithm.ECDSA_P384}
            if key.curve.name not in curves:
                raise VerifyError(f"unsupported elliptic curve {key.curve.name}")
            algorithm = curves[key.curve.name]
            public: PublicKey = key
        elif isinstance(key, ed25519.Ed25519PublicKey):
            algorithm, public = KeyAlgorithm.ED25519, key
        elif isinstance(key, rsa.RSAPublicKey):
            if key.key_size < 2048:
                raise VerifyError(f"RSA key of {key.key_size} bits is too small (need 2048)")
            algorithm, public = KeyAlgorithm.RSA, key
        else:
            raise VerifyError(f"unsupported public key type {type(key).__name__}")
        der = public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return cls(public, algorithm, hashlib.sha256(der).hexdigest())

    @classmethod
    def from_pem(cls, pem: bytes) -> TrustedKey:
        """Load a PEM public key (or the key of a PEM certificate)."""
        try:
            if b"-----BEGIN CERTIFICATE-----" in pem:
                return cls.from_public_key(x509.load_pem_x509_certificate(pem).public_key())
            return cls.from_public_key(serialization.load_pem_public_key(pem))
        except (ValueError, UnsupportedAlgorithm) as e:
            raise VerifyError(f"not a PEM public key: {e}") from e

    @classmethod
    def from_pem_file(cls, path: Path) -> TrustedKey:
        """`from_pem` of a file's bytes; an unreadable file is a VerifyError naming it."""
        try:
            pem = path.read_bytes()
        except OSError as e:
            raise VerifyError(f"cannot read {path}: {e.strerror}") from e
        return cls.from_pem(pem)

    @classmethod
    def from_der(cls, der: bytes) -> TrustedKey:
        try:
            return cls.from_public_key(serialization.load_der_public_key(der))
        except (ValueError, UnsupportedAlgorithm) as e:
            raise VerifyError(f"not a DER public key: {e}") from e

    @property
    def spki_der(self) -> bytes:
        return self.public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def _hash(self) -> hashes.HashAlgorithm:
        return hashes.SHA384() if self.algorithm is KeyAlgorithm.ECDSA_P384 else hashes.SHA256()

    def verify(self, signature: bytes, data: bytes) -> bool:
        """True when `signature` is valid over `data` with this key."""
        key = self.public_key
        try:
            if isinstance(key, ec.EllipticCurvePublicKey):
                key.verify(signature, data, ec.ECDSA(self._hash()))
            elif isinstance(key, ed25519.Ed25519PublicKey):
                key.verify(signature, data)
            else:
                return _rsa_verify(key, signature, data, hashes.SHA256())
        except (InvalidSignature, ValueError):
            return False
        return True

    def verify_digest(self, signature: bytes, digest: bytes) -> bool:
        """True when `signature` is valid over the SHA-256 `digest` (pre-hashed signing).

        Ed25519 signs the whole message, never a digest: such keys need the artifact itself.
        """
        key = self.public_key
        prehashed = Prehashed(hashes.SHA256())
        try:
            if isinstance(key, ec.EllipticCurvePublicKey):
                key.verify(signature, digest, ec.ECDSA(prehashed))
            elif isinstance(key, rsa.RSAPublicKey):
                return _rsa_verify(key, signature, digest, prehashed)
            else:
                raise Rejected(
                    "an Ed25519 signature covers the whole artifact; give the file, not its digest"
                )
        except (InvalidSignature, ValueError):
            return False
        return True

    def describe(self) -> str:
        return f"{self.algorithm.value} key sha256:{self.key_id[:16]}"


def _rsa_verify(
    key: rsa.RSAPublicKey,
    signature: bytes,
    data: bytes,
    algorithm: hashes.HashAlgorithm | Prehashed,
) -> bool:
    # Both paddings are in use for RSA signing keys (cosign: PKCS#1 v1.5, securesystemslib: PSS).
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.AUTO)
    for pad in (padding.PKCS1v15(), pss):
        try:
            key.verify(signature, data, pad, algorithm)
            return True
        except InvalidSignature:
            continue
    return False
