"""The service's gate: a stored scan's facts evaluated under a stored policy, every decision
recorded, a signed VSA on allow, and the promotion diff between two images.

Facts come from the database, never from the report's own words where the service knows better:
file verdicts are the stored ones (the service's provenance verdicts once it holds catalogs), and
a verdict that was never computed (another tool's BOM) stays None, so the rules say so instead
of passing. Evaluation is the scanner's pure function (`scanner.policy.evaluate`), so the service
and `gpuprov gate --policy-file` decide the same way on the same facts.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from msgspec.structs import replace
from sqlalchemy.orm import Session

from app.domain import notifications, policies, vulnerabilities
from app.domain.ingest import RawReport, ingest
from app.domain.provenance import CatalogCache
from app.domain.report_parser import ReportLimits, parse_report
from app.domain.tokens import Principal
from app.errors import BadRequest, Conflict, NotFound, ServiceUnavailable
from app.storage.repositories import gate as repo
from app.storage.repositories.gate import DecisionQuery
from app.storage.repositories.scopes import AssetScope
from app.storage.session import Database
from app.storage.tables import Artifact, Asset, GateDecision, Scan
from scanner.model import AssetKind
from scanner.policy.controls import ControlsCatalog, default_catalog
from scanner.policy.document import LoadedPolicy, PromotionPolicy
from scanner.policy.evaluate import Decision, Evaluation, decision_json, evaluate
from scanner.policy.facts import (
    AssetFacts,
    FileFact,
    StoredFile,
    driver_of,
    file_fact,
    findings_of,
    trust_of,
    unreadable_of,
)
from scanner.policy.rules import FleetBaseline, baseline_of
from scanner.verify.errors import Rejected

DECISIONS = tuple(d.value for d in Decision)


def _digest(asset: Asset) -> str | None:
    identity = asset.identity
    if identity.startswith("name:"):
        return None
    return identity.removeprefix("config:")


_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _driver(asset: Asset, scan: Scan, files: tuple[FileFact, ...]) -> tuple[str | None, str | None]:
    """The host's driver as its latest report's node facts state it (the loaded kernel module
    and the newest CUDA it runs); else, as for any BOM, its driver libraries' version."""
    details = (asset.details or {}) if scan.id == asset.latest_scan_id else {}
    version = driver_of(details.get("driver_version"), bool(details.get("l4t_release")), files)
    return version, details.get("driver_cuda_max")


def _stated_time(scan: Scan) -> datetime | None:
    """When the report says it was made. A report without a timestamp is dated by its arrival
    (scanned_at == received_at, the same instant by ingest), which orders it but says nothing of
    when it was made: scan_age then has no input, as `gate --bom` finds for the same BOM."""
    return None if scan.scanned_at == scan.received_at else scan.scanned_at


def facts_of(asset: Asset, scan: Scan, artifacts: Sequence[StoredFile]) -> AssetFacts:
    """The facts of one stored scan of an asset."""
    files = tuple(file_fact(a) for a in artifacts)
    driver = _driver(asset, scan, files)
    runtime = scan.runtime or {}
    return AssetFacts(
        kind=AssetKind(asset.kind),
        name=asset.name,
        digest=_digest(asset),
        scanned_at=_stated_time(scan),
        files=files,
        labels=tuple(sorted(asset.labels.items())),
        # as for a BOM: the scan applied a trust policy to the image iff it states any outcome
        image_trust=trust_of(
            scan.image_signer, scan.slsa_level, scan.slsa_builder, scan.signature_rejected
        ),
        driver_version=driver[0],
        driver_cuda_max=driver[1],
        findings=findings_of(scan.findings),
        producer=scan.tool or scan.producer,
        runtime=scan.runtime is not None,
        runtime_unreadable=unreadable_of(
            int(runtime.get("unreadable_processes") or 0),
            int(runtime.get("unreadable_mappings") or 0),
        ),
    )


