"""Cosign's tag names for an image digest: the one rule shared by the registry client, which
looks the tags up, and the verify stage.

`sha256:<hex>` becomes `sha256-<hex>` (the OCI 1.1 referrers fallback tag), `sha256-<hex>.sig`
(cosign signatures) and `sha256-<hex>.att` (cosign attestations). A leaf module: it imports
nothing, so a source may use it without loading the verifiers.
"""

from __future__ import annotations

SIGNATURE_SUFFIX = ".sig"
ATTESTATION_SUFFIX = ".att"


def referrers_tag(algorithm: str, hexdigest: str) -> str:
    """Tag of the OCI 1.1 referrers index (image-spec 1.1, "Referrers Tag Schema")."""
    return f"{algorithm}-{hexdigest}"


def signature_tag(algorithm: str, hexdigest: str) -> str:
    """Legacy cosign signature tag of a digest already split and validated by the caller."""
    return referrers_tag(algorithm, hexdigest) + SIGNATURE_SUFFIX


def attestation_tag(algorithm: str, hexdigest: str) -> str:
    """Legacy cosign attestation tag of a digest already split and validated by the caller."""
    return referrers_tag(algorithm, hexdigest) + ATTESTATION_SUFFIX
