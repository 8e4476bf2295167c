"""Advisory analyses (triage): a person's or an imported VEX statement's decision on one CVE for
one asset or for the assets a label selector names, in OpenVEX v0.2.0's vocabulary.

Every analysis records its author (the authenticated principal who wrote or imported it: never
a request body's or a VEX document's own claim) and its source, and every write is audited. An
analysis never hides an ``affected`` finding without a named reason: ``not_affected`` needs a
justification or a detail, ``fixed`` a detail. An expired analysis stops applying. Only the
analyses of the authors on ``GPUPROV_VEX_TRUSTED_AUTHORS`` change what the gate sees; the others
are shown, marked untrusted (docs/advisories.md, "Triage").
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from app.clock import utcnow
from app.domain import audit
from app.domain.audit import Actor
from app.errors import AppError, Forbidden, NotFound
from app.storage.repositories import analyses as repo
from app.storage.repositories import scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import AdvisoryAnalysis, Asset

#: OpenVEX v0.2.0 statuses (https://github.com/openvex/spec, "Status Labels")
STATES = ("not_affected", "affected", "fixed", "under_investigation")
#: OpenVEX v0.2.0 justifications of not_affected ("Status Justifications")
JUSTIFICATIONS = (
    "component_not_present",
    "vulnerable_code_not_present",
    "vulnerable_code_not_in_execute_path",
    "vulnerable_code_cannot_be_controlled_by_adversary",
    "inline_mitigations_already_exist",
)
#: a CVE id or another advisory id a feed uses (GHSA-..., an OSV id): the policy's own rule
CVE_PATTERN = r"^[A-Z][A-Z0-9]{1,15}-[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$"
_CVE = re.compile(CVE_PATTERN)
MAX_SELECTOR_LABELS = 20
MAX_DETAIL = 4096


class InvalidAnalysis(AppError):
    """An analysis that cannot be stored (422), naming the field and why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(
            f"{field}: {message}", 422, details=[{"pointer": f"/{field}", "message": message}]
        )


@dataclass(frozen=True, slots=True)
class Applied:
    """The analysis in force for one (asset, CVE), and whether its author is trusted."""

    row: AdvisoryAnalysis
    trusted: bool

    def as_dict(self) -> dict[str, Any]:
        return {**analysis_dict(self.row), "trusted": self.trusted}


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def analysis_dict(row: AdvisoryAnalysis, trusted: Collection[str] | None = None) -> dict[str, Any]:
    """An analysis as the API shows it (``trusted`` when the allow-list is given)."""
    out: dict[str, Any] = {
        "id": row.id,
        "cve": row.cve,
        "asset_id": row.asset_id,
        "selector": dict(row.selector) if row.selector is not None else None,
        "state": row.state,
        "justification": row.justification,
        "detail": row.detail,
        "expires": _iso(row.expires_at),
        "author": row.author,
        "source": row.source,
        "created_at": _iso(row.created_at),
    }
    if trusted is not None:
        out["trusted"] = row.author in trusted
    return out


