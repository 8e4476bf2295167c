"""Keyless CI (issue 20 §3): a CI job's OIDC ID token, checked against a loopback issuer's
discovery and JWKS and the stored trust rules, gates and pushes; every hostile token is
refused with a 401 naming what failed, and nothing is decided or stored on it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from typer.testing import CliRunner

from app.domain import ci_tokens
from app.main import create_app
from app.settings import Settings
from tests.app import boms
from tests.app.conftest import JSON_HEADERS, LiveServer, Service, auth, free_port
from tests.app.test_gate_api import digest, image_bom, put_policy
from tests.fixtures.ci_issuer import (
    AUDIENCE,
    IssuerServer,
    SigningKey,
    github_claims,
    gitlab_claims,
)

POLICY = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: {name}\nrules: {{}}\n"


@pytest.fixture(scope="module")
def issuers() -> Iterator[IssuerServer]:
    with IssuerServer() as server:
        yield server


@pytest.fixture
def ci(service: Service, issuers: IssuerServer) -> Iterator[TestClient]:
    """An app on the service's (emptied) database that accepts loopback CI issuers."""
    settings = Settings(
        database_url=service.url,
        environment="test",
        ci_audience=AUDIENCE,
        allow_loopback_issuers=True,
    )
    with TestClient(create_app(settings)) as client:
        yield client


def put_rule(client: TestClient, admin: str, name: str, **body: Any) -> Any:
    return client.put(f"/api/v1/ci-trust/{name}", json=body, headers=auth(admin))


def github_rule(issuers: IssuerServer, **overrides: Any) -> dict[str, Any]:
    rule = {
        "issuer": issuers.issuer("github").url,
        "provider": "github",
        "claims": {
            "repository_owner_id": "1001",
            "repository_id": "2002",
            "ref": "refs/tags/v*",
        },
        "scopes": ["gate", "report:write"],
        "policies": ["prod"],
    }
    return {**rule, **overrides}


def _setup(service: Service, client: TestClient, issuers: IssuerServer) -> tuple[str, str]:
    """Policies prod and lax, an image's report, the GitHub rule; (admin token, image digest)."""
    admin = service.token("admin", name="admin")
    for name in ("prod", "lax"):
        assert put_policy(service, POLICY.format(name=name), admin, name).status_code == 201
    bom = image_bom("registry.example/acme/trainer:1")
    writer = service.token("report:write", name="writer")
    pushed = client.post(
        "/api/v1/reports", content=boms.encode(bom), headers=auth(writer, **JSON_HEADERS)
    )
    assert pushed.status_code == 201, pushed.text
    answer = put_rule(client, admin, "release", **github_rule(issuers))
    assert answer.status_code == 201, answer.text
    return admin, digest(bom)


def gate(client: TestClient, token: str, policy: str, image: str) -> Any:
    return client.post("/api/v1/gate", json={"policy": policy, "image": image}, headers=auth(token))


