"""cosign image signatures and attestations, verified as pure functions over fetched bytes.

The registry code finds the material (tag `sha256-<hex>.sig` / `.att`, or OCI 1.1 referrers
with a Sigstore bundle, falling back to the `sha256-<hex>` tag) and hands each layer here with
its media type, annotations and descriptor digest. Nothing here touches the network.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from cryptography import x509
from msgspec import Struct, field

from scanner.loaders import load_json
from scanner.model import OciDigest
from scanner.verify import cosign_tags, fulcio, slsa, tlog
from scanner.verify.dsse import ENVELOPE_MEDIA_TYPE, INTOTO_PAYLOAD_TYPE, Envelope
from scanner.verify.errors import Rejected
from scanner.verify.intoto import Statement
from scanner.verify.keys import TrustedKey
from scanner.verify.sigstore_bundles import ArtifactDigest, verify_bundle
from scanner.verify.trust import Signer, TrustPolicy, UnsafeOption
from scanner.verify.trusted_roots import SigstoreRoot

SIMPLESIGNING_MEDIA_TYPE = "application/vnd.dev.cosign.simplesigning.v1+json"
BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
SIGNATURE_TYPE = "cosign container image signature"
COSIGN_SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1"

ANN_SIGNATURE = "dev.cosignproject.cosign/signature"
ANN_CERTIFICATE = "dev.sigstore.cosign/certificate"
ANN_CHAIN = "dev.sigstore.cosign/chain"
ANN_BUNDLE = "dev.sigstore.cosign/bundle"
ANN_TIMESTAMP = "dev.sigstore.cosign/rfc3161timestamp"
ANN_PREDICATE_TYPE = "predicateType"
ANN_BUNDLE_CONTENT = "dev.sigstore.bundle.content"
ANN_BUNDLE_PREDICATE = "dev.sigstore.bundle.predicateType"


def _hex(digest: str) -> str:
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha256" or len(value) != 64:
        raise Rejected(f"unsupported image digest {digest!r}")
    return value.lower()


def signature_tag(digest: str) -> str:
    """Legacy cosign signature tag of an image digest."""
    return cosign_tags.signature_tag("sha256", _hex(digest))


def attestation_tag(digest: str) -> str:
    """Legacy cosign attestation tag of an image digest."""
    return cosign_tags.attestation_tag("sha256", _hex(digest))


def referrers_fallback_tag(digest: str) -> str:
    """Tag of the OCI 1.1 referrers index when the registry has no referrers API."""
    return cosign_tags.referrers_tag("sha256", _hex(digest))


class ImageRef(Struct, frozen=True):
    """The image being verified: repository (host/path, no tag) and manifest digest."""

    repository: str
    digest: OciDigest


class CosignLayer(Struct, frozen=True):
    """One signature/attestation layer as the registry returned it."""

    media_type: str
    data: bytes
    annotations: Mapping[str, str] = field(default_factory=dict)
    digest: str | None = None  # the descriptor digest; checked against `data`


class Accepted(Struct, frozen=True):
    """One signature or attestation that passed every check."""

    form: str  # legacy-signature | legacy-attestation | bundle-signature | bundle-attestation
    signer: Signer
    identity: str
    statement: Statement | None = None
    signed_at: datetime | None = None
    unsafe: tuple[str, ...] = ()


class ImageVerdict(Struct, frozen=True):
    """Everything the image's signatures and attestations establish."""

    signatures: tuple[Accepted, ...]
    attestations: tuple[Accepted, ...]
    rejected: tuple[str, ...]
    slsa: slsa.SlsaResult | None

    @property
    def signed(self) -> bool:
        return bool(self.signatures)

    @property
    def signer(self) -> str | None:
        """The identity for `gpuprov:image:signer` (first accepted signature)."""
        return self.signatures[0].signer.describe() if self.signatures else None


def _check_layer_digest(layer: CosignLayer) -> None:
    if layer.digest is not None:
        actual = "sha256:" + hashlib.sha256(layer.data).hexdigest()
        if actual != layer.digest:
            raise Rejected(f"layer blob is {actual}, its descriptor says {layer.digest}")


