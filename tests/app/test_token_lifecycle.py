"""Token expiry and rotation (API and CLI), the audit log of administrative actions, and the
limit on failed authentications per client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.clock import utcnow
from app.domain import tokens
from app.domain.audit import Actor, events_page
from app.domain.tokens import (
    MAX_LIFETIME,
    NewToken,
    authenticate,
    create_token,
    hash_secret,
    parse_duration,
    parse_expiry,
    rotate_token,
    session_principal,
    token_dict,
)
from app.errors import BadRequest, Conflict, Unauthorized
from app.http.ratelimit import AuthFailureLimiter
from app.settings import Settings
from app.storage.repositories.tokens import by_id
from app.storage.session import Database
from tests.app import catalogs
from tests.app.conftest import Service, auth
from tests.app.test_cli import _run, db_url  # noqa: F401 - the fixture

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", NOW + timedelta(days=30)),
        ("12h", NOW + timedelta(hours=12)),
        ("2w", NOW + timedelta(weeks=2)),
        ("90s", NOW + timedelta(seconds=90)),
        ("2027-01-31", datetime(2027, 1, 31, tzinfo=UTC)),
        ("2027-01-31T10:00:00+02:00", datetime(2027, 1, 31, 8, tzinfo=UTC)),
        ("2027-01-31T10:00:00Z", datetime(2027, 1, 31, 10, tzinfo=UTC)),
    ],
)
def test_expiry_syntax(text: str, expected: datetime) -> None:
    assert parse_expiry(text, NOW) == expected


@pytest.mark.parametrize(
    "text", ["0d", "-1d", "30", "30y", "2026-12-01", "9999-12-31", "tomorrow", "", "99999999d"]
)
def test_bad_expiry_is_refused(text: str) -> None:
    with pytest.raises(BadRequest):
        parse_expiry(text, NOW)


def test_duration_bounds() -> None:
    assert parse_duration("15m") == timedelta(minutes=15)
    for bad in ("0s", "1x", "1 d", "3661d"):
        with pytest.raises(BadRequest):
            parse_duration(bad)


def test_expiry_bounds_are_inclusive() -> None:
    assert parse_duration("3660d") == MAX_LIFETIME
    assert parse_expiry("3660d", NOW) == NOW + MAX_LIFETIME
    assert parse_expiry((NOW + MAX_LIFETIME).isoformat(), NOW) == NOW + MAX_LIFETIME
    assert parse_expiry((NOW + timedelta(seconds=1)).isoformat(), NOW) == NOW + timedelta(seconds=1)
    with pytest.raises(BadRequest, match="days away"):
        parse_expiry((NOW + MAX_LIFETIME + timedelta(seconds=1)).isoformat(), NOW)
    with pytest.raises(BadRequest, match="not in the future"):
        parse_expiry(NOW.isoformat(), NOW)


def _admin_get(service: Service, admin: str, path: str, **params: Any) -> Any:
    answer = service.client.get(path, params=params, headers=auth(admin))
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_api_expiry_rotation_and_audit(service: Service) -> None:
    admin = service.token("admin", name="root")
    client = service.client
    created = client.post(
        "/api/v1/tokens",
        json={"name": "ci", "scopes": ["inventory:read"], "expires": "30d"},
        headers=auth(admin),
    )
    assert created.status_code == 201, created.text
    body = created.json()
    expires = datetime.fromisoformat(body["expires_at"])
    assert timedelta(days=29) < expires - datetime.now(UTC) <= timedelta(days=30)
    old_secret, old_id = body["token"], body["id"]
    assert body["state"] == "active"
    assert client.get("/api/v1/assets", headers=auth(old_secret)).status_code == 200

    # rotation with a grace period: both secrets work, the old one until the grace ends
    rotated = client.post(f"/api/v1/tokens/{old_id}/rotate?grace=1h", headers=auth(admin))
    assert rotated.status_code == 201, rotated.text
    new = rotated.json()
    assert new["id"] != old_id and new["name"] == "ci" and new["scopes"] == ["inventory:read"]
    assert new["token"] != old_secret and new["expires_at"]
    assert client.get("/api/v1/assets", headers=auth(new["token"])).status_code == 200
    assert client.get("/api/v1/assets", headers=auth(old_secret)).status_code == 200
    listed = {t["id"]: t for t in _admin_get(service, admin, "/api/v1/tokens")["items"]}
    grace_end = datetime.fromisoformat(listed[old_id]["expires_at"])
    # the API says the state the admin page shows (issue 18 §4): in its grace, then its successor
    assert (listed[old_id]["state"], listed[old_id]["replaced_by"]) == ("grace", new["id"])
    assert (listed[new["id"]]["state"], new["state"]) == ("active", "active")
    assert grace_end - datetime.now(UTC) <= timedelta(hours=1)

    # rotation without grace: the old secret stops at once; a revoked token cannot rotate
    again = client.post(f"/api/v1/tokens/{new['id']}/rotate", headers=auth(admin))
    assert again.status_code == 201
    answer = client.get("/api/v1/assets", headers=auth(new["token"]))
    assert answer.status_code == 401 and "revoked" in answer.json()["error"]["message"]
    refused = client.post(f"/api/v1/tokens/{new['id']}/rotate", headers=auth(admin))
    assert refused.status_code == 409
    for bad in ("grace=0s", "grace=1y", "grace=" + "9" * 20):
        answer = client.post(
            f"/api/v1/tokens/{again.json()['id']}/rotate?{bad}", headers=auth(admin)
        )
        assert answer.status_code == 400, bad
    bad = client.post(
        "/api/v1/tokens",
        json={"name": "x", "scopes": ["gate"], "expires": "yesterday"},
        headers=auth(admin),
    )
    assert bad.status_code == 422 and "expiry" in bad.json()["error"]["message"]

    # an expired token answers 401 saying so
    with service.db.transaction(write=True) as session:
        from app.storage.repositories.tokens import by_id

        row = by_id(session, again.json()["id"])
        assert row is not None
        row.expires_at = datetime.now(UTC) - timedelta(seconds=1)
    answer = client.get("/api/v1/assets", headers=auth(again.json()["token"]))
    assert answer.status_code == 401 and "expired" in answer.json()["error"]["message"]
    listed = {t["id"]: t for t in _admin_get(service, admin, "/api/v1/tokens")["items"]}
    assert listed[again.json()["id"]]["state"] == "expired"
    assert listed[new["id"]]["state"] == "revoked"  # rotated without grace

    revoked = client.delete(f"/api/v1/tokens/{old_id}", headers=auth(admin))
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    client.delete(f"/api/v1/tokens/{old_id}", headers=auth(admin))  # idempotent: not recorded

    log = _admin_get(service, admin, "/api/v1/audit")
    actions = [e["action"] for e in log["items"]]
    assert actions == ["token.revoke", "token.rotate", "token.rotate", "token.create"]
    assert log["total"] == 4
    for event in log["items"]:
        assert event["source"] == "api" and event["actor"] == "root"
        assert event["request_id"] and event["actor_token_id"]
        text = str(event)
        assert old_secret not in text and new["token"] not in text
    first_rotation = log["items"][2]
    assert first_rotation["target"] == f"token:{new['id']}"
    assert first_rotation["details"]["replaced"] == old_id
    assert first_rotation["details"]["grace_seconds"] == 3600

    page = _admin_get(service, admin, "/api/v1/audit", action="token.rotate", limit=1, offset=1)
    assert page["total"] == 2 and [e["target"] for e in page["items"]] == [f"token:{new['id']}"]
    assert _admin_get(service, admin, "/api/v1/audit", actor="nobody")["total"] == 0
    assert _admin_get(service, admin, "/api/v1/audit", target=f"token:{old_id}")["total"] == 2
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert _admin_get(service, admin, "/api/v1/audit", since=future)["total"] == 0
    assert _admin_get(service, admin, "/api/v1/audit", until=future)["total"] == 4
    reader = service.token("inventory:read")
    assert client.get("/api/v1/audit", headers=auth(reader)).status_code == 403
    for bad in ("limit=0", "since=yesterday", "action=", "bogus=1", "action=token.delete"):
        assert client.get(f"/api/v1/audit?{bad}", headers=auth(admin)).status_code == 400, bad
    # a window that ends before it starts matches nothing: refused, not an empty page
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    for since, until in ((future, past), (past, past)):
        answer = client.get(
            "/api/v1/audit", params={"since": since, "until": until}, headers=auth(admin)
        )
        assert answer.status_code == 400 and "before until" in answer.text, answer.text
    assert _admin_get(service, admin, "/api/v1/audit", since=past, until=future)["total"] == 4


def test_policy_and_catalog_changes_are_audited(
    service: Service, post_report: Callable[..., Any]
) -> None:
    from tests.app.test_auth import Walk

    Walk(service, post_report)  # stores a trust policy and promotion policy "prod" as admin "t"
    admin = service.token("admin", name="root")
    answer = service.client.put(
        "/api/v1/policies/prod",
        content=b"apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\nrules: {}\n",
        headers=auth(admin, **catalogs.YAML),
    )
    assert answer.status_code == 201, answer.text
    log = _admin_get(service, admin, "/api/v1/audit")["items"]
    # (the walk also stores an advisory: its own audit is tested with the advisories)
    changes = [e for e in log if e["action"] in ("policy.put", "trust_policy.put")]
    assert [(e["action"], e["target"], e["actor"]) for e in changes] == [
        ("policy.put", "policy:prod@2", "root"),
        ("policy.put", "policy:prod@1", "t"),
        ("trust_policy.put", "trust_policy@1", "t"),
    ]


def test_cli_expiry_rotation_and_audit(db_url: str) -> None:  # noqa: F811 - the fixture
    code, secret, err = _run(
        "token", "create", "--name", "agent", "--scope", "report:write", "--asset", "n-*",
        "--expires", "7d", "--database-url", db_url,
    )  # fmt: skip
    assert code == 0 and "expires 20" in err, err
    secret = secret.strip()
    code, out, _ = _run("token", "list", "--database-url", db_url)
    assert code == 0 and "\texpires 20" in out
    code, new, err = _run("token", "rotate", "1", "--grace", "1h", "--database-url", db_url)
    assert code == 0 and "works for 1h more" in err, err
    new = new.strip()
    assert new.startswith("gpv_") and new != secret
    listed = _run("token", "list", "--database-url", db_url)[1].splitlines()[1:]  # after the header
    # in its grace: not plainly active, until when and replaced by which (issue 18 §4)
    assert "\tin grace until 20" in listed[0] and " replaced by 2 assets=n-*" in listed[0]
    assert "\texpires 20" in listed[1] and "replaced" not in listed[1]
    code, _, err = _run("token", "revoke", "1", "--database-url", db_url)
    assert code == 0
    assert "\trevoked replaced by 2" in _run("token", "list", "--database-url", db_url)[1]
    for args, message in (
        (("token", "create", "--name", "x", "--scope", "gate", "--expires", "0d"), "duration"),
        (("token", "rotate", "1"), "revoked or expired"),
        (("token", "rotate", "2", "--grace", "forever"), "not a duration"),
    ):
        code, out, err = _run(*args, "--database-url", db_url)
        assert code != 0 and message in err and out == "", (args, err)
    db = Database(Settings(database_url=db_url))
    try:
        with db.lookup() as conn:
            principal = authenticate(conn, new)
            assert principal.asset_patterns == ("n-*",)
            with pytest.raises(Unauthorized):
                authenticate(conn, secret)
        from app.domain.audit import events_page

        with db.session() as session:
            events = events_page(session, 10, 0)["items"]
    finally:
        db.dispose()
    assert [e["action"] for e in events] == ["token.revoke", "token.rotate", "token.create"]
    assert all(e["source"] == "cli" and e["actor"].startswith("cli:") for e in events)
    assert secret not in str(events) and new not in str(events)


def test_failed_authentication_is_rate_limited(service: Service) -> None:
    limit = service.settings.auth_failure_limit
    good = service.token("inventory:read")
    for _ in range(limit):
        answer = service.client.get("/api/v1/assets", headers=auth("gpv_guess"))
        assert answer.status_code == 401
    # no token is not a guess: it never counts, and is answered 401 even when blocked
    for _ in range(3):
        assert service.client.get("/api/v1/assets").status_code == 401
    blocked = service.client.get("/api/v1/assets", headers=auth("gpv_guess"))
    assert blocked.status_code == 429
    assert 1 <= int(blocked.headers["retry-after"]) <= service.settings.auth_failure_window_seconds
    assert "too many failed authentications" in blocked.json()["error"]["message"]
    # while blocked, even a valid token is refused: its secret is not looked at
    assert service.client.get("/api/v1/assets", headers=auth(good)).status_code == 429
    metrics = service.client.app.state.metrics  # type: ignore[attr-defined]
    text = metrics.exposition().decode()
    assert 'gpuprov_auth_failures_total{reason="rate_limited"}' in text


def test_limiter_window_and_memory_bound() -> None:
    limiter = AuthFailureLimiter(limit=3, window=60)
    for t in (0, 1, 2):
        assert limiter.retry_after("a", now=t) is None
        limiter.fail("a", now=t)
    assert limiter.retry_after("a", now=3) == 57
    assert limiter.retry_after("b", now=3) is None
    assert limiter.retry_after("a", now=60.5) is None  # the first failure left the window
    limiter.fail("a", now=61)  # the one at 1 leaves the window: 2 and 61 remain
    assert limiter.retry_after("a", now=61) is None
    limiter.fail("a", now=61.5)  # 2, 61 and 61.5: blocked until 2 leaves the window
    assert limiter.retry_after("a", now=61.5) == 1
    limiter.MAX_CLIENTS = 100
    for i in range(500):
        limiter.fail(f"c{i}", now=70)
    assert len(limiter._failures) == 100


def test_settings_bound_the_limiter(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Settings(auth_failure_limit=0)
    with pytest.raises(ValueError):
        Settings(log_format="xml")  # type: ignore[arg-type]


def test_dashboard_admin_actions_are_audited(service: Service) -> None:
    from tests.app.pages import login, session_csrf

    client = service.client
    client.cookies.clear()
    try:
        admin = service.token("admin", name="web-admin")
        assert login(client, admin).status_code == 303
        csrf = session_csrf(client)
        answer = client.post(
            "/admin/tokens", data={"name": "made-on-web", "scope_gate": "1", "csrf_token": csrf}
        )
        assert answer.status_code == 200, answer.text
        log = _admin_get(service, admin, "/api/v1/audit")["items"]
        created = log[0]
        assert created["action"] == "token.create" and created["source"] == "web"
        assert created["actor"] == "web-admin" and created["details"]["name"] == "made-on-web"
        token_id = int(created["target"].removeprefix("token:"))
        answer = client.post(f"/admin/tokens/{token_id}/revoke", data={"csrf_token": csrf})
        assert answer.status_code == 200
        log = _admin_get(service, admin, "/api/v1/audit", action="token.revoke")["items"]
        assert [(e["source"], e["target"]) for e in log] == [("web", f"token:{token_id}")]
    finally:
        client.cookies.clear()


# The domain functions on a database of their own (SQLite through the CLI's upgrade), so the
# instants around an expiry can be given exactly.


@pytest.fixture
def tokens_db(db_url: str) -> Iterator[Database]:  # noqa: F811 - the fixture
    db = Database(Settings(database_url=db_url))
    try:
        yield db
    finally:
        db.dispose()


def _create(db: Database, name: str, expires_at: datetime | None = None) -> NewToken:
    with db.transaction(write=True) as session:
        return create_token(session, name, ["inventory:read"], None, expires_at=expires_at)


def test_a_token_stops_working_at_its_expiry_instant(tokens_db: Database) -> None:
    expires = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    new = _create(tokens_db, "edge", expires)
    before, after = expires - timedelta(seconds=1), expires + timedelta(seconds=1)
    with tokens_db.lookup() as conn:
        assert authenticate(conn, new.secret, before).name == "edge"
        for at in (expires, after):
            with pytest.raises(Unauthorized, match="expired"):
                authenticate(conn, new.secret, at)
        live = session_principal(conn, new.token.id, before)
        assert live is not None
        assert live[0].name == "edge" and live[1] == hash_secret(new.secret)
        # a dashboard session ends at the same instant as the token's API access
        assert session_principal(conn, new.token.id, expires) is None
        assert session_principal(conn, new.token.id, after) is None


def test_a_revoked_or_unknown_token_has_no_dashboard_session(tokens_db: Database) -> None:
    kept, revoked = _create(tokens_db, "kept"), _create(tokens_db, "revoked")
    with tokens_db.transaction(write=True) as session:
        row = by_id(session, revoked.token.id)
        assert row is not None
        row.revoked_at = datetime.now(UTC)
    now = datetime.now(UTC)
    with tokens_db.lookup() as conn:
        live = session_principal(conn, kept.token.id, now)
        assert live is not None and live[0].name == "kept"
        assert session_principal(conn, revoked.token.id, now) is None
        assert session_principal(conn, revoked.token.id + 1000, now) is None
        with pytest.raises(Unauthorized, match="revoked"):
            authenticate(conn, revoked.secret, now)


def test_token_names_are_1_to_128_characters(tokens_db: Database) -> None:
    assert _create(tokens_db, "n" * 128).token.name == "n" * 128
    assert _create(tokens_db, "ci runner 7").token.name == "ci runner 7"
    # the API's documented pattern (issue 17): no white space around, no control character
    # (`gpuprov token create` strips what a command line adds around a name)
    for bad in ("n" * 129, "", "   ", "  spaced  ", "tab\there", "esc\x1b[2J", "c1\x9b"):
        with pytest.raises(BadRequest, match="1-128 characters"):
            _create(tokens_db, bad)


def test_rotation_without_a_grace_period_revokes_the_old_secret_at_once(
    tokens_db: Database,
) -> None:
    old = _create(tokens_db, "agent")
    with tokens_db.transaction(write=True) as session:
        new = rotate_token(session, old.token.id)  # the default: no grace period
        row = by_id(session, old.token.id)
        assert row is not None and row.revoked_at is not None and row.expires_at is None
    with tokens_db.lookup() as conn:
        assert authenticate(conn, new.secret).name == "agent"
        with pytest.raises(Unauthorized, match="revoked"):
            authenticate(conn, old.secret)
    with tokens_db.transaction(write=True) as session, pytest.raises(Conflict):
        rotate_token(session, old.token.id)


def test_rotation_grace_is_at_most_the_longest_lifetime(tokens_db: Database) -> None:
    for grace in (MAX_LIFETIME + timedelta(seconds=1), timedelta(seconds=-1)):
        token = _create(tokens_db, "refused")
        with tokens_db.transaction(write=True) as session, pytest.raises(BadRequest):
            rotate_token(session, token.token.id, grace)
    token = _create(tokens_db, "longest")
    start = datetime.now(UTC)
    with tokens_db.transaction(write=True) as session:
        rotate_token(session, token.token.id, MAX_LIFETIME)
        row = by_id(session, token.token.id)
        assert row is not None and row.revoked_at is None and row.expires_at is not None
        assert start + MAX_LIFETIME <= row.expires_at <= datetime.now(UTC) + MAX_LIFETIME


def test_rotation_audit_says_until_when_the_old_secret_works(tokens_db: Database) -> None:
    actor = Actor("cli", "cli:test")
    graced, revoked = _create(tokens_db, "graced"), _create(tokens_db, "revoked")
    expiring = _create(tokens_db, "expiring", datetime.now(UTC) + timedelta(days=7))
    with tokens_db.transaction(write=True) as session:
        rotate_token(session, graced.token.id, timedelta(hours=1), actor)
        rotate_token(session, revoked.token.id, timedelta(0), actor)
        rotate_token(session, expiring.token.id, timedelta(0), actor)
        until: dict[int, str] = {}
        for token in (graced, revoked, expiring):
            row = by_id(session, token.token.id)
            assert row is not None
            when = row.expires_at if token is graced else row.revoked_at
            assert when is not None
            until[token.token.id] = when.isoformat()
    with tokens_db.transaction() as session:
        events = events_page(session, 10, 0, action="token.rotate")["items"]
    # with a grace period: its end (the old token had no expiry); without: now, when it was
    # revoked, even for a token that would have expired later
    assert {e["details"]["replaced"]: e["details"]["replaced_until"] for e in events} == until


def test_a_token_in_its_grace_period_cannot_be_rotated_again(tokens_db: Database) -> None:
    """Its expiry is the grace's end, no longer its lifetime: rotating it again gave a
    never-expiring token's successor an expiry within the grace (found trying the CLI)."""
    forever = _create(tokens_db, "forever")
    with tokens_db.transaction(write=True) as session:
        first = rotate_token(session, forever.token.id, timedelta(hours=1))
        row = by_id(session, forever.token.id)
        assert row is not None and row.replaced_by_id == first.token.id
        assert first.token.expires_at is None  # the lifetime carried over: never
    with tokens_db.transaction(write=True) as session:
        with pytest.raises(Conflict, match=f"token {first.token.id} replaces it"):
            rotate_token(session, forever.token.id, timedelta(hours=1))
    with tokens_db.transaction(write=True) as session:
        second = rotate_token(session, first.token.id, timedelta(hours=1))  # the successor can
        assert second.token.expires_at is None
        replaced = by_id(session, first.token.id)
        assert replaced is not None
        assert token_dict(replaced, utcnow())["replaced_by"] == second.token.id
    with tokens_db.lookup() as conn:  # both graced secrets work until their grace ends
        assert authenticate(conn, forever.secret).name == "forever"
        assert authenticate(conn, first.secret).name == "forever"


