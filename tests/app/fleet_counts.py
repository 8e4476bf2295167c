"""What the fleet-wide counts kept at ingest must equal: the same figures recomputed from the
current files and the summary (both databases; the fault tests check it after kill -9 and
restarts through their own connection)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.storage.repositories.fleet import STRIPES, digest_key

_PAIR = "family, component, version, cuda_major, arch, sha256"
#: each count per stripe (an asset counts in the row of asset_id % STRIPES)
_KEPT_DIGESTS = f"SELECT key, {_PAIR}, stripe, assets FROM library_digest"
_DIGESTS = (
    f"SELECT {_PAIR}, asset_id % {STRIPES}, count(DISTINCT asset_id) FROM artifact "
    "WHERE is_current AND kind = 'file' AND sha256 IS NOT NULL AND version IS NOT NULL "
    f"GROUP BY {_PAIR}, asset_id % {STRIPES}"
)
_KEPT_VERSIONS = "SELECT key, family, version, stripe, assets FROM library_version"
_VERSIONS = (
    f"SELECT family, version, asset_id % {STRIPES}, count(DISTINCT asset_id) FROM asset_library "
    f"GROUP BY family, version, asset_id % {STRIPES}"
)
_VERDICT_COLUMNS = (
    "files, integrity_verified, provenance_verified, modified, unowned, provenance_conflict"
)
_KEPT_VERDICTS = f"SELECT asset_id, {_VERDICT_COLUMNS} FROM asset_file_verdicts WHERE files > 0"
_VERDICTS = (
    "SELECT asset_id, count(*), "
    "sum(CASE WHEN integrity = 'verified' THEN 1 ELSE 0 END), "
    "sum(CASE WHEN provenance = 'verified' THEN 1 ELSE 0 END), "
    "sum(CASE WHEN integrity = 'modified' THEN 1 ELSE 0 END), "
    "sum(CASE WHEN integrity = 'unowned' THEN 1 ELSE 0 END), "
    "sum(CASE WHEN provenance = 'conflict' THEN 1 ELSE 0 END) "
    "FROM artifact WHERE is_current AND kind = 'file' GROUP BY asset_id"
)

Rows = Callable[[str], Sequence[Sequence[Any]]]


def kept(rows: Rows) -> dict[str, dict[tuple[Any, ...], Any]]:
    """The three kept tables as {identity (and stripe): count(s)}."""
    return {
        "digests": {tuple(r[1:-1]): int(r[-1]) for r in rows(_KEPT_DIGESTS)},
        "versions": {tuple(r[1:-1]): int(r[-1]) for r in rows(_KEPT_VERSIONS)},
        "verdicts": {(int(r[0]),): tuple(int(x) for x in r[1:]) for r in rows(_KEPT_VERDICTS)},
    }


def summed(state: dict[str, dict[tuple[Any, ...], Any]]) -> dict[str, dict[tuple[Any, ...], int]]:
    """`kept` digests and versions summed over their stripes."""
    out: dict[str, dict[tuple[Any, ...], int]] = {"digests": {}, "versions": {}}
    for name, totals in out.items():
        for identity, count in state[name].items():
            totals[identity[:-1]] = totals.get(identity[:-1], 0) + count
    return out


def recomputed(rows: Rows) -> dict[str, dict[tuple[Any, ...], Any]]:
    """The same figures from the current files and summary."""
    return {
        "digests": {tuple(r[:-1]): int(r[-1]) for r in rows(_DIGESTS)},
        "versions": {tuple(r[:-1]): int(r[-1]) for r in rows(_VERSIONS)},
        "verdicts": {(int(r[0]),): tuple(int(x) for x in r[1:]) for r in rows(_VERDICTS)},
    }


def differences(rows: Rows) -> list[str]:
    """What differs between the kept counts and the recomputed ones (nothing: [])."""
    found = []
    have, want = kept(rows), recomputed(rows)
    for name in want:
        for identity in sorted(set(have[name]) | set(want[name]), key=repr):
            if have[name].get(identity) != want[name].get(identity):
                found.append(
                    f"{name} {identity}: kept {have[name].get(identity)}, "
                    f"current state {want[name].get(identity)}"
                )
    for table, columns_sql in (("library_digest", _PAIR), ("library_version", "family, version")):
        for row in rows(f"SELECT key, {columns_sql}, assets FROM {table}"):
            key, columns = row[0], tuple(row[1:-1])
            if key != digest_key(columns):
                found.append(f"{table} {columns}: key {key} is not its identity's")
            if int(row[-1]) <= 0:
                found.append(f"{table} {columns}: a row left at {row[-1]} assets")
    return found
