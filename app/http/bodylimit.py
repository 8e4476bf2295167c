"""Limits on what a request may send, applied before any endpoint reads it.

The head (request line and headers) is at most `MAX_HEAD_BYTES` in `MAX_HEADERS` fields (431
beyond). The body has a ceiling: the operations that take a report (``/reports``, ``/gate``,
``/catalogs``) ``GPUPROV_MAX_REPORT_BYTES``, an advisory document (``POST /advisories``)
``GPUPROV_MAX_ADVISORY_BYTES``, every other (token requests, policies, dashboard
forms) 1 MiB; a declared ``Content-Length`` over it is answered 413 at once, a body streamed
without one is cut off at the ceiling with a 413. Endpoints keep their own, smaller limits (a
promotion policy's 256 KiB, a login form's 16 KiB). The body must also arrive in time: within
``GPUPROV_BODY_TIMEOUT_SECONDS`` of the first read, extended by a second for every
``GPUPROV_BODY_MIN_RATE`` bytes (a trickling client answers 408 and loses what it held, an
ingest slot included), and a client that leaves before its body is complete is a client event,
answered (to nobody) and counted as 499, never an error of the service.
"""

from __future__ import annotations

import asyncio

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.http.errors import error_response
from app.settings import Settings

#: the request line and headers, in all; uvicorn's h11 refuses (400) a head that is still
#: incomplete past this size, and this module one that arrived whole (431)
MAX_HEAD_BYTES = 16 * 1024
#: header fields in one request
MAX_HEADERS = 100
#: the ceiling of bodies that are not reports
SMALL_BODY_BYTES = 1024 * 1024
#: operations whose bodies are reports or as large (their endpoints check the exact limit)
REPORT_PATHS = frozenset({"/api/v1/reports", "/api/v1/gate", "/api/v1/catalogs"})
#: the operation whose body is one advisory document (its own limit)
ADVISORY_PATH = "/api/v1/advisories"
#: nginx's status for a request its client closed before the answer: never sent, only counted
CLIENT_CLOSED = 499


def head_problem(scope: Scope) -> str | None:
    """Why a request's head is refused (too many or too large header fields), or None."""
    headers = scope.get("headers", ())
    if len(headers) > MAX_HEADERS:
        return f"the request has {len(headers)} header fields; the limit is {MAX_HEADERS}"
    query = scope.get("query_string", b"")
    # "METHOD target HTTP/1.1\r\n", then "name: value\r\n" per field
    size = len(scope.get("method", "")) + len(scope.get("raw_path", b"")) + 12
    size += len(query) + 1 if query else 0
    size += sum(len(name) + len(value) + 4 for name, value in headers)
    if size > MAX_HEAD_BYTES:
        return (
            f"the request line and headers are {size} bytes; the limit is {MAX_HEAD_BYTES} "
            "(a long query string counts too)"
        )
    return None


class _Body:
    """The receive channel of one request: counts the body against its ceiling and deadline."""

    def __init__(self, receive: Receive, limit: int, timeout: float, min_rate: int) -> None:
        self._receive = receive
        self.limit = limit
        self.timeout = timeout
        self.min_rate = min_rate
        self.received = 0
        self.deadline: float | None = None
        self.complete = False

    async def receive(self) -> Message:
        if self.complete:  # the body is in: what follows is the wait for a disconnect
            return await self._receive()
        if self.deadline is None:  # from the first read: authorization and slot come before
            self.deadline = asyncio.get_running_loop().time() + self.timeout
        try:
            async with asyncio.timeout_at(self.deadline):
                event = await self._receive()
        except TimeoutError:
            raise HTTPException(
                408,
                f"the request body arrived too slowly: {self.received} bytes, more than "
                f"{self.timeout:g} s plus one second per {self.min_rate} bytes "
                "(GPUPROV_BODY_TIMEOUT_SECONDS, GPUPROV_BODY_MIN_RATE)",
            ) from None
        if event["type"] == "http.disconnect":
            self.complete = True
            raise HTTPException(
                CLIENT_CLOSED, "the client closed the connection before sending the whole body"
            )
        if event["type"] == "http.request":
            size = len(event.get("body", b""))
            self.received += size
            self.deadline += size / self.min_rate
            if self.received > self.limit:
                raise HTTPException(413, _too_large(self.limit))
            self.complete = not event.get("more_body", False)
        return event


def _too_large(limit: int) -> str:
    return f"the request body is larger than the limit of {limit} bytes"


class BodyLimit:
    """Refuses a head over its limits (431), a body over the path's ceiling (413) or slower
    than the minimum rate (408), and turns a client leaving mid-body into a 499."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.report_bytes = settings.max_report_bytes
        self.advisory_bytes = settings.max_advisory_bytes
        self.timeout = settings.body_timeout_seconds
        self.min_rate = settings.body_min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = head_problem(scope)
        if problem is not None:
            await error_response(431, problem)(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        limit = self.report_bytes if path in REPORT_PATHS else SMALL_BODY_BYTES
        if path == ADVISORY_PATH:
            limit = self.advisory_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await error_response(413, _too_large(limit))(scope, receive, send)
                return
        body = _Body(receive, limit, self.timeout, self.min_rate)
        await self.app(scope, body.receive, send)
