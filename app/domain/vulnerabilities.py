"""Advisory findings of the fleet: the scanner's pure matcher (scanner/advisories/match.py) run
on stored products and packages and the stored feed, its answers stored per (asset, CVE,
product or package found).

Matched once per distinct set of facts (products, CUDA Toolkit libraries, a host's condition
facts, the packages stored OSV documents name): assets holding the same stack share one
evaluation, fanned out to each. Re-evaluated for one asset when its report arrives (ingest) and
for the whole fleet when the feed changes (import). Every answer names the feed it was matched
against (the newest import and the number of documents).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.clock import utcnow
from app.domain import analyses, notifications
from app.errors import NotFound
from app.storage.repositories import advisories as adv_repo
from app.storage.repositories import scopes
from app.storage.repositories import vulnerabilities as repo
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import AdvisoryFinding, AssetProduct
from scanner.advisories.match import (
    TOOLKIT_FAMILIES,
    AssetFacts,
    Installed,
    StatusEntry,
    match,
    matching_data,
    product_key,
    product_keys,
    status_entry,
)
from scanner.advisories.package_match import (
    InstalledPackage,
    entry_key,
    match_name,
    package_keys,
    package_of,
    product_packages,
)
from scanner.policy.facts import AdvisoryFacts, VulnerabilityFact

#: the advisory statuses an asset's answer may have, in the API's filter
STATUSES = ("affected", "not_affected", "fixed", "under_investigation")
#: the statuses a person must act on: affected, or the vendor does not know yet
OPEN_STATUSES = ("affected", "under_investigation")


@dataclass(frozen=True)
class MatchSummary:
    """What one re-evaluation did."""

    assets: int
    #: the distinct stacks evaluated (the others were reused)
    distinct: int
    findings: int


def store_products(
    session: Session, asset_id: int, products: Iterable[Any], *, replace: bool
) -> None:
    """Keep the products of an asset's latest report (``ReportProduct`` values)."""
    rows = [
        {
            "key": p.key,
            "version": p.version,
            "toolkit": p.toolkit,
            "line": p.line,
            "branch": p.branch,
            "paths": list(p.paths),
            "sha256": p.sha256,
            "owner": p.owner,
        }
        for p in products
    ]
    repo.replace_products(session, asset_id, rows, replace=replace)


def store_conditions(
    session: Session,
    asset_id: int,
    conditions: Mapping[str, tuple[str, str | None]],
    *,
    replace: bool,
) -> None:
    """Keep the condition facts of an asset's latest report (a host's own; an image's report
    carries none, so its latest report clears any)."""
    rows = [
        {"name": name, "value": value, "source": source}
        for name, (value, source) in sorted(conditions.items())
    ]
    repo.replace_conditions(session, asset_id, rows, replace=replace)


def _installed(row: AssetProduct) -> Installed:
    return Installed(
        key=row.key,
        version=row.version,
        toolkit=row.toolkit,
        line=row.line,
        branch=row.branch,
        paths=tuple(row.paths or ()),
        sha256=row.sha256,
        owner=row.owner,
    )


def _wanted_keys(facts: AssetFacts) -> set[str]:
    """The bulletin product keys whose statements may concern an asset of these facts, and
    the ``osv:<scheme>:<name>`` keys of the packages OSV statements may name."""
    held = [*facts.packages, *product_packages(facts.products)]
    return product_keys(facts) | {_osv_key(s, n) for s, n in package_keys(held)}


def _osv_key(scheme: str, name: str) -> str:
    return f"osv:{scheme}:{name}"


