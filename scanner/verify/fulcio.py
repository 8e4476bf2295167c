"""Keyless (Fulcio) certificate checks with `cryptography`, against a pinned trusted root.

sigstore-python does the whole job for ordinary Sigstore bundles; this module covers what it
cannot take (cosign's legacy signature annotations, intoto/0.0.2 log entries) and the trusted
root validity windows that it does not check. Steps follow the Sigstore client spec
("Verification": certificate chain at the signing time, SCT, key usage, identity).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
)
from cryptography.x509.verification import VerificationError as X509VerificationError

from scanner.verify.errors import Rejected
from scanner.verify.trusted_roots import CertificateAuthority, SigstoreRoot

ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
OTHERNAME_SAN = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.7")


def _der_utf8(value: bytes) -> str:
    """Decode a DER UTF8String (tag 0x0C), as Fulcio writes v2 extensions."""
    if len(value) < 2 or value[0] != 0x0C:
        raise ValueError("not a DER UTF8String")
    length, offset = value[1], 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(value[2 : 2 + count], "big")
        offset = 2 + count
    return value[offset : offset + length].decode("utf-8")


def cert_identity(cert: x509.Certificate) -> tuple[str | None, tuple[str, ...]]:
    """The OIDC issuer and the subject alternative names of a Fulcio certificate."""
    issuer = None
    for oid, decode in ((ISSUER_V2, _der_utf8), (ISSUER_V1, lambda b: b.decode("utf-8"))):
        try:
            ext = cert.extensions.get_extension_for_oid(oid).value
        except x509.ExtensionNotFound:
            continue
        if isinstance(ext, x509.UnrecognizedExtension):
            try:
                issuer = decode(ext.value)
                break
            except (ValueError, UnicodeDecodeError):
                continue
    subjects: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = None
    if san is not None:
        subjects += san.get_values_for_type(x509.RFC822Name)
        subjects += san.get_values_for_type(x509.UniformResourceIdentifier)
        for other in san.get_values_for_type(x509.OtherName):
            if other.type_id == OTHERNAME_SAN:
                try:
                    subjects.append(_der_utf8(other.value))
                except (ValueError, UnicodeDecodeError):
                    continue
    return issuer, tuple(subjects)


def describe_identity(cert: x509.Certificate) -> str:
    issuer, subjects = cert_identity(cert)
    return f"{', '.join(subjects) or '(no subject)'} (issuer {issuer or 'unknown'})"


def _anchors(roots: Iterable[SigstoreRoot]) -> list[x509.Certificate]:
    return [c for r in roots for a in r.authorities for c in a.certificates]


def verify_chain(
    leaf: x509.Certificate, root: SigstoreRoot, when: datetime
) -> list[x509.Certificate]:
    """Build and check the chain from `leaf` to the root's CAs, valid at `when`."""
    anchors = _anchors([root])
    if not anchors:
        raise Rejected(f"trusted root {root.name} has no certificate authority")
    # Fulcio leaves carry code-signing, not client-auth, EKU; everything else stays webpki.
    ca_policy = ExtensionPolicy.webpki_defaults_ca().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    ee_policy = ExtensionPolicy.webpki_defaults_ee().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    verifier = (
        PolicyBuilder()
        .store(Store(anchors))
        .time(when)
        .extension_policies(ca_policy=ca_policy, ee_policy=ee_policy)
        .build_client_verifier()
    )
    try:
        return list(verifier.verify(leaf, []).chain[1:])
    except (X509VerificationError, x509.UnsupportedGeneralNameType) as e:
        raise Rejected(
            f"signing certificate does not chain to trusted root {root.name} at "
            f"{when:%Y-%m-%dT%H:%M:%SZ}: {e}"
        ) from e


def issuing_authorities(leaf: x509.Certificate, root: SigstoreRoot) -> list[CertificateAuthority]:
    """The root's CAs whose first certificate issued `leaf`."""
    found = []
    for authority in root.authorities:
        try:
            leaf.verify_directly_issued_by(authority.certificates[0])
        except (ValueError, TypeError, InvalidSignature):
            continue
        found.append(authority)
    return found