def fleet_baseline(session: Session, policy: PromotionPolicy) -> FleetBaseline | None:
    """The parity rule's baseline: what the assets labelled ``label=baseline`` run now."""
    rule = policy.rules.parity
    if rule is None:
        return None
    count, rows = repo.labelled_libraries(session, rule.label, rule.baseline)
    by_asset: dict[int, list[FileFact]] = defaultdict(list)
    for asset_id, family, version, cuda_major in rows:
        by_asset[asset_id].append(FileFact("", family, family, version, cuda_major, None))
    assets = [
        AssetFacts(AssetKind.IMAGE, str(asset_id), None, None, tuple(files))
        for asset_id, files in by_asset.items()
    ]
    # assets without GPU libraries still count: the baseline exists, it runs none
    empty = [AssetFacts(AssetKind.IMAGE, "", None, None, ()) for _ in range(count - len(assets))]
    return baseline_of(rule.label, rule.baseline, [*assets, *empty])


def with_advisories(
    session: Session,
    policy: PromotionPolicy,
    facts: dict[int, AssetFacts],
    now: datetime,
    trusted: Collection[str],
) -> dict[int, AssetFacts]:
    """The assets' facts with their stored advisory findings, when the policy has an
    ``advisories`` rule (read only then: most policies have none)."""
    if policy.rules.advisories is None or not facts:
        return facts
    found = vulnerabilities.advisory_facts(session, list(facts), now, trusted)
    return {i: replace(f, advisories=found.get(i)) for i, f in facts.items()}


def evaluate_stored(
    session: Session,
    asset: Asset,
    scan: Scan,
    loaded: LoadedPolicy,
    now: datetime,
    *,
    catalog: ControlsCatalog | None = None,
    baseline: FleetBaseline | None = None,
    trusted: Collection[str] = frozenset(),
) -> tuple[AssetFacts, Evaluation]:
    """Evaluate one stored scan under a policy (``trusted``: the authors whose analyses count,
    GPUPROV_VEX_TRUSTED_AUTHORS)."""
    artifacts = repo.artifacts_of(session, [scan.id])[scan.id]
    facts = facts_of(asset, scan, artifacts)
    if scan.id == asset.latest_scan_id:
        # the stored findings are the latest scan's; an older scan is judged with no feed
        facts = with_advisories(session, loaded.policy, {asset.id: facts}, now, trusted)[asset.id]
    if baseline is None:
        baseline = fleet_baseline(session, loaded.policy)
    evaluation = evaluate(
        facts, loaded.policy, catalog or default_catalog(), now=now, baseline=baseline
    )
    return facts, evaluation


@dataclass(frozen=True, slots=True)
class VsaSigning:
    """How the service signs VSAs: the PEM key, the configured public base URL its policies are
    served at (None: policies are named by URN), and the verifier id."""

    key_pem: bytes
    public_url: str | None
    verifier_id: str


def policy_uri(loaded: LoadedPolicy, public_url: str | None) -> str:
    """Where a VSA says its policy is: under the configured public URL, else a URN that
    carries the policy's name, version and digest (stable, and never from a request)."""
    name = loaded.policy.name
    if public_url:
        return f"{public_url}/api/v1/policies/{name}?version={loaded.version}"
    return f"urn:gpuprov:policy:{name}:{loaded.version}:sha256:{loaded.sha256}"


def read_vsa_key(path: Path, retry_after: int) -> bytes:
    """The VSA signing key (503 when the configured file cannot be read)."""
    try:
        return path.read_bytes()
    except OSError as e:
        raise ServiceUnavailable(
            f"the VSA signing key (GPUPROV_VSA_KEY_FILE) cannot be read: {e.strerror}",
            retry_after,
        ) from None


def _vsa(
    facts: AssetFacts, loaded: LoadedPolicy, signing: VsaSigning, now: datetime
) -> dict[str, Any]:
    from scanner.policy.vsa import sign_vsa, vsa_statement

    try:
        statement = vsa_statement(
            facts,
            policy_uri=policy_uri(loaded, signing.public_url),
            policy_sha256=loaded.sha256,
            policy_name=loaded.policy.name,
            time_verified=now,
            verifier_id=signing.verifier_id,
        )
        envelope = sign_vsa(statement, signing.key_pem)
    except Rejected as e:
        return {"vsa_error": f"no VSA: {e}"}
    return {"vsa": json.loads(envelope.to_json())}


