"""The FastAPI application: `create_app(settings)` wires routers and error handlers, and its
lifespan owns the database engine (nothing is created at import time).

At start-up the lifespan refuses a database whose schema is behind the code, naming the command
that fixes it; an unreachable database does not stop start-up (requests answer 503 until it is
back), so API replicas can start before their database.

Every request passes the query-string rules of `app.http.params` and gets a request id
(`app.http.observe`); every answer carries the headers of `app.http.security`; the API
documentation pages serve their scripts from the installed package (no CDN), and the OpenAPI
document lists every status an operation answers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from app.clock import utcnow
from app.domain import compliance
from app.domain.ci_tokens import IssuerKeys
from app.domain.provenance import CatalogCache
from app.domain.webhook_delivery import Worker, delivery_config
from app.http.api import router as api_router
from app.http.body import IngestGate
from app.http.bodylimit import BodyLimit
from app.http.dashboard import install_dashboard
from app.http.docs import install_docs
from app.http.errors import ContainErrors, install_error_handlers
from app.http.health import install_metrics
from app.http.health import router as health_router
from app.http.metrics import Metrics
from app.http.observe import RequestContext
from app.http.params import strict_query
from app.http.ratelimit import AuthFailureLimiter
from app.http.security import SecurityHeaders
from app.settings import Settings
from app.storage.migrate import schema_state
from app.storage.session import Database
from scanner import __version__

log = logging.getLogger("gpuprov.app")


class SchemaBehindError(RuntimeError):
    """The database must be migrated before the service can start."""


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application for ``settings`` (read from the environment when omitted)."""
    settings = settings if settings is not None else Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = Database(settings)
        try:
            state = await run_in_threadpool(schema_state, db.engine)
        except SQLAlchemyError as e:
            log.warning(
                "database unreachable at start-up (%s); answering 503 until it is back",
                str(e).splitlines()[0],
            )
        else:
            if not state.up_to_date:
                db.dispose()
                raise SchemaBehindError(state.describe())
        app.state.db = db
        # A re-evaluation cut short by a restart resumes here, off the request path.
        stop = threading.Event()
        resume = threading.Thread(
            target=compliance.resume_pending,
            args=(db, utcnow(), stop),
            name="gpuprov-compliance-resume",
            daemon=True,
        )
        resume.start()
        # webhooks leave from the outbox: every replica may run a worker (claims never overlap)
        worker = None
        if settings.webhook_worker_seconds > 0:
            worker = Worker(db, delivery_config(settings), settings.webhook_worker_seconds)
            worker.start()
        try:
            yield
        finally:
            stop.set()
            if worker is not None:
                worker.stop()
            resume.join(timeout=30)
            db.dispose()

    app = FastAPI(
        title="gpuprov",
        version=__version__,
        summary="Fleet inventory and provenance of GPU libraries from CycloneDX reports",
        lifespan=lifespan,
        dependencies=[Depends(strict_query)],
        docs_url=None,
        redoc_url=None,
    )
    metrics = Metrics()
    app.add_middleware(ContainErrors)
    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(RequestContext, metrics=metrics)  # outermost: sees every answer
    app.state.settings = settings
    app.state.catalogs = CatalogCache()
    app.state.issuer_keys = IssuerKeys(
        allow_loopback=settings.allow_loopback_issuers, jwks_files=settings.ci_jwks_files
    )
    app.state.metrics = metrics
    app.state.auth_limiter = AuthFailureLimiter(
        settings.auth_failure_limit, settings.auth_failure_window_seconds
    )
    app.state.ingest_gate = IngestGate(
        settings.max_concurrent_ingests, settings.ingests_per_token, metrics
    )
    install_error_handlers(app, settings)
    app.include_router(health_router)
    install_metrics(app, protected=settings.metrics_auth == "token")
    app.include_router(api_router)
    install_docs(app, settings)
    install_dashboard(app, settings)
    return app


def create_app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory``: settings from ``GPUPROV_*`` variables."""
    return create_app(Settings())