def check_authority_windows(
    leaf: x509.Certificate, root: SigstoreRoot, times: Sequence[datetime]
) -> None:
    """Every signing time must fall in the validity window the root gives the issuing CA."""
    authorities = issuing_authorities(leaf, root)
    if not authorities:
        raise Rejected(f"no certificate authority of trusted root {root.name} issued the leaf")
    for when in times:
        if not any(a.valid_at(when) for a in authorities):
            raise Rejected(
                f"signing time {when:%Y-%m-%dT%H:%M:%SZ} is outside the validity window that "
                f"trusted root {root.name} gives the issuing certificate authority"
            )


def verify_sct(leaf: x509.Certificate, issuer: x509.Certificate, root: SigstoreRoot) -> None:
    """An embedded SCT signed by a CT log of the trusted root is mandatory (RFC 6962 §3.2)."""
    try:
        scts = leaf.extensions.get_extension_for_class(
            x509.PrecertificateSignedCertificateTimestamps
        ).value
    except x509.ExtensionNotFound as e:
        raise Rejected("signing certificate has no embedded SCT") from e
    issuer_key_hash = hashlib.sha256(
        issuer.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    ).digest()
    tbs = leaf.tbs_precertificate_bytes
    reasons = []
    for sct in scts:
        log = root.ctlog(sct.log_id)
        if log is None:
            reasons.append(f"SCT from unknown CT log {sct.log_id.hex()[:16]}…")
            continue
        stamp = sct.timestamp.replace(tzinfo=UTC)
        millis = (stamp - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
        ext = sct.extension_bytes
        signed = (
            struct.pack(">BBQH", 0, 0, millis, 1)
            + issuer_key_hash
            + len(tbs).to_bytes(3, "big")
            + tbs
            + struct.pack(">H", len(ext))
            + ext
        )
        if not log.key.verify(sct.signature, signed):
            reasons.append("SCT signature does not verify with the CT log key")
            continue
        if not log.valid_at(stamp):
            reasons.append("SCT time is outside the CT log key's validity")
            continue
        return
    raise Rejected("no valid SCT on the signing certificate: " + "; ".join(reasons or ["none"]))


def verify_certificate(
    leaf: x509.Certificate, root: SigstoreRoot, times: Sequence[datetime]
) -> None:
    """Chain, root validity window, SCT, key usage and validity at each signing time."""
    if not times:
        raise Rejected("no verified signing time (no signed entry timestamp or timestamp)")
    chain: list[x509.Certificate] = []
    for when in times:
        if not leaf.not_valid_before_utc <= when <= leaf.not_valid_after_utc:
            raise Rejected(
                f"signing certificate was not valid at {when:%Y-%m-%dT%H:%M:%SZ} "
                f"(valid {leaf.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ} to "
                f"{leaf.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ})"
            )
        chain = verify_chain(leaf, root, when)
    check_authority_windows(leaf, root, times)
    verify_sct(leaf, chain[0], root)
    try:
        usage = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
        extended = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound as e:
        raise Rejected(f"signing certificate lacks a usage extension: {e}") from e
    if not usage.digital_signature:
        raise Rejected("signing certificate is not for digital signatures")
    if ExtendedKeyUsageOID.CODE_SIGNING not in extended:
        raise Rejected("signing certificate is not for code signing")


def tsa_times(timestamps: Sequence[bytes], signature: bytes, root: SigstoreRoot) -> list[datetime]:
    """RFC 3161 timestamps over `signature` that a TSA of the root signed within its window."""
    # Imported here: ~0.2 s, and only bundles with signed timestamps need it.
    from rfc3161_client import VerificationError as TsaError
    from rfc3161_client import VerifierBuilder, decode_timestamp_response

    times = []
    for raw in timestamps:
        try:
            response = decode_timestamp_response(raw)
        except (ValueError, TsaError):
            continue
        for chain, start, end in root.tsa_chains:
            if len(chain) < 2:
                continue
            builder = VerifierBuilder().tsa_certificate(chain[0]).add_root_certificate(chain[-1])
            for middle in chain[1:-1]:
                builder = builder.add_intermediate_certificate(middle)
            try:
                builder.build().verify_message(response, signature)
            except (TsaError, ValueError):
                continue
            when = response.tst_info.gen_time
            if (start is None or start <= when) and (end is None or when <= end):
                times.append(when)
                break
    return times
