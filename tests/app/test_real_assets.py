"""Only real assets count (issue 18 §2): a BOM that describes neither an image nor a host
(gpuprov's own `make sbom` output, a hand-made application BOM that even lists GPU wheels) is
refused at every entry point with a message saying what is accepted: the report API, the gate
API, `gpuprov push`, `gpuprov gate --bom` offline and through the service. Nothing is stored,
spooled or counted; another tool's root-filesystem BOM (an application component beside the
operating system it lists) is still a host."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuprov.cli import app as cli_app
from tests.app.conftest import LiveServer, Service, auth, free_port
from tests.app.test_gate_api import POLICY, put_policy

CHECKOUT = Path(__file__).resolve().parents[2]
ACCEPTED = "accepted: an image (metadata.component of type 'container'), a host"


@pytest.fixture(scope="module")
def own_sbom(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """gpuprov's own SBOM as `make sbom` writes it."""
    out = tmp_path_factory.mktemp("sbom") / "gpuprov.cdx.json"
    done = subprocess.run(
        [sys.executable, str(CHECKOUT / "scripts" / "sbom.py"), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"SOURCE_DATE_EPOCH": "1767225600", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


def application_bom(*, operating_system: bool = False) -> bytes:
    """A Python project's BOM as cdxgen or cyclonedx-py writes one: the application as its
    subject, its wheels (GPU ones included) as libraries; with ``operating_system``, the shape
    of `trivy rootfs` (an application component named by the root, the OS it found)."""
    wheels = [
        ("nvidia-cudnn-cu12", "9.1.0.70"),
        ("nvidia-cuda-runtime-cu12", "12.4.127"),
        ("numpy", "2.1.0"),
    ]
    components: list[dict[str, Any]] = [
        {
            "bom-ref": f"pkg:pypi/{name}@{version}",
            "type": "library",
            "name": name,
            "version": version,
            "purl": f"pkg:pypi/{name}@{version}",
        }
        for name, version in wheels
    ]
    if operating_system:
        components.append(
            {"bom-ref": "os", "type": "operating-system", "name": "debian", "version": "12.5"}
        )
        subject = {"bom-ref": "root", "type": "application", "name": "/srv/rootfs"}
    else:
        purl = "pkg:pypi/trainer@1.4.0"
        subject = {"bom-ref": purl, "type": "application", "name": "trainer", "purl": purl}
    doc = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": uuid.uuid4().urn,
        "version": 1,
        "metadata": {
            "timestamp": "2026-11-30T12:00:00Z",
            "tools": {"components": [{"type": "application", "name": "cdxgen", "version": "11"}]},
            "component": subject,
        },
        "components": components,
    }
    return json.dumps(doc).encode()


def _fleet(service: Service) -> dict[str, Any]:
    """What the fleet counts say: assets per kind (API), the metric, compliance's scanned."""
    reader = auth(service.token("inventory:read"))
    assets = service.client.get("/api/v1/assets", headers=reader).json()["total"]
    metrics = service.client.get("/metrics", headers=reader).text
    host = 'gpuprov_assets{kind="host"}'
    hosts = [line for line in metrics.splitlines() if line.startswith(host)]
    return {"assets": assets, "hosts": hosts, "stored": service.stored()}


@pytest.mark.parametrize("which", ["own", "application"])
def test_the_api_refuses_a_bom_of_no_image_or_host(
    service: Service, own_sbom: bytes, which: str
) -> None:
    body = own_sbom if which == "own" else application_bom()
    put_policy(service, POLICY)
    before = _fleet(service)
    writer = auth(service.token("report:write"), **{"Content-Type": "application/json"})
    stored = service.client.post("/api/v1/reports", content=body, headers=writer)
    assert stored.status_code == 422, stored.text
    error = stored.json()["error"]
    assert "neither an image nor a host" in error["message"] and ACCEPTED in error["message"]
    subject = "'gpuprov' ('pkg:pypi/gpuprov@" if which == "own" else "'trainer' ("
    assert f"an application {subject}" in error["message"], error["message"]
    assert error["details"] == [
        {"pointer": "/metadata/component", "message": "neither an image nor a host"}
    ]
    gate = service.client.post(
        "/api/v1/gate",
        json={"policy": "prod", "bom": json.loads(body)},
        headers=auth(service.token("gate", "report:write")),
    )
    assert gate.status_code == 422, gate.text
    assert "neither an image nor a host" in gate.json()["error"]["message"]
    assert _fleet(service) == before


def test_a_root_filesystem_bom_of_another_tool_is_still_a_host(service: Service) -> None:
    writer = auth(service.token("report:write"), **{"Content-Type": "application/json"})
    answer = service.client.post(
        "/api/v1/reports", content=application_bom(operating_system=True), headers=writer
    )
    assert answer.status_code == 201, answer.text
    reader = auth(service.token("inventory:read"))
    asset = service.client.get(f"/api/v1/assets/{answer.json()['asset_id']}", headers=reader)
    assert (asset.json()["kind"], asset.json()["name"]) == ("host", "/srv/rootfs")


def _cli(*args: object, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli_app, [str(a) for a in args], env=env)


def test_push_and_gate_refuse_it_before_sending(
    service: Service, own_sbom: bytes, tmp_path: Path
) -> None:
    """`gpuprov push` (nothing spooled), `gate --bom` offline and through the service: exit 2
    with the service's words, and the live service stores nothing."""
    put_policy(service, POLICY)
    sbom = tmp_path / "gpuprov.cdx.json"
    sbom.write_bytes(own_sbom)
    app_bom = tmp_path / "app.cdx.json"
    app_bom.write_bytes(application_bom())
    token = tmp_path / "ci.token"
    token.write_text(service.token("gate", "report:write"))
    policy = tmp_path / "prod.yaml"
    policy.write_text(POLICY)
    spool = tmp_path / "spool"
    env = {"GPUPROV_SPOOL": str(spool), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    before = service.stored()
    port = free_port()
    server = f"http://127.0.0.1:{port}"
    with LiveServer(service.settings, port):
        for bom in (sbom, app_bom):
            pushed = _cli("push", bom, "--server", server, "--token-file", token, env=env)
            remote = _cli(
                "gate", "--bom", bom, "--policy", "prod", "--server", server,
                "--token-file", token, env=env,
            )  # fmt: skip
            local = _cli("gate", "--bom", bom, "--policy-file", policy, env=env)
            for result in (pushed, remote, local):
                assert result.exit_code == 2, result.output
                assert "neither an image nor a host" in result.stderr, result.stderr
                assert "accepted: an image" in result.stderr
    assert not spool.exists() or not any(spool.rglob("*.json"))
    assert service.stored() == before
