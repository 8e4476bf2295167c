"""Provenance verdicts from the service's own signed reference catalogs, at ingest and when the
catalogs or the trust policy change (stored rows are re-evaluated; nothing is rescanned).

Verdicts come from `scanner.verify.provenance.provenance_verdict`, the function the scanner uses,
so the service and the agent can never disagree on the same inputs. It is handed, per file, only
the catalog entries that could matter (same digest, same family and release, or same file name
with a package), in catalog and entry order, which gives exactly the verdict the full catalogs
would give at a fraction of the cost.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.storage.repositories import fleet
from app.storage.repositories import provenance as repo
from scanner.model import Sha256
from scanner.refcatalog.model import CatalogEntry
from scanner.verify.provenance import (
    Provenance,
    ProvenanceVerdict,
    VerifiedCatalog,
    provenance_verdict,
)

#: the reason `provenance_verdict` gives when no catalog knows a file
NO_MATCH = "no trusted catalog lists this file's digest"
NO_TRUSTED_CATALOG = "no reference catalog stored in the service is trusted by its trust policy"


def _release(version: str) -> str:
    # `versions_match` needs equal versions or a prefix of at least major.minor.patch, so two
    # versions it matches always share their first three components.
    return ".".join(version.split(".")[:3])


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class CatalogRef:
    """A trusted catalog: its name and the signer identity its verdicts carry."""

    id: int
    name: str
    signer: str


class ActiveCatalogs:
    """The trusted catalogs in import order, indexed by digest, (family, release) and file name."""

    def __init__(
        self, catalogs: Sequence[CatalogRef], entries: Sequence[Sequence[CatalogEntry]]
    ) -> None:
        self.catalogs = tuple(catalogs)
        self._entries = tuple(tuple(e) for e in entries)
        self._by_digest: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self._by_release: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
        self._by_name: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for c, listed in enumerate(self._entries):
            for i, entry in enumerate(listed):
                ref = (c, i)
                self._by_digest[entry.sha256].append(ref)
                if entry.family and entry.version:
                    self._by_release[(entry.family, _release(entry.version))].append(ref)
                if entry.package:
                    self._by_name[_basename(entry.name)].append(ref)

    @property
    def entry_count(self) -> int:
        """Entries over all catalogs."""
        return sum(len(e) for e in self._entries)

    def verdict(
        self,
        path: str,
        family: str | None,
        version: str | None,
        sha256: str | None,
        *,
        cuda_major: int | None = None,
        arch: str | None = None,
        owner_purl: str | None = None,
    ) -> ProvenanceVerdict:
        """One file's verdict against every trusted catalog."""
        if not self.catalogs:
            return ProvenanceVerdict(Provenance.UNKNOWN, NO_TRUSTED_CATALOG)
        if not sha256:
            return ProvenanceVerdict(Provenance.UNKNOWN, "the file has no SHA-256 digest")
        refs = set(self._by_digest.get(sha256.lower(), ()))
        if family and version:
            refs.update(self._by_release.get((family, _release(version)), ()))
        if owner_purl:
            refs.update(self._by_name.get(_basename(path), ()))
        if not refs:
            return ProvenanceVerdict(Provenance.UNKNOWN, NO_MATCH)
        picked: dict[int, list[CatalogEntry]] = defaultdict(list)
        for c, i in sorted(refs):
            picked[c].append(self._entries[c][i])
        subsets = [
            VerifiedCatalog(self.catalogs[c].name, self.catalogs[c].signer, tuple(found))
            for c, found in sorted(picked.items())
        ]
        return provenance_verdict(
            path,
            family,
            version,
            sha256,
            subsets,
            cuda_major=cuda_major,
            arch=arch,
            package_purl=owner_purl,
        )


def load_active(session: Session, refs: Sequence[CatalogRef]) -> ActiveCatalogs:
    """The catalogs' stored entries, indexed."""
    by_catalog: dict[int, list[CatalogEntry]] = {ref.id: [] for ref in refs}
    for row in repo.entries_of(session, [ref.id for ref in refs]):
        by_catalog[row.catalog_id].append(
            CatalogEntry(
                name=row.name,
                sha256=Sha256(row.sha256),
                family=row.family,
                component=row.component,
                version=row.version,
                cuda_major=row.cuda_major,
                arch=row.arch,
                package=row.package,
            )
        )
    return ActiveCatalogs(refs, [by_catalog[ref.id] for ref in refs])


