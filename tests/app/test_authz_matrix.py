"""The authorization matrix: every route the app serves (enumerated from ``app.routes``, so a new
route fails here until it is classified) × every scope × every token state (valid, revoked,
expired, bound to other assets), and with no token, on both databases."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from app.clock import utcnow
from app.domain import users
from app.domain.audit import cli_actor
from app.domain.oidc import Role
from app.domain.teams import assign_labels, check_team, put_team
from app.domain.tokens import Scope, create_token
from app.http.dashboard.sessions import PERSON_COOKIE
from app.http.observe import served_routes
from app.main import create_app
from app.settings import Settings
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.pages import login
from tests.app.test_auth import Walk
from tests.scanner.advisories import documents as advisory_documents

#: the issuer of the scoped person's session (never contacted: the session is made directly)
_ISSUER = "http://127.0.0.1:9/op"

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


# -- the scoped dimension: a team's token and a team's signed-in person --------------------

OTHER = "registry.example.com/secret/other:9"
_OTHER_DIGEST = boms.gpuprov_bom(name=OTHER)["metadata"]["component"]["version"]
#: values a page may take for each path parameter of the dashboard's pages
_PAGE_PARAMS = {"control_id": "CIS-2.5", "name": "prod", "version": "1", "cve": "CVE-2026-1111"}
_PAGE_QUERIES = {
    "/libraries/where-used": {"family": "cudnn"},
    "/libraries/search": {"q": "libcudnn*"},
    "/policies/prod/diff": {"from": "1", "to": "1"},
}


class ScopedFleet:
    """The walk's fleet (its asset is team ml's) plus another team's image, both gated."""

    def __init__(self, service: Service, post_report: Callable[..., Any]) -> None:
        self.walk = Walk(service, post_report)
        self.service = service
        other = post_report(boms.encode(boms.gpuprov_bom(name=OTHER)))
        assert other.status_code == 201, other.text
        self.other_id = other.json()["asset_id"]
        with service.db.transaction(write=True) as session:
            for team in ("ml", "other"):
                put_team(session, team, check_team({"labels": {"team": team}}), cli_actor())
            put_team(
                session,
                "ml",
                check_team({"labels": {"team": "ml"}, "groups": ["ml-eng"]}),
                cli_actor(),
            )
            assign_labels(session, self.walk.asset_id, {"team": "ml"}, cli_actor())
            assign_labels(session, self.other_id, {"team": "other"}, cli_actor())
        admin = auth(service.token("admin", name="gate-admin"))
        # an advisory for the advisory pages (a cuDNN wheel's: neither team's asset holds it)
        posted = service.client.post(
            "/api/v1/advisories",
            content=advisory_documents.encode(advisory_documents.osv()),
            headers={**admin, "Content-Type": "application/json"},
        )
        assert posted.status_code in (200, 201), posted.text
        self.decisions = {}
        for digest in (self.walk.digest, _OTHER_DIGEST):
            gated = service.client.post(
                "/api/v1/gate", json={"policy": "prod", "image": digest}, headers=admin
            )
            assert gated.status_code == 200, gated.text
            self.decisions[digest] = gated.json()["decision_id"]

    def leaks(self, text: str) -> list[str]:
        """What of the other team's image a body shows: its name (a page may break it with
        ``<wbr>``), digest, or a link to it or its decision."""
        text = text.replace("<wbr>", "")
        marks = (
            OTHER,
            _OTHER_DIGEST.removeprefix("sha256:"),
            f'/assets/{self.other_id}"',
            f'/decisions/{self.decisions[_OTHER_DIGEST]}"',
        )
        return [s for s in marks if s in text]

    def team_token(self, *scopes: str) -> str:
        with self.service.db.transaction(write=True) as session:
            return create_token(session, "ml-token", list(scopes), team="ml").secret


