"""Small real-format roots for the policy tests, built from compiled ELF stand-ins.

Each root is scanned by the real pipeline; the facts a test evaluates come from that scan.
"""

from __future__ import annotations

from pathlib import Path

from scanner.pipeline import ScanOptions, run_scan
from scanner.policy.facts import AssetFacts, facts_from_scan
from tests.fixtures import elf

VENDOR = "/opt/vendor/lib"


def clean_root(base: Path) -> Path:
    """cuDNN 9.1.0 (built for CUDA 12) beside cudart 12.4 and NVML 535: nothing wrong but owner."""
    lib = base / VENDOR.lstrip("/")
    lib.mkdir(parents=True)
    elf.build_cudnn_install(lib, (9, 1, 0), components=("cudnn", "cudnn_graph", "cudnn_ops"))
    elf.build_cuda_library(lib, "cudart", "12.4.127")
    elf.build_driver_library(lib, "nvidia-ml", "535.309.01")
    return base


def pairing_root(base: Path) -> Path:
    """cuDNN 9.1.0 built for CUDA 12 with a CUDA 11 runtime: loads, then fails at first call."""
    lib = base / VENDOR.lstrip("/")
    lib.mkdir(parents=True)
    elf.build_cudnn_install(lib, (9, 1, 0), components=("cudnn", "cudnn_graph"))
    elf.build_cuda_library(lib, "cudart", "11.8.89")
    return base


def old_driver_root(base: Path) -> Path:
    """cudart 12.4 on a host whose NVML says driver 470 (older than CUDA 12's 525.60.13)."""
    lib = base / VENDOR.lstrip("/")
    lib.mkdir(parents=True)
    elf.build_cuda_library(lib, "cudart", "12.4.127")
    elf.build_driver_library(lib, "nvidia-ml", "470.256.02")
    return base


def duplicate_root(base: Path) -> Path:
    """Two cudart 12 releases side by side in one loader directory."""
    lib = base / VENDOR.lstrip("/")
    lib.mkdir(parents=True)
    elf.build_cuda_library(lib, "cudart", "12.4.127")
    elf.build_cuda_library(lib, "cudart", "12.2.140", soname="libcudart.so.12")
    return base


def scan_facts(root: Path) -> AssetFacts:
    return facts_from_scan(run_scan(str(root), ScanOptions(use_cache=False)))
