"""``--runtime`` against real processes: stand-in GPU libraries dlopen()ed by a compiled loader,
one deleted and one replaced on disk after loading; the scan must report exactly those
mappings, with the loaded bytes' digests (not the disk's), pids and executable.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scanner.model import FindingKind, GpuLibrary, Integrity, LoadedVia, ScanResult
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures import elf
from tests.fixtures.processes import build_loader, loaded_processes


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Node:
    """A live "node": two loader processes and the stand-ins they map, changed after loading."""

    lib: Path
    loader: Path
    pids: tuple[int, int]  # a: cudnn_graph, cudart, cublas; b: cublas, nccl
    cudnn: Path
    cudart: Path
    cublas: Path
    nccl: Path
    cublas_loaded: str  # sha256 of the cublas bytes the processes mapped
    cublas_now: str  # of the file that replaced it
    nccl_loaded: str


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    base = tmp_path_factory.mktemp("runtime-node")
    lib = base / "opt" / "gpu" / "lib"
    cudnn = elf.build_cudnn_library(lib, "cudnn_graph", (9, 1, 0), build=70)
    cudart = elf.build_cuda_library(lib, "cudart", "12.4.127")
    cublas = elf.build_cuda_library(lib, "cublas", "12.4.5.8")
    nccl = elf.build_cuda_library(lib, "nccl", "2.21.5")
    loader = build_loader(base / "bin")
    cublas_loaded, nccl_loaded = sha256(cublas), sha256(nccl)
    with loaded_processes(loader, [cudnn, cudart, cublas], [cublas, nccl]) as (a, b):
        # replaced the way package managers do it: a new file renamed over the old one
        fresh = elf.build_cuda_library(base / "new", "cublas", "12.4.5.8", strings=["rebuilt"])
        os.replace(fresh, cublas)
        nccl.unlink()
        yield Node(
            lib,
            loader,
            (a.pid, b.pid),
            cudnn,
            cudart,
            cublas,
            nccl,
            cublas_loaded,
            sha256(cublas),
            nccl_loaded,
        )


def scan(node: Node, **options: object) -> ScanResult:
    return run_scan(
        "/",
        ScanOptions(include=(str(node.lib),), use_cache=False, runtime=True, **options),  # type: ignore[arg-type]
    )


def ours(result: ScanResult, node: Node) -> dict[tuple[str, str, bool], GpuLibrary]:
    """The libraries under the node's lib directory, by (path, sha256, on disk)."""
    return {
        (lib.ref.path, lib.digests.sha256, lib.on_disk): lib
        for lib in result.libraries
        if lib.ref.path.startswith(str(node.lib) + "/")
    }


def loaders(lib: GpuLibrary, node: Node) -> set[int]:
    return {p.pid for p in lib.loaded_by if p.pid in node.pids}


def test_every_mapping_with_the_loaded_bytes(node: Node) -> None:
    result = scan(node)
    libs = ours(result, node)
    a, b = node.pids
    assert {k: loaders(v, node) for k, v in libs.items()} == {
        (str(node.cudnn), sha256(node.cudnn), True): {a},
        (str(node.cudart), sha256(node.cudart), True): {a},
        # the replacement on disk: loaded by nobody
        (str(node.cublas), node.cublas_now, True): set(),
        # the bytes both processes still run, held by them alone
        (str(node.cublas), node.cublas_loaded, False): {a, b},
        (str(node.nccl), node.nccl_loaded, False): {b},
    }
    for lib in libs.values():
        for p in lib.loaded_by:
            assert p.exe == str(node.loader)
            assert p.sha256 == lib.digests.sha256
            assert p.container_id is None
    cudart = libs[(str(node.cudart), sha256(node.cudart), True)]
    assert [p.via for p in cudart.loaded_by] == [LoadedVia.INODE]
    assert not cudart.loaded_by[0].deleted
    old = libs[(str(node.cublas), node.cublas_loaded, False)]
    assert {p.via for p in old.loaded_by} == {LoadedVia.MAP_FILES}
    assert all(p.deleted for p in old.loaded_by)
    assert old.disk_sha256 == node.cublas_now
    assert old.ident.family == "cublas"
    gone = libs[(str(node.nccl), node.nccl_loaded, False)]
    assert gone.disk_sha256 is None and gone.ident.family == "nccl"
    cudnn = libs[(str(node.cudnn), sha256(node.cudnn), True)]
    assert cudnn.ident.version == "9.1.0.70"
    assert result.runtime is not None and result.runtime.loading >= 2


