"""The authorization matrix: every route the app serves (enumerated from ``app.routes``, so a new
route fails here until it is classified) × every scope × every token state (valid, revoked,
expired, bound to other assets), and with no token, on both databases."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from app.clock import utcnow
from app.domain.tokens import Scope, create_token
from app.http.observe import served_routes
from tests.app.conftest import Service
from tests.app.test_auth import Walk

#: served without a token
PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/favicon.ico")}
#: the API documentation (no data: the OpenAPI document and the pages that render it)
DOCS = {
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/redoc"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/docs/static/redoc.standalone.js"),
}
#: modules whose routes authenticate by the dashboard's session cookie, not a bearer token
SESSION_MODULES = ("app.http.dashboard",)
STATES = ("valid", "revoked", "expired", "bound")


def classify(app: Any) -> tuple[dict[tuple[str, str], str], list[str]]:
    """Each (method, path) the app serves with its class: ``scope:S``, ``public``, ``docs``,
    ``session`` or ``static``; and the routes no rule covers."""
    document = app.openapi()["paths"]
    found: dict[tuple[str, str], str] = {}
    unclassified: list[str] = []
    for route in served_routes(app.routes):
        original = getattr(route, "original_route", route)
        if isinstance(original, Mount):
            # packaged files (documentation scripts, the dashboard's stylesheet): no data
            if isinstance(original.app, StaticFiles):
                found[("GET", route.path)] = "static"
            else:
                unclassified.append(f"mount {route.path}")
            continue
        if route.methods is None or route.path is None:
            unclassified.append(f"{type(route).__name__} {route.path}")
            continue
        for method in sorted(route.methods or ()):
            if method == "HEAD":
                continue
            key = (method, route.path)
            operation = document.get(route.path, {}).get(method.lower())
            module = getattr(route.endpoint, "__module__", "")
            if key in PUBLIC:
                found[key] = "public"
            elif key in DOCS:
                found[key] = "docs"
            elif module.startswith(SESSION_MODULES):
                found[key] = "session"
            elif operation is not None:
                scopes = [s for r in operation.get("security", []) for s in r.get("HTTPBearer", [])]
                if len(scopes) == 1 and scopes[0] in {s.value for s in Scope}:
                    found[key] = f"scope:{scopes[0]}"
                else:
                    unclassified.append(f"{method} {route.path}: security {scopes}")
            else:
                unclassified.append(f"{method} {route.path}: not in the OpenAPI document")
    return found, unclassified


def test_every_route_is_classified(service: Service) -> None:
    found, unclassified = classify(service.client.app)
    assert not unclassified, "routes nobody classified for authorization: " + ", ".join(
        unclassified
    )
    scoped = [k for k, v in found.items() if v.startswith("scope:")]
    assert len(scoped) >= 30
    assert ("GET", "/api/v1/audit") in scoped and ("GET", "/metrics") in scoped


def _token(service: Service, scopes: list[str], state: str) -> str:
    assets = ["elsewhere-*"] if state == "bound" else None
    if state == "bound" and Scope.REPORT_WRITE.value not in scopes:
        scopes = [*scopes, Scope.REPORT_WRITE.value]
    with service.db.transaction(write=True) as session:
        new = create_token(session, f"matrix-{state}", scopes, assets)
        if state == "revoked":
            new.token.revoked_at = utcnow()
        elif state == "expired":
            new.token.expires_at = utcnow() - timedelta(seconds=1)
        return new.secret


def _expected(needed: str, scopes: set[str], state: str, method: str, path: str) -> str:
    if state in ("revoked", "expired"):
        return "401"
    if Scope.ADMIN.value not in scopes and needed not in scopes:
        return "403"
    if state == "bound" and (method, path) == ("POST", "/api/v1/reports"):
        return "403-asset"  # the walk's report is for another asset than the token's patterns
    return "2xx"


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("scope", [s.value for s in Scope])
def test_matrix(service: Service, post_report: Callable[..., Any], scope: str, state: str) -> None:
    app: Any = service.client.app
    walk = Walk(service, post_report)
    token = _token(service, [scope], state)
    scopes = {scope} | ({Scope.REPORT_WRITE.value} if state == "bound" else set())
    found, _ = classify(app)
    failures = []
    for (method, path), kind in sorted(found.items()):
        if not kind.startswith("scope:"):
            continue
        app.state.auth_limiter.reset()  # this test fails authentication on purpose, often
        answer = walk.request(method.lower(), path, token)
        expected = _expected(kind.removeprefix("scope:"), scopes, state, method, path)
        status = answer.status_code
        message = answer.json()["error"]["message"] if status >= 400 else ""
        ok = {
            "401": status == 401
            and answer.headers.get("www-authenticate") == "Bearer"
            and ("expired" in message if state == "expired" else "revoked" in message),
            "403": status == 403 and kind.removeprefix("scope:") in message,
            "403-asset": status == 403 and "may not report for asset" in message,
            "2xx": status in (200, 201),
        }[expected]
        if not ok:
            failures.append(f"{method} {path}: expected {expected}, got {status} {message}")
    assert not failures, "\n".join(failures)


def test_without_token_and_public_routes(service: Service) -> None:
    app: Any = service.client.app
    found, _ = classify(app)
    for (method, path), kind in sorted(found.items()):
        if kind == "static" or "{" in path:
            continue
        answer = service.client.request(method, path)
        if kind.startswith("scope:"):
            assert answer.status_code == 401, (method, path)
            assert answer.headers["www-authenticate"] == "Bearer"
        elif kind in ("public", "docs"):
            assert answer.status_code == 200, (method, path)
        elif path.startswith("/login/sso"):
            # single sign-on is not configured in this service: its routes are not there
            assert answer.status_code == 404, (method, path)
        elif kind == "session" and method == "GET":
            # dashboard pages: never data without a session (a redirect to the login page, or
            # the login page itself)
            assert answer.status_code in (200, 303, 307, 401, 403), (method, path)
            if answer.status_code == 200:
                assert "login" in path or "token" in answer.text.lower(), (method, path)
