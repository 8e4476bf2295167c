"""A report carrying the products NVIDIA's bulletins name (issue 19 §2: toolkit release, tool
binaries, nvJPEG, the Container Toolkit, the driver with its branch) is ingested like any other
(SQLite and PostgreSQL): accepted, its GPU libraries stored, the product components kept in the
stored SBOM for the advisory matcher."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scanner.bom.cyclonedx import to_json
from scanner.pipeline import ScanOptions, run_scan
from tests.app.conftest import Service, auth
from tests.fixtures import elf
from tests.fixtures import packages as pk
from tests.scanner.node import nodetree as nt

TK = "/usr/local/cuda-12.4"


def _root(base: Path) -> Path:
    root = nt.gpu_node(base / "root")
    tk = root / TK[1:]
    (tk / "bin").mkdir(parents=True)
    (tk / "version.json").write_text(json.dumps({"cuda": {"version": "12.4.1"}}))
    elf.build_tool(tk / "bin", "nvcc", ["Cuda compilation tools, release 12.4, V12.4.131"])
    elf.build_tool(tk / "bin", "cuobjdump", ["Cuda compilation tools, release 12.4, V12.4.127"])
    elf.build_cuda_library(tk / "lib64", "nvjpeg", "12.3.1.117")
    pk.dpkg_install(root, [pk.DebSpec("nvidia-container-toolkit", "1.17.8-1")], base / "debs")
    return root


def test_report_with_products_is_ingested(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    result = run_scan(str(_root(tmp_path)), ScanOptions(cache_dir=tmp_path / "cache"))
    keys = {(p.key, p.version) for p in result.products}
    assert {
        ("cuda-toolkit", "12.4.1"),
        ("nvcc", "12.4.131"),
        ("cuobjdump", "12.4.127"),
        ("nvjpeg", "12.3.1.117"),
        ("container-toolkit", "1.17.8"),
        ("driver", nt.DRIVER),
    } <= keys
    doc = to_json(result)
    response = post_report(doc.encode())
    assert response.status_code in (200, 201), response.text
    reader = auth(service.token("inventory:read"))
    [host] = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    detail = service.client.get(f"/api/v1/assets/{host['id']}", headers=reader).json()
    families = {lib["family"] for lib in detail["libraries"]}
    assert {"nvjpeg", "libcuda", "nvidia-ml"} <= families
    # tools are products, not libraries: nothing named nvcc is stored as one
    assert not [lib for lib in detail["libraries"] if lib["path"].endswith("/nvcc")]
    sbom = service.client.get(f"/api/v1/assets/{host['id']}/sbom", headers=reader)
    assert sbom.status_code == 200, sbom.text
    refs = {c["bom-ref"] for c in sbom.json()["components"]}
    assert {"product:cuda-toolkit:12.4.1", "product:cuobjdump:12.4.127"} <= refs
    driver = next(c for c in sbom.json()["components"] if c["bom-ref"].startswith("product:driver"))
    assert {"name": "gpuprov:driver:branch", "value": "R" + nt.DRIVER.split(".")[0]} in driver[
        "properties"
    ]


def test_a_bad_product_component_is_refused_by_name(
    service: Service, post_report: Callable[..., Any]
) -> None:
    from tests.app import boms

    doc = boms.gpuprov_bom()
    doc["components"].append(
        {
            "type": "application",
            "bom-ref": "product:x",
            "name": "x",
            "version": "1" * 200,
            "properties": [{"name": "gpuprov:product:key", "value": "driver"}],
        }
    )
    response = post_report(boms.encode(doc))
    assert response.status_code == 422, response.text
    assert "version" in response.text
    doc["components"][-1]["version"] = "1.0"
    doc["components"][-1]["properties"][0]["value"] = "Not A Key!"
    response = post_report(boms.encode(doc))
    assert response.status_code == 422, response.text
    assert "gpuprov:product:key must be a product key" in response.text
