"""Single sign-on for people against a real OpenID Provider (oidc-provider under node, on
loopback) and hostile answers from a fake one: users by (iss, sub), roles from groups, state,
nonce, PKCE, RFC 9207 ``iss``, ID token checks, server-side sessions and logout.

The service runs behind uvicorn (its callback calls the provider while the test's client plays
the browser, following redirects itself), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, select, update

from app.clock import utcnow
from app.main import create_app
from app.settings import Settings
from app.storage.tables import AppUser, AuditEvent, WebSession
from tests.app.conftest import LiveServer, free_port
from tests.fixtures.ci_issuer import SigningKey
from tests.fixtures.oidc import (
    CLIENT_ID,
    CLIENT_SECRET,
    FakeProvider,
    RealProvider,
    authorization_params,
    modules_ready,
    sign_in_at_provider,
)

SECRET_KEY = "sso-tests-secret-key-0123456789abcdef"
ROLES = {"gpuprov-admins": "admin", "gpuprov-viewers": "viewer", "gpuprov-analysts": "analyst"}
USERS: dict[str, dict[str, Any]] = {
    "alice": {"email": "alice@example.com", "name": "Alice", "groups": ["gpuprov-admins"]},
    "bob": {"email": "bob@example.com", "name": "Bob", "groups": ["staff", "gpuprov-viewers"]},
    "carol": {"email": "carol@example.com", "name": "Carol", "groups": ["staff"]},
    # another account of the provider, claiming Alice's email: a different person
    "mallory": {"email": "alice@example.com", "name": "Mallory", "groups": ["gpuprov-viewers"]},
    "dave": {"email": "dave@example.com", "name": "Dave", "groups": ["gpuprov-viewers"]},
}
_PORTS = {"sqlite": free_port(), "postgresql": free_port()}
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def sso_settings(database_url: str, issuer: str, app_url: str, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "environment": "test",
        "secret_key": SECRET_KEY,
        "allow_loopback_issuers": True,
        "oidc_issuer": issuer,
        "oidc_client_id": CLIENT_ID,
        "oidc_client_secret": CLIENT_SECRET,
        "oidc_redirect_url": f"{app_url}/login/sso/callback",
        "oidc_roles": ROLES,
        "oidc_provider_name": "Test IdP",
        # the hostile cases fail on purpose, many times over with --count
        "auth_failure_limit": 1_000_000,
        **extra,
    }
    return Settings(**values)


@pytest.fixture(scope="session")
def real_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealProvider]:
    """oidc-provider on loopback, knowing both backends' services as redirect URIs."""
    if not modules_ready():
        pytest.fail("oidc-provider is not installed: run `make oidc-provider` (npm ci)")
    urls = [f"http://127.0.0.1:{port}" for port in _PORTS.values()]
    with RealProvider(tmp_path_factory.mktemp("op"), free_port(), urls) as provider:
        provider.set_users(USERS)
        yield provider


class Site:
    """The service signed in against the real provider, on one backend."""

    def __init__(self, url: str, app: Any, provider: RealProvider) -> None:
        self.url = url
        self.app = app
        self.provider = provider

    def browser(self) -> httpx.Client:
        """A fresh browser: its own cookies, redirects followed by the test."""
        return httpx.Client(timeout=30, follow_redirects=False)

    def sign_in(self, client: httpx.Client, login: str, next_url: str = "") -> httpx.Response:
        """Sign in as `login` at the provider and follow its answer to the callback."""
        return client.get(sign_in_at_provider(client, self.url, login, next_url))

    def user(self, subject: str) -> AppUser | None:
        with self.app.state.db.transaction() as session:
            return session.scalars(
                select(AppUser).where(
                    AppUser.issuer == self.provider.issuer, AppUser.subject == subject
                )
            ).first()


