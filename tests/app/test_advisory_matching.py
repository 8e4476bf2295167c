"""End to end (SQLite and PostgreSQL): NVIDIA's 131 shared bulletins imported, reports of real
scanner output pushed, and each asset's answer for specific CVEs compared with what the
bulletins say for those exact versions (issue 19 §3).

- CVE-2025-23280 (2025/5703, October 2025 driver bulletin): Linux R535 drivers prior to
  535.274.02 are affected, 535.274.02 is the R535 fix;
- CVE-2023-0193 (2023/5446): cuobjdump of every CUDA Toolkit prior to 12.1;
- CVE-2022-34667 (2022/5373): cuobjdump prior to 11.8, fixed in 11.8;
- CVE-2024-0123 (2024/5577): nvdisasm up to 12.6 Update 1 (an 11.8 image without nvdisasm);
- a cuDNN-only image: no bulletin names cuDNN, so no finding at all.
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
from scanner.pipeline import ScanOptions, run_scan
from tests.app.conftest import Service, auth
from tests.fixtures import elf
from tests.fixtures import images as im
from tests.scanner import scenarios as sc
from tests.scanner.advisories.documents import PSIRT
from tests.scanner.node import nodetree as nt

LIB = "usr/lib/x86_64-linux-gnu"


@pytest.fixture(autouse=True)
def _need_psirt() -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")


def _host(base: Path, driver: str, machine: str, virtualization: str = "None") -> str:
    """A GPU node root, with its saved ``nvidia-smi -q -x`` beside it (``<root>.smi.xml``):
    bare metal unless ``virtualization`` says otherwise, so its driver is the datacenter one."""
    root = nt.gpu_node(base / f"host-{driver}", driver=driver)
    (root / "etc/machine-id").write_text(machine * 32 + "\n")
    (root / "etc/hostname").write_text(f"gpu-{driver}\n")
    smi = nt.nvidia_smi_xml(virtualization).replace(nt.DRIVER, driver)
    root.with_name(root.name + ".smi.xml").write_text(smi)
    return str(root)


def _image(base: Path, name: str, build: Callable[[Path], None]) -> str:
    root = base / f"root-{name}"
    root.mkdir(parents=True)
    build(root)
    image = im.Image([im.Layer(sc.members_of(root), compression="gzip")])
    return im.write_image(base / f"img-{name}", image, "oci", tag=name)


def _toolkit_118(root: Path) -> None:
    tk = root / "usr/local/cuda-11.8"
    (tk / "bin").mkdir(parents=True)
    (tk / "version.json").write_text(
        json.dumps(
            {
                "cuda": {"name": "CUDA SDK", "version": "11.8.0"},
                "cuda_cuobjdump": {"name": "CUDA cuobjdump", "version": "11.8.86"},
            }
        )
    )
    elf.build_tool(tk / "bin", "cuobjdump", ["Cuda compilation tools, release 11.8, V11.8.86"])
    elf.build_cuda_library(tk / "lib64", "cudart", "11.8.89")


def _cudart_only(root: Path) -> None:
    elf.build_cuda_library(root / LIB, "cudart", "11.8.89")
    elf.build_cuda_library(root / LIB, "cublas", "11.11.3.6")


def _cudnn_only(root: Path) -> None:
    elf.build_cuda_library(root / LIB, "cudnn", "8.9.7")


def _push(post_report: Callable[..., Any], target: str, cache: Path) -> None:
    smi = Path(target).with_name(Path(target).name + ".smi.xml")
    node = NodeInputs(nvidia_smi_xml=str(smi) if smi.is_file() else None)
    doc = to_json(run_scan(target, ScanOptions(cache_dir=cache, node=node)))
    response = post_report(doc.encode())
    assert response.status_code in (200, 201), response.text


def _assets(service: Service, reader: dict[str, str]) -> dict[str, int]:
    items = service.client.get("/api/v1/assets", headers=reader, params={"limit": 100}).json()
    return {a["name"]: a["id"] for a in items["items"]}


def _statuses(service: Service, reader: dict[str, str], asset_id: int) -> dict[str, Any]:
    page = service.client.get(
        f"/api/v1/assets/{asset_id}/vulnerabilities", headers=reader, params={"limit": 1000}
    )
    assert page.status_code == 200, page.text
    return page.json()


def test_fleet_statuses_match_the_bulletins(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    reader = auth(service.token("inventory:read"))
    cache = tmp_path / "cache"
    # a host reported before the feed exists: matched when the feed is imported
    _push(post_report, _host(tmp_path, "535.129.03", "a"), cache)
    (early,) = _assets(service, reader).values()
    before = _statuses(service, reader, early)
    assert before["items"] == [] and before["feed"]["documents"] == 0
    assert before["feed"]["matched_at"] is not None  # matched, against an empty feed

    summary = import_paths(service.db, [PSIRT], strict=False, max_bytes=DEFAULT_MAX_BYTES)
    assert summary.refused == [] and summary.imported == 131

    _push(post_report, _host(tmp_path, "535.274.02", "b"), cache)
    images = {
        "toolkit": _image(tmp_path, "toolkit", _toolkit_118),
        "cudart": _image(tmp_path, "cudart", _cudart_only),
        "cudnn": _image(tmp_path, "cudnn", _cudnn_only),
    }
    for target in images.values():
        _push(post_report, target, cache)
    ids = _assets(service, reader)
    by_target = {key: ids[f"layout:{key}"] for key in images}

    def answer(asset_id: int, cve: str) -> list[dict[str, Any]]:
        page = _statuses(service, reader, asset_id)
        return [i for i in page["items"] if i["cve"] == cve]

    # the driver, branch-aware
    (vulnerable,) = answer(early, "CVE-2025-23280")
    assert (vulnerable["status"], vulnerable["installed"], vulnerable["fixed_in"]) == (
        "affected",
        "535.129.03",
        "535.274.02",
    )
    assert vulnerable["affected_text"] == "All driver versions prior to 535.274.02"
    assert vulnerable["bulletin"] == "5703" and vulnerable["severity"] == "HIGH"
    assert any(p.endswith("libcuda.so.535.129.03") for p in vulnerable["evidence"]["paths"])
    patched = ids["gpu-535.274.02"]
    (fixed,) = answer(patched, "CVE-2025-23280")
    assert (fixed["status"], fixed["installed"]) == ("fixed", "535.274.02")

    # the CUDA Toolkit, component-aware
    toolkit, cudart, cudnn = by_target["toolkit"], by_target["cudart"], by_target["cudnn"]
    (f,) = answer(toolkit, "CVE-2023-0193")
    assert (f["status"], f["component"], f["fixed_in"]) == ("affected", "cuobjdump", "12.1")
    assert f["evidence"]["paths"] == ["/usr/local/cuda-11.8/bin/cuobjdump"]
    (f,) = answer(toolkit, "CVE-2022-34667")
    assert (f["status"], f["fixed_in"]) == ("fixed", "11.8")
    (f,) = answer(toolkit, "CVE-2024-0123")
    assert (f["status"], f["justification"]) == ("not_affected", "component_not_present")
    (f,) = answer(cudart, "CVE-2023-0193")
    assert (f["status"], f["justification"]) == ("not_affected", "component_not_present")
    assert {i["status"] for i in _statuses(service, reader, cudart)["items"]} == {"not_affected"}
    assert answer(toolkit, "CVE-2025-23280") == []

    # no bulletin names cuDNN: no finding at all, and the answer names the feed consulted
    none = _statuses(service, reader, cudnn)
    assert none["items"] == [] and none["total"] == 0
    assert none["feed"]["documents"] == 131 and none["feed"]["imported_at"] is not None
    assert none["feed"]["matched_feed_imported_at"] == none["feed"]["imported_at"]

    # the advisory's side: which assets, files and versions; the list's count
    affected = service.client.get(
        "/api/v1/advisories/CVE-2025-23280/affected",
        headers=reader,
        params={"status": "affected"},
    ).json()
    assert [i["asset"]["id"] for i in affected["items"]] == [early]
    assert affected["items"][0]["installed"] == "535.129.03"
    assert any("libcuda" in p for p in affected["items"][0]["files"])
    every = service.client.get("/api/v1/advisories/CVE-2025-23280/affected", headers=reader)
    assert {i["asset"]["id"]: i["status"] for i in every.json()["items"]} == {
        early: "affected",
        patched: "fixed",
    }
    (item,) = service.client.get(
        "/api/v1/advisories", headers=reader, params={"cve": "CVE-2025-23280"}
    ).json()["items"]
    assert item["affected_assets"] == 1
    (item,) = service.client.get(
        "/api/v1/advisories", headers=reader, params={"cve": "CVE-2023-0193"}
    ).json()["items"]
    assert item["affected_assets"] == 1
    missing = service.client.get("/api/v1/advisories/CVE-1999-0001/affected", headers=reader)
    assert missing.status_code == 404
    assert (
        service.client.get("/api/v1/assets/999999/vulnerabilities", headers=reader).status_code
        == 404
    )


def test_a_report_and_a_full_rematch_agree_on_the_stack(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    """Ingest keys a stack from the report, an import from storage: the same stack."""
    from app.clock import utcnow
    from app.domain.vulnerabilities import rematch

    import_paths(service.db, [PSIRT / "2023/5446"], strict=False, max_bytes=DEFAULT_MAX_BYTES)
    cache = tmp_path / "cache"
    _push(post_report, _host(tmp_path, "535.129.03", "c"), cache)
    _push(post_report, _image(tmp_path, "toolkit", _toolkit_118), cache)
    with service.db.session() as session:
        keys = set(session.execute(text("SELECT asset_id, stack FROM asset_advisory_match")))
    with service.db.transaction(write=True) as session:
        rematch(session, utcnow())
    with service.db.session() as session:
        again = set(session.execute(text("SELECT asset_id, stack FROM asset_advisory_match")))
    assert again == keys and len(keys) == 2
    assert service.count("advisory_stack") == 2


def test_a_teams_advisory_answers_count_only_its_assets(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    """Issue 20 §2: an advisory's affected assets, and its count, are those of the caller's
    team; another team's vulnerable host is not found."""
    from app.domain.audit import cli_actor
    from app.domain.teams import assign_labels, check_team, put_team
    from app.domain.tokens import create_token

    summary = import_paths(service.db, [PSIRT], strict=False, max_bytes=DEFAULT_MAX_BYTES)
    assert summary.refused == []
    cache = tmp_path / "cache"
    _push(post_report, _host(tmp_path / "ml", "535.129.03", "a"), cache)
    _push(post_report, _host(tmp_path / "other", "535.129.03", "c"), cache)
    admin = auth(service.token("admin"))
    hosts = service.client.get("/api/v1/assets", headers=admin).json()["items"]
    ml_host, other_host = sorted(a["id"] for a in hosts)
    with service.db.transaction(write=True) as session:
        for team in ("ml", "other"):
            put_team(session, team, check_team({"labels": {"team": team}}), cli_actor())
        assign_labels(session, ml_host, {"team": "ml"}, cli_actor())
        assign_labels(session, other_host, {"team": "other"}, cli_actor())
        ml = auth(create_token(session, "ml", ["inventory:read"], team="ml").secret)

    def affected(headers: dict[str, str]) -> tuple[set[int], int, int]:
        page = service.client.get("/api/v1/advisories/CVE-2025-23280/affected", headers=headers)
        listed = service.client.get(
            "/api/v1/advisories", headers=headers, params={"cve": "CVE-2025-23280"}
        ).json()["items"]
        detail = service.client.get("/api/v1/advisories/CVE-2025-23280", headers=headers).json()
        ids = {i["asset"]["id"] for i in page.json()["items"]}
        return ids, listed[0]["affected_assets"], detail["affected_assets"]

    assert affected(admin) == ({ml_host, other_host}, 2, 2)
    assert affected(ml) == ({ml_host}, 1, 1)
    mine = service.client.get(f"/api/v1/assets/{ml_host}/vulnerabilities", headers=ml)
    assert mine.status_code == 200 and mine.json()["items"]
    theirs = service.client.get(f"/api/v1/assets/{other_host}/vulnerabilities", headers=ml)
    assert theirs.status_code == 404


