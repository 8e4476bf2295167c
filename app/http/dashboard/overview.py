"""``/``: the fleet at a glance."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.domain.inventory.queries import fleet_counts
from app.http.dashboard.auth import Reader
from app.http.dashboard.templating import render
from app.http.deps import SessionDep

router = APIRouter()


@router.get("/")
def overview(request: Request, _: Reader, session: SessionDep) -> Response:
    """Images and hosts, verification shares, drift, gate decisions, versions in use, and the
    most urgent findings."""
    return render(request, "overview.html", {"counts": fleet_counts(session)})
