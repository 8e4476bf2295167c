"""The service's gate: stored, versioned policies; POST /gate by image digest and by BOM with the
same JSON as `gpuprov gate --format json`; scopes; the decision audit; the promotion diff; a
signed VSA on allow. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.main import create_app
from app.settings import Settings
from scanner.policy.bom_facts import facts_from_bom
from scanner.policy.document import load_policy
from scanner.policy.evaluate import decision_json, evaluate
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.fixtures import keys

YAML = {"Content-Type": "application/yaml"}
HEAD = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\n"
POLICY = (
    HEAD
    + """rules:
  integrity: {forbid: [modified]}
  versions: {allow: {cudnn: ">=9.1,<10"}, action: warn}
  cuda_pairing: {}
"""
)


def _now(hours_ago: float = 0) -> str:
    return (datetime.now(UTC) - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def put_policy(service: Service, text: str, admin: str | None = None, name: str = "prod") -> Any:
    return service.client.put(
        f"/api/v1/policies/{name}",
        content=text.encode(),
        headers=auth(admin or service.token("admin", name="admin"), **YAML),
    )


def image_bom(name: str, **kw: Any) -> dict[str, Any]:
    """An image report with a digest of its own (by name)."""
    return boms.gpuprov_bom(name=name, digest="sha256:" + boms.digest_of("m", name), **kw)


def tampered(name: str) -> dict[str, Any]:
    wheel = boms.cudnn_wheel()
    libs = [
        boms.Lib(**{**lib.__dict__, "integrity": "modified"})
        if lib.component == "cudnn_ops"
        else lib
        for lib in wheel.libs
    ]
    wheel.libs = libs
    return image_bom(name, owners=[wheel, *boms.cuda_wheels()])


def digest(bom: dict[str, Any]) -> str:
    return str(bom["metadata"]["component"]["version"])


def gate(service: Service, token: str, **body: Any) -> Any:
    return service.client.post("/api/v1/gate", json=body, headers=auth(token))


# ---------------------------------------------------------------------------- policies


def test_policies_are_stored_versioned_and_listed(service: Service) -> None:
    admin = service.token("admin", name="alice")
    first = put_policy(service, POLICY, admin)
    assert first.status_code == 201, first.text
    assert first.json()["version"] == 1 and first.json()["created"] is True
    assert first.json()["created_by"] == "alice"
    assert first.headers["location"] == "/api/v1/policies/prod?version=1"
    again = put_policy(service, POLICY, admin)  # the same bytes: no new version
    assert again.status_code == 200 and again.json()["version"] == 1
    assert again.json()["created"] is False
    changed = POLICY + "  mixed_cudnn: {}\n"
    assert put_policy(service, changed, admin).json()["version"] == 2
    assert put_policy(service, HEAD.replace("prod", "dev") + "rules: {}\n", admin, "dev")

    reader = auth(service.token("inventory:read"))
    current = service.client.get("/api/v1/policies/prod", headers=reader).json()
    assert current["version"] == 2 and current["document"] == changed
    old = service.client.get("/api/v1/policies/prod?version=1", headers=reader).json()
    assert old["document"] == POLICY
    assert old["sha256"] == load_policy(POLICY.encode()).sha256
    history = service.client.get("/api/v1/policies/prod/history", headers=reader).json()
    assert [h["version"] for h in history["items"]] == [2, 1] and history["total"] == 2
    page = service.client.get("/api/v1/policies?limit=1", headers=reader).json()
    assert page["total"] == 2 and [p["name"] for p in page["items"]] == ["dev"]
    page = service.client.get("/api/v1/policies?limit=1&offset=1", headers=reader).json()
    assert [(p["name"], p["version"]) for p in page["items"]] == [("prod", 2)]
    for url in (
        "/api/v1/policies/nope",
        "/api/v1/policies/prod?version=9",
        "/api/v1/policies/nope/history",
    ):
        assert service.client.get(url, headers=reader).status_code == 404


def test_a_bad_policy_is_refused_with_each_field_path(service: Service) -> None:
    bad = HEAD + 'rules:\n  versions: {allow: {cudnnn: "9.*"}}\n  slsa: {min_level: 5}\n'
    answer = put_policy(service, bad)
    assert answer.status_code == 422
    pointers = {d["pointer"]: d["message"] for d in answer.json()["error"]["details"]}
    assert "unknown library family 'cudnnn'" in pointers["/rules/versions/allow/cudnnn"]
    assert "less than or equal to 3" in pointers["/rules/slsa/min_level"]
    # the URL names the policy: a document of another name is refused
    answer = put_policy(service, POLICY, name="staging")
    assert answer.status_code == 422
    assert answer.json()["error"]["details"][0]["pointer"] == "/name"
    assert put_policy(service, "rules: [").status_code == 422
    assert put_policy(service, HEAD + "rules: {}\nextra: 1\n").json()["error"]["details"] == [
        {"pointer": "/extra", "message": "unknown field"}
    ]
    assert service.count("promotion_policy") == 0
    # storing policies is for admins
    writer = service.token("report:write", "inventory:read", "gate")
    assert put_policy(service, POLICY, writer).status_code == 403


# ---------------------------------------------------------------------------- gate


def _local(bom: dict[str, Any], policy: str) -> dict[str, Any]:
    """What `gpuprov gate --bom --policy-file -f json` decides on the same BOM."""
    loaded = load_policy(policy.encode())
    ev = evaluate(facts_from_bom(boms.encode(bom)), loaded.policy)
    return decision_json(ev, loaded.ref(), {})


@pytest.mark.parametrize(
    ("bom", "decision", "failing"),
    [
        (image_bom("reg.example/clean:1"), "allow", []),
        (tampered("reg.example/tampered:1"), "deny", ["integrity"]),
        (
            image_bom(
                "reg.example/old:1",
                owners=[boms.cudnn_wheel("9.0.1.10"), *boms.cuda_wheels()],
            ),
            "warn",
            ["versions"],
        ),
        (
            image_bom(
                "reg.example/mismatch:1",
                owners=[boms.cudnn_wheel(), *boms.cuda_wheels("11.8.89", cuda=11)],
            ),
            "deny",
            ["cuda_pairing"],
        ),
    ],
)
def test_gate_by_image_digest_answers_as_the_cli(
    service: Service,
    post_report: Callable[..., Any],
    bom: dict[str, Any],
    decision: str,
    failing: list[str],
) -> None:
    assert put_policy(service, POLICY).status_code == 201
    assert post_report(boms.encode(bom)).status_code == 201
    answer = gate(service, service.token("gate", name="ci"), policy="prod", image=digest(bom))
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["decision"] == decision
    assert [r["rule"] for r in doc["reasons"]] == failing
    assert doc["policy"] == {
        "name": "prod",
        "version": "1",
        "sha256": load_policy(POLICY.encode()).sha256,
    }
    assert doc["subject"]["digest"] == digest(bom) and doc["subject"]["kind"] == "image"
    local = _local(bom, POLICY)
    for key in ("decision", "reasons", "rules", "controls"):
        assert doc[key] == local[key], key
    assert "vsa" not in doc or doc["vsa"] is None


def test_a_deny_names_files_and_controls(service: Service, post_report: Callable[..., Any]) -> None:
    put_policy(service, POLICY)
    bom = tampered("reg.example/tampered:2")
    post_report(boms.encode(bom))
    doc = gate(service, service.token("gate"), policy="prod", image=digest(bom)).json()
    (reason,) = doc["reasons"]
    assert reason["action"] == "deny" and reason["status"] == "fail"
    assert [f["path"] for f in reason["files"]] == [f"{boms.SITE}/cudnn/lib/libcudnn_ops.so.9"]
    assert reason["files"][0]["sha256"] and reason["files"][0]["version"] == "9.1.0.70"
    assert reason["controls"] == ["ID.RA-09", "PR.DS-01", "DE.CM-09", "CIS-2.5", "CIS-2.6"]
    assert doc["controls"]["CIS-2.5"] == "fail" and doc["controls"]["PR.PS-01"] == "pass"


def test_gate_by_bom_ingests_then_gates(service: Service) -> None:
    put_policy(service, POLICY)
    token = service.token("gate", "report:write", name="ci")
    bom = boms.syft_bom()
    answer = gate(service, token, policy="prod", bom=bom)
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    # another tool's BOM has no integrity verdicts: the rule fails on the missing input
    assert doc["decision"] == "deny"
    integrity = next(r for r in doc["reasons"] if r["rule"] == "integrity")
    assert integrity["missing_input"] is True
    assert service.count("scan") == 1 and service.count("asset") == 1
    # the stored BOM is gated again by its digest, with the same answer
    again = gate(service, token, policy="prod", image=doc["subject"]["digest"]).json()
    assert again["reasons"] == doc["reasons"]
    # an unknown policy stores nothing
    assert gate(service, token, policy="nope", bom=boms.syft_bom("x/y:1")).status_code == 404
    assert service.count("scan") == 1


def test_gate_by_bom_of_a_pushed_report(service: Service) -> None:
    """A BOM pushed as its file's bytes, then gated: the gate request carries the same JSON in
    other bytes, which is the stored report, not a 409 "different content"."""
    put_policy(service, POLICY)
    token = service.token("gate", "report:write", name="ci")
    bom = image_bom("ml/train:1")
    pushed = service.client.post(
        "/api/v1/reports",
        content=json.dumps(bom, indent=2).encode(),
        headers=auth(token, **{"Content-Type": "application/vnd.cyclonedx+json"}),
    )
    assert pushed.status_code == 201, pushed.text
    answer = gate(service, token, policy="prod", bom=bom)
    assert answer.status_code == 200, answer.text
    assert answer.json()["subject"]["digest"] == digest(bom) and service.count("scan") == 1
    # other content under the same serial number is still refused
    changed = {**bom, "metadata": {**bom["metadata"], "timestamp": _now(1)}}
    assert gate(service, token, policy="prod", bom=changed).status_code == 409


def test_gate_scopes(service: Service, post_report: Callable[..., Any]) -> None:
    put_policy(service, POLICY)
    bom = image_bom("reg.example/clean:2")
    post_report(boms.encode(bom))
    body = {"policy": "prod", "image": digest(bom)}
    assert service.client.post("/api/v1/gate", json=body).status_code == 401
    for scopes in (("inventory:read",), ("report:write",)):
        answer = gate(service, service.token(*scopes), **body)
        assert answer.status_code == 403, scopes
        assert "gate scope" in answer.json()["error"]["message"]
    assert gate(service, service.token("gate"), **body).status_code == 200
    assert gate(service, service.token("admin"), **body).status_code == 200
    # a BOM is stored before it is gated: report:write is needed too
    answer = gate(service, service.token("gate"), policy="prod", bom=image_bom("x/new:1"))
    assert answer.status_code == 403 and "report:write" in answer.json()["error"]["message"]
    assert service.count("gate_decision") == 2


def test_gate_refuses_what_it_cannot_decide_on(
    service: Service, post_report: Callable[..., Any]
) -> None:
    token = service.token("gate", "report:write")
    unknown = "sha256:" + "a" * 64
    assert gate(service, token, policy="prod", image=unknown).status_code == 404
    put_policy(service, POLICY)
    answer = gate(service, token, policy="prod", image=unknown)
    assert answer.status_code == 404 and "no image" in answer.json()["error"]["message"]
    for body in (
        {"policy": "prod"},
        {"policy": "prod", "image": unknown, "bom": {}},
        {"policy": "prod", "image": "sha256:xyz"},
        {"policy": "prod", "image": unknown, "other": 1},
        {"image": unknown},
    ):
        assert gate(service, token, **body).status_code == 422, body
    answer = gate(service, token, policy="prod", bom={"bomFormat": "nope"})
    assert answer.status_code == 422
    deep = service.client.post(
        "/api/v1/gate",
        content=b"[" * 100_000,
        headers=auth(token, **{"Content-Type": "application/json"}),
    )
    assert deep.status_code == 422
    assert service.count("gate_decision") == 0


# ---------------------------------------------------------------------------- audit


def test_every_decision_is_recorded_and_listed_with_filters(
    service: Service, post_report: Callable[..., Any]
) -> None:
    put_policy(service, POLICY)
    clean, bad = image_bom("reg.example/a:1"), tampered("reg.example/b:1")
    post_report(boms.encode(clean))
    post_report(boms.encode(bad))
    ci = service.token("gate", name="ci-main")
    before = datetime.now(UTC) - timedelta(seconds=1)
    gate(service, ci, policy="prod", image=digest(clean))
    gate(service, ci, policy="prod", image=digest(bad))
    put_policy(service, POLICY + "  duplicates: {}\n")
    gate(service, ci, policy="prod", image=digest(bad))

    reader = auth(service.token("inventory:read"))

    def listed(**params: Any) -> dict[str, Any]:
        answer = service.client.get("/api/v1/gate/decisions", params=params, headers=reader)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    page = listed()
    assert page["total"] == 3
    newest = page["items"][0]
    assert newest["decision"] == "deny" and newest["token_name"] == "ci-main"
    assert newest["policy"] == {"name": "prod", "version": 2}
    assert newest["subject"]["digest"] == digest(bad)
    assert newest["subject"]["name"] == "reg.example/b:1"
    assert newest["reasons"][0]["rule"] == "integrity"
    assert datetime.fromisoformat(newest["decided_at"]) >= before
    assert listed(decision="deny")["total"] == 2
    assert listed(decision="allow")["items"][0]["subject"]["digest"] == digest(clean)
    assert listed(subject=digest(bad))["total"] == 2
    assert listed(subject=digest(bad).upper())["total"] == 2
    assert listed(subject="reg.example/b:1")["total"] == 2
    for malformed in ("sha256:zz", "sha256:" + "a" * 63, "SHA256:" + "g" * 64, "sha256:"):
        answer = service.client.get(
            "/api/v1/gate/decisions", params={"subject": malformed}, headers=reader
        )
        assert answer.status_code == 400, (malformed, answer.text)
        assert "is not an image digest" in answer.json()["error"]["message"]
    assert listed(policy="prod")["total"] == 3 and listed(policy="dev")["total"] == 0
    assert listed(since=(datetime.now(UTC) + timedelta(hours=1)).isoformat())["total"] == 0
    assert listed(since=before.isoformat())["total"] == 3
    assert len(listed(limit=1, offset=2)["items"]) == 1
    bad_filter = service.client.get("/api/v1/gate/decisions?decision=maybe", headers=reader)
    assert bad_filter.status_code == 400
    gate_only = auth(service.token("gate"))
    assert service.client.get("/api/v1/gate/decisions", headers=gate_only).status_code == 403


# ---------------------------------------------------------------------------- diff


def test_promotion_diff_between_two_images(
    service: Service, post_report: Callable[..., Any]
) -> None:
    old = image_bom(
        "reg.example/train:1", owners=[boms.cudnn_wheel("9.1.0.70"), *boms.cuda_wheels()]
    )
    runtime, cublas, nccl = boms.cuda_wheels()
    rebuilt = [
        boms.Lib(**{**lib.__dict__, "sha256": boms.digest_of("rebuilt", lib.path)})
        for lib in cublas.libs
    ]
    cublas.libs = rebuilt
    new = image_bom(
        "reg.example/train:2",
        owners=[boms.cudnn_wheel("9.3.0.75"), runtime, cublas],
        extra_libs=[boms.Lib("/opt/app/lib/libnvinfer.so.10", "nvinfer", "nvinfer", "10.0.1")],
    )
    post_report(boms.encode(old))
    post_report(boms.encode(new))
    reader = auth(service.token("inventory:read"))
    answer = service.client.get(
        "/api/v1/gate/diff", params={"from": digest(old), "to": digest(new)}, headers=reader
    )
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["from"]["digest"] == digest(old) and doc["to"]["name"] == "reg.example/train:2"
    assert [a["path"] for a in doc["added"]] == ["/opt/app/lib/libnvinfer.so.10"]
    assert [r["family"] for r in doc["removed"]] == ["nccl"]
    assert {c["family"] for c in doc["version_changed"]} == {"cudnn"}
    assert len(doc["version_changed"]) == 8
    assert doc["version_changed"][0]["from"]["version"] == "9.1.0.70"
    assert doc["version_changed"][0]["to"]["version"] == "9.3.0.75"
    assert sorted(c["family"] for c in doc["digest_changed"]) == ["cublas", "cublasLt"]
    unknown = "sha256:" + "b" * 64
    missing = service.client.get(
        "/api/v1/gate/diff", params={"from": digest(old), "to": unknown}, headers=reader
    )
    assert missing.status_code == 404
    bad = service.client.get(
        "/api/v1/gate/diff", params={"from": "x", "to": unknown}, headers=reader
    )
    assert bad.status_code == 400


# ---------------------------------------------------------------------------- VSA


def test_an_allowed_gate_carries_a_signed_vsa_that_verify_accepts(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    key, pub = keys.write_keypair(tmp_path / "keys", "gate", keys.generate("ecdsa"))
    settings = Settings(database_url=service.url, environment="test", vsa_key_file=key)
    put_policy(service, POLICY)
    clean, bad = image_bom("reg.example/vsa:1"), tampered("reg.example/vsa:2")
    # cuDNN 9.0 is outside the policy's versions, whose action is warn
    old = image_bom(
        "reg.example/vsa:4", owners=[boms.cudnn_wheel("9.0.0.312"), *boms.cuda_wheels()]
    )
    for bom in (clean, bad, old):
        post_report(boms.encode(bom))
    token = service.token("gate")
    with TestClient(create_app(settings)) as client:
        allowed, denied, warned = (
            client.post(
                "/api/v1/gate", json={"policy": "prod", "image": digest(b)}, headers=auth(token)
            ).json()
            for b in (clean, bad, old)
        )
    assert allowed["decision"] == "allow" and allowed["vsa"]["payloadType"]
    assert denied["decision"] == "deny" and denied["vsa"] is None
    # a VSA says PASSED: a warn names a failing rule, so it earns none (as in the CLI)
    assert warned["decision"] == "warn" and [r["rule"] for r in warned["reasons"]] == ["versions"]
    assert warned["vsa"] is None and warned["vsa_error"] is None
    bundle = tmp_path / "vsa.json"
    bundle.write_text(json.dumps(allowed["vsa"]))
    from gpuprov.cli import app as cli_app

    cli: typer.Typer = cli_app
    result = CliRunner().invoke(
        cli, ["verify", digest(clean), "--bundle", str(bundle), "--key", str(pub)]
    )
    assert result.exit_code == 0, result.stderr
    assert "VSA PASSED" in result.stdout
    assert "urn:gpuprov:policy:prod:1:sha256:" in result.stdout
    other = CliRunner().invoke(
        cli, ["verify", digest(bad), "--bundle", str(bundle), "--key", str(pub)]
    )
    assert other.exit_code == 1


def test_an_unreadable_vsa_key_is_a_503(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    settings = Settings(
        database_url=service.url, environment="test", vsa_key_file=tmp_path / "missing.pem"
    )
    put_policy(service, POLICY)
    bom = image_bom("reg.example/vsa:3")
    post_report(boms.encode(bom))
    with TestClient(create_app(settings)) as client:
        answer = client.post(
            "/api/v1/gate",
            json={"policy": "prod", "image": digest(bom)},
            headers=auth(service.token("gate")),
        )
    assert answer.status_code == 503 and "GPUPROV_VSA_KEY_FILE" in answer.text


def test_parity_uses_the_labelled_fleet_and_the_answer_diffs_the_replaced_image(
    service: Service, post_report: Callable[..., Any]
) -> None:
    policy = HEAD + "rules:\n  parity: {label: env, baseline: staging, target: prod}\n"
    put_policy(service, policy)
    staging = image_bom(
        "reg.example:5000/ml/train:1",
        owners=[boms.cudnn_wheel("9.1.0.70"), *boms.cuda_wheels()],
        labels={"env": "staging"},
    )
    other = image_bom("reg.example:5000/ml/other:7", labels={"env": "staging"})
    candidate = image_bom(
        "reg.example:5000/ml/train:2",
        owners=[boms.cudnn_wheel("9.3.0.75"), *boms.cuda_wheels()],
        labels={"env": "prod"},
    )
    same = image_bom("reg.example:5000/ml/train:3", labels={"env": "prod"})
    for bom in (staging, other, candidate, same):
        assert post_report(boms.encode(bom)).status_code == 201
    token = service.token("gate")
    doc = gate(service, token, policy="prod", image=digest(candidate)).json()
    (reason,) = doc["reasons"]
    assert reason["rule"] == "parity" and "cudnn 9.3.0.75" in reason["message"]
    assert "env=staging (2 assets)" in reason["evidence"]["baseline"]
    diff = doc["promotion_diff"]
    assert diff["from"]["name"] == "reg.example:5000/ml/train:1"
    assert {c["family"] for c in diff["version_changed"]} == {"cudnn"}
    assert diff["added"] == [] and diff["removed"] == []
    # the versions the baseline runs pass; no parity rule, no diff
    assert gate(service, token, policy="prod", image=digest(same)).json()["decision"] == "allow"
    put_policy(service, POLICY)
    assert (
        gate(service, token, policy="prod", image=digest(candidate)).json()["promotion_diff"]
        is None
    )
