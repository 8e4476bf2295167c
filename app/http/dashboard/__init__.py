"""The security dashboard: server-rendered pages (Jinja2, autoescaped) on the service's domain
functions, behind a session cookie started with a service token at ``/login``.

`install_dashboard(app, settings)` adds the pages, their stylesheet under ``/static/`` and the
error pages: an error raised by a page (400 for a bad filter, 403 for a missing scope or CSRF
token, 404, 503) is answered as HTML, the API keeps its JSON errors. Security model and pages:
docs/dashboard.md.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from app.domain.oidc import OpenIdProvider
from app.http.dashboard import (
    admin,
    advisories,
    assets,
    auth,
    compliance,
    decisions,
    drift,
    libraries,
    overview,
    policies,
    proposals,
    sso,
    triage,
)
from app.http.dashboard.auth import LoginRequired
from app.http.dashboard.paging import query_string
from app.http.dashboard.sessions import Signer
from app.http.dashboard.templating import render
from app.settings import Settings

log = logging.getLogger(__name__)

STATIC_URL = "/static"
_STATIC_DIR = Path(__file__).parent / "static"
TAG = "dashboard"

#: the dashboard's pages; the modules of later pages include their routers here
router = APIRouter(tags=[TAG], include_in_schema=False, default_response_class=HTMLResponse)
router.include_router(auth.router)
router.include_router(sso.router)
router.include_router(overview.router)
router.include_router(assets.router)
router.include_router(libraries.router)
router.include_router(drift.router)
router.include_router(advisories.router)
router.include_router(triage.router)
router.include_router(compliance.router)
router.include_router(decisions.router)
router.include_router(policies.router)
router.include_router(admin.router)
router.include_router(proposals.router)


class PageErrors:
    """Renders the errors of dashboard routes (endpoints defined in this package) as pages."""

    def applies(self, request: Request) -> bool:
        """Whether the request was routed to a dashboard page, or is a browser's request for a
        path nothing serves outside the API (a mistyped page: a page, not JSON)."""
        route = request.scope.get("route")
        if route is None:
            return not request.url.path.startswith("/api/") and "text/html" in request.headers.get(
                "accept", ""
            )
        endpoint = getattr(route, "endpoint", None)
        return str(getattr(endpoint, "__module__", "")).startswith(__name__ + ".")

    def render(
        self, request: Request, status: int, message: str, headers: Mapping[str, str] | None
    ) -> Response:
        """The error page (the message is text, escaped like every value)."""
        extra = {k: v for k, v in (headers or {}).items() if k.lower() != "www-authenticate"}
        return render(
            request,
            "error.html",
            {"status": status, "message": message},
            status=status,
            headers=extra,
        )


def _signing_key(settings: Settings) -> str:
    if settings.secret_key:
        return settings.secret_key
    log.warning(
        "GPUPROV_SECRET_KEY is not set: dashboard sessions are signed with a random key of this "
        "process and end when it restarts"
    )
    return secrets.token_hex(32)


def install_dashboard(app: FastAPI, settings: Settings) -> None:
    """Serve the dashboard's pages, stylesheet and error pages on ``app``."""
    app.state.dashboard_signer = Signer(_signing_key(settings))
    app.state.page_errors = PageErrors()
    app.state.oidc = OpenIdProvider(settings) if settings.oidc_enabled else None
    if settings.oidc_enabled and not settings.oidc_roles:
        # not an error: admins may map groups on Admin → Group mappings; until one is stored,
        # every sign-in is refused (no default role)
        log.warning(
            "GPUPROV_OIDC_ROLES maps no group to a role: only the group mappings stored on "
            "Admin → Group mappings give access to people who sign in with %s (none: nobody)",
            settings.oidc_issuer,
        )
    app.state.overview_cache = overview.FiguresCache(settings.dashboard_cache_seconds)

    async def login_required(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginRequired)
        query = {"next": exc.next_url if exc.next_url != "/" else None}
        if exc.provider:
            return RedirectResponse(
                "/login/sso" + (f"?{query_string(query)}" if any(query.values()) else ""),
                status_code=303,
            )
        query["ended"] = exc.ended.value if exc.ended else None
        target = "/login" + (f"?{query_string(query)}" if any(query.values()) else "")
        return RedirectResponse(target, status_code=303)

    app.add_exception_handler(LoginRequired, login_required)

    # browsers ask every site for /favicon.ico: a 404 there is a console error on each page
    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(
            _STATIC_DIR / "favicon.ico",
            media_type="image/vnd.microsoft.icon",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    app.mount(STATIC_URL, StaticFiles(directory=_STATIC_DIR), name="dashboard-static")
    app.include_router(router)
