"""Teams and asset scopes: the admin API (audited), a team token's reads confined to its scope
(404 outside it, never 403), scoping labels only admins assign, and the relabelling attack: an
agent, a team token or a CI-style writer cannot move an asset into or out of a team's view by
the labels of its report. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.domain.tokens import create_token
from app.storage.tables import AuditEvent
from tests.app import boms
from tests.app.conftest import JSON_HEADERS, Service, auth
from tests.app.pages import csrf_of, login
from tests.app.test_auth import PROMOTION

ML_IMAGE = "registry.example.com/ml/train:1.0"
PROD_IMAGE = "registry.example.com/prod/serve:2.0"


def _admin(service: Service) -> dict[str, str]:
    return auth(service.token("admin", name="root"))


def _team_token(service: Service, team: str, *scopes: str, name: str = "team-token") -> str:
    with service.db.transaction(write=True) as session:
        return create_token(session, name, list(scopes), team=team).secret


def _push(service: Service, token: str, name: str, **params: Any) -> Any:
    labels = params.pop("report_labels", None)
    body = boms.encode(boms.gpuprov_bom(name=name, labels=labels))
    return service.client.post(
        "/api/v1/reports", content=body, params=params, headers=auth(token, **JSON_HEADERS)
    )


def _put_team(service: Service, admin: dict[str, str], name: str, body: dict[str, Any]) -> Any:
    return service.client.put(f"/api/v1/teams/{name}", json=body, headers=admin)


def _assign(service: Service, admin: dict[str, str], asset_id: int, **labels: str) -> None:
    answer = service.client.put(
        f"/api/v1/assets/{asset_id}/labels", json={"labels": labels}, headers=admin
    )
    assert answer.status_code == 200, answer.text


@pytest.fixture
def fleet(service: Service) -> dict[str, Any]:
    """Two teams (ml and prod, by the scoping label ``team``), one image each, and an image of
    nobody's; the ids and an admin's headers."""
    admin = _admin(service)
    agent = service.token("report:write", name="agent")
    ids = {}
    for name in (ML_IMAGE, PROD_IMAGE, "registry.example.com/lab/toy:0.1"):
        answer = _push(service, agent, name)
        assert answer.status_code == 201, answer.text
        ids[name] = answer.json()["asset_id"]
    for team in ("ml", "prod"):
        assert _put_team(service, admin, team, {"labels": {"team": team}}).status_code == 201
    _assign(service, admin, ids[ML_IMAGE], team="ml")
    _assign(service, admin, ids[PROD_IMAGE], team="prod")
    return {"admin": admin, "agent": agent, "ids": ids}


def _names(answer: Any) -> set[str]:
    assert answer.status_code == 200, answer.text
    return {item["name"] for item in answer.json()["items"]}


def test_the_team_api_is_admin_only_and_audited(service: Service) -> None:
    admin = _admin(service)
    body = {"labels": {"team": "ml"}, "names": ["ml-*"], "groups": ["ml-eng"]}
    created = _put_team(service, admin, "ml", body)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/api/v1/teams/ml"
    assert created.json()["labels"] == {"team": "ml"} and created.json()["groups"] == ["ml-eng"]
    replaced = _put_team(service, admin, "ml", {**body, "groups": []})
    assert replaced.status_code == 200 and replaced.json()["groups"] == []
    assert service.client.get("/api/v1/teams/ml", headers=admin).json()["names"] == ["ml-*"]
    assert [
        t["name"] for t in service.client.get("/api/v1/teams", headers=admin).json()["items"]
    ] == ["ml"]
    reader = auth(service.token("inventory:read"))
    assert _put_team(service, reader, "x", body).status_code == 403
    assert service.client.get("/api/v1/teams/ml", headers=reader).status_code == 403
    assert service.client.delete("/api/v1/teams/ml", headers=admin).status_code == 200
    assert service.client.get("/api/v1/teams/ml", headers=admin).status_code == 404
    with service.db.session() as session:
        events = session.scalars(
            select(AuditEvent).where(AuditEvent.target == "team:ml").order_by(AuditEvent.id)
        ).all()
    assert [e.action for e in events] == ["team.put", "team.put", "team.delete"]
    assert all((e.source, e.actor) == ("api", "root") for e in events)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "needs an asset scope"),
        ({"labels": {}, "names": []}, "needs an asset scope"),
        ({"names": ["ml-[ab]"]}, "* and ? only"),
        ({"labels": {"bad key!": "x"}}, "label key"),
        ({"labels": {"team": "ml"}, "users": [{"issuer": "x"}]}, "issuer"),
        ({"labels": {"team": "ml"}, "extra": 1}, "unknown team fields"),
    ],
)
def test_a_team_without_a_usable_scope_is_refused(
    service: Service, body: dict[str, Any], message: str
) -> None:
    answer = _put_team(service, _admin(service), "ml", body)
    assert answer.status_code == 422 and message in answer.json()["error"]["message"], answer.text


def test_a_team_token_reads_only_its_scope(service: Service, fleet: dict[str, Any]) -> None:
    ids = fleet["ids"]
    reader = auth(_team_token(service, "ml", "inventory:read"))
    assert _names(service.client.get("/api/v1/assets", headers=reader)) == {ML_IMAGE}
    assert service.client.get(f"/api/v1/assets/{ids[ML_IMAGE]}", headers=reader).status_code == 200
    for path in ("", "/sbom", "/vulnerabilities"):
        for asset in (PROD_IMAGE, "registry.example.com/lab/toy:0.1"):
            answer = service.client.get(f"/api/v1/assets/{ids[asset]}{path}", headers=reader)
            assert answer.status_code == 404, (path, answer.text)
    # the same 404 as an id no asset has: nothing tells another team's asset exists
    missing = service.client.get("/api/v1/assets/999999", headers=reader).json()
    hidden = service.client.get(f"/api/v1/assets/{ids[PROD_IMAGE]}", headers=reader).json()
    assert missing["error"]["message"].replace("999999", "") == hidden["error"]["message"].replace(
        str(ids[PROD_IMAGE]), ""
    )
    used = service.client.get("/api/v1/where-used", params={"family": "cudnn"}, headers=reader)
    assert {i["asset"]["name"] for i in used.json()["items"]} == {ML_IMAGE}
    libraries = service.client.get("/api/v1/libraries", headers=reader).json()["items"]
    assert libraries and all(row["assets"] == 1 for row in libraries)
    export = service.client.get("/api/v1/inventory/export", headers=reader)
    assert ML_IMAGE in export.text and PROD_IMAGE not in export.text
    admin = fleet["admin"]
    everything = service.client.get("/api/v1/assets", headers=admin)
    assert _names(everything) == set(ids)


def test_a_user_in_no_team_and_an_admin_see_the_whole_fleet(
    service: Service, fleet: dict[str, Any]
) -> None:
    plain = auth(service.token("inventory:read", name="no-team"))
    assert _names(service.client.get("/api/v1/assets", headers=plain)) == set(fleet["ids"])


def test_a_name_pattern_scope_is_case_sensitive_and_anchored(
    service: Service, fleet: dict[str, Any]
) -> None:
    admin = fleet["admin"]
    body = {"names": ["registry.example.com/ml/*", "registry.example.com/lab/to?:0.1"]}
    assert _put_team(service, admin, "by-name", body).status_code == 201
    agent = fleet["agent"]
    assert _push(service, agent, "REGISTRY.example.com/ml/upper:1").status_code == 201
    assert _push(service, agent, "x.registry.example.com/ml/prefixed:1").status_code == 201
    reader = auth(_team_token(service, "by-name", "inventory:read"))
    assert _names(service.client.get("/api/v1/assets", headers=reader)) == {
        ML_IMAGE,
        "registry.example.com/lab/toy:0.1",
    }


def test_two_teams_see_the_union_of_their_scopes(service: Service, fleet: dict[str, Any]) -> None:
    from app.domain.teams import person_membership

    with service.db.session() as session:
        both = person_membership(session, "https://idp", "sub-1", ["g"], ["ml", "prod"])
    assert both.teams == ("ml", "prod") and both.scope is not None
    assert len(both.scope.selectors) == 2


# -- the relabelling attack ------------------------------------------------------------


def _team_of(service: Service, admin: dict[str, str], team: str) -> set[str]:
    reader = auth(_team_token(service, team, "inventory:read", name=f"reader-{team}"))
    return _names(service.client.get("/api/v1/assets", headers=reader))


@pytest.mark.parametrize("where", ["report", "parameter", "both"])
def test_an_agent_cannot_move_an_asset_between_teams_by_its_report_labels(
    service: Service, fleet: dict[str, Any], where: str
) -> None:
    admin, agent = fleet["admin"], fleet["agent"]
    params: dict[str, Any] = {}
    if where in ("report", "both"):
        params["report_labels"] = {"team": "ml", "env": "dev"}
    if where in ("parameter", "both"):
        params["label"] = ["team=ml"]
    # the prod image reported again, claiming to be ml's
    answer = _push(service, agent, PROD_IMAGE, **params)
    assert answer.status_code == 201, answer.text
    assert answer.json()["ignored_labels"] == ["team"]
    assert _team_of(service, admin, "ml") == {ML_IMAGE}
    assert _team_of(service, admin, "prod") == {PROD_IMAGE}
    # the labels everyone reads keep the admin's value; the other labels are the report's
    detail = service.client.get(f"/api/v1/assets/{fleet['ids'][PROD_IMAGE]}", headers=admin)
    labels = detail.json()["labels"]
    assert labels["team"] == "prod"
    assert labels.get("env") == ("dev" if where != "parameter" else None)


def test_a_team_token_cannot_report_into_or_out_of_another_team(
    service: Service, fleet: dict[str, Any]
) -> None:
    admin = fleet["admin"]
    ml_writer = _team_token(service, "ml", "report:write", name="ml-agent")
    # another team's asset: refused, nothing stored
    before = service.stored()
    refused = _push(service, ml_writer, PROD_IMAGE, report_labels={"team": "ml"})
    assert refused.status_code == 403, refused.text
    assert "may not report for asset" in refused.json()["error"]["message"]
    assert service.stored() == before
    # its own asset, labelled as prod's: stays ml's
    own = _push(service, ml_writer, ML_IMAGE, label=["team=prod"])
    assert own.status_code == 201 and own.json()["ignored_labels"] == ["team"]
    # a new asset joins the writer's team, whatever its report says
    new = _push(service, ml_writer, "registry.example.com/ml/new:1", report_labels={"team": "prod"})
    assert new.status_code == 201, new.text
    assert _team_of(service, admin, "ml") == {ML_IMAGE, "registry.example.com/ml/new:1"}
    assert _team_of(service, admin, "prod") == {PROD_IMAGE}
    labels = service.client.get(f"/api/v1/assets/{new.json()['asset_id']}/labels", headers=admin)
    assert labels.json()["labels"] == {"team": "ml"}


def test_a_configured_scoping_key_is_never_taken_from_a_report(
    service: Service, fleet: dict[str, Any]
) -> None:
    # GPUPROV_SCOPING_LABELS names keys no team selects on yet: a report cannot pre-label
    service.settings.scoping_labels.append("cost-center")
    try:
        answer = _push(service, fleet["agent"], ML_IMAGE, label=["cost-center=42", "tier=gold"])
    finally:
        service.settings.scoping_labels.remove("cost-center")
    assert answer.status_code == 201 and answer.json()["ignored_labels"] == ["cost-center"]
    detail = service.client.get(
        f"/api/v1/assets/{answer.json()['asset_id']}", headers=fleet["admin"]
    ).json()
    assert "cost-center" not in detail["labels"] and detail["labels"]["tier"] == "gold"


def test_scoping_labels_are_assigned_by_admins_only_and_audited(
    service: Service, fleet: dict[str, Any]
) -> None:
    asset_id = fleet["ids"][PROD_IMAGE]
    for scopes in (["report:write"], ["inventory:read"], ["gate"]):
        token = auth(service.token(*scopes, name="not-admin"))
        answer = service.client.put(
            f"/api/v1/assets/{asset_id}/labels", json={"labels": {"team": "ml"}}, headers=token
        )
        assert answer.status_code == 403, scopes
    admin = fleet["admin"]
    _assign(service, admin, asset_id, team="ml")
    assert _team_of(service, admin, "ml") == {ML_IMAGE, PROD_IMAGE}
    assert _team_of(service, admin, "prod") == set()
    _assign(service, admin, asset_id)  # none: in no label-scoped team
    assert _team_of(service, admin, "ml") == {ML_IMAGE}
    labels = service.client.get(f"/api/v1/assets/{asset_id}", headers=admin).json()["labels"]
    assert "team" not in labels
    with service.db.session() as session:
        events = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "asset.labels").order_by(AuditEvent.id)
        ).all()
    assert [e.details["labels"] for e in events][-2:] == [{"team": "ml"}, {}]
    missing = service.client.put(
        "/api/v1/assets/999999/labels", json={"labels": {"team": "ml"}}, headers=admin
    )
    assert missing.status_code == 404


def test_tokens_join_teams_through_the_api(service: Service, fleet: dict[str, Any]) -> None:
    admin = fleet["admin"]
    body = {"name": "ml-reader", "scopes": ["inventory:read"], "team": "ml"}
    created = service.client.post("/api/v1/tokens", json=body, headers=admin)
    assert created.status_code == 201 and created.json()["team"] == "ml", created.text
    reader = auth(created.json()["token"])
    assert _names(service.client.get("/api/v1/assets", headers=reader)) == {ML_IMAGE}
    for bad, status, message in (
        ({**body, "team": "nope"}, 404, "no team named"),
        ({**body, "scopes": ["admin"]}, 422, "admin token sees every asset"),
    ):
        answer = service.client.post("/api/v1/tokens", json=bad, headers=admin)
        assert answer.status_code == status and message in answer.text, answer.text
    # a team its tokens belong to cannot go (they would see everything)
    deleted = service.client.delete("/api/v1/teams/ml", headers=admin)
    assert deleted.status_code == 409 and "belong to team" in deleted.text


def test_gate_decisions_and_images_outside_the_scope_are_not_found(
    service: Service, fleet: dict[str, Any], post_report: Callable[..., Any]
) -> None:
    admin = fleet["admin"]
    put = service.client.put(
        "/api/v1/policies/prod",
        content=PROMOTION.encode(),
        headers={**admin, "Content-Type": "application/yaml"},
    )
    assert put.status_code == 201, put.text
    digest = {
        name: boms.gpuprov_bom(name=name)["metadata"]["component"]["version"]
        for name in (ML_IMAGE, PROD_IMAGE)
    }
    for name in (ML_IMAGE, PROD_IMAGE):
        gated = service.client.post(
            "/api/v1/gate", json={"policy": "prod", "image": digest[name]}, headers=admin
        )
        assert gated.status_code == 200, gated.text
    ml = auth(_team_token(service, "ml", "inventory:read", "gate", name="ml-gate"))
    decisions = service.client.get("/api/v1/gate/decisions", headers=ml).json()
    assert [d["subject"]["name"] for d in decisions["items"]] == [ML_IMAGE]
    refused = service.client.post(
        "/api/v1/gate", json={"policy": "prod", "image": digest[PROD_IMAGE]}, headers=ml
    )
    assert refused.status_code == 404, refused.text
    diff = service.client.get(
        "/api/v1/gate/diff",
        params={"from": digest[ML_IMAGE], "to": digest[PROD_IMAGE]},
        headers=ml,
    )
    assert diff.status_code == 404
    summary = service.client.get("/api/v1/compliance", params={"policy": "prod"}, headers=ml)
    assert summary.status_code == 200
    assert summary.json()["assets"]["evaluated"] + summary.json()["assets"]["outdated"] == 1


# -- the dashboard's admin page ----------------------------------------------------------


def test_the_admin_page_stores_teams_and_labels_with_csrf_and_audit(
    service: Service, fleet: dict[str, Any]
) -> None:
    client = TestClient(service.client.app)
    assert login(client, service.token("admin", name="web-admin")).status_code == 303
    page = client.get("/admin/teams")
    assert page.status_code == 200 and "<td>ml</td>" in page.text and "<td>prod</td>" in page.text
    csrf = csrf_of(page.text)
    form = {"name": "infra", "labels": "team=infra\nenv=prod", "groups": "infra-eng", "users": ""}
    refused = client.post("/admin/teams", data=form)
    assert refused.status_code == 403  # no CSRF token
    stored = client.post("/admin/teams", data={**form, "csrf_token": csrf})
    assert stored.status_code == 200 and "Stored team infra." in stored.text, stored.text
    bad = client.post("/admin/teams", data={**form, "labels": "no-equals", "csrf_token": csrf})
    assert bad.status_code == 422 and "not key=value" in bad.text
    asset_id = fleet["ids"]["registry.example.com/lab/toy:0.1"]
    labelled = client.post(
        "/admin/teams/labels",
        data={"asset_id": str(asset_id), "labels": "team=infra\nenv=prod", "csrf_token": csrf},
    )
    assert labelled.status_code == 200 and "env=prod, team=infra" in labelled.text
    assert _team_of(service, fleet["admin"], "infra") == {"registry.example.com/lab/toy:0.1"}
    # a token of infra's now exists (its reader above): the team stays, and the page says why
    kept = client.post("/admin/teams/infra/delete", data={"csrf_token": csrf})
    assert kept.status_code == 409 and "belong to team" in kept.text
    removed = client.post("/admin/teams/prod/delete", data={"csrf_token": csrf})
    assert removed.status_code == 200 and "Removed team prod." in removed.text
    with service.db.session() as session:
        events = session.scalars(
            select(AuditEvent)
            .where(AuditEvent.action.in_(["team.put", "team.delete", "asset.labels"]))
            .where(AuditEvent.source == "web")
            .order_by(AuditEvent.id)
        ).all()
    assert [(e.action, e.actor) for e in events] == [
        ("team.put", "web-admin"),
        ("asset.labels", "web-admin"),
        ("team.delete", "web-admin"),
    ]
    assert all(e.actor_token_id is not None for e in events)


def test_the_admin_page_is_for_admins_only(service: Service, fleet: dict[str, Any]) -> None:
    client = TestClient(service.client.app)
    assert login(client, service.token("inventory:read", name="reader")).status_code == 303
    assert client.get("/admin/teams").status_code == 403


def test_the_cli_makes_and_lists_a_team_token(service: Service, fleet: dict[str, Any]) -> None:
    from tests.app.test_cli import _run

    create = ("token", "create", "--scope", "inventory:read", "--database-url", service.url)
    code, out, err = _run(*create, "--name", "ml-cli", "--team", "ml")
    assert code == 0, err
    secret = out.strip().splitlines()[-1]
    assert _names(service.client.get("/api/v1/assets", headers=auth(secret))) == {ML_IMAGE}
    code, out, _ = _run("token", "list", "--database-url", service.url)
    assert any("ml-cli" in line and "team=ml" in line for line in out.splitlines()), out
    code, _, err = _run(*create, "--name", "x", "--team", "nope")
    assert code == 2 and "no team named" in err


def test_analyses_and_vex_of_another_teams_asset_are_not_found(
    service: Service, fleet: dict[str, Any]
) -> None:
    """Triage written for another team's asset is that team's business: a team reader lists
    the analyses of its own assets and the label selectors', and finds the others nowhere."""
    ids, admin = fleet["ids"], fleet["admin"]
    made = {}
    for key, body in (
        ("ml", {"asset_id": ids[ML_IMAGE]}),
        ("prod", {"asset_id": ids[PROD_IMAGE]}),
        ("selector", {"selector": {"env": "lab"}}),
    ):
        answer = service.client.post(
            "/api/v1/analyses",
            json={"cve": "CVE-2023-0193", "state": "under_investigation", **body},
            headers=admin,
        )
        assert answer.status_code == 201, answer.text
        made[key] = answer.json()["id"]
    reader = auth(_team_token(service, "ml", "inventory:read"))
    listed = service.client.get("/api/v1/analyses", headers=reader).json()
    assert {i["id"] for i in listed["items"]} == {made["ml"], made["selector"]}
    assert listed["total"] == 2
    assert service.client.get(f"/api/v1/analyses/{made['ml']}", headers=reader).status_code == 200
    hidden = service.client.get(f"/api/v1/analyses/{made['prod']}", headers=reader)
    assert hidden.status_code == 404
    assert service.client.get("/api/v1/analyses", headers=admin).json()["total"] == 3
    vex = service.client.get(f"/api/v1/assets/{ids[PROD_IMAGE]}/vex", headers=reader)
    assert vex.status_code == 404 and "no asset" in vex.text


