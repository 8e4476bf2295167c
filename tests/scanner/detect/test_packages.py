"""Recognizing GPU libraries by purl, package name and file name: the one copy of these rules
(scanner/detect/packages.py) that the scanner, `gate --bom` and the service's ingest read."""

import pytest

from scanner.detect.classifiers import CLASSIFIERS, classify_name
from scanner.detect.packages import (
    OutOfRange,
    Recognized,
    package_cuda_major,
    recognize_file,
    recognize_package,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("libcudnn_ops.so.9.1.0", Recognized("cudnn", "cudnn_ops", "9.1.0")),
        ("libcudnn.so.9", Recognized("cudnn", "cudnn", None)),
        ("/usr/lib64/libcudnn_cnn_infer.so.8", Recognized("cudnn", "cudnn_cnn_infer", None)),
        ("libcublasLt.so.12", Recognized("cublasLt", "cublasLt", None, 12)),
        ("libcublas.so.12.4.5.8", Recognized("cublas", "cublas", "12.4.5.8", 12)),
        ("libcudart.so.11.8.89", Recognized("cudart", "cudart", "11.8.89", 11)),
        ("libnccl.so.2.21.5", Recognized("nccl", "nccl", "2.21.5")),
        # the scanner's component for the primary library is its family (as in its own BOMs)
        ("libnvJitLink.so.12", Recognized("nvjitlink", "nvjitlink", None, 12)),
        ("libcuda.so.535.104.05", Recognized("libcuda", "libcuda", "535.104.05")),
        ("libnvidia-ml.so.1", Recognized("nvidia-ml", "nvidia-ml", None)),
        # the classifier table's map, as the scanner reads its own files: cufft 11.x is CUDA 12
        ("libcufftw.so.11", Recognized("cufft", "cufftw", None, 12)),
        ("libcufft.so.10", Recognized("cufft", "cufft", None)),
        # a SONAME with a dot is no version: cudart 11's is libcudart.so.11.0
        ("libcudart.so.11.0", Recognized("cudart", "cudart", None, 11)),
        ("libnvrtc.so.11.2", Recognized("nvrtc", "nvrtc", None, 11)),
        # names the scanner's table knows and the service's own copy of it had missed
        ("libnvblas.so.12", Recognized("cublas", "nvblas", None, 12)),
        ("libnvonnxparser.so.10.3.0", Recognized("nvinfer", "nvonnxparser", "10.3.0")),
        (
            "libnvinfer_builder_resource.so.10.3.0",
            Recognized("nvinfer", "nvinfer_builder_resource", "10.3.0"),
        ),
        ("libcudnn_adv_v2.so.9", Recognized("cudnn", "cudnn_adv_v2", None)),
        ("libz.so.1", None),
        ("libcudnn.txt", None),
    ],
)
def test_file_names(name: str, expected: Recognized | None) -> None:
    assert recognize_file(name) == expected


def test_every_name_the_scanner_classifies_is_recognized() -> None:
    """One table: whatever the scanner calls a GPU library, the service names the same way."""
    names = [
        f"lib{prefix.rstrip('.')}.so.1.2.3" for row in CLASSIFIERS for prefix in row.prefixes
    ] + ["libcudnn_engines_tensor_ir.so.9", "libcusolverMg.so.11", "libnvrtc-builtins.so.12.4"]
    for name in names:
        scanned = classify_name(name)
        assert scanned is not None, name
        found = recognize_file(f"/opt/lib/{name}")
        assert found is not None, name
        assert (found.family, found.component) == (scanned.classifier.family, scanned.component)


@pytest.mark.parametrize(
    ("version", "major"),
    [("12.4.127", 12), ("1:12.4.127-1", 12), ("v12.4", 12), ("beta", None)],
)
def test_cudart_major_from_an_os_package_version(version: str, major: int | None) -> None:
    """The version rule's numeric prefix (scanner.versions), not a regex of its own."""
    found = recognize_package(f"pkg:conda/cudart@{version}", None, None)
    assert found is not None and found.cuda_major == major


