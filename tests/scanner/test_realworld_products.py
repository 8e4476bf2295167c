"""Real NVIDIA tool binaries (realworld group): the `nvidia-cuda-nvcc` wheel from the package
index, whose `nvcc` and `ptxas` carry NVIDIA's own "Cuda compilation tools, release X.Y,
VX.Y.Z" text. Downloaded once into ~/.cache/gpuprov-tests/wheels (only when not cached) and
installed offline from that file into a temporary root."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.bom.cyclonedx import to_json, validate_json
from scanner.pipeline import ScanOptions, run_scan
from tests.scanner.test_realworld import CACHE, SITE, _pip

pytestmark = pytest.mark.realworld

PROJECT = "nvidia-cuda-nvcc"
PATTERN = "nvidia_cuda_nvcc-*-manylinux*x86_64*.whl"


@pytest.fixture(scope="module")
def wheel() -> Path:
    if not sorted(CACHE.glob(PATTERN)):
        CACHE.mkdir(parents=True, exist_ok=True)
        done = _pip(
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux2014_x86_64",
            "--python-version",
            "3.11",
            PROJECT,
            "-d",
            str(CACHE),
        )
        if done.returncode != 0:
            pytest.fail(f"cannot download {PROJECT}: {done.stderr.strip()[-300:]}")
    return sorted(CACHE.glob(PATTERN))[-1]


def test_real_nvcc_and_ptxas(wheel: Path, tmp_path: Path) -> None:
    version = wheel.name.split("-")[1]  # PEP 427: name-version-tags.whl
    root = tmp_path / "root"
    done = _pip("install", "--no-deps", "--no-index", "--target", str(root / SITE[1:]), str(wheel))
    assert done.returncode == 0, done.stderr
    result = run_scan(str(root), ScanOptions(use_cache=False))
    got = {p.key: p for p in result.products}
    for key in ("nvcc", "ptxas"):
        tool = got[key]
        # the wheel's version is the compiler's: V13.5.37 in the banner, 13.5.37 on PyPI
        assert tool.version == version, key
        assert tool.owner == f"pkg:pypi/nvidia-cuda-nvcc@{version}"
        assert tool.evidence[0].source.startswith("Cuda compilation tools, release ")
        assert tool.sha256 is not None
    line = ".".join(version.split(".")[:2])
    assert got["cuda-toolkit"].line == line and got["cuda-toolkit"].version is None
    assert not [lib for lib in result.libraries if lib.ref.path.endswith(("/nvcc", "/ptxas"))]
    assert validate_json(to_json(result)) is None