def gate_scan(
    session: Session,
    principal: Principal,
    policy_name: str,
    asset: Asset,
    scan: Scan,
    now: datetime,
    signing: VsaSigning | None = None,
    trusted: Collection[str] = frozenset(),
) -> dict[str, Any]:
    """Decide on one stored scan under the current version of a policy, record the decision,
    and answer the gate JSON (with a signed VSA on allow when the service has a key)."""
    row = policies.stored(session, policy_name)
    loaded = policies.loaded_of(row)
    facts, evaluation = evaluate_stored(session, asset, scan, loaded, now, trusted=trusted)
    answer = decision_json(evaluation, loaded.ref(), facts.subject())
    record = repo.add_decision(
        session,
        {
            "decided_at": now,
            "token_id": principal.token_id,
            "token_name": principal.name,
            "policy_name": row.name,
            "policy_version": row.version,
            "policy_sha256": row.content_sha256,
            "decision": evaluation.decision.value,
            "subject_kind": asset.kind,
            "subject_name": asset.name,
            "subject_digest": facts.digest,
            "asset_id": asset.id,
            "scan_id": scan.id,
            "reasons": answer["reasons"],
            "controls": answer["controls"],
            "granted": dict(principal.ci) if principal.ci is not None else None,
        },
    )
    answer["decision_id"] = record.id
    answer["decided_at"] = now.isoformat()
    if evaluation.decision is Decision.DENY:  # its webhook event, in the decision's transaction
        notifications.gate_denied(session, now, answer, asset)
    answer["promotion_diff"] = promotion_diff(session, loaded.policy, asset, scan, principal.scope)
    if signing is not None and evaluation.decision is Decision.ALLOW:
        answer.update(_vsa(facts, loaded, signing, now))
    return answer


def _image(session: Session, digest: str, scope: AssetScope | None = None) -> tuple[Asset, Scan]:
    asset = repo.image_by_digest(session, digest)
    if asset is None or asset.latest_scan_id is None:
        raise NotFound(f"no image with digest {digest} in the inventory; push its report first")
    if scope is not None and not repo.visible(session, asset.id, scope):
        # outside the caller's team scope reads as not stored at all (no 403 confirming it)
        raise NotFound(f"no image with digest {digest} in the inventory; push its report first")
    scan = repo.scan_by_id(session, asset.latest_scan_id)
    assert scan is not None  # latest_scan_id references a scan
    return asset, scan


def gate_image(
    db: Database,
    principal: Principal,
    policy_name: str,
    digest: str,
    now: datetime,
    signing: VsaSigning | None = None,
) -> dict[str, Any]:
    """Gate the latest scan of the image with this manifest digest (one transaction, with
    its audit record)."""
    with db.transaction(write=True) as session:
        policies.stored(session, policy_name)  # an unknown policy is the first thing to name
        asset, scan = _image(session, digest, principal.scope)
        return gate_scan(
            session, principal, policy_name, asset, scan, now, signing, db.settings.trusted_authors
        )