def test_an_expired_token_cannot_be_rotated(tokens_db: Database) -> None:
    token = _create(tokens_db, "expired", datetime.now(UTC) + timedelta(hours=1))
    with tokens_db.transaction(write=True) as session:
        row = by_id(session, token.token.id)
        assert row is not None
        row.expires_at = datetime.now(UTC) - timedelta(seconds=1)
    for grace in (timedelta(0), timedelta(hours=1)):
        with tokens_db.transaction(write=True) as session:
            with pytest.raises(Conflict, match="revoked or expired"):
                rotate_token(session, token.token.id, grace)


def test_rotation_keeps_the_lifetime_and_never_extends_the_old_secret(
    tokens_db: Database,
) -> None:
    start = datetime.now(UTC)
    soon = _create(tokens_db, "soon", start + timedelta(minutes=30))
    later = _create(tokens_db, "later", start + timedelta(hours=2))
    with tokens_db.transaction(write=True) as session:
        soon_new = rotate_token(session, soon.token.id, timedelta(hours=1))
        later_new = rotate_token(session, later.token.id, timedelta(hours=1))
        soon_row, later_row = by_id(session, soon.token.id), by_id(session, later.token.id)
        assert soon_row is not None and later_row is not None
        # the grace period (1 h) outlasts "soon"'s expiry (30 min): its expiry stays
        assert soon_row.expires_at == start + timedelta(minutes=30)
        # and ends before "later"'s (2 h): its expiry is brought forward to the grace's end
        assert later_row.expires_at is not None
        assert start + timedelta(hours=1) <= later_row.expires_at
        assert later_row.expires_at <= datetime.now(UTC) + timedelta(hours=1)
        assert soon_row.revoked_at is None and later_row.revoked_at is None
        # the new secrets live as long as the old ones were given, from their own creation
        for old, new in ((soon, soon_new), (later, later_new)):
            assert old.token.expires_at is not None and new.token.expires_at is not None
            lifetime = old.token.expires_at - old.token.created_at
            assert timedelta(minutes=29) < lifetime <= timedelta(hours=2)
            assert new.token.expires_at - new.token.created_at == lifetime


def test_a_token_must_name_known_scopes(tokens_db: Database) -> None:
    for scopes in ([], ["bogus"], ["gate", "bogus"]):
        with tokens_db.transaction(write=True) as session:
            with pytest.raises(BadRequest, match="unknown or missing scopes"):
                create_token(session, "x", scopes)
    with tokens_db.transaction(write=True) as session:
        assert create_token(session, "x", ["gate", "gate"]).token.scopes == ["gate"]


def test_expiry_at_the_current_instant_counts_as_expired(
    tokens_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    monkeypatch.setattr(tokens, "utcnow", lambda: now)
    with tokens_db.transaction(write=True) as session:
        for expiry in (now, now - timedelta(seconds=1)):
            with pytest.raises(BadRequest, match="not in the future"):
                create_token(session, "x", ["gate"], expires_at=expiry)
        token = create_token(session, "x", ["gate"], expires_at=now + timedelta(seconds=1))
    # a token expiring at this very instant cannot be rotated any more
    with tokens_db.transaction(write=True) as session:
        row = by_id(session, token.token.id)
        assert row is not None
        row.expires_at = now
    with tokens_db.transaction(write=True) as session, pytest.raises(Conflict):
        rotate_token(session, token.token.id)
