"""Fleet compliance: every asset's latest scan evaluated under every stored policy, stored per
asset and per control when a report is ingested or a policy version is stored, and counted
per control when read (never evaluated on a read).

One rule depends on the clock: `scan_age`. It is left out of the stored control statuses and
applied when compliance is read, from each asset's stored scan time, so a scan that was fresh
when stored turns stale without any write. The `parity` rule is judged against the baseline
fleet as it was when the asset was evaluated (re-evaluated with every scan and policy change).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.domain import gate, policies
from app.domain import stored as stored_documents
from app.domain.tabular import csv_chunks, json_chunks
from app.errors import NotFound, StoredDocumentAltered
from app.storage.repositories import compliance as repo
from app.storage.repositories import gate as gate_repo
from app.storage.repositories import policies as policy_repo
from app.storage.repositories.scopes import AssetScope
from app.storage.session import Database
from app.storage.tables import Asset, ComplianceAsset, PromotionPolicyVersion
from scanner.errors import ScannerError
from scanner.model import AssetKind
from scanner.policy import rules
from scanner.policy.controls import ControlsCatalog, default_catalog
from scanner.policy.document import RULE_IDS, LoadedPolicy, PromotionPolicy
from scanner.policy.drivers import default_drivers
from scanner.policy.evaluate import Evaluation, RuleResult, control_status, decide, evaluate
from scanner.policy.facts import AssetFacts
from scanner.policy.rules import FleetBaseline, Status
from scanner.wording import counted

log = logging.getLogger(__name__)
_AGE = "scan_age"


def _slsa_level(policy: PromotionPolicy) -> int | None:
    return policy.rules.slsa.min_level if policy.rules.slsa else None


def cited_controls(policy: PromotionPolicy, catalog: ControlsCatalog) -> list[str]:
    """The controls the policy's rules cite, in rule order."""
    out: dict[str, None] = {}
    for rule_id in RULE_IDS:
        if getattr(policy.rules, rule_id) is not None:
            out.update(dict.fromkeys(catalog.for_rule(rule_id, _slsa_level(policy))))
    return list(out)


def _aged(policy: PromotionPolicy, catalog: ControlsCatalog) -> frozenset[str]:
    if policy.rules.scan_age is None:
        return frozenset()
    return frozenset(catalog.for_rule(_AGE, _slsa_level(policy)))


def _cutoff(policy: PromotionPolicy, now: datetime) -> datetime | None:
    rule = policy.rules.scan_age
    return None if rule is None else now - timedelta(hours=rule.max_hours)


# ---------------------------------------------------------------------------- writing


