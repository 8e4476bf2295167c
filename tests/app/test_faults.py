"""Faults: the database is down (503 with Retry-After), and an agent whose service is down
spools its report and delivers it exactly once when the service is back (real uvicorn)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.main import create_app
from app.settings import Settings
from scanner import cli_agent
from tests.app import boms
from tests.app.conftest import JSON_HEADERS, LiveServer, Service, auth, free_port


def _unreachable(backend: str, tmp_path: Path) -> str:
    if backend == "postgresql":
        return f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/gpuprov"
    return f"sqlite:///{tmp_path / 'missing-dir' / 'gpuprov.db'}"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_database_down_answers_503(backend: str, tmp_path: Path) -> None:
    settings = Settings(
        database_url=_unreachable(backend, tmp_path),
        retry_after_seconds=7,
        database_connect_timeout=2,
    )
    with TestClient(create_app(settings)) as client:  # starts: replicas may precede their DB
        assert client.get("/healthz").status_code == 200
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.headers["retry-after"] == "7"
        for method, path in (("GET", "/api/v1/assets"), ("POST", "/api/v1/reports")):
            answer = client.request(
                method,
                path,
                content=boms.encode(boms.gpuprov_bom()),
                headers=auth("gpv_anything", **JSON_HEADERS),
            )
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "7"
            assert "database is unavailable" in answer.json()["error"]["message"]


def _invoke(args: list[str], spool: Path, token_file: Path) -> tuple[int, str]:
    app = __import__("typer").Typer()
    cli_agent.register(app)
    app.command("noop", hidden=True)(lambda: None)  # keep `push` a subcommand
    options = ["--spool-dir", str(spool), "--token-file", str(token_file), "--retries", "0"]
    result = CliRunner().invoke(app, [*args, *options])
    return result.exit_code, result.output


def test_agent_spools_then_delivers_exactly_once(service: Service, tmp_path: Path) -> None:
    token_file = tmp_path / "agent.token"
    token_file.write_text(service.token("report:write", name="agent") + "\n")
    spool = tmp_path / "spool"
    report = tmp_path / "report.json"
    report.write_bytes(boms.encode(boms.gpuprov_bom(kind="host", name="node-x")))
    port = free_port()
    server = f"http://127.0.0.1:{port}"

    code, output = _invoke(
        ["push", str(report), "--server", server, "--label", "env=prod"], spool, token_file
    )
    assert code == cli_agent.EXIT_SPOOLED, output
    assert "spooled to" in output
    spooled = list(spool.glob("*.cdx.json.gz"))
    assert len(spooled) == 1
    # pushing the same report again while down keeps one copy
    code, _ = _invoke(["push", str(report), "--server", server], spool, token_file)
    assert code == cli_agent.EXIT_SPOOLED and len(list(spool.glob("*.cdx.json.gz"))) == 1
    assert service.count("scan") == 0

    with LiveServer(service.settings, port):
        code, output = _invoke(["push", "--spool", "--server", server], spool, token_file)
        assert code == 0, output
        assert "delivered spooled report" in output
        assert list(spool.glob("*.cdx.json.gz")) == []
        # the report is delivered again (say the answer was lost): stored once all the same
        code, output = _invoke(["push", str(report), "--server", server], spool, token_file)
        assert code == 0 and "already stored" in output
    assert service.count("scan") == 1
    reader = service.token("inventory:read")
    assets = service.client.get("/api/v1/assets", headers=auth(reader)).json()["items"]
    assert [(a["name"], a["labels"]) for a in assets] == [("node-x", {"env": "prod"})]


def test_refused_spooled_report_is_set_aside(service: Service, tmp_path: Path) -> None:
    token_file = tmp_path / "agent.token"
    token_file.write_text(service.token("report:write", assets=["allowed-*"]))
    spool = tmp_path / "spool"
    port = free_port()
    server = f"http://127.0.0.1:{port}"
    for name in ("forbidden-host", "allowed-host"):
        path = tmp_path / f"{name}.json"
        path.write_bytes(boms.encode(boms.gpuprov_bom(kind="host", name=name)))
        code, _ = _invoke(["push", str(path), "--server", server], spool, token_file)
        assert code == cli_agent.EXIT_SPOOLED
    with LiveServer(service.settings, port):
        code, output = _invoke(["push", "--spool", "--server", server], spool, token_file)
    assert code == cli_agent.EXIT_REJECTED, output
    assert "may not report for asset 'forbidden-host'" in output
    rejected = list((spool / "rejected").glob("*.cdx.json.gz"))
    assert len(rejected) == 1 and list(spool.glob("*.cdx.json.gz")) == []
    assert service.count("scan") == 1


def test_refused_report_is_not_spooled(service: Service, tmp_path: Path) -> None:
    token_file = tmp_path / "agent.token"
    token_file.write_text(service.token("report:write"))
    bad = tmp_path / "bad.json"
    bom = boms.gpuprov_bom()
    bom["specVersion"] = "1.2"
    bad.write_text(json.dumps(bom))
    port = free_port()
    with LiveServer(service.settings, port):
        code, output = _invoke(
            ["push", str(bad), "--server", f"http://127.0.0.1:{port}"], tmp_path / "s", token_file
        )
    assert code == cli_agent.EXIT_REJECTED
    assert "refused the report (422)" in output and "1.2" in output
    assert not list((tmp_path / "s").glob("*.cdx.json.gz"))


def test_push_report_api_delivers(service: Service, tmp_path: Path) -> None:
    """The function `gpuprov scan --push` calls: spooled while down, delivered when up."""
    token_file = tmp_path / "t"
    token_file.write_text(service.token("report:write"))
    port = free_port()
    report = boms.encode(boms.gpuprov_bom(kind="host", name="scan-push"))
    options = {
        "server": f"http://127.0.0.1:{port}",
        "token_file": token_file,
        "spool_dir": tmp_path / "spool",
        "retries": 0,
    }
    assert cli_agent.push_report(report, **options) == cli_agent.EXIT_SPOOLED  # type: ignore[arg-type]
    with LiveServer(service.settings, port):
        assert cli_agent.push_report(report, labels={"env": "ci"}, **options) == 0  # type: ignore[arg-type]
    assert service.count("scan") == 1
