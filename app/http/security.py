"""Response headers every answer carries: ``X-Content-Type-Options: nosniff`` (a report's
strings served as an SBOM must never be sniffed into HTML), and ``Cache-Control: no-store`` on
API answers, which carry inventory data and, from ``POST /api/v1/tokens``, a token's secret.

A plain ASGI middleware: it only edits the response's start message, so streamed answers stay
streamed. The ``server`` header is uvicorn's, turned off where uvicorn is configured
(`app.http.server.uvicorn_options`).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: paths whose answers may be cached: the documentation pages' scripts and styles
_CACHEABLE = ("/docs/static/",)


class SecurityHeaders:
    """Adds the security headers to every HTTP answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        no_store = not str(scope.get("path", "")).startswith(_CACHEABLE)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers.append((b"x-content-type-options", b"nosniff"))
                if no_store and b"cache-control" not in names:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
