"""Hosts list their GPUs and driver: a real `gpuprov scan` report of a GPU node root is ingested
(SQLite and PostgreSQL), shown on the asset list and detail, filtered by GPU model, replaced by
the host's next report, and feeds the driver rule of the service's policy evaluation."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.domain.gate import facts_of
from app.storage.repositories import assets as asset_repo
from app.storage.repositories import inventory as inventory_repo
from app.storage.repositories import scans as scan_repo
from scanner import vocabulary as v
from scanner.bom.cyclonedx import to_json
from scanner.pipeline import ScanOptions, run_scan
from tests.app.conftest import Service, auth
from tests.fixtures import elf
from tests.scanner.node import nodetree as nt


def _node_bom(root: Path, cache: Path) -> dict[str, Any]:
    result = run_scan(str(root), ScanOptions(cache_dir=cache))
    doc: dict[str, Any] = json.loads(to_json(result))
    return doc


@pytest.fixture(scope="module")
def node_bom(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("gpu-node")
    root = nt.gpu_node(base / "root")
    elf.build_cuda_library(root / "usr/local/cuda-12.6/lib64", "cudart", "12.6.77")
    return _node_bom(root, base / "cache")


def _encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def _host(service: Service) -> tuple[dict[str, Any], dict[str, Any]]:
    reader = auth(service.token("inventory:read"))
    [host] = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    detail = service.client.get(f"/api/v1/assets/{host['id']}", headers=reader).json()
    return host, detail


def test_host_lists_its_gpus_and_driver(
    service: Service, post_report: Callable[..., Any], node_bom: dict[str, Any]
) -> None:
    response = post_report(_encode(node_bom))
    assert response.status_code in (200, 201), response.text
    host, detail = _host(service)
    details = host["details"]
    assert details["driver_version"] == nt.DRIVER and details["driver_flavor"] == "proprietary"
    assert details["driver_cuda_max"] == "12.2" and details["gpu_count"] == "2"
    assert details["injected_files"] == "7"
    assert [g["bus_id"] for g in detail["gpus"]] == ["0000:17:00.0", "0000:2a:00.0"]
    gpu = detail["gpus"][0]
    assert gpu["model"] == "NVIDIA H100 80GB HBM3" and gpu["compute_capability"] == "9.0"
    assert gpu["uuid"] == nt.GPUS[0][2] and gpu["minor"] == 0
    # GPUs and injected files are node facts, not libraries: libcuda, NVML and cudart are
    families = sorted(lib["family"] for lib in detail["libraries"])
    assert families == ["cudart", "libcuda", "nvidia-ml"]
    assert service.count("node_gpu") == 2
    # what containers on the host get besides their image: the injected host files
    injected = {f["host_path"]: f for f in detail["injected"]}
    libcuda = injected[f"{nt.LIB}/libcuda.so.{nt.DRIVER}"]
    stored = next(lib for lib in detail["libraries"] if lib["family"] == "libcuda")
    assert libcuda["sha256"] == stored["sha256"] and libcuda["version"] == nt.DRIVER
    assert libcuda["container_paths"] == [f"{nt.LIB}/libcuda.so.{nt.DRIVER}"]
    assert libcuda["devices"] == ["nvidia.com/gpu=*"]
    assert libcuda["sources"] == ["cdi:/etc/cdi/nvidia.yaml"]
    assert injected["/run/nvidia-persistenced/socket"]["sha256"] is None

    reader = auth(service.token("inventory:read"))
    for model, hits in (("NVIDIA H100 80GB HBM3", 1), ("*H100*", 1), ("*A100*", 0)):
        page = service.client.get(
            "/api/v1/assets", params={"gpu_model": model}, headers=reader
        ).json()
        assert page["total"] == hits, model
    # a % in the pattern is no SQL wildcard
    page = service.client.get("/api/v1/assets", params={"gpu_model": "%"}, headers=reader).json()
    assert page["total"] == 0


def test_the_service_driver_rule_uses_the_module_and_cuda_max(
    service: Service, post_report: Callable[..., Any], node_bom: dict[str, Any]
) -> None:
    assert post_report(_encode(node_bom)).status_code in (200, 201)
    host, _ = _host(service)
    with service.db.session() as session:
        asset = asset_repo.by_id(session, host["id"])
        assert asset is not None and asset.latest_scan_id is not None
        scan = scan_repo.by_id(session, asset.latest_scan_id)
        assert scan is not None
        facts = facts_of(asset, scan, inventory_repo.current_artifacts(session, asset.id))
    assert (facts.driver_version, facts.driver_cuda_max) == (nt.DRIVER, "12.2")


def _later(doc: dict[str, Any], n: int, keep: Callable[[dict[str, Any]], bool]) -> bytes:
    """The host's next report (``n`` seconds after ``doc``) with only the components kept."""
    later = json.loads(json.dumps(doc))
    later["serialNumber"] = f"urn:uuid:00000000-0000-4000-8000-00000000000{n}"
    scanned = datetime.fromisoformat(doc["metadata"]["timestamp"].replace("Z", "+00:00"))
    later["metadata"]["timestamp"] = (scanned - timedelta(minutes=10 - n)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    later["components"] = [c for c in later["components"] if keep(c)]
    refs = {c["bom-ref"] for c in later["components"]} | {"asset"}
    for dep in later["dependencies"]:
        dep["dependsOn"] = [r for r in dep.get("dependsOn", []) if r in refs]
    later["dependencies"] = [d for d in later["dependencies"] if d["ref"] in refs]
    return _encode(later)


def test_next_report_replaces_the_gpus(
    service: Service, post_report: Callable[..., Any], node_bom: dict[str, Any]
) -> None:
    assert post_report(_later(node_bom, 1, lambda c: True)).status_code in (200, 201)
    _, detail = _host(service)
    assert len(detail["gpus"]) == 2
    one = _later(node_bom, 2, lambda c: c["bom-ref"] != "gpu:0000:2a:00.0")
    assert post_report(one).status_code in (200, 201)
    _, detail = _host(service)
    assert [g["bus_id"] for g in detail["gpus"]] == ["0000:17:00.0"]
    none = _later(
        node_bom, 3, lambda c: c["type"] != "device" and not c["bom-ref"].startswith("injected:")
    )
    assert post_report(none).status_code in (200, 201)
    assert service.count("node_gpu") == 0 and service.count("node_injected") == 0


def _with(doc: dict[str, Any], where: str, name: str, value: str) -> dict[str, Any]:
    bad = json.loads(json.dumps(doc))
    bad["serialNumber"] = "urn:uuid:00000000-0000-4000-8000-00000000000f"
    if where == "asset":
        target = bad["metadata"]["component"]
    elif where == "injected":
        target = next(c for c in bad["components"] if c["bom-ref"].startswith("injected:"))
    else:
        target = next(c for c in bad["components"] if c["type"] == "device")
    target["properties"] = [p for p in target["properties"] if p["name"] != name]
    target["properties"].append({"name": name, "value": value})
    return bad


@pytest.mark.parametrize(
    ("where", "name", "value"),
    [
        ("asset", v.DRIVER_VERSION, "535.129.03; DROP TABLE"),
        ("asset", v.DRIVER_CUDA_MAX, "twelve"),
        ("asset", v.GPU_COUNT, "-1"),
        ("device", v.GPU_BUS_ID, "../../etc"),
        ("device", v.GPU_MINOR, "x"),
        ("device", v.GPU_UUID, "G" * 300),
        ("injected", v.INJECTED_HOST_PATH, "relative/libcuda.so.1"),
        ("injected", v.INJECTED_CONTAINER_PATH, "/x\n/y"),
        ("injected", v.INJECTED_FAMILY, "f" * 100),
    ],
)
def test_malformed_node_facts_are_refused(
    service: Service,
    post_report: Callable[..., Any],
    node_bom: dict[str, Any],
    where: str,
    name: str,
    value: str,
) -> None:
    response = post_report(_encode(_with(node_bom, where, name, value)))
    assert 400 <= response.status_code < 500, response.text
    assert service.count("asset") == 0 and service.count("node_gpu") == 0
    assert service.count("node_injected") == 0
