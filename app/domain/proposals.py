"""Runtime evidence (issue 19 §4): on a host scanned with ``--runtime``, an affected finding whose
vulnerable library files no live process mapped over the observed window is *proposed* as
not_affected / vulnerable_code_not_in_execute_path, with the window and an expiry.

A proposal decides nothing (the finding and the gate stay as they are) until a person with the
``triage`` scope accepts it: that records an ordinary analysis (app.domain.analyses) authored by
the person. A report that shows a file of it loaded withdraws it, and the accepted analysis with
it, as the service (docs/advisories.md, "Runtime evidence"). The window is made of the
``--runtime`` reports themselves: each is one look at every process's maps, so the window is the
span from the first to the latest report that saw the files unmapped, with how many looks and
processes it holds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.domain import analyses, audit
from app.domain.analyses import InvalidAnalysis
from app.domain.audit import Actor
from app.errors import Conflict, NotFound
from app.storage.repositories import proposals as repo
from app.storage.repositories import scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import AdvisoryFinding, Artifact, RuntimeProposal

STATUSES = ("proposed", "accepted", "dismissed", "withdrawn")
#: GPUPROV_RUNTIME_PROPOSAL_DAYS: how long after the window's end an accepted proposal holds
DEFAULT_DAYS = 30
MAX_DAYS = 365
#: the products whose vulnerable code is the library file itself, so that no process mapping
#: the file means no process runs it. Not the driver (its kernel module runs whether or not a
#: process maps libcuda), nor a toolkit tool or DCGM's daemon (executables: the runtime scan
#: reads the GPU libraries processes map, not the programs they run).
LIBRARY_PRODUCTS = frozenset({"nvjpeg", "nvjpeg2000", "nvtiff", "tensorrt"})
JUSTIFICATION = "vulnerable_code_not_in_execute_path"
#: a dismissal's reason, as long as an analysis's detail
MAX_REASON = analyses.MAX_DETAIL
#: who withdraws a proposal (and its analysis): the service, on what a report showed
SERVICE = Actor("service", "gpuprov")
_MAX_FILES = 20


@dataclass(frozen=True, slots=True)
class Observation:
    """One ``--runtime`` report of a host: when, how many processes' maps it read, and whether
    it read them all (a claim that nothing maps a file needs every process's maps)."""

    scan_id: int
    at: datetime
    processes: int
    unreadable_processes: int
    unreadable_mappings: int

    @property
    def complete(self) -> bool:
        """Whether "no process maps it" can be said from it."""
        return (
            self.processes > 0 and self.unreadable_processes == 0 and self.unreadable_mappings == 0
        )


def observation(
    scan_id: int, at: datetime, runtime: Mapping[str, Any] | None
) -> Observation | None:
    """The observation a report's runtime summary makes (None: it did not look at processes)."""
    if runtime is None:
        return None
    return Observation(
        scan_id=scan_id,
        at=at,
        processes=int(runtime.get("processes") or 0),
        unreadable_processes=int(runtime.get("unreadable_processes") or 0),
        unreadable_mappings=int(runtime.get("unreadable_mappings") or 0),
    )


@dataclass(frozen=True, slots=True)
class _Candidate:
    """What runtime evidence may say about one CVE on the asset: its library files, or why it
    cannot speak for it."""

    product: str
    files: tuple[tuple[str, str], ...] = ()
    refusal: str | None = None


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def _candidate(findings: Sequence[AdvisoryFinding], on_disk: Mapping[str, Artifact]) -> _Candidate:
    """Every open finding of the CVE must be an affected one on a library product whose every
    path is a library file the scan hashed: an analysis covers the (CVE, asset) whole."""
    products: set[str] = set()
    files: set[tuple[str, str]] = set()
    for f in findings:
        evidence = f.evidence or {}
        product = str(evidence.get("product") or f.component or f.product)
        products.add(product)
        if f.status != "affected":
            return _Candidate(product, refusal=f"{f.cve} is {f.status} on {product}")
        if product not in LIBRARY_PRODUCTS:
            return _Candidate(
                product,
                refusal=f"{f.cve} is affected through {product}, which is not a library file "
                "(runtime evidence covers library files only)",
            )
        paths = _paths(f)
        if not paths:
            return _Candidate(product, refusal=f"{f.cve}'s finding names no file")
        for path in paths:
            row = on_disk.get(path)
            if row is None or row.sha256 is None:
                return _Candidate(
                    product, refusal=f"{path} is not a library file the latest scan hashed"
                )
            files.add((path, row.sha256))
    return _Candidate(",".join(sorted(products))[:64], tuple(sorted(files)))


def _loaded(rows: Iterable[Artifact], files: Iterable[tuple[str, str]]) -> str | None:
    """How the report shows one of these files loaded (a process maps its path or its bytes,
    deleted on disk or not), in words; None when no process does."""
    paths = {p for p, _ in files}
    digests = {s for _, s in files}
    for row in rows:
        if row.path not in paths and row.sha256 not in digests:
            continue
        pids = sorted({int(p["pid"]) for p in row.loaded_by or () if "pid" in p})
        if not (row.loaded_processes > 0 or row.loaded_deleted or row.loaded_copy or pids):
            continue
        count = max(row.loaded_processes, len(pids))
        shown = ", ".join(str(p) for p in pids[:10]) + (" ..." if len(pids) > 10 else "")
        how = " (deleted on disk)" if row.loaded_deleted else ""
        return (
            f"{row.path} (sha256 {row.sha256 or 'unknown'}) is mapped by {count} process"
            f"{'es' if count != 1 else ''}{f' (pid {shown})' if shown else ''}{how}"
        )
    return None


def _files(row: RuntimeProposal) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(f["path"]), str(f["sha256"])) for f in row.files))


