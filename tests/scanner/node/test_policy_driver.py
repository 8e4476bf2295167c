"""The policy's driver rule fed by the node facts of real-format node roots: the loaded kernel
module (not a library on disk) is the driver, its newest CUDA bounds the runtime in use."""

from __future__ import annotations

from pathlib import Path

from scanner.bom.cyclonedx import to_json
from scanner.pipeline import ScanOptions, run_scan
from scanner.policy.bom_facts import facts_from_bom
from scanner.policy.evaluate import Decision
from scanner.policy.facts import AssetFacts, facts_from_scan
from scanner.policy.rules import Status
from tests.fixtures import elf
from tests.scanner.node import nodetree as nt
from tests.scanner.policy.test_evaluate import only


def _facts(root: Path, tmp_path: Path) -> tuple[AssetFacts, AssetFacts]:
    result = run_scan(str(root), ScanOptions(cache_dir=tmp_path / "cache"))
    return facts_from_scan(result), facts_from_bom(to_json(result).encode())


def _with_cudart(root: Path, version: str) -> Path:
    major_minor = ".".join(version.split(".")[:2])
    elf.build_cuda_library(root / f"usr/local/cuda-{major_minor}/lib64", "cudart", version)
    return root


def test_module_version_and_cuda_max_feed_the_rule(tmp_path: Path) -> None:
    root = _with_cudart(nt.gpu_node(tmp_path / "root"), "12.6.77")
    scanned, from_bom = _facts(root, tmp_path)
    for facts in (scanned, from_bom):
        assert (facts.driver_version, facts.driver_cuda_max) == (nt.DRIVER, "12.2")
    evaluation, result = only(scanned, "driver", {})
    assert evaluation.decision is Decision.ALLOW, result.message
    assert "supports CUDA <= 12.2" in result.message
    assert "12.6.77 runs under minor-version compatibility" in result.message
    evaluation, result = only(scanned, "driver", {"minor_version_compatibility": False})
    assert evaluation.decision is Decision.DENY and result.status is Status.FAIL
    assert "CUDA runtime 12.6.77 is newer than the CUDA 12.2 driver" in result.message
    assert [f["path"] for f in result.files] == ["/usr/local/cuda-12.6/lib64/libcudart.so.12.6.77"]
    # a runtime within what the driver supports passes strictly too
    ok = _with_cudart(nt.gpu_node(tmp_path / "ok"), "12.2.140")
    evaluation, result = only(
        _facts(ok, tmp_path)[0], "driver", {"minor_version_compatibility": False}
    )
    assert evaluation.decision is Decision.ALLOW, result.message


def test_the_loaded_module_wins_over_libraries_on_disk(tmp_path: Path) -> None:
    # the user-space libraries were upgraded to 535, the old 470 module is still loaded
    root = _with_cudart(nt.gpu_node(tmp_path / "root"), "12.4.127")
    nt.write(root, "/proc/driver/nvidia/version", nt.PROC_VERSION.replace(nt.DRIVER, "470.256.02"))
    nt.write(root, "/sys/module/nvidia/version", "470.256.02\n")
    scanned, from_bom = _facts(root, tmp_path)
    for facts in (scanned, from_bom):
        assert (facts.driver_version, facts.driver_cuda_max) == ("470.256.02", "11.4")
        evaluation, result = only(facts, "driver", {})
        assert evaluation.decision is Decision.DENY
        assert "cannot run CUDA 12" in result.message


def test_jetson_cuda_from_jetpack(tmp_path: Path) -> None:
    root = tmp_path / "root"
    nt.write(root, "/etc/nv_tegra_release", nt.TEGRA_RELEASE_36)
    elf.build_driver_library(
        root / "usr/lib/aarch64-linux-gnu/nvidia",
        "cuda",
        "36.4.0",
        filename="libcuda.so.1.1",
        arch="aarch64",
    )
    lib = root / "usr/local/cuda-12.6/targets/aarch64-linux/lib"
    elf.build_cuda_library(lib, "cudart", "12.6.68", arch="aarch64")
    scanned, from_bom = _facts(root, tmp_path)
    for facts in (scanned, from_bom):
        assert facts.driver_cuda_max == "12.6"
        evaluation, result = only(facts, "driver", {"minor_version_compatibility": False})
        assert evaluation.decision is Decision.ALLOW, result.message
    elf.build_cuda_library(root / "opt/cuda13/lib", "cudart", "13.0.48", arch="aarch64")
    evaluation, result = only(_facts(root, tmp_path)[0], "driver", {})
    assert evaluation.decision is Decision.DENY and "cannot run CUDA 13" in result.message
