"""Verify stage of a scan: provenance verdicts per library and the image's signatures.

Loads the trust policy and signed reference catalogs once, then applies the pure verifiers
(`provenance.provenance_verdict`, `cosign.evaluate_image`) to what earlier stages produced.
Fail closed: a catalog that does not verify stops the scan; an image without an accepted
signature under a policy is reported unsigned, never silently trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from msgspec.structs import replace

from scanner.errors import UsageError, VerifyError
from scanner.loaders import load_json
from scanner.model import GpuLibrary, ImageTrust, OciDigest
from scanner.verify.catalogs import load_catalog_file
from scanner.verify.cosign import (
    BUNDLE_MEDIA_TYPE,
    CosignLayer,
    ImageRef,
    evaluate_image,
    verify_layer,
)
from scanner.verify.dsse import ENVELOPE_MEDIA_TYPE
from scanner.verify.errors import Rejected
from scanner.verify.inputs import TrustInputs
from scanner.verify.provenance import VerifiedCatalog, provenance_verdict
from scanner.verify.trust import TrustPolicy
from scanner.verify.trust_file import load_trust_policy


def load_policy(inputs: TrustInputs) -> TrustPolicy | None:
    """The trust policy of `--trust` or `--trust-key`; None when neither was given."""
    if inputs.trust and inputs.trust_key:
        raise UsageError("give either --trust or --trust-key, not both")
    if inputs.trust is not None:
        return load_trust_policy(inputs.trust)
    if inputs.trust_key is not None:
        return TrustPolicy.for_key(inputs.trust_key)
    if inputs.catalogs or inputs.attestations:
        raise UsageError("--catalog and --attestation need a trust policy: --trust or --trust-key")
    return None


def load_catalogs(inputs: TrustInputs, policy: TrustPolicy) -> list[VerifiedCatalog]:
    """Verify every catalog; the first one that fails raises `Rejected` with the reason."""
    return [load_catalog_file(p, policy) for p in inputs.catalogs]


def apply_provenance(
    libraries: Sequence[GpuLibrary], catalogs: Sequence[VerifiedCatalog]
) -> list[GpuLibrary]:
    """Each library with its provenance verdict against the catalogs."""
    out = []
    for lib in libraries:
        verdict = provenance_verdict(
            lib.ref.path,
            lib.ident.family,
            lib.ident.version,
            lib.digests.sha256 if lib.digests else None,
            catalogs,
            cuda_major=lib.ident.cuda_major,
            arch=lib.ident.arch,
            package_purl=lib.owner.purl if lib.owner else None,
        )
        out.append(
            replace(
                lib,
                provenance=verdict.provenance,
                provenance_reason=verdict.reason,
                provenance_signer=verdict.signer,
                provenance_catalog=verdict.catalog,
            )
        )
    return out


def layer_from_file(path: Path) -> CosignLayer:
    """A local signature file: a Sigstore bundle or a DSSE envelope (an attestation)."""
    try:
        data = path.read_bytes()
        doc = load_json(data)
    except OSError as e:
        raise VerifyError(f"cannot read {path}: {e.strerror}") from e
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise VerifyError(f"{path}: not JSON: {e}") from e
    if isinstance(doc, dict) and "verificationMaterial" in doc:
        return CosignLayer(BUNDLE_MEDIA_TYPE, data)
    if isinstance(doc, dict) and "payloadType" in doc and "signatures" in doc:
        return CosignLayer(ENVELOPE_MEDIA_TYPE, data)
    raise VerifyError(f"{path}: neither a Sigstore bundle nor a DSSE envelope")


def image_trust(
    repository: str,
    digests: Sequence[str],
    layers: Sequence[tuple[str, CosignLayer]],
    policy: TrustPolicy,
) -> ImageTrust:
    """Evaluate every (subject digest, layer) pair; the best accepted result wins."""
    layers = _place_local_files(repository, digests, layers, policy)
    signers: list[str] = []
    rejected: list[str] = []
    best = None
    for digest in digests:
        mine = [layer for subject, layer in layers if subject in (digest, "*")]
        if not mine:
            continue
        verdict = evaluate_image(ImageRef(repository, digest), mine, policy)  # type: ignore[arg-type]
        if verdict.signer:
            signers.append(verdict.signer)
        rejected.extend(verdict.rejected)
        if verdict.slsa is not None and (best is None or verdict.slsa.level > best.level):
            best = verdict.slsa
    if not layers:
        rejected.append("no signature or attestation found for the image")
    elif not signers and best is None and not rejected:
        rejected.append("no signature or attestation was accepted")
    return ImageTrust(
        signed=bool(signers),
        signer=signers[0] if signers else None,
        slsa_level=best.level if best else None,
        builder=best.builder_id if best else None,
        source_repo=best.source_repo if best else None,
        checked=len(layers),
        rejected=tuple(dict.fromkeys(rejected)),
    )


def _place_local_files(
    repository: str,
    digests: Sequence[str],
    layers: Sequence[tuple[str, CosignLayer]],
    policy: TrustPolicy,
) -> list[tuple[str, CosignLayer]]:
    """Give each local file ("*": it names no subject) the one digest it is about.

    A multi-platform image has two digests (index and platform manifest); checked against
    both, a file about one would also be reported rejected for the other. It goes to the first
    digest it verifies for, else to the last, so that its rejection is reported once.
    """
    if len(digests) < 2:
        return list(layers)
    placed = []
    for subject, layer in layers:
        if subject == "*":
            subject = digests[-1]
            for digest in digests:
                try:
                    verify_layer(layer, ImageRef(repository, OciDigest(digest)), policy)
                except Rejected:
                    continue
                subject = digest
                break
        placed.append((subject, layer))
    return placed
