"""Health, readiness and metrics endpoints."""

from __future__ import annotations

import threading
from collections import Counter

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from app.domain.health import readiness
from app.domain.inventory.queries import fleet_counts
from app.http.deps import DatabaseDep, InventoryReader, SessionDep, SettingsDep
from app.http.schemas import Readiness

router = APIRouter(tags=["health"])


class Counters:
    """Per-process counters, safe to bump from the threadpool."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def bump(self, name: str) -> None:
        """Add one to ``name``."""
        with self._lock:
            self._counts[name] += 1

    def snapshot(self) -> dict[str, int]:
        """A copy of the counts."""
        with self._lock:
            return dict(self._counts)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up (no database access)."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "database unreachable or not migrated"}},
)
def readyz(db: DatabaseDep, settings: SettingsDep) -> JSONResponse:
    """The database is reachable and its schema is current."""
    state = readiness(db)
    if not state.ready:
        headers = {"Retry-After": str(settings.retry_after_seconds)}
        return JSONResponse(state.body, 503, headers)
    return JSONResponse(state.body)


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(_: InventoryReader, session: SessionDep, request: Request) -> str:
    """Prometheus text format: fleet totals, and this process's ingest counters."""
    totals = fleet_counts(session)
    received = request.app.state.counters.snapshot()
    lines = [
        "# HELP gpuprov_assets Assets known to the service.",
        "# TYPE gpuprov_assets gauge",
        f'gpuprov_assets{{kind="image"}} {totals["assets_image"]}',
        f'gpuprov_assets{{kind="host"}} {totals["assets_host"]}',
        "# HELP gpuprov_scans Stored scans (history included).",
        "# TYPE gpuprov_scans gauge",
        f"gpuprov_scans {totals['scans']}",
        "# HELP gpuprov_current_libraries GPU libraries in the latest scans.",
        "# TYPE gpuprov_current_libraries gauge",
        f"gpuprov_current_libraries {totals['current_libraries']}",
        "# HELP gpuprov_reports_received_total Reports this process answered, by outcome.",
        "# TYPE gpuprov_reports_received_total counter",
    ]
    lines += [
        f'gpuprov_reports_received_total{{outcome="{k}"}} {n}' for k, n in sorted(received.items())
    ]
    return "\n".join(lines) + "\n"