def _in_scope(image: ImageRef, policy: TrustPolicy) -> tuple[Signer, ...]:
    signers = policy.for_image(image.repository)
    if not signers:
        raise Rejected(f"no trusted signer may vouch for images of {image.repository}")
    return signers


def check_simple_signing(payload: bytes, image: ImageRef) -> str | None:
    """Check a simple-signing payload names this image; return its docker-reference."""
    try:
        doc = load_json(payload)
        critical = doc["critical"]
        kind = critical["type"]
        digest = critical["image"]["docker-manifest-digest"]
        reference = critical.get("identity", {}).get("docker-reference")
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as e:
        raise Rejected(f"signature payload is not a cosign simple-signing document: {e}") from e
    if kind != SIGNATURE_TYPE:
        raise Rejected(f"signature payload type {kind!r} is not {SIGNATURE_TYPE!r}")
    if digest != image.digest:
        raise Rejected(
            f"signature is for image {digest}, not {image.digest} "
            "(a signature copied from another image)"
        )
    return reference if isinstance(reference, str) else None


def _annotation_b64(layer: CosignLayer, name: str) -> bytes:
    value = layer.annotations.get(name)
    if not value:
        raise Rejected(f"layer has no {name} annotation")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as e:
        raise Rejected(f"{name} annotation is not base64: {e}") from e


def _certificate(layer: CosignLayer) -> x509.Certificate | None:
    pem = layer.annotations.get(ANN_CERTIFICATE)
    if not pem:
        return None
    try:
        return x509.load_pem_x509_certificate(pem.encode())
    except ValueError as e:
        raise Rejected(f"certificate annotation is not a PEM certificate: {e}") from e


def _keyless_log(
    layer: CosignLayer, leaf: x509.Certificate, policy: TrustPolicy
) -> tuple[tlog.LogEntry, datetime]:
    """Keyless legacy material: the bundle annotation's SET gives the signing time."""
    raw = layer.annotations.get(ANN_BUNDLE)
    if not raw:
        raise Rejected("keyless signature has no transparency log bundle annotation")
    entry = tlog.LogEntry.from_cosign_bundle(raw)
    root, _log, when = tlog.verify_entry(entry, policy.roots, require_proof=False)
    assert when is not None
    fulcio.verify_certificate(leaf, root, [when])
    return entry, when


def _key_log(
    layer: CosignLayer, signer: Signer, policy: TrustPolicy, context: str
) -> tuple[tlog.LogEntry | None, datetime | None, tuple[str, ...]]:
    raw = layer.annotations.get(ANN_BUNDLE)
    if raw:
        entry = tlog.LogEntry.from_cosign_bundle(raw)
        # A policy without pinned roots (`--trust-key`) checks the log as `cosign verify --key`
        # does, against public-good; the same rule as key-based Sigstore bundles.
        roots = policy.roots or (SigstoreRoot.public_good(),)
        _root, _log, when = tlog.verify_entry(entry, roots, require_proof=False)
        return entry, when, ()
    if signer.allows_unsafe(UnsafeOption.IGNORE_TLOG, context):
        return None, None, (UnsafeOption.IGNORE_TLOG.value,)
    raise Rejected(
        f"signature by {signer.name} has no transparency log entry; the policy must opt into "
        f"unsafe {UnsafeOption.IGNORE_TLOG.value} for this signer to accept it"
    )


def _match_identity(leaf: x509.Certificate, signers: Sequence[Signer]) -> Signer:
    issuer, subjects = fulcio.cert_identity(leaf)
    for signer in signers:
        if signer.identity is not None and signer.identity.matches(issuer, subjects):
            return signer
    expected = "; ".join(s.identity.describe() for s in signers if s.identity) or "none in scope"
    raise Rejected(
        f"certificate identity {fulcio.describe_identity(leaf)} is not trusted "
        f"(expected {expected})"
    )


