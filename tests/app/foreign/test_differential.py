"""One reading of a BOM, whoever gates it: every document of the corpus (other tools' BOMs
recorded from Syft, Trivy and cdxgen, corpus/; hand-made package-naming cases, edge_cases.py;
our own BOMs) is gated offline (`gpuprov gate --bom X --policy-file P -f json`) and through the
service (`POST /api/v1/gate` with the BOM, the policy stored), on SQLite and PostgreSQL, under
policies that set every rule; the decision, every rule's status, message, files and evidence,
and the control statuses must be the same. The library facts the service stores must be the
facts the CLI reads, too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.domain.gate import facts_of
from app.storage.repositories import gate as repo
from gpuprov.cli import app as cli_app
from scanner.policy.bom_facts import facts_from_bom
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.foreign.edge_cases import edge_cases

CORPUS = Path(__file__).parent / "corpus"
HEAD = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\n"
#: every rule, each with settings a corpus document can fail
POLICIES = {
    # the issue's policy: cuda_pairing alone
    "pairing": HEAD + "name: pairing\nrules:\n  cuda_pairing: {}\n",
    "strict": HEAD
    + """name: strict
rules:
  integrity: {forbid: [modified, unowned]}
  ownership: {allow_unowned: ["/opt/vendor/**"]}
  provenance: {require: verified}
  versions:
    allow: {cudnn: ">=9.1,<10"}
    deny: {nccl: ["2.20.*"]}
    minimum: {cudart: "12.2", cublas: "12.4"}
  cuda_pairing: {}
  mixed_cudnn: {}
  duplicates: {}
  driver: {}
  loaded: {forbid: [loaded-deleted, loaded-differs-from-disk, loaded-unowned]}
  image_signature: {signers: [release-ci]}
  slsa: {min_level: 2}
  scan_age: {max_hours: 87600}
""",
    "lenient": HEAD
    + """name: lenient
rules:
  integrity: {forbid: [modified], action: warn}
  provenance: {signers: [nvidia-catalog], action: warn}
  versions: {allow: {cudart: ">=11,<14", nvinfer: ">=10"}, minimum: {nccl: "2.21"}, action: warn}
  cuda_pairing: {action: warn}
  driver: {minor_version_compatibility: false, action: warn}
  loaded: {action: warn}
  image_signature: {action: warn}
  slsa: {min_level: 1, action: warn}
  scan_age: {max_hours: 1}
  parity: {label: env, baseline: staging, target: prod, action: warn}
""",
}
#: the parity rule's baseline: given to the CLI with --baseline, stored in the service
BASELINE = boms.gpuprov_bom(
    name="reg.example/staging:1",
    digest="sha256:" + "5" * 64,
    serial="urn:uuid:5b5b5b5b-5b5b-4b5b-8b5b-5b5b5b5b5b5b",
    labels={"env": "staging"},
)


def _documents() -> dict[str, dict[str, Any]]:
    docs = {p.name.removesuffix(".cdx.json"): json.loads(p.read_bytes()) for p in CORPUS.iterdir()}
    docs.update(edge_cases())
    ours = boms.gpuprov_bom(
        name="reg.example/ours:1",
        digest="sha256:" + "7" * 64,
        serial="urn:uuid:7c7c7c7c-7c7c-4c7c-8c7c-7c7c7c7c7c7c",
    )
    docs["gpuprov-image"] = ours
    host = boms.gpuprov_bom(
        kind="host",
        name="gpu-node-3",
        serial="urn:uuid:3d3d3d3d-3d3d-4d3d-8d3d-3d3d3d3d3d3d",
    )
    docs["gpuprov-host"] = host
    return docs


DOCUMENTS = _documents()
#: the documents recorded from real tools (the rest are hand-made or ours)
RECORDED = sorted(p.name.removesuffix(".cdx.json") for p in CORPUS.iterdir())
_HOURS = re.compile(r"\d+\.\d h")


def _comparable(answer: dict[str, Any]) -> dict[str, Any]:
    """What must agree: the decision, every rule's result, the controls and the subject (kind,
    name, digest, scan time, labels, producer). The scan_age rule says how many hours ago the
    scan was, at the moment each side evaluated it."""
    rules = []
    for rule in answer["rules"]:
        if rule["rule"] == "scan_age":
            rule = {**rule, "message": _HOURS.sub("N h", rule["message"])}
        rules.append(rule)
    return {
        "decision": answer["decision"],
        "rules": rules,
        "controls": answer["controls"],
        "subject": answer["subject"],
    }


def _offline(tmp_path: Path, doc: dict[str, Any], policy: str) -> dict[str, Any]:
    bom = tmp_path / "bom.cdx.json"
    bom.write_bytes(boms.encode(doc))
    policy_file = tmp_path / f"{policy}.yaml"
    policy_file.write_text(POLICIES[policy])
    baseline = tmp_path / "baseline.cdx.json"
    baseline.write_bytes(boms.encode(BASELINE))
    args = ["gate", "--bom", str(bom), "--policy-file", str(policy_file), "-f", "json"]
    if policy == "lenient":
        args += ["--baseline", str(baseline)]
    result = CliRunner().invoke(cli_app, args)
    assert result.exit_code in (0, 1), result.output
    answer: dict[str, Any] = json.loads(result.stdout)
    assert result.exit_code == (1 if answer["decision"] == "deny" else 0)
    return answer


def _service(service: Service, token: str, doc: dict[str, Any], policy: str) -> dict[str, Any]:
    answer = service.client.post(
        "/api/v1/gate", json={"policy": policy, "bom": doc}, headers=auth(token)
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


@pytest.fixture
def stored_policies(service: Service) -> str:
    """The corpus's policies and the parity baseline stored; a gate + report:write token."""
    admin = service.token("admin", name="admin")
    for name, text in POLICIES.items():
        put = service.client.put(
            f"/api/v1/policies/{name}",
            content=text.encode(),
            headers=auth(admin, **{"Content-Type": "application/yaml"}),
        )
        assert put.status_code in (200, 201), put.text
    token = service.token("gate", "report:write", name="ci")
    pushed = service.client.post(
        "/api/v1/reports",
        content=boms.encode(BASELINE),
        headers=auth(token, **{"Content-Type": "application/vnd.cyclonedx+json"}),
    )
    assert pushed.status_code == 201, pushed.text
    return token