def _operator_image(base: Path, version: str) -> str:
    """The GPU Operator's image as its Dockerfile labels it, running /usr/bin/gpu-operator."""
    root = base / f"root-operator-{version}"
    elf.build_tool(
        root / "usr/bin", "gpu-operator", [f"mod\tgithub.com/NVIDIA/gpu-operator\tv{version}\t"]
    )
    labels = {"name": "NVIDIA GPU Operator", "vendor": "NVIDIA", "version": f"v{version}"}
    image = im.Image([im.Layer(sc.members_of(root), compression="gzip")], labels=labels)
    return im.write_image(base / f"img-operator-{version}", image, "oci", tag=version)


def test_the_gpu_operator_image_is_judged_on_the_operator_statements(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    """2024/5582 (CVE-2024-0132: up to and including 24.6.1), 2024/5585 (CVE-2024-0134: up to
    24.6.2) and 2025/5599 (CVE-2024-0135..0137: up to 24.9.0, fixed in 24.9.1)."""
    paths = [PSIRT / b for b in ("2024/5582", "2024/5585", "2025/5599")]
    summary = import_paths(service.db, paths, strict=False, max_bytes=DEFAULT_MAX_BYTES)
    assert summary.refused == []
    cache = tmp_path / "cache"
    for version in ("24.6.1", "24.9.1"):
        _push(post_report, _operator_image(tmp_path, version), cache)
    reader = auth(service.token("inventory:read"))
    ids = {name.rsplit(":", 1)[-1]: i for name, i in _assets(service, reader).items()}
    old = {v["cve"]: v for v in _statuses(service, reader, ids["24.6.1"])["items"]}
    cves = [f"CVE-2024-{n}" for n in ("0132", "0133", "0134", "0135", "0136", "0137")]
    shown = {c: (v["status"], v["product"], v["installed"]) for c, v in old.items()}
    assert shown == dict.fromkeys(cves, ("affected", "gpu-operator", "24.6.1"))
    assert old["CVE-2024-0132"]["fixed_in"] == "v24.6.2"  # as the bulletin writes it
    new = _statuses(service, reader, ids["24.9.1"])["items"]
    assert {v["status"] for v in new} == {"fixed"} and len(new) == 6
