"""Every value that decides is checked where it enters (issue 17 §3), on SQLite and PostgreSQL:
hostile YAML through the API, the dashboard and the CLI; numbers past what the date arithmetic
holds; cookies that are not ASCII; empty asset patterns; keys given twice in a JSON body; and
"at most once" token changes raced by concurrent requests."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.domain import tokens
from app.domain.audit import Actor
from app.errors import BadRequest, Conflict
from app.http.observe import served_routes
from tests.app import boms, catalogs
from tests.app.conftest import Service, auth
from tests.app.pages import csrf_of, login, session_csrf
from tests.app.test_cli import _run, db_url  # noqa: F401 - the fixture
from tests.app.test_gate_api import HEAD, _now, image_bom, put_policy
from tests.fixtures import keys
from tests.scanner.test_loaders import laughs

VALID = HEAD + "rules:\n  integrity: {forbid: [modified]}\n  scan_age: {max_hours: 24}\n"
HOSTILE_POLICIES = {
    "5,000-digit integer": (HEAD + "rules: {slsa: {min_level: " + "9" * 5000 + "}}\n", "5000"),
    "50,000-deep nesting": ("a: " + "[" * 50_000 + "]" * 50_000, "nesting"),
    "duplicate key": (HEAD + "rules: {integrity: {}}\nrules: {}\n", "duplicate key 'rules'"),
    "billion laughs": (laughs(9), "nodes once its aliases are expanded"),
    **{
        f"scan_age {hours}": (
            HEAD + f"rules: {{scan_age: {{max_hours: {hours}}}}}\n",
            "rules.scan_age.max_hours",
        )
        for hours in ("100000000", "1e11", "1e300", ".inf", ".nan", "true")
    },
}
HOSTILE_TRUST = {
    "5,000-digit integer": ("version: " + "9" * 5000, "5000 digits"),
    "50,000-deep nesting": ("[" * 50_000 + "]" * 50_000, "nesting"),
    "duplicate key": ("version: 1\nsigners: []\nsigners: []\n", "duplicate key 'signers'"),
    "billion laughs": (laughs(9), "nodes once its aliases are expanded"),
}
NVIDIA = keys.shared("ecdsa", "nvidia")
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def client(service: Service) -> Iterator[TestClient]:
    """The backend's test client without cookies from an earlier test."""
    service.client.cookies.clear()
    yield service.client
    service.client.cookies.clear()


def _admin_page(service: Service, client: TestClient) -> str:
    assert login(client, service.token("admin", name="boss")).status_code == 303
    return session_csrf(client)


# -- one YAML loader, one set of limits --------------------------------------------------------


def test_hostile_policies_are_refused_by_the_api_and_the_dashboard(
    service: Service, client: TestClient
) -> None:
    admin = service.token("admin", name="admin")
    csrf = _admin_page(service, client)
    for case, (document, reason) in HOSTILE_POLICIES.items():
        answer = put_policy(service, document, admin)
        assert answer.status_code == 422, (case, answer.status_code, answer.text[:300])
        assert reason in answer.json()["error"]["message"], case
        page = client.post(
            "/admin/policies", data={"csrf_token": csrf, "name": "prod", "document": document}
        )
        assert page.status_code == 422, (case, page.status_code)
        assert 'class="error"' in page.text, case
    for case, (document, reason) in HOSTILE_TRUST.items():
        answer = service.client.put(
            "/api/v1/trust-policy", content=document.encode(), headers=auth(admin, **catalogs.YAML)
        )
        assert answer.status_code == 422, (case, answer.status_code, answer.text[:300])
        assert reason in answer.json()["error"]["message"], case
        page = client.post("/admin/trust-policy", data={"csrf_token": csrf, "document": document})
        assert page.status_code == 422 and 'class="error"' in page.text, case
    assert service.count("promotion_policy") == service.count("trust_policy") == 0


