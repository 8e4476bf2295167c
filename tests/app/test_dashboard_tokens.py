"""Tokens and sessions whose state the dashboard shows (issue 18 §4): the login form says why a
token is refused in the API's words, a session that ended says why on the login page, and
/admin/tokens shows each token's state, expiry, successor and last use, and makes tokens that
expire by default."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.clock import utcnow
from app.domain.tokens import create_token, rotate_token
from app.http.dashboard.admin import TOKEN_EXPIRY_DEFAULT
from app.http.dashboard.sessions import SESSION_COOKIE
from app.storage.tables import ApiToken
from tests.app.conftest import Service, auth
from tests.app.pages import csrf_of, login, session_csrf


@pytest.fixture
def client(service: Service) -> Iterator[TestClient]:
    service.client.cookies.clear()
    yield service.client
    service.client.cookies.clear()


def _new(service: Service, *scopes: str, name: str = "t") -> tuple[int, str]:
    with service.db.transaction(write=True) as session:
        new = create_token(session, name, list(scopes))
        return new.token.id, new.secret


def _set(service: Service, token_id: int, **values: object) -> None:
    with service.db.transaction(write=True) as session:
        session.execute(update(ApiToken).where(ApiToken.id == token_id).values(**values))


def _ended(client: TestClient, path: str = "/assets") -> str | None:
    """The reason the redirect of a page request to the login form gives, if any."""
    answer = client.get(path, follow_redirects=False)
    assert answer.status_code == 303, answer.text[:200]
    location = urlsplit(answer.headers["location"])
    assert location.path == "/login"
    query = parse_qs(location.query)
    assert query.get("next") == ([path] if path != "/" else None)
    return query["ended"][0] if "ended" in query else None


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_an_expired_token_is_refused_in_the_apis_words(
    service: Service, client: TestClient
) -> None:
    token_id, secret = _new(service, "inventory:read")
    _set(service, token_id, expires_at=utcnow() - timedelta(seconds=1))
    api = client.get("/api/v1/assets", headers=auth(secret))
    assert api.status_code == 401
    said = api.json()["error"]["message"]
    assert said == "the token has expired"
    answer = login(client, secret)
    assert answer.status_code == 401 and said in answer.text
    assert "unknown or revoked" not in answer.text and SESSION_COOKIE not in client.cookies
    # an unknown and a revoked secret read the same, as in the API
    _set(service, token_id, revoked_at=utcnow())
    for refused in (secret, "gpv_not-a-real-token"):
        client.app.state.auth_limiter.reset()  # type: ignore[attr-defined]
        answer = login(client, refused)
        assert answer.status_code == 401 and "unknown or revoked token" in answer.text


@pytest.mark.parametrize(
    ("end", "reason", "says"),
    [
        ("revoke", "token-revoked", "the token is unknown or revoked"),
        ("expire", "token-expired", "the token has expired"),
        ("rotate", "token-revoked", "the token is unknown or revoked"),
        ("delete", "token-revoked", "the token is unknown or revoked"),
    ],
)
def test_a_session_ended_by_its_token_says_why(
    service: Service, client: TestClient, end: str, reason: str, says: str
) -> None:
    token_id, secret = _new(service, "inventory:read")
    assert login(client, secret).status_code == 303
    assert client.get("/assets").status_code == 200
    if end == "revoke":
        _set(service, token_id, revoked_at=utcnow())
    elif end == "expire":
        _set(service, token_id, expires_at=utcnow() - timedelta(seconds=1))
    elif end == "rotate":
        with service.db.transaction(write=True) as session:
            rotate_token(session, token_id)
    else:
        with service.db.transaction(write=True) as session:
            session.delete(session.get(ApiToken, token_id))
    assert _ended(client) == reason
    page = client.get("/assets")  # followed: the login page with the reason
    assert page.status_code == 200 and 'name="token"' in page.text
    assert f"Your session ended: {says}." in _text(page.text)


def test_a_session_past_its_lifetime_says_so(service: Service, client: TestClient) -> None:
    token_id, secret = _new(service, "inventory:read")
    signer = client.app.state.dashboard_signer  # type: ignore[attr-defined]
    with service.db.session() as session:
        token = session.get(ApiToken, token_id)
        assert token is not None
        token_hash = token.token_hash
    now = int(utcnow().timestamp())
    lifetime = service.settings.session_lifetime_seconds
    client.cookies.set(SESSION_COOKIE, signer.new_session(token_id, token_hash, now - 61, 60))
    assert _ended(client) == "session-expired"
    said = _text(client.get("/assets").text)
    assert lifetime == 8 * 3600  # the default
    assert "Your session ended: a session lasts 8 hours (GPUPROV_SESSION_LIFETIME_SECONDS)" in said
    # still within its lifetime: the page itself
    client.cookies.set(SESSION_COOKIE, signer.new_session(token_id, token_hash, now - 1, 60))
    assert client.get("/assets", follow_redirects=False).status_code == 200


@pytest.mark.parametrize(
    "cookie",
    [None, "garbage", "e30.AAAA", "x" * 2000],
)
def test_no_session_or_a_forged_one_gives_no_reason(client: TestClient, cookie: str | None) -> None:
    if cookie is not None:
        client.cookies.set(SESSION_COOKIE, cookie)
    assert _ended(client) is None
    assert "Your session ended" not in client.get("/assets").text


def test_a_forged_session_past_its_lifetime_gives_no_reason(
    service: Service, client: TestClient
) -> None:
    """Only a session the service signed is explained: one signed with another key is none."""
    from app.http.dashboard.sessions import Signer

    token_id, _ = _new(service, "inventory:read")
    now = int(utcnow().timestamp())
    forged = Signer("another key").new_session(token_id, "0" * 64, now - 61, 60)
    client.cookies.set(SESSION_COOKIE, forged)
    assert _ended(client) is None


def test_logging_out_says_so(service: Service, client: TestClient) -> None:
    _, secret = _new(service, "inventory:read")
    assert login(client, secret).status_code == 303
    answer = client.post("/logout", data={"csrf_token": session_csrf(client)})
    assert answer.status_code == 200 and "You have logged out." in answer.text
    assert str(answer.url).endswith("/login?ended=logged-out")


def test_an_unknown_reason_is_refused(client: TestClient) -> None:
    assert client.get("/login?ended=other").status_code in (400, 422)
    assert "Your session ended" not in client.get("/login").text


@pytest.mark.parametrize(
    ("seconds", "length"),
    [(3600, "1 hour"), (8 * 3600, "8 hours"), (60, "1 minute"), (90 * 60, "90 minutes"),
     (61, "61 seconds")],
)  # fmt: skip
def test_a_sessions_length_reads_as_set(seconds: int, length: str) -> None:
    from app.domain.tokens import SessionEnd
    from app.http.dashboard.auth import ended_message

    said = ended_message(SessionEnd.SESSION_EXPIRED, seconds)
    assert f"a session lasts {length} (GPUPROV" in said


def _row(html: str, name: str) -> str:
    """The text of the token table's row of ``name``."""
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.DOTALL):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)
        if cells and _text(cells[0]).strip() == name:
            return " ".join(_text(row).split())
    raise AssertionError(f"no row for {name} in the token table")