def gate_bom(
    db: Database,
    principal: Principal,
    policy_name: str,
    data: bytes,
    limits: ReportLimits,
    catalogs: CatalogCache,
    now: datetime,
    signing: VsaSigning | None = None,
    scoping_labels: Sequence[str] = (),
) -> dict[str, Any]:
    """Ingest a BOM as `POST /reports` does (nothing is stored for an unknown policy), bring
    the asset's compliance up to date, then gate the scan just stored."""
    with db.transaction() as session:
        policies.stored(session, policy_name)
    report = parse_report(data, limits, now=now)
    spdx = report.spec_version.startswith("SPDX-")
    media_type = "application/spdx+json" if spdx else "application/vnd.cyclonedx+json"
    stored = RawReport(media_type, len(data), gzip.compress(data, 1))
    with db.transaction(write=True) as session:
        result = ingest(
            session,
            report,
            stored,
            principal,
            {},
            now,
            catalogs,
            max_labels=limits.max_labels,
            scoping_labels=scoping_labels,
            proposal_days=db.settings.runtime_proposal_days,
        )
    if result.latest:
        from app.domain import compliance  # compliance builds on this module

        compliance.after_ingest(db, result.asset_id, now)
    with db.transaction(write=True) as session:
        asset = repo.asset_by_id(session, result.asset_id, lock=True)
        scan = repo.scan_by_id(session, result.scan_id)
        if asset is None or scan is None:
            raise NotFound("the ingested report's asset is gone")  # deleted concurrently
        _require_latest(session, asset, scan)
        return gate_scan(
            session, principal, policy_name, asset, scan, now, signing, db.settings.trusted_authors
        )


def _require_latest(session: Session, asset: Asset, scan: Scan) -> None:
    """A decision (and above all a VSA) speaks for the asset as the service knows it now: a BOM
    whose scan is not the asset's latest (backdated, or overtaken by a newer report) is refused,
    never gated, since its facts are no longer the asset's."""
    if asset.latest_scan_id == scan.id:
        return
    newer = repo.scan_by_id(session, asset.latest_scan_id) if asset.latest_scan_id else None
    when = f", scanned at {newer.scanned_at.isoformat()}" if newer is not None else ""
    raise Conflict(
        f"the BOM's scan ({scan.scanned_at.isoformat()}) is not the latest of {asset.name}: "
        f"scan {asset.latest_scan_id}{when} is newer; gate the image by digest, or send a BOM "
        "of a newer scan",
        details=[
            {
                "pointer": "/bom/metadata/timestamp",
                "message": f"older than the asset's latest scan {asset.latest_scan_id}",
            }
        ],
    )


# ------------------------------------------------------------------------- decision audit


def decision_dict(row: GateDecision) -> dict[str, Any]:
    """A recorded decision, JSON-ready."""
    return {
        "id": row.id,
        "decided_at": row.decided_at.isoformat(),
        "token_name": row.token_name,
        "policy": {"name": row.policy_name, "version": row.policy_version},
        "policy_sha256": row.policy_sha256,
        "decision": row.decision,
        "subject": {
            "kind": row.subject_kind,
            "name": row.subject_name,
            "digest": row.subject_digest,
            "asset_id": row.asset_id,
            "scan_id": row.scan_id,
        },
        "reasons": list(row.reasons),
        "controls": dict(row.controls),
        "granted": dict(row.granted) if row.granted is not None else None,
    }


#: the ``subject`` filter of `list_decisions` as one regular expression (the API documents the
#: parameter with it): an image digest in either case, or any name not starting with sha256:
SUBJECT_PATTERN = (
    r"^(?:[Ss][Hh][Aa]256:[0-9A-Fa-f]{64}"
    r"|[Ss]?|[Ss][Hh]|[Ss][Hh][Aa]|[Ss][Hh][Aa]2|[Ss][Hh][Aa]25|[Ss][Hh][Aa]256"
    r"|(?:[^Ss\u0000]|[Ss](?:[^Hh\u0000]|[Hh](?:[^Aa\u0000]|[Aa](?:[^2\u0000]|2(?:[^5\u0000]"
    r"|5(?:[^6\u0000]|6[^:\u0000]))))))[^\u0000]*)$"
)


