"""Group mappings stored by admins (docs/sso.md "Group mappings"): the API and the admin page
(CSRF, audited), the configuration's mappings shown read-only and never stored over (409), and
the effective mapping at sign-in and on every page of a signed-in person: a stored mapping gives
access, removing it removes the access at the next page and at the next sign-in, with no mapping
at all nobody has access. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.domain.audit import cli_actor
from app.domain.teams import check_team, put_team
from app.main import create_app
from app.storage.tables import AuditEvent
from tests.app.conftest import Service, auth
from tests.app.pages import csrf_of, login
from tests.app.test_sso import ML_IMAGE, OTHER_IMAGE, _callback, _team_fleet, sso_settings
from tests.fixtures.oidc import FakeProvider

CONFIGURED = {"gpuprov-admins": "admin", "cfg-ml": {"role": "viewer", "team": "ml"}}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def site(service: Service, fake: FakeProvider) -> Iterator[TestClient]:
    """The service with single sign-on whose configuration maps `CONFIGURED` (the shared
    service's database)."""
    fake.discovery = {}
    settings = sso_settings(service.url, fake.issuer, "http://127.0.0.1", oidc_roles=CONFIGURED)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
def bare(service: Service, fake: FakeProvider) -> Iterator[TestClient]:
    """The service with single sign-on and no group mapped in the configuration at all."""
    fake.discovery = {}
    settings = sso_settings(service.url, fake.issuer, "http://127.0.0.1", oidc_roles={})
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client


def _events(service: Service) -> list[AuditEvent]:
    with service.db.session() as session:
        return list(
            session.scalars(
                select(AuditEvent)
                .where(AuditEvent.action.in_(["group_mapping.put", "group_mapping.delete"]))
                .order_by(AuditEvent.id)
            )
        )


def _sign_in(client: TestClient, fake: FakeProvider, groups: list[str]) -> Any:
    client.cookies.clear()
    return _callback(client, fake, lambda nonce: fake.id_token(nonce, groups=groups))


# -- the API ---------------------------------------------------------------------------------


def test_the_api_stores_reads_replaces_and_removes_a_mapping(
    service: Service, site: TestClient
) -> None:
    with service.db.transaction(write=True) as session:
        put_team(session, "ml", check_team({"labels": {"team": "ml"}}), cli_actor())
    admin = auth(service.token("admin", name="api-admin"))
    url = "/api/v1/group-mappings/Security Analysts"
    created = site.put(url, json={"role": "analyst", "team": "ml"}, headers=admin)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/api/v1/group-mappings/Security%20Analysts"
    body = created.json()
    assert (body["group"], body["role"], body["team"], body["source"]) == (
        "Security Analysts",
        "analyst",
        "ml",
        "database",
    )
    assert body["in_effect"] is True and body["created_at"] is not None
    replaced = site.put(url, json={"role": "viewer"}, headers=admin)
    assert replaced.status_code == 200 and replaced.json()["team"] is None
    assert site.get(url, headers=admin).json()["role"] == "viewer"
    listing = site.get("/api/v1/group-mappings", headers=admin).json()["items"]
    assert [(m["group"], m["source"], m["in_effect"]) for m in listing] == [
        ("Security Analysts", "database", True),
        ("cfg-ml", "configuration", True),
        ("gpuprov-admins", "configuration", True),
    ]
    removed = site.delete(url, headers=admin)
    assert removed.status_code == 200 and removed.json()["role"] == "viewer"
    assert site.get(url, headers=admin).status_code == 404
    assert site.delete(url, headers=admin).status_code == 404
    events = _events(service)
    assert [(e.action, e.actor, e.source, e.target) for e in events] == [
        ("group_mapping.put", "api-admin", "api", "group:Security Analysts"),
        ("group_mapping.put", "api-admin", "api", "group:Security Analysts"),
        ("group_mapping.delete", "api-admin", "api", "group:Security Analysts"),
    ]
    assert events[0].details == {"role": "analyst", "team": "ml", "before": None}
    assert events[1].details["before"] == {"role": "analyst", "team": "ml"}


def test_a_configured_group_is_read_only(service: Service, site: TestClient) -> None:
    admin = auth(service.token("admin"))
    for group in ("gpuprov-admins", "cfg-ml"):
        put = site.put(f"/api/v1/group-mappings/{group}", json={"role": "viewer"}, headers=admin)
        assert put.status_code == 409
        assert "GPUPROV_OIDC_ROLES" in put.json()["error"]["message"]
        gone = site.delete(f"/api/v1/group-mappings/{group}", headers=admin)
        assert gone.status_code == 409 and "GPUPROV_OIDC_ROLES" in gone.text
    shown = site.get("/api/v1/group-mappings/cfg-ml", headers=admin).json()
    assert (shown["role"], shown["team"], shown["source"]) == ("viewer", "ml", "configuration")
    assert shown["created_at"] is None
    assert _events(service) == []


def test_a_stored_mapping_the_configuration_names_later_is_not_in_effect(
    service: Service, fake: FakeProvider, bare: TestClient
) -> None:
    admin = auth(service.token("admin"))
    put = bare.put("/api/v1/group-mappings/cfg-ml", json={"role": "admin"}, headers=admin)
    assert put.status_code == 201
    # the configuration maps the group since: its mapping, not the stored admin, is in effect
    settings = sso_settings(service.url, fake.issuer, "http://127.0.0.1", oidc_roles=CONFIGURED)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        listing = client.get("/api/v1/group-mappings", headers=admin).json()["items"]
        cfg = [(m["source"], m["role"], m["in_effect"]) for m in listing if m["group"] == "cfg-ml"]
        assert cfg == [("configuration", "viewer", True), ("database", "admin", False)]
        assert client.get("/api/v1/group-mappings/cfg-ml", headers=admin).json()["role"] == "viewer"
        assert _sign_in(client, fake, ["cfg-ml"]).status_code == 303
        assert client.get("/admin").status_code == 403  # a viewer, not the stored admin
        # the stored row can still be removed (it is not the configuration's)
        assert client.delete("/api/v1/group-mappings/cfg-ml", headers=admin).status_code == 200


@pytest.mark.parametrize(
    ("group", "body", "status", "said"),
    [
        ("g", {"role": "root"}, 422, "role"),
        ("g", {"role": "viewer", "team": "nope"}, 422, "no team named 'nope'"),
        ("g", {"role": "admin", "team": "ml"}, 422, "has no team"),
        ("g", {"role": "viewer", "extra": 1}, 422, "extra"),
        ("g", {}, 422, "role"),
        (" g", {"role": "viewer"}, 400, "/path/name"),
        ("g" * 257, {"role": "viewer"}, 400, "/path/name"),
    ],
)
def test_bad_mappings_are_refused(
    service: Service, site: TestClient, group: str, body: dict[str, Any], status: int, said: str
) -> None:
    with service.db.transaction(write=True) as session:
        put_team(session, "ml", check_team({"labels": {"team": "ml"}}), cli_actor())
    admin = auth(service.token("admin"))
    answer = site.put(f"/api/v1/group-mappings/{group}", json=body, headers=admin)
    assert answer.status_code == status, answer.text
    assert said in answer.text
    assert _events(service) == []


def test_only_admins_map_groups(service: Service, site: TestClient) -> None:
    for scope in ("inventory:read", "triage", "policy:write"):
        token = auth(service.token(scope))
        put = site.put("/api/v1/group-mappings/g", json={"role": "admin"}, headers=token)
        assert put.status_code == 403 and "admin" in put.json()["error"]["message"]
        assert site.get("/api/v1/group-mappings", headers=token).status_code == 403
    assert site.put("/api/v1/group-mappings/g", json={"role": "admin"}).status_code == 401


# -- sign-in and sessions ----------------------------------------------------------------------


def test_with_no_mapping_at_all_nobody_signs_in(
    service: Service, fake: FakeProvider, bare: TestClient
) -> None:
    answer = _sign_in(bare, fake, ["gpuprov-admins", "anyone"])
    assert answer.status_code == 403 and "no access" in answer.text
    assert bare.get("/assets", follow_redirects=False).status_code == 303


def test_a_stored_mapping_gives_access_and_removing_it_removes_it_at_the_next_page(
    service: Service, fake: FakeProvider, bare: TestClient
) -> None:
    admin = auth(service.token("admin"))
    assert _sign_in(bare, fake, ["db-analysts"]).status_code == 403  # not mapped yet
    put = bare.put("/api/v1/group-mappings/db-analysts", json={"role": "analyst"}, headers=admin)
    assert put.status_code == 201
    signed = _sign_in(bare, fake, ["db-analysts", "staff"])
    assert signed.status_code == 303, signed.text
    page = bare.get("/assets")
    assert page.status_code == 200 and "fake@example.com · analyst" in page.text
    # a lower role stored: the next page has it
    put = bare.put("/api/v1/group-mappings/db-analysts", json={"role": "viewer"}, headers=admin)
    assert put.status_code == 200
    assert "fake@example.com · viewer" in bare.get("/assets").text
    assert bare.get("/admin/policies").status_code == 403
    # a higher one: never more than the sign-in gave (admin waits for the provider's word)
    put = bare.put("/api/v1/group-mappings/db-analysts", json={"role": "admin"}, headers=admin)
    assert "fake@example.com · analyst" in bare.get("/assets").text
    assert bare.get("/admin").status_code == 403
    # removed: the session ends at its next page, saying why
    assert bare.delete("/api/v1/group-mappings/db-analysts", headers=admin).status_code == 200
    ended = bare.get("/assets", follow_redirects=False)
    assert ended.status_code == 303
    assert ended.headers["location"] == "/login?next=%2Fassets&ended=access-removed"
    # and the next sign-in (the refresh at the provider) finds no access
    refreshed = _sign_in(bare, fake, ["db-analysts", "staff"])
    assert refreshed.status_code == 403 and "no access" in refreshed.text


def test_removing_a_mapping_removes_access_at_the_next_refresh(
    service: Service, fake: FakeProvider, bare: TestClient
) -> None:
    """The refresh path: a session due for the provider's word signs in again there (without
    a form), and the mapping in effect then decides."""
    from datetime import timedelta

    from sqlalchemy import update

    from app.clock import utcnow
    from app.storage.tables import WebSession

    admin = auth(service.token("admin"))
    bare.put("/api/v1/group-mappings/db-viewers", json={"role": "viewer"}, headers=admin)
    assert _sign_in(bare, fake, ["db-viewers"]).status_code == 303
    with service.db.transaction(write=True) as session:
        session.execute(update(WebSession).values(verified_at=utcnow() - timedelta(hours=1)))
    due = bare.get("/assets", follow_redirects=False)
    assert due.status_code == 303 and due.headers["location"] == "/login/sso?next=%2Fassets"
    assert bare.delete("/api/v1/group-mappings/db-viewers", headers=admin).status_code == 200
    # the provider answers the refresh with the same groups: they map to nothing now
    refreshed = _callback(bare, fake, lambda nonce: fake.id_token(nonce, groups=["db-viewers"]))
    assert refreshed.status_code == 403 and "no access" in refreshed.text
    assert bare.get("/assets", follow_redirects=False).status_code == 303


def test_a_stored_mapping_with_a_team_confines_to_the_team(
    service: Service, fake: FakeProvider, bare: TestClient
) -> None:
    _team_fleet(service)
    admin = auth(service.token("admin"))
    body = {"role": "viewer", "team": "ml"}
    assert (
        bare.put("/api/v1/group-mappings/ml-readers", json=body, headers=admin).status_code == 201
    )
    assert _sign_in(bare, fake, ["ml-readers"]).status_code == 303
    page = bare.get("/assets").text.replace("<wbr>", "")
    assert ML_IMAGE in page and OTHER_IMAGE not in page
    assert "fake@example.com · viewer · team ml" in page
    # the team is the mapping's: a mapping without it gives the whole fleet from the next page
    body = {"role": "viewer"}
    assert (
        bare.put("/api/v1/group-mappings/ml-readers", json=body, headers=admin).status_code == 200
    )
    page = bare.get("/assets").text.replace("<wbr>", "")
    assert ML_IMAGE in page and OTHER_IMAGE in page and "team ml" not in page


# -- the admin page ----------------------------------------------------------------------------


def test_the_admin_page_maps_groups_with_csrf_and_audit(service: Service, site: TestClient) -> None:
    with service.db.transaction(write=True) as session:
        put_team(session, "ml", check_team({"labels": {"team": "ml"}}), cli_actor())
    assert login(site, service.token("admin", name="web-admin")).status_code == 303
    page = site.get("/admin/group-mappings")
    assert page.status_code == 200
    # the configuration's mappings: shown, read-only (no remove form)
    assert "<code>gpuprov-admins</code>" in page.text and "(read-only)" in page.text
    assert "/admin/group-mappings/gpuprov-admins/delete" not in page.text
    csrf = csrf_of(page.text)
    form = {"group": "Security Analysts", "role": "analyst", "team": "ml"}
    assert site.post("/admin/group-mappings", data=form).status_code == 403  # no CSRF token
    stored = site.post("/admin/group-mappings", data={**form, "csrf_token": csrf})
    assert stored.status_code == 200, stored.text
    assert "Stored the mapping of group Security Analysts: analyst in team ml." in stored.text
    assert 'action="/admin/group-mappings/Security%20Analysts/delete"' in stored.text
    clash = site.post(
        "/admin/group-mappings", data={"group": "cfg-ml", "role": "admin", "csrf_token": csrf}
    )
    assert clash.status_code == 409 and "GPUPROV_OIDC_ROLES" in clash.text
    bad = site.post(
        "/admin/group-mappings", data={"group": "x", "role": "root", "csrf_token": csrf}
    )
    assert bad.status_code == 422 and "is not one of" in bad.text
    teams_page = site.get("/admin/teams").text
    assert "<code>Security Analysts</code>" in teams_page and "stored" in teams_page
    refused = site.post("/admin/group-mappings/Security%20Analysts/delete", data={"x": "1"})
    assert refused.status_code == 403  # no CSRF token
    removed = site.post(
        "/admin/group-mappings/Security%20Analysts/delete", data={"csrf_token": csrf}
    )
    assert removed.status_code == 200
    assert "Removed the mapping of group Security Analysts." in removed.text
    configured = site.post("/admin/group-mappings/cfg-ml/delete", data={"csrf_token": csrf})
    assert configured.status_code == 409
    events = _events(service)
    assert [(e.action, e.actor, e.source) for e in events] == [
        ("group_mapping.put", "web-admin", "web"),
        ("group_mapping.delete", "web-admin", "web"),
    ]
    assert all(e.actor_token_id is not None for e in events)


def test_the_admin_page_is_for_admins_only(service: Service, site: TestClient) -> None:
    assert login(site, service.token("inventory:read", "triage")).status_code == 303
    assert site.get("/admin/group-mappings").status_code == 403
    csrf = csrf_of(site.get("/").text)
    posted = site.post(
        "/admin/group-mappings", data={"group": "g", "role": "admin", "csrf_token": csrf}
    )
    assert posted.status_code == 403
    assert _events(service) == []
