"""Per-request bookkeeping, outermost of the middlewares: the request id (a client's
``X-Request-ID`` when it is 1-128 characters of letters, digits and ``._:-``, a new one
otherwise; answered in ``X-Request-ID`` and carried by every log line of the request), one
access log line (method, route, status, duration: never the query string or a header), and the
HTTP metrics.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

import fastapi.routing
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.http.metrics import Metrics
from app.logs import REQUEST_ID

access_log = logging.getLogger("app.access")

_VALID_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


def request_id(scope: Scope) -> str:
    """The client's request id when it is acceptable, else a new one."""
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id" and _VALID_ID.fullmatch(value):
            return bytes(value).decode()
    return uuid.uuid4().hex


def served_routes(routes: Any) -> list[Any]:
    """Every route served, those of included routers too (FastAPI 0.165 includes routers
    lazily: the app's ``routes`` then hold routers, each route with its path less the prefix)."""
    flatten = getattr(fastapi.routing, "iter_route_contexts", None)
    return list(flatten(routes)) if flatten else list(routes)


class RouteTemplates:
    """The full path template of each route object (``/api/v1/assets/{asset_id}``), so metrics
    stay bounded whatever the paths requested."""

    def __init__(self) -> None:
        self._paths: dict[int, str] = {}

    def __call__(self, scope: Scope) -> str:
        """The template of the route that answered; ``unmatched`` for a path none serves."""
        route = scope.get("route")
        if route is None:  # a mount's files (its path is the root path), or no route
            mount = scope.get("root_path")
            return f"{mount}/{{path}}" if mount else "unmatched"
        path = self._paths.get(id(route))
        if path is None:  # routes can be added after the first request: look again
            app = scope.get("app")
            for context in served_routes(getattr(app, "routes", [])):
                original = getattr(context, "original_route", context)
                if isinstance(context.path, str):
                    self._paths[id(original)] = context.path
            path = self._paths.setdefault(id(route), str(getattr(route, "path", "unmatched")))
        return path


class RequestContext:
    """Request id, access log line and HTTP metrics for every HTTP request."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        self.route_of = RouteTemplates()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope)
        token = REQUEST_ID.set(rid)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [*message.get("headers", []), (b"x-request-id", rid.encode())]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = self.route_of(scope)
            method = str(scope.get("method", ""))
            self.metrics.observe_request(method, route, status, elapsed)
            client = scope.get("client")
            access_log.info(
                "%s %s %d %.1f ms",
                method,
                route,
                status,
                elapsed * 1000,
                extra={
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                    "client": client[0] if client else "",
                },
            )
            REQUEST_ID.reset(token)
