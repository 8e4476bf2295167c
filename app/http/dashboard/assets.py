"""``/assets``: the fleet's images and hosts with the API's filters, one asset's detail with the
triage form of its advisory findings, and its SBOM downloads (original and normalized) under
the page session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Query, Request
from fastapi.responses import Response

from app.clock import utcnow
from app.domain import compliance, gate, vulnerabilities
from app.domain.analyses import InvalidAnalysis
from app.domain.dashboard import compliance_by_framework
from app.domain.inventory import filters, queries, sbom
from app.domain.inventory.history import scan_changes
from app.errors import BadRequest
from app.http.dashboard import triage
from app.http.dashboard.auth import PageState, Reader, TriageUser, checked_form
from app.http.dashboard.paging import PageNumber, Pager, PerPage, blank_to_none, query_string
from app.http.dashboard.proposals import asset_context as proposals_context
from app.http.dashboard.templating import render
from app.http.deps import DatabaseDep, SessionDep, SettingsDep, WriteSessionDep
from app.http.params import MAX_BIGINT, IdPath
from scanner.detect.classifiers import CLASSIFIERS

router = APIRouter()

#: the family filter's choices, in the classifier table's order
FAMILIES = tuple(dict.fromkeys(c.family for c in CLASSIFIERS))
KINDS = ("image", "host")
SLSA_LEVELS = ("0", "1", "2", "3")
#: how many scans of the history are compared with the one before them
CHANGES_SHOWN = 10
#: of each kind of change between two scans (added, removed, changed), how many are listed
CHANGES_LISTED = 8
#: the asset page's gate decisions, newest first
DECISIONS_SHOWN = 10
#: the gate filter's choices: a latest decision under some policy, or never gated
GATE_CHOICES = ("deny", "warn", "allow", "none")
SORT_CHOICES = tuple(s for column in filters.SORTS for s in (column, f"-{column}"))
#: the file filter of the asset page: every GPU library, or only the findings
FILE_CHOICES = ("all", "findings")
#: the asset page's advisory findings shown (affected first); the tabs filter by status
VULNERABILITIES_SHOWN = 50
#: the asset page's advisory tabs: open (default: affected or under investigation: what a
#: person acts on; the rest would make a host with the toolkit's libraries a long page of
#: not-affected rows), all, then each status
ADVISORY_FILTERS: dict[str, tuple[str, ...] | None] = {
    "open": vulnerabilities.OPEN_STATUSES,
    "all": None,
}
ADVISORY_TABS = (*ADVISORY_FILTERS, *vulnerabilities.STATUSES)

# Form fields arrive empty when left blank (a GET form sends every field): empty means "any";
# any other value is checked as the API checks it, and a value that cannot match is a 400 page.
Text = Annotated[str | None, Query(max_length=1024)]
Labels = Annotated[list[str] | None, Query(description="KEY=VALUE, repeatable")]


def _yes_no(name: str, value: str | None) -> bool | None:
    if value is None:
        return None
    if value not in ("true", "false"):
        raise BadRequest(f"{name} must be true or false")
    return value == "true"


def _level(value: str | None) -> int | None:
    if value is None:
        return None
    if value not in SLSA_LEVELS:
        raise BadRequest(f"slsa must be one of {', '.join(SLSA_LEVELS)}")
    return int(value)


def _family(value: str | None) -> str | None:
    if value is not None and len(value) > 64:
        raise BadRequest("family must be at most 64 characters")
    return value


@router.get("/assets")
def asset_list(
    request: Request,
    state: Reader,
    session: SessionDep,
    kind: Text = None,
    name: Text = None,
    label: Labels = None,
    family: Text = None,
    version: Text = None,
    verdict: Text = None,
    signed: Text = None,
    slsa: Text = None,
    status: Text = None,
    gate_decision: Annotated[str | None, Query(alias="gate", max_length=16)] = None,
    sort: Annotated[str | None, Query(max_length=16)] = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """Assets filtered by kind, name, labels, library family/version/verdict, image signature,
    SLSA level, status (worst file verdict) and latest gate decision, sorted, a page at a
    time; each with its status and its latest decision under each policy."""
    kind, name, family, version, verdict, signed, slsa, status, gate_decision, sort = map(
        blank_to_none,
        (kind, name, family, version, verdict, signed, slsa, status, gate_decision, sort),
    )
    labels = [value for value in label or [] if value]
    if version is not None and len(version) > 128:
        raise BadRequest("version must be at most 128 characters")
    match = filters.library_match(family=_family(family), version=version, verdict=verdict)
    query = filters.asset_query(
        kind=filters.check_choice("kind", kind, KINDS),
        name=name,
        labels=labels,
        match=match,
        min_slsa_level=_level(slsa),
        signed=_yes_no("signed", signed),
        status=filters.check_choice("status", status, filters.STATUSES),
        gate=filters.check_choice("gate", gate_decision, GATE_CHOICES),
        scope=state.user.scope,
    )
    sort = filters.check_choice("sort", sort, SORT_CHOICES)
    result = queries.list_assets(session, query, per_page, (page - 1) * per_page, sort)
    ids = [a["id"] for a in result["items"]]
    pager = Pager(page, per_page, result["total"])
    return render(
        request,
        "assets.html",
        {
            "assets": result["items"],
            "statuses": queries.asset_statuses(session, ids),
            "decisions": gate.latest_decisions(session, ids),
            # the worst advisory each asset is affected by; the column shows once one is
            "severities": vulnerabilities.worst_affected(session, ids),
            "sort": sort,
            "pager": pager,
            "filters": {
                "kind": kind,
                "name": name,
                "label": labels,
                "family": family,
                "version": version,
                "verdict": verdict,
                "signed": signed,
                "slsa": slsa,
                "status": status,
                "gate": gate_decision,
            },
            "choices": {
                "kind": KINDS,
                "family": FAMILIES,
                "verdict": filters.VERDICT_VALUES,
                "slsa": SLSA_LEVELS,
                "status": filters.STATUSES,
                "gate": GATE_CHOICES,
            },
        },
    )


def is_finding(library: dict[str, Any]) -> bool:
    """A file the overview counts as a finding: modified, unowned or in provenance conflict."""
    return library["integrity"] in ("modified", "unowned") or library["provenance"] == "conflict"


def _directory(library: dict[str, Any]) -> tuple[str, str]:
    path = library["path"] or library["name"] or ""
    directory, slash, name = path.rpartition("/")
    return (directory + slash, name)


def by_directory(libraries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Libraries in directory order, grouped: each directory once, then its files by name (a
    host's 70 libraries live in a handful of directories; a path per row made a column of
    paths that took a hundred rows of the page's height)."""
    groups: list[dict[str, Any]] = []
    for lib in libraries:
        directory, name = _directory(lib)
        if not groups or groups[-1]["directory"] != directory:
            groups.append({"directory": directory, "files": []})
        groups[-1]["files"].append({**lib, "file_name": name})
    return groups


