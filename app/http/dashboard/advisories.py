"""``/advisories``: the security advisories matched against the fleet, by severity, newest or
most affected, with the API's filters; one advisory's page with the assets it was matched on
(files, versions, fixed-in), each bulletin's statement and the publisher's notes, sanitised."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from app.domain import advisories, vulnerabilities
from app.domain.advisory_links import advisory_links
from app.domain.inventory.filters import check_choice
from app.http.dashboard.auth import Reader
from app.http.dashboard.paging import PageNumber, Pager, PerPage, blank_to_none
from app.http.dashboard.templating import render
from app.http.deps import SessionDep

router = APIRouter()

SEVERITY_CHOICES = ("critical", "high", "medium", "low")
AFFECTED_CHOICES = ("true", "false")
Text = Annotated[str | None, Query(max_length=128)]
CvePath = Annotated[str, Path(min_length=1, max_length=64)]


@router.get("/advisories")
def advisory_list(
    request: Request,
    state: Reader,
    session: SessionDep,
    cve: Text = None,
    severity: Text = None,
    product: Text = None,
    affected: Text = None,
    sort: Text = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """Advisories one per CVE with their severity, score, bulletins and affected assets;
    counts per severity above (each a filter)."""
    cve, severity, product, affected, sort = map(
        blank_to_none, (cve, severity, product, affected, sort)
    )
    severity = check_choice("severity", severity, SEVERITY_CHOICES)
    affected = check_choice("affected", affected, AFFECTED_CHOICES)
    sort = check_choice("sort", sort, advisories.SORTS) or "newest"
    only = None if affected is None else affected == "true"
    result = advisories.list_advisories(
        session,
        cve=cve,
        severity=severity,
        product=product,
        affected=only,
        sort=sort,
        limit=per_page,
        offset=(page - 1) * per_page,
        scope=state.user.scope,
    )
    return render(
        request,
        "advisories.html",
        {
            "advisories": result["items"],
            "pager": Pager(page, per_page, result["total"]),
            "by_severity": advisories.severity_counts(
                session, cve=cve, product=product, affected=only, scope=state.user.scope
            ),
            "feed": vulnerabilities.feed_summary(session),
            "sort": sort,
            "filters": {
                "cve": cve,
                "severity": severity,
                "product": product,
                "affected": affected,
            },
            "choices": {"severity": SEVERITY_CHOICES, "sort": advisories.SORTS},
        },
    )


@router.get("/advisories/{cve}")
def advisory_page(
    request: Request,
    state: Reader,
    session: SessionDep,
    cve: CvePath,
    status: Annotated[str | None, Query(max_length=32)] = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """One advisory: which assets, files and versions it was matched on and the answer for
    each (affected first by default), then each bulletin's statement: notes, products, version
    texts, fixes."""
    status = check_choice("status", blank_to_none(status), vulnerabilities.STATUSES)
    scope = state.user.scope
    detail = advisories.get_advisory(session, cve, scope)
    matched = vulnerabilities.advisory_affected(
        session, cve, status=status, limit=per_page, offset=(page - 1) * per_page, scope=scope
    )
    return render(
        request,
        "advisory.html",
        {
            "a": detail,
            "matched": matched,
            "status": status,
            "statuses": vulnerabilities.STATUSES,
            "status_counts": vulnerabilities.status_counts(session, cve, scope),
            "links": advisory_links(detail["cve"], detail["documents"]),
            "pager": Pager(page, per_page, matched["total"]),
        },
    )