def test_the_token_page_shows_state_expiry_successor_and_last_use(
    service: Service, client: TestClient
) -> None:
    _, admin = _new(service, "admin", name="admin")
    now = utcnow()
    with service.db.transaction(write=True) as session:
        plain = create_token(session, "plain", ["inventory:read"]).token.id
        dated = create_token(
            session, "dated", ["inventory:read"], expires_at=now + timedelta(days=30)
        ).token
        dated_id, dated_until = dated.id, dated.expires_at
        old = create_token(session, "agent", ["report:write"]).token.id
        rotated = rotate_token(session, old, grace=timedelta(hours=2)).token.id
        gone = create_token(session, "gone", ["gate"]).token.id
        lapsed = create_token(session, "lapsed", ["gate"]).token.id
    _set(service, gone, revoked_at=now)
    _set(service, lapsed, expires_at=now - timedelta(minutes=5))
    _set(service, dated_id, last_used_at=now - timedelta(minutes=3))
    assert dated_until is not None
    assert login(client, admin).status_code == 303
    html = client.get("/admin/tokens").text

    def when(value: object) -> str:
        return value.isoformat()[:16].replace("T", " ")  # type: ignore[attr-defined]

    plain_row = _row(html, "plain")
    assert "active" in plain_row and "never never" in plain_row  # never used, never expires
    assert "Revoke" in plain_row and f"/admin/tokens/{plain}/revoke" in html
    dated_row = _row(html, "dated")
    assert f"{when(now - timedelta(minutes=3))} {when(dated_until)} active" in dated_row
    rows = re.findall(r"<tr>.*?</tr>", html, re.DOTALL)
    agents = [" ".join(_text(r).split()) for r in rows if ">agent<" in r]
    assert len(agents) == 2
    with service.db.session() as session:
        rotated_old = session.get(ApiToken, old)
        assert rotated_old is not None and rotated_old.expires_at is not None
        grace_end = when(rotated_old.expires_at)
    assert f"in grace until {grace_end}" in agents[0]
    assert f"replaced by token {rotated} (agent)" in agents[0] and "Revoke" in agents[0]
    assert "active" in agents[1] and "replaced by" not in agents[1]
    gone_row = _row(html, "gone")
    assert f"revoked {when(now)}" in gone_row and "Revoke" not in gone_row
    lapsed_row = _row(html, "lapsed")
    assert f"expired {when(now - timedelta(minutes=5))}" in lapsed_row
    assert "Revoke" not in lapsed_row and "active" not in lapsed_row


