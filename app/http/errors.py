"""One handler renders every error as ``{"error": {"status", "message", "details"}}``.

An unreachable or overloaded database becomes 503 with ``Retry-After`` so agents spool and
retry instead of dropping reports.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from app.errors import AppError
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


def _pointer(location: tuple[Any, ...] | list[Any]) -> str:
    return "".join(f"/{part}" for part in location)


def install_error_handlers(app: FastAPI, settings: Settings) -> None:
    """Register the handlers on ``app``."""

    async def app_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AppError)
        return error_response(exc.status, exc.message, exc.details, exc.headers)

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        details = [
            {"pointer": _pointer(e.get("loc", ())), "message": str(e.get("msg", ""))}
            for e in exc.errors()[:10]
        ]
        first = details[0] if details else {"pointer": "", "message": "invalid request"}
        return error_response(422, f"{first['pointer']}: {first['message']}", details)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        return error_response(exc.status_code, str(exc.detail), headers=exc.headers)

    async def database_unavailable(_: Request, exc: Exception) -> JSONResponse:
        unavailable = (OperationalError, InterfaceError)
        if isinstance(exc, DBAPIError) and not isinstance(exc, unavailable):
            if not exc.connection_invalidated:
                log.error("database error: %s", exc)
                return error_response(500, "internal database error")
        log.warning("database unavailable: %s", str(exc).splitlines()[0])
        return error_response(
            503,
            "the database is unavailable; retry later",
            headers={"Retry-After": str(settings.retry_after_seconds)},
        )

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal error")

    app.add_exception_handler(AppError, app_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(DBAPIError, database_unavailable)
    app.add_exception_handler(PoolTimeout, database_unavailable)
    app.add_exception_handler(Exception, unexpected)
