"""A gate answer, and above all its signed VSA, is about the facts the service holds: the asset's
latest stored scan under the stored policy's own text, named by configuration, never by what the
caller sends (a backdated BOM, a Host header) or by a row changed behind the service's back.
Every test runs on SQLite and PostgreSQL,
but the one of SQLite's write lock taken before the first read."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text

from app.domain import gate as gate_module
from app.main import create_app
from app.settings import Settings
from scanner.policy.bom_facts import facts_from_bom
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.test_gate_api import POLICY, _now, digest, gate, image_bom, put_policy, tampered
from tests.fixtures import keys

LAX = POLICY.split("rules:")[0] + "rules: {}\n"


class Signed:
    """The service with a VSA key, as its own client."""

    def __init__(self, client: TestClient, pub: Path) -> None:
        self.client = client
        self.pub = pub

    def gate(self, token: str, headers: dict[str, str] | None = None, **body: Any) -> Any:
        return self.client.post(
            "/api/v1/gate", json=body, headers={**auth(token), **(headers or {})}
        )


@pytest.fixture
def signed(service: Service, tmp_path: Path) -> Iterator[Signed]:
    key, pub = keys.write_keypair(tmp_path / "keys", "gate", keys.generate("ecdsa"))
    settings = Settings(database_url=service.url, environment="test", vsa_key_file=key)
    with TestClient(create_app(settings)) as client:
        yield Signed(client, pub)


def _statement(answer: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(answer["vsa"]["payload"])))


def _decisions(service: Service) -> list[tuple[str, int | None]]:
    with service.db.session() as session:
        rows = session.execute(text("SELECT decision, scan_id FROM gate_decision ORDER BY id"))
        return [(r[0], r[1]) for r in rows]


# ------------------------------------------------------------------ only the latest facts


def test_a_backdated_bom_gets_no_decision_for_a_denied_image(
    service: Service, signed: Signed, post_report: Callable[..., Any]
) -> None:
    put_policy(service, POLICY)
    name = "reg.example/ml/app:1"
    bad = tampered(name) | {}
    bad["metadata"]["timestamp"] = _now(1)
    assert post_report(boms.encode(bad)).status_code == 201
    token = service.token("gate", "report:write", name="ci")
    denied = signed.gate(token, policy="prod", image=digest(bad)).json()
    assert denied["decision"] == "deny"
    # the same image's BOM with the modified verdict rewritten, dated three days back
    forged = image_bom(name, timestamp=_now(72))
    assert digest(forged) == digest(bad)
    answer = signed.gate(token, policy="prod", bom=forged)
    assert answer.status_code == 409, answer.text
    message = answer.json()["error"]["message"]
    latest = _decisions(service)[0][1]
    assert "not the latest" in message and f"scan {latest}, " in message
    assert "vsa" not in answer.json()
    # nothing decided on it: the audit holds the one deny; the image still gates deny
    assert [d for d, _ in _decisions(service)] == ["deny"]
    again = signed.gate(token, policy="prod", image=digest(bad)).json()
    assert again["decision"] == "deny" and again["vsa"] is None


def test_a_bom_that_becomes_the_latest_is_gated(service: Service, signed: Signed) -> None:
    put_policy(service, POLICY)
    token = service.token("gate", "report:write", name="ci")
    first = signed.gate(
        token, policy="prod", bom=image_bom("reg.example/ml/b:1", timestamp=_now(2))
    )
    assert first.status_code == 200 and first.json()["decision"] == "allow"
    newer = tampered("reg.example/ml/b:1")
    newer["metadata"]["timestamp"] = _now(1)
    answer = signed.gate(token, policy="prod", bom=newer)
    assert answer.status_code == 200 and answer.json()["decision"] == "deny"
    # a repeated delivery of the latest scan is gated again (it still is the latest)
    assert signed.gate(token, policy="prod", bom=newer).json()["decision"] == "deny"
    # the first BOM again: an older scan now, refused
    older = signed.gate(
        token, policy="prod", bom=image_bom("reg.example/ml/b:1", timestamp=_now(2))
    )
    assert older.status_code == 409
    assert [d for d, _ in _decisions(service)] == ["allow", "deny", "deny"]


# ------------------------------------------------------------------ stored documents checked


def _alter_policy(service: Service, document: str) -> None:
    with service.db.transaction(write=True) as session:
        session.execute(text("UPDATE promotion_policy SET document = :d"), {"d": document})


def _audit(service: Service) -> list[tuple[str, str]]:
    with service.db.session() as session:
        rows = session.execute(text("SELECT action, target FROM audit_event ORDER BY id"))
        return [(r[0], r[1]) for r in rows if r[0] == "integrity.mismatch"]


def test_a_policy_altered_in_the_database_decides_nothing(
    service: Service, signed: Signed, post_report: Callable[..., Any]
) -> None:
    put_policy(service, POLICY)
    bad = tampered("reg.example/ml/c:1")
    post_report(boms.encode(bad))
    token = service.token("gate", name="ci")
    assert signed.gate(token, policy="prod", image=digest(bad)).json()["decision"] == "deny"
    _alter_policy(service, LAX)  # the content hash left as it was
    answer = signed.gate(token, policy="prod", image=digest(bad))
    assert answer.status_code == 409, answer.text
    assert "fails its integrity check" in answer.json()["error"]["message"]
    assert [d for d, _ in _decisions(service)] == ["deny"]
    assert _audit(service) == [("integrity.mismatch", "policy:prod@1")]
    metrics = signed.client.app.state.metrics.exposition().decode()  # type: ignore[attr-defined]
    assert 'gpuprov_stored_document_mismatches_total{document="policy"} 1.0' in metrics
    reader = auth(service.token("inventory:read"))
    shown = service.client.get("/api/v1/policies/prod", headers=reader).json()
    assert shown["intact"] is False and shown["document"] == LAX
    for url in ("/api/v1/compliance?policy=prod", "/api/v1/compliance/export?policy=prod"):
        assert service.client.get(url, headers=reader).status_code == 409, url
    # storing the original bytes again is a new version, never "the same as the current"
    admin = service.token("admin", name="admin")
    again = put_policy(service, POLICY, admin)
    assert again.status_code == 201 and again.json()["version"] == 2
    assert signed.gate(token, policy="prod", image=digest(bad)).json()["decision"] == "deny"


def test_a_report_is_stored_while_an_altered_policy_is_left_unevaluated(
    service: Service, post_report: Callable[..., Any]
) -> None:
    put_policy(service, POLICY)
    first = image_bom("reg.example/ml/d:1", timestamp=_now(2))
    post_report(boms.encode(first))
    assert service.count("compliance_asset") == 1
    _alter_policy(service, LAX)
    second = tampered("reg.example/ml/d:1")
    second["metadata"]["timestamp"] = _now(1)
    assert post_report(boms.encode(second)).status_code == 201
    # the asset's old evaluation is not left showing as current, and nothing was evaluated
    assert service.count("compliance_asset") == 0
    assert _audit(service) == [("integrity.mismatch", "policy:prod@1")]


# ------------------------------------------------------------------ what the VSA names


def test_the_vsa_names_the_policy_by_urn_whatever_the_host(
    service: Service, signed: Signed, post_report: Callable[..., Any]
) -> None:
    put_policy(service, POLICY)
    bom = image_bom("reg.example/ml/e:1")
    post_report(boms.encode(bom))
    token = service.token("gate")
    answer = signed.gate(
        token,
        {"Host": "evil.example.com", "X-Forwarded-Host": "evil.example.com"},
        policy="prod",
        image=digest(bom),
    ).json()
    statement = _statement(answer)
    policy = statement["predicate"]["policy"]
    sha = answer["policy"]["sha256"]
    assert policy == {"uri": f"urn:gpuprov:policy:prod:1:sha256:{sha}", "digest": {"sha256": sha}}
    assert "evil" not in json.dumps(statement)


def test_the_vsa_names_the_configured_public_url_and_verifier(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    key, _ = keys.write_keypair(tmp_path, "gate", keys.generate("ed25519"))
    settings = Settings(
        database_url=service.url,
        environment="test",
        vsa_key_file=key,
        public_url="https://gpuprov.example.com/",
        vsa_verifier_id="https://gate.example.com/prod",
    )
    put_policy(service, POLICY)
    bom = image_bom("reg.example/ml/f:1")
    post_report(boms.encode(bom))
    with TestClient(create_app(settings)) as client:
        answer = client.post(
            "/api/v1/gate",
            json={"policy": "prod", "image": digest(bom)},
            headers={**auth(service.token("gate")), "Host": "evil.example.com"},
        ).json()
    predicate = _statement(answer)["predicate"]
    assert (
        predicate["policy"]["uri"] == "https://gpuprov.example.com/api/v1/policies/prod?version=1"
    )
    assert predicate["verifier"]["id"] == "https://gate.example.com/prod"


def test_a_warn_is_not_signed(
    service: Service, signed: Signed, post_report: Callable[..., Any]
) -> None:
    put_policy(
        service,
        POLICY.replace(
            "integrity: {forbid: [modified]}", "integrity: {forbid: [modified], action: warn}"
        ),
    )
    bad = tampered("reg.example/ml/g:1")
    post_report(boms.encode(bad))
    answer = signed.gate(service.token("gate"), policy="prod", image=digest(bad)).json()
    assert answer["decision"] == "warn" and answer["vsa"] is None


# ------------------------------------------------------------------ trust policy and catalogs


@pytest.mark.parametrize(
    ("change", "target"),
    [
        # a catalog entry rewritten to vouch for other bytes
        (
            "UPDATE catalog_entry SET sha256 = :evil WHERE basename = 'libcudnn_graph.so.9'",
            "catalog:cudnn 9.1#1 (its entries)",
        ),
        # the trust policy's text changed, its digest left as it was
        ("UPDATE trust_policy SET document = document || '# edited'", "trust_policy@1"),
    ],
)
def test_altered_trust_inputs_verify_nothing(
    service: Service, post_report: Callable[..., Any], change: str, target: str
) -> None:
    from tests.app.catalogs import policy_yaml
    from tests.app.catalogs import signed as signed_catalog
    from tests.app.test_provenance_api import NVIDIA, Api, golden_cudnn, tampered_graph

    api = Api(service, post_report)
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).status_code == 201
    assert api.post_catalog(signed_catalog(golden_cudnn(), NVIDIA)).status_code == 201
    with service.db.transaction(write=True) as session:
        session.execute(text(change), {"evil": "e" * 64})
    wheel = boms.cudnn_wheel()
    wheel.libs = [lib for lib in wheel.libs if "graph" not in lib.path]
    bom = boms.gpuprov_bom(
        name="registry.example.com/ml/h:1", owners=[wheel], extra_libs=[tampered_graph("verified")]
    )
    # a fresh process loads the catalogs from the database, as a restarted replica would
    settings = Settings(database_url=service.url, environment="test")
    with TestClient(create_app(settings)) as client:
        token = service.token("report:write")
        answer = client.post(
            "/api/v1/reports",
            content=boms.encode(bom),
            headers=auth(token, **{"Content-Type": "application/vnd.cyclonedx+json"}),
        )
        assert answer.status_code == 201, answer.text
    files = api.files(answer.json()["asset_id"])
    assert not [p for p, f in files.items() if f["provenance"] == "verified"], files
    assert _audit(service) == [("integrity.mismatch", target)]


# ------------------------------------------------------------------ tokens limited to policies


def test_a_token_limited_to_a_policy_cannot_pick_a_laxer_one(
    service: Service, post_report: Callable[..., Any]
) -> None:
    put_policy(service, POLICY)
    put_policy(service, LAX.replace("name: prod", "name: prod-lax"), name="prod-lax")
    bad = tampered("reg.example/ml/i:1")
    post_report(boms.encode(bad))
    admin = auth(service.token("admin", name="admin"))
    made = service.client.post(
        "/api/v1/tokens",
        json={"name": "ci", "scopes": ["gate"], "policies": ["prod"]},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    assert made.json()["policies"] == ["prod"]
    ci = made.json()["token"]
    body = {"policy": "prod", "image": digest(bad)}
    assert (
        service.client.post("/api/v1/gate", json=body, headers=auth(ci)).json()["decision"]
        == "deny"
    )
    for other in ("prod-lax", "pro", "prod "):
        answer = service.client.post(
            "/api/v1/gate", json={**body, "policy": other}, headers=auth(ci)
        )
        assert answer.status_code in (403, 422), (other, answer.text)
    lax = service.client.post("/api/v1/gate", json={**body, "policy": "prod-lax"}, headers=auth(ci))
    assert lax.status_code == 403 and "only under the policies prod" in lax.text
    assert [d for d, _ in _decisions(service)] == ["deny"]
    # the limit is kept by a rotation, shown in the list
    token_id = made.json()["id"]
    rotated = service.client.post(f"/api/v1/tokens/{token_id}/rotate", headers=admin).json()
    assert rotated["policies"] == ["prod"]
    again = service.client.post(
        "/api/v1/gate", json={**body, "policy": "prod-lax"}, headers=auth(rotated["token"])
    )
    assert again.status_code == 403
    listed = service.client.get("/api/v1/tokens", headers=admin).json()["items"]
    assert {t["name"]: t["policies"] for t in listed}["ci"] == ["prod"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"scopes": ["report:write"], "policies": ["prod"]}, "gate scope"),
        ({"scopes": ["gate", "admin"], "policies": ["prod"]}, "gate scope"),
        ({"scopes": ["gate"], "policies": [""]}, "/policies/0"),
        ({"scopes": ["gate"], "policies": ["prod*"]}, "/policies/0"),
    ],
)
def test_bad_policy_limits_are_refused(
    service: Service, body: dict[str, Any], fragment: str
) -> None:
    admin = auth(service.token("admin", name="admin"))
    answer = service.client.post("/api/v1/tokens", json={"name": "ci", **body}, headers=admin)
    assert answer.status_code == 422 and fragment in answer.text, answer.text
    assert service.count("api_token") == 1


def test_the_command_line_and_the_dashboard_limit_tokens_to_policies(
    service: Service, tmp_path: Path
) -> None:
    import re

    from typer.testing import CliRunner

    from gpuprov.cli import app as cli_app
    from tests.app.pages import login, session_csrf

    runner = CliRunner()
    base = ["token", "create", "--name", "ci", "--scope", "gate", "--database-url", service.url]
    made = runner.invoke(cli_app, [*base, "--policy", "prod", "--policy", "staging"])
    assert made.exit_code == 0, made.output
    listed = runner.invoke(cli_app, ["token", "list", "--database-url", service.url])
    assert "policies=prod,staging" in listed.stdout
    empty = runner.invoke(cli_app, [*base, "--policy", ""])
    assert empty.exit_code == 2 and "not a policy name" in empty.stderr

    client = service.client
    login(client, service.token("admin", name="admin"))
    csrf = session_csrf(client)
    form = {"csrf_token": csrf, "name": "web-ci", "scope_gate": "1"}
    blank = client.post("/admin/tokens", data={**form, "policies": " , "})
    assert blank.status_code == 400 and "not a policy name" in blank.text
    made_web = client.post("/admin/tokens", data={**form, "policies": "prod, staging"})
    assert made_web.status_code == 200 and re.search(r"<td>prod, staging</td>", made_web.text)


def test_an_original_report_altered_in_the_database_is_not_served(
    service: Service, post_report: Callable[..., Any]
) -> None:
    import gzip

    bom = tampered("reg.example/ml/j:1")
    asset_id = post_report(boms.encode(bom)).json()["asset_id"]
    reader = auth(service.token("inventory:read"))
    url = f"/api/v1/assets/{asset_id}/sbom"
    assert service.client.get(url, headers=reader).json() == json.loads(boms.encode(bom))
    clean = gzip.compress(boms.encode(image_bom("reg.example/ml/j:1")))
    with service.db.transaction(write=True) as session:
        session.execute(text("UPDATE raw_bom SET gzip_data = :d"), {"d": clean})
    answer = service.client.get(url, headers=reader)
    assert answer.status_code == 409 and "fails its integrity check" in answer.text
    with service.db.session() as session:
        scan_id = session.execute(text("SELECT id FROM scan")).scalar_one()
    assert _audit(service) == [("integrity.mismatch", f"scan:{scan_id}")]


# ------------------------------------------------------------------ what the decision reads


def _driver_host(version: str, timestamp: str, cuda_max: str = "12.4") -> dict[str, Any]:
    """A host whose node facts state its loaded driver (its libraries state none)."""
    bom = boms.gpuprov_bom(kind="host", name="node-7", timestamp=timestamp)
    bom["metadata"]["component"]["properties"] += [
        {"name": "gpuprov:driver:version", "value": version},
        {"name": "gpuprov:driver:cuda-max", "value": cuda_max},
    ]
    return bom


def _rule(answer: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [r for r in answer["reasons"] if r["rule"] == rule]


def test_a_host_is_gated_on_the_driver_its_node_facts_state(service: Service) -> None:
    put_policy(service, LAX.replace("rules: {}", "rules:\n  driver: {}"))
    token = service.token("gate", "report:write", name="ci")
    new = gate(service, token, policy="prod", bom=_driver_host("550.54.15", _now(1))).json()
    assert new["decision"] == "allow", new["reasons"]
    old = gate(service, token, policy="prod", bom=_driver_host("470.42.01", _now(0.5))).json()
    assert old["decision"] == "deny" and _rule(old, "driver")
    # a new enough driver whose node facts say it runs CUDA 11.8 at most: the CUDA 12 libraries
    # are newer than it runs
    capped = _driver_host("550.54.15", _now(0), cuda_max="11.8")
    short = gate(service, token, policy="prod", bom=capped).json()
    assert short["decision"] == "deny" and "11.8" in _rule(short, "driver")[0]["message"]


def test_the_scan_age_is_judged_on_the_time_the_report_states(service: Service) -> None:
    put_policy(service, LAX.replace("rules: {}", "rules:\n  scan_age: {max_hours: 24}"))
    token = service.token("gate", "report:write", name="ci")
    fresh = gate(service, token, policy="prod", bom=image_bom("reg.example/a:1", timestamp=_now(1)))
    assert fresh.json()["decision"] == "allow", fresh.text
    stale = gate(
        service, token, policy="prod", bom=image_bom("reg.example/b:1", timestamp=_now(48))
    )
    assert stale.json()["decision"] == "deny" and _rule(stale.json(), "scan_age")
    # within the clock skew the service allows, ahead of its own clock: judged, not unknown
    ahead = gate(
        service, token, policy="prod", bom=image_bom("reg.example/e:1", timestamp=_now(-2 / 60))
    )
    assert ahead.json()["decision"] == "allow", ahead.text


def test_a_bom_gated_brings_the_assets_compliance_up_to_date(service: Service) -> None:
    put_policy(service, POLICY)
    token = service.token("gate", "report:write", name="ci")
    answer = gate(
        service, token, policy="prod", bom=image_bom("reg.example/c:1", timestamp=_now(1))
    )
    assert answer.status_code == 200, answer.text
    reader = auth(service.token("inventory:read"))
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"]["evaluated"] == 1 and summary["assets"]["outdated"] == 0


def test_a_vsa_key_that_cannot_sign_gives_an_allow_without_a_vsa(
    service: Service, tmp_path: Path
) -> None:
    key = tmp_path / "vsa.pem"
    key.write_text("not a PEM key\n")
    put_policy(service, LAX)
    settings = Settings(database_url=service.url, environment="test", vsa_key_file=key)
    with TestClient(create_app(settings)) as client:
        answer = client.post(
            "/api/v1/gate",
            json={"policy": "prod", "bom": image_bom("reg.example/d:1", timestamp=_now(1))},
            headers=auth(service.token("gate", "report:write")),
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["decision"] == "allow" and body["vsa"] is None
    assert body["vsa_error"].startswith("no VSA: not an unencrypted PEM private key")


def scan_ids_past_256(service: Service, post_report: Callable[..., Any]) -> None:
    """Make the next scan's id 1001: past CPython's cache of small ints, where two equal ids
    read apart are two objects (an `is` in place of `==` then tells them apart)."""
    post_report(boms.encode(image_bom("reg.example/filler:1", timestamp=_now(3))))
    with service.db.transaction(write=True) as session:
        if session.get_bind().dialect.name == "postgresql":
            session.execute(text("SELECT setval(pg_get_serial_sequence('scan', 'id'), 1000)"))
            return
        columns = [r[1] for r in session.execute(text("PRAGMA table_info(scan)"))]
        rest = ", ".join(c for c in columns if c not in ("id", "dedup_key"))
        session.execute(
            text(
                f"INSERT INTO scan (id, dedup_key, {rest}) "
                f"SELECT 1000, dedup_key || '-filler', {rest} FROM scan ORDER BY id LIMIT 1"
            )
        )


def test_scans_with_large_ids_are_gated_on_their_own_facts(
    service: Service, post_report: Callable[..., Any]
) -> None:
    scan_ids_past_256(service, post_report)
    put_policy(service, LAX.replace("rules: {}", "rules:\n  driver: {}"))
    token = service.token("gate", "report:write", name="ci")
    answer = gate(service, token, policy="prod", bom=_driver_host("550.54.15", _now(1)))
    assert answer.status_code == 200, answer.text
    assert answer.json()["decision"] == "allow", answer.json()["reasons"]
    assert max(scan for _, scan in _decisions(service) if scan is not None) > 1000


def test_baseline_assets_without_gpu_libraries_count_in_parity(
    service: Service, post_report: Callable[..., Any]
) -> None:
    put_policy(
        service,
        LAX.replace("rules: {}", "rules:\n  parity: {label: env, baseline: staging, target: prod}"),
    )
    with_libraries = image_bom("reg.example/p/train:1", labels={"env": "staging"})
    bare = [
        image_bom(f"reg.example/p/bare:{n}", owners=[], labels={"env": "staging"}) for n in range(3)
    ]
    candidate = image_bom(
        "reg.example/p/train:2",
        owners=[boms.cudnn_wheel("9.3.0.75"), *boms.cuda_wheels()],
        labels={"env": "prod"},
    )
    for bom in (with_libraries, *bare, candidate):
        assert post_report(boms.encode(bom)).status_code == 201
    answer = gate(service, service.token("gate"), policy="prod", image=digest(candidate)).json()
    (reason,) = _rule(answer, "parity")
    assert reason["evidence"]["baseline"] == "env=staging (4 assets)"


def test_the_service_names_the_tool_and_version_that_made_a_bom(service: Service) -> None:
    """As `gpuprov gate --bom` does for the same BOM (one reading of a BOM, whoever gates it)."""
    put_policy(service, LAX.replace("rules: {}", "rules:\n  integrity: {forbid: [modified]}"))
    bom = boms.trivy_bom("reg.example/t/infer:1")
    producer = facts_from_bom(boms.encode(bom)).producer
    assert " " in producer  # the tool and its version
    token = service.token("gate", "report:write")
    answer = gate(service, token, policy="prod", bom=bom).json()
    (reason,) = _rule(answer, "integrity")
    assert f"the facts come from {producer}," in reason["message"]


def test_an_older_report_delivered_again_is_not_gated(service: Service) -> None:
    put_policy(service, LAX)
    token = service.token("gate", "report:write")
    first = image_bom("reg.example/o/a:1", timestamp=_now(2))
    assert gate(service, token, policy="prod", bom=first).status_code == 200
    newer = image_bom("reg.example/o/a:1", timestamp=_now(1))
    assert gate(service, token, policy="prod", bom=newer).status_code == 200
    again = gate(service, token, policy="prod", bom=first)  # the same bytes: the same, older scan
    assert again.status_code == 409, again.text


def test_a_subject_that_is_no_digest_is_quoted_by_its_first_80_characters(
    service: Service,
) -> None:
    subject = "sha256:" + "a" * 72 + "b" + "c" * 20  # lower case: the message quotes it so
    answer = service.client.get(
        "/api/v1/gate/decisions",
        params={"subject": subject},
        headers=auth(service.token("inventory:read")),
    )
    assert answer.status_code == 400
    assert f"subject {subject[:80]!r} is not an image digest" in answer.text
    # a name, even one sorting after "sha256:", is matched as a name: no decision, no error
    for name in ("zoo.example/app:1", "sha257/x"):
        named = service.client.get(
            "/api/v1/gate/decisions",
            params={"subject": name},
            headers=auth(service.token("inventory:read")),
        )
        assert named.status_code == 200 and named.json()["items"] == [], named.text


def test_a_bom_without_a_timestamp_has_no_scan_age(service: Service) -> None:
    """Dated by its arrival, which orders it but says nothing of when it was made."""
    put_policy(service, LAX.replace("rules: {}", "rules:\n  scan_age: {max_hours: 24}"))
    bom = image_bom("reg.example/n/a:1")
    del bom["metadata"]["timestamp"]
    answer = gate(service, service.token("gate", "report:write"), policy="prod", bom=bom).json()
    (reason,) = _rule(answer, "scan_age")
    assert answer["decision"] == "deny" and reason["missing_input"] is True


def test_a_scan_pruned_before_its_gate_is_not_found(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention may remove the scan just stored (its asset kept) before the gate reads it."""
    from app.domain import compliance

    def prune(db: Any, asset_id: int, now: Any) -> None:
        with db.transaction(write=True) as session:
            session.execute(
                text("UPDATE asset SET latest_scan_id = NULL WHERE id = :a"), {"a": asset_id}
            )
            session.execute(text("DELETE FROM scan WHERE asset_id = :a"), {"a": asset_id})

    monkeypatch.setattr(compliance, "after_ingest", prune)
    put_policy(service, LAX)
    bom = image_bom("reg.example/n/b:1", timestamp=_now(1))
    answer = gate(service, service.token("gate", "report:write"), policy="prod", bom=bom)
    assert answer.status_code == 404, answer.text
    assert "the ingested report's asset is gone" in answer.text


