"""What the user gave the verify stage: a trust policy or key, catalogs, signature files.

Kept apart from the verifiers so that composing a scan does not import cryptography and
sigstore unless verification was asked for.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct


class TrustInputs(Struct, frozen=True):
    """A policy file or one key, signed catalogs, local signature/attestation files."""

    trust: Path | None = None
    trust_key: Path | None = None
    catalogs: tuple[Path, ...] = ()
    attestations: tuple[Path, ...] = ()

    @property
    def wanted(self) -> bool:
        return bool(self.trust or self.trust_key or self.catalogs or self.attestations)
