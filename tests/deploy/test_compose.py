"""docker-compose.yml, checked without an engine: it is valid under the Compose Specification's
JSON schema (vendored, tests/deploy/schemas/SOURCES.md), wires PostgreSQL on a volume, a one-shot
migration, the API with 2 workers and a read-only host agent, and every command it gives the
image's ENTRYPOINT exists in the `gpuprov` command line; and a Compose implementation
(`docker compose config`, or Debian's `docker-compose` where the plugin is missing) accepts it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.dockerfile import CHECKOUT, gpuprov_help, parse

COMPOSE = CHECKOUT / "docker-compose.yml"
SCHEMA = Path(__file__).with_name("schemas") / "compose-spec.json"
SCHEMA_SHA256 = "56bab44c85c0ce8affb74474950293f37d510673283a243bcd7eeadb900fa35c"
GPUPROV = ("migrate", "api", "agent")


def _compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(document, dict)
    return document


def _validator() -> jsonschema.protocols.Validator:
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _entrypoint() -> list[str]:
    [entrypoint] = parse().stages[-1].all("ENTRYPOINT")
    argv = entrypoint.exec_form()
    assert argv is not None
    return argv


def test_valid_under_the_compose_specification_schema() -> None:
    errors = sorted(_validator().iter_errors(_compose()), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]
    print(f"docker-compose.yml validated against {SCHEMA.name} (sha256 {SCHEMA_SHA256[:12]})")


def test_the_schema_rejects_what_compose_rejects() -> None:
    validator = _validator()
    bad = _compose()
    bad["services"]["api"]["workers"] = 2  # no such service key
    assert not validator.is_valid(bad)
    bad = _compose()
    bad["services"]["api"]["depends_on"]["migrate"]["condition"] = "service_done"
    assert not validator.is_valid(bad)


def test_every_reference_is_declared() -> None:
    compose = _compose()
    services = compose["services"]
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, (name, dependency)
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith(("/", ".")):
                assert source in compose["volumes"], (name, source)
        for secret in service.get("secrets", []):
            assert secret in compose["secrets"], (name, secret)


def test_services_and_commands() -> None:
    services = _compose()["services"]
    assert set(services) == {"db", "migrate", "api", "agent"}
    db = services["db"]
    assert db["image"].startswith("postgres:")
    assert any(v.endswith(":/var/lib/postgresql/data") for v in db["volumes"])
    assert _entrypoint() == ["gpuprov"]  # each command below is given to it
    for name in GPUPROV:
        service = services[name]
        assert service["image"] == "gpuprov:local" and service["build"]["context"] == "."
        assert service["read_only"] is True and service["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in service["security_opt"]
        gpuprov_help(service["command"])
    migrate, api, agent = (services[n] for n in GPUPROV)
    assert migrate["command"] == ["db", "upgrade"] and migrate["restart"] == "no"
    assert migrate["depends_on"]["db"]["condition"] == "service_healthy"
    assert api["command"][:1] == ["serve"]
    assert api["command"][api["command"].index("--workers") + 1] == "2"
    assert api["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert api["environment"]["GPUPROV_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert "healthcheck" not in api  # the image's HEALTHCHECK on /readyz
    for name in ("migrate", "agent"):  # they serve nothing: the image's probe would fail
        assert services[name]["healthcheck"] == {"disable": True}
    assert agent["depends_on"]["api"]["condition"] == "service_healthy"


def test_the_agent_reads_the_host_and_nothing_more() -> None:
    agent = _compose()["services"]["agent"]
    command = agent["command"]
    assert command[:1] == ["agent"]
    assert command[command.index("--root") + 1] == "/host"
    assert "/:/host:ro" in agent["volumes"]
    # every other mount is the agent's own state (spool, cache), never a host path
    others = [v for v in agent["volumes"] if v != "/:/host:ro"]
    assert others and all(not v.startswith("/") for v in others)
    assert agent["cap_add"] == ["DAC_READ_SEARCH", "SYS_PTRACE", "CHECKPOINT_RESTORE"]
    assert agent["pid"] == "host" and command[command.index("--proc") + 1] == "/proc"
    assert agent["user"] == "0:0"
    assert agent["environment"]["GPUPROV_SERVER"] == "http://api:8000"
    token = command[command.index("--token-file") + 1]
    assert token == f"/run/secrets/{agent['secrets'][0]}"
    assert "ports" not in agent and "privileged" not in agent


@pytest.mark.parametrize("name", GPUPROV)
def test_no_secret_value_in_the_file(name: str) -> None:
    environment = _compose()["services"][name].get("environment", {})
    for key, value in environment.items():
        if re.search(r"KEY|PASSWORD|TOKEN", key):
            assert str(value).startswith("${"), (key, value)


def _compose_cli() -> list[str] | None:
    """A Compose implementation: the `docker compose` plugin, else `docker-compose` (Debian's
    1.29, which scripts/system-deps.sh installs); both check a file without a daemon."""
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_a_compose_implementation_accepts_it(tmp_path: Path) -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.fail("no docker compose: scripts/system-deps.sh (make test) installs docker-compose")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}

    def config(path: Path, **values: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli, "-f", str(path), "--project-directory", str(CHECKOUT), "config", "-q"],
            env={**env, **values},
            capture_output=True,
            text=True,
            timeout=120,
        )

    secrets = {"GPUPROV_SECRET_KEY": "k" * 64, "POSTGRES_PASSWORD": "p" * 32}
    done = config(COMPOSE, **secrets)
    assert done.returncode == 0, done.stderr
    print(f"{' '.join(Path(c).name for c in cli)} config accepted docker-compose.yml")
    # it is live: a missing secret and a wrong type are refused
    missing = config(COMPOSE, POSTGRES_PASSWORD="p")
    assert missing.returncode != 0 and "GPUPROV_SECRET_KEY" in missing.stderr
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(COMPOSE.read_text().replace("read_only: true", 'read_only: "maybe"', 1))
    assert config(bad, **secrets).returncode != 0
