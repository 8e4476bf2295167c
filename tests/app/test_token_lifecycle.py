"""Token expiry and rotation (API and CLI), the audit log of administrative actions, and the
limit on failed authentications per client."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.domain.tokens import authenticate, parse_duration, parse_expiry
from app.errors import BadRequest, Unauthorized
from app.http.ratelimit import AuthFailureLimiter
from app.settings import Settings
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

    revoked = client.delete(f"/api/v1/tokens/{old_id}", headers=auth(admin))
    assert revoked.status_code == 200
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
    for bad in ("limit=0", "since=yesterday", "action=", "bogus=1"):
        assert client.get(f"/api/v1/audit?{bad}", headers=auth(admin)).status_code == 400, bad


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
    assert [(e["action"], e["target"], e["actor"]) for e in log] == [
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
    code, _, err = _run("token", "revoke", "1", "--database-url", db_url)
    assert code == 0
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