def observe(
    session: Session,
    asset_id: int,
    seen: Observation | None,
    now: datetime,
    days: int = DEFAULT_DAYS,
) -> None:
    """Bring the host's proposals up to its latest report (called by ingest, in its
    transaction, after the report's findings are matched): withdraw those the report shows
    loaded or that no longer apply, widen the window of those it saw unmapped again, and
    propose for the affected library files a complete observation saw no process map."""
    live = repo.live_of_asset(session, asset_id)
    if seen is None and all(p.status == "dismissed" for p in live):
        return  # nothing observed and nothing to withdraw
    by_cve: dict[str, list[AdvisoryFinding]] = defaultdict(list)
    for f in repo.open_findings(session, asset_id):
        by_cve[f.cve].append(f)
    paths = {p for fs in by_cve.values() for f in fs for p in _paths(f)}
    digests = set()
    for p in live:
        for path, sha in _files(p):
            paths.add(path)
            digests.add(sha)
    rows = {r.id: r for r in repo.current_files(session, asset_id, sorted(paths), [])}
    # a path's own file as the scan hashed it on disk (a loaded copy is a process's bytes)
    on_disk = {r.path: r for r in rows.values() if r.path is not None and not r.loaded_copy}
    # and every current file with the same bytes: a process mapping a copy runs them too
    digests |= {r.sha256 for r in on_disk.values() if r.sha256 is not None}
    rows.update({r.id: r for r in repo.current_files(session, asset_id, [], sorted(digests))})
    candidates = {cve: _candidate(fs, on_disk) for cve, fs in by_cve.items()}
    still_open: set[str] = set()
    for p in live:
        if p.status == "dismissed":
            continue
        why = _no_longer(p, seen, rows.values(), candidates.get(p.cve))
        if why is not None:
            _withdraw(session, p, why, now)
            continue
        still_open.add(p.cve)
        if seen is not None and seen.complete and seen.at >= p.window_end:
            _widen(p, seen, days)
    session.flush()  # the withdrawn leave the open-proposal index before any new one
    if seen is None or not seen.complete:
        return
    dismissed = {(p.cve, _files(p)) for p in live if p.status == "dismissed"}
    for cve, candidate in sorted(candidates.items()):
        if candidate.refusal is not None or cve in still_open:
            continue
        if (cve, candidate.files) in dismissed:
            continue  # a person dismissed this very evidence: not proposed again
        if _loaded(rows.values(), candidate.files) is not None:
            continue
        repo.add(
            session,
            RuntimeProposal(
                asset_id=asset_id,
                cve=cve,
                product=candidate.product,
                files=[{"path": path, "sha256": sha} for path, sha in candidate.files],
                status="proposed",
                window_start=seen.at,
                window_end=seen.at,
                observations=1,
                processes_min=seen.processes,
                processes_max=seen.processes,
                first_scan_id=seen.scan_id,
                last_scan_id=seen.scan_id,
                expires_at=seen.at + timedelta(days=days),
                created_at=now,
            ),
        )


