"""Fake GPU libraries compiled once per session for the detect tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.elf import (
    build_cuda_library,
    build_cudnn_install,
    build_cudnn_library,
    build_driver_library,
)


@pytest.fixture(scope="session")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real ELF files named and built like NVIDIA's, keyed by a short name."""
    root = tmp_path_factory.mktemp("gpu-libs")
    out: dict[str, Path] = {}
    cudnn9 = build_cudnn_install(root / "cudnn9" / "lib", (9, 1, 0), build=70, cudart=12040)
    out.update({f"cudnn9/{k}": v for k, v in cudnn9.items()})
    cudnn8 = build_cudnn_install(
        root / "cudnn8" / "lib", (8, 9, 2), build=26, cudart=11080, refs=("libcublasLt.so.11",)
    )
    out.update({f"cudnn8/{k}": v for k, v in cudnn8.items()})
    out["future"] = build_cudnn_library(
        root / "future",
        "cudnn_engines_tensor_ir",
        (9, 28, 1),
        cudart=13000,
        refs=("libcublasLt.so.13",),
    )
    out["aarch64"] = build_cudnn_library(root / "aarch64", "cudnn_graph", arch="aarch64")
    out["cublasLt"] = build_cuda_library(root / "cuda", "cublasLt", "12.4.5.8")
    out["cublas"] = build_cuda_library(
        root / "cuda", "cublas", "12.4.5.8", needed=[out["cublasLt"]]
    )
    out["cudart12"] = build_cuda_library(root / "cuda", "cudart", "12.4.127")
    out["cudart11"] = build_cuda_library(root / "debian", "cudart", "11.8.89")
    out["nccl"] = build_cuda_library(root / "cuda", "nccl", "2.21.5")
    out["nvml"] = build_driver_library(root / "driver", "nvidia-ml", "535.309.01")
    out["libcuda"] = build_driver_library(root / "driver", "cuda", "535.309.01")
    return out
