"""The GPU stack's packages that OSV records name (torch, jax, NVIDIA's wheels): a scan reports
them whether or not they own a GPU file, and the one reader of BOMs keeps them from any tool's
BOM, so that an OSV record of ``torch`` judges the torch an image holds (issue 19 §1, §3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanner.bom.cyclonedx import to_json, validate_json
from scanner.bom.foreign import gpu_libraries
from scanner.detect.products import is_stack_package
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures.packages import write_dist_info

SITE = "usr/local/lib/python3.11/site-packages"


@pytest.mark.parametrize(
    ("ptype", "name", "kept"),
    [
        ("pypi", "torch", True),
        ("pypi", "Torch", True),
        ("pypi", "torchvision", True),
        ("pypi", "tensorflow_gpu", True),
        ("pypi", "jax-cuda12-plugin", True),
        ("pypi", "jax_cuda12_pjrt", True),
        ("pypi", "cupy-cuda12x", True),
        ("pypi", "nvidia.cudnn.cu12", True),
        ("pypi", "tensorrt-cu12-libs", True),
        ("pypi", "vllm", True),
        # not the stack's, or not PyPI's
        ("pypi", "torchx", False),
        ("pypi", "nvidia", False),
        ("pypi", "requests", False),
        ("pypi", "transformers", False),
        ("conda", "pytorch", False),
        ("deb", "torch", False),
    ],
)
def test_which_packages_are_the_stacks(ptype: str, name: str, kept: bool) -> None:
    assert is_stack_package(ptype, name) is kept


def test_a_scan_reports_the_stacks_packages_without_gpu_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    site = root / SITE
    write_dist_info(site, "torch", "2.5.1+cu121", {"torch/__init__.py": b""})
    write_dist_info(site, "jax", "0.4.30", {"jax/__init__.py": b""})
    write_dist_info(site, "requests", "2.32.3", {"requests/__init__.py": b""})
    result = run_scan(str(root), ScanOptions(use_cache=False))
    purls = {p.purl for p in result.packages}
    assert purls == {"pkg:pypi/torch@2.5.1%2Bcu121", "pkg:pypi/jax@0.4.30"}
    document = to_json(result)
    assert validate_json(document) is None
    listed = {c.get("purl") for c in json.loads(document)["components"]}
    assert {"pkg:pypi/torch@2.5.1%2Bcu121", "pkg:pypi/jax@0.4.30"} <= listed
    assert "pkg:pypi/requests@2.32.3" not in listed
    # the one reader keeps them, as the service and `gate --bom` read the BOM
    kept = {p.component["purl"] for p in gpu_libraries(json.loads(document)).packages}
    assert kept == purls


def test_another_tools_bom_keeps_the_stacks_packages_only() -> None:
    document = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "components": [
            {"type": "library", "name": name, "version": version, "purl": purl}
            for name, version, purl in (
                ("torch", "2.5.1", "pkg:pypi/torch@2.5.1"),
                ("requests", "2.32.3", "pkg:pypi/requests@2.32.3"),
                ("libc6", "2.36-9", "pkg:deb/debian/libc6@2.36-9"),
                ("jaxlib", "0.4.30", "pkg:pypi/jaxlib@0.4.30"),
            )
        ],
    }
    kept = {p.component["purl"] for p in gpu_libraries(document).packages}
    assert kept == {"pkg:pypi/torch@2.5.1", "pkg:pypi/jaxlib@0.4.30"}