@pytest.fixture(scope="session")
def _site(database_url: str, real_provider: RealProvider) -> Iterator[Site]:
    backend = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    port = _PORTS[backend]
    url = f"http://127.0.0.1:{port}"
    app = create_app(sso_settings(database_url, real_provider.issuer, url))
    with LiveServer(app.state.settings, port, app):
        yield Site(url, app, real_provider)


@pytest.fixture
def site(_site: Site) -> Site:
    _site.provider.set_users(USERS)
    return _site


def test_sign_in_creates_the_user_by_issuer_and_subject_with_the_groups_role(site: Site) -> None:
    with site.browser() as client:
        answer = site.sign_in(client, "alice", "/assets")
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/assets"
        cookie = answer.headers["set-cookie"]
        assert "gpuprov_user=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
        assert client.get(f"{site.url}/admin").status_code == 200
        page = client.get(f"{site.url}/assets")
        assert page.status_code == 200 and "alice@example.com · admin" in page.text
    user = site.user("alice")
    assert user is not None and user.email == "alice@example.com" and user.role == "admin"


def test_a_viewer_reads_but_is_no_admin(site: Site) -> None:
    with site.browser() as client:
        assert site.sign_in(client, "bob").status_code == 303
        assert client.get(f"{site.url}/assets").status_code == 200
        assert client.get(f"{site.url}/admin").status_code == 403


def test_no_mapped_group_means_no_access_and_no_session(site: Site) -> None:
    with site.browser() as client:
        answer = site.sign_in(client, "carol")
        assert answer.status_code == 403
        assert "You have no access to gpuprov" in answer.text
        assert "gpuprov_user=" not in answer.headers.get("set-cookie", "")
        assert client.get(f"{site.url}/assets").status_code == 303
    user = site.user("carol")
    assert user is not None and user.role is None


def test_a_new_subject_with_a_known_email_is_a_new_user(site: Site) -> None:
    with site.browser() as client:
        assert site.sign_in(client, "alice").status_code == 303
    with site.browser() as client:
        assert site.sign_in(client, "mallory").status_code == 303
        # Alice's email, yet Mallory's role: a viewer, not Alice's admin
        assert client.get(f"{site.url}/admin").status_code == 403
    alice, mallory = site.user("alice"), site.user("mallory")
    assert alice is not None and mallory is not None and alice.id != mallory.id
    assert alice.role == "admin" and mallory.role == "viewer"


def test_a_state_works_once(site: Site) -> None:
    with site.browser() as client:
        callback = sign_in_at_provider(client, site.url, "bob")
        assert client.get(callback).status_code == 303
        replayed = client.get(callback)
        assert replayed.status_code == 400
        assert "expired or was already used" in replayed.text


def test_a_callback_in_another_browser_is_refused(site: Site) -> None:
    with site.browser() as victim, site.browser() as attacker:
        callback = sign_in_at_provider(attacker, site.url, "bob")
        # login CSRF: the attacker's callback in the victim's browser signs nobody in
        answer = victim.get(callback)
        assert answer.status_code == 400
        assert "gpuprov_user=" not in answer.headers.get("set-cookie", "")


@pytest.mark.parametrize(
    "target",
    ["https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"],
)
def test_next_never_leaves_the_site(site: Site, target: str) -> None:
    with site.browser() as client:
        answer = client.get(f"{site.url}/login/sso", params={"next": target})
        assert answer.status_code == 400
        assert "next must be a local path" in answer.text


def test_next_to_the_sign_in_itself_lands_on_the_overview(site: Site) -> None:
    with site.browser() as client:
        answer = site.sign_in(client, "bob", "/login/sso%3Fnext%3D%2Flogin%2Fsso")
        assert answer.status_code == 303 and answer.headers["location"] == "/"