def list_decisions(
    session: Session,
    limit: int,
    offset: int,
    *,
    policy: str | None = None,
    decision: str | None = None,
    subject: str | None = None,
    since: datetime | None = None,
    asset_id: int | None = None,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """A page of recorded decisions, newest first, filtered by policy name, decision, subject
    (an image digest or an exact name), time and asset; only on the assets of the caller's
    ``scope``."""
    if subject is not None and subject[:7].lower() == "sha256:":
        # A digest-shaped subject is matched as a digest: a malformed one would match nothing
        # and read as "never gated", so it is refused.
        subject = subject.lower()
        if not _DIGEST.fullmatch(subject):  # "$" alone let a trailing newline through
            raise BadRequest(
                f"subject {subject[:80]!r} is not an image digest: sha256: and 64 hexadecimal"
                " digits (or give a subject name)"
            )
    query = DecisionQuery(
        policy=policy,
        decision=decision,
        subject=subject,
        since=since,
        asset_id=asset_id,
        scope=scope,
    )
    rows, total = repo.decisions(session, query, limit, offset)
    return {
        "items": [decision_dict(r) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


def latest_decisions(session: Session, asset_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """Per asset, its latest decision under each policy (by policy name)."""
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in asset_ids}
    for row in repo.latest_decisions(session, asset_ids):
        if row.asset_id is not None:
            out[row.asset_id].append(decision_dict(row))
    return out


# ------------------------------------------------------------------------- promotion diff


def _lib(a: Artifact) -> dict[str, Any]:
    return {
        "path": a.path or a.name,
        "family": a.family,
        "component": a.component,
        "version": a.version,
        "sha256": a.sha256,
    }


def _diff(
    old: tuple[Asset, Scan], new: tuple[Asset, Scan], files: dict[int, list[Artifact]]
) -> dict[str, Any]:
    (old_asset, old_scan), (new_asset, new_scan) = old, new
    before = {a.path or f"{a.family}:{a.name}": a for a in files[old_scan.id]}
    after = {a.path or f"{a.family}:{a.name}": a for a in files[new_scan.id]}
    version_changed = []
    digest_changed = []
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        change = {"path": key, "family": b.family, "from": _lib(a), "to": _lib(b)}
        if a.version != b.version:
            version_changed.append(change)
        elif a.sha256 != b.sha256:
            digest_changed.append(change)
    return {
        "from": _image_ref(old_asset, old_scan),
        "to": _image_ref(new_asset, new_scan),
        "added": [_lib(after[k]) for k in sorted(after.keys() - before.keys())],
        "removed": [_lib(before[k]) for k in sorted(before.keys() - after.keys())],
        "version_changed": version_changed,
        "digest_changed": digest_changed,
    }


def _image_ref(asset: Asset, scan: Scan) -> dict[str, Any]:
    return {"asset_id": asset.id, "name": asset.name, "digest": asset.identity, "scan_id": scan.id}


def diff(
    session: Session, from_digest: str, to_digest: str, scope: AssetScope | None = None
) -> dict[str, Any]:
    """GPU libraries added, removed, version-changed and digest-changed from the image
    ``from_digest`` (the one being replaced) to ``to_digest`` (the candidate), by file path
    (404 for an image outside the caller's ``scope``)."""
    old = _image(session, from_digest, scope)
    new = _image(session, to_digest, scope)
    return _diff(old, new, repo.artifacts_of(session, [old[1].id, new[1].id]))


def repository_of(name: str) -> str:
    """An image reference without digest and tag (``reg:5000/ml/train:2`` -> ``.../train``)."""
    name = name.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def promotion_diff(
    session: Session,
    policy: PromotionPolicy,
    asset: Asset,
    scan: Scan,
    scope: AssetScope | None = None,
) -> dict[str, Any] | None:
    """With a parity rule, the diff from the image the candidate replaces (the latest-scanned
    image of its repository labelled ``label=baseline``) to the candidate; None when the
    policy names no baseline, the asset is a host, or no such image is stored."""
    rule = policy.rules.parity
    if rule is None or asset.kind != "image":
        return None
    replaced = repo.replaced_image(
        session, repository_of(asset.name), rule.label, rule.baseline, asset.id
    )
    if replaced is None or replaced.latest_scan_id is None:
        return None
    if scope is not None and not repo.visible(session, replaced.id, scope):
        # another team's image is never named
        return None
    old_scan = repo.scan_by_id(session, replaced.latest_scan_id)
    assert old_scan is not None
    files = repo.artifacts_of(session, [old_scan.id, scan.id])
    return _diff((replaced, old_scan), (asset, scan), files)
