"""What changed between two scans of an asset: GPU libraries added, removed, or changed
(another digest or version at the same path)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.storage.repositories import inventory as repo
from app.storage.tables import Artifact

Key = tuple[str, str]


def change_key(artifact: Artifact) -> Key:
    """What identifies a library across scans: its path (or family:name for a package)."""
    return (artifact.kind, artifact.path or f"{artifact.family}:{artifact.name}")


def _state(artifact: Artifact) -> dict[str, Any]:
    return {"version": artifact.version, "sha256": artifact.sha256, "family": artifact.family}


def by_key(artifacts: Iterable[Artifact]) -> dict[int, dict[Key, Artifact]]:
    """Artifacts grouped per scan, keyed by `change_key`."""
    out: dict[int, dict[Key, Artifact]] = {}
    for artifact in artifacts:
        out.setdefault(artifact.scan_id, {})[change_key(artifact)] = artifact
    return out


def compare(old: Mapping[Key, Artifact], new: Mapping[Key, Artifact]) -> dict[str, Any]:
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
    grouped = by_key(repo.scan_artifacts(session, list(scan_ids)))
    out = {}
    for new_id, old_id in zip(scan_ids, scan_ids[1:], strict=False):
        diff = compare(grouped.get(old_id, {}), grouped.get(new_id, {}))
        out[new_id] = {"from_scan": old_id, **diff}
    return out
