"""``/libraries``: the library versions in use with their counts, where each is used (click
through to the assets), and the search for a file by SHA-256 or by file name."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.domain import explore
from app.domain.inventory import filters, queries
from app.errors import BadRequest
from app.http.dashboard.auth import Reader
from app.http.dashboard.paging import PageNumber, Pager, PerPage, blank_to_none
from app.http.dashboard.templating import render
from app.http.deps import SessionDep
from scanner.detect.classifiers import CLASSIFIERS

#: an asset's matching files listed on where-used; its page lists them all (a host's conda
#: environments made one asset's cell hold forty paths)
FILES_LISTED = 10
router = APIRouter()

FAMILIES = tuple(dict.fromkeys(c.family for c in CLASSIFIERS))
Text = Annotated[str | None, Query(max_length=1024)]


def _family(value: str | None) -> str | None:
    value = blank_to_none(value)
    if value is not None and value not in FAMILIES:
        raise BadRequest(f"family must be one of {', '.join(FAMILIES)}")
    return value


@router.get("/libraries")
def library_versions(
    request: Request,
    state: Reader,
    session: SessionDep,
    family: Text = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """Each (family, version, CUDA major) in use with its asset, image, host and file counts."""
    chosen = _family(family)
    result = queries.libraries(session, chosen, per_page, (page - 1) * per_page, state.user.scope)
    return render(
        request,
        "libraries.html",
        {
            "versions": result["items"],
            "pager": Pager(page, per_page, result["total"]),
            "family": chosen,
            "families": FAMILIES,
        },
    )


@router.get("/libraries/where-used")
def where_used(
    request: Request,
    state: Reader,
    session: SessionDep,
    family: Text = None,
    version: Text = None,
    sha256: Text = None,
    verdict: Text = None,
    label: Annotated[list[str] | None, Query(description="KEY=VALUE, repeatable")] = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """The assets whose latest scan holds the library, each with its matching files."""
    chosen = _family(family)
    version, sha256, verdict = map(blank_to_none, (version, sha256, verdict))
    if version is not None and len(version) > 128:
        raise BadRequest("version must be at most 128 characters")
    labels = [value for value in label or [] if value]
    match = filters.library_match(family=chosen, version=version, sha256=sha256, verdict=verdict)
    if not match.any:
        raise BadRequest("choose a family, a version, a SHA-256 or a verdict")
    query = filters.asset_query(labels=labels, scope=state.user.scope)
    result = queries.where_used(session, match, query, per_page, (page - 1) * per_page)
    return render(
        request,
        "where_used.html",
        {
            "items": result["items"],
            "pager": Pager(page, per_page, result["total"]),
            "filters": {
                "family": chosen,
                "version": version,
                "sha256": match.sha256,
                "verdict": verdict,
                "label": labels,
            },
            "families": FAMILIES,
            "verdicts": filters.VERDICT_VALUES,
            "files_listed": FILES_LISTED,
        },
    )


@router.get("/libraries/search")
def search(
    request: Request,
    state: Reader,
    session: SessionDep,
    q: Text = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """Current library files by SHA-256 (64 hex digits) or by file name (``*`` globs)."""
    query = blank_to_none(q)
    result = (
        explore.search_files(session, query, per_page, (page - 1) * per_page, state.user.scope)
        if query is not None
        else {"by": None, "items": [], "total": 0}
    )
    return render(
        request,
        "search.html",
        {
            "q": query,
            "by": result["by"],
            "files": result["items"],
            "pager": Pager(page, per_page, result["total"]),
        },
    )
