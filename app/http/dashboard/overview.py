"""``/``: the fleet at a glance."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.clock import utcnow
from app.domain.dashboard import CHARTED_FAMILIES
from app.domain.dashboard import overview as fleet_overview
from app.http.dashboard.auth import Reader
from app.http.dashboard.charts import Bar, bar_chart
from app.http.dashboard.paging import query_string
from app.http.dashboard.templating import render
from app.http.deps import SessionDep

router = APIRouter()


@router.get("/")
def overview(request: Request, _: Reader, session: SessionDep) -> Response:
    """Images and hosts, verification shares, drift, gate decisions, versions in use, and the
    most urgent findings."""
    figures = fleet_overview(session, utcnow())
    charts = [
        {
            "title": f"{label} versions in use (assets)",
            "svg": bar_chart(
                [
                    Bar(
                        version,
                        count,
                        "/assets?" + query_string({"family": family, "version": version}),
                    )
                    for version, count in figures["versions"][family]
                ],
                title=f"{label} versions in use",
                empty=f"no {label} library in the fleet",
            ),
        }
        for family, label in CHARTED_FAMILIES
    ]
    return render(request, "overview.html", {"o": figures, "charts": charts})