def test_a_github_job_gates_under_its_rule_and_the_decision_records_its_claims(
    service: Service, ci: TestClient, issuers: IssuerServer
) -> None:
    admin, image = _setup(service, ci, issuers)
    token = issuers.issuer("github").token(github_claims())
    answer = gate(ci, token, "prod", image)
    assert answer.status_code == 200, answer.text
    assert answer.json()["decision"] == "allow"
    with service.db.session() as session:
        name, granted = session.execute(text("SELECT token_name, granted FROM gate_decision")).one()
    assert name == "ci:release:acme/trainer"
    granted = granted if isinstance(granted, dict) else json.loads(granted)
    assert granted["rule"] == "release"
    assert granted["claims"]["repository_id"] == "2002"
    assert granted["claims"]["ref"] == "refs/tags/v1.2.0"
    assert granted["claims"]["iss"] == issuers.issuer("github").url
    # the API lists the decision under the CI job's name
    listed = ci.get("/api/v1/gate/decisions", headers=auth(admin)).json()["items"]
    assert [d["token_name"] for d in listed] == ["ci:release:acme/trainer"]
    assert listed[0]["granted"] == granted


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        # a re-registered name: the same repository name under another id
        (github_claims(repository_id="9999"), "no CI trust rule matches"),
        (github_claims(repository_owner_id="1002"), "no CI trust rule matches"),
        # a branch where the rule asks for a tag
        (github_claims(ref="refs/heads/main", ref_type="branch"), "no CI trust rule matches"),
        # `*` never crosses a `/`
        (github_claims(ref="refs/tags/v1/evil"), "no CI trust rule matches"),
        # anchored: a prefix of the pattern is no match
        (github_claims(ref="xrefs/tags/v1"), "no CI trust rule matches"),
        # a claim of the wrong type never matches
        (github_claims(repository_id=["2002"]), "no CI trust rule matches"),
    ],
)
def test_tokens_of_other_repositories_or_refs_are_refused(
    service: Service, ci: TestClient, issuers: IssuerServer, claims: dict[str, Any], why: str
) -> None:
    _, image = _setup(service, ci, issuers)
    answer = gate(ci, issuers.issuer("github").token(claims), "prod", image)
    assert answer.status_code == 401, answer.text
    assert why in answer.json()["error"]["message"]
    assert service.count("gate_decision") == 0


def _hs256_with_public_key(issuers: IssuerServer) -> str:
    # the algorithm confusion attack: HMAC keyed with the issuer's public key
    issuer = issuers.issuer("github")
    payload = {
        "iss": issuer.url,
        "aud": AUDIENCE,
        "iat": int(time.time()),
        "exp": int(time.time()) + 300,
        "jti": "x",
        **github_claims(),
    }
    header = {"kid": issuer.key.kid, "alg": "HS256"}
    import base64
    import hashlib
    import hmac
    import json

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing = b64(json.dumps(header).encode()) + "." + b64(json.dumps(payload).encode())
    secret = json.dumps(issuer.key.jwk()).encode()
    mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return signing + "." + b64(mac)


def _unsigned(issuers: IssuerServer) -> str:
    issuer = issuers.issuer("github")
    payload = {
        "iss": issuer.url,
        "aud": AUDIENCE,
        "iat": int(time.time()),
        "exp": int(time.time()) + 300,
        "jti": "x",
        **github_claims(),
    }
    return jwt.encode(payload, None, algorithm="none")  # type: ignore[arg-type]