def test_scoped_token_walks_every_api_route_and_sees_only_its_team(
    service: Service, post_report: Callable[..., Any]
) -> None:
    fleet = ScopedFleet(service, post_report)
    app: Any = service.client.app
    found, _ = classify(app)
    token = fleet.team_token("inventory:read", "gate", "report:write", "triage")
    failures = []
    walked = 0
    for (method, path), kind in sorted(found.items()):
        if not kind.startswith("scope:"):
            continue
        needed = kind.removeprefix("scope:")
        answer = fleet.walk.request(method.lower(), path, token)
        status = answer.status_code
        if needed == Scope.ADMIN.value:
            if status != 403:
                failures.append(f"{method} {path}: an admin route answered {status}")
            continue
        if needed == Scope.POLICY_WRITE.value:
            # a policy gates every team's images: a team's member reads policies, never writes
            message = answer.json()["error"]["message"] if status == 403 else ""
            if "policies are global" not in message or "team ml" not in message:
                failures.append(f"{method} {path}: a policy write answered {status} {message}")
            continue
        if path == "/metrics":  # the whole fleet's counters: not a team's
            if status != 403:
                failures.append(f"{method} {path}: answered {status}")
            continue
        walked += 1
        if status not in (200, 201):
            failures.append(f"{method} {path}: {status} {answer.text[:200]}")
        if leaks := fleet.leaks(answer.text):
            failures.append(f"{method} {path} shows the other team's {leaks}")
        if "{asset_id}" in path and method == "GET":
            # the other team's asset: not found, exactly as an id no asset has
            other = fleet.walk.request(
                "get", path.replace("{asset_id}", str(fleet.other_id)), token
            )
            if other.status_code != 404 or fleet.leaks(other.text):
                failures.append(f"{method} {path} of the other asset: {other.status_code}")
    assert walked >= 20
    headers = auth(token)
    client = service.client
    gate = client.post(
        "/api/v1/gate", json={"policy": "prod", "image": _OTHER_DIGEST}, headers=headers
    )
    diff = client.get(
        "/api/v1/gate/diff",
        params={"from": fleet.walk.digest, "to": _OTHER_DIGEST},
        headers=headers,
    )
    for what, answer in (("gate", gate), ("gate diff", diff)):
        if answer.status_code != 404:
            failures.append(f"{what} of the other image: {answer.status_code}")
    assert not failures, "\n".join(failures)
    # the walk can see a leak: an admin's answers name the other image
    admin = auth(service.token("admin", name="control"))
    assert fleet.leaks(client.get("/api/v1/assets", headers=admin).text)
    assert fleet.leaks(client.get("/api/v1/gate/decisions", headers=admin).text)


def _walk_pages(fleet: ScopedFleet, client: TestClient) -> list[str]:
    """Every dashboard page a reader may open, as ``client`` (signed in): what went wrong."""
    app: Any = client.app
    found, _ = classify(app)
    failures = []
    opened = 0
    for (method, path), kind in sorted(found.items()):
        if kind != "session" or method != "GET" or path.startswith(("/login", "/logout")):
            continue
        url = path.replace("{asset_id}", str(fleet.walk.asset_id))
        url = url.replace("{decision_id}", str(fleet.decisions[fleet.walk.digest]))
        for key, value in _PAGE_PARAMS.items():
            url = url.replace("{" + key + "}", value)
        answer = client.get(url, params=_PAGE_QUERIES.get(url, {}), follow_redirects=False)
        if path.startswith("/admin"):
            if answer.status_code != 403:
                failures.append(f"{url}: an admin page answered {answer.status_code}")
            continue
        opened += 1
        if answer.status_code != 200:
            failures.append(f"{url}: {answer.status_code} {answer.text[:200]}")
        if leaks := fleet.leaks(answer.text):
            failures.append(f"{url} shows the other team's {leaks}")
    assert opened >= 15, opened
    for url in (
        f"/assets/{fleet.other_id}",
        f"/assets/{fleet.other_id}/sbom",
        f"/decisions/{fleet.decisions[_OTHER_DIGEST]}",
    ):
        answer = client.get(url, follow_redirects=False)
        if answer.status_code != 404 or fleet.leaks(answer.text):
            failures.append(f"{url} of the other team: {answer.status_code}")
    return failures


def test_scoped_token_session_walks_every_page_and_sees_only_its_team(
    service: Service, post_report: Callable[..., Any]
) -> None:
    fleet = ScopedFleet(service, post_report)
    client = TestClient(service.client.app)
    assert login(client, fleet.team_token("inventory:read")).status_code == 303
    assert _walk_pages(fleet, client) == []
    menu = client.get("/").text
    assert "ml-token" in menu and "team ml" in menu
    # the walk can see a leak: an admin's pages name the other image
    admin = TestClient(service.client.app)
    assert login(admin, service.token("admin", name="control")).status_code == 303
    assert fleet.leaks(admin.get("/assets").text) and fleet.leaks(admin.get("/decisions").text)


def test_scoped_person_walks_every_page_and_sees_only_their_team(
    service: Service, post_report: Callable[..., Any]
) -> None:
    fleet = ScopedFleet(service, post_report)
    settings = Settings(
        database_url=service.url,
        environment="test",
        dashboard_cache_seconds=0,
        secret_key="scoped-person-tests-0123456789",
        allow_loopback_issuers=True,
        oidc_issuer=_ISSUER,
        oidc_client_id="gpuprov",
        oidc_redirect_url="http://127.0.0.1/login/sso/callback",
        oidc_roles={"viewers": "viewer"},
    )
    subject = f"person-{uuid.uuid4().hex}"
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        with service.db.transaction(write=True) as session:
            started = users.sign_in(
                session,
                _ISSUER,
                {"sub": subject, "email": "ml-viewer@example.com", "name": "Ml Viewer"},
                Role.VIEWER,
                "id-token",
                utcnow(),
                3600,
                groups=["viewers", "ml-eng"],
            )
        client.cookies.set(PERSON_COOKIE, started.cookie)
        assert _walk_pages(fleet, client) == []
        menu = client.get("/").text
        assert "ml-viewer@example.com" in menu and "viewer" in menu and "team ml" in menu
