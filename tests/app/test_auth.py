"""Every route with every scope and with no token; asset-bound and revoked tokens; the token API."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from app.clock import utcnow
from app.domain.audit import cli_actor
from app.domain.ci_rules import put_rule
from app.domain.teams import check_team, put_team
from app.domain.tokens import Scope, hash_secret
from app.storage.repositories.tokens import by_hash
from tests.app import boms, catalogs
from tests.app.conftest import JSON_HEADERS, Service, auth
from tests.fixtures import keys
from tests.scanner.advisories import documents as advisory_documents

ADVISORY_JSON = {"Content-Type": "application/json"}

#: a CI trust rule the service's settings accept (tests/app/conftest.py: GPUPROV_CI_AUDIENCE set)
CI_RULE = {
    "issuer": "https://token.actions.githubusercontent.com",
    "claims": {"repository_owner_id": "1", "repository_id": "2"},
    "scopes": ["gate"],
}
#: a team (tests/app/test_teams.py)
TEAM = {"labels": {"team": "prod"}}
PUBLIC_OPERATIONS = {("get", "/healthz"), ("get", "/readyz")}
DOC_PAGES = ("/openapi.json", "/docs", "/redoc")
PROMOTION = (
    "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\nrules:\n  integrity: {}\n"
)


def operations(service: Service) -> list[tuple[str, str, list[str]]]:
    """(method, path, scopes) of every operation, from the app's OpenAPI document."""
    found = []
    for path, item in service.client.app.openapi()["paths"].items():  # type: ignore[attr-defined]
        for method, operation in item.items():
            requirements = operation.get("security", [])
            scopes = [s for requirement in requirements for s in requirement.get("HTTPBearer", [])]
            found.append((method, path, scopes))
    return found


def test_every_route_declares_one_scope(service: Service) -> None:
    ops = operations(service)
    assert len(ops) >= 14
    for method, path, scopes in ops:
        if (method, path) in PUBLIC_OPERATIONS:
            assert scopes == [], path
        else:
            assert len(scopes) == 1 and scopes[0] in {s.value for s in Scope}, (method, path)


def _vex_document() -> bytes:
    """A small OpenVEX document for ``POST /api/v1/vex``."""
    from datetime import UTC, datetime

    from scanner.advisories.match import Finding
    from scanner.advisories.vex_out import VexSubject, build_openvex, openvex_json

    doc = build_openvex(
        VexSubject(kind="host", name="gpu-1", machine_id="a" * 32),
        [Finding(cve="CVE-2026-0001", status="fixed", product="driver")],
        {},
        author="test",
        timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        tooling="test",
    )
    return openvex_json(doc).encode()


_VEX = _vex_document()


#: the walk's webhook: HTTPS to a loopback port nobody listens on
WEBHOOK_URL = "https://127.0.0.1:9/hook"
_SERIAL = itertools.count(1)


