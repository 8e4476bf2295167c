"""Catalog builders: from wheels (RECORD checked), from redistrib archives, from a golden scan."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from scanner import vocabulary as V
from scanner.refcatalog.model import PREDICATE_TYPE, Catalog, RefCatalogError, merge
from scanner.refcatalog.redist import catalog_from_redist, read_manifest
from scanner.refcatalog.scan import catalog_from_scan
from scanner.refcatalog.wheel import catalog_from_wheel, catalog_from_wheels
from tests.scanner.refcatalog.conftest import make_tar, make_wheel, manifest_entry, write_manifest

GRAPH = b"\x7fELF graph library bytes"
OPS = b"\x7fELF ops library bytes"


def _cudnn_wheel(tmp_path: Path, **kwargs: object) -> Path:
    files = {
        "nvidia/cudnn/lib/libcudnn_graph.so.9": GRAPH,
        "nvidia/cudnn/lib/libcudnn_ops.so.9": OPS,
        "nvidia/cudnn/include/cudnn.h": b"#define CUDNN_MAJOR 9\n",
        "nvidia/__init__.py": b"",
    }
    return make_wheel(tmp_path, "nvidia-cudnn-cu12", "9.1.0.70", files, **kwargs)


def test_from_wheel(tmp_path: Path) -> None:
    wheel = _cudnn_wheel(tmp_path)
    catalog = catalog_from_wheel(wheel)
    assert catalog.name == "nvidia-cudnn-cu12 9.1.0.70"
    assert [e.name for e in catalog.entries] == [
        "nvidia/cudnn/lib/libcudnn_graph.so.9",
        "nvidia/cudnn/lib/libcudnn_ops.so.9",
    ]
    graph = catalog.entries[0]
    assert graph.sha256 == hashlib.sha256(GRAPH).hexdigest()
    assert (graph.family, graph.component, graph.version) == ("cudnn", "cudnn_graph", "9.1.0.70")
    assert (graph.cuda_major, graph.arch, graph.size) == (12, "x86_64", len(GRAPH))
    assert graph.package == "pkg:pypi/nvidia-cudnn-cu12@9.1.0.70"
    assert catalog.sources[0].sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    statement = catalog.to_statement()
    assert statement["predicateType"] == PREDICATE_TYPE
    assert statement["subject"][1]["digest"]["sha256"] == hashlib.sha256(OPS).hexdigest()
    assert Catalog.from_bytes(catalog.to_bytes()).entries == catalog.entries


@pytest.mark.parametrize(
    ("name", "version", "member", "major"),
    [
        ("nvidia-cudnn-cu12", "9.1.0.70", "nvidia/cudnn/lib/libcudnn.so.9", 12),
        # CUDA 13's toolkit wheels drop the -cu suffix: the runtime's own major is CUDA's
        ("nvidia-cuda-runtime", "13.0.96", "nvidia/cu13/lib/libcudart.so.13", 13),
        ("torch", "2.5.1+cu121", "torch/lib/libcudnn.so.9", 12),
        ("nvidia-nccl", "2.27.7", "nvidia/nccl/lib/libnccl.so.2", None),
    ],
)
def test_a_wheels_cuda_major_is_read_as_the_scanner_reads_it(
    tmp_path: Path, name: str, version: str, member: str, major: int | None
) -> None:
    """One rule (scanner/detect/packages.py): the catalog builder read -cuN alone, so CUDA 13's
    nvidia-cuda-runtime had no CUDA major in a catalog and 13 in the scan it vouches for."""
    wheel = make_wheel(tmp_path, name, version, {member: GRAPH})
    (entry,) = catalog_from_wheel(wheel).entries
    assert entry.cuda_major == major


def test_from_wheel_record_mismatch_is_refused(tmp_path: Path) -> None:
    wrong = "sha256=" + "A" * 43
    wheel = _cudnn_wheel(tmp_path, record_override={"nvidia/cudnn/lib/libcudnn_ops.so.9": wrong})
    with pytest.raises(RefCatalogError, match="differs from the RECORD"):
        catalog_from_wheel(wheel)
    no_digest = _cudnn_wheel(tmp_path, record_override={"nvidia/cudnn/lib/libcudnn_ops.so.9": ""})
    with pytest.raises(RefCatalogError, match="no digest"):
        catalog_from_wheel(no_digest)


def test_from_wheel_bad_inputs(tmp_path: Path) -> None:
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"not a zip")
    with pytest.raises(RefCatalogError, match="not a readable wheel"):
        catalog_from_wheel(junk)
    no_libs = make_wheel(tmp_path, "pure", "1.0", {"pure/__init__.py": b""})
    with pytest.raises(RefCatalogError, match="no shared library"):
        catalog_from_wheel(no_libs)


def test_several_wheels_merge(tmp_path: Path) -> None:
    a = _cudnn_wheel(tmp_path)
    b = make_wheel(
        tmp_path,
        "nvidia-cuda-runtime-cu12",
        "12.4.127",
        {"nvidia/cuda_runtime/lib/libcudart.so.12": b"cudart"},
        platform="manylinux2014_aarch64",
    )
    merged = catalog_from_wheels([a, b], "stack")
    assert merged.name == "stack" and len(merged.sources) == 2
    cudart = merged.entries[-1]
    assert (cudart.family, cudart.source, cudart.arch) == ("cudart", 1, "aarch64")
    assert merge([catalog_from_wheel(a)], "m").entries == catalog_from_wheel(a).entries


def _redist(tmp_path: Path) -> tuple[Path, Path, Path]:
    cudnn = make_tar(
        tmp_path / "cudnn-linux-x86_64-9.1.0.70_cuda12-archive.tar.xz",
        "cudnn-linux-x86_64-9.1.0.70_cuda12-archive",
        {
            "lib/libcudnn_graph.so.9.1.0": GRAPH,
            "include/cudnn_version_v9.h": b"#define CUDNN_MAJOR 9\n",
            "LICENSE": b"license",
        },
        {"lib/libcudnn_graph.so.9": "libcudnn_graph.so.9.1.0"},
    )
    cudart = make_tar(
        tmp_path / "cuda_cudart-linux-x86_64-12.4.127-archive.tar.xz",
        "cuda_cudart-linux-x86_64-12.4.127-archive",
        {"lib/libcudart.so.12.4.127": b"cudart bytes"},
        {"lib/libcudart.so.12": "libcudart.so.12.4.127"},
    )
    manifest = write_manifest(
        tmp_path / "redistrib_9.1.0.json",
        {
            "release_date": "2024-04-16",
            "release_label": "9.1.0",
            "release_product": "cudnn",
            "cudnn": {
                "name": "NVIDIA CUDA Deep Neural Network library",
                "license": "cudnn",
                "license_path": "cudnn/LICENSE.txt",
                "version": "9.1.0.70",
                # cuda_variant is a list among the platform keys
                "cuda_variant": ["11", "12"],
                "linux-x86_64": {
                    "cuda11": {
                        "relative_path": "cudnn/linux-x86_64/other-cuda11.tar.xz",
                        "sha256": "00" * 32,
                        "md5": "00",
                        "size": "1",
                    },
                    "cuda12": manifest_entry(cudnn, "cudnn/linux-x86_64"),
                },
            },
            # a toolkit component: the platform maps straight to the archive
            "cuda_cudart": {
                "name": "CUDA Runtime (cudart)",
                "version": "12.4.127",
                "linux-x86_64": manifest_entry(cudart, "cuda_cudart/linux-x86_64"),
            },
        },
    )
    return manifest, cudnn, cudart


def test_from_redist(tmp_path: Path) -> None:
    manifest, cudnn, cudart = _redist(tmp_path)
    label, listed = read_manifest(manifest.read_bytes())
    assert label == "cudnn 9.1.0" and len(listed) == 3
    catalog = catalog_from_redist(manifest, [cudnn, cudart])
    by_name = {e.name: e for e in catalog.entries}
    assert set(by_name) == {"lib/libcudnn_graph.so.9.1.0", "lib/libcudart.so.12.4.127"}
    graph = by_name["lib/libcudnn_graph.so.9.1.0"]
    assert (graph.family, graph.version, graph.cuda_major, graph.arch) == (
        "cudnn",
        "9.1.0.70",
        12,
        "x86_64",
    )
    assert graph.sha256 == hashlib.sha256(GRAPH).hexdigest()
    runtime = by_name["lib/libcudart.so.12.4.127"]
    assert (runtime.family, runtime.cuda_major, runtime.source) == ("cudart", None, 1)
    assert catalog.sources[0].sha256 == hashlib.sha256(cudnn.read_bytes()).hexdigest()


def test_from_redist_refuses_mismatch_and_unlisted(tmp_path: Path) -> None:
    manifest, cudnn, _ = _redist(tmp_path)
    data = bytearray(cudnn.read_bytes())
    data[-1] ^= 1
    cudnn.write_bytes(bytes(data))
    with pytest.raises(RefCatalogError, match="differs from"):
        catalog_from_redist(manifest, [cudnn])
    stray = tmp_path / "stray.tar.xz"
    stray.write_bytes(b"x")
    with pytest.raises(RefCatalogError, match="not listed"):
        catalog_from_redist(manifest, [stray])
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(RefCatalogError, match="not JSON"):
        catalog_from_redist(bad, [stray])


def _report(tmp_path: Path) -> Path:
    def file(path: str, digest: str, family: str, integrity: str) -> dict[str, object]:
        return {
            "type": "file",
            "name": path,
            "version": "9.1.0",
            "hashes": [{"alg": "SHA-256", "content": digest}],
            "properties": [
                {"name": V.FILE_PATH, "value": path},
                {"name": V.LIBRARY_FAMILY, "value": family},
                {"name": V.LIBRARY_COMPONENT, "value": family},
                {"name": V.LIBRARY_VERSION, "value": "9.1.0"},
                {"name": V.LIBRARY_CUDA_MAJOR, "value": "12"},
                {"name": V.LIBRARY_ARCH, "value": "x86_64"},
                {"name": V.OWNER_PURL, "value": "pkg:deb/debian/libcudnn9-cuda-12@9.1.0.70-1"},
                {"name": V.INTEGRITY, "value": integrity},
            ],
        }

    doc = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": "urn:uuid:00000000-0000-0000-0000-000000000001",
        "metadata": {"component": {"type": "container", "name": "golden/cuda:12"}},
        "components": [
            {"type": "library", "name": "libcudnn9-cuda-12"},
            file("/usr/lib/libcudnn_graph.so.9.1.0", "11" * 32, "cudnn", "verified"),
            file("/usr/lib/libcudnn_ops.so.9.1.0", "22" * 32, "cudnn", "modified"),
        ],
    }
    path = tmp_path / "golden.cdx.json"
    path.write_text(json.dumps(doc))
    return path


def test_from_scan(tmp_path: Path) -> None:
    report = _report(tmp_path)
    catalog = catalog_from_scan(report)
    assert catalog.name == "golden scan of golden/cuda:12"
    assert [e.name for e in catalog.entries] == ["/usr/lib/libcudnn_graph.so.9.1.0"]
    entry = catalog.entries[0]
    assert (entry.family, entry.version, entry.cuda_major, entry.package) == (
        "cudnn",
        "9.1.0",
        12,
        "pkg:deb/debian/libcudnn9-cuda-12@9.1.0.70-1",
    )
    assert len(catalog_from_scan(report, include_modified=True).entries) == 2
    not_bom = tmp_path / "x.json"
    not_bom.write_text("{}")
    with pytest.raises(RefCatalogError, match="not a CycloneDX"):
        catalog_from_scan(not_bom)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(predicateType="https://slsa.dev/provenance/v1"),
        lambda d: d["subject"].pop(),
        lambda d: d["predicate"]["entries"][0].update(sha256="zz"),
        lambda d: d["predicate"]["entries"][0].update(source=7),
        lambda d: d.update(_type="https://in-toto.io/Statement/v0.1"),
    ],
)
def test_statement_consistency(tmp_path: Path, mutate) -> None:
    doc = catalog_from_wheel(_cudnn_wheel(tmp_path)).to_statement()
    mutate(doc)
    with pytest.raises(RefCatalogError):
        Catalog.from_statement(doc)