def test_findings_name_exactly_the_changed_files(node: Node) -> None:
    result = scan(node)
    by_kind = {f.kind: f for f in result.findings}
    mine = str(node.lib) + "/"

    def paths(kind: FindingKind) -> set[str]:
        f = by_kind.get(kind)
        return {p for p in (f.paths if f else ()) if p.startswith(mine)}

    assert paths(FindingKind.LOADED_DELETED) == {str(node.cublas), str(node.nccl)}
    assert paths(FindingKind.LOADED_DIFFERS) == {str(node.cublas)}
    # nothing here belongs to a package
    assert paths(FindingKind.LOADED_UNOWNED) == {
        str(node.cudnn),
        str(node.cudart),
        str(node.cublas),
        str(node.nccl),
    }
    assert node.cublas_loaded in by_kind[FindingKind.LOADED_DIFFERS].message
    assert all(lib.integrity is Integrity.UNOWNED for lib in ours(result, node).values())


def test_without_runtime_nothing_is_loaded(node: Node) -> None:
    result = run_scan("/", ScanOptions(include=(str(node.lib),), use_cache=False))
    assert result.runtime is None
    assert all(not lib.loaded_by and lib.on_disk for lib in result.libraries)
    assert not {f.kind for f in result.findings} & {
        FindingKind.LOADED_DELETED,
        FindingKind.LOADED_DIFFERS,
        FindingKind.LOADED_UNOWNED,
    }


GPUPROV = str(Path(sys.executable).with_name("gpuprov"))


