"""Integrity verdict: does a file's digest equal what its owner package recorded?

Pure function over the hash stage's digests and the catalog's record; findings are data.
"""

from __future__ import annotations

from scanner.model import Digests, Integrity, OwnedFile, Package

#: Algorithms the hash stage computes, by the names catalogers use.
_COMPUTED = ("sha256", "md5")


def integrity_verdict(
    digests: Digests | None, owner: Package | None, record: OwnedFile | None
) -> tuple[Integrity, str]:
    """Return the verdict and a one-line reason a person can act on."""
    if owner is None or record is None:
        return Integrity.UNOWNED, "no package database in the root claims this file"
    label = f"{owner.manager} package {owner.name} {owner.version}"
    if record.algorithm is None or not record.digest:
        return Integrity.NO_RECORD, f"{label} owns this file but recorded no digest for it"
    algorithm = record.algorithm.lower()
    if algorithm not in _COMPUTED:
        return (
            Integrity.NO_RECORD,
            f"{label} recorded a {algorithm} digest, which gpuprov does not compute",
        )
    if digests is None:
        return Integrity.NO_RECORD, "the file could not be read, so its digest is unknown"
    actual = digests.sha256 if algorithm == "sha256" else digests.md5
    if actual is None:
        return Integrity.NO_RECORD, f"{label} recorded {algorithm}, which was not computed"
    if actual.lower() == record.digest.lower():
        return Integrity.VERIFIED, f"{algorithm} matches the record of {label}"
    return (
        Integrity.MODIFIED,
        f"{algorithm} {actual} differs from {record.digest} recorded by {label}",
    )