def _rows(
    policy_name: str,
    version: int,
    asset: Asset,
    scan_id: int,
    facts: AssetFacts,
    evaluation: Evaluation,
    policy: PromotionPolicy,
    catalog: ControlsCatalog,
    now: datetime,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    static = control_status([r for r in evaluation.results if r.rule != _AGE])
    for cid in _aged(policy, catalog):
        static.setdefault(cid, Status.NOT_APPLICABLE)  # the read applies scan_age
    asset_row = {
        "policy_name": policy_name,
        "asset_id": asset.id,
        "policy_version": version,
        "scan_id": scan_id,
        "decision": evaluation.decision.value,
        "scanned_at": facts.scanned_at,
        "evaluated_at": now,
        "results": [r.to_dict() for r in evaluation.results],
    }
    controls = [
        {
            "policy_name": policy_name,
            "asset_id": asset.id,
            "control_id": cid,
            "status": status.value,
            "scanned_at": facts.scanned_at,
        }
        for cid, status in static.items()
    ]
    return asset_row, controls


def _evaluate_batch(
    session: Session,
    assets: Sequence[Asset],
    row: PromotionPolicyVersion,
    loaded: LoadedPolicy,
    baseline: FleetBaseline | None,
    catalog: ControlsCatalog,
    now: datetime,
    trusted: Collection[str] = frozenset(),
) -> int:
    scan_ids = [a.latest_scan_id for a in assets if a.latest_scan_id is not None]
    scans = gate_repo.scans_by_id(session, scan_ids)
    files = gate_repo.library_facts_of(session, scan_ids)
    asset_rows: list[dict[str, Any]] = []
    control_rows: list[dict[str, Any]] = []
    all_facts = {
        asset.id: gate.facts_of(asset, scan, files[scan.id])
        for asset in assets
        if (scan := scans.get(asset.latest_scan_id or 0)) is not None
    }
    all_facts = gate.with_advisories(session, loaded.policy, all_facts, now, trusted)
    for asset in assets:
        scan = scans.get(asset.latest_scan_id or 0)
        if scan is None:
            continue
        facts = all_facts[asset.id]
        evaluation = evaluate(facts, loaded.policy, catalog, now=now, baseline=baseline)
        a, c = _rows(
            row.name, row.version, asset, scan.id, facts, evaluation, loaded.policy, catalog, now
        )
        asset_rows.append(a)
        control_rows.extend(c)
    repo.clear(session, row.name, [a.id for a in assets])
    repo.add(session, asset_rows, control_rows)
    return len(asset_rows)


def reevaluate_policy(
    session: Session,
    row: PromotionPolicyVersion,
    now: datetime,
    trusted: Collection[str] = frozenset(),
) -> int:
    """Evaluate every asset's latest scan under a newly stored policy version (replacing the
    stored compliance of that policy); returns how many assets were evaluated. ``trusted``: the
    authors whose analyses count (GPUPROV_VEX_TRUSTED_AUTHORS)."""
    loaded = policies.loaded_of(row)
    catalog = default_catalog()
    baseline = gate.fleet_baseline(session, loaded.policy)
    repo.clear(session, row.name)
    evaluated = 0
    for batch in repo.assets_with_scans(session):
        evaluated += _evaluate_batch(session, batch, row, loaded, baseline, catalog, now, trusted)
    return evaluated


#: fleets up to this many scanned assets are re-evaluated inside the request that stores a
#: policy version; larger ones after it answers, a batch per transaction (a request stays short)
SYNC_ASSETS = 1000
#: assets per transaction of a pending re-evaluation (each holds the policy lock, which a
#: report's compliance update waits for)
PENDING_BATCH = 200


def reevaluate_on_store(
    session: Session,
    row: PromotionPolicyVersion,
    now: datetime,
    trusted: Collection[str] = frozenset(),
) -> int | None:
    """Re-evaluate a small fleet under a just stored policy version in the same transaction
    (returns the assets evaluated); for a larger one, return None: the caller runs
    `reevaluate_pending` once the version is committed, and until it ends the reads count
    the assets still evaluated under an older version as outdated, never as current."""
    if repo.scanned_asset_count(session) > SYNC_ASSETS:
        return None
    return reevaluate_policy(session, row, now, trusted)


def reevaluate_pending(
    db: Database, name: str, version: int, now: datetime, stop: threading.Event | None = None
) -> int:
    """Evaluate every asset under a committed policy version, one batch per transaction; stops
    when a newer version is stored (its own run takes over) or `stop` is set. Returns the assets
    evaluated. A failure is logged and stops the run: the assets not reached keep their older
    evaluation, counted as outdated, until their next report, the next policy version or the
    service's next start (`resume_pending`)."""
    catalog = default_catalog()
    evaluated, after = 0, 0
    try:
        while stop is None or not stop.is_set():
            with db.transaction(write=True) as session:
                policy_repo.lock(session)  # no per-asset update interleaves with a batch
                row = policy_repo.current(session, name)
                if row is None or row.version != version:
                    return evaluated
                batch = repo.asset_batch(session, after, PENDING_BATCH)
                if not batch:
                    repo.clear_older(session, name, version)
                    repo.analyze(session)
                    return evaluated
                loaded = policies.loaded_of(row)
                baseline = gate.fleet_baseline(session, loaded.policy)
                evaluated += _evaluate_batch(
                    session, batch, row, loaded, baseline, catalog, now, db.settings.trusted_authors
                )
                after = batch[-1].id
        return evaluated
    except StoredDocumentAltered as e:
        try:
            with db.transaction(write=True) as session:
                stored_documents.record(session, e)
        except SQLAlchemyError:
            log.error("policy %s version %s altered; not audited (database error)", name, version)
        return evaluated
    except (SQLAlchemyError, ScannerError, policies.InvalidPolicy) as e:
        log.warning(
            "compliance under policy %s version %s stopped after %s assets: %s",
            name,
            version,
            evaluated,
            type(e).__name__,
        )
        return evaluated


def outdated_policies(session: Session) -> list[tuple[str, int]]:
    """The current policy versions under which some scanned asset has no evaluation of its
    latest scan (a background re-evaluation that a restart or an error cut short)."""
    scanned = repo.scanned_asset_count(session)
    outdated = []
    for row in policy_repo.current_all(session):
        current, _older = repo.evaluated_counts(session, row.name, row.version)
        if current < scanned:
            outdated.append((row.name, row.version))
    return outdated


def resume_pending(db: Database, now: datetime, stop: threading.Event) -> int:
    """At start-up, finish the re-evaluations that an earlier process left unfinished (it was
    stopped, or the database went away mid-run); returns the assets evaluated."""
    try:
        with db.lookup() as conn:
            if not policy_repo.any_stored(conn):
                return 0
        with db.transaction() as session:
            outdated = outdated_policies(session)
    except SQLAlchemyError as e:
        log.warning("pending compliance not checked at start-up: %s", type(e).__name__)
        return 0
    evaluated = 0
    for name, version in outdated:
        log.info("resuming compliance under policy %s version %s", name, version)
        evaluated += reevaluate_pending(db, name, version, now, stop)
    return evaluated


def reevaluate_after_facts_change(
    session: Session, now: datetime, trusted: Collection[str] = frozenset()
) -> list[tuple[str, int]]:
    """The facts under every stored evaluation changed (a trust policy or catalog change
    re-evaluated provenance verdicts): a small fleet is evaluated again in this transaction
    (returns []); on a larger one every stored evaluation is forgotten, so the reads count the
    fleet as not evaluated rather than show verdicts of facts that no longer hold, and the
    (name, version) pairs returned are for `reevaluate_pending_all` once this commits."""
    policy_repo.lock(session)
    rows = policy_repo.current_all(session)
    if repo.scanned_asset_count(session) <= SYNC_ASSETS:
        for row in rows:
            if _usable(row) is not None:
                reevaluate_policy(session, row, now, trusted)
        return []
    for row in rows:
        repo.clear(session, row.name)
    return [(row.name, row.version) for row in rows]


def reevaluate_after_advisories_change(
    session: Session, now: datetime, trusted: Collection[str] = frozenset()
) -> list[tuple[str, int]]:
    """The advisory findings or a trusted analysis changed (a feed import, an analysis stored
    or withdrawn): when a stored policy has an ``advisories`` rule, as
    `reevaluate_after_facts_change` (the pairs returned are for `reevaluate_pending_all`)."""
    rows = policy_repo.current_all(session)
    if not any((p := _usable(r)) is not None and p.policy.rules.advisories for r in rows):
        return []
    return reevaluate_after_facts_change(session, now, trusted)


def reevaluate_pending_all(db: Database, pending: list[tuple[str, int]], now: datetime) -> int:
    """`reevaluate_pending` for each (policy name, version); returns the assets evaluated."""
    return sum(reevaluate_pending(db, name, version, now) for name, version in pending)


def evaluate_asset(
    session: Session, asset_id: int, now: datetime, trusted: Collection[str] = frozenset()
) -> int:
    """Evaluate one asset's latest scan under every stored policy; returns the policies."""
    # never interleaved with a policy change; two reports of one asset one after the other
    policy_repo.lock(session, exclusive=False)
    asset = gate_repo.asset_by_id(session, asset_id, lock=True)
    if asset is None or asset.latest_scan_id is None:
        return 0
    catalog = default_catalog()
    count = 0
    for row in policy_repo.current_all(session):
        try:
            loaded = _usable(row)
        except StoredDocumentAltered as e:
            # never evaluated under altered text, nor left showing an older verdict as current
            stored_documents.record(session, e)
            repo.clear(session, row.name, [asset.id])
            continue
        if loaded is None:
            continue
        baseline = gate.fleet_baseline(session, loaded.policy)
        _evaluate_batch(session, [asset], row, loaded, baseline, catalog, now, trusted)
        count += 1
    return count


def _usable(row: PromotionPolicyVersion) -> LoadedPolicy | None:
    """The stored version, or None (logged) when it is no longer accepted: a report or another
    policy's change goes on without it, and every read of it says why (422)."""
    try:
        return policies.loaded_of(row)
    except policies.InvalidPolicy as e:
        log.warning("compliance not evaluated: %s", e.message)
        return None


def after_ingest(db: Database, asset_id: int, now: datetime) -> None:
    """Bring the asset's compliance up to date once its report is committed. A failure leaves
    the report stored and is logged; the asset then shows its previous evaluation (or none,
    counted as not evaluated) until its next report or policy change."""
    try:
        with db.lookup() as conn:
            if not policy_repo.any_stored(conn):
                return  # the common case before policies exist: no write transaction
        with db.transaction(write=True) as session:
            evaluate_asset(session, asset_id, now, db.settings.trusted_authors)
    except (SQLAlchemyError, ScannerError) as e:
        log.warning("compliance of asset %s not updated: %s", asset_id, type(e).__name__)


# ---------------------------------------------------------------------------- reading


def current_results(
    stored: ComplianceAsset, asset: Asset | None, policy: PromotionPolicy, now: datetime
) -> tuple[RuleResult, ...]:
    """The stored rule results with scan_age judged now."""
    out = []
    for d in stored.results:
        result = RuleResult.from_dict(d)
        if result.rule == _AGE and policy.rules.scan_age is not None:
            facts = AssetFacts(
                AssetKind(asset.kind) if asset else AssetKind.IMAGE,
                asset.name if asset else "",
                None,
                stored.scanned_at,
                (),
            )
            outcome = rules.scan_age(
                policy.rules.scan_age, rules.Context(facts, now, default_drivers())
            )
            result = RuleResult(
                result.rule,
                result.action,
                outcome.status,
                outcome.message,
                (),
                outcome.evidence,
                result.controls,
                outcome.missing_input,
            )
        out.append(result)
    return tuple(out)


def _policy(session: Session, name: str) -> tuple[PromotionPolicyVersion, LoadedPolicy]:
    row = policies.stored(session, name)
    return row, policies.loaded_of(row)


def _control(catalog: ControlsCatalog, cid: str) -> dict[str, Any]:
    c = catalog.controls[cid]
    return {
        "id": c.id,
        "title": c.title,
        "framework": c.framework,
        "source": c.source,
        "implementation_groups": list(c.implementation_groups),
        "level": c.level,
    }


def summary(
    session: Session,
    policy_name: str,
    framework: str | None,
    now: datetime,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """Per control the policy cites (of one framework, or all): assets (of the caller's
    ``scope``) passing, failing and not applicable, counted from the stored statuses."""
    row, loaded = _policy(session, policy_name)
    catalog = default_catalog()
    policy = loaded.policy
    aged = _aged(policy, catalog)
    counts: dict[str, dict[str, int]] = {}
    for cid, status, stale, n in repo.control_counts(
        session, row.name, _cutoff(policy, now), scope
    ):
        effective = (
            "fail"
            if status == "fail" or (cid in aged and stale)
            else "pass"
            if cid in aged
            else status
        )
        bucket = counts.setdefault(cid, {"pass": 0, "fail": 0, "not_applicable": 0})
        bucket[effective] += int(n)
    controls = [
        {**_control(catalog, cid), **counts.get(cid, {"pass": 0, "fail": 0, "not_applicable": 0})}
        for cid in cited_controls(policy, catalog)
        if framework is None or catalog.controls[cid].framework == framework
    ]
    evaluated, outdated = repo.evaluated_counts(session, row.name, row.version, scope)
    return {
        "policy": {"name": row.name, "version": row.version, "sha256": row.content_sha256},
        "framework": framework,
        "assets": {
            "evaluated": evaluated,
            "outdated": outdated,
            "not_evaluated": max(
                0, repo.scanned_asset_count(session, scope) - evaluated - outdated
            ),
        },
        "controls": controls,
    }


def control_detail(
    session: Session,
    policy_name: str,
    control_id: str,
    now: datetime,
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """The assets (of the caller's ``scope``) failing one control under a policy, each with
    the failing rules that cite the control and their files."""
    row, loaded = _policy(session, policy_name)
    catalog = default_catalog()
    policy = loaded.policy
    if control_id not in cited_controls(policy, catalog):
        raise NotFound(f"policy {row.name!r} cites no control {control_id!r}")
    cutoff = _cutoff(policy, now) if control_id in _aged(policy, catalog) else None
    ids, total = repo.failing(session, row.name, control_id, cutoff, limit, offset, scope)
    items = []
    for stored, asset in repo.evaluations(session, row.name, ids):
        results = current_results(stored, asset, policy, now)
        items.append(
            {
                "asset": {
                    "id": asset.id,
                    "kind": asset.kind,
                    "name": asset.name,
                    "identity": asset.identity,
                },
                "scan_id": stored.scan_id,
                "reasons": [
                    r.to_dict()
                    for r in results
                    if r.status is Status.FAIL and control_id in r.controls
                ],
            }
        )
    return {
        "policy": {"name": row.name, "version": row.version, "sha256": row.content_sha256},
        "control": _control(catalog, control_id),
        "items": items,
        "total": total,
        "limit": limit,
        "offset": offset,
    }


def asset_compliance(session: Session, asset_id: int, now: datetime) -> list[dict[str, Any]]:
    """One asset's compliance under every stored policy (for GET /assets/{id})."""
    asset = gate_repo.asset_by_id(session, asset_id)
    if asset is None:
        return []
    out = []
    for stored in repo.of_asset(session, asset.id):
        row = policy_repo.version(session, stored.policy_name, stored.policy_version)
        if row is None:
            continue
        policy = policies.loaded_of(row).policy
        results = current_results(stored, asset, policy, now)
        out.append(
            {
                "policy": {"name": row.name, "version": row.version},
                "decision": decide(results).value,
                "scan_id": stored.scan_id,
                "evaluated_at": stored.evaluated_at.isoformat(),
                "controls": {cid: s.value for cid, s in control_status(results).items()},
                "reasons": [r.to_dict() for r in results if r.status is Status.FAIL],
            }
        )
    return out


def export_rows(
    session: Session,
    policy_name: str,
    framework: str | None,
    now: datetime,
    scope: AssetScope | None = None,
) -> Iterator[dict[str, Any]]:
    """One row per (asset of the caller's ``scope``, control) the policy cites: the status as
    read now (the policy is looked up now, so an unknown one is a 404 before anything is
    streamed)."""
    row, loaded = _policy(session, policy_name)
    return _export(session, row, loaded, framework, now, scope)


def _export(
    session: Session,
    row: PromotionPolicyVersion,
    loaded: LoadedPolicy,
    framework: str | None,
    now: datetime,
    scope: AssetScope | None = None,
) -> Iterator[dict[str, Any]]:
    catalog = default_catalog()
    policy = loaded.policy
    aged = _aged(policy, catalog)
    cutoff = _cutoff(policy, now)
    cited = [
        c
        for c in cited_controls(policy, catalog)
        if framework is None or catalog.controls[c].framework == framework
    ]
    for asset_id, kind, name, cid, status, scanned_at in repo.export_rows(
        session, row.name, cited, scope=scope
    ):
        if cid in aged:
            stale = cutoff is not None and (scanned_at is None or scanned_at < cutoff)
            status = "fail" if status == "fail" or stale else "pass"
        yield {
            "policy": row.name,
            "policy_version": row.version,
            "asset_id": asset_id,
            "asset_kind": kind,
            "asset_name": name,
            "control_id": cid,
            "framework": catalog.controls[cid].framework,
            "status": status,
        }


EXPORT_COLUMNS = (
    "policy",
    "policy_version",
    "asset_id",
    "asset_kind",
    "asset_name",
    "control_id",
    "framework",
    "status",
)


def export_csv(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    """CSV with a header (`EXPORT_COLUMNS`), formula-safe cells."""
    return csv_chunks(rows, EXPORT_COLUMNS)


def export_json(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    """A JSON array, one element per line, streamed."""
    return json_chunks(rows)


def catalog_listing(framework: str | None) -> dict[str, Any]:
    """The controls catalog: frameworks, controls, and the rules citing each control."""
    catalog = default_catalog()
    cited_by: dict[str, list[str]] = {}
    for rule_id, ids in catalog.rules.items():
        for cid in ids:
            cited_by.setdefault(cid, []).append(rule_id)
    items = [
        {**_control(catalog, cid), "rules": cited_by.get(cid, [])}
        for cid in catalog.controls
        if framework is None or catalog.controls[cid].framework == framework
    ]
    return {
        "frameworks": [
            {"id": f.id, "title": f.title, "source": f.source} for f in catalog.frameworks
        ],
        "items": items,
        "total": len(items),
    }


# ---------------------------------------------------------------------------- CDXA export


def _ref(text: str) -> str:
    return text.replace(" ", "_")


def attestation(
    session: Session,
    policy_name: str,
    framework: str | None,
    now: datetime,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """The fleet's compliance as a CycloneDX 1.6 attestation (CDXA) for auditors: the
    frameworks as `definitions.standards` with the cited controls as requirements; per asset
    and control a claim (its rules' messages as reasoning, their results as evidence); per
    control an attestation map entry with the passing claims, the failing ones as counter
    claims, and the share that passes as its conformance score."""
    row, loaded = _policy(session, policy_name)
    catalog = default_catalog()
    policy = loaded.policy
    cited = [
        c
        for c in cited_controls(policy, catalog)
        if framework is None or catalog.controls[c].framework == framework
    ]
    standards = []
    for fw in catalog.frameworks:
        ids = [c for c in cited if catalog.controls[c].framework == fw.id]
        if ids:
            standards.append(
                {
                    "bom-ref": f"standard:{fw.id}",
                    "name": fw.title,
                    "version": fw.id.rsplit("-", 1)[-1].removeprefix("v"),
                    "requirements": [
                        {
                            "bom-ref": f"requirement:{_ref(c)}",
                            "identifier": c,
                            "text": catalog.controls[c].title,
                        }
                        for c in ids
                    ],
                    "externalReferences": [{"type": "website", "url": fw.source.split(" ")[0]}],
                }
            )
    targets: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    evidence: list[dict[str, Any]] = []
    passing: dict[str, list[str]] = {c: [] for c in cited}
    failing: dict[str, list[str]] = {c: [] for c in cited}
    for batch in repo.assets_with_scans(session, scope=scope):
        for stored, asset in repo.evaluations(session, row.name, [a.id for a in batch]):
            target = f"asset:{asset.id}"
            targets.append(
                {
                    "type": "container" if asset.kind == "image" else "operating-system",
                    "bom-ref": target,
                    "name": asset.name,
                    "version": asset.identity,
                }
            )
            results = current_results(stored, asset, policy, now)
            for r in results:
                evidence.append(
                    {
                        "bom-ref": f"evidence:{asset.id}:{r.rule}",
                        "propertyName": f"gpuprov:policy:rule:{r.rule}",
                        "data": [
                            {
                                "name": r.message,
                                "contents": {
                                    "attachment": {
                                        "contentType": "application/json",
                                        "content": json.dumps(r.to_dict(), ensure_ascii=False),
                                    }
                                },
                            }
                        ],
                        "created": stored.evaluated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                )
            status = control_status(results)
            for cid in cited:
                citing = [r for r in results if cid in r.controls]
                claim = f"claim:{asset.id}:{_ref(cid)}"
                claims.append(
                    {
                        "bom-ref": claim,
                        "target": target,
                        "predicate": f"{asset.name} meets {cid} under policy {row.name} "
                        f"version {row.version}: {status.get(cid, Status.NOT_APPLICABLE).value}",
                        "reasoning": "; ".join(f"{r.rule}: {r.message}" for r in citing),
                        "evidence": [f"evidence:{asset.id}:{r.rule}" for r in citing],
                    }
                )
                if status.get(cid) is Status.FAIL:
                    failing[cid].append(claim)
                elif status.get(cid) is Status.PASS:
                    passing[cid].append(claim)
    mapping = []
    for cid in cited:
        judged = len(passing[cid]) + len(failing[cid])
        # a control that applies to no asset is not passed by any: no score claims it is
        conformance: dict[str, Any] = (
            {
                "score": round(len(passing[cid]) / judged, 4),
                "rationale": f"{len(passing[cid])} of {counted(judged, 'asset')} to which the "
                "control applies pass it",
            }
            if judged
            else {
                "rationale": f"the control applies to none of the {counted(len(targets), 'asset')}"
                " evaluated: no conformance is claimed"
            }
        )
        mapping.append(
            {
                "requirement": f"requirement:{_ref(cid)}",
                "claims": passing[cid],
                "counterClaims": failing[cid],
                "conformance": conformance,
                "confidence": {
                    "score": 1.0,
                    "rationale": "evaluated from the stored inventory by gpuprov's policy rules",
                },
            }
        )
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": f"urn:uuid:{uuid.uuid4()}",
        "version": 1,
        "metadata": {
            "timestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "gpuprov"}]},
        },
        "definitions": {"standards": standards},
        "declarations": {
            "assessors": [
                {
                    "bom-ref": "assessor:gpuprov",
                    "thirdParty": False,
                    "organization": {"name": "gpuprov"},
                }
            ],
            "attestations": [
                {
                    "summary": f"Fleet compliance under promotion policy {row.name} version "
                    f"{row.version} (sha256 {row.content_sha256})",
                    "assessor": "assessor:gpuprov",
                    "map": mapping,
                }
            ],
            "claims": claims,
            "evidence": evidence,
            "targets": {"components": targets},
        },
    }