def test_the_authorization_request_uses_pkce_s256_and_the_code_needs_the_verifier(
    site: Site,
) -> None:
    with site.browser() as client:
        start = client.get(f"{site.url}/login/sso")
        params = authorization_params(start.headers["location"])
        assert params["code_challenge_method"] == "S256"
        assert len(params["code_challenge"]) == 43 and params["nonce"] and params["state"]
        assert params["response_type"] == "code" and params["client_id"] == CLIENT_ID
        callback = sign_in_at_provider(client, site.url, "bob")
        code = authorization_params(callback)["code"]
        # a stolen code without the verifier is worth nothing at the provider
        stolen = httpx.post(
            f"{site.provider.issuer}/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": f"{site.url}/login/sso/callback",
            },
            auth=(CLIENT_ID, CLIENT_SECRET),
        )
        assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"


def test_the_callback_checks_rfc9207_iss(site: Site) -> None:
    with site.browser() as client:
        callback = sign_in_at_provider(client, site.url, "bob")
        assert authorization_params(callback)["iss"] == site.provider.issuer
        forged = callback.replace("iss=", "iss=x")
        answer = client.get(forged)
        assert answer.status_code == 401 and "not " in answer.text
    with site.browser() as client:
        callback = sign_in_at_provider(client, site.url, "bob")
        # the provider promises iss (discovery): an answer without it is refused
        stripped = re.sub(r"&?iss=[^&]*", "", callback)
        answer = client.get(stripped)
        assert answer.status_code == 401 and "no iss parameter" in answer.text


def test_removing_the_group_removes_access_at_the_next_sign_in(site: Site) -> None:
    with site.browser() as client:
        assert site.sign_in(client, "dave").status_code == 303
        assert client.get(f"{site.url}/assets").status_code == 200
        site.provider.set_users({**USERS, "dave": {**USERS["dave"], "groups": ["staff"]}})
        assert site.sign_in(client, "dave").status_code == 403
        # and the session that was open ended with it
        assert client.get(f"{site.url}/assets").status_code == 303
    user = site.user("dave")
    assert user is not None and user.role is None


def test_a_session_due_for_refresh_asks_the_provider_again(site: Site) -> None:
    with site.browser() as client:
        assert site.sign_in(client, "dave").status_code == 303
        # as if the refresh interval had passed: the next page goes back to the provider
        with site.app.state.db.transaction(write=True) as session:
            session.execute(update(WebSession).values(verified_at=utcnow() - timedelta(hours=1)))
        answer = client.get(f"{site.url}/assets")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/login/sso?next=%2Fassets"
        site.provider.set_users({**USERS, "dave": {**USERS["dave"], "groups": []}})
        # the provider's own session signs Dave in again without a form; no group: no access
        location = f"{site.url}{answer.headers['location']}"
        for _ in range(6):
            answer = client.get(location)
            if answer.status_code != 303 and answer.status_code != 302:
                break
            location = httpx.URL(location).join(answer.headers["location"]).__str__()
        assert answer.status_code == 403 and "no access" in answer.text
        assert client.get(f"{site.url}/assets").status_code == 303


def test_logout_is_a_csrf_protected_post_that_deletes_the_session(site: Site) -> None:
    with site.browser() as client:
        assert site.sign_in(client, "bob").status_code == 303
        page = client.get(f"{site.url}/assets")
        match = _CSRF.search(page.text)
        assert match is not None
        assert client.post(f"{site.url}/logout", data={"csrf_token": "wrong"}).status_code == 403
        cookie = client.cookies["gpuprov_user"]
        answer = client.post(f"{site.url}/logout", data={"csrf_token": match.group(1)})
        # RP-initiated logout: the page sends the browser on to the provider's end_session
        assert answer.status_code == 200
        # the cookie is deleted with the attributes it was set with
        [deletion] = [c for c in answer.headers.get_list("set-cookie") if "gpuprov_user=" in c]
        assert "Max-Age=0" in deletion and "HttpOnly" in deletion and "SameSite=lax" in deletion
        end = re.search(r'content="0;url=([^"]+)"', answer.text)
        assert end is not None
        params = authorization_params(end.group(1).replace("&amp;", "&"))
        assert end.group(1).startswith(f"{site.provider.issuer}/session/end?")
        assert params["post_logout_redirect_uri"] == f"{site.url}/login"
        assert params["id_token_hint"].count(".") == 2
        digest = hashlib.sha256(cookie.encode()).hexdigest()
        with site.app.state.db.transaction() as session:
            assert session.get(WebSession, digest) is None
        # the cookie is worth nothing now, even replayed
        client.cookies.set("gpuprov_user", cookie)
        assert client.get(f"{site.url}/assets").status_code == 303


