"""Who may change promotion policies (docs/sso.md "Who changes policies"): policies are global,
so the ``policy:write`` scope is held by admins and by analysts in no team (fleet-wide); a team's
analyst reads policies and is refused writes with the reason, as is a viewer. Through the
dashboard's form (people signed in with a provider, on loopback) and the API (service tokens
given ``policy:write``), audited as the real caller; on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.domain.audit import cli_actor
from app.domain.teams import check_team, put_team
from app.domain.tokens import create_token
from app.main import create_app
from app.storage.tables import AuditEvent, PromotionPolicyVersion
from tests.app.conftest import Service, auth
from tests.app.pages import csrf_of, login
from tests.app.test_sso import _callback, sso_settings
from tests.fixtures.oidc import FakeProvider

DOCUMENT = (
    "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: {name}\nrules:\n  ownership: {{}}\n"
)
YAML = {"Content-Type": "application/yaml"}
_NAV_TABS = re.compile(r'<nav class="tabs" aria-label="admin">(.*?)</nav>', re.S)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def _ml_team(service: Service) -> None:
    with service.db.transaction(write=True) as session:
        put_team(
            session, "ml", check_team({"labels": {"team": "ml"}, "groups": ["ml-eng"]}), cli_actor()
        )


def _signed_in(
    service: Service, fake: FakeProvider, groups: list[str], **settings: Any
) -> TestClient:
    """A browser signed in through the (fake) provider with these groups."""
    fake.discovery = {}
    app = create_app(sso_settings(service.url, fake.issuer, "http://127.0.0.1", **settings))
    client = TestClient(app, base_url="http://127.0.0.1")
    client.__enter__()
    answer = _callback(client, fake, lambda nonce: fake.id_token(nonce, groups=groups))
    assert answer.status_code == 303, answer.text
    return client


def _stored(service: Service, name: str) -> list[PromotionPolicyVersion]:
    with service.db.session() as session:
        return list(
            session.scalars(
                select(PromotionPolicyVersion).where(PromotionPolicyVersion.name == name)
            )
        )


def _policy_events(service: Service) -> list[AuditEvent]:
    with service.db.session() as session:
        return list(
            session.scalars(
                select(AuditEvent).where(AuditEvent.action == "policy.put").order_by(AuditEvent.id)
            )
        )


def _post_policy(client: TestClient, csrf: str, name: str) -> Any:
    return client.post(
        "/admin/policies", data={"csrf_token": csrf, "document": DOCUMENT.format(name=name)}
    )


def test_an_analyst_in_no_team_stores_a_policy_with_the_form(
    service: Service, fake: FakeProvider
) -> None:
    client = _signed_in(service, fake, ["gpuprov-analysts"])
    try:
        listing = client.get("/policies")
        assert listing.status_code == 200 and 'href="/admin/policies"' in listing.text
        form = client.get("/admin/policies")
        assert form.status_code == 200, form.text
        # the policy form's tab only: the other admin pages stay the admins'
        tabs = _NAV_TABS.search(form.text)
        assert tabs is not None and "/admin/policies" in tabs.group(1)
        assert "/admin/tokens" not in tabs.group(1) and "/admin/group-mappings" not in tabs.group(1)
        assert 'href="/admin"' not in form.text  # the navigation bar's Admin entry is the admins'
        for page in ("/admin", "/admin/trust-policy", "/admin/tokens", "/admin/group-mappings"):
            assert client.get(page).status_code == 403, page
        refused = client.post("/admin/policies", data={"document": DOCUMENT.format(name="edge")})
        assert refused.status_code == 403  # no CSRF token
        stored = _post_policy(client, csrf_of(form.text), "edge")
        assert stored.status_code == 200 and "Stored edge version 1." in stored.text, stored.text
        assert client.get("/policies/edge").text.count("Store a new version of edge") == 1
    finally:
        client.__exit__(None, None, None)
    rows = _stored(service, "edge")
    assert [(r.version, r.created_by, r.token_id) for r in rows] == [(1, "fake@example.com", None)]
    [event] = _policy_events(service)
    # the person who stored it, as the provider names them
    assert (event.source, event.actor, event.actor_token_id) == ("web", "fake@example.com", None)
    assert (event.actor_issuer, event.actor_subject) == (fake.issuer, "fake-user-1")
    assert event.target == "policy:edge@1"


@pytest.mark.parametrize(
    ("groups", "roles"),
    [
        (["gpuprov-analysts", "ml-eng"], None),  # a team naming the group
        (["ml-analysts"], {"ml-analysts": {"role": "analyst", "team": "ml"}}),  # the mapping
    ],
)
def test_a_teams_analyst_reads_policies_and_is_told_why_not_to_write(
    service: Service, fake: FakeProvider, groups: list[str], roles: dict[str, Any] | None
) -> None:
    _ml_team(service)
    admin = service.token("admin", name="admin")
    put = service.client.put(
        "/api/v1/policies/prod", content=DOCUMENT.format(name="prod"), headers=auth(admin, **YAML)
    )
    assert put.status_code == 201, put.text
    extra = {"oidc_roles": roles} if roles else {}
    client = _signed_in(service, fake, groups, **extra)
    try:
        listing = client.get("/policies")
        assert listing.status_code == 200 and "prod" in listing.text
        assert 'href="/admin/policies"' not in listing.text
        assert client.get("/policies/prod").status_code == 200
        assert "Store a new version" not in client.get("/policies/prod").text
        refused = client.get("/admin/policies")
        assert refused.status_code == 403
        assert "policies are global" in refused.text and "team ml" in refused.text
        csrf = csrf_of(client.get("/").text)
        posted = _post_policy(client, csrf, "prod")
        assert posted.status_code == 403 and "policies are global" in posted.text
    finally:
        client.__exit__(None, None, None)
    assert [r.version for r in _stored(service, "prod")] == [1]
    assert len(_policy_events(service)) == 1  # the admin's


def test_a_viewer_may_not_write_policies(service: Service, fake: FakeProvider) -> None:
    client = _signed_in(service, fake, ["gpuprov-viewers"])
    try:
        refused = client.get("/admin/policies")
        assert refused.status_code == 403 and "policy:write" in refused.text
        posted = _post_policy(client, csrf_of(client.get("/").text), "edge")
        assert posted.status_code == 403
        assert 'href="/admin/policies"' not in client.get("/policies").text
    finally:
        client.__exit__(None, None, None)
    assert _stored(service, "edge") == []


def test_an_analyst_in_no_team_who_sees_no_asset_is_no_policy_writer(
    service: Service, fake: FakeProvider
) -> None:
    """With GPUPROV_TEAMLESS_ACCESS=none a person in no team sees nothing: such an analyst is
    not fleet-wide (leaving a team's group must never earn a write on every team's gate)."""
    client = _signed_in(service, fake, ["gpuprov-analysts"], teamless_access="none")
    try:
        refused = client.get("/admin/policies")
        assert refused.status_code == 403
        assert "GPUPROV_TEAMLESS_ACCESS=none" in refused.text
    finally:
        client.__exit__(None, None, None)


def test_a_policy_write_token_stores_policies_and_nothing_else(service: Service) -> None:
    writer = service.token("policy:write", name="policy-bot")
    client = service.client
    put = client.put(
        "/api/v1/policies/edge", content=DOCUMENT.format(name="edge"), headers=auth(writer, **YAML)
    )
    assert put.status_code == 201, put.text
    assert put.json()["created_by"] == "policy-bot"
    [event] = _policy_events(service)
    assert (event.source, event.actor) == ("api", "policy-bot")
    assert event.actor_token_id is not None
    # policy:write is no other scope: it reads nothing, and the trust policy stays the admins'
    assert client.get("/api/v1/policies", headers=auth(writer)).status_code == 403
    trust = client.put("/api/v1/trust-policy", content=b"x", headers=auth(writer, **YAML))
    assert trust.status_code == 403 and "admin" in trust.json()["error"]["message"]
    # nor does it open the dashboard (its login needs inventory:read)
    browser = TestClient(service.client.app)
    assert login(browser, writer).status_code == 403


@pytest.mark.parametrize("scopes", [["inventory:read"], ["triage"], ["gate", "report:write"]])
def test_tokens_without_policy_write_are_refused_with_the_scope_named(
    service: Service, scopes: list[str]
) -> None:
    token = service.token(*scopes)
    answer = service.client.put(
        "/api/v1/policies/edge", content=DOCUMENT.format(name="edge"), headers=auth(token, **YAML)
    )
    assert answer.status_code == 403
    assert "policy:write" in answer.json()["error"]["message"]
    assert _stored(service, "edge") == []


def test_a_team_token_is_refused_writes_and_cannot_hold_policy_write(service: Service) -> None:
    _ml_team(service)
    with service.db.transaction(write=True) as session:
        analyst = create_token(session, "ml-analyst", ["inventory:read", "triage"], team="ml")
    answer = service.client.put(
        "/api/v1/policies/edge",
        content=DOCUMENT.format(name="edge"),
        headers=auth(analyst.secret, **YAML),
    )
    assert answer.status_code == 403
    message = answer.json()["error"]["message"]
    assert "policies are global" in message and "team ml" in message
    admin = service.token("admin", name="admin")
    body = {"name": "ml-writer", "scopes": ["policy:write"], "team": "ml"}
    created = service.client.post("/api/v1/tokens", json=body, headers=auth(admin))
    assert created.status_code == 422
    assert "cannot belong to a team" in created.json()["error"]["message"]
    fleet_wide = {"name": "writer", "scopes": ["policy:write", "inventory:read"]}
    created = service.client.post("/api/v1/tokens", json=fleet_wide, headers=auth(admin))
    assert created.status_code == 201 and created.json()["scopes"] == [
        "inventory:read",
        "policy:write",
    ]


def test_the_cli_makes_a_policy_write_token(service: Service) -> None:
    from tests.app.test_cli import _run

    create = ("token", "create", "--scope", "policy:write", "--database-url", service.url)
    code, out, err = _run(*create, "--name", "policy-cli")
    assert code == 0, err
    secret = out.strip().splitlines()[-1]
    put = service.client.put(
        "/api/v1/policies/edge", content=DOCUMENT.format(name="edge"), headers=auth(secret, **YAML)
    )
    assert put.status_code == 201, put.text
    _ml_team(service)
    code, _, err = _run(*create, "--name", "x", "--team", "ml")
    assert code == 2 and "cannot belong to a team" in err


def test_the_token_form_offers_policy_write(service: Service) -> None:
    client = TestClient(service.client.app)
    assert login(client, service.token("admin", name="web-admin")).status_code == 303
    page = client.get("/admin/tokens")
    assert 'name="scope_policy_write"' in page.text
    form = {
        "csrf_token": csrf_of(page.text),
        "name": "policy-web",
        "scope_policy_write": "1",
        "expires": "",
    }
    created = client.post("/admin/tokens", data=form)
    assert created.status_code == 200 and "gpv_" in created.text, created.text