HOSTILE: dict[str, Any] = {
    "expired": (
        lambda i: i.issuer("github").token(github_claims(), issued=time.time() - 3600),
        "expired",
    ),
    "future iat": (
        lambda i: i.issuer("github").token(github_claims(), issued=time.time() + 3600),
        "not valid yet",
    ),
    "another audience": (
        lambda i: i.issuer("github").token(github_claims(), audience="https://github.com/acme"),
        "audience",
    ),
    "two audiences": (
        lambda i: i.issuer("github").token(github_claims(), audience=[AUDIENCE, "other"]),
        "audience",
    ),
    "no jti": (lambda i: i.issuer("github").token(github_claims(), drop=("jti",)), "'jti'"),
    "no exp": (lambda i: i.issuer("github").token(github_claims(), drop=("exp",)), "'exp'"),
    "a day-long token": (
        lambda i: i.issuer("github").token(github_claims(), lifetime=2 * 86400),
        "longer than",
    ),
    "another key, same kid": (
        lambda i: i.issuer("github").token(
            github_claims(), key=SigningKey(kid=i.issuer("github").key.kid)
        ),
        "does not verify",
    ),
    "an unknown kid": (
        lambda i: i.issuer("github").token(github_claims(), key=SigningKey(kid="stranger")),
        "not one of",
    ),
    "alg none": (_unsigned, "algorithm"),
    "HMAC keyed with the public key": (_hs256_with_public_key, "algorithm"),
    # an issuer no rule names: refused before anything is fetched from it
    "another issuer": (lambda i: i.issuer("elsewhere").token(github_claims()), "issuer"),
    "not a JWT": (lambda i: "eyJub3QganNvbg.e30.c2ln", "well-formed"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tokens_are_refused_with_the_reason(
    service: Service, ci: TestClient, issuers: IssuerServer, case: str
) -> None:
    make, why = HOSTILE[case]
    _, image = _setup(service, ci, issuers)
    before = issuers.issuer("elsewhere").fetches
    token = make(issuers)
    answer = gate(ci, token, "prod", image)
    assert answer.status_code == 401, answer.text
    assert why in answer.json()["error"]["message"], answer.json()
    assert answer.headers["www-authenticate"] == "Bearer"
    assert service.count("gate_decision") == 0
    assert issuers.issuer("elsewhere").fetches == before


def test_a_ci_token_gates_only_under_its_rules_policies(
    service: Service, ci: TestClient, issuers: IssuerServer
) -> None:
    _, image = _setup(service, ci, issuers)
    token = issuers.issuer("github").token(github_claims())
    answer = gate(ci, token, "lax", image)
    assert answer.status_code == 403, answer.text
    assert "prod" in answer.json()["error"]["message"]
    assert service.count("gate_decision") == 0


def test_a_ci_token_is_refused_by_every_other_endpoint(
    service: Service, ci: TestClient, issuers: IssuerServer
) -> None:
    _setup(service, ci, issuers)
    token = issuers.issuer("github").token(github_claims())
    for path in ("/api/v1/assets", "/api/v1/gate/decisions", "/api/v1/ci-trust"):
        answer = ci.get(path, headers=auth(token))
        assert answer.status_code == 401, (path, answer.text)
        assert "accepted only by POST /api/v1/gate" in answer.json()["error"]["message"]


def test_a_ci_job_pushes_a_report_once_per_token(
    service: Service, ci: TestClient, issuers: IssuerServer
) -> None:
    admin, _ = _setup(service, ci, issuers)
    rule = github_rule(issuers, assets=["registry.example/acme/*"], policies=[])
    assert put_rule(ci, admin, "release", **rule).status_code == 200
    issuer = issuers.issuer("github")
    token = issuer.token(github_claims())
    body = boms.encode(image_bom("registry.example/acme/trainer:2"))
    first = ci.post("/api/v1/reports", content=body, headers=auth(token, **JSON_HEADERS))
    assert first.status_code == 201, first.text
    # the same token again (a replay) is refused, though the report would be a redelivery
    again = ci.post("/api/v1/reports", content=body, headers=auth(token, **JSON_HEADERS))
    assert again.status_code == 401, again.text
    assert "already used" in again.json()["error"]["message"]
    # a fresh token of the job may push again (answered as the redelivery it is)
    fresh = ci.post(
        "/api/v1/reports", content=body, headers=auth(issuer.token(github_claims()), **JSON_HEADERS)
    )
    assert fresh.status_code == 200, fresh.text
    # the rule's asset patterns bind the job as they bind a token
    other = boms.encode(image_bom("registry.example/other/app:1"))
    refused = ci.post(
        "/api/v1/reports",
        content=other,
        headers=auth(issuer.token(github_claims()), **JSON_HEADERS),
    )
    assert refused.status_code == 403, refused.text
    with service.db.session() as session:
        assert session.execute(text("SELECT count(*) FROM ci_token_use")).scalar_one() == 2


def test_a_refused_report_does_not_burn_the_token(
    service: Service, ci: TestClient, issuers: IssuerServer
) -> None:
    admin, _ = _setup(service, ci, issuers)
    token = issuers.issuer("github").token(github_claims())
    bad = ci.post(
        "/api/v1/reports", content=b'{"bomFormat": 1}', headers=auth(token, **JSON_HEADERS)
    )
    assert bad.status_code == 422, bad.text
    body = boms.encode(image_bom("registry.example/acme/trainer:3"))
    good = ci.post("/api/v1/reports", content=body, headers=auth(token, **JSON_HEADERS))
    assert good.status_code == 201, good.text


def test_a_gitlab_job_and_a_protected_ref(
    service: Service, ci: TestClient, issuers: IssuerServer
) -> None:
    admin, image = _setup(service, ci, issuers)
    gitlab = issuers.issuer("gitlab")
    rule = {
        "issuer": gitlab.url,
        "provider": "gitlab",
        "claims": {"namespace_id": "31", "project_id": "4242", "ref_protected": "true"},
        "scopes": ["gate"],
    }
    assert put_rule(ci, admin, "gitlab-main", **rule).status_code == 201
    assert gate(ci, gitlab.token(gitlab_claims()), "lax", image).status_code == 200
    unprotected = gitlab.token(gitlab_claims(ref_protected="false"))
    assert gate(ci, unprotected, "lax", image).status_code == 401
    # a gate-only rule cannot push
    token = gitlab.token(gitlab_claims())
    body = boms.encode(image_bom("registry.example/acme/trainer:4"))
    pushed = ci.post("/api/v1/reports", content=body, headers=auth(token, **JSON_HEADERS))
    assert pushed.status_code == 403, pushed.text


def test_rules_are_checked_when_stored(
    service: Service, ci: TestClient, issuers: IssuerServer
) -> None:
    admin = service.token("admin", name="admin")
    base = github_rule(issuers)
    bad = {
        "no repository id": {**base, "claims": {"repository_owner_id": "1001"}},
        "a name, not an id": {
            **base,
            "claims": {"repository_owner_id": "acme", "repository_id": "2002"},
        },
        "a glob off refs": {
            **base,
            "claims": {**base["claims"], "repository": "acme/*"},
        },
        "sub": {**base, "claims": {**base["claims"], "sub": "repo:acme/trainer:*"}},
        "a gitlab claim on github": {**base, "claims": {**base["claims"], "project_id": "1"}},
        "another audience": {**base, "audience": "https://github.com/acme"},
        "an https issuer of github with provider gitlab": {
            **base,
            "issuer": "https://token.actions.githubusercontent.com",
            "provider": "gitlab",
        },
        "plain http off loopback": {**base, "issuer": "http://issuer.example"},
        "an unknown provider's issuer": {
            **{k: v for k, v in base.items() if k != "provider"},
            "issuer": "https://ci.example",
        },
        "policies without gate": {**base, "scopes": ["report:write"]},
    }
    for case, body in bad.items():
        answer = put_rule(ci, admin, "r", **body)
        assert answer.status_code == 422, (case, answer.text)
    for body in ({**base, "scopes": ["admin"]}, {**base, "scopes": []}, {**base, "extra": 1}):
        assert put_rule(ci, admin, "r", **body).status_code == 422
    assert ci.get("/api/v1/ci-trust", headers=auth(admin)).json() == {"items": []}
    # an https GitHub Enterprise Cloud issuer is GitHub's; stored and read back
    ghe = {**base, "issuer": "https://token.actions.githubusercontent.com/acme-corp"}
    ghe.pop("provider")
    stored = put_rule(ci, admin, "ghe", **ghe)
    assert stored.status_code == 201, stored.text
    assert stored.json()["provider"] == "github" and stored.json()["audience"] == AUDIENCE
    assert ci.get("/api/v1/ci-trust/ghe", headers=auth(admin)).json() == stored.json()
    events = service.client.get(
        "/api/v1/audit", params={"action": "ci_trust.put"}, headers=auth(admin)
    )
    if events.status_code == 200:
        assert [e["target"] for e in events.json()["items"]] == ["ci-trust:ghe"]
    assert ci.delete("/api/v1/ci-trust/ghe", headers=auth(admin)).status_code == 200
    assert ci.get("/api/v1/ci-trust/ghe", headers=auth(admin)).status_code == 404
    assert ci.delete("/api/v1/ci-trust/ghe", headers=auth(admin)).status_code == 404
    # only admins manage rules
    gate_token = service.token("gate", name="g")
    assert put_rule(ci, gate_token, "x", **base).status_code == 403


def test_without_a_ci_audience_keyless_ci_is_off(service: Service, issuers: IssuerServer) -> None:
    # an app without GPUPROV_CI_AUDIENCE: rules cannot be stored, tokens are refused
    settings = Settings(database_url=service.url, environment="test", allow_loopback_issuers=True)
    admin = service.token("admin", name="admin")
    with TestClient(create_app(settings)) as client:
        answer = put_rule(client, admin, "r", **github_rule(issuers))
        assert answer.status_code == 422
        assert "GPUPROV_CI_AUDIENCE" in answer.json()["error"]["message"]
        token = issuers.issuer("github").token(github_claims())
        refused = client.post(
            "/api/v1/gate",
            json={"policy": "prod", "image": "sha256:" + "a" * 64},
            headers=auth(token),
        )
    assert refused.status_code == 401
    assert "not configured" in refused.json()["error"]["message"]


def test_a_deleted_or_tampered_rule_admits_nothing(
    service: Service, ci: TestClient, issuers: IssuerServer
) -> None:
    admin, image = _setup(service, ci, issuers)
    issuer = issuers.issuer("github")
    # a rule edited behind the service's back into one the API refuses (no repository id)
    with service.db.transaction(write=True) as session:
        row = session.execute(text("SELECT document FROM ci_trust_rule")).scalar_one()
        document = row if isinstance(row, dict) else json.loads(row)
        del document["claims"]["repository_id"]
        session.execute(
            text("UPDATE ci_trust_rule SET document = :d"),
            {"d": json.dumps(document)},
        )
    answer = gate(ci, issuer.token(github_claims(repository_id="1")), "prod", image)
    assert answer.status_code == 401, answer.text
    assert put_rule(ci, admin, "release", **github_rule(issuers)).status_code == 200
    assert gate(ci, issuer.token(github_claims()), "prod", image).status_code == 200
    assert ci.delete("/api/v1/ci-trust/release", headers=auth(admin)).status_code == 200
    answer = gate(ci, issuer.token(github_claims()), "prod", image)
    assert answer.status_code == 401 and "issuer" in answer.json()["error"]["message"]


def test_rotated_keys_are_fetched_again_and_a_mixed_up_discovery_is_refused(
    service: Service,
    ci: TestClient,
    issuers: IssuerServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, image = _setup(service, ci, issuers)
    issuer = issuers.issuer("github")
    assert gate(ci, issuer.token(github_claims()), "prod", image).status_code == 200
    fetched = issuer.fetches
    # cached: a second token fetches nothing
    assert gate(ci, issuer.token(github_claims()), "prod", image).status_code == 200
    assert issuer.fetches == fetched
    # the issuer rotates its key: an unknown kid fetches the keys again (once the refresh
    # interval has passed)
    monkeypatch.setattr(ci_tokens, "REFRESH_INTERVAL", 0)
    issuer.keys.insert(0, SigningKey("ES256"))
    try:
        assert gate(ci, issuer.token(github_claims()), "prod", image).status_code == 200
        assert issuer.fetches == fetched + 1
    finally:
        issuer.keys.pop(0)
    # an issuer whose discovery document names another issuer (the mix-up) is not trusted
    mixed = issuers.issuer("mixed")
    mixed.discovery_issuer = issuer.url
    admin = service.token("admin", name="admin2")
    assert put_rule(ci, admin, "mixed", **github_rule(issuers, issuer=mixed.url)).status_code == 201
    answer = gate(ci, mixed.token(github_claims()), "prod", image)
    assert answer.status_code == 503, answer.text
    assert "names issuer" in answer.json()["error"]["message"]


def test_gpuprov_gate_oidc_in_a_github_job_and_a_gitlab_job(
    service: Service, issuers: IssuerServer, tmp_path: Path
) -> None:
    """`gpuprov gate --policy NAME --server URL --oidc`: the job's own ID token, asked for
    from GitHub's token endpoint (or read from GitLab's id_tokens variable), gates."""
    from gpuprov.cli import app as cli_app

    settings = Settings(
        database_url=service.url,
        environment="test",
        ci_audience=AUDIENCE,
        allow_loopback_issuers=True,
    )
    port = free_port()
    with LiveServer(settings, port) as live, httpx.Client(base_url=live.url) as client:
        admin = service.token("admin", name="admin")
        assert put_policy(service, POLICY.format(name="prod"), admin, "prod").status_code == 201
        rule = github_rule(issuers)
        assert client.put("/api/v1/ci-trust/release", json=rule, headers=auth(admin)).is_success
        gitlab = {
            "issuer": issuers.issuer("gitlab").url,
            "provider": "gitlab",
            "claims": {"namespace_id": "31", "project_id": "4242"},
            "scopes": ["gate", "report:write"],
        }
        assert client.put("/api/v1/ci-trust/gl", json=gitlab, headers=auth(admin)).is_success
        bom = tmp_path / "bom.cdx.json"
        bom.write_bytes(boms.encode(image_bom("registry.example/acme/trainer:9")))
        args = ["gate", "--bom", str(bom), "--policy", "prod", "--server", live.url, "--oidc"]
        issuers.job_claims = github_claims()
        github_env = {
            "ACTIONS_ID_TOKEN_REQUEST_URL": f"{issuers.base}/github/actions-token?api-version=2.0",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": issuers.request_secret,
            "GPUPROV_CI_AUDIENCE": AUDIENCE,
        }
        ok = CliRunner().invoke(cli_app, [*args, "-f", "json"], env=github_env)
        assert ok.exit_code == 0, ok.output
        assert json.loads(ok.stdout)["decision"] == "allow"
        # the same job of another repository (a re-registered name): refused, exit 2
        issuers.job_claims = github_claims(repository_id="31337")
        refused = CliRunner().invoke(cli_app, args, env=github_env)
        assert refused.exit_code == 2, refused.output
        assert "no CI trust rule matches" in refused.output
        # GitLab: the id_tokens variable
        gitlab_env = {
            "GPUPROV_ID_TOKEN": issuers.issuer("gitlab").token(gitlab_claims()),
            "ACTIONS_ID_TOKEN_REQUEST_URL": "",
        }
        gl = CliRunner().invoke(cli_app, [*args, "--oidc-audience", AUDIENCE], env=gitlab_env)
        assert gl.exit_code == 0, gl.output
        # outside a CI job: a usage error naming what to set, nothing sent
        none = CliRunner().invoke(
            cli_app,
            [*args, "--oidc-audience", AUDIENCE],
            env={"ACTIONS_ID_TOKEN_REQUEST_URL": "", "GPUPROV_ID_TOKEN": ""},
        )
        assert none.exit_code == 2 and "id-token: write" in none.output
        no_audience = CliRunner().invoke(cli_app, args, env={"GPUPROV_CI_AUDIENCE": ""})
        assert no_audience.exit_code == 2 and "GPUPROV_CI_AUDIENCE" in no_audience.output
        mixed = CliRunner().invoke(cli_app, [*args, "--token-file", str(bom)])
        assert mixed.exit_code == 2 and "exclude each other" in mixed.output
    with service.db.session() as session:
        names = session.execute(text("SELECT token_name FROM gate_decision ORDER BY id")).scalars()
        assert list(names) == ["ci:release:acme/trainer", "ci:gl:group/trainer"]