def verify_legacy_signature(layer: CosignLayer, image: ImageRef, policy: TrustPolicy) -> Accepted:
    """A `.sig` tag layer: simple-signing payload, signature annotation, optional keyless parts."""
    _check_layer_digest(layer)
    if layer.media_type != SIMPLESIGNING_MEDIA_TYPE:
        raise Rejected(f"signature layer media type {layer.media_type} is not simple-signing")
    signature = _annotation_b64(layer, ANN_SIGNATURE)
    check_simple_signing(layer.data, image)
    signers = _in_scope(image, policy)
    digest = hashlib.sha256(layer.data).digest()
    leaf = _certificate(layer)
    if leaf is not None:
        entry, when = _keyless_log(layer, leaf, policy)
        signer = _match_identity(leaf, signers)
        key = TrustedKey.from_public_key(leaf.public_key())
        if not key.verify(signature, layer.data):
            raise Rejected("signature does not verify with the signing certificate")
        _require_consistent(
            tlog.hashedrekord_matches(
                entry.body_json(), digest=digest, signature=signature, public_der=key.spki_der
            )
        )
        return Accepted("legacy-signature", signer, fulcio.describe_identity(leaf), None, when)
    keyed = [s for s in signers if s.key is not None]
    found = next((s for s in keyed if s.key and s.key.verify(signature, layer.data)), None)
    if found is None or found.key is None:
        tried = ", ".join(s.name for s in keyed) or "no key signer in scope"
        raise Rejected(f"signature does not verify with a trusted key ({tried})")
    log_entry, log_time, unsafe = _key_log(layer, found, policy, f"signature of {image.digest}")
    if log_entry is not None:
        _require_consistent(
            tlog.hashedrekord_matches(
                log_entry.body_json(),
                digest=digest,
                signature=signature,
                public_der=found.key.spki_der,
            )
        )
    return Accepted("legacy-signature", found, found.key.describe(), None, log_time, unsafe)


def _require_consistent(problem: str | None) -> None:
    if problem:
        raise Rejected(f"transparency log entry is inconsistent with the signature: {problem}")


def _statement_for(
    payload_type: str, payload: bytes, image: ImageRef, annotated: str | None
) -> Statement:
    if payload_type != INTOTO_PAYLOAD_TYPE:
        raise Rejected(f"attestation payload type {payload_type!r} is not in-toto")
    statement = Statement.from_bytes(payload, allow_v01=True)
    statement.require_subject(_hex(image.digest))
    if annotated and annotated != statement.predicate_type:
        raise Rejected(
            f"annotation says predicate {annotated}, statement says {statement.predicate_type}"
        )
    return statement


def verify_legacy_attestation(layer: CosignLayer, image: ImageRef, policy: TrustPolicy) -> Accepted:
    """An `.att` tag layer: a DSSE envelope with an in-toto statement about this image."""
    _check_layer_digest(layer)
    if layer.media_type != ENVELOPE_MEDIA_TYPE:
        raise Rejected(f"attestation layer media type {layer.media_type} is not DSSE")
    envelope = Envelope.from_json(layer.data)
    signers = _in_scope(image, policy)
    leaf = _certificate(layer)
    when: datetime | None
    unsafe: tuple[str, ...]
    if leaf is not None:
        entry, when = _keyless_log(layer, leaf, policy)
        signer = _match_identity(leaf, signers)
        key = TrustedKey.from_public_key(leaf.public_key())
        if not any(key.verify(s.sig, envelope.pae()) for s in envelope.signatures):
            raise Rejected("DSSE signature does not verify with the signing certificate")
        identity, unsafe = fulcio.describe_identity(leaf), ()
        _require_consistent(tlog.dsse_entry_matches(entry.body_json(), envelope, key.spki_der))
    else:
        keyed = [s for s in signers if s.key is not None]
        match = None
        for s in keyed:
            assert s.key is not None
            if any(s.key.verify(sig.sig, envelope.pae()) for sig in envelope.signatures):
                match = s
                break
        if match is None or match.key is None:
            tried = ", ".join(s.name for s in keyed) or "no key signer in scope"
            raise Rejected(f"DSSE signature does not verify with a trusted key ({tried})")
        signer, identity = match, match.key.describe()
        log_entry, when, unsafe = _key_log(layer, match, policy, f"attestation of {image.digest}")
        if log_entry is not None:
            _require_consistent(
                tlog.dsse_entry_matches(log_entry.body_json(), envelope, match.key.spki_der)
            )
    statement = _statement_for(
        envelope.payload_type, envelope.payload, image, layer.annotations.get(ANN_PREDICATE_TYPE)
    )
    return Accepted("legacy-attestation", signer, identity, statement, when, unsafe)


