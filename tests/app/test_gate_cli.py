"""`gpuprov gate --policy NAME --server URL`: the CLI scans (or reads a BOM), the service stores
it and decides under its stored policy; exit codes and every output format come from the
service's answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import typer
from typer.testing import CliRunner

from gpuprov.cli import app as cli_app
from tests.app import boms
from tests.app.conftest import LiveServer, Service, auth, free_port
from tests.app.test_agent import host_root as host_root  # noqa: F401 - the fixture
from tests.app.test_gate_api import POLICY, image_bom, put_policy, tampered
from tests.fixtures import keys


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return cli_app


def run(app: typer.Typer, *args: object, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def _files(tmp_path: Path, service: Service, bom: dict[str, Any]) -> tuple[Path, Path]:
    token = tmp_path / "ci.token"
    token.write_text(service.token("gate", "report:write", name="ci"))
    path = tmp_path / "bom.cdx.json"
    path.write_bytes(boms.encode(bom))
    return token, path


def test_remote_gate_of_a_bom_exit_codes_and_formats(
    app: typer.Typer, service: Service, tmp_path: Path
) -> None:
    put_policy(service, POLICY)
    token, clean = _files(tmp_path, service, image_bom("reg.example/cli:1"))
    bad = tmp_path / "bad.cdx.json"
    bad.write_bytes(boms.encode(tampered("reg.example/cli:2")))
    port = free_port()
    server = f"http://127.0.0.1:{port}"
    common = ["--policy", "prod", "--server", server, "--token-file", token]
    with LiveServer(service.settings, port):
        ok = run(app, "gate", "--bom", clean, *common, "-f", "json")
        denied = run(app, "gate", "--bom", bad, *common, "-f", "sarif")
        junit = run(app, "gate", "--bom", bad, *common, "-f", "junit")
        text = run(app, "gate", "--bom", clean, *common)
        unknown = run(
            app,
            "gate",
            "--bom",
            clean,
            "--policy",
            "nope",
            "--server",
            server,
            "--token-file",
            token,
        )
        reader = tmp_path / "reader.token"
        reader.write_text(service.token("inventory:read"))
        refused = run(
            app,
            "gate",
            "--bom",
            clean,
            "--policy",
            "prod",
            "--server",
            server,
            "--token-file",
            reader,
        )
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["decision"] == "allow" and doc["policy"]["version"] == "1"
    # every format carries the service's record of its decision (issue 17: -f json dropped it)
    reader = auth(service.token("inventory:read"))
    recorded = service.client.get("/api/v1/gate/decisions?limit=10", headers=reader).json()
    records = {d["id"]: d["decided_at"] for d in recorded["items"]}
    assert records[doc["decision_id"]] == doc["decided_at"]
    assert denied.exit_code == 1, denied.output
    sarif = json.loads(denied.stdout)
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "integrity" and result["level"] == "error"
    assert "CIS-2.5" in result["properties"]["controls"]
    run_props = sarif["runs"][0]["properties"]
    assert records[run_props["decision_id"]] == run_props["decided_at"]
    assert sarif["runs"][0]["results"][0]["locations"]
    assert junit.exit_code == 1 and "<failure" in junit.stdout
    suite = ET.fromstring(junit.stdout).find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert records[int(props["decision_id"] or 0)] == props["decided_at"]
    assert text.exit_code == 0 and text.stdout.startswith("decision: ALLOW")
    (line,) = [x for x in text.stdout.splitlines() if x.startswith("record:")]
    number, _, when = line.removeprefix("record:").strip().partition(" at ")
    assert records[int(number)] == when
    assert unknown.exit_code == 2 and "404" in unknown.stderr and "nope" in unknown.stderr
    assert refused.exit_code == 2 and "403" in refused.stderr
    # every remote decision is recorded by the service (the refused ones are not decisions)
    assert service.count("gate_decision") == 4 and service.count("asset") == 2


def test_remote_gate_scans_the_target_then_asks_the_service(
    app: typer.Typer,
    service: Service,
    host_root: Path,
    tmp_path: Path,  # noqa: F811
) -> None:
    put_policy(service, POLICY)
    token, _ = _files(tmp_path, service, image_bom("x/unused:1"))
    port = free_port()
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    with LiveServer(service.settings, port):
        answer = run(
            app,
            "gate",
            host_root,
            "--no-cache",
            "--policy",
            "prod",
            "--server",
            f"http://127.0.0.1:{port}",
            "--token-file",
            token,
            "-f",
            "json",
            env=env,
        )
    assert answer.exit_code == 0, answer.output
    doc = json.loads(answer.stdout)
    assert doc["subject"]["kind"] == "host"
    assert [r["rule"] for r in doc["rules"]] == ["integrity", "versions", "cuda_pairing"]
    assert service.count("scan") == 1 and service.count("gate_decision") == 1


def test_remote_gate_writes_the_service_vsa(
    app: typer.Typer, service: Service, tmp_path: Path
) -> None:
    key, pub = keys.write_keypair(tmp_path / "keys", "gate", keys.generate("ed25519"))
    settings = service.settings.model_copy(update={"vsa_key_file": key})
    put_policy(service, POLICY)
    bom = image_bom("reg.example/cli-vsa:1")
    token, path = _files(tmp_path, service, bom)
    vsa = tmp_path / "vsa.json"
    port = free_port()
    with LiveServer(settings, port):
        answer = run(
            app,
            "gate",
            "--bom",
            path,
            "--policy",
            "prod",
            "--server",
            f"http://127.0.0.1:{port}",
            "--token-file",
            token,
            "--vsa-out",
            vsa,
        )
    assert answer.exit_code == 0, answer.output
    digest = bom["metadata"]["component"]["version"]
    verified = run(app, "verify", digest, "--bundle", vsa, "--key", pub)
    assert verified.exit_code == 0, verified.output
    assert "VSA PASSED" in verified.stdout


def test_remote_and_local_options_do_not_mix(app: typer.Typer, tmp_path: Path) -> None:
    bom = tmp_path / "b.json"
    bom.write_bytes(boms.encode(image_bom("x/y:1")))
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    for args in (
        ["--bom", bom],
        ["--bom", bom, "--policy", "prod", "--policy-file", policy],
        ["--bom", bom, "--policy", "prod", "--vsa-key", policy],
        ["--bom", bom, "--policy", "prod", "--baseline", bom],
        ["--bom", bom, "--policy-file", policy, "--server", "http://127.0.0.1:1"],
        ["--bom", bom, "--policy", "prod", "--server", "ftp://x"],
    ):
        result = run(app, "gate", *args, env={"GPUPROV_TOKEN": "t"})
        assert result.exit_code == 2, (args, result.output)
    both = run(app, "gate", "--bom", bom, "--policy", "prod", "--policy-file", policy)
    assert "--policy-file FILE (decide here) and --policy NAME (the service decides) exclude" in (
        both.stderr
    )
    down = run(
        app,
        "gate",
        "--bom",
        bom,
        "--policy",
        "prod",
        "--server",
        f"http://127.0.0.1:{free_port()}",
        env={"GPUPROV_TOKEN": "t"},
    )
    assert down.exit_code == 2 and "cannot reach the service" in down.stderr


def test_local_gate_pushes_its_scan_with_server_and_token_file(
    app: typer.Typer,
    service: Service,
    host_root: Path,
    tmp_path: Path,  # noqa: F811
) -> None:
    # docs/policy.md: the gate takes every scan option, `--push ...` included; --server and
    # --token-file then go to the scan's delivery (they were refused: "--policy NAME only").
    token = tmp_path / "agent.token"
    token.write_text(service.token("report:write", name="agent"))
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    port = free_port()
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "GPUPROV_SPOOL": str(tmp_path / "spool")}
    with LiveServer(service.settings, port):
        answer = run(
            app,
            "gate",
            host_root,
            "--no-cache",
            "--policy-file",
            policy,
            "--push",
            "--server",
            f"http://127.0.0.1:{port}",
            "--token-file",
            token,
            "-f",
            "json",
            env=env,
        )
    assert answer.exit_code == 0, answer.output
    assert json.loads(answer.stdout)["subject"]["kind"] == "host"
    assert service.count("scan") == 1 and service.count("gate_decision") == 0
    # the push fails (the service is gone; the report is spooled): the scan failed, and the
    # gate decides nothing on it (an allow here would promote what the service never got)
    output = tmp_path / "decision.json"
    down = run(
        app,
        "gate",
        host_root,
        "--no-cache",
        "--policy-file",
        policy,
        "--push",
        "--server",
        f"http://127.0.0.1:{port}",
        "--token-file",
        token,
        "-f",
        "json",
        "-o",
        output,
        env=env,
    )
    assert down.exit_code == 2, down.output
    assert "report spooled" in down.stderr and "the scan failed" in down.stderr
    assert "no decision" in down.stderr
    assert down.stdout == "" and not output.exists()
    assert len(list((tmp_path / "spool").glob("*.cdx.json.gz"))) == 1
    # without --push they still belong to --policy NAME only
    refused = run(app, "gate", host_root, "--policy-file", policy, "--token-file", token)
    assert refused.exit_code == 2 and "or to the scan's --push" in refused.stderr


def test_a_bom_with_scan_options_says_what_to_drop(app: typer.Typer, tmp_path: Path) -> None:
    bom = tmp_path / "b.json"
    bom.write_bytes(boms.encode(image_bom("x/y:1")))
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    result = run(app, "gate", "--bom", bom, "--policy-file", policy, "-q")
    assert result.exit_code == 2
    assert (
        "--bom FILE is gated as it is, without a scan: drop the TARGET and scan options (-q)"
        in (result.stderr)
    )
