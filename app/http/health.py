"""Health, readiness and metrics endpoints."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from app.domain.health import readiness
from app.domain.inventory.queries import fleet_counts
from app.errors import Forbidden
from app.http.deps import DatabaseDep, InventoryReader, SessionDep, SettingsDep
from app.http.metrics import Metrics
from app.http.schemas import Health, Readiness

#: Prometheus text exposition format 0.0.4
METRICS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
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


def _fleet_lines(session: SessionDep) -> str:
    totals = fleet_counts(session)
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
    ]
    return "\n".join(lines) + "\n"


def _answer(request: Request, session: SessionDep) -> Response:
    metrics: Metrics = request.app.state.metrics
    body = metrics.exposition() + _fleet_lines(session).encode()
    return Response(body, media_type=METRICS_MEDIA_TYPE)


_DOC: dict[str, Any] = {
    "response_class": PlainTextResponse,
    "summary": "Prometheus metrics",
    "description": "Prometheus text format: fleet totals from the database, and this process's "
    "(or, in multi-process mode, every worker's) request, ingest, gate and authentication "
    "counters.",
    "tags": ["health"],
}


def install_metrics(app: FastAPI, protected: bool) -> None:
    """Serve ``/metrics``: to ``inventory:read`` tokens, or to anyone (``GPUPROV_METRICS_AUTH``
    ``none``, for a Prometheus that scrapes inside the cluster without a token)."""
    if protected:

        def metrics(reader: InventoryReader, session: SessionDep, request: Request) -> Response:
            if reader.scope is not None:
                # the service's counters are the whole fleet's: no team's to read
                raise Forbidden(
                    "the metrics count the whole fleet: a team's token cannot read them"
                )
            return _answer(request, session)

        app.add_api_route("/metrics", metrics, methods=["GET"], **_DOC)
    else:

        def open_metrics(session: SessionDep, request: Request) -> Response:
            return _answer(request, session)

        app.add_api_route("/metrics", open_metrics, methods=["GET"], **_DOC)