class Walk:
    """One sample request per operation that succeeds for a caller holding its scope."""

    def __init__(self, service: Service, post_report: Callable[..., Any]) -> None:
        self.service = service
        answer = post_report(boms.encode(boms.gpuprov_bom()))
        self.asset_id = answer.json()["asset_id"]
        key = keys.shared("ecdsa")
        self.policy = catalogs.policy_yaml(("nvidia", key))
        golden = catalogs.catalog_from_bom(boms.gpuprov_bom(), "golden")
        self.catalog = catalogs.signed(golden, key)
        admin = auth(service.token("admin"), **catalogs.YAML)
        put = service.client.put("/api/v1/trust-policy", content=self.policy, headers=admin)
        assert put.status_code == 201, put.text
        self.digest = boms.gpuprov_bom()["metadata"]["component"]["version"]
        self.promotion = PROMOTION.encode()
        put = service.client.put("/api/v1/policies/prod", content=self.promotion, headers=admin)
        assert put.status_code == 201, put.text
        self.advisory = advisory_documents.encode(advisory_documents.csaf())
        post = service.client.post(
            "/api/v1/advisories", content=self.advisory, headers={**admin, **ADVISORY_JSON}
        )
        assert post.status_code == 201, post.text

    def _ci_rule(self) -> None:
        with self.service.db.transaction(write=True) as session:
            put_rule(session, "prod", dict(CI_RULE), self.service.settings, cli_actor(), utcnow())

    def _webhook(self) -> None:
        from app.domain.egress import EgressPolicy
        from app.domain.webhooks import EndpointSpec, create_endpoint
        from app.storage.repositories.webhooks import by_name

        with self.service.db.transaction(write=True) as session:
            if by_name(session, "prod") is None:
                # a loopback port nobody listens on: a test message answers "not delivered"
                spec = EndpointSpec("prod", WEBHOOK_URL, ("gate.denied",), None, {})
                create_endpoint(
                    session, spec, EgressPolicy(allow_loopback=True), cli_actor(), utcnow()
                )

    def _team(self) -> None:
        with self.service.db.transaction(write=True) as session:
            put_team(session, "prod", check_team(TEAM), cli_actor())

    def _group_mapping(self) -> None:
        from app.domain.group_mappings import put_mapping

        with self.service.db.transaction(write=True) as session:
            put_mapping(session, "prod", "viewer", None, {}, cli_actor(), utcnow())

    def _token_id(self) -> int:
        victim = self.service.token("inventory:read", name="victim")
        with self.service.db.session() as session:
            row = by_hash(session, hash_secret(victim))
            assert row is not None
            return row.id

    def _analysis_id(self) -> int:
        from app.domain.analyses import record_analysis

        with self.service.db.transaction(write=True) as session:
            stored = record_analysis(
                session,
                cve="CVE-2026-0001",
                asset_id=self.asset_id,
                state="affected",
                author="walk",
                source="test",
            )
        return int(stored["id"])

    def _proposal_id(self) -> int:
        """A runtime proposal still proposed (accepting or dismissing one decides it): of a
        host scanned with --runtime whose nvJPEG no process maps, in the walk asset's team."""
        from app.cli_advisories import import_paths
        from app.domain.teams import assign_labels, scope_labels_of
        from app.storage.tables import RuntimeProposal
        from scanner.advisories.document import DEFAULT_MAX_BYTES
        from tests.app.test_runtime_proposals import report
        from tests.scanner.advisories.documents import PSIRT

        with self.service.db.session() as session:
            found = session.query(RuntimeProposal.id).filter_by(status="proposed").first()
        if found is not None:
            return int(found[0])
        import_paths(
            self.service.db, [PSIRT / "2025/5661"], strict=False, max_bytes=DEFAULT_MAX_BYTES
        )
        machine = f"{next(_SERIAL):x}"
        body = report(utcnow().replace(microsecond=0), machine=machine, name=f"host-{machine}")
        writer = auth(self.service.token("report:write", name="walk-agent"), **JSON_HEADERS)
        posted = self.service.client.post("/api/v1/reports", content=body, headers=writer)
        assert posted.status_code == 201, posted.text
        with self.service.db.transaction(write=True) as session:
            labels = scope_labels_of(session, self.asset_id)
            if labels:
                assign_labels(session, posted.json()["asset_id"], labels, cli_actor())
        return self._proposal_id()

    def request(self, method: str, path: str, token: str | None) -> Any:
        headers = auth(token) if token else {}
        client = self.service.client
        path = path.replace("{asset_id}", str(self.asset_id))
        if "{analysis_id}" in path:  # each method finds one (DELETE removes it)
            path = path.replace("{analysis_id}", str(self._analysis_id()))
        if "{proposal_id}" in path:  # each method finds one still proposed (POSTs decide it)
            path = path.replace("{proposal_id}", str(self._proposal_id()))
        if (method, path) == ("post", "/api/v1/analyses"):
            body = {"cve": "CVE-2026-0001", "asset_id": self.asset_id, "state": "affected"}
            return client.post(path, json=body, headers=headers)
        if "{token_id}" in path:
            path = path.replace("{token_id}", str(self._token_id()))
        if (method, path) == ("post", "/api/v1/reports"):
            body = boms.encode(boms.gpuprov_bom())
            return client.post(path, content=body, headers={**headers, **JSON_HEADERS})
        if (method, path) == ("put", "/api/v1/trust-policy"):
            headers.update(catalogs.YAML)
            return client.put(path, content=self.policy, headers=headers)
        if (method, path) == ("post", "/api/v1/catalogs"):
            headers.update(JSON_HEADERS)
            return client.post(path, content=self.catalog, headers=headers)
        if (method, path) == ("post", "/api/v1/tokens"):
            body = {"name": "x", "scopes": ["inventory:read"]}
            return client.post(path, json=body, headers=headers)
        if (method, path) == ("post", "/api/v1/webhooks"):
            body = {"name": f"w{next(_SERIAL)}", "url": WEBHOOK_URL, "events": ["gate.denied"]}
            return client.post(path, json=body, headers=headers)
        if path.startswith("/api/v1/webhooks/"):
            self._webhook()  # each method finds it (DELETE removes it)
        path = path.replace("{name}", "prod").replace("{control_id}", "CIS-2.5")
        path = path.replace("{cve}", "CVE-2026-0001")
        if (method, path) == ("post", "/api/v1/advisories"):
            headers.update(ADVISORY_JSON)
            return client.post(path, content=self.advisory, headers=headers)
        if (method, path) == ("put", "/api/v1/policies/prod"):
            headers.update(catalogs.YAML)
            return client.put(path, content=self.promotion, headers=headers)
        if (method, path) == ("post", "/api/v1/gate"):
            return client.post(path, json={"policy": "prod", "image": self.digest}, headers=headers)
        if (method, path) == ("post", "/api/v1/vex"):
            headers["Content-Type"] = "application/json"
            return client.post(path, content=_VEX, headers=headers)
        if path == "/api/v1/ci-trust/prod":
            self._ci_rule()  # each method finds the rule (DELETE removes it)
            if method == "put":
                return client.put(path, json=CI_RULE, headers=headers)
        if path == "/api/v1/teams/prod":
            self._team()  # each method finds the team (DELETE removes it)
            if method == "put":
                return client.put(path, json=TEAM, headers=headers)
        if path == "/api/v1/group-mappings/prod":
            self._group_mapping()  # each method finds the mapping (DELETE removes it)
            if method == "put":
                return client.put(path, json={"role": "analyst"}, headers=headers)
        if method == "put" and path == f"/api/v1/assets/{self.asset_id}/labels":
            return client.put(path, json={"labels": {"team": "prod"}}, headers=headers)
        params: dict[str, str] = {"family": "cudnn"} if path.endswith("where-used") else {}
        if path.startswith("/api/v1/compliance"):
            params = {"policy": "prod"}
        if path.endswith("/vex"):
            params = {"format": "cyclonedx"}  # valid for any asset, with or without a finding
        if path == "/api/v1/gate/diff":
            params = {"from": self.digest, "to": self.digest}
        return client.request(method.upper(), path, params=params, headers=headers)


