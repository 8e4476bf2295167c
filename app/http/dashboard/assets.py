"""``/assets``: the fleet's images and hosts with the API's filters, one asset's detail, and its
SBOM downloads (original and normalized) under the page session."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.clock import utcnow
from app.domain import compliance
from app.domain.dashboard import compliance_by_framework
from app.domain.inventory import filters, queries, sbom
from app.domain.inventory.history import scan_changes
from app.errors import BadRequest
from app.http.dashboard.auth import Reader
from app.http.dashboard.paging import PageNumber, Pager, PerPage, blank_to_none
from app.http.dashboard.templating import render
from app.http.deps import SessionDep
from app.http.params import MAX_BIGINT, IdPath
from scanner.detect.classifiers import CLASSIFIERS

router = APIRouter()

#: the family filter's choices, in the classifier table's order
FAMILIES = tuple(dict.fromkeys(c.family for c in CLASSIFIERS))
KINDS = ("image", "host")
SLSA_LEVELS = ("0", "1", "2", "3")
#: how many scans of the history are compared with the one before them
CHANGES_SHOWN = 10

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
    _: Reader,
    session: SessionDep,
    kind: Text = None,
    name: Text = None,
    label: Labels = None,
    family: Text = None,
    version: Text = None,
    verdict: Text = None,
    signed: Text = None,
    slsa: Text = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """Assets filtered by kind, name, labels, library family/version/verdict, image signature
    and SLSA level, a page at a time."""
    kind, name, family, version, verdict, signed, slsa = map(
        blank_to_none, (kind, name, family, version, verdict, signed, slsa)
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
    )
    result = queries.list_assets(session, query, per_page, (page - 1) * per_page)
    pager = Pager(page, per_page, result["total"])
    return render(
        request,
        "assets.html",
        {
            "assets": result["items"],
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
            },
            "choices": {
                "kind": KINDS,
                "family": FAMILIES,
                "verdict": filters.VERDICT_VALUES,
                "slsa": SLSA_LEVELS,
            },
        },
    )


@router.get("/assets/{asset_id}")
def asset_page(request: Request, _: Reader, session: SessionDep, asset_id: IdPath) -> Response:
    """One asset: libraries, image trust, scan history with changes, compliance, SBOMs."""
    detail = queries.asset_detail(session, asset_id)
    history = detail["history"]
    changes = scan_changes(session, [scan["id"] for scan in history[: CHANGES_SHOWN + 1]])
    return render(
        request,
        "asset.html",
        {
            "asset": detail,
            "trust": (detail["latest_scan"] or {}).get("image_trust"),
            "changes": changes,
            "compliance": compliance_by_framework(
                compliance.asset_compliance(session, asset_id, utcnow())
            ),
        },
    )


@router.get("/assets/{asset_id}/sbom")
def asset_sbom(
    _: Reader,
    session: SessionDep,
    asset_id: IdPath,
    scan_id: Annotated[int | None, Query(ge=1, le=MAX_BIGINT)] = None,
    format: Literal["original", "normalized"] = "original",
) -> Response:
    """The SBOM of the asset's latest (or given) scan, as a download."""
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
