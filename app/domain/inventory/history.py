"""What changed between two scans of an asset: GPU libraries added, removed, or changed
(another digest or version at the same path)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy.orm import Session

from app.storage.repositories import inventory as repo

Key = tuple[str, str]


class Facts(Protocol):
    """What a comparison reads of a library row (an `Artifact`, or the plain rows of
    `repo.scan_change_facts`)."""

    @property
    def scan_id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def family(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def sha256(self) -> str | None: ...


def change_key(artifact: Facts) -> Key:
    """What identifies a library across scans: its path (or family:name for a package)."""
    return (artifact.kind, artifact.path or f"{artifact.family}:{artifact.name}")


def _state(artifact: Facts) -> dict[str, Any]:
    return {"version": artifact.version, "sha256": artifact.sha256, "family": artifact.family}


def by_key(artifacts: Iterable[Facts]) -> dict[int, dict[Key, Facts]]:
    """Artifacts grouped per scan, keyed by `change_key` (of two with one key, the later)."""
    out: dict[int, dict[Key, Facts]] = {}
    for artifact in artifacts:
        out.setdefault(artifact.scan_id, {})[change_key(artifact)] = artifact
    return out


def compare(old: Mapping[Key, Facts], new: Mapping[Key, Facts]) -> dict[str, Any]:
    """Libraries added, removed and changed from ``old`` to ``new``."""
    return {
        "added": [{"path": k[1], **_state(new[k])} for k in sorted(new.keys() - old.keys())],
        "removed": [{"path": k[1], **_state(old[k])} for k in sorted(old.keys() - new.keys())],
        "changed": [
            {"path": k[1], "from": _state(old[k]), "to": _state(new[k])}
            for k in sorted(new.keys() & old.keys())
            if (new[k].sha256, new[k].version) != (old[k].sha256, old[k].version)
        ],
    }


def scan_changes(session: Session, scan_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """For each scan of ``scan_ids`` (one asset's history, newest first) but the oldest: what
    changed since the scan after it in the list, keyed by the newer scan's id."""
    if len(scan_ids) < 2:
        return {}
    grouped = by_key(repo.scan_change_facts(session, list(scan_ids)))
    out = {}
    for new_id, old_id in zip(scan_ids, scan_ids[1:], strict=False):
        diff = compare(grouped.get(old_id, {}), grouped.get(new_id, {}))
        out[new_id] = {"from_scan": old_id, **diff}
    return out