def test_a_token_made_on_the_page_expires_by_default(service: Service, client: TestClient) -> None:
    _, admin = _new(service, "admin", name="admin")
    assert login(client, admin).status_code == 303
    form = client.get("/admin/tokens").text
    assert f'name="expires" value="{TOKEN_EXPIRY_DEFAULT}"' in form
    assert TOKEN_EXPIRY_DEFAULT == "90d"  # docs/dashboard.md says so
    csrf = csrf_of(form)
    fields = {"csrf_token": csrf, "scope_inventory_read": "1"}
    before = utcnow()
    made = client.post("/admin/tokens", data={**fields, "name": "dflt", "expires": "90d"})
    assert made.status_code == 200 and "valid until" in made.text
    never = client.post("/admin/tokens", data={**fields, "name": "forever", "expires": ""})
    assert never.status_code == 200 and "which never expires" in never.text
    dated = client.post("/admin/tokens", data={**fields, "name": "d", "expires": "2030-01-31"})
    assert dated.status_code == 200
    with service.db.session() as session:
        rows = {t.name: t.expires_at for t in session.query(ApiToken).all()}
    dflt = rows["dflt"]
    assert dflt is not None
    if dflt.tzinfo is None:
        dflt = dflt.replace(tzinfo=before.tzinfo)
    assert timedelta(days=90) <= dflt - before < timedelta(days=90, minutes=5)
    assert rows["forever"] is None
    assert rows["d"] is not None and rows["d"].isoformat().startswith("2030-01-31T00:00")
    # a bad expiry: the API's refusal, the form again with what was typed, nothing stored
    for bad, says in (("soon", "is neither a duration"), ("2000-01-01", "is not in the future")):
        refused = client.post("/admin/tokens", data={**fields, "name": "bad", "expires": bad})
        assert refused.status_code == 400 and says in _text(refused.text)
        assert f'name="expires" value="{bad}"' in refused.text
    with service.db.session() as session:
        assert session.query(ApiToken).filter_by(name="bad").count() == 0