def run_gpuprov(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUPROV_CACHE_DIR": "/nonexistent-cache"}
    return subprocess.run(
        [*prefix, GPUPROV, *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_bom_lists_each_process_and_fail_on(node: Node) -> None:
    from scanner import vocabulary as V
    from scanner.bom.cyclonedx import validate_json

    done = run_gpuprov(
        "scan",
        "/",
        "--include",
        str(node.lib),
        "--runtime",
        "--no-cache",
        "-q",
        "-f",
        "cyclonedx",
        "--fail-on",
        "loaded-deleted",
    )
    assert done.returncode == 1, done.stderr
    assert "fail-on loaded-deleted: " in done.stderr
    assert validate_json(done.stdout) is None
    bom = json.loads(done.stdout)
    comps = {c["bom-ref"]: c for c in bom["components"]}

    def props(c: dict[str, object], name: str) -> list[str]:
        return [p["value"] for p in c.get("properties", []) if p["name"] == name]  # type: ignore[union-attr]

    old = comps[f"loaded:{node.cublas_loaded}:{node.cublas}"]
    assert props(old, V.RUNTIME_ON_DISK) == ["false"]
    assert props(old, V.RUNTIME_DISK_SHA256) == [node.cublas_now]
    assert props(old, V.RUNTIME_DELETED) == ["true"]
    procs = [json.loads(v) for v in props(old, V.RUNTIME_PROCESS)]
    assert sorted(p["pid"] for p in procs) == sorted(node.pids)
    assert all(p["exe"] == str(node.loader) and p["sha256"] == node.cublas_loaded for p in procs)
    assert props(old, V.RUNTIME_PROCESSES) == ["2"]
    contexts = [o.get("additionalContext", "") for o in old["evidence"]["occurrences"]]
    assert sum(c.startswith("loaded by pid") for c in contexts) == 2
    now = comps[f"file:{node.cublas}"]
    assert not props(now, V.RUNTIME_PROCESS)
    assert {"alg": "SHA-256", "content": node.cublas_now} in now["hashes"]
    cudart = comps[f"file:{node.cudart}"]
    assert [json.loads(v)["via"] for v in props(cudart, V.RUNTIME_PROCESS)] == ["inode"]
    asset = {p["name"]: p["value"] for p in bom["metadata"]["component"]["properties"]}
    assert int(asset[V.RUNTIME_LOADING]) >= 2


def test_without_cap_sys_admin_deleted_bytes_are_unreadable_not_passed(node: Node) -> None:
    if not shutil.which("capsh"):
        pytest.fail("capsh (libcap2-bin) is needed to drop CAP_SYS_ADMIN")
    done = run_gpuprov(
        "scan",
        "/",
        "--include",
        str(node.lib),
        "--runtime",
        "--no-cache",
        "-q",
        "-f",
        "json",
        "--fail-on",
        "loaded-differs-from-disk",
        # capsh runs bash: its -c runs gpuprov ($0) with the arguments after it
        prefix=(
            "capsh",
            "--drop=cap_sys_admin,cap_checkpoint_restore",
            "--",
            "-c",
            'exec "$0" "$@"',
        ),
    )
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    mine = [
        lib for lib in result["libraries"] if lib["ref"]["path"].startswith(str(node.lib) + "/")
    ]
    # the files still on disk are known by inode; the deleted ones' bytes cannot be read
    assert all(not lib["loaded_copy"] for lib in mine)
    loaded = {
        lib["ref"]["path"] for lib in mine if any(p["pid"] in node.pids for p in lib["loaded_by"])
    }
    assert loaded == {str(node.cudnn), str(node.cudart)}
    unreadable = [
        f
        for f in result["findings"]
        if f["kind"] == "unreadable" and f["paths"] and f["paths"][0].startswith(str(node.lib))
    ]
    assert sorted(f["paths"][0] for f in unreadable) == sorted([str(node.cublas), str(node.nccl)])
    assert all(f["also"] == ["loaded-differs-from-disk"] for f in unreadable)
    assert all("map_files" in f["message"] for f in unreadable)
    deleted = [f for f in result["findings"] if f["kind"] == "loaded-deleted"]
    assert {str(node.cublas), str(node.nccl)} <= set(deleted[0]["paths"])


def test_a_user_who_cannot_read_the_maps_gets_an_unreadable_finding(node: Node) -> None:
    done = run_gpuprov(
        "scan",
        "/",
        "--include",
        "/usr/lib/x86_64-linux-gnu/gconv",
        "--runtime",
        "--no-cache",
        "-q",
        "-f",
        "json",
        "--fail-on",
        "loaded-unowned",
        prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"),
    )
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert set(node.pids) <= set(result["runtime"]["unreadable"])
    [maps] = [f for f in result["findings"] if "memory maps" in f["message"]]
    assert maps["kind"] == "unreadable"
    assert set(maps["also"]) == {"loaded-unowned", "loaded-deleted", "loaded-differs-from-disk"}


def test_table_says_who_loads_what(node: Node) -> None:
    import io

    from scanner.report import render_table

    out = io.StringIO()
    render_table(scan(node), out, color=False, wide=True)
    text = out.getvalue()
    a, b = sorted(node.pids)
    assert f"loaded by 2 process(es): pid {a}, {b}" in text
    assert "loaded copy: deleted on disk" in text
    assert f"loaded copy: on disk now {node.cublas_now[:12]}" in text
    assert "finding loaded-deleted:" in text


def test_gate_denies_a_node_running_replaced_libraries(node: Node, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: node\n"
        "rules:\n  loaded: {forbid: [loaded-differs-from-disk]}\n"
    )
    done = run_gpuprov(
        "gate", "/", "--include", str(node.lib), "--runtime", "--no-cache", "-q",
        "--policy-file", str(policy), "-f", "json",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    decision = json.loads(done.stdout)
    assert decision["decision"] == "deny"
    [reason] = decision["reasons"]
    assert reason["rule"] == "loaded" and not reason["missing_input"]
    assert f"{node.cublas}: loaded bytes {node.cublas_loaded}" in reason["message"]