@pytest.mark.parametrize("scope", [None, *[s.value for s in Scope]])
def test_walk_every_route(
    service: Service, post_report: Callable[..., Any], scope: str | None
) -> None:
    walk = Walk(service, post_report)
    token = service.token(scope) if scope else None
    for method, path, scopes in operations(service):
        answer = walk.request(method, path, token)
        where = f"{method} {path} with {scope}"
        if not scopes:
            assert answer.status_code == 200, where
        elif token is None:
            assert answer.status_code == 401, where
            assert answer.headers["www-authenticate"] == "Bearer"
        elif scope in (scopes[0], Scope.ADMIN.value):
            assert answer.status_code in (200, 201), f"{where}: {answer.text}"
        else:
            assert answer.status_code == 403, where
            assert scopes[0] in answer.json()["error"]["message"]
    for page in DOC_PAGES:
        assert service.client.get(page).status_code == 200


def test_bad_and_revoked_tokens(service: Service) -> None:
    for header in ({"Authorization": "Bearer nope"}, {"Authorization": "Basic dXNlcjpwdw=="}):
        answer = service.client.get("/api/v1/assets", headers=header)
        assert answer.status_code == 401
    admin = service.token("admin")
    created = service.client.post(
        "/api/v1/tokens", json={"name": "ci", "scopes": ["inventory:read"]}, headers=auth(admin)
    )
    assert created.status_code == 201
    secret, token_id = created.json()["token"], created.json()["id"]
    assert service.client.get("/api/v1/assets", headers=auth(secret)).status_code == 200
    listed = service.client.get("/api/v1/tokens", headers=auth(admin)).json()["items"]
    entry = next(t for t in listed if t["id"] == token_id)
    assert "token" not in entry and entry["last_used_at"] is not None
    assert secret.startswith(entry["prefix"])
    revoked = service.client.delete(f"/api/v1/tokens/{token_id}", headers=auth(admin))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    answer = service.client.get("/api/v1/assets", headers=auth(secret))
    assert answer.status_code == 401 and "revoked" in answer.json()["error"]["message"]


