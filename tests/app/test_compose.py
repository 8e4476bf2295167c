"""docker-compose.yml parses, wires PostgreSQL, a migration, the API and a read-only host agent,
and every command it runs exists in the `gpuprov` command line (no engine runs it here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
import yaml
from typer.testing import CliRunner

from app import cli
from scanner import cli_agent

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def _compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(document, dict)
    return document


def _command_exists(argv: list[str]) -> None:
    assert argv[0] == "gpuprov"
    app = typer.Typer()
    cli_agent.register(app)
    cli.register(app)
    words = [a for a in argv[1:] if not a.startswith("-")][:2]
    # check the (sub)command and every option it is given by asking for its help with them
    result = CliRunner().invoke(app, [*argv[1:], "--help"])
    assert result.exit_code == 0, (argv, result.output)
    assert "Usage:" in result.output and words[0] in result.output


def test_services_and_commands() -> None:
    services = _compose()["services"]
    assert set(services) == {"db", "migrate", "api", "agent"}
    assert services["db"]["image"].startswith("postgres:")
    assert services["migrate"]["command"] == ["gpuprov", "db", "upgrade"]
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"
    api = services["api"]
    assert api["command"][:2] == ["gpuprov", "serve"] and "--workers" in api["command"]
    assert api["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert api["environment"]["GPUPROV_DATABASE_URL"].startswith("postgresql+psycopg://")
    agent = services["agent"]
    assert agent["command"][:2] == ["gpuprov", "agent"]
    assert "/:/host:ro" in agent["volumes"]
    assert agent["command"][agent["command"].index("--root") + 1] == "/host"
    assert agent["environment"]["GPUPROV_SERVER"] == "http://api:8000"
    for name in ("migrate", "api", "agent"):
        _command_exists(services[name]["command"])
