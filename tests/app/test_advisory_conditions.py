"""End to end (SQLite and PostgreSQL): hosts whose own node scans carry condition facts (the
Container Toolkit's config.toml, nvidia-smi's virtualization mode) pushed as real scanner
BOMs, NVIDIA's bulletins imported, and each host's answer decided by its facts (issue 19 §3).

- CVE-2024-0132 (2024/5582): Container Toolkit up to and including 1.16.1, "This does not
  impact use cases where CDI is used": a host in CDI mode is not affected, one in legacy mode
  is, one without a config is affected with ``cdi_mode`` unevaluated;
- CVE-2025-23359 (2025/5616): fixed in 1.17.4 unless ``allow-cuda-compat-libs-from-container``
  is switched on.
The facts are the host's own: an image's report that claims them is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from app.cli_advisories import import_paths
from scanner.advisories.document import DEFAULT_MAX_BYTES
from scanner.bom.cyclonedx import to_json
from scanner.node.inputs import NodeInputs
from scanner.node.toolkit import CONFIG_PATHS
from scanner.pipeline import ScanOptions, run_scan
from tests.app.conftest import Service, auth
from tests.app.pages import login
from tests.fixtures import elf
from tests.scanner.advisories.documents import PSIRT
from tests.scanner.node import nodetree as nt

BULLETINS = ("2024/5582", "2025/5616")
CONFIG = CONFIG_PATHS[0]


@pytest.fixture(autouse=True)
def _need_psirt() -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")


def _host(base: Path, name: str, toolkit: str, config: str | None) -> Path:
    """A bare-metal GPU node with nvidia-container-cli ``toolkit`` and this config.toml (None:
    no config at all)."""
    root = nt.gpu_node(base / name)
    (root / "etc/machine-id").write_text(name[:1] * 32 + "\n")
    (root / "etc/hostname").write_text(f"{name}\n")
    elf.build_tool(root / "usr/bin", "nvidia-container-cli", [f"cli-version: {toolkit}"])
    if config is not None:
        nt.write(root, CONFIG, config)
    return root


def _mode(mode: str, extra: str = "") -> str:
    return nt.TOOLKIT_CONFIG.replace('mode = "auto"', f'mode = "{mode}"') + extra


def _bom(root: Path, tmp_path: Path) -> bytes:
    smi = nt.write(tmp_path, f"/{root.name}.smi.xml", nt.nvidia_smi_xml("None"))
    options = ScanOptions(cache_dir=tmp_path / "cache", node=NodeInputs(nvidia_smi_xml=str(smi)))
    return to_json(run_scan(str(root), options)).encode()


def _push(post_report: Callable[..., Any], body: bytes) -> None:
    response = post_report(body)
    assert response.status_code in (200, 201), response.text


def _answers(service: Service, name: str, cve: str) -> list[dict[str, Any]]:
    reader = auth(service.token("inventory:read"))
    assets = service.client.get("/api/v1/assets", headers=reader, params={"limit": 100}).json()
    (asset_id,) = [a["id"] for a in assets["items"] if a["name"] == name]
    page = service.client.get(
        f"/api/v1/assets/{asset_id}/vulnerabilities", headers=reader, params={"limit": 1000}
    )
    assert page.status_code == 200, page.text
    return [i for i in page.json()["items"] if i["cve"] == cve]


def _import(service: Service) -> None:
    summary = import_paths(
        service.db, [PSIRT / b for b in BULLETINS], strict=False, max_bytes=DEFAULT_MAX_BYTES
    )
    assert summary.refused == [] and summary.imported == len(BULLETINS)


def test_a_hosts_own_facts_decide_its_conditions(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    _import(service)
    cdi = _host(tmp_path, "cdi-node", "1.16.1", _mode("cdi"))
    legacy = _host(tmp_path, "legacy-node", "1.16.1", _mode("legacy"))
    bare = _host(tmp_path, "bare-node", "1.16.1", None)
    for root in (cdi, legacy, bare):
        _push(post_report, _bom(root, tmp_path))

    (f,) = _answers(service, "cdi-node", "CVE-2024-0132")
    assert (f["status"], f["justification"], f["conditions_unevaluated"]) == (
        "not_affected",
        "vulnerable_code_not_in_execute_path",
        [],
    )
    (cond,) = f["evidence"]["conditions"]
    assert (cond["name"], cond["value"], cond["asset"]) == ("cdi_mode", "false", "true")
    assert cond["source"] == "This does not impact use cases where CDI is used."
    (f,) = _answers(service, "legacy-node", "CVE-2024-0132")
    # legacy mode, with the node's NVIDIA CDI spec present: either path, the legacy one open
    assert (f["status"], f["conditions_unevaluated"]) == ("affected", [])
    assert f["evidence"]["conditions"][0]["asset"] == "false|true"
    (f,) = _answers(service, "bare-node", "CVE-2024-0132")
    assert (f["status"], f["conditions_unevaluated"]) == ("affected", ["cdi_mode"])

    # the facts are stored per host with where they were read; the three hosts hold the same
    # products but never share an answer
    with service.db.session() as session:
        rows = session.execute(
            text(
                "SELECT a.name, c.name, c.value, c.source FROM asset_condition c "
                "JOIN asset a ON a.id = c.asset_id ORDER BY a.name, c.name"
            )
        ).all()
        stacks = {s for (s,) in session.execute(text("SELECT stack FROM asset_advisory_match"))}
    facts = {(host, name): (value, source) for host, name, value, source in rows}
    assert facts[("cdi-node", "cdi_mode")] == (
        "true",
        f'{CONFIG}: nvidia-container-runtime.mode = "cdi"',
    )
    assert facts[("cdi-node", "vgpu_guest")][0] == "false"
    assert ("bare-node", "cdi_mode") not in facts
    assert len(stacks) == 3
    # the asset detail shows them, with where each was read
    reader = auth(service.token("inventory:read"))
    assets = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    (cdi_id,) = [a["id"] for a in assets if a["name"] == "cdi-node"]
    detail = service.client.get(f"/api/v1/assets/{cdi_id}", headers=reader).json()
    shown = {c["name"]: (c["value"], c["source"]) for c in detail["conditions"]}
    assert shown["cdi_mode"] == facts[("cdi-node", "cdi_mode")]
    assert shown["gpu_architecture"][0] == "hopper"
    # and so does the dashboard's asset page, escaped as every field
    login(service.client, service.token("inventory:read", name="viewer"))
    page = service.client.get(f"/assets/{cdi_id}").text
    assert "Advisory conditions" in page and "cdi_mode = true" in page
    assert "nvidia-container-runtime.mode = &#34;cdi&#34;" in page

    # a full rematch (a feed change) reads the facts back from storage: the same stacks
    from app.clock import utcnow
    from app.domain.vulnerabilities import rematch

    with service.db.transaction(write=True) as session:
        rematch(session, utcnow())
    with service.db.session() as session:
        again = {s for (s,) in session.execute(text("SELECT stack FROM asset_advisory_match"))}
    assert again == stacks
    assert _answers(service, "cdi-node", "CVE-2024-0132")[0]["status"] == "not_affected"

    # the host's next report without its config: the facts it no longer states are gone
    (cdi / CONFIG.lstrip("/")).unlink()
    _push(post_report, _bom(cdi, tmp_path))
    (f,) = _answers(service, "cdi-node", "CVE-2024-0132")
    assert (f["status"], f["conditions_unevaluated"]) == ("affected", ["cdi_mode"])
    assert service.count("asset_condition") > 0


def test_a_fix_switched_off_by_the_hosts_config(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    _import(service)
    opt_in = "[features]\nallow-cuda-compat-libs-from-container = true\n"
    _push(
        post_report, _bom(_host(tmp_path, "opted-in", "1.17.4", _mode("legacy", opt_in)), tmp_path)
    )
    _push(post_report, _bom(_host(tmp_path, "default", "1.17.4", _mode("legacy")), tmp_path))
    _push(post_report, _bom(_host(tmp_path, "cdi-only", "1.17.4", _mode("cdi", opt_in)), tmp_path))
    (f,) = _answers(service, "opted-in", "CVE-2025-23359")
    assert (f["status"], f["fixed_in"], f["conditions_unevaluated"]) == ("affected", "1.17.4", [])
    assert [c["asset"] for c in f["evidence"]["fix_disabled_by"]] == ["true", "false|true"]
    assert _answers(service, "default", "CVE-2025-23359")[0]["status"] == "fixed"
    assert _answers(service, "cdi-only", "CVE-2025-23359")[0]["status"] == "fixed"


def _props(doc: dict[str, Any], name: str, value: str) -> None:
    doc["metadata"]["component"].setdefault("properties", []).append({"name": name, "value": value})


def test_only_a_host_report_can_state_host_facts(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    host = json.loads(_bom(_host(tmp_path, "h", "1.16.1", _mode("cdi")), tmp_path))
    before = service.stored()
    # an image's BOM claiming a host's CDI mode: refused, naming the property, nothing stored
    image = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": {
            "component": {
                "type": "container",
                "name": "registry.example/app",
                "version": "sha256:" + "ab" * 32,
                "properties": [{"name": "gpuprov:asset:kind", "value": "image"}],
            }
        },
    }
    _props(image, "gpuprov:condition:cdi_mode", "true")
    refused = post_report(json.dumps(image).encode())
    assert refused.status_code == 422, refused.text
    assert "gpuprov:condition:cdi_mode" in refused.text and "image" in refused.text
    # a host's fact not of its form is refused too
    bad = json.loads(json.dumps(host))
    for p in bad["metadata"]["component"]["properties"]:
        if p["name"] == "gpuprov:condition:cdi_mode":
            p["value"] = "yes please"
    refused = post_report(json.dumps(bad).encode())
    assert refused.status_code == 422 and "gpuprov:condition:cdi_mode" in refused.text
    twice = json.loads(json.dumps(host))
    _props(twice, "gpuprov:condition:cdi_mode", "false")
    refused = post_report(json.dumps(twice).encode())
    assert refused.status_code == 422 and "2 times" in refused.text
    assert service.stored() == before
    # a fact this service does not know (a newer scanner's) is not stored: it decides nothing
    newer = json.loads(json.dumps(host))
    _props(newer, "gpuprov:condition:future_flag", "true")
    _push(post_report, json.dumps(newer).encode())
    with service.db.session() as session:
        names = {n for (n,) in session.execute(text("SELECT name FROM asset_condition"))}
    assert "future_flag" not in names and "cdi_mode" in names