def _paths(f: AdvisoryFinding) -> list[str]:
    return [p for p in (f.evidence or {}).get("paths") or () if isinstance(p, str)]


def _no_longer(
    p: RuntimeProposal,
    seen: Observation | None,
    rows: Iterable[Artifact],
    candidate: _Candidate | None,
) -> str | None:
    """Why an open proposal no longer holds after this report (None: it still does)."""
    files = _files(p)
    if seen is not None:
        loaded = _loaded(rows, files)
        if loaded is not None:
            return f"seen loaded: {loaded} in the report of {_iso(seen.at)} (scan {seen.scan_id})"
    if candidate is None:
        return f"{p.cve} is no longer an open finding of the host's latest scan"
    if candidate.refusal is not None:
        return candidate.refusal
    if candidate.files != files:
        return "the affected library files changed: " + _describe(candidate.files)
    return None


def _widen(p: RuntimeProposal, seen: Observation, days: int) -> None:
    p.window_end = seen.at
    p.observations += 1
    p.processes_min = min(p.processes_min, seen.processes)
    p.processes_max = max(p.processes_max, seen.processes)
    p.last_scan_id = seen.scan_id
    if p.status == "proposed":  # an accepted one keeps the expiry its analysis was given
        p.expires_at = seen.at + timedelta(days=days)


def _withdraw(session: Session, p: RuntimeProposal, reason: str, now: datetime) -> None:
    was = p.status
    p.status = "withdrawn"
    p.withdrawn_at = now
    p.reason = reason
    audit.record(
        session,
        SERVICE,
        "proposal.withdraw",
        f"proposal:{p.id}",
        {
            "cve": p.cve,
            "asset_id": p.asset_id,
            "was": was,
            "analysis_id": p.analysis_id,
            "reason": reason,
        },
        now,
    )
    if was == "accepted" and p.analysis_id is not None:
        analyses.expire_analysis(
            session, p.analysis_id, SERVICE, f"runtime proposal {p.id} withdrawn: {reason}", now
        )


def _describe(files: Sequence[tuple[str, str]]) -> str:
    shown = [f"{path} (sha256 {sha[:12]}…)" for path, sha in files[:_MAX_FILES]]
    more = len(files) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


# -- people's decisions -------------------------------------------------------------------------


def proposal_dict(row: RuntimeProposal, now: datetime) -> dict[str, Any]:
    """A proposal as the API shows it."""
    return {
        "id": row.id,
        "asset_id": row.asset_id,
        "cve": row.cve,
        "product": row.product,
        "files": [{"path": f["path"], "sha256": f["sha256"]} for f in row.files],
        "status": row.status,
        "justification": JUSTIFICATION,
        "window": {
            "start": _iso(row.window_start),
            "end": _iso(row.window_end),
            "observations": row.observations,
            "processes_min": row.processes_min,
            "processes_max": row.processes_max,
            "first_scan_id": row.first_scan_id,
            "last_scan_id": row.last_scan_id,
        },
        "expires": _iso(row.expires_at),
        "expired": row.expires_at <= now,
        "created_at": _iso(row.created_at),
        "decided_at": _iso(row.decided_at),
        "decided_by": row.decided_by,
        "analysis_id": row.analysis_id,
        "withdrawn_at": _iso(row.withdrawn_at),
        "reason": row.reason,
    }


def detail_of(row: RuntimeProposal) -> str:
    """The accepted analysis's detail: the evidence and its window, in words."""
    files = _describe(_files(row))
    looks = f"{row.observations} --runtime observation{'s' if row.observations != 1 else ''}"
    counts = (
        f"{row.processes_min}"
        if row.processes_min == row.processes_max
        else f"{row.processes_min} to {row.processes_max}"
    )
    text = (
        f"Runtime evidence (proposal {row.id}): no process mapped {files} in any of {looks} of "
        f"the host from {_iso(row.window_start)} to {_iso(row.window_end)} ({counts} processes' "
        "maps read each time, none unreadable). Withdrawn by the service when a report shows "
        "it loaded."
    )
    return text[: analyses.MAX_DETAIL]