def test_a_scan_age_at_its_bound_is_judged_by_every_compliance_read(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """1e300 hours was stored with 201; then compliance, control detail and the dashboard
    answered 500 and the export was cut mid-stream."""
    post_report(boms.encode(image_bom("reg.example/a:1", timestamp=_now(1))))
    policy = HEAD + "rules: {scan_age: {max_hours: 876000}}\n"
    assert put_policy(service, policy).status_code == 201
    reader = auth(service.token("inventory:read", name="reader"))
    for path in (
        "/api/v1/compliance?policy=prod",
        "/api/v1/compliance/controls/ID.AM-02?policy=prod",
        "/api/v1/compliance/export?policy=prod&format=csv",
        "/api/v1/compliance/attestation?policy=prod",
    ):
        answer = service.client.get(path, headers=reader)
        assert answer.status_code == 200, (path, answer.text[:300])
    rows = service.client.get(
        "/api/v1/compliance/export?policy=prod&format=json", headers=reader
    ).json()
    assert {r["status"] for r in rows if r["control_id"] == "ID.AM-02"} == {"pass"}


def test_a_policy_stored_before_its_range_was_checked_is_refused_when_used(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    """A version an earlier release stored (max_hours 1e300) answers 422 saying so wherever it
    would be used, never a 500 or a decision; reports are still stored."""
    assert put_policy(service, VALID).status_code == 201
    earlier = VALID.replace("max_hours: 24", "max_hours: 1e300")
    with service.db.transaction(write=True) as session:  # as that release stored it: intact
        session.execute(
            text("UPDATE promotion_policy SET document = :d, content_sha256 = :s"),
            {"d": earlier, "s": hashlib.sha256(earlier.encode()).hexdigest()},
        )
    reader = auth(service.token("inventory:read", name="reader"))
    for path in (
        "/api/v1/compliance?policy=prod",
        "/api/v1/compliance/controls/ID.AM-02?policy=prod",
        "/api/v1/compliance/export?policy=prod&format=csv",
    ):
        answer = service.client.get(path, headers=reader)
        assert answer.status_code == 422, (path, answer.status_code, answer.text[:300])
        message = answer.json()["error"]["message"]
        assert "policy prod version 1 is stored but no longer accepted" in message
        assert "rules.scan_age.max_hours" in message and "PUT /api/v1/policies/prod" in message
    assert post_report(boms.encode(image_bom("reg.example/a:1"))).status_code == 201
    gate = service.token("gate", "report:write", name="ci")
    answer = service.client.post(
        "/api/v1/gate",
        json={"policy": "prod", "image": "sha256:" + boms.digest_of("m", "reg.example/a:1")},
        headers=auth(gate),
    )
    assert answer.status_code == 422 and "no longer accepted" in answer.text
    assert service.count("gate_decision") == 0
    assert login(client, service.token("inventory:read", name="viewer")).status_code == 303
    assert client.get("/compliance?policy=prod").status_code == 422
    assert put_policy(service, VALID.replace("24", "48")).status_code == 201  # the way out
    assert service.client.get("/api/v1/compliance?policy=prod", headers=reader).status_code == 200


# -- secrets compared as bytes -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc.\u00e9", "\u00e9" * 20 + "." + "\u00e9" * 43, "a.\u2603"])
def test_a_cookie_that_is_not_ascii_is_no_session(client: TestClient, value: str) -> None:
    """`hmac.compare_digest` on such a str raised TypeError: a 500 without authentication."""
    header = {"Cookie": f"gpuprov_session={value}".encode()}
    answer = client.get("/", headers=header, follow_redirects=False)  # type: ignore[dict-item]
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")
    form = client.get("/login")
    login_header = {"Cookie": f"gpuprov_login={value}".encode()}
    answer = client.post(
        "/login",
        data={"token": "gpv_x", "csrf_token": csrf_of(form.text)},
        headers=login_header,  # type: ignore[arg-type]
        follow_redirects=False,
    )
    assert answer.status_code == 403 and "CSRF" in answer.text


def test_a_session_with_a_non_ascii_csrf_field_is_refused(
    service: Service, client: TestClient
) -> None:
    csrf = _admin_page(service, client)
    before = service.count("api_token")
    answer = client.post(
        "/admin/tokens", data={"csrf_token": csrf[:-1] + "\u00e9", "name": "x", "scope_gate": "1"}
    )
    assert answer.status_code == 403 and service.count("api_token") == before


# -- no empty pattern --------------------------------------------------------------------------


@pytest.mark.parametrize("assets", [[""], ["  "], ["node-*", ""]])
def test_an_empty_asset_pattern_is_refused_by_the_api(service: Service, assets: list[str]) -> None:
    """An empty pattern was dropped: the token was created unbound and pushed for any asset."""
    admin = auth(service.token("admin", name="admin"))
    before = service.count("api_token")
    answer = service.client.post(
        "/api/v1/tokens",
        json={"name": "agent", "scopes": ["report:write"], "assets": assets},
        headers=admin,
    )
    assert answer.status_code == 422, answer.text
    assert service.count("api_token") == before


@pytest.mark.parametrize("field", [" , ", ",", "node-*,,db-*", "node-*, "])
def test_an_empty_asset_pattern_is_refused_by_the_dashboard(
    service: Service, client: TestClient, field: str
) -> None:
    csrf = _admin_page(service, client)
    before = service.count("api_token")
    answer = client.post(
        "/admin/tokens",
        data={"csrf_token": csrf, "name": "agent", "scope_report_write": "1", "assets": field},
    )
    assert answer.status_code == 400 and "is empty" in answer.text
    assert service.count("api_token") == before
    bound = client.post(
        "/admin/tokens",
        data={"csrf_token": csrf, "name": "a", "scope_report_write": "1", "assets": "n-*, db"},
    )
    assert bound.status_code == 200
    secret = re.search(r'<code class="secret">(gpv_[^<]+)</code>', bound.text)
    assert secret is not None
    with service.db.lookup() as conn:
        assert tokens.authenticate(conn, secret.group(1)).asset_patterns == ("n-*", "db")


def test_an_empty_asset_pattern_is_refused_by_the_cli_and_the_domain(
    db_url: str,  # noqa: F811 - the fixture
    service: Service,
) -> None:
    for assets in (["--asset", ""], ["--asset", "node-*", "--asset", " "]):
        code, out, err = _run(
            "token", "create", "--name", "agent", "--scope", "report:write", *assets,
            "--database-url", db_url,
        )  # fmt: skip
        assert code == 2 and "is empty" in err and out == "", err
    code, out, _ = _run("token", "list", "--database-url", db_url)
    assert code == 0 and "agent" not in out
    with service.db.transaction(write=True) as session, pytest.raises(BadRequest):
        tokens.create_token(session, "agent", ["report:write"], ["node-*", ""])


# -- each key once in a JSON body ----------------------------------------------------------------


def test_a_key_given_twice_in_any_json_body_is_refused_naming_it(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """The service used the last value while the stored original kept both (a signature or a
    reviewer may read the other)."""
    admin = service.token("admin", name="admin")
    report = boms.encode(image_bom("reg.example/a:1")).decode()
    twice = report.replace('"bomFormat"', '"specVersion": "1.4", "bomFormat"', 1)
    answer = post_report(twice.encode())
    assert answer.status_code == 422 and "duplicate key 'specVersion'" in answer.text
    assert service.stored()["scan"] == 0
    assert put_policy(service, VALID).status_code == 201
    body = '{"policy": "prod", "image": "sha256:%s", "policy": "other"}' % ("a" * 64)
    gate = service.token("gate", name="ci")
    answer = service.client.post("/api/v1/gate", content=body.encode(), headers=auth(gate, **JSON))
    assert answer.status_code == 422 and "duplicate key 'policy'" in answer.text
    tokens_before = service.count("api_token")
    answer = service.client.post(
        "/api/v1/tokens",
        content=b'{"name": "a", "scopes": ["gate"], "scopes": ["admin"]}',
        headers=auth(admin, **JSON),
    )
    assert answer.status_code == 422 and "duplicate key 'scopes'" in answer.text
    assert service.count("api_token") == tokens_before
    answer = service.client.put(
        "/api/v1/policies/prod",
        content=b'{"apiVersion": "gpuprov.dev/v1", "kind": "PromotionPolicy", "name": "prod",'
        b' "rules": {}, "rules": {"integrity": {}}}',
        headers=auth(admin, **JSON),
    )
    assert answer.status_code == 422 and "duplicate key 'rules'" in answer.text
    trust = catalogs.policy_yaml(("nvidia", NVIDIA))
    put = service.client.put(
        "/api/v1/trust-policy", content=trust.encode(), headers=auth(admin, **catalogs.YAML)
    )
    assert put.status_code == 201, put.text
    envelope = catalogs.signed(catalogs.catalog_from_bom(boms.gpuprov_bom(), "golden"), NVIDIA)
    doc = envelope.decode().strip()
    answer = service.client.post(
        "/api/v1/catalogs",
        content=(doc[:-1] + ", " + doc[1:]).encode(),
        headers=auth(admin, **JSON),
    )
    assert answer.status_code == 422 and "duplicate key 'payloadType'" in answer.text
    assert service.count("reference_catalog") == 0


def test_no_body_is_parsed_by_fastapi(service: Service) -> None:
    """FastAPI parses a model body with `json.loads` (the last of two keys wins, ``NaN``
    passes) and before any dependency runs (before the caller is known: issue 17 §2). Every
    body is read by a dependency after authorization instead, JSON ones with `load_json`."""
    served = served_routes(service.client.app.routes)  # type: ignore[attr-defined]
    routes = [getattr(r, "original_route", r) for r in served]
    routes = [r for r in routes if isinstance(r, APIRoute)]
    assert len(routes) >= 30, "too few routes: the check below checks nothing"
    assert [r.path for r in routes if r.body_field is not None] == []


# -- at most once, under concurrency ----------------------------------------------------------


def _race(count: int, call: Callable[[], Any]) -> list[Any]:
    barrier = threading.Barrier(count)
    answers: list[Any] = []
    lock = threading.Lock()

    def run() -> None:
        barrier.wait()
        try:
            result: Any = call()
        except Exception as e:  # noqa: BLE001 - the domain's refusal is the answer here
            result = e
        with lock:
            answers.append(result)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def test_concurrent_rotations_of_one_token_make_one_successor(service: Service) -> None:
    """On PostgreSQL six concurrent rotations answered six 201s and left five live successors
    that nothing linked; the documented answer to "already rotated" is 409."""
    admin = auth(service.token("admin", name="admin"))
    agent = service.client.post(
        "/api/v1/tokens", json={"name": "agent", "scopes": ["report:write"]}, headers=admin
    ).json()
    before = service.count("api_token")
    answers = _race(
        6, lambda: service.client.post(f"/api/v1/tokens/{agent['id']}/rotate", headers=admin)
    )
    assert sorted(a.status_code for a in answers) == [201] + [409] * 5
    assert service.count("api_token") == before + 1
    new = next(a.json() for a in answers if a.status_code == 201)
    listed = service.client.get("/api/v1/tokens", headers=admin).json()["items"]
    old = next(t for t in listed if t["id"] == agent["id"])
    assert old["replaced_by"] == new["id"] and old["revoked_at"] is not None
    events = service.client.get("/api/v1/audit?action=token.rotate", headers=admin).json()
    assert events["total"] == 1


def test_concurrent_domain_rotations_and_revocations_happen_once(service: Service) -> None:
    """The same with each caller in its own session and transaction (as `gpuprov token` on one
    database and the API on another machine would be)."""
    with service.db.transaction(write=True) as session:
        rotated = tokens.create_token(session, "agent", ["report:write"]).token.id
        revoked = tokens.create_token(session, "old", ["gate"]).token.id
    actor = Actor("cli", "cli:test")

    def rotate() -> int:
        with service.db.transaction(write=True) as session:
            return tokens.rotate_token(session, rotated, actor=actor).token.id

    def revoke() -> None:
        with service.db.transaction(write=True) as session:
            tokens.revoke_token(session, revoked, actor)

    results = _race(6, rotate)
    assert sum(isinstance(r, int) for r in results) == 1
    assert all(isinstance(r, Conflict) for r in results if not isinstance(r, int))
    assert _race(6, revoke) == [None] * 6  # idempotent: every caller sees it revoked ...
    with service.db.session() as session:
        actions = session.execute(text("SELECT action FROM audit_event")).scalars().all()
    assert sorted(actions) == ["token.revoke", "token.rotate"]  # ... and it is recorded once
    assert service.count("api_token") == 3


def test_concurrent_identical_policy_and_catalog_stores_store_once(service: Service) -> None:
    """The other documented "same again: 200, nothing stored" changes, raced the same way."""
    admin = service.token("admin", name="admin")
    answers = _race(4, lambda: put_policy(service, VALID, admin))
    assert sorted(a.status_code for a in answers) == [200, 200, 200, 201]
    assert service.count("promotion_policy") == 1
    trust = catalogs.policy_yaml(("nvidia", NVIDIA)).encode()
    stored = service.client.put(
        "/api/v1/trust-policy", content=trust, headers=auth(admin, **catalogs.YAML)
    )
    assert stored.status_code == 201  # each PUT of a trust policy is a version (documented)
    envelope = catalogs.signed(catalogs.catalog_from_bom(boms.gpuprov_bom(), "golden"), NVIDIA)
    answers = _race(
        4,
        lambda: service.client.post(
            "/api/v1/catalogs", content=envelope, headers=auth(admin, **JSON)
        ),
    )
    assert sorted(a.status_code for a in answers) == [200, 200, 200, 201]
    assert service.count("reference_catalog") == 1
