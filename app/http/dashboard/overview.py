"""``/``: the fleet at a glance."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

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


class FiguresCache:
    """The overview's figures as last computed by this worker, reused for ``seconds`` (the
    page says as of when); thread-safe, and one computation at a time."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._figures: dict[str, Any] | None = None
        self._at = 0.0

    def clear(self) -> None:
        """Forget the figures (the next request computes them)."""
        with self._lock:
            self._figures = None

    def get(self, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The cached figures while fresh, else ``compute()``'s (stored with their time)."""
        with self._lock:
            fresh = time.monotonic() - self._at < self.seconds
            if self._figures is None or not fresh:
                self._figures = compute()
                self._at = time.monotonic()
            return self._figures


@router.get("/")
def overview(request: Request, state: Reader, session: SessionDep) -> Response:
    """Images and hosts, verification shares, drift, gate decisions, versions in use, and the
    most urgent findings (of the user's team scope)."""
    cache: FiguresCache = request.app.state.overview_cache
    scope = state.user.scope

    def compute() -> dict[str, Any]:
        now = utcnow()
        return {**fleet_overview(session, now, scope), "as_of": now}

    # the cache holds the whole fleet's figures: a team's are its own, computed each time
    figures = cache.get(compute) if scope is None else compute()
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