def test_token_list_is_paginated_like_every_list(service: Service) -> None:
    admin = service.token("admin", name="admin")
    for i in range(4):
        service.token("inventory:read", name=f"reader-{i}")
    page = service.client.get("/api/v1/tokens?limit=2&offset=1", headers=auth(admin))
    assert page.status_code == 200, page.text
    body = page.json()
    assert (body["total"], body["limit"], body["offset"]) == (5, 2, 1)
    assert [t["name"] for t in body["items"]] == ["reader-0", "reader-1"]
    assert all("token" not in t for t in body["items"])
    everything = service.client.get("/api/v1/tokens", headers=auth(admin)).json()
    assert everything["limit"] == 100 and len(everything["items"]) == 5
    for bad in ("limit=0", "limit=1001", "offset=-1"):
        answer = service.client.get(f"/api/v1/tokens?{bad}", headers=auth(admin))
        assert answer.status_code in (400, 422), bad


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"name": "x", "scopes": ["root"]}, "unknown or missing scopes ['root']"),
        ({"name": "x", "scopes": ["inventory:read"], "assets": ["a*"]}, "only apply"),
        ({"name": "x", "scopes": []}, "/body/scopes"),
    ],
)
def test_token_api_refuses_bad_requests(
    service: Service, body: dict[str, Any], fragment: str
) -> None:
    admin = service.token("admin")
    answer = service.client.post("/api/v1/tokens", json=body, headers=auth(admin))
    assert answer.status_code == 422
    assert fragment in answer.json()["error"]["message"]


def test_asset_bound_token(service: Service, post_report: Callable[..., Any]) -> None:
    agent = service.token("report:write", assets=["gpu-node-1", "registry.example.com/team-a/*"])
    own = boms.gpuprov_bom(kind="host", name="gpu-node-1", machine_id="m-1")
    assert post_report(boms.encode(own), token=agent).status_code == 201
    image = boms.gpuprov_bom(name="registry.example.com/team-a/app:1")
    assert post_report(boms.encode(image), token=agent).status_code == 201
    before = service.stored()
    # Exact, case-sensitive names: no prefix match, no case folding (issue 7 §7).
    refused = [("gpu-node-2", "m-2"), ("gpu-node-10", "m-10"), ("GPU-NODE-1", "m-11")]
    refused.append(("registry.example.com/team-b/app:1", None))
    for name, machine in refused:
        kind = "host" if machine else "image"
        other = boms.gpuprov_bom(kind=kind, name=name, machine_id=machine)
        answer = post_report(boms.encode(other), token=agent)
        assert answer.status_code == 403
        assert f"may not report for asset '{name}'" in answer.json()["error"]["message"]
    # another host's machine id under an allowed name cannot take over that host's inventory
    someone_else = boms.gpuprov_bom(kind="host", name="gpu-node-9", machine_id="m-9")
    assert post_report(boms.encode(someone_else)).status_code == 201
    before = service.stored()
    hijack = boms.gpuprov_bom(kind="host", name="gpu-node-1", machine_id="m-9")
    answer = post_report(boms.encode(hijack), token=agent)
    assert answer.status_code == 403 and "gpu-node-9" in answer.json()["error"]["message"]
    assert service.stored() == before
    # and it reads nothing
    for path in ("/api/v1/assets", "/api/v1/libraries", "/api/v1/inventory/export"):
        assert service.client.get(path, headers=auth(agent)).status_code == 403