@pytest.mark.parametrize(
    ("purl", "expected"),
    [
        ("pkg:pypi/nvidia-cudnn-cu12@9.1.0.70", ("cudnn", "9.1.0.70", 12)),
        ("pkg:pypi/nvidia_cudnn_cu13@9.12.0.46", ("cudnn", "9.12.0.46", 13)),
        ("pkg:pypi/nvidia-cuda-runtime-cu12@12.4.127", ("cudart", "12.4.127", 12)),
        ("pkg:pypi/nvidia-nccl-cu12@2.21.5", ("nccl", "2.21.5", 12)),
        ("pkg:pypi/tensorrt-cu12@10.0.1", ("nvinfer", "10.0.1", 12)),
        ("pkg:deb/ubuntu/libcudnn9-cuda-12@9.7.0.66-1?arch=amd64", ("cudnn", "9.7.0.66", 12)),
        ("pkg:deb/ubuntu/libcudnn8@8.9.7.29-1%2Bcuda12.2?arch=amd64", ("cudnn", "8.9.7.29", 12)),
        ("pkg:deb/ubuntu/libnccl2@2.21.5-1%2Bcuda12.4", ("nccl", "2.21.5", 12)),
        ("pkg:deb/ubuntu/cuda-cudart-12-4@12.4.127-1", ("cudart", "12.4.127", 12)),
        ("pkg:deb/ubuntu/libcublas-12-4@12.4.5.8-1", ("cublas", "12.4.5.8", 12)),
        ("pkg:deb/debian/libcudart11.0@11.8.89~11.8.0-5~deb12u1", ("cudart", "11.8.89", 11)),
        ("pkg:rpm/nvidia/libcudnn9-cuda-12@9.7.0.66-1?arch=x86_64", ("cudnn", "9.7.0.66", 12)),
        ("pkg:rpm/nvidia/libnccl@2.21.5-1%2Bcuda12.4", ("nccl", "2.21.5", 12)),
        ("pkg:conda/cudnn@9.1.1.17?channel=conda-forge", ("cudnn", "9.1.1.17", None)),
        ("pkg:conda/cuda-cudart@12.4.127", ("cudart", "12.4.127", 12)),
        # the pair: the deb suffix and the CUDA toolkit's -<major>-<minor> packages
        ("pkg:deb/debian/libcudnn9-cuda-12@9.1.0.70-1", ("cudnn", "9.1.0.70", 12)),
        ("pkg:rpm/nvidia/cuda-cudart-12-4@12.4.127-1", ("cudart", "12.4.127", 12)),
        ("pkg:rpm/nvidia/libcublas-12-4@12.4.5.8-1", ("cublas", "12.4.5.8", 12)),
        (
            "pkg:rpm/nvidia/libnvinfer10@10.0.1.6-1.cuda12.4?arch=x86_64",
            ("nvinfer", "10.0.1.6", 12),
        ),
        ("pkg:deb/debian/nvidia-cudnn@8.5.0.96~cuda11.7", None),  # Debian's installer
        ("pkg:deb/debian/libcudnn8@8.9.7.29-1+cuda12", ("cudnn", "8.9.7.29", 12)),
        ("pkg:deb/debian/libcublas12@12.0.1.189~12.0.1-4", ("cublas", "12.0.1.189", 12)),
        ("pkg:deb/debian/libcufft11@11.0.1.95~12.0.1-4", ("cufft", "11.0.1.95", 12)),
        ("pkg:deb/debian/libcufft10@10.9.0.58~11.8.0-5", ("cufft", "10.9.0.58", None)),
        ("pkg:conda/cudnn@8.9.2.26?build=cuda12_0&channel=defaults", ("cudnn", "8.9.2.26", 12)),
        (
            "pkg:conda/cudnn@9.3.0.75?build=h93bb076_0&channel=conda-forge",
            ("cudnn", "9.3.0.75", None),
        ),
        ("pkg:pypi/nvidia-cudnn-cu12@9.1.0.70%2Bcu124", ("cudnn", "9.1.0.70", 12)),
        ("pkg:pypi/nvidia-cudnn-cu11@8.9.4.25.post1", ("cudnn", "8.9.4.25", 11)),
        ("pkg:pypi/nvidia-cuda-runtime-cu11@11.8.89", ("cudart", "11.8.89", 11)),
        # CUDA 13's toolkit wheels drop the -cu suffix: the runtime's own major is CUDA's
        ("pkg:pypi/nvidia-cuda-runtime@13.0.96", ("cudart", "13.0.96", 13)),
        ("pkg:pypi/tensorrt-cu12-libs@10.3.0", ("nvinfer", "10.3.0", 12)),
        ("pkg:deb/ubuntu/libcudnn9-static-cuda-12@9.7.0.66-1", None),
        ("pkg:deb/ubuntu/libcudnn9-headers-cuda-12@9.7.0.66-1", None),
        ("pkg:pypi/nvidia-cudnn-frontend@1.5.2", None),
        ("pkg:deb/ubuntu/libcudnn9-dev-cuda-12@9.7.0.66-1", None),
        ("pkg:rpm/nvidia/libcudnn9-devel-cuda-12@9.7.0.66-1", None),
        ("pkg:pypi/torch@2.5.1", None),
        ("pkg:pypi/nvidia-ml-py@12.535.161", None),
        ("pkg:deb/debian/zlib1g@1.2.13", None),
    ],
)
def test_packages(purl: str, expected: tuple[str, str, int | None] | None) -> None:
    found = recognize_package(purl, None, None)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert (found.family, found.version, found.cuda_major) == expected


def test_name_without_purl() -> None:
    found = recognize_package(None, "nvidia-cudnn-cu12", "9.1.0.70")
    assert found is not None and found.family == "cudnn"


@pytest.mark.parametrize(
    ("name", "version", "build", "expected"),
    [
        ("libcudnn9-cuda-12", "9.1.0.70-1", None, 12),
        ("cuda-cudart-12-4", "12.4.127-1", None, 12),
        ("libnccl2", "2.21.5-1+cuda12.4", None, 12),
        ("libnccl2", "2.21.5-1+cuda12", None, 12),
        ("libnvinfer10", "10.0.1.6-1.cuda12.4", None, 12),
        ("nvidia-cudnn", "8.5.0.96~cuda11.7", None, 11),
        ("torch", "2.5.1+cu121", None, 12),
        ("cudnn", "8.9.2.26", "cuda12_0", 12),
        ("pytorch", "2.5.1", "cuda120_py311h", 12),
        ("libnccl2", "2.21.5-1", None, None),
        ("libnccl2", "2.21.5-1+cuda124", None, None),  # no dotted release: not a CUDA major
    ],
)
def test_the_cuda_major_a_package_states(
    name: str, version: str, build: str | None, expected: int | None
) -> None:
    """One rule for the scanner's owner packages and other tools' BOMs (the CLI's gate read
    -cu(da-?)N alone, so cuda-cudart-12-4 had no CUDA major there and 12 in the service)."""
    found = package_cuda_major(name, version, build)
    assert (found[0] if found else None) == expected


def test_an_absurd_cuda_major_is_refused_not_cut() -> None:
    with pytest.raises(OutOfRange, match="out of range"):
        recognize_package("pkg:deb/ubuntu/libcudnn9-cuda-99999999999@9.1", None, None)
    with pytest.raises(OutOfRange):
        recognize_file("libcudart.so.99999999999999999999.1")
