"""``/advisories``: the security advisories matched against the fleet, by severity, newest or
most affected, with the API's filters; one advisory's page with the assets it was matched on
(files, versions, fixed-in) and their analyses with the triage forms, each bulletin's statement
and the publisher's notes, sanitised."""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, BackgroundTasks, Path, Query, Request
from fastapi.responses import Response

from app.domain import advisories, vulnerabilities
from app.domain.advisory_links import advisory_links
from app.domain.analyses import InvalidAnalysis
from app.domain.inventory import queries
from app.domain.inventory.filters import check_choice
from app.http.dashboard import triage
from app.http.dashboard.auth import PageState, Reader, TriageUser, checked_form
from app.http.dashboard.paging import PageNumber, Pager, PerPage, blank_to_none, query_string
from app.http.dashboard.templating import render
from app.http.deps import DatabaseDep, SessionDep, SettingsDep, WriteSessionDep

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


def advisory_context(
    session: SessionDep,
    state: PageState,
    trusted: Collection[str],
    cve: str,
    *,
    status: str | None = None,
    page: int = 1,
    per_page: int = 50,
) -> dict[str, Any]:
    """What an advisory's page shows (404 when no document names the CVE), its triage forms
    included for a user holding ``triage``."""
    status = check_choice("status", blank_to_none(status), vulnerabilities.STATUSES)
    scope = state.user.scope
    detail = advisories.get_advisory(session, cve, scope)
    matched = vulnerabilities.advisory_affected(
        session,
        cve,
        status=status,
        limit=per_page,
        offset=(page - 1) * per_page,
        trusted=trusted,
        scope=scope,
    )
    return {
        "a": detail,
        "matched": matched,
        "status": status,
        "statuses": vulnerabilities.STATUSES,
        "status_counts": vulnerabilities.status_counts(session, cve, scope),
        "links": advisory_links(detail["cve"], detail["documents"]),
        "pager": Pager(page, per_page, matched["total"]),
        # the names of the assets this page lists, for the analyses written for them
        "asset_names": {f["asset"]["id"]: f["asset"]["name"] for f in matched["items"]},
        "triage": triage.options(state),
        "analyses": triage.listed(session, state, trusted, cve=detail["cve"]),
        "triage_error": None,
        "triage_form": {},
        "flash": None,
    }


@router.get("/advisories/{cve}")
def advisory_page(
    request: Request,
    state: Reader,
    session: SessionDep,
    settings: SettingsDep,
    cve: CvePath,
    status: Annotated[str | None, Query(max_length=32)] = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """One advisory: which assets, files and versions it was matched on and the answer for
    each (affected first by default) with the analysis in force, the analyses of the CVE (and
    the triage forms for a user holding ``triage``), then each bulletin's statement: notes,
    products, version texts, fixes."""
    context = advisory_context(
        session, state, settings.trusted_authors, cve, status=status, page=page, per_page=per_page
    )
    flash = triage.take_flash(request, state)
    response = render(request, "advisory.html", {**context, "flash": flash})
    return triage.flash_shown(request, response) if flash else response


@router.post("/advisories/{cve}/analyses")
async def record_advisory_analysis(
    request: Request,
    state: TriageUser,
    session: WriteSessionDep,
    settings: SettingsDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    cve: CvePath,
) -> Response:
    """Record an analysis of this CVE for the posted asset (``asset_id``) or, for a user who
    sees the whole fleet, the assets carrying every label of ``selector`` (``label=value``
    lines), as ``POST /api/v1/analyses`` does; back to the advisory with a confirmation, or
    the page again with the reason (422) when the analysis is refused."""
    form = await checked_form(request, state)
    scope = state.user.scope
    cve = advisories.get_advisory(session, cve, scope)["cve"]  # 404: no page holds this form
    status = check_choice("status", blank_to_none(form.get("status")), vulnerabilities.STATUSES)
    here = f"/advisories/{quote(cve)}" + (f"?{query_string({'status': status})}" if status else "")
    key = "selector" if "selector" in form else f"asset-{form.get('asset_id', '')}"
    asset = None
    try:
        asset_id = triage.asset_id_of(form["asset_id"]) if "asset_id" in form else None
        if asset_id is not None:  # another team's asset is not found, whatever the form says
            asset = queries.find_asset(session, asset_id, scope).name
        selector = triage.selector_of(form["selector"]) if "selector" in form else None
        document = triage.record(
            session, state, db, background, form, cve=cve, asset_id=asset_id, selector=selector
        )
    except InvalidAnalysis as e:
        session.rollback()
        context = advisory_context(session, state, settings.trusted_authors, cve, status=status)
        context["triage_error"] = {"key": key, "message": e.message}
        context["triage_form"] = form
        return render(request, "advisory.html", context, status=e.status, at=here)
    message = triage.recorded_message(document, settings.trusted_authors, asset or "")
    return triage.redirect(request, state, here + "#assets", message)
