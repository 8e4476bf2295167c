"""Response headers every answer carries, errors, 404s, documentation pages and the dashboard
included:

- ``X-Content-Type-Options: nosniff`` (a report's strings served as an SBOM must never be
  sniffed into HTML), ``X-Frame-Options: DENY`` and ``Referrer-Policy: no-referrer``;
- ``Content-Security-Policy``: ``default-src 'none'; frame-ancestors 'none'`` on API answers
  (JSON, CSV and text load nothing), and a policy that lets the offline Swagger UI and ReDoc
  pages load their own scripts on ``/docs`` and ``/redoc``; an answer that sets its own policy
  (the dashboard's pages) keeps it;
- ``Cache-Control: no-store`` on every answer but static files (the documentation's and the
  dashboard's, and ``/favicon.ico``): API answers
  carry inventory data and, from ``POST /api/v1/tokens``, a token's secret;
- ``Strict-Transport-Security`` when the request came over HTTPS.

A plain ASGI middleware: it only edits the response's start message, so streamed answers stay
streamed. The ``server`` header is uvicorn's, turned off where uvicorn is configured
(`app.http.server.uvicorn_options`).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: paths whose answers may be cached: the documentation's and the dashboard's static files
_CACHEABLE = ("/docs/static/", "/static/", "/favicon.ico")
#: the documentation pages: FastAPI's Swagger UI page starts the UI with an inline script
_DOC_PAGES = ("/docs", "/redoc", "/docs/oauth2-redirect")

API_POLICY = b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
DOCS_POLICY = (
    b"default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    b"img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
    b"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_ALWAYS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
_HSTS = (b"strict-transport-security", b"max-age=31536000")


class SecurityHeaders:
    """Adds the security headers to every HTTP answer (keeping any the answer set itself)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        no_store = not path.startswith(_CACHEABLE)
        docs = path in _DOC_PAGES or path.startswith("/docs/static/")
        policy = DOCS_POLICY if docs else API_POLICY
        extra = list(_ALWAYS)
        extra.append((b"content-security-policy", policy))
        if scope.get("scheme") == "https":
            extra.append(_HSTS)
        if no_store:
            extra.append((b"cache-control", b"no-store"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in extra if name not in names]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