def test_a_teams_analyst_triages_only_the_teams_assets(
    service: Service, fleet: dict[str, Any]
) -> None:
    """A team token with ``triage`` writes analyses of its team's assets; another team's asset
    is not found, and a label selector (which names assets of every team) is refused."""
    ids = fleet["ids"]
    triager = auth(_team_token(service, "ml", "inventory:read", "triage"))
    body = {"cve": "CVE-2023-0193", "state": "under_investigation"}
    own = service.client.post(
        "/api/v1/analyses", json={**body, "asset_id": ids[ML_IMAGE]}, headers=triager
    )
    assert own.status_code == 201, own.text
    other = service.client.post(
        "/api/v1/analyses", json={**body, "asset_id": ids[PROD_IMAGE]}, headers=triager
    )
    assert other.status_code == 404 and "no asset" in other.text
    selector = service.client.post(
        "/api/v1/analyses", json={**body, "selector": {"env": "prod"}}, headers=triager
    )
    assert selector.status_code == 403 and "label selector" in selector.text
    theirs = service.client.post(
        "/api/v1/analyses", json={**body, "asset_id": ids[PROD_IMAGE]}, headers=fleet["admin"]
    )
    assert theirs.status_code == 201
    gone = service.client.delete(f"/api/v1/analyses/{theirs.json()['id']}", headers=triager)
    assert gone.status_code == 404
    assert service.count("advisory_analysis") == 2