def check_analysis(
    *,
    cve: str,
    state: str,
    author: str,
    source: str,
    now: datetime,
    asset_id: int | None = None,
    selector: Mapping[str, str] | None = None,
    justification: str | None = None,
    detail: str | None = None,
    expires: datetime | None = None,
) -> None:
    """What `record_analysis` checks, storing nothing (a dry run): InvalidAnalysis (422)."""
    if not _CVE.fullmatch(cve):
        raise InvalidAnalysis("cve", f"{cve[:80]!r} is not an advisory id (like CVE-2025-23280)")
    if (asset_id is None) == (selector is None):
        raise InvalidAnalysis("asset_id", "give exactly one of asset_id and selector")
    if selector is not None:
        if not selector or len(selector) > MAX_SELECTOR_LABELS:
            raise InvalidAnalysis(
                "selector", f"name 1 to {MAX_SELECTOR_LABELS} labels (label: value)"
            )
        for key, value in selector.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidAnalysis("selector", "labels and values are strings")
            if not 0 < len(key) <= 128 or len(value) > 256:
                raise InvalidAnalysis("selector", f"label {key[:40]!r} or its value is too long")
    if state not in STATES:
        raise InvalidAnalysis("state", f"must be one of {', '.join(STATES)}")
    if justification is not None:
        if state != "not_affected":
            raise InvalidAnalysis("justification", "only a not_affected analysis has one")
        if justification not in JUSTIFICATIONS:
            raise InvalidAnalysis("justification", f"must be one of {', '.join(JUSTIFICATIONS)}")
    if detail is not None and len(detail) > MAX_DETAIL:
        raise InvalidAnalysis("detail", f"at most {MAX_DETAIL} characters")
    named = bool(detail and detail.strip())
    # an analysis that takes an affected finding out of the gate must say why (OpenVEX: a
    # not_affected statement needs a justification or an impact statement)
    if state == "not_affected" and justification is None and not named:
        raise InvalidAnalysis(
            "justification", "a not_affected analysis needs a justification or a detail"
        )
    if state == "fixed" and not named:
        raise InvalidAnalysis("detail", "a fixed analysis needs a detail (what fixed it)")
    if expires is not None:
        if expires.tzinfo is None or expires.utcoffset() is None:
            raise InvalidAnalysis("expires", "give the time zone (2027-01-31T00:00:00Z)")
        try:
            expires.astimezone(UTC)  # what storing it does: year 9999 west of UTC is beyond it
        except OverflowError:
            raise InvalidAnalysis("expires", "lies beyond the year 9999 in UTC") from None
        if expires <= now:
            raise InvalidAnalysis("expires", "is not in the future")
    if not author.strip() or len(author) > 256:
        raise InvalidAnalysis("author", "must be 1 to 256 characters")
    if not source.strip() or len(source) > 512:
        raise InvalidAnalysis("source", "must be 1 to 512 characters")


