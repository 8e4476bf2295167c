"""One handler renders every error as ``{"error": {"status", "message", "details"}}``.

Status codes follow one rule: a bad query or path parameter is 400, a body that is well-formed
but not acceptable is 422, and 503 with ``Retry-After`` means the database cannot answer now
(unreachable, every pooled connection busy, a statement past the statement timeout, or no
schema yet) so agents spool and retry instead of dropping reports. Input that can never succeed
(over a limit) is refused with a 4xx before it reaches the database.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import AppError, StoredDocumentAltered
from app.settings import Settings

log = logging.getLogger(__name__)


def error_response(
    status: int,
    message: str,
    details: Sequence[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The JSON error body every failing endpoint answers with."""
    body = {"error": {"status": status, "message": message, "details": list(details or [])}}
    return JSONResponse(body, status_code=status, headers=headers)


#: where a request parameter lives; errors there are the request's syntax (400), not its body's
_PARAMETER_LOCATIONS = frozenset({"query", "path", "header", "cookie"})
#: PostgreSQL SQLSTATE codes: query_canceled (statement_timeout), undefined_table
_CANCELED, _UNDEFINED_TABLE = "57014", "42P01"


def database_problem(exc: SQLAlchemyError) -> str | None:
    """Why the database could not answer: ``timeout``, ``no-schema`` or ``unavailable``; None
    for an error that is not the database's state (a bug: answered 500)."""
    if isinstance(exc, PoolTimeout):
        return "unavailable"
    if not isinstance(exc, DBAPIError):
        return None
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None)
    text = str(orig).lower()
    if sqlstate == _CANCELED or text == "interrupted":
        return "timeout"
    if sqlstate == _UNDEFINED_TABLE or text.startswith("no such table"):
        return "no-schema"
    if isinstance(exc, OperationalError | InterfaceError) or exc.connection_invalidated:
        return "unavailable"
    return None


def safe_description(exc: SQLAlchemyError) -> str:
    """The driver's error class, SQLSTATE and the statement, without the driver's message: it
    can quote a parameter (``invalid input syntax ...: "<value>"``, ``Key (token_hash)=(...)``),
    and the engine already hides the parameters themselves."""
    if not isinstance(exc, DBAPIError):
        return type(exc).__name__
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None)
    code = f" (SQLSTATE {sqlstate})" if sqlstate else ""
    statement = " ".join((exc.statement or "").split())[:500]
    return f"{type(orig).__name__}{code} in: {statement}"


def _pointer(location: tuple[Any, ...] | list[Any]) -> str:
    return "".join(f"/{part}" for part in location)


def validation_failure(
    errors: Sequence[Any], prefix: tuple[str, ...] = (), *, status: int = 422
) -> AppError:
    """Pydantic's validation errors as the one error answer: the first in the message, up to
    ten in the details, each located by a pointer (`prefix` first: ``("body",)`` for a body
    validated by hand, as FastAPI names it)."""
    details = [
        {"pointer": _pointer((*prefix, *e.get("loc", ()))), "message": str(e.get("msg", ""))}
        for e in errors[:10]
    ]
    first = details[0] if details else {"pointer": "", "message": "invalid request"}
    return AppError(f"{first['pointer']}: {first['message']}", status, details=details)


#: the methods a 405's ``Allow`` may name
_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> str:
    """The ``Allow`` of a 405: every method some route serves at the request's path, each
    asked of the router as a request would be (Starlette names only the methods of the first
    route whose path matched: GET for /api/v1/tokens, whose POST is another route)."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in routes)
    ]
    return ", ".join(allowed)


class ContainErrors:
    """Answers an unexpected exception with the JSON 500 here, so it never reaches the server.

    Starlette's outermost middleware re-raises after answering, and uvicorn then closes the
    connection: a client's next keep-alive request on it would fail too. Only an answer that
    already started (a stream cut short) still propagates: that connection cannot be reused.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if started:
                raise
            log.error("unhandled error", exc_info=exc)
            await error_response(500, "internal error")(scope, receive, send)


class PageErrorRenderer(Protocol):
    """Renders errors of HTML pages (the dashboard's) instead of the JSON body."""

    def applies(self, request: Request) -> bool: ...

    def render(
        self, request: Request, status: int, message: str, headers: Mapping[str, str] | None
    ) -> Response: ...


def _answer(
    request: Request,
    status: int,
    message: str,
    details: Sequence[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    pages: PageErrorRenderer | None = getattr(request.app.state, "page_errors", None)
    if pages is not None and pages.applies(request):
        return pages.render(request, status, message, headers)
    return error_response(status, message, details, headers)


def _altered(request: Request, exc: StoredDocumentAltered) -> None:
    """Count and audit a stored document found altered; the request's own transaction was
    rolled back with the refusal, so the audit event is written in one of its own."""
    from app.domain import stored

    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.stored_document_mismatches.labels(exc.kind).inc()
    db = getattr(request.app.state, "db", None)
    if db is None:
        return
    try:
        with db.transaction(write=True) as session:
            stored.record(session, exc)
    except SQLAlchemyError as e:
        log.error("stored %s %s altered; not audited: %s", exc.kind, exc.target, type(e).__name__)


def install_error_handlers(app: FastAPI, settings: Settings) -> None:
    """Register the handlers on ``app``."""

    async def app_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AppError)
        if isinstance(exc, StoredDocumentAltered):
            await run_in_threadpool(_altered, request, exc)
        return _answer(request, exc.status, exc.message, exc.details, exc.headers)

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        where = {e.get("loc", ("body",))[0] for e in exc.errors()}
        status = 400 if where <= _PARAMETER_LOCATIONS else 422
        error = validation_failure(exc.errors(), status=status)
        return _answer(request, error.status, error.message, error.details)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": allowed_methods(request)}
        return _answer(request, exc.status_code, str(exc.detail), headers=headers)

    messages = {
        "unavailable": "the database is unavailable; retry later",
        "timeout": (
            "the query ran past the statement timeout of "
            f"{settings.database_statement_timeout:g} s; retry later or narrow the filters"
        ),
        "no-schema": "the database has no gpuprov schema; run `gpuprov db upgrade`",
    }

    async def database_unavailable(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SQLAlchemyError)
        problem = database_problem(exc)
        if problem is None:
            log.error("database error: %s", safe_description(exc))
            return _answer(request, 500, "internal database error")
        log.warning("database %s: %s", problem, str(exc).splitlines()[0])
        return _answer(
            request,
            503,
            messages[problem],
            headers={"Retry-After": str(settings.retry_after_seconds)},
        )

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error", exc_info=exc)
        return _answer(request, 500, "internal error")

    app.add_exception_handler(AppError, app_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(DBAPIError, database_unavailable)
    app.add_exception_handler(PoolTimeout, database_unavailable)
    app.add_exception_handler(Exception, unexpected)
