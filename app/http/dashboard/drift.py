"""``/drift``: digest conflicts (one family and version, several digests), the changes at
each rescanned asset's last scan, and environment parity (versions one label value runs that
another never does, e.g. ``env=prod`` against ``env=staging``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.domain import explore
from app.domain.inventory import queries
from app.http.dashboard.auth import Reader
from app.http.dashboard.libraries import FAMILIES, Text, _family
from app.http.dashboard.paging import PageNumber, Pager, PerPage, blank_to_none
from app.http.dashboard.templating import render
from app.http.deps import SessionDep

router = APIRouter()

#: digest conflict groups shown (each lists its digests); the table is never paginated past it
CONFLICT_GROUPS = 200
Label = Annotated[str, Query(min_length=1, max_length=128)]
Value = Annotated[str, Query(min_length=1, max_length=256)]


@router.get("/drift")
def conflicts(
    request: Request, state: Reader, session: SessionDep, family: Text = None
) -> Response:
    """Files of one family, component, version, CUDA major and architecture seen with more
    than one digest across the fleet's current scans (the user's team scope's)."""
    chosen = _family(family)
    groups = queries.digest_conflicts(session, chosen, CONFLICT_GROUPS, state.user.scope)
    return render(
        request,
        "drift_conflicts.html",
        {"groups": groups, "family": chosen, "families": FAMILIES, "limit": CONFLICT_GROUPS},
    )


@router.get("/drift/changes")
def changes(
    request: Request,
    state: Reader,
    session: SessionDep,
    page: PageNumber = 1,
    per_page: PerPage = 25,
) -> Response:
    """The assets scanned more than once, latest first, with what changed at their last scan."""
    result = explore.recent_changes(session, per_page, (page - 1) * per_page, state.user.scope)
    return render(
        request,
        "drift_changes.html",
        {"items": result["items"], "pager": Pager(page, per_page, result["total"])},
    )


@router.get("/drift/parity")
def parity(
    request: Request,
    state: Reader,
    session: SessionDep,
    label: Label = "env",
    target: Value = "prod",
    baseline: Value = "staging",
    family: Text = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """Library versions that assets labelled ``label=target`` run and no asset labelled
    ``label=baseline`` runs."""
    chosen = _family(family)
    result = explore.parity(
        session,
        label,
        target,
        baseline,
        chosen,
        per_page,
        (page - 1) * per_page,
        state.user.scope,
    )
    return render(
        request,
        "drift_parity.html",
        {
            "result": result,
            "pager": Pager(page, per_page, result["total"]),
            "filters": {
                "label": label,
                "target": target,
                "baseline": baseline,
                "family": blank_to_none(family),
            },
            "families": FAMILIES,
        },
    )