def record_analysis(
    session: Session,
    *,
    cve: str,
    state: str,
    author: str,
    source: str,
    asset_id: int | None = None,
    selector: Mapping[str, str] | None = None,
    justification: str | None = None,
    detail: str | None = None,
    expires: datetime | None = None,
    actor: Actor | None = None,
    now: datetime | None = None,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """Store an analysis of ``cve`` for one asset or a label selector, audited in the caller's
    transaction (``actor``: who acted; default the author, as the service). Raises
    InvalidAnalysis (422) naming the bad field, NotFound for an unknown asset or one outside
    the caller's ``scope``, Forbidden for a team's selector (it would reach other teams)."""
    now = now or utcnow()
    check_analysis(
        cve=cve,
        asset_id=asset_id,
        selector=selector,
        state=state,
        justification=justification,
        detail=detail,
        expires=expires,
        author=author,
        source=source,
        now=now,
    )
    _confined(session, asset_id, selector, scope)
    row = repo.add(
        session,
        AdvisoryAnalysis(
            cve=cve,
            asset_id=asset_id,
            selector=dict(selector) if selector is not None else None,
            state=state,
            justification=justification,
            detail=detail,
            expires_at=expires,
            author=author,
            source=source,
            created_at=now,
        ),
    )
    document = analysis_dict(row)
    audit.record(
        session,
        actor or Actor("service", author[:128]),
        "analysis.put",
        f"analysis:{row.id}",
        {k: document[k] for k in ("cve", "asset_id", "selector", "state", "author", "source")},
        now,
    )
    return document


def _confined(
    session: Session,
    asset_id: int | None,
    selector: Mapping[str, str] | None,
    scope: AssetScope | None,
) -> None:
    """A team's analyst writes for the team's own assets only: another team's asset is not
    found (as one no asset has), and a label selector, which names assets across teams, is
    refused."""
    if asset_id is not None and (
        session.get(Asset, asset_id) is None or not scopes.asset_visible(session, asset_id, scope)
    ):
        raise NotFound(f"no asset {asset_id}")
    if selector is not None and scope is not None:
        raise Forbidden(
            "a label selector names assets of every team: a team's analyst writes analyses "
            "of its own assets (asset_id); an admin writes selectors"
        )


def delete_analysis(
    session: Session,
    analysis_id: int,
    actor: Actor,
    now: datetime | None = None,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """Withdraw an analysis (answered with it), audited; a team's analyst only those of the
    team's assets."""
    row = repo.by_id(session, analysis_id)
    if row is None or (
        row.asset_id is not None and not scopes.asset_visible(session, row.asset_id, scope)
    ):
        raise NotFound(f"no analysis {analysis_id}")
    _confined(session, row.asset_id, row.selector, scope)
    document = analysis_dict(row)
    repo.remove(session, row)
    audit.record(
        session,
        actor,
        "analysis.delete",
        f"analysis:{analysis_id}",
        {k: document[k] for k in ("cve", "asset_id", "selector", "state", "author")},
        now,
    )
    return document


def get_analysis(
    session: Session,
    analysis_id: int,
    trusted: Collection[str],
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """One analysis, with whether its author is trusted (404 for one of an asset outside the
    caller's ``scope``, as for none)."""
    row = repo.by_id(session, analysis_id)
    if row is None or (
        row.asset_id is not None and not scopes.asset_visible(session, row.asset_id, scope)
    ):
        raise NotFound(f"no analysis {analysis_id}")
    return analysis_dict(row, trusted)


def list_analyses(
    session: Session,
    trusted: Collection[str],
    *,
    cve: str | None,
    asset_id: int | None,
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """A page of analyses (of the caller's ``scope``), newest first."""
    rows, total = repo.page(session, cve, asset_id, limit, offset, scope)
    return {
        "items": [analysis_dict(r, trusted) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


def _rank(a: AdvisoryAnalysis, trusted: Collection[str]) -> tuple[bool, bool, datetime, int]:
    # the one that counts first: a trusted author's, then one written for the asset itself
    # over a selector's, then the newest
    return (a.author in trusted, a.asset_id is not None, a.created_at, a.id)


def applied(
    session: Session, asset_ids: Sequence[int], now: datetime, trusted: Collection[str]
) -> dict[tuple[int, str], Applied]:
    """Per (asset, CVE): the analysis in force at ``now`` that applies, a trusted author's when
    there is one (the gate reads only those with ``trusted``)."""
    rows = repo.in_force(session, asset_ids, now)
    if not rows:
        return {}
    selectors = [r for r in rows if r.selector is not None]
    labels = repo.labels_of(session, asset_ids) if selectors else {}
    best: dict[tuple[int, str], AdvisoryAnalysis] = {}
    wanted = set(asset_ids)

    def offer(asset_id: int, row: AdvisoryAnalysis) -> None:
        key = (asset_id, row.cve)
        cur = best.get(key)
        if cur is None or _rank(row, trusted) > _rank(cur, trusted):
            best[key] = row

    for row in rows:
        if row.asset_id is not None:
            if row.asset_id in wanted:
                offer(row.asset_id, row)
            continue
        selector = row.selector or {}
        for asset_id, have in labels.items():
            if all(have.get(k) == v for k, v in selector.items()):
                offer(asset_id, row)
    return {key: Applied(row, row.author in trusted) for key, row in best.items()}


def expire_analysis(
    session: Session, analysis_id: int, actor: Actor, reason: str, now: datetime
) -> dict[str, Any] | None:
    """End an analysis at ``now`` (kept and listed, with its expiry), audited with the reason:
    how the service withdraws one whose evidence no longer holds. None when it is gone or no
    longer in force."""
    row = repo.by_id(session, analysis_id)
    if row is None or (row.expires_at is not None and row.expires_at <= now):
        return None
    row.expires_at = now
    session.flush()
    document = analysis_dict(row)
    details = {k: document[k] for k in ("cve", "asset_id", "selector", "state", "author")}
    audit.record(
        session,
        actor,
        "analysis.expire",
        f"analysis:{analysis_id}",
        {**details, "reason": reason},
        now,
    )
    return document