def verify_referrer_bundle(layer: CosignLayer, image: ImageRef, policy: TrustPolicy) -> Accepted:
    """A cosign v3 referrer: a Sigstore bundle signing the image or attesting about it."""
    _check_layer_digest(layer)
    if layer.media_type != BUNDLE_MEDIA_TYPE:
        raise Rejected(f"referrer layer media type {layer.media_type} is not a Sigstore bundle")
    signers = _in_scope(image, policy)
    content = layer.annotations.get(ANN_BUNDLE_CONTENT)
    try:
        doc = load_json(layer.data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise Rejected(f"referrer bundle is not JSON: {e}") from e
    is_dsse = isinstance(doc, dict) and "dsseEnvelope" in doc
    if content and content != ("dsse-envelope" if is_dsse else "message-signature"):
        raise Rejected(f"bundle content annotation {content!r} does not match the bundle")
    if not is_dsse:
        # A message signature over the image: its digest is the manifest digest.
        digest = ArtifactDigest.from_hex(image.digest)
        result = verify_bundle(layer.data, policy, artifact=digest, signers=signers)
        return Accepted("bundle-signature", result.signer, result.identity, None, result.signed_at)
    result = verify_bundle(layer.data, policy, signers=signers)
    statement = _statement_for(
        result.payload_type or "",
        result.payload or b"",
        image,
        layer.annotations.get(ANN_BUNDLE_PREDICATE),
    )
    form = (
        "bundle-signature"
        if statement.predicate_type == COSIGN_SIGN_PREDICATE
        else "bundle-attestation"
    )
    return Accepted(form, result.signer, result.identity, statement, result.signed_at)


def verify_layer(layer: CosignLayer, image: ImageRef, policy: TrustPolicy) -> Accepted:
    """Dispatch on the layer's media type."""
    if layer.media_type == SIMPLESIGNING_MEDIA_TYPE:
        return verify_legacy_signature(layer, image, policy)
    if layer.media_type == ENVELOPE_MEDIA_TYPE:
        return verify_legacy_attestation(layer, image, policy)
    if layer.media_type == BUNDLE_MEDIA_TYPE:
        return verify_referrer_bundle(layer, image, policy)
    raise Rejected(f"unknown signature layer media type {layer.media_type}")


def evaluate_image(
    image: ImageRef, layers: Iterable[CosignLayer], policy: TrustPolicy
) -> ImageVerdict:
    """Verify every layer found for the image; collect accepted material, reasons and SLSA."""
    signatures: list[Accepted] = []
    attestations: list[Accepted] = []
    rejected: list[str] = []
    for layer in layers:
        try:
            accepted = verify_layer(layer, image, policy)
        except Rejected as e:
            rejected.append(f"{layer.media_type}: {e}")
            continue
        (signatures if accepted.form.endswith("signature") else attestations).append(accepted)
    best: slsa.SlsaResult | None = None
    for att in attestations:
        if att.statement is None or att.statement.predicate_type != slsa.SLSA_PROVENANCE_V1:
            continue
        try:
            result = slsa.verify_provenance(
                att.statement,
                subject_sha256=_hex(image.digest),
                signer=att.signer,
                policy=policy,
                repository=image.repository,
            )
        except Rejected as e:
            rejected.append(f"SLSA provenance by {att.signer.name}: {e}")
            continue
        if best is None or result.level > best.level:
            best = result
    return ImageVerdict(tuple(signatures), tuple(attestations), tuple(rejected), best)
