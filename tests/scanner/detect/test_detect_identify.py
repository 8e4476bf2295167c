"""Identification from compiled libraries, owner packages, headers, version.json and config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanner.detect import (
    DetectContext,
    analyze_elf,
    build_context,
    find_mixed_cudnn,
)
from scanner.detect.identify import identify
from scanner.model import (
    AssetInfo,
    AssetKind,
    Confidence,
    Digests,
    FileFacts,
    Identification,
    Package,
    Sha256,
)
from scanner.versions import normalize_version
from tests.fixtures.elf import build_cudnn_install, build_cudnn_library

HOST = AssetInfo(AssetKind.HOST, "host", "/")
EMPTY = build_context({}, HOST)


def facts(path: Path) -> FileFacts:
    return FileFacts(Digests(path.stat().st_size, Sha256("0" * 64)), analyze_elf(str(path)))


def pkg(manager: str, name: str, version: str, **extra: str) -> Package:
    return Package(
        manager=manager,
        name=name,
        version=version,
        purl=f"pkg:{manager}/{name}@{version}",
        extra=tuple(sorted(extra.items())),
    )


def sources(ident: Identification, field: str) -> dict[str, str]:
    return {e.source: e.value for e in ident.evidence if e.field == field}


# -- cuDNN from the file alone --


def test_unowned_cudnn9_graph_gets_four_part_version(libs: dict[str, Path]) -> None:
    path = libs["cudnn9/cudnn_graph"]
    ident = identify(f"/opt/cudnn/lib/{path.name}", facts(path), None, EMPTY)
    assert (ident.family, ident.component) == ("cudnn", "cudnn_graph")
    assert ident.version == "9.1.0.70"  # marker carries the build number
    assert ident.cuda_major == 12
    assert ident.arch == "x86_64"
    assert ident.soname == "libcudnn_graph.so.9"
    methods = {(e.field, e.method) for e in ident.evidence}
    assert ("version", "binary-analysis") in methods
    assert ("version", "filename") in methods
    assert ("cuda-major", "binary-analysis") in methods
    marker = next(e for e in ident.evidence if e.source.startswith("marker "))
    assert marker.confidence is Confidence.HIGH


def test_unowned_sub_library_uses_version_ints(libs: dict[str, Path]) -> None:
    path = libs["cudnn9/cudnn_ops"]
    ident = identify(f"/opt/cudnn/lib/{path.name}", facts(path), None, EMPTY)
    assert (ident.component, ident.version, ident.cuda_major) == ("cudnn_ops", "9.1.0", 12)
    assert sources(ident, "version")["symbol cudnn_ops_version=0x090100"] == "9.1.0"


def test_pip_layout_name_carries_no_version(tmp_path: Path) -> None:
    lib = tmp_path / "site-packages" / "nvidia" / "cudnn" / "lib"
    files = build_cudnn_install(lib, (9, 1, 0), versioned_names=False, components=["cudnn_cnn"])
    path = files["cudnn_cnn"]
    assert path.name == "libcudnn_cnn.so.9"
    ident = identify(str(path), facts(path), None, EMPTY)
    assert ident.version == "9.1.0"
    assert not any(e.method == "filename" for e in ident.evidence if e.field == "version")


def test_cudnn8_sub_libraries(libs: dict[str, Path]) -> None:
    for comp in ("cudnn_ops_infer", "cudnn_adv_train"):
        path = libs[f"cudnn8/{comp}"]
        ident = identify(f"/x/lib/{path.name}", facts(path), None, EMPTY)
        assert ident.component == comp
        assert ident.version in ("8.9.2", "8.9.2.26")
        assert ident.cuda_major == 11
    ops = libs["cudnn8/cudnn_ops_infer"]
    assert identify(f"/x/lib/{ops.name}", facts(ops), None, EMPTY).version == "8.9.2.26"


def test_future_sub_library_identified(libs: dict[str, Path]) -> None:
    path = libs["future"]
    ident = identify(f"/x/lib/{path.name}", facts(path), None, EMPTY)
    assert (ident.family, ident.component) == ("cudnn", "cudnn_engines_tensor_ir")
    assert (ident.version, ident.cuda_major) == ("9.28.1", 13)


def test_aarch64_identified(libs: dict[str, Path]) -> None:
    path = libs["aarch64"]
    ident = identify(f"/usr/lib/aarch64-linux-gnu/{path.name}", facts(path), None, EMPTY)
    assert (ident.arch, ident.version, ident.cuda_major) == ("aarch64", "9.1.0.70", 12)


def test_soname_overrides_a_misleading_file_name(tmp_path: Path, libs: dict[str, Path]) -> None:
    renamed = tmp_path / "libcublas.so.12"
    renamed.write_bytes(libs["cudnn9/cudnn_ops"].read_bytes())
    ident = identify(str(renamed), facts(renamed), None, EMPTY)
    assert (ident.family, ident.component, ident.version) == ("cudnn", "cudnn_ops", "9.1.0")
    names = sources(ident, "name")
    assert names == {"libcublas.so.12": "cublas", "soname libcudnn_ops.so.9": "cudnn_ops"}


def test_alias_names_a_file_with_an_opaque_name(libs: dict[str, Path]) -> None:
    path = libs["cudart12"]
    ident = identify(
        "/blobs/3f9a", None, None, EMPTY, aliases=["/usr/lib/x86_64-linux-gnu/libcudart.so.12"]
    )
    assert ident.family == "cudart"
    assert identify("/blobs/3f9a", facts(path), None, EMPTY).family == "cudart"  # by SONAME


def test_unknown_file() -> None:
    ident = identify("/x/libfoo.so.1", None, None, EMPTY)
    assert (ident.family, ident.version, ident.cuda_major) == ("unknown", None, None)


# -- owner packages and precedence --


def test_pip_owner_adds_build_number(libs: dict[str, Path]) -> None:
    path = libs["cudnn9/cudnn_ops"]
    owner = pkg("pypi", "nvidia-cudnn-cu12", "9.1.0.70")
    ident = identify(f"/sp/nvidia/cudnn/lib/{path.name}", facts(path), owner, EMPTY)
    assert ident.version == "9.1.0.70"
    assert sources(ident, "version")["pkg:pypi/nvidia-cudnn-cu12@9.1.0.70"] == "9.1.0.70"
    assert sources(ident, "cuda-major")["package name nvidia-cudnn-cu12"] == "12"


def test_deb_owner_revision_is_dropped(tmp_path: Path) -> None:
    lib = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    path = build_cudnn_install(lib, (9, 7, 0), build=66, components=["cudnn_adv"])["cudnn_adv"]
    owner = pkg("deb", "libcudnn9-cuda-12", "9.7.0.66-1")
    ident = identify(f"/usr/lib/x86_64-linux-gnu/{path.name}", facts(path), owner, EMPTY)
    assert (ident.version, ident.cuda_major) == ("9.7.0.66", 12)


def test_file_wins_over_a_disagreeing_owner(libs: dict[str, Path]) -> None:
    # the package installed 9.7.0.66, but the bytes on disk are 9.1.0: the file is what runs
    path = libs["cudnn9/cudnn_ops"]
    owner = pkg("deb", "libcudnn9-cuda-12", "9.7.0.66-1")
    ident = identify(f"/usr/lib/x86_64-linux-gnu/{path.name}", facts(path), owner, EMPTY)
    assert ident.version == "9.1.0"
    assert "9.7.0.66" in sources(ident, "version").values()  # kept as evidence


def test_owner_of_another_major_never_wins(libs: dict[str, Path]) -> None:
    path = libs["cudnn9/cudnn_ops"]
    owner = pkg("rpm", "libcudnn8", "8.9.7.29-1.cuda12.2")
    ident = identify("/usr/lib64/libcudnn_ops.so.9", None, owner, EMPTY)  # the name objects
    assert ident.version is None
    ident = identify("/usr/lib64/libcudnn_ops.so.9", facts(path), owner, EMPTY)
    assert ident.version == "9.1.0"


def test_unrelated_owner_gives_cuda_major_not_version(libs: dict[str, Path]) -> None:
    path = libs["cudnn9/cudnn_adv"]
    torch = pkg("pypi", "torch", "2.5.1+cu121")
    ident = identify(f"/sp/torch/lib/{path.name}", None, torch, EMPTY)
    assert ident.version == "9.1.0"  # from the file name, not torch's 2.5.1
    assert ident.cuda_major == 12


def test_owned_file_without_elf_facts_uses_owner(tmp_path: Path) -> None:
    owner = pkg("rpm", "libcudnn9-cuda-12", "9.7.0.66-1")
    ident = identify("/usr/lib64/libcudnn_graph.so.9", None, owner, EMPTY)
    assert (ident.version, ident.cuda_major) == ("9.7.0.66", 12)


# -- headers, version.json, image config --

HEADER_V9 = b"""#ifndef CUDNN_VERSION_H_
#define CUDNN_MAJOR 9
#define CUDNN_MINOR 1
#define CUDNN_PATCHLEVEL 0
#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)
#endif
"""
HEADER_V8 = HEADER_V9.replace(b"MAJOR 9", b"MAJOR 8").replace(b"MINOR 1", b"MINOR 9")


def test_header_applies_to_its_install_tree_only() -> None:
    ctx = build_context(
        {
            "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h": HEADER_V9,
            "/usr/include/x86_64-linux-gnu/cudnn_version_v8.h": HEADER_V8,
            "/usr/include/cudnn.h": b'#include "cudnn_version.h"\n',
        },
        HOST,
    )
    assert {h.version for h in ctx.cudnn_headers} == {"9.1.0", "8.9.0"}
    ident = identify("/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9", None, None, ctx)
    assert ident.version == "9.1.0"  # the v8 header is evidence but never wins for a .so.9
    assert any(e.method == "source-code-analysis" for e in ident.evidence)
    other = identify("/opt/other/lib/libcudnn_ops.so.9", None, None, ctx)
    assert other.version is None
    assert not any(e.field == "version" for e in other.evidence)


def test_tarball_header_and_directory_name() -> None:
    root = "/opt/cudnn-linux-x86_64-9.1.0.70_cuda12-archive"
    ctx = build_context({f"{root}/include/cudnn_version.h": HEADER_V9}, HOST)
    ident = identify(f"{root}/lib/libcudnn_heuristic.so.9", None, None, ctx)
    assert (ident.version, ident.cuda_major) == ("9.1.0.70", 12)


def test_cuda_toolkit_version_json(libs: dict[str, Path]) -> None:
    doc = {
        "cuda": {"name": "CUDA SDK", "version": "12.4.1"},
        "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.4.127"},
        "libcublas": {"name": "CUDA cuBLAS", "version": "12.4.5.8"},
        "libcurand": {"name": "CUDA cuRAND", "version": "10.3.5.147"},
    }
    ctx = build_context({"/usr/local/cuda-12.4/version.json": json.dumps(doc).encode()}, HOST)
    lib = "/usr/local/cuda-12.4/targets/x86_64-linux/lib"
    cudart = identify(f"{lib}/libcudart.so.12", None, None, ctx)
    assert (cudart.version, cudart.cuda_major) == ("12.4.127", 12)
    cublas = identify(f"{lib}/libcublasLt.so.12", facts(libs["cublasLt"]), None, ctx)
    assert (cublas.version, cublas.cuda_major) == ("12.4.5.8", 12)
    curand = identify(f"{lib}/libcurand.so.10", None, None, ctx)
    assert (curand.version, curand.cuda_major) == ("10.3.5.147", 12)  # major from the toolkit
    elsewhere = identify("/opt/x/lib/libcudart.so.12", None, None, ctx)
    assert elsewhere.version is None


def test_version_txt_and_bad_version_json() -> None:
    ctx = build_context(
        {
            "/usr/local/cuda-10.2/version.txt": b"CUDA Version 10.2.89\n",
            "/usr/local/cuda-12.4/version.json": b"{not json",
            "/usr/local/cuda-12.5/version.json": b"[]",
        },
        HOST,
    )
    assert [t.cuda_version for t in ctx.toolkits] == ["10.2.89"]
    assert [s.path for s in ctx.skipped] == [
        "/usr/local/cuda-12.4/version.json",
        "/usr/local/cuda-12.5/version.json",
    ]
    assert all(s.stage == "detect" and s.reason for s in ctx.skipped)


def test_deeply_nested_version_json_is_skipped_not_a_crash() -> None:
    ctx = build_context({"/usr/local/cuda-12.4/version.json": b"[" * 100_000}, HOST)
    assert ctx.toolkits == ()
    assert [(s.path, s.stage) for s in ctx.skipped] == [
        ("/usr/local/cuda-12.4/version.json", "detect")
    ]
    assert "invalid CUDA version.json" in ctx.skipped[0].reason


def test_absurdly_long_version_numbers_are_no_claim_not_a_crash() -> None:
    # int() refuses 4300+ digits: a hostile package database, header or image config must
    # cost that claim only, never the scan.
    huge = "9" * 5000
    owner = Package("dpkg", "libcudnn9-cuda-12", huge, "pkg:deb/ubuntu/libcudnn9-cuda-12")
    header = f"#define CUDNN_MAJOR {huge}\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n"
    info = AssetInfo(AssetKind.IMAGE, "x", "oci:x", env=(("NV_CUDNN_VERSION", huge),))
    ctx = build_context({"/usr/include/cudnn_version.h": header.encode()}, info)
    assert ctx.cudnn_headers == ()
    ident = identify("/usr/lib/libcudnn_graph.so.9", None, owner, ctx)
    assert (ident.family, ident.version) == ("cudnn", None)


def test_a_v_prefixed_config_version_reads_as_the_service_reads_it() -> None:
    # One version-prefix rule (scanner.versions): detect and the service's normalisation agree.
    info = AssetInfo(AssetKind.IMAGE, "x", "oci:x", env=(("NV_CUDNN_VERSION", "v9.5.1.17-1"),))
    ident = identify("/usr/lib/libcudnn_graph.so.9", None, None, build_context({}, info))
    assert ident.version == normalize_version("v9.5.1.17-1") == "9.5.1.17"


def test_image_config_is_low_confidence_fallback(libs: dict[str, Path]) -> None:
    info = AssetInfo(
        AssetKind.IMAGE,
        "nvidia/cuda:12.6.3-cudnn-runtime",
        "oci:x",
        env=(
            ("CUDA_VERSION", "12.6.3"),
            ("NV_CUDNN_VERSION", "9.5.1.17-1"),
            ("NV_CUDA_CUDART_VERSION", "12.6.77-1"),
            ("NCCL_VERSION", "2.23.4-1"),
        ),
        labels=(("com.nvidia.cudnn.version", "9.5.1.17-1"),),
    )
    ctx = build_context({}, info)
    path = "/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9"
    bare = identify(path, None, None, ctx)
    assert (bare.version, bare.cuda_major) == ("9.5.1.17", 12)
    assert {e.confidence for e in bare.evidence if e.field == "version"} == {Confidence.LOW}
    # the file's own facts (9.1.0 with build 70) beat the config
    real = identify(path, facts(libs["cudnn9/cudnn_graph"]), None, ctx)
    assert real.version == "9.1.0.70"
    cudart = identify("/usr/local/cuda-12.6/lib64/libcudart.so.12", None, None, ctx)
    assert cudart.version == "12.6.77"  # not CUDA_VERSION: that is the toolkit's release
    nccl = identify("/usr/lib/x86_64-linux-gnu/libnccl.so.2", None, None, ctx)
    assert nccl.version == "2.23.4"
    # a wheel in site-packages is not what the image config describes
    wheel = identify(
        "/usr/lib/python3/dist-packages/nvidia/cudnn/lib/libcudnn.so.9", None, None, ctx
    )
    assert wheel.version is None


# -- CUDA libraries --


def test_debian_cudart(libs: dict[str, Path]) -> None:
    path = libs["cudart11"]
    owner = pkg("deb", "libcudart11.0", "11.8.89~11.8.0-5~deb12u1")
    ident = identify(f"/usr/lib/x86_64-linux-gnu/{path.name}", facts(path), owner, EMPTY)
    assert (ident.family, ident.version, ident.cuda_major) == ("cudart", "11.8.89", 11)
    assert ident.soname == "libcudart.so.11.0"


def test_soname_suffix_is_not_a_version(libs: dict[str, Path], tmp_path: Path) -> None:
    # nvidia-cuda-runtime-cu11 ships the real file as libcudart.so.11.0: not version 11.0
    named = tmp_path / "libcudart.so.11.0"
    named.write_bytes(libs["cudart11"].read_bytes())
    ident = identify(str(named), facts(named), None, EMPTY)
    assert (ident.version, ident.cuda_major) == (None, 11)
    owner = pkg("pypi", "nvidia-cuda-runtime-cu11", "11.8.89")
    assert identify(str(named), facts(named), owner, EMPTY).version == "11.8.89"


def test_pip_cudart(libs: dict[str, Path], tmp_path: Path) -> None:
    named = tmp_path / "libcudart.so.12"
    named.write_bytes(libs["cudart12"].read_bytes())
    owner = pkg("pypi", "nvidia-cuda-runtime-cu12", "12.4.127")
    ident = identify(f"/sp/nvidia/cuda_runtime/lib/{named.name}", facts(named), owner, EMPTY)
    assert (ident.family, ident.version, ident.cuda_major) == ("cudart", "12.4.127", 12)


def test_cu13_wheel_layout() -> None:
    ident = identify("/sp/nvidia/cu13/lib/libcudnn_graph.so.9", None, None, EMPTY)
    assert ident.cuda_major == 13


@pytest.mark.parametrize(
    ("name", "cuda_major"),
    [
        ("libcufft.so.11.2.1.3", 12),  # cufft 11.x ships only with CUDA 12
        ("libcufft.so.10.9.0.58", None),  # cufft 10.x: CUDA 10 or 11
        ("libcurand.so.10.3.5.147", None),  # curand 10.x spans CUDA 10-13
        ("libcusparse.so.11.7.5.86", 11),
        ("libcusolver.so.11.6.1.9", None),
        ("libcublas.so.12.4.5.8", 12),
        ("libnvJitLink.so.12.4.127", 12),
        ("libnvrtc.so.11.8.89", 11),
        ("libnccl.so.2.21.5", None),
        ("libnvidia-ml.so.535.309.01", None),
    ],
)
def test_cuda_major_only_where_certain(name: str, cuda_major: int | None) -> None:
    assert identify(f"/opt/x/lib/{name}", None, None, EMPTY).cuda_major == cuda_major


def test_nccl_owner_version_names_cuda(libs: dict[str, Path]) -> None:
    path = libs["nccl"]
    owner = pkg("deb", "libnccl2", "2.21.5-1+cuda12.4")
    ident = identify(f"/usr/lib/x86_64-linux-gnu/{path.name}", facts(path), owner, EMPTY)
    assert (ident.family, ident.version, ident.cuda_major) == ("nccl", "2.21.5", 12)


def test_nvml_and_driver(libs: dict[str, Path], tmp_path: Path) -> None:
    for key, family in (("nvml", "nvidia-ml"), ("libcuda", "libcuda")):
        named = tmp_path / f"{'libnvidia-ml' if key == 'nvml' else 'libcuda'}.so.1"
        named.write_bytes(libs[key].read_bytes())
        ident = identify(f"/usr/lib/x86_64-linux-gnu/{named.name}", facts(named), None, EMPTY)
        assert (ident.family, ident.version, ident.cuda_major) == (family, "535.309.01", None)
        assert "string 535.309.01" in sources(ident, "version")
    stub = pkg("deb", "cuda-driver-dev-12-6", "12.6.77-1")  # ships a link stub: not the driver
    ident = identify("/usr/local/cuda-12.6/lib64/stubs/libcuda.so", None, stub, EMPTY)
    assert ident.version is None


# -- mixed cuDNN --


def test_mixed_cudnn_found(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    base = build_cudnn_install(lib, (9, 1, 0), components=["cudnn_graph", "cudnn_cnn"])
    newer = build_cudnn_library(
        lib, "cudnn_ops", (9, 28, 1), filename="libcudnn_ops.so.9", soname="libcudnn_ops.so.9"
    )
    idents = [
        (f"/usr/lib/x86_64-linux-gnu/{p.name}", identify(p.name, facts(p), None, EMPTY))
        for p in (*base.values(), newer)
    ]
    findings = find_mixed_cudnn(idents)
    assert len(findings) == 1
    f = findings[0]
    assert f.kind == "mixed"
    assert "9.1.0" in f.message and "9.28.1" in f.message and "libcudnn_ops.so.9" in f.message
    assert f.paths == tuple(sorted(p for p, _ in idents))


def test_consistent_and_side_by_side_installs_are_not_mixed(libs: dict[str, Path]) -> None:
    ctx = DetectContext()
    entries = []
    for key in ("cudnn9/cudnn_graph", "cudnn9/cudnn_ops", "cudnn8/cudnn_ops_infer"):
        path = libs[key]
        # 9.1.0.70 (marker) and 9.1.0 (ints) agree; cuDNN 8 beside 9 is a separate install
        entries.append(
            (f"/usr/lib/x86_64-linux-gnu/{path.name}", identify(path.name, facts(path), None, ctx))
        )
    entries.append(
        (
            "/usr/lib/x86_64-linux-gnu/libcudart.so.12",
            identify("libcudart.so.12.4.127", None, None, ctx),
        )
    )
    assert find_mixed_cudnn(entries) == []
    # the same versions in different directories are not compared either
    other = identify("libcudnn_adv.so.9.28.1", None, None, ctx)
    assert find_mixed_cudnn([*entries, ("/opt/other/libcudnn_adv.so.9.28.1", other)]) == []


def test_cuda_major_comes_from_the_strongest_claim(libs: dict[str, Path]) -> None:
    """The binary (built against CUDA 12) outweighs an owner package named for CUDA 11 (same
    confidence, lower rank) and an image config saying CUDA 11 (lower confidence)."""
    path = libs["cudnn9/cudnn_graph"]
    lib = "/usr/lib64/libcudnn_graph.so.9"
    owner = pkg("rpm", "libcudnn9-cuda-11", "9.1.0.70-1")
    info = AssetInfo(AssetKind.IMAGE, "cuda:11", "oci:x", env=(("CUDA_VERSION", "11.8.0"),))
    config = build_context({}, info)
    for ctx, who in ((EMPTY, owner), (config, None), (config, owner)):
        ident = identify(lib, facts(path), who, ctx)
        assert {"11", "12"} <= {e.value for e in ident.evidence if e.field == "cuda-major"}
        assert ident.cuda_major == 12
    # Alone, the weaker claims decide.
    assert identify(lib, None, owner, EMPTY).cuda_major == 11
    assert identify(lib, None, None, config).cuda_major == 11


def test_cuda_major_confidence_outweighs_rank(tmp_path: Path) -> None:
    """References to CUDA 12 and 13 libraries are weak claims (one of several) even though
    binary evidence ranks first; the owner package's CUDA 13 is the stronger claim."""
    lib = build_cudnn_library(
        tmp_path, refs=("libcublasLt.so.12", "libnvrtc.so.13"), cudart=None, build=70
    )
    owner = pkg("rpm", "libcudnn9-cuda-13", "9.1.0.70-1")
    ident = identify("/usr/lib64/libcudnn_graph.so.9", facts(lib), owner, EMPTY)
    weak = {e.value for e in ident.evidence if e.confidence is Confidence.LOW}
    assert {"12", "13"} <= weak and ident.cuda_major == 13
