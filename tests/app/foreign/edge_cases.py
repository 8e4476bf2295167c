"""Hand-made CycloneDX BOMs of the package and file names other tools report for NVIDIA's
libraries, in the shapes those tools emit (Trivy's purls and ``aquasecurity:trivy:*``
properties, Syft's ``file`` components with their digests, cdxgen's conda purls and ``source``
tags): the naming cases the recorded corpus (corpus/, tests/app/foreign/record.py) lacks.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from scanner import vocabulary as v
from tests.app import boms

TIMESTAMP = "2026-11-30T08:00:00Z"


def _sha(*parts: str) -> str:
    return hashlib.sha256(":".join(parts).encode()).hexdigest()


def _props(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": n, "value": val} for n, val in pairs]


def _bom(
    name: str,
    components: list[dict[str, Any]],
    *,
    tool: str = "trivy",
    version: str = "0.58.1",
    kind: str = "container",
    asset_props: list[dict[str, str]] | None = None,
    timestamp: str = TIMESTAMP,
) -> dict[str, Any]:
    asset: dict[str, Any] = {"bom-ref": "asset", "type": kind, "name": name}
    if kind == "container":
        asset["version"] = "sha256:" + _sha("manifest", name)
    if asset_props:
        asset["properties"] = asset_props
    return {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": uuid.uuid5(uuid.NAMESPACE_URL, f"gpuprov-edge:{name}").urn,
        "version": 1,
        "metadata": {
            "timestamp": timestamp,
            "tools": {"components": [{"type": "application", "name": tool, "version": version}]},
            "component": asset,
        },
        "components": components,
    }


def package(purl: str, name: str, version: str, **extra: Any) -> dict[str, Any]:
    """A library component as Trivy writes one (bom-ref = purl)."""
    return {"bom-ref": purl, "type": "library", "name": name, "version": version, "purl": purl}


def trivy_package(purl: str, name: str, version: str, layer: str) -> dict[str, Any]:
    component = package(purl, name, version)
    component["properties"] = _props(
        ("aquasecurity:trivy:LayerDigest", "sha256:" + _sha("layer", layer)),
        ("aquasecurity:trivy:PkgType", purl.split("/", 2)[1] if "/" in purl else "none"),
    )
    return component


def file(path: str, *, sha256: bool = True) -> dict[str, Any]:
    """A file component as Syft writes one: its path as its name, SHA-1 and SHA-256."""
    hashes = [{"alg": "SHA-1", "content": hashlib.sha1(path.encode()).hexdigest()}]
    if sha256:
        hashes.append({"alg": "SHA-256", "content": _sha("file", path)})
    return {"bom-ref": _sha("ref", path)[:16], "type": "file", "name": path, "hashes": hashes}


def edge_cases() -> dict[str, dict[str, Any]]:
    """name -> BOM."""
    cases: dict[str, dict[str, Any]] = {}
    # the issue: cuDNN's deb for CUDA 12 and the CUDA toolkit's cudart rpm, CUDA 12.4
    cases["issue-deb-cudnn-rpm-cudart"] = _bom(
        "reg.example/issue:1",
        [
            package(
                "pkg:deb/debian/libcudnn9-cuda-12@9.1.0.70-1",
                "libcudnn9-cuda-12",
                "9.1.0.70-1",
            ),
            package(
                "pkg:rpm/nvidia/cuda-cudart-12-4@12.4.127-1",
                "cuda-cudart-12-4",
                "12.4.127-1",
            ),
        ],
    )
    cases["deb-plus-cuda-versions"] = _bom(
        "reg.example/plus:1",
        [
            trivy_package(
                "pkg:deb/ubuntu/libcudnn8@8.9.7.29-1%2Bcuda12.2?arch=amd64&distro=ubuntu-22.04",
                "libcudnn8",
                "8.9.7.29-1+cuda12.2",
                "a",
            ),
            trivy_package(
                "pkg:deb/ubuntu/libnccl2@2.21.5-1%2Bcuda12?arch=amd64&distro=ubuntu-22.04",
                "libnccl2",
                "2.21.5-1+cuda12",
                "a",
            ),
            trivy_package(
                "pkg:deb/ubuntu/libcudart11.0@11.8.89~11.8.0-5~deb12u1?arch=amd64",
                "libcudart11.0",
                "11.8.89~11.8.0-5~deb12u1",
                "b",
            ),
            trivy_package(
                "pkg:deb/ubuntu/libcudnn8-dev@8.9.7.29-1%2Bcuda12.2?arch=amd64",
                "libcudnn8-dev",
                "8.9.7.29-1+cuda12.2",
                "a",
            ),
        ],
        # a time with an offset is the same instant in UTC on both sides
        timestamp="2026-11-30T09:00:00+01:00",
    )
    cases["rpm-toolkit-names"] = _bom(
        "reg.example/rpm:1",
        [
            trivy_package(
                "pkg:rpm/redhat/libcublas-12-4@12.4.5.8-1?arch=x86_64&distro=redhat-9.4",
                "libcublas-12-4",
                "12.4.5.8-1",
                "c",
            ),
            trivy_package(
                "pkg:rpm/redhat/cuda-cudart-12-6@12.6.77-1?arch=x86_64&distro=redhat-9.4",
                "cuda-cudart-12-6",
                "12.6.77-1",
                "c",
            ),
            trivy_package(
                "pkg:rpm/redhat/libnvinfer10@10.0.1.6-1.cuda12.4?arch=x86_64&distro=redhat-9.4",
                "libnvinfer10",
                "10.0.1.6-1.cuda12.4",
                "c",
            ),
            trivy_package(
                "pkg:rpm/redhat/libcufft-12-4@11.2.1.3-1?arch=x86_64&distro=redhat-9.4",
                "libcufft-12-4",
                "11.2.1.3-1",
                "c",
            ),
        ],
    )
    conda_tags = {"tags": ["source"]}
    cases["conda-builds"] = _bom(
        "reg.example/conda:1",
        [
            package(
                "pkg:conda/cudnn@8.9.2.26?build=cuda12_0&channel=defaults&subdir=linux-64",
                "cudnn",
                "8.9.2.26",
            ),
            package(
                "pkg:conda/cuda-cudart@12.4.127?build=he02047a_2&channel=conda-forge",
                "cuda-cudart",
                "12.4.127",
            ),
            package(
                "pkg:conda/nccl@2.21.5.1?build=h6103f9b_0&channel=conda-forge",
                "nccl",
                "2.21.5.1",
            ),
            # cdxgen lists the source package too: it installs nothing
            {
                **package("pkg:deb/ubuntu/cudnn@9.1.0.70-1?arch=amd64", "cudnn", "9.1.0.70-1"),
                **conda_tags,
            },
        ],
        tool="cdxgen",
        version="11.11.0",
    )
    cases["pypi-wheels"] = _bom(
        "reg.example/pypi:1",
        [
            package("pkg:pypi/nvidia-cudnn-cu12@9.1.0.70%2Bcu124", "nvidia-cudnn-cu12", "9.1.0.70"),
            package(
                "pkg:pypi/nvidia-cuda-runtime-cu11@11.8.89",
                "nvidia-cuda-runtime-cu11",
                "11.8.89",
            ),
            package("pkg:pypi/nvidia_cublas_cu12@12.4.5.8", "nvidia_cublas_cu12", "12.4.5.8"),
            package("pkg:pypi/tensorrt-cu12-libs@10.3.0", "tensorrt-cu12-libs", "10.3.0"),
            package("pkg:pypi/nvidia-cudnn-frontend@1.5.2", "nvidia-cudnn-frontend", "1.5.2"),
            package("pkg:pypi/torch@2.5.1%2Bcu121", "torch", "2.5.1+cu121"),
        ],
        tool="syft",
        version="1.18.1",
    )
    cases["pypi-cuda13"] = _bom(
        "reg.example/cu13:1",
        [
            package("pkg:pypi/nvidia-cuda-runtime@13.0.96", "nvidia-cuda-runtime", "13.0.96"),
            package("pkg:pypi/nvidia-cudnn-cu13@9.13.0.50", "nvidia-cudnn-cu13", "9.13.0.50"),
            package("pkg:pypi/nvidia-cufft@12.0.0.61", "nvidia-cufft", "12.0.0.61"),
            package("pkg:pypi/nvidia-nvjitlink@13.0.88", "nvidia-nvjitlink", "13.0.88"),
        ],
        tool="syft",
        version="1.18.1",
    )
    cases["bare-names-no-purl"] = _bom(
        "reg.example/bare:1",
        [
            {"type": "library", "name": "libcudnn9-cuda-12", "version": "9.7.0.66-1"},
            {"type": "library", "name": "cuda-cudart-12-8", "version": "12.8.90-1"},
            {"type": "library", "name": "libcudnn9-static-cuda-12", "version": "9.7.0.66-1"},
        ],
    )
    site = "/usr/local/lib/python3.11/site-packages/nvidia"
    cases["syft-files"] = _bom(
        "reg.example/files:1",
        [
            file("/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0"),
            file("/usr/lib/x86_64-linux-gnu/libcudnn_cnn.so.9.1.0"),
            file("/usr/lib/x86_64-linux-gnu/libcudnn_adv.so.9.0.0"),
            file(f"{site}/cudnn/lib/libcudnn.so.9"),
            file(f"{site}/cuda_runtime/lib/libcudart.so.11.0"),
            file("/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127"),
            file("/usr/local/cuda-12.4/lib64/libcublasLt.so.12"),
            file("/usr/local/cuda-12.4/lib64/libcufft.so.11"),
            file("/usr/local/cuda-12.4/lib64/libnvrtc.so.12.4.127", sha256=False),
            file("/usr/lib64/libz.so.1"),
        ],
        tool="syft",
        version="1.18.1",
    )
    # a host (no container): the driver is read from its driver libraries
    cases["host-driver-files"] = _bom(
        "gpu-node-7",
        [
            file("/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05"),
            file("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05"),
            file("/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127"),
            file("/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"),
            package(
                "pkg:deb/ubuntu/libcudnn9-cuda-12@9.1.0.70-1", "libcudnn9-cuda-12", "9.1.0.70-1"
            ),
        ],
        tool="syft",
        version="1.18.1",
        kind="operating-system",
    )
    # another tool's BOM carrying some of our vocabulary: a file with verdicts, its owner
    # package listed (not a library twice), and a GPU package without files
    owner = "pkg:pypi/nvidia-cudnn-cu12@9.1.0.70"
    ours = file(f"{site}/cudnn/lib/libcudnn_graph.so.9")
    ours["properties"] = _props(
        (v.FILE_PATH, f"{site}/cudnn/lib/libcudnn_graph.so.9"),
        (v.LIBRARY_FAMILY, "cudnn"),
        (v.LIBRARY_COMPONENT, "cudnn_graph"),
        (v.LIBRARY_VERSION, "9.1.0.70"),
        (v.LIBRARY_CUDA_MAJOR, "12"),
        (v.INTEGRITY, "verified"),
        (v.PROVENANCE, "unknown"),
        (v.OWNER_PURL, owner),
    )
    cases["mixed-vocabulary"] = _bom(
        "reg.example/mixed:1",
        [
            ours,
            package(owner, "nvidia-cudnn-cu12", "9.1.0.70"),
            package(
                "pkg:pypi/nvidia-cuda-runtime-cu12@12.4.127",
                "nvidia-cuda-runtime-cu12",
                "12.4.127",
            ),
        ],
        asset_props=_props(
            (v.IMAGE_SIGNER, "release-ci (ecdsa P-256)"),
            (v.SLSA_BUILD_LEVEL, "2"),
            (v.SLSA_BUILDER, "https://ci.example/builder"),
        ),
    )
    # a trust outcome with only a builder, and rejected signatures
    cases["trust-builder-only"] = _bom(
        "reg.example/builder:1",
        [package("pkg:pypi/nvidia-cudnn-cu12@9.1.0.70", "nvidia-cudnn-cu12", "9.1.0.70")],
        asset_props=_props(
            (v.SLSA_BUILDER, "https://ci.example/builder"),
            (v.IMAGE_SIGNATURE_REJECTED, "sig 1: not signed by a trusted key"),
        ),
    )
    # no metadata.timestamp: the scan time is unknown on both sides (scan_age has no input),
    # though the service dates the stored scan by its arrival
    undated = _bom(
        "reg.example/undated:1",
        [package("pkg:pypi/nvidia-cudnn-cu12@9.1.0.70", "nvidia-cudnn-cu12", "9.1.0.70")],
    )
    del undated["metadata"]["timestamp"]
    cases["no-timestamp"] = undated
    # the builders the service tests use for each tool's shape (tests/app/boms.py)
    cases["shape-trivy"] = boms.trivy_bom()
    cases["shape-syft"] = boms.syft_bom()
    cases["shape-cdxgen"] = boms.cdxgen_bom()
    return cases
