"""Health, readiness and metrics endpoints."""

from __future__ import annotations

import logging
import threading
from collections import Counter

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy.exc import SQLAlchemyError

from app.http.deps import DatabaseDep, InventoryReader, SessionDep, SettingsDep
from app.http.schemas import Readiness
from app.storage.migrate import schema_state
from app.storage.repositories.inventory import counts

log = logging.getLogger(__name__)
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
    headers = {"Retry-After": str(settings.retry_after_seconds)}
    try:
        state = schema_state(db.engine)
    except SQLAlchemyError as e:
        # the driver's text names hosts, ports and databases: it goes to the log only
        log.warning("readiness: database unreachable: %s", str(e).splitlines()[0])
        return JSONResponse({"status": "unavailable", "database": "unreachable"}, 503, headers)
    if not state.up_to_date:
        return JSONResponse({"status": "unavailable", "database": state.describe()}, 503, headers)
    return JSONResponse({"status": "ready", "schema": state.head})


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(_: InventoryReader, session: SessionDep, request: Request) -> str:
    """Prometheus text format: fleet totals, and this process's ingest counters."""
    totals = counts(session)
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