# ------------------------------------------------------------------ one writer at a time


@pytest.fixture
def sqlite_service(sqlite_url: str) -> Iterator[Service]:
    """The SQLite backend's app alone (its write lock is the database's, not a row's)."""
    settings = Settings(database_url=sqlite_url, environment="test", dashboard_cache_seconds=0)
    app = create_app(settings)
    with TestClient(app) as client:
        service = Service(client, app.state.db, sqlite_url, settings)
        service.truncate()
        yield service


def _other_writer(service: Service, asset_id: int) -> str:
    """Another writer of the asset, which does not wait: what it was told."""
    if service.backend == "sqlite":
        path = service.url.removeprefix("sqlite:///")
        conn = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE asset SET name = name WHERE id = ?", (asset_id,))
            conn.execute("ROLLBACK")
            return "got in"
        except sqlite3.OperationalError as e:
            return str(e)
        finally:
            conn.close()
    url = service.url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("SET lock_timeout = '100ms'")
        try:
            with pg.transaction(force_rollback=True):
                pg.execute("UPDATE asset SET name = name WHERE id = %s", (asset_id,))
            return "got in"
        except psycopg.errors.LockNotAvailable:
            return "database is locked"


def test_a_writer_of_the_asset_waits_while_the_gate_decides(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between reading a BOM's asset and recording its decision, no report or prune of that
    asset gets in (SQLite's write lock; PostgreSQL's lock on the asset's row), so the decision
    is on the asset's latest scan as it is committed."""
    told: list[str] = []
    require_latest = gate_module._require_latest

    def deciding(session: Any, asset: Any, scan: Any) -> None:
        told.append(_other_writer(service, asset.id))
        require_latest(session, asset, scan)

    monkeypatch.setattr(gate_module, "_require_latest", deciding)
    put_policy(service, LAX)
    bom = image_bom("reg.example/n/w:1", timestamp=_now(1))
    answer = gate(service, service.token("gate", "report:write"), policy="prod", bom=bom)
    assert answer.status_code == 200, answer.text
    assert told == ["database is locked"]


@pytest.mark.parametrize("step", ["image", "ingest"])
def test_no_other_writer_gets_in_once_the_gate_has_read(
    sqlite_service: Service, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """SQLite: the gate by digest and the ingest of a gated BOM take the write lock when their
    transaction begins, before their first read; a writer committing after that read would
    make their own write fail ("database is locked": their snapshot is stale)."""
    service = sqlite_service
    put_policy(service, LAX)
    token = service.token("gate", "report:write")
    bom = image_bom("reg.example/n/r:1", timestamp=_now(1))
    if step == "image":
        assert gate(service, token, policy="prod", bom=bom).status_code == 200
    told: list[str] = []
    if step == "image":
        read = gate_module._image

        def reading(session: Any, digest: str, scope: Any = None) -> Any:
            asset, scan = read(session, digest, scope)
            told.append(_other_writer(service, asset.id))
            return asset, scan

        monkeypatch.setattr(gate_module, "_image", reading)
    else:
        ingest = gate_module.ingest

        def ingesting(*args: Any, **kwargs: Any) -> Any:
            def first(*_: Any) -> None:  # after the transaction's first statement, a read
                if not told:
                    told.append(_other_writer(service, 0))

            event.listen(service.db.engine, "after_cursor_execute", first)
            try:
                return ingest(*args, **kwargs)
            finally:
                event.remove(service.db.engine, "after_cursor_execute", first)

        monkeypatch.setattr(gate_module, "ingest", ingesting)
    body = {"image": digest(bom)} if step == "image" else {"bom": bom}
    answer = gate(service, token, policy="prod", **body)
    assert answer.status_code == 200, answer.text
    assert told == ["database is locked"]