def test_the_corpus_holds_every_tool_and_naming_case() -> None:
    """The recorded documents come from the three tools, as they wrote them, and hold GPU
    libraries by deb, rpm and PyPI names; the hand-made cases add what the tools did not."""
    tools = {name.split("-", 1)[0] for name in RECORDED}
    assert tools == {"syft", "trivy", "cdxgen"}
    for name in RECORDED:
        meta = DOCUMENTS[name]["metadata"]
        written = json.dumps(meta["tools"]).lower()
        assert name.split("-", 1)[0] in written or "trivy" in written, name
    facts = [facts_from_bom(boms.encode(DOCUMENTS[n])) for n in RECORDED]
    families = {(f.family, f.cuda_major) for fact in facts for f in fact.files}
    assert {("cudnn", 12), ("cudart", 12), ("cudart", 11), ("cudart", 13), ("nvinfer", 12)} <= (
        families
    )


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_gated_offline_and_by_the_service_alike(
    name: str, service: Service, stored_policies: str, tmp_path: Path
) -> None:
    doc = DOCUMENTS[name]
    offline_facts = facts_from_bom(boms.encode(doc))
    for policy in POLICIES:
        offline = _offline(tmp_path, doc, policy)
        online = _service(service, stored_policies, doc, policy)
        assert _comparable(online) == _comparable(offline), (name, policy)
    # the facts the service stored are the facts the CLI read, file by file
    with service.db.session() as session:
        decision = repo.decisions(session, repo.DecisionQuery(), 1, 0)[0][0]
        asset = repo.asset_by_id(session, decision.asset_id)
        scan = repo.scan_by_id(session, decision.scan_id)
        assert asset is not None and scan is not None
        stored = facts_of(asset, scan, repo.artifacts_of(session, [scan.id])[scan.id])
    assert stored.files == offline_facts.files, name
    assert stored.producer == offline_facts.producer
    assert stored.image_trust == offline_facts.image_trust
    assert stored.findings == offline_facts.findings


def test_the_issue_pair_is_allowed_both_ways(
    service: Service, stored_policies: str, tmp_path: Path
) -> None:
    """libcudnn9-cuda-12 (deb) and cuda-cudart-12-4 (rpm) under cuda_pairing: {}: the CLI
    denied ("the CUDA major of cudart is unknown"), the service allowed."""
    doc = DOCUMENTS["issue-deb-cudnn-rpm-cudart"]
    for answer in (
        _offline(tmp_path, doc, "pairing"),
        _service(service, stored_policies, doc, "pairing"),
    ):
        assert answer["decision"] == "allow"
        (rule,) = answer["rules"]
        assert rule["status"] == "pass"
        assert rule["message"] == "1 file(s) built for CUDA 12, matching cudart"


def test_an_unreadable_number_is_refused_both_ways(
    service: Service, stored_policies: str, tmp_path: Path
) -> None:
    """A CUDA major no column holds is an error on both sides (exit 2, 422), never a decision."""
    doc = edge_cases()["issue-deb-cudnn-rpm-cudart"]
    doc["components"][0]["purl"] = "pkg:deb/debian/libcudnn9-cuda-99999999999@9.1.0.70-1"
    bom = tmp_path / "bad.cdx.json"
    bom.write_bytes(boms.encode(doc))
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICIES["pairing"])
    result = CliRunner().invoke(
        cli_app, ["gate", "--bom", str(bom), "--policy-file", str(policy), "-f", "json"]
    )
    assert result.exit_code == 2
    assert "/components/0: the number 99999999999 (11 digits) is out of range" in result.stderr
    answer = service.client.post(
        "/api/v1/gate", json={"policy": "pairing", "bom": doc}, headers=auth(stored_policies)
    )
    assert answer.status_code == 422
    assert "out of range" in answer.json()["error"]["message"]
