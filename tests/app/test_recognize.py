"""Recognizing GPU libraries in other tools' BOMs by purl and file name."""

import pytest

from app.domain.recognize import Recognized, recognize_file, recognize_package
from scanner.detect.classifiers import CLASSIFIERS, classify_name


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
        ("libcufftw.so.11", Recognized("cufft", "cufftw", None)),
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