def active_refs(session: Session) -> list[CatalogRef]:
    """The catalogs the current policy trusts, in import order."""
    return [
        CatalogRef(row.id, row.name, row.signer or "")
        for row in repo.all_catalogs(session)
        if row.active
    ]


class CatalogCache:
    """This process's copy of the trusted catalogs, reloaded whenever the stored set changes.

    Each use reads a small fingerprint (the policy's digest, each catalog's id, digest and
    status), so every API replica follows imports and policy changes made through any other.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: tuple[object, ...] | None = None
        self._active: ActiveCatalogs | None = None

    def for_ingest(self, session: Session) -> ActiveCatalogs | None:
        """Take the shared provenance lock and return the trusted catalogs, or None when no
        catalog was ever imported (reports then keep their own verdicts)."""
        repo.lock(session, exclusive=False)
        state = repo.catalog_state(session)
        if state is None:
            return None
        with self._lock:
            if state == self._state and self._active is not None:
                return self._active
        from app.domain.catalogs import checked_active  # catalogs build on this module

        active = checked_active(session)
        with self._lock:
            self._state, self._active = state, active
        return active


@dataclass(frozen=True, slots=True)
class Reevaluation:
    """What a re-evaluation did: files examined in Python, and verdicts changed."""

    mode: str  # "incremental" | "full"
    candidates: int
    changed: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"mode": self.mode, "candidates": self.candidates, "changed": self.changed}


def _key(verdict: ProvenanceVerdict) -> tuple[str, str | None, str | None, str]:
    return (verdict.provenance.value, verdict.signer, verdict.catalog, verdict.reason)


def _stored(row: Any) -> tuple[Any, ...]:
    return (row.provenance, row.provenance_signer, row.provenance_catalog, row.provenance_reason)


def _verdict_of(row: Any, catalogs: ActiveCatalogs) -> ProvenanceVerdict:
    return catalogs.verdict(
        row.path or row.name,
        row.family,
        row.version,
        row.sha256,
        cuda_major=row.cuda_major,
        arch=row.arch,
        owner_purl=row.owner_purl,
    )


def _write(session: Session, changes: Iterable[tuple[tuple[Any, ...], int]]) -> int:
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for key, artifact_id in changes:
        groups[key].append(artifact_id)
    repo.set_verdicts(session, groups)
    return sum(len(ids) for ids in groups.values())


def reevaluate_all(session: Session, catalogs: ActiveCatalogs) -> Reevaluation:
    """Give every current library file its verdict against `catalogs` (all trusted catalogs).

    Files that an entry may match are evaluated one by one; every other file is set `unknown`
    by one set-based statement. Only rows whose verdict changes are written.
    """
    ids = [ref.id for ref in catalogs.catalogs]
    candidates = 0
    changes: list[tuple[tuple[Any, ...], int]] = []
    for row in repo.candidate_files(session, ids):
        candidates += 1
        key = _key(_verdict_of(row, catalogs))
        if key != _stored(row):
            changes.append((key, row.id))
    changed = _write(session, changes)
    reason = NO_MATCH if catalogs.catalogs else NO_TRUSTED_CATALOG
    changed += repo.reset_unmatched(session, ids, reason)
    if changed:  # the overview's verdict shares are kept per asset
        fleet.refresh_verdicts(session)
    return Reevaluation("full", candidates, changed)


def reevaluate_added(session: Session, added: ActiveCatalogs) -> Reevaluation:
    """Fold a newly imported catalog (last in order) into stored verdicts that already reflect
    every earlier trusted catalog.

    With the new catalog last, a file verified before stays verified; a file whose digest it
    lists becomes verified by it; a file already in conflict stays so; an unknown file may
    become a conflict. So only the catalog's candidates that are not verified are read.
    """
    ids = [ref.id for ref in added.catalogs]
    candidates = 0
    changes: list[tuple[tuple[Any, ...], int]] = []
    for row in repo.candidate_files(session, ids, skip_verified=True):
        candidates += 1
        verdict = _verdict_of(row, added)
        if verdict.provenance is Provenance.VERIFIED or (
            verdict.provenance is Provenance.CONFLICT and row.provenance != "conflict"
        ):
            key = _key(verdict)
            if key != _stored(row):
                changes.append((key, row.id))
    changed = _write(session, changes)
    if changed:  # the overview's verdict shares are kept per asset
        fleet.refresh_verdicts(session)
    return Reevaluation("incremental", candidates, changed)