def list_proposals(
    session: Session,
    asset_id: int,
    *,
    status: str | None,
    limit: int,
    offset: int,
    now: datetime,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """A page of one asset's proposals, newest first; 404 for an asset outside the caller's
    ``scope``, as for none."""
    if not scopes.asset_visible(session, asset_id, scope):
        raise NotFound(f"no asset {asset_id}")
    rows, total = repo.page(session, asset_id, status, limit, offset)
    return {
        "items": [proposal_dict(r, now) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


def _visible(session: Session, proposal_id: int, scope: AssetScope | None) -> RuntimeProposal:
    row = repo.by_id(session, proposal_id)
    if row is None or not scopes.asset_visible(session, row.asset_id, scope):
        raise NotFound(f"no proposal {proposal_id}")
    return row


def get_proposal(
    session: Session, proposal_id: int, now: datetime, scope: AssetScope | None = None
) -> dict[str, Any]:
    """One proposal (404 for one of an asset outside the caller's ``scope``, as for none)."""
    return proposal_dict(_visible(session, proposal_id, scope), now)


def _decidable(session: Session, proposal_id: int, scope: AssetScope | None) -> RuntimeProposal:
    """The proposal, re-read under its asset's lock (a report's withdrawal never interleaves
    with a decision), if it is still proposed."""
    row = _visible(session, proposal_id, scope)
    repo.lock_asset(session, row.asset_id)
    session.refresh(row)
    if row.status != "proposed":
        raise Conflict(f"proposal {proposal_id} is {row.status}, not proposed")
    return row


def accept(
    session: Session,
    proposal_id: int,
    actor: Actor,
    now: datetime,
    scope: AssetScope | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Accept a proposal: record the analysis it proposes (not_affected /
    vulnerable_code_not_in_execute_path, the evidence as detail, the proposal's expiry) authored
    by ``actor``, both audited. Answers (the proposal, the analysis); NotFound outside the
    ``scope``, Conflict when it is no longer proposed, its evidence expired, or the host's
    latest scan no longer has these files affected."""
    row = _decidable(session, proposal_id, scope)
    if row.expires_at <= now:
        raise Conflict(
            f"proposal {proposal_id}'s evidence ended {_iso(row.window_end)} and expired "
            f"{_iso(row.expires_at)}: a newer --runtime report of the host renews it"
        )
    findings = [f for f in repo.open_findings(session, row.asset_id) if f.cve == row.cve]
    paths = [p for f in findings for p in _paths(f)]
    on_disk = {
        r.path: r
        for r in repo.current_files(session, row.asset_id, paths, [])
        if r.path is not None and not r.loaded_copy
    }
    candidate = _candidate(findings, on_disk) if findings else None
    if candidate is None or candidate.refusal is not None or candidate.files != _files(row):
        raise Conflict(
            f"proposal {proposal_id} no longer matches the host's latest scan: "
            + (
                (candidate.refusal or "its files changed")
                if candidate is not None
                else f"{row.cve} is no longer an open finding"
            )
        )
    analysis = analyses.record_analysis(
        session,
        cve=row.cve,
        asset_id=row.asset_id,
        state="not_affected",
        justification=JUSTIFICATION,
        detail=detail_of(row),
        expires=row.expires_at,
        author=actor.name,
        source=f"runtime:proposal:{row.id}",
        actor=actor,
        now=now,
        scope=scope,
    )
    row.status = "accepted"
    row.decided_at = now
    row.decided_by = actor.name[:256]
    row.analysis_id = int(analysis["id"])
    session.flush()
    audit.record(
        session,
        actor,
        "proposal.accept",
        f"proposal:{row.id}",
        {"cve": row.cve, "asset_id": row.asset_id, "analysis_id": row.analysis_id},
        now,
    )
    return proposal_dict(row, now), analysis


def dismiss(
    session: Session,
    proposal_id: int,
    actor: Actor,
    now: datetime,
    scope: AssetScope | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Dismiss a proposal (audited) with the person's ``reason``, if any: it is not made again
    for the same files; NotFound outside the ``scope``, Conflict when it is no longer proposed,
    InvalidAnalysis (422) for a reason longer than MAX_REASON."""
    reason = (reason or "").strip() or None
    if reason is not None and len(reason) > MAX_REASON:
        raise InvalidAnalysis("reason", f"at most {MAX_REASON} characters")
    row = _decidable(session, proposal_id, scope)
    row.status = "dismissed"
    row.decided_at = now
    row.decided_by = actor.name[:256]
    row.reason = reason
    session.flush()
    audit.record(
        session,
        actor,
        "proposal.dismiss",
        f"proposal:{row.id}",
        {"cve": row.cve, "asset_id": row.asset_id, "reason": reason},
        now,
    )
    return proposal_dict(row, now)