def test_an_admins_action_is_audited_with_the_person(site: Site) -> None:
    name = f"made-by-sso-{time.time_ns()}"
    with site.browser() as client:
        assert site.sign_in(client, "alice").status_code == 303
        page = client.get(f"{site.url}/admin/tokens")
        match = _CSRF.search(page.text)
        assert match is not None
        form = {"csrf_token": match.group(1), "name": name, "scope_inventory_read": "on"}
        answer = client.post(f"{site.url}/admin/tokens", data=form)
        assert answer.status_code == 200, answer.text
    alice = site.user("alice")
    assert alice is not None
    with site.app.state.db.transaction() as session:
        event = session.scalars(
            select(AuditEvent)
            .where(AuditEvent.action == "token.create")
            .order_by(AuditEvent.id.desc())
        ).first()
    assert event is not None and name in str(event.details)
    assert (event.source, event.actor) == ("web", "alice@example.com")
    assert (event.actor_issuer, event.actor_subject) == (site.provider.issuer, alice.subject)


def test_signing_in_again_rotates_the_session_id(site: Site) -> None:
    with site.browser() as client:
        assert site.sign_in(client, "bob").status_code == 303
        first = client.cookies["gpuprov_user"]
        assert site.sign_in(client, "bob").status_code == 303
        second = client.cookies["gpuprov_user"]
        assert first != second
        client.cookies.set("gpuprov_user", first)
        assert client.get(f"{site.url}/assets").status_code == 303


@pytest.mark.parametrize(
    ("ending", "ended", "said"),
    [
        ("outlived", "session-expired", "a session lasts 8 hours"),
        ("deleted", "session-ended", "signed out, or replaced"),
        ("no role", "access-removed", "no longer give you a role"),
    ],
)
def test_an_ended_sign_in_lands_on_the_login_page_with_the_reason(
    site: Site, ending: str, ended: str, said: str
) -> None:
    with site.browser() as client:
        assert site.sign_in(client, "dave").status_code == 303
        assert client.get(f"{site.url}/assets").status_code == 200
        id_hash = hashlib.sha256(client.cookies["gpuprov_user"].encode()).hexdigest()
        user = site.user("dave")
        assert user is not None
        with site.app.state.db.transaction(write=True) as session:
            if ending == "outlived":
                past = utcnow() - timedelta(seconds=1)
                rows = update(WebSession).where(WebSession.id_hash == id_hash)
                session.execute(rows.values(expires_at=past))
            elif ending == "deleted":
                session.execute(delete(WebSession).where(WebSession.id_hash == id_hash))
            else:
                session.execute(update(AppUser).where(AppUser.id == user.id).values(role=None))
        answer = client.get(f"{site.url}/assets")
        assert answer.status_code == 303
        assert answer.headers["location"] == f"/login?next=%2Fassets&ended={ended}"
        page = client.get(f"{site.url}{answer.headers['location']}")
        assert page.status_code == 200 and said in page.text


# -- hostile answers from a fake provider --------------------------------------------------


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def fake_client(database_url: str, fake: FakeProvider) -> Iterator[TestClient]:
    fake.discovery = {}
    settings = sso_settings(database_url, fake.issuer, "http://127.0.0.1")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client