def _verdict_counts(libraries: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    return {
        "integrity": Counter(lib["integrity"] or "none" for lib in libraries),
        "provenance": Counter(lib["provenance"] or "none" for lib in libraries),
    }


def asset_context(
    session: SessionDep,
    state: PageState,
    trusted: Collection[str],
    asset_id: int,
    *,
    files: str | None = None,
    advisory_status: str | None = None,
    page: int = 1,
    per_page: int = 50,
) -> dict[str, Any]:
    """What the asset page shows (404 outside the user's scope), its triage forms included
    for a user holding ``triage``."""
    shown = filters.check_choice("files", blank_to_none(files), FILE_CHOICES) or "all"
    vuln_status = (
        filters.check_choice("advisory_status", blank_to_none(advisory_status), ADVISORY_TABS)
        or "open"
    )
    detail = queries.asset_detail(session, asset_id, state.user.scope)
    history = detail["history"]
    changes = scan_changes(session, [scan["id"] for scan in history[: CHANGES_SHOWN + 1]])
    libraries = sorted(detail["libraries"], key=_directory)
    findings = [lib for lib in libraries if is_finding(lib)]
    listed = findings if shown == "findings" else libraries
    pager = Pager(page, per_page, len(listed))
    decisions = gate.list_decisions(session, DECISIONS_SHOWN, 0, asset_id=asset_id)
    vuln_counts = vulnerabilities.asset_status_counts(session, asset_id)
    findings_page = vulnerabilities.asset_vulnerabilities(
        session,
        asset_id,
        status=ADVISORY_FILTERS.get(vuln_status, vuln_status),
        limit=VULNERABILITIES_SHOWN,
        offset=0,
        by_status=True,
        trusted=trusted,
    )
    return {
        "asset": detail,
        "trust": (detail["latest_scan"] or {}).get("image_trust"),
        "groups": by_directory(listed[pager.offset : pager.offset + per_page]),
        "files": shown,
        "findings": len(findings),
        "verdicts": _verdict_counts(libraries),
        "pager": pager,
        "changes": changes,
        "changes_listed": CHANGES_LISTED,
        "decisions": decisions["items"],
        "decisions_total": decisions["total"],
        "latest_decisions": gate.latest_decisions(session, [asset_id])[asset_id],
        "vulns": findings_page,
        "vuln_status": vuln_status,
        "vuln_statuses": vulnerabilities.STATUSES,
        "vuln_counts": vuln_counts,
        "vuln_open_count": sum(vuln_counts[s] for s in vulnerabilities.OPEN_STATUSES),
        "compliance": compliance_by_framework(
            compliance.asset_compliance(session, asset_id, utcnow())
        ),
        "triage": triage.options(state),
        "analyses": triage.listed(session, state, trusted, asset_id=asset_id),
        "triage_error": None,
        "triage_form": {},
        "flash": None,
        **proposals_context(session, state, asset_id),
    }


@router.get("/assets/{asset_id}")
def asset_page(
    request: Request,
    state: Reader,
    session: SessionDep,
    settings: SettingsDep,
    asset_id: IdPath,
    files: Annotated[str | None, Query(max_length=16)] = None,
    advisory_status: Annotated[str | None, Query(max_length=32)] = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """One asset: its gate decisions, advisory findings (affected first, by status) with the
    analysis in force for each (and the triage forms for a user holding ``triage``), libraries
    grouped by directory a page at a time (all or only the findings), image trust, compliance,
    scan history with changes, SBOMs."""
    context = asset_context(
        session,
        state,
        settings.trusted_authors,
        asset_id,
        files=files,
        advisory_status=advisory_status,
        page=page,
        per_page=per_page,
    )
    flash = triage.take_flash(request, state)
    response = render(request, "asset.html", {**context, "flash": flash})
    return triage.flash_shown(request, response) if flash else response


@router.post("/assets/{asset_id}/analyses")
async def record_asset_analysis(
    request: Request,
    state: TriageUser,
    session: WriteSessionDep,
    settings: SettingsDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    asset_id: IdPath,
) -> Response:
    """Record an analysis of the posted CVE for this asset, as ``POST /api/v1/analyses`` does
    (authored by the signed-in user, audited); back to the asset's advisories with a
    confirmation, or the page again with the reason (422) when the analysis is refused."""
    form = await checked_form(request, state)
    asset = queries.find_asset(session, asset_id, state.user.scope)
    tab = filters.check_choice(
        "advisory_status", blank_to_none(form.get("advisory_status")), ADVISORY_TABS
    )
    cve = form.get("cve", "").strip()
    here = f"/assets/{asset_id}" + (f"?{query_string({'advisory_status': tab})}" if tab else "")
    try:
        document = triage.record(session, state, db, background, form, cve=cve, asset_id=asset_id)
    except InvalidAnalysis as e:
        session.rollback()
        context = asset_context(
            session, state, settings.trusted_authors, asset_id, advisory_status=tab
        )
        context["triage_error"] = {"key": cve, "message": e.message}
        context["triage_form"] = form
        return render(request, "asset.html", context, status=e.status, at=here)
    message = triage.recorded_message(document, settings.trusted_authors, asset.name)
    return triage.redirect(request, state, here + "#vulnerabilities", message)


@router.get("/assets/{asset_id}/sbom")
def asset_sbom(
    state: Reader,
    session: SessionDep,
    asset_id: IdPath,
    scan_id: Annotated[int | None, Query(ge=1, le=MAX_BIGINT)] = None,
    format: Literal["original", "normalized"] = "original",
) -> Response:
    """The SBOM of the asset's latest (or given) scan, as a download (404 outside the user's
    team scope)."""
    queries.find_asset(session, asset_id, state.user.scope)
    if format == "normalized":
        body: bytes | str = sbom.normalized_sbom(session, asset_id, scan_id)
        name = f"asset-{asset_id}.normalized.cdx.json"
    else:
        body, _media_type = sbom.raw_sbom(session, asset_id, scan_id)
        name = f"asset-{asset_id}.cdx.json"
    return Response(
        body,
        media_type=sbom.MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
