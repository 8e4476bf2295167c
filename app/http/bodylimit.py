"""A ceiling on every request body, before any endpoint reads it: the operations that take a
report (``/reports``, ``/gate``, ``/catalogs``) up to ``GPUPROV_MAX_REPORT_BYTES``, every other
(token requests, policies, dashboard forms) up to 1 MiB. A declared ``Content-Length`` over the
ceiling is answered 413 at once; a body streamed without one is cut off at the ceiling with a
413. Endpoints keep their own, smaller limits (a promotion policy's 256 KiB)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.http.errors import error_response

#: the ceiling of bodies that are not reports
SMALL_BODY_BYTES = 1024 * 1024
#: operations whose bodies are reports or as large (their endpoints check the exact limit)
REPORT_PATHS = frozenset({"/api/v1/reports", "/api/v1/gate", "/api/v1/catalogs"})


class BodyLimit:
    """Refuses (413) request bodies over the path's ceiling."""

    def __init__(self, app: ASGIApp, report_bytes: int) -> None:
        self.app = app
        self.report_bytes = report_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        limit = self.report_bytes if path in REPORT_PATHS else SMALL_BODY_BYTES
        message = f"the request body is larger than the limit of {limit} bytes"
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await error_response(413, message)(scope, receive, send)
                return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            event = await receive()
            if event["type"] == "http.request":
                received += len(event.get("body", b""))
                if received > limit:
                    raise HTTPException(413, message)
            return event

        await self.app(scope, counting_receive, send)