def _callback(client: TestClient, fake: FakeProvider, token: Any, **query: str) -> Any:
    start = client.get("/login/sso", follow_redirects=False)
    assert start.status_code == 303, start.text
    params = authorization_params(start.headers["location"])
    fake.last_request = params
    minted = token(params["nonce"]) if callable(token) else token
    fake.answer = lambda form: {"access_token": "at", "token_type": "Bearer", "id_token": minted}
    return client.get(
        "/login/sso/callback",
        params={"state": params["state"], "code": "the-code", **query},
        follow_redirects=False,
    )


def test_the_fake_provider_signs_in_and_gets_the_pkce_verifier(
    fake_client: TestClient, fake: FakeProvider
) -> None:
    answer = _callback(fake_client, fake, lambda nonce: fake.id_token(nonce))
    assert answer.status_code == 303, answer.text
    request = fake.token_requests[-1]
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(request["code_verifier"].encode()).digest()
    ).rstrip(b"=")
    assert request["code"] == "the-code" and len(request["code_verifier"]) >= 43
    assert challenge.decode() == fake.last_request["code_challenge"]
    assert fake_client.get("/assets", follow_redirects=False).status_code == 200


HOSTILE = {
    "wrong issuer": (lambda f, n: f.id_token(n, iss="https://other.example"), "another issuer"),
    "wrong audience": (lambda f, n: f.id_token(n, aud="someone-else"), "not for this client"),
    "another azp": (lambda f, n: f.id_token(n, aud=[CLIENT_ID, "x"], azp="x"), "azp"),
    "expired": (lambda f, n: f.id_token(n, issued=time.time() - 900), "expired"),
    "future iat": (lambda f, n: f.id_token(n, issued=time.time() + 600), "future"),
    "issued long ago": (
        lambda f, n: f.id_token(n, issued=time.time() - 7200, lifetime=86400),
        "too long ago",
    ),
    "alg none": (lambda f, n: f.id_token(n, alg="none"), "algorithm 'none'"),
    "unknown key": (lambda f, n: f.id_token(n, key=f.other_key), "not one of the provider's"),
    "another nonce": (lambda f, n: f.id_token("replayed-" + n), "nonce"),
    "no nonce": (lambda f, n: f.id_token(n, nonce=None), "nonce"),
    "no sub": (lambda f, n: f.id_token(n, sub=None), "'sub'"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_id_tokens_are_refused(
    fake_client: TestClient, fake: FakeProvider, case: str
) -> None:
    make, words = HOSTILE[case]
    answer = _callback(fake_client, fake, lambda nonce: make(fake, nonce))
    assert answer.status_code == 401, answer.text
    assert words in html.unescape(answer.text)
    assert "gpuprov_user" not in answer.headers.get("set-cookie", "")


def test_a_token_signed_by_another_key_under_a_known_kid_is_refused(
    fake_client: TestClient, fake: FakeProvider
) -> None:
    def forged(nonce: str) -> str:
        token = fake.id_token(nonce, key=fake.other_key)
        header, payload, signature = token.split(".")
        genuine_header = fake.id_token(nonce).split(".")[0]
        return f"{genuine_header}.{payload}.{signature}"

    answer = _callback(fake_client, fake, forged)
    assert answer.status_code == 401 and "does not verify" in answer.text


def test_an_hmac_token_keyed_with_the_public_key_is_refused(
    fake_client: TestClient, fake: FakeProvider
) -> None:
    import jwt as pyjwt

    def confused(nonce: str) -> str:
        payload = pyjwt.decode(fake.id_token(nonce), options={"verify_signature": False})
        header = {"alg": "HS256", "kid": fake.key.kid, "typ": "JWT"}
        segments = [
            base64.urlsafe_b64encode(__import__("json").dumps(x).encode()).rstrip(b"=")
            for x in (header, payload)
        ]
        import hmac

        public = __import__("json").dumps(fake.key.jwk()).encode()
        mac = hmac.new(public, b".".join(segments), hashlib.sha256).digest()
        return b".".join([*segments, base64.urlsafe_b64encode(mac).rstrip(b"=")]).decode()

    answer = _callback(fake_client, fake, confused)
    assert answer.status_code == 401 and "algorithm 'HS256'" in html.unescape(answer.text)


def test_keys_are_cached_and_fetched_again_for_an_unknown_kid(
    fake_client: TestClient, fake: FakeProvider
) -> None:
    fake.published = [fake.key]
    fetches = fake.jwks_fetches
    for _ in range(2):
        assert _callback(fake_client, fake, lambda n: fake.id_token(n)).status_code == 303
    assert fake.jwks_fetches == fetches + 1  # cached
    # the provider rotates its key: a token under the new kid makes the service look again
    rotated = SigningKey("RS256")
    fake.published = [rotated]
    provider = fake_client.app.state.oidc  # type: ignore[attr-defined]
    provider.refresh_interval = 0
    try:
        answer = _callback(fake_client, fake, lambda n: fake.id_token(n, key=rotated))
    finally:
        fake.published = [fake.key]
    assert answer.status_code == 303, answer.text
    assert fake.jwks_fetches == fetches + 2


def test_the_provider_refusing_the_sign_in_is_said(
    fake_client: TestClient, fake: FakeProvider
) -> None:
    answer = _callback(fake_client, fake, "unused", error="access_denied")
    assert answer.status_code == 403 and "refused the sign-in: access_denied" in answer.text


def test_an_entra_groups_overage_means_no_access(
    fake_client: TestClient, fake: FakeProvider
) -> None:
    answer = _callback(
        fake_client,
        fake,
        lambda nonce: fake.id_token(
            nonce,
            groups=None,
            _claim_names={"groups": "src1"},
            _claim_sources={"src1": {"endpoint": "https://graph.example/x"}},
        ),
    )
    assert answer.status_code == 403 and "overage" in answer.text


def test_an_iss_parameter_of_another_issuer_is_refused(
    fake_client: TestClient, fake: FakeProvider
) -> None:
    answer = _callback(
        fake_client, fake, lambda nonce: fake.id_token(nonce), iss="https://other.example"
    )
    assert answer.status_code == 401 and "comes from issuer" in answer.text
    assert not fake.token_requests or fake.token_requests[-1].get("code") != "never"


def test_a_discovery_document_naming_another_issuer_is_refused(
    fake_client: TestClient, fake: FakeProvider
) -> None:
    fake.discovery = {"issuer": "https://attacker.example"}
    answer = fake_client.get("/login/sso", follow_redirects=False)
    assert answer.status_code == 503
    assert "names issuer 'https://attacker.example'" in html.unescape(answer.text)


def test_a_client_failing_to_sign_in_too_often_waits(database_url: str, fake: FakeProvider) -> None:
    fake.discovery = {}
    settings = sso_settings(database_url, fake.issuer, "http://127.0.0.1", auth_failure_limit=2)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        for _ in range(2):
            answer = _callback(client, fake, lambda n: fake.id_token(n, aud="someone-else"))
            assert answer.status_code == 401
        refused = client.get("/login/sso", follow_redirects=False)
        assert refused.status_code == 429 and "retry in" in refused.text
        assert int(refused.headers["retry-after"]) > 0


def test_sign_ins_under_way_are_bounded(database_url: str) -> None:
    from app.domain import users
    from app.errors import ServiceUnavailable
    from app.storage.session import Database

    db = Database(Settings(database_url=database_url, environment="test"))
    try:
        with db.transaction(write=True) as session:
            for _ in range(3):
                users.start_login(session, "/", utcnow(), limit=1_000_000)
            with pytest.raises(ServiceUnavailable, match="too many sign-ins"):
                users.start_login(session, "/", utcnow(), limit=1)
            session.rollback()
    finally:
        db.dispose()


def test_token_login_can_be_switched_off(database_url: str, fake: FakeProvider) -> None:
    settings = sso_settings(database_url, fake.issuer, "http://127.0.0.1", token_login=False)
    with TestClient(create_app(settings)) as client:
        page = client.get("/login")
        assert "Sign in with Test IdP" in page.text and 'name="token"' not in page.text
        refused = client.post("/login", data={"token": "gpv_x", "csrf_token": "x"})
        assert refused.status_code == 403 and "switched off" in refused.text


def test_the_settings_refuse_plain_http_issuers_without_the_loopback_switch(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="GPUPROV_OIDC_ISSUER must be https"):
        Settings(
            oidc_issuer="http://127.0.0.1:1",
            oidc_client_id="x",
            oidc_redirect_url="https://gpuprov.example/login/sso/callback",
        )
    with pytest.raises(ValueError, match="GPUPROV_OIDC_REDIRECT_URL must be https"):
        Settings(
            oidc_issuer="https://idp.example",
            oidc_client_id="x",
            oidc_redirect_url="http://gpuprov.example/login/sso/callback",
        )
    with pytest.raises(ValueError, match="viewer"):
        Settings(oidc_roles={"g": "root"})


# -- teams from groups ---------------------------------------------------------------------

ML_IMAGE = "registry.example.com/ml/train:1.0"
OTHER_IMAGE = "registry.example.com/secret/other:9"


def _team_fleet(service: Any) -> None:
    from app.domain.audit import cli_actor
    from app.domain.teams import assign_labels, check_team, put_team
    from tests.app import boms
    from tests.app.conftest import JSON_HEADERS, auth

    writer = service.token("report:write", name="agent")
    ids = []
    for name in (ML_IMAGE, OTHER_IMAGE):
        answer = service.client.post(
            "/api/v1/reports",
            content=boms.encode(boms.gpuprov_bom(name=name)),
            headers=auth(writer, **JSON_HEADERS),
        )
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["asset_id"])
    with service.db.transaction(write=True) as session:
        put_team(
            session, "ml", check_team({"labels": {"team": "ml"}, "groups": ["ml-eng"]}), cli_actor()
        )
        assign_labels(session, ids[0], {"team": "ml"}, cli_actor())
        assign_labels(session, ids[1], {"team": "other"}, cli_actor())


@pytest.mark.parametrize(
    ("groups", "roles"),
    [
        (["gpuprov-viewers", "ml-eng"], ROLES),  # a team naming the group
        (["ml-viewers"], {"ml-viewers": {"role": "viewer", "team": "ml"}}),  # the role mapping
    ],
)
def test_a_signed_in_viewer_sees_only_the_team_of_their_groups(
    service: Any, fake: FakeProvider, groups: list[str], roles: dict[str, Any]
) -> None:
    _team_fleet(service)
    fake.discovery = {}
    settings = sso_settings(
        service.url, fake.issuer, "http://127.0.0.1", oidc_roles=roles, teamless_access="none"
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        signed = _callback(client, fake, lambda nonce: fake.id_token(nonce, groups=groups))
        assert signed.status_code == 303, signed.text
        page = client.get("/assets").text.replace("<wbr>", "")
        assert ML_IMAGE in page and OTHER_IMAGE not in page
        assert "fake@example.com · viewer · team ml" in page
        # the group is gone at the next sign-in: so is the team, and (teamless: none) every asset
        signed = _callback(
            client, fake, lambda nonce: fake.id_token(nonce, groups=["gpuprov-viewers"])
        )
        if roles is ROLES:
            assert signed.status_code == 303, signed.text
            page = client.get("/assets").text.replace("<wbr>", "")
            assert ML_IMAGE not in page and OTHER_IMAGE not in page
            assert "team ml" not in page
        else:  # the only group that gave a role: no access at all
            assert signed.status_code == 403
            assert client.get("/assets", follow_redirects=False).status_code == 303
