"""The classifier table: which paths are GPU libraries and which family they belong to."""

from __future__ import annotations

import re

import pytest

from scanner.detect import (
    CLASSIFIERS,
    DETECT_VERSION,
    classify_name,
    is_candidate_path,
    is_metadata_path,
)

CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/libcudnn.so.9",
    "/usr/lib/x86_64-linux-gnu/libcudnn.so",
    "/opt/cudnn/lib/libcudnn_graph.so.9.1.0",
    "/opt/cudnn/lib/libcudnn_engines_tensor_ir.so.9",  # added in 9.28: matched by pattern
    "/opt/cudnn/lib/libcudnn_ext.so.9.28.1",
    "/x/libcudnn_ops_infer.so.8.9.2",
    "/usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89",
    "/usr/lib/x86_64-linux-gnu/libcudart.so.11.0",
    "/site-packages/nvidia/cublas/lib/libcublas.so.12",
    "/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
    "/x/libcufft.so.11",
    "/x/libcufftw.so.11",
    "/x/libcurand.so.10",
    "/x/libcusparse.so.12",
    "/x/libcusolver.so.11",
    "/x/libcusolverMg.so.11",
    "/x/libnccl.so.2",
    "/x/libnccl.so.2.21.5",
    "/x/libnvrtc.so.12",
    "/x/libnvrtc-builtins.so.12.4",
    "/x/libnvJitLink.so.12",
    "/x/libnvinfer.so.10",
    "/x/libnvinfer_plugin.so.10.0.1",
    "/x/libnvonnxparser.so.10",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.535.309.01",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "libcudnn.so.9",  # a bare name is a path too
]

NOT_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/libcudnn_static.a",
    "/usr/lib/x86_64-linux-gnu/libcublas_static.a",
    "/usr/include/cudnn.h",
    "/usr/lib/libcudadebugger.so.1",
    "/usr/lib/libcupti.so.12",
    "/usr/lib/libcusparseLt.so.0",
    "/usr/lib/libc.so.6",
    "/usr/lib/libcudnn.so.9.bak",
    "/usr/lib/libcudnn.so.9/README",
    "/usr/lib/libcudnn.so.9.",
    "/usr/lib/libcudnn-foo.so.9",
    "/usr/lib/python3/site-packages/libcudnn.py",
    "/x/libnvidia-ml.txt",
    "",
    "/",
]


@pytest.mark.parametrize("path", CANDIDATES)
def test_gpu_library_names_are_candidates(path: str) -> None:
    assert is_candidate_path(path)


@pytest.mark.parametrize("path", NOT_CANDIDATES)
def test_other_names_are_not_candidates(path: str) -> None:
    assert not is_candidate_path(path)


@pytest.mark.parametrize(
    ("name", "family", "component", "suffix"),
    [
        ("libcudnn.so.9", "cudnn", "cudnn", "9"),
        ("libcudnn_graph.so.9", "cudnn", "cudnn_graph", "9"),
        ("libcudnn_ops.so.9.1.0", "cudnn", "cudnn_ops", "9.1.0"),
        ("libcudnn_engines_tensor_ir.so.9", "cudnn", "cudnn_engines_tensor_ir", "9"),
        ("libcudnn_adv_train.so.8", "cudnn", "cudnn_adv_train", "8"),
        ("libcudart.so.11.8.89", "cudart", "cudart", "11.8.89"),
        ("libcublasLt.so.12", "cublasLt", "cublasLt", "12"),
        ("libcublas.so.12.4.5.8", "cublas", "cublas", "12.4.5.8"),
        ("libcufftw.so.11", "cufft", "cufftw", "11"),
        ("libcusolverMg.so.11", "cusolver", "cusolverMg", "11"),
        ("libnvrtc-builtins.so.12.4", "nvrtc", "nvrtc-builtins", "12.4"),
        ("libnvJitLink.so.12", "nvjitlink", "nvjitlink", "12"),
        ("libnvinfer.so.10", "nvinfer", "nvinfer", "10"),
        ("libnvinfer_plugin.so.10", "nvinfer", "nvinfer_plugin", "10"),
        ("libnvonnxparser.so.10", "nvinfer", "nvonnxparser", "10"),
        ("libcuda.so.1", "libcuda", "libcuda", "1"),
        ("libnvidia-ml.so.535.309.01", "nvidia-ml", "nvidia-ml", "535.309.01"),
        ("libnccl.so", "nccl", "nccl", None),
    ],
)
def test_classify_name(name: str, family: str, component: str, suffix: str | None) -> None:
    m = classify_name(name)
    assert m is not None
    assert (m.classifier.family, m.component, m.suffix) == (family, component, suffix)


def test_classify_name_rejects_others() -> None:
    assert classify_name("libcupti.so.12") is None
    assert classify_name("libcudnn_static.a") is None


def test_table_rows_are_consistent() -> None:
    families = [c.family for c in CLASSIFIERS]
    assert len(families) == len(set(families))
    for c in CLASSIFIERS:
        re.compile(c.name_re)
        re.compile(c.package_re)
        m = classify_name(f"lib{c.primary}.so.1")
        assert m is not None and m.classifier is c and m.component == c.family
        # the cheap pre-test must let the row's own names through
        assert any(f"{c.primary}.so.1".startswith(p) for p in c.prefixes)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/usr/include/x86_64-linux-gnu/cudnn_version_v9.h", True),
        ("/usr/include/cudnn_version.h", True),
        ("/opt/cudnn/include/cudnn.h", True),
        ("/usr/include/cudnn_ops.h", False),
        ("/usr/local/cuda-12.4/version.json", True),
        ("/usr/local/cuda/version.txt", True),
        ("/usr/lib/cuda/version.txt", True),
        ("/usr/share/doc/foo/version.json", False),
        ("version.json", False),
        ("/usr/local/cuda-12.4/include/cudnn.hpp", False),
    ],
)
def test_metadata_paths(path: str, expected: bool) -> None:
    assert is_metadata_path(path) is expected


def test_detect_version_is_stable_text() -> None:
    assert re.fullmatch(r"\d+-[0-9a-f]{10}", DETECT_VERSION)


def test_nvblas_is_part_of_cublas() -> None:
    """libnvblas.so.12 ships in nvidia-cublas-cu12 and libcublas12 packages."""
    from scanner.detect import classify_name, is_candidate_path

    assert is_candidate_path("/site/nvidia/cublas/lib/libnvblas.so.12")
    match = classify_name("libnvblas.so.12")
    assert match is not None
    assert (match.classifier.family, match.component) == ("cublas", "nvblas")


def test_every_family_is_one_row_for_every_reader_of_it() -> None:
    """The table is the one place a family is declared: the driver families, the node's
    driver facts and the service's package recognition all read it."""
    from scanner.detect import packages
    from scanner.detect.classifiers import CLASSIFIERS, DRIVER_FAMILIES, CudaRule
    from scanner.node import reader

    families = [row.family for row in CLASSIFIERS]
    assert len(families) == len(set(families))
    assert DRIVER_FAMILIES == tuple(r.family for r in CLASSIFIERS if r.cuda_rule is CudaRule.NONE)
    assert set(reader._DRIVER_LIBS) == set(DRIVER_FAMILIES)  # each has a DriverFacts field
    assert {r.family for r in packages._PYPI.values()} | {
        r.family for _, r in packages._OS_PACKAGES
    } <= set(families)
    for row in CLASSIFIERS:
        for name in row.pypi:
            got = packages.recognize_package(f"pkg:pypi/nvidia-{name}-cu12@1.2.3", None, None)
            assert got is not None and got.family == row.family, name
