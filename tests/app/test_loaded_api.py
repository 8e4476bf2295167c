"""Loaded libraries in the service (issue 11, runtime): a --runtime host report is ingested,
asset detail and where-used say "loaded by N processes / containers", ``loaded=`` filters
assets and where-used, and drift lists loaded bytes that differ from the disk; on both
databases."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from msgspec.structs import replace

from scanner.bom.cyclonedx import to_json
from scanner.model import (
    AssetInfo,
    AssetKind,
    Digests,
    FileRef,
    GpuLibrary,
    Identification,
    Integrity,
    LoadedBy,
    LoadedVia,
    RuntimeScan,
    ScanResult,
    Sha256,
)
from tests.app.conftest import Service, auth

A, B, C, D = (Sha256(c * 64) for c in "abcd")
C1, C2 = "1" * 64, "2" * 64
POD = "6ec0e3a2-3f0b-4a4e-9a4e-0d1f4b2c9e11"
LIB = "/usr/lib/x86_64-linux-gnu"


def library(path: str, sha: str, family: str, *loaders: LoadedBy, **kw: Any) -> GpuLibrary:
    return GpuLibrary(
        ref=FileRef(path),
        size=10,
        aliases=(),
        ident=Identification(family, family, "12.4.5.8", 12, "x86_64"),
        digests=Digests(10, Sha256(sha)),
        owner=None,
        integrity=Integrity.UNOWNED,
        integrity_reason="no package",
        loaded_by=loaders,
        **kw,
    )


def host_report(name: str, machine_id: str, runtime: RuntimeScan | None) -> bytes:
    host = LoadedBy(12, "/usr/bin/python3.11", sha256=A, via=LoadedVia.INODE)
    injected = LoadedBy(
        13, "/usr/bin/python3", C1, "containerd", POD, sha256=A, via=LoadedVia.INODE
    )
    stale = LoadedBy(14, "/opt/app/run", C2, "cri-o", POD, True, B, LoadedVia.MAP_FILES)
    libraries: tuple[GpuLibrary, ...] = (
        library(f"{LIB}/libcublas.so.12.4.5.8", A, "cublas", host, injected),
        library(f"{LIB}/libcudart.so.12.4.127", C, "cudart"),
        library(
            f"{LIB}/libcudart.so.12.4.127",
            B,
            "cudart",
            stale,
            on_disk=False,
            disk_sha256=C,
            loaded_copy=True,
        ),
        library(f"{LIB}/libnccl.so.2.21.5", D, "nccl"),
    )
    result = ScanResult(
        asset=AssetInfo(AssetKind.HOST, name, "/", machine_id=machine_id),
        # a scan without --runtime knows no process
        libraries=libraries if runtime else tuple(replace(x, loaded_by=()) for x in libraries[:2]),
        packages=(),
        findings=(),
        skipped=(),
        started_at="2026-12-02T04:00:00Z",
        tool_version="0.test",
        runtime=runtime,
    )
    return to_json(result).encode()


@pytest.fixture
def nodes(service: Service, post_report: Callable[..., Any]) -> dict[str, Any]:
    ids = {}
    for name, mid, runtime in (
        ("gpu-node-1", "m1", RuntimeScan("/host/proc", 500, 3, (1,), 0)),
        ("gpu-node-2", "m2", None),
    ):
        answer = post_report(host_report(name, mid, runtime))
        assert answer.status_code == 201, answer.text
        ids[name] = answer.json()["asset_id"]
    return {"ids": ids, "token": service.token("inventory:read")}


def get(service: Service, nodes: dict[str, Any], path: str, **params: Any) -> Any:
    answer = service.client.get(path, params=params, headers=auth(nodes["token"]))
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_asset_detail_says_loaded_by_processes_and_containers(
    service: Service, nodes: dict[str, Any]
) -> None:
    detail = get(service, nodes, f"/api/v1/assets/{nodes['ids']['gpu-node-1']}")
    summary = detail["loaded"]
    assert {k: summary[k] for k in ("processes", "containers", "libraries")} == {
        "processes": 3,
        "containers": 2,
        "libraries": 2,
    }
    assert (summary["deleted"], summary["differs_from_disk"]) == (1, 1)
    assert summary["scan"] == {
        "proc": "/host/proc",
        "processes": 500,
        "loading": 3,
        "unreadable_processes": 1,
        "unreadable_mappings": 0,
    }
    assert detail["latest_scan"]["runtime"]["unreadable_processes"] == 1
    by_sha = {lib["sha256"]: lib for lib in detail["libraries"]}
    cublas = by_sha[A]["loaded"]
    assert (cublas["processes"], cublas["containers"], cublas["copy"]) == (2, 1, False)
    assert sorted(p["pid"] for p in cublas["by"]) == [12, 13]
    assert {p.get("container") for p in cublas["by"]} == {None, C1}
    assert by_sha[C]["loaded"] is None  # the replacement on disk: nobody runs it
    stale = by_sha[B]["loaded"]
    assert stale["copy"] and stale["deleted"] and stale["differs_from_disk"]
    assert stale["disk_sha256"] == C
    assert stale["by"] == [
        {
            "pid": 14,
            "exe": "/opt/app/run",
            "container": C2,
            "engine": "cri-o",
            "pod": POD,
            "deleted": True,
            "sha256": B,
            "via": "map_files",
        }
    ]
    other = get(service, nodes, f"/api/v1/assets/{nodes['ids']['gpu-node-2']}")
    assert other["loaded"] is None and other["latest_scan"]["runtime"] is None


def test_loaded_filter_on_where_used_and_assets(service: Service, nodes: dict[str, Any]) -> None:
    used = get(service, nodes, "/api/v1/where-used", loaded="true")
    assert [i["asset"]["name"] for i in used["items"]] == ["gpu-node-1"]
    rows = used["items"][0]["libraries"]
    assert sorted((r["sha256"], r["loaded_processes"], r["loaded_containers"]) for r in rows) == [
        (A, 2, 1),
        (B, 1, 1),
    ]
    [copy] = [r for r in rows if r["sha256"] == B]
    assert copy["loaded_copy"] and copy["loaded_deleted"] and copy["disk_sha256"] == C
    idle = get(service, nodes, "/api/v1/where-used", loaded="false", family="cudart")
    assert sorted(i["asset"]["name"] for i in idle["items"]) == ["gpu-node-1", "gpu-node-2"]
    assert all(r["loaded_processes"] == 0 for i in idle["items"] for r in i["libraries"])
    assets = get(service, nodes, "/api/v1/assets", loaded="true")
    assert [a["name"] for a in assets["items"]] == ["gpu-node-1"]
    assert get(service, nodes, "/api/v1/assets", loaded="true", family="nccl")["items"] == []


def test_drift_lists_loaded_bytes_that_differ_from_disk(
    service: Service, nodes: dict[str, Any]
) -> None:
    drift = get(service, nodes, "/api/v1/drift")
    assert drift["loaded_differs_from_disk"] == [
        {
            "asset_id": nodes["ids"]["gpu-node-1"],
            "path": f"{LIB}/libcudart.so.12.4.127",
            "family": "cudart",
            "version": "12.4.5.8",
            "loaded_sha256": B,
            "disk_sha256": C,
            "processes": 1,
            "containers": 1,
            "deleted": True,
        }
    ]
    assert get(service, nodes, "/api/v1/drift", family="cublas")["loaded_differs_from_disk"] == []


def _with_props(body: bytes, name: str, value: str) -> bytes:
    doc = json.loads(body)
    for comp in doc["components"]:
        for prop in comp.get("properties", []):
            if prop["name"] == name:
                prop["value"] = value
                return json.dumps(doc).encode()
    raise AssertionError(f"no {name}")


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("gpuprov:runtime:process", '{"exe": "/x"}', "integer pid"),
        ("gpuprov:runtime:process", "not json", "integer pid"),
        ("gpuprov:runtime:process", '{"pid": true}', "integer pid"),
        ("gpuprov:runtime:disk-sha256", "z" * 64, "64 hexadecimal"),
    ],
)
def test_bad_runtime_properties_are_refused(
    service: Service, post_report: Callable[..., Any], name: str, value: str, why: str
) -> None:
    body = host_report("gpu-node-3", "m3", RuntimeScan("/proc", 10, 1))
    answer = post_report(_with_props(body, name, value))
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert why in error["message"]
    assert error["details"][0]["pointer"].startswith("/components/")


def test_a_bad_runtime_count_is_refused(service: Service, post_report: Callable[..., Any]) -> None:
    doc = json.loads(host_report("gpu-node-3", "m3", RuntimeScan("/proc", 10, 1)))
    for prop in doc["metadata"]["component"]["properties"]:
        if prop["name"] == "gpuprov:runtime:scanned-processes":
            prop["value"] = "-3"
    answer = post_report(json.dumps(doc).encode())
    assert answer.status_code == 422 and "must be a count" in answer.text


def test_the_service_gates_a_host_on_what_its_processes_loaded(service: Service) -> None:
    from tests.app.test_gate_api import HEAD, gate, put_policy

    assert put_policy(service, HEAD + "rules:\n  loaded: {}\n").status_code == 201
    token = service.token("gate", "report:write", name="ci")

    def decide(body: bytes) -> dict[str, Any]:
        answer = gate(service, token, policy="prod", bom=json.loads(body))
        assert answer.status_code == 200, answer.text
        doc: dict[str, Any] = answer.json()
        return doc

    stale = decide(host_report("gpu-node-1", "m1", RuntimeScan("/proc", 500, 3)))
    assert stale["decision"] == "deny"
    [reason] = stale["reasons"]
    assert reason["rule"] == "loaded" and not reason["missing_input"]
    assert "deleted or replaced on disk" in reason["message"] and C in reason["message"]
    # the service decides from the rows it stored (the report was ingested first)
    assert stale["subject"]["kind"] == "host"
    blind = decide(host_report("gpu-node-2", "m2", None))
    assert blind["decision"] == "deny" and blind["reasons"][0]["missing_input"]
    assert "--runtime" in blind["reasons"][0]["message"]
    # nothing wrong with what could be read, but not everything could: the rule cannot pass
    # what it did not see (from the counts the service stored of the report)
    for runtime, unseen in (
        (RuntimeScan("/proc", 500, 1, (7,), 0), "the memory maps of 1 process(es)"),
        (RuntimeScan("/proc", 500, 1, (), 2), "the loaded bytes of 2 mapping(s)"),
        (
            RuntimeScan("/proc", 500, 1, (7, 8), 3),
            "the memory maps of 2 process(es); the loaded bytes of 3 mapping(s)",
        ),
    ):
        partial = decide(clean_host("gpu-node-4", "m4", runtime))
        assert partial["decision"] == "deny", partial
        [reason] = partial["reasons"]
        assert reason["missing_input"] and reason["message"].endswith(unseen)
    seen = decide(clean_host("gpu-node-4", "m4", RuntimeScan("/proc", 500, 1)))
    assert seen["decision"] == "allow", seen["reasons"]


def clean_host(name: str, machine_id: str, runtime: RuntimeScan) -> bytes:
    """A host whose one GPU library, owned and verified, is loaded from its file on disk."""
    loader = LoadedBy(12, "/usr/bin/python3.11", sha256=A, via=LoadedVia.INODE)
    lib = replace(
        library(f"{LIB}/libcublas.so.12.4.5.8", A, "cublas", loader),
        integrity=Integrity.VERIFIED,
        integrity_reason="",
    )
    result = ScanResult(
        asset=AssetInfo(AssetKind.HOST, name, "/", machine_id=machine_id),
        libraries=(lib,),
        packages=(),
        findings=(),
        skipped=(),
        started_at="2026-12-02T04:00:00Z",
        tool_version="0.test",
        runtime=runtime,
    )
    return to_json(result).encode()


def test_the_normalized_sbom_keeps_what_processes_loaded(
    service: Service, nodes: dict[str, Any]
) -> None:
    from scanner.bom.cyclonedx import validate_json
    from scanner.policy.bom_facts import facts_from_bom

    answer = service.client.get(
        f"/api/v1/assets/{nodes['ids']['gpu-node-1']}/sbom",
        params={"format": "normalized"},
        headers=auth(nodes["token"]),
    )
    assert answer.status_code == 200, answer.text
    assert validate_json(answer.text) is None
    refs = [c["bom-ref"] for c in answer.json()["components"]]
    assert len(refs) == len(set(refs)) and f"loaded:{B}:{LIB}/libcudart.so.12.4.127" in refs
    rebuilt = facts_from_bom(answer.content)
    original = facts_from_bom(host_report("gpu-node-1", "m1", RuntimeScan("/proc", 500, 3)))
    fields = ("path", "sha256", "loaded_processes", "loaded_containers", "loaded_deleted",
              "loaded_copy", "disk_sha256")  # fmt: skip

    def key(f: Any) -> tuple[Any, ...]:
        return tuple(getattr(f, k) for k in fields)

    assert sorted(map(key, rebuilt.files)) == sorted(map(key, original.files))


def test_the_export_says_who_loads_each_file(service: Service, nodes: dict[str, Any]) -> None:
    rows = get(service, nodes, "/api/v1/inventory/export")
    loaded = {
        (r["asset_name"], r["sha256"]): (r["loaded_processes"], r["loaded_copy"], r["disk_sha256"])
        for r in rows
        if r["loaded_processes"]
    }
    assert loaded == {("gpu-node-1", A): (2, False, None), ("gpu-node-1", B): (1, True, C)}