def stack_key(facts: AssetFacts) -> str:
    """The identity of a stack: SHA-256 of the matcher's inputs. Condition facts are inputs:
    two hosts of one stack but different configurations never share an answer; so are the
    packages a stored OSV statement names. Without facts or packages the key is the one it was
    before either existed."""
    inputs: list[Any] = [
        [list(astuple(p)) for p in facts.products],
        [list(x) for x in facts.libraries],
    ]
    if facts.facts:
        inputs.append(sorted([k, v] for k, v in facts.facts.items()))
    if facts.packages:
        # tagged: a packages list is never read as a facts list
        inputs.append(["packages", *(list(astuple(p)) for p in facts.packages)])
    text = json.dumps(inputs, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _packages(
    rows: Iterable[tuple[str | None, str | None, str | None, str | None]],
) -> set[InstalledPackage]:
    """The packages OSV statements may name, of (purl, version, source name, source version)
    rows; the others (rpm, conda, a deb of another distribution) are no matcher input."""
    out = set()
    for purl, version, source_name, source_version in rows:
        if not purl:
            continue
        found = package_of(purl, version, source_name=source_name, source_version=source_version)
        if found is not None:
            out.add(found)
    return out


def facts_of_report(
    products: Iterable[Any],
    families: Iterable[str],
    conditions: Mapping[str, tuple[str, str | None]] | None = None,
    packages: Iterable[Any] = (),
) -> AssetFacts:
    """The matcher's inputs of a report: its products (``ReportProduct``), the CUDA Toolkit
    library families it holds, a host's condition facts and its packages (``ReportPackage``):
    what ``rematch`` would read back from storage."""
    return _facts(
        [
            Installed(
                key=p.key,
                version=p.version,
                toolkit=p.toolkit,
                line=p.line,
                branch=p.branch,
                paths=tuple(p.paths),
                sha256=p.sha256,
                owner=p.owner,
            )
            for p in products
        ],
        {(f, None) for f in families if f in TOOLKIT_FAMILIES},
        {name: value for name, (value, _) in (conditions or {}).items()},
        _packages((p.purl, p.version, p.source_name, p.source_version) for p in packages),
    )


def _facts(
    products: Iterable[Installed],
    libraries: Iterable[tuple[str, str | None]],
    conditions: Mapping[str, str] | None = None,
    packages: Iterable[InstalledPackage] = (),
) -> AssetFacts:
    return AssetFacts(
        products=tuple(sorted(products, key=repr)),
        libraries=tuple(sorted(libraries, key=repr)),
        facts=dict(sorted((conditions or {}).items())),
        packages=tuple(sorted(set(packages), key=repr)),
    )


def rematch(
    session: Session,
    now: datetime,
    asset_ids: Sequence[int] | None = None,
    *,
    facts: AssetFacts | None = None,
) -> MatchSummary:
    """Match these assets (default: every asset, each stack again: the feed changed) against
    the stored feed; a stack already matched against this feed is reused. ``facts``: the one
    asset's inputs as its report gave them (ingest), instead of reading them back. Never
    commits."""
    # advisory.affected: the (asset, CVE) pairs affected after this match and not before it,
    # compared only when an endpoint wants them
    watch = notifications.wanted(session, notifications.ADVISORY_AFFECTED)
    before = repo.affected_pairs(session, asset_ids) if watch else set()
    summary = _rematch(session, now, asset_ids, facts=facts)
    if watch:
        new = repo.affected_pairs(session, asset_ids) - before
        if new:
            notifications.advisory_affected(session, now, sorted(new))
    return summary


def _rematch(
    session: Session,
    now: datetime,
    asset_ids: Sequence[int] | None,
    *,
    facts: AssetFacts | None,
) -> MatchSummary:
    full = asset_ids is None
    ids = list(asset_ids) if asset_ids is not None else repo.asset_ids(session)
    stacks: dict[str, AssetFacts] = {}
    pairs: list[tuple[int, str]] = []
    # the packages that matter: those a stored OSV statement names (a stack's key holds only
    # them, so assets differing in packages nothing names still share one evaluation)
    named = _osv_names(session) if facts is None or facts.packages else {}
    if facts is not None and len(ids) == 1:
        facts = _narrow(facts, named)
        key = stack_key(facts)
        held, current = repo.asset_stack_state(session, ids[0], key)
        if current:  # the usual report: its stack is matched against this feed already
            if held != key:
                repo.set_asset_stacks(session, [(ids[0], key)])
            return MatchSummary(1, 0, 0)
        stacks[key] = facts
        pairs.append((ids[0], key))
    else:
        products: dict[int, list[Installed]] = defaultdict(list)
        for row in repo.products_of(session, ids):
            products[row.asset_id].append(_installed(row))
        libraries: dict[int, set[tuple[str, str | None]]] = defaultdict(set)
        for asset_id, family, _ in repo.libraries_of(session, ids, TOOLKIT_FAMILIES):
            # the family alone: a toolkit library's version decides nothing (its component
            # does), and assets with the same families share one evaluation
            libraries[asset_id].add((family, None))
        conditions: dict[int, dict[str, str]] = defaultdict(dict)
        for asset_id, name, value in repo.conditions_of(session, ids):
            conditions[asset_id][name] = value
        owned: dict[int, list[tuple[str, str | None, str | None, str | None]]] = defaultdict(list)
        for asset_id, purl, version, source_name, source_version in (
            repo.packages_of(session, ids) if named else ()
        ):
            owned[asset_id].append((purl, version, source_name, source_version))
        for asset_id in ids:
            one = _facts(
                products.get(asset_id, ()),
                libraries.get(asset_id, ()),
                conditions.get(asset_id),
                _packages(owned.get(asset_id, ())),
            )
            one = _narrow(one, named)
            key = stack_key(one)
            stacks.setdefault(key, one)
            pairs.append((asset_id, key))
    todo = sorted(stacks)
    if not full:
        todo = [k for k in todo if k not in repo.current_stacks(session, todo)]
        for key in todo:
            repo.lock_stack(session, key)
        # another report of the same stack may have matched it while this one waited
        if todo:
            todo = [k for k in todo if k not in repo.current_stacks(session, todo)]
    if not todo and not full:  # the usual report: its stack is matched already
        repo.set_asset_stacks(session, pairs)
        return MatchSummary(len(ids), 0, 0)
    feed_at, documents = repo.feed_state(session)
    wanted = set().union(*(_wanted_keys(stacks[k]) for k in todo)) if todo else set()
    by_key = _statuses(session, wanted, named) if wanted else {}
    rows: list[dict[str, Any]] = []
    for key in todo:
        facts = stacks[key]
        cves = sorted(set().union(*(by_key.get(k, {}).keys() for k in _wanted_keys(facts))))
        for cve in cves:
            entries = [e for k in by_key for e in by_key[k].get(cve, ())]
            rows += [_row(key, f) for f in match(cve, entries, facts)]
    stack = {"matched_at": now, "feed_imported_at": feed_at, "feed_documents": documents}
    repo.replace_stack_findings(session, todo, rows, stack)
    repo.set_asset_stacks(session, pairs)
    if full:
        repo.drop_unused_stacks(session)
    return MatchSummary(len(ids), len(todo), len(rows))


def _osv_names(session: Session) -> dict[tuple[str, str], set[str]]:
    """(scheme, normalized name) of each package a stored OSV statement names -> the names as
    the statements write them."""
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for platform, product in repo.package_names(session):
        found = entry_key(StatusEntry(product, "", None, None, ecosystem=platform or ""))
        if found is not None:
            out[found[:2]].add(product)
    return dict(out)


def _narrow(facts: AssetFacts, named: Mapping[tuple[str, str], Any]) -> AssetFacts:
    """The facts with only the packages some OSV statement names."""
    kept = tuple(p for p in facts.packages if (p.scheme, match_name(p)) in named)
    return facts if kept == facts.packages else dataclasses.replace(facts, packages=kept)


def _statuses(
    session: Session, keys: set[str], named: Mapping[tuple[str, str], set[str]]
) -> dict[str, dict[str, list[StatusEntry]]]:
    """key -> CVE -> its open statuses: of the bulletin products these product keys name, and
    of the packages the ``osv:`` keys name (``named``: how the statements write them)."""
    data = matching_data()
    out: dict[str, dict[str, list[StatusEntry]]] = defaultdict(lambda: defaultdict(list))
    names = {n: product_key(n, data) for n in repo.product_names(session)}
    wanted = sorted(n for n, k in names.items() if k is not None and k in keys)
    for cve, status in repo.open_statuses(session, wanted):
        out[str(names[status.product])][cve].append(status_entry(status, "bulletin"))
    if any(k.startswith("osv:") for k in keys):
        osv = {
            n for (scheme, name), ns in named.items() if _osv_key(scheme, name) in keys for n in ns
        }
        for cve, status in repo.open_statuses(session, sorted(osv), osv=True):
            entry = status_entry(status, "osv")
            found = entry_key(entry)
            if found is not None:
                out[_osv_key(found[0], found[1])][cve].append(entry)
    return out


def _row(stack: str, f: Any) -> dict[str, Any]:
    return {
        "stack": stack,
        "cve": f.cve[:64],
        "status": f.status,
        "justification": f.justification,
        "product": f.product[:64],
        "component": f.component[:128] if f.component else None,
        "installed": f.installed[:256] if f.installed else None,
        "affected_text": f.affected_text,
        "fixed_in": f.fixed_in,
        "review": f.review,
        "inferred": f.inferred,
        "conditions_unevaluated": list(f.conditions_unevaluated),
        "evidence": dict(f.evidence),
    }


# -- answers ----------------------------------------------------------------------------------


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def _facts_by_cve(session: Session, cves: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per CVE: its top severity and score, and its newest bulletin."""
    out: dict[str, dict[str, Any]] = {}
    for vuln, doc in repo.vulnerability_facts(session, sorted(set(cves))):
        cur = out.get(vuln.cve)
        score = vuln.cvss if vuln.cvss is not None else -1.0
        if cur is None or score > cur["_score"]:
            out[vuln.cve] = {
                "_score": score,
                "severity": vuln.severity,
                "cvss": vuln.cvss,
                "bulletin": doc.tracking_id,
            }
    return out


def _feed(session: Session, asset_id: int | None) -> dict[str, Any]:
    current_at, documents = repo.feed_state(session)
    state = repo.match_state(session, asset_id) if asset_id is not None else None
    return {
        "documents": documents,
        "imported_at": _iso(current_at),
        "matched_at": _iso(state.matched_at) if state else None,
        "matched_feed_imported_at": _iso(state.feed_imported_at) if state else None,
    }


def _item(
    f: AdvisoryFinding, facts: Mapping[str, Any], applied: analyses.Applied | None = None
) -> dict[str, Any]:
    return {
        "cve": f.cve,
        "bulletin": facts.get("bulletin"),
        "severity": facts.get("severity"),
        "cvss": facts.get("cvss"),
        "status": f.status,
        "justification": f.justification,
        "product": f.product,
        "component": f.component,
        "installed": f.installed,
        "affected_text": f.affected_text,
        "fixed_in": f.fixed_in,
        "review": f.review,
        "inferred": f.inferred,
        "conditions_unevaluated": list(f.conditions_unevaluated or ()),
        "evidence": dict(f.evidence or {}),
        # the triage decision in force (a trusted author's first): shown whoever wrote it;
        # only a trusted one changes the gate
        "analysis": applied.as_dict() if applied is not None else None,
    }


def asset_vulnerabilities(
    session: Session,
    asset_id: int,
    *,
    status: str | Sequence[str] | None,
    limit: int,
    offset: int,
    by_status: bool = False,
    trusted: Collection[str] = frozenset(),
    now: datetime | None = None,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """A page of one asset's findings with the analysis in force for each, and the feed they
    were matched against (newest CVE first; ``by_status``: affected ones first); 404 for an
    asset outside the caller's ``scope``, as for none."""
    if not scopes.asset_visible(session, asset_id, scope):
        raise NotFound(f"no asset {asset_id}")
    rows, total = repo.findings_of(session, asset_id, status, limit, offset, by_status=by_status)
    facts = _facts_by_cve(session, [r.cve for r in rows])
    applied = analyses.applied(session, [asset_id], now or utcnow(), trusted)
    return {
        "items": [_item(r, facts.get(r.cve, {}), applied.get((asset_id, r.cve))) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
        "feed": _feed(session, asset_id),
    }


def advisory_affected(
    session: Session,
    cve: str,
    *,
    status: str | None,
    limit: int,
    offset: int,
    trusted: Collection[str] = frozenset(),
    now: datetime | None = None,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """A page of the assets (of the caller's ``scope``) one CVE was matched on: each with its
    files and versions and the analysis in force."""
    if not adv_repo.by_cves(session, [cve]):
        raise NotFound(f"no advisory names {cve}")
    rows, total = repo.affected_by_cve(session, cve, status, limit, offset, scope)
    facts = _facts_by_cve(session, [cve]).get(cve, {})
    applied = analyses.applied(session, [a.id for _, a in rows], now or utcnow(), trusted)
    return {
        "cve": cve,
        "items": [
            {
                "asset": {"id": a.id, "kind": a.kind, "name": a.name},
                **_item(f, facts, applied.get((a.id, cve))),
                "files": list((f.evidence or {}).get("paths") or []),
            }
            for f, a in rows
        ],
        "total": total,
        "limit": limit,
        "offset": offset,
        "feed": _feed(session, None),
    }


# -- the gate's input ---------------------------------------------------------------------------


def advisory_facts(
    session: Session, asset_ids: Sequence[int], now: datetime, trusted: Collection[str]
) -> dict[int, AdvisoryFacts]:
    """Per asset: its stored findings with the trusted analysis in force for each, and the
    stored feed (its newest import) they must have been matched against: the ``advisories``
    rule's input, from stored facts only."""
    feed_at, documents = repo.feed_state(session)
    checked_at = repo.feed_checked_at(session)
    stacks = repo.stacks_of(session, asset_ids)
    rows = repo.findings_of_stacks(session, sorted({s.key for s in stacks.values()}))
    by_stack: dict[str, list[AdvisoryFinding]] = defaultdict(list)
    for row in rows:
        by_stack[row.stack].append(row)
    severity = _facts_by_cve(session, [r.cve for r in rows])
    applied = {
        k: a for k, a in analyses.applied(session, asset_ids, now, trusted).items() if a.trusted
    }
    out: dict[int, AdvisoryFacts] = {}
    for asset_id in asset_ids:
        stack = stacks.get(asset_id)
        stale = None
        if stack is None:
            stale = "the asset's findings were never matched against the advisory feed"
        elif stack.feed_imported_at != feed_at or stack.feed_documents != documents:
            stale = (
                f"the asset's findings were matched against the feed of "
                f"{_iso(stack.feed_imported_at)} ({stack.feed_documents} documents), not the "
                f"feed stored now ({_iso(feed_at)}, {documents} documents)"
            )
        found = []
        for f in by_stack.get(stack.key, []) if stack is not None else []:
            a = applied.get((asset_id, f.cve))
            found.append(
                VulnerabilityFact(
                    cve=f.cve,
                    status=f.status,
                    severity=severity.get(f.cve, {}).get("severity"),
                    product=f.product,
                    component=f.component,
                    installed=f.installed,
                    fix_available=f.fixed_in is not None,
                    review=f.review,
                    analysis_state=a.row.state if a else None,
                    analysis_author=a.row.author if a else None,
                    analysis_reason=(a.row.justification or a.row.detail) if a else None,
                )
            )
        out[asset_id] = AdvisoryFacts(
            feed_at=feed_at,
            checked_at=checked_at,
            documents=documents,
            source="the service's stored feed",
            findings=tuple(found),
            stale=stale,
        )
    return out


def feed_summary(session: Session) -> dict[str, Any]:
    """The stored feed: its documents and newest import."""
    return _feed(session, None)


def status_counts(session: Session, cve: str, scope: AssetScope | None = None) -> dict[str, int]:
    """Per status (``STATUSES`` order), the assets (of the scope) with a finding of ``cve``."""
    counts = repo.status_counts(session, cve, scope)
    return {s: counts.get(s, 0) for s in STATUSES}


def asset_status_counts(session: Session, asset_id: int) -> dict[str, int]:
    """Per status (``STATUSES`` order), the CVEs with a finding of that status on the asset."""
    counts = repo.asset_status_counts(session, asset_id)
    return {s: counts.get(s, 0) for s in STATUSES}


def worst_affected(session: Session, asset_ids: Sequence[int]) -> dict[int, str]:
    """Per asset, the highest severity of an advisory it is affected by (none: absent)."""
    return repo.worst_affected(session, asset_ids)
