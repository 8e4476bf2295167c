"""The products NVIDIA's bulletins name, found on hosts and images: CUDA Toolkit releases and
their tool binaries (issue 19 §2).

The tool binaries are compiled executables carrying the real ``--version`` texts: "Cuda
compilation tools, release 12.4, V12.4.131" is the line NVIDIA's compiler tools print and keep
as one C string (read from the real nvcc and ptxas of CUDA 13.0.88: "Cuda compilation tools,
release 13.0, V13.0.88"); version.json is the layout of a toolkit install's file; package names
and versions are NVIDIA's (cuda-toolkit-12-4 12.4.1-1, cuda-cuobjdump-12-4 12.4.127-1) and
Debian's (nvidia-cuda-toolkit 11.8.89~11.8.0-5~deb12u1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanner.bom.cyclonedx import to_json, validate_json
from scanner.model import Product, ScanResult
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures import elf
from tests.fixtures import images as im
from tests.fixtures import packages as pk
from tests.scanner import scenarios as sc

TK = "/usr/local/cuda-12.4"
BANNER = "Cuda compilation tools, release 12.4, V12.4.131"
VERSION_JSON = {
    "cuda": {"name": "CUDA SDK", "version": "12.4.1"},
    "cuda_nvcc": {"name": "CUDA NVCC", "version": "12.4.131"},
    "cuda_cuobjdump": {"name": "CUDA cuobjdump", "version": "12.4.127"},
    "cuda_sanitizer_api": {"name": "CUDA Compute Sanitizer API", "version": "12.4.127"},
}


def _by_key(result: ScanResult) -> dict[str, Product]:
    return {p.key: p for p in result.products}


def _toolkit_root(root: Path) -> Path:
    pk.write_os_release(root, "ubuntu", "22.04")
    tk = root / TK[1:]
    (tk / "bin").mkdir(parents=True)
    (tk / "version.json").write_text(json.dumps(VERSION_JSON))
    elf.build_tool(tk / "bin", "nvcc", ["nvcc: NVIDIA (R) Cuda compiler driver", BANNER])
    elf.build_tool(tk / "bin", "cuobjdump", ["Cuda compilation tools, release 12.4, V12.4.127"])
    # no version text (a script or a stripped build): version.json names its version
    elf.build_tool(tk / "bin", "compute-sanitizer", ["Compute Sanitizer"])
    (root / "usr/local/cuda").symlink_to("cuda-12.4")
    return root


@pytest.fixture
def toolkit_root(tmp_path: Path) -> Path:
    return _toolkit_root(tmp_path / "root")


def _check_toolkit(result: ScanResult, layer: bool = False) -> None:
    got = _by_key(result)
    assert set(got) == {"cuda-toolkit", "nvcc", "cuobjdump", "compute-sanitizer"}
    tk = got["cuda-toolkit"]
    assert tk.version == "12.4.1"
    assert tk.paths == (TK,)
    assert tk.cpes == (
        "cpe:2.3:a:nvidia:cuda_toolkit:12.4.1:*:*:*:*:*:*:*",
        "cpe:2.3:a:nvidia:nvidia_cuda_toolkit:cuda_toolkit_12_4_update_1:*:*:*:*:*:*:*",
        "cpe:2.3:a:nvidia:cuda_toolkit:cuda_toolkit_12_4_update_1:*:*:*:*:*:*:*",
    )
    assert tk.purl == "pkg:generic/nvidia/cuda-toolkit@12.4.1"
    nvcc = got["nvcc"]
    assert (nvcc.version, nvcc.toolkit) == ("12.4.131", "12.4.1")
    assert nvcc.paths == (f"{TK}/bin/nvcc",)
    assert nvcc.evidence[0].source == BANNER
    # a tool's CPE is its toolkit release's: bulletins name the toolkit, not cuobjdump
    assert nvcc.cpes == tk.cpes
    assert nvcc.sha256 is not None and len(nvcc.sha256) == 64
    assert got["cuobjdump"].version == "12.4.127"
    sanitizer = got["compute-sanitizer"]
    assert sanitizer.version == "12.4.127"
    assert sanitizer.evidence[0].source == f"{TK}/version.json"
    if layer:
        assert nvcc.layer is not None
    # a tool binary is a product, never a library nor a not-elf finding
    assert not result.libraries
    assert not [f for f in result.findings if "nvcc" in f.message]


def test_toolkit_on_a_host(toolkit_root: Path) -> None:
    _check_toolkit(run_scan(str(toolkit_root), ScanOptions(use_cache=False)))


@pytest.mark.parametrize("fmt", im.FORMATS)
def test_toolkit_in_an_image(toolkit_root: Path, tmp_path: Path, fmt: str) -> None:
    image = im.Image([im.Layer(sc.members_of(toolkit_root), compression="gzip")])
    target = im.write_image(tmp_path / "img", image, fmt)
    _check_toolkit(run_scan(target, ScanOptions(use_cache=False)), layer=True)


def test_cached_layer_keeps_the_tools(toolkit_root: Path, tmp_path: Path) -> None:
    image = im.Image([im.Layer(sc.members_of(toolkit_root), compression="gzip")])
    target = im.write_image(tmp_path / "img", image, "oci")
    options = ScanOptions(cache_dir=tmp_path / "cache")
    first = run_scan(target, options)
    again = run_scan(target, options)
    assert again.products == first.products
    _check_toolkit(again, layer=True)


def test_toolkit_packages(tmp_path: Path) -> None:
    """NVIDIA's deb packages: the meta package gives the release, a tool's own package its
    version when the binary carries none (cuobjdump built without its banner)."""
    root = tmp_path / "root"
    pk.write_os_release(root, "ubuntu", "22.04")
    tool = elf.build_tool(tmp_path / "b", "cuobjdump", ["no version here"])
    pk.dpkg_install(
        root,
        [
            pk.DebSpec("cuda-toolkit-12-4", "12.4.1-1"),
            pk.DebSpec(
                "cuda-cuobjdump-12-4",
                "12.4.127-1",
                files={f"{TK}/bin/cuobjdump": tool.read_bytes()},
            ),
        ],
        tmp_path / "debs",
    )
    result = run_scan(str(root), ScanOptions(use_cache=False))
    got = _by_key(result)
    assert got["cuda-toolkit"].version == "12.4.1"
    assert (
        got["cuda-toolkit"].owner
        == "pkg:deb/ubuntu/cuda-toolkit-12-4@12.4.1-1?arch=amd64&distro=ubuntu-22.04"
    )
    cuobjdump = got["cuobjdump"]
    assert cuobjdump.version == "12.4.127"
    assert cuobjdump.owner is not None and "cuda-cuobjdump-12-4" in cuobjdump.owner
    # the owner packages are in the report, so the BOM can say who carries the product
    assert {p.name for p in result.packages} >= {"cuda-toolkit-12-4", "cuda-cuobjdump-12-4"}


def test_debian_toolkit_package(tmp_path: Path) -> None:
    root = tmp_path / "root"
    pk.write_os_release(root, "debian", "12")
    nvcc = elf.build_tool(
        tmp_path / "b", "nvcc", ["Cuda compilation tools, release 11.8, V11.8.89"]
    )
    pk.dpkg_install(
        root,
        [
            pk.DebSpec(
                "nvidia-cuda-toolkit",
                "11.8.89~11.8.0-5~deb12u1",
                files={"/usr/lib/nvidia-cuda-toolkit/bin/nvcc": nvcc.read_bytes()},
            )
        ],
        tmp_path / "debs",
    )
    got = _by_key(run_scan(str(root), ScanOptions(use_cache=False)))
    assert got["cuda-toolkit"].version == "11.8.0"
    assert got["cuda-toolkit"].cpes[0] == "cpe:2.3:a:nvidia:cuda_toolkit:11.8.0:*:*:*:*:*:*:*"
    assert "cuda_toolkit_11_8:" in got["cuda-toolkit"].cpes[1]
    # the banner's line is the package's release: the tool belongs to it
    assert (got["nvcc"].version, got["nvcc"].toolkit) == ("11.8.89", "11.8.0")


def test_debian_parts_of_the_toolkit_belong_to_its_release(tmp_path: Path) -> None:
    """Debian's binary packages of the nvidia-cuda-toolkit source say the toolkit release
    twice: "Source: nvidia-cuda-toolkit (11.8.0-5~deb12u1)" and the version's
    "11.9.0.86~11.8.0-5~deb12u1" (libnvjpeg11 of bookworm non-free). nvJPEG without the
    toolkit package, and a release the redistributable table lacks (12.4.0 here), still get
    their release: else the matcher sends every nvJPEG CVE to review."""
    root = tmp_path / "root"
    pk.write_os_release(root, "debian", "12")
    lib = tmp_path / "b"
    nvjpeg11 = elf.build_cuda_library(lib, "nvjpeg", "11.9.0.86")
    nvjpeg12 = elf.build_cuda_library(lib, "nvjpeg", "12.3.0.81")
    multiarch = "/usr/lib/x86_64-linux-gnu"
    pk.dpkg_install(
        root,
        [
            pk.DebSpec(
                "libnvjpeg11",
                "11.9.0.86~11.8.0-5~deb12u1",
                files={f"{multiarch}/{nvjpeg11.name}": nvjpeg11.read_bytes()},
                source="nvidia-cuda-toolkit (11.8.0-5~deb12u1)",
            ),
            # no Source field (a stripped status.d): the version's own form says it
            pk.DebSpec(
                "libnvjpeg12",
                "12.3.0.81~12.4.0-1",
                files={f"/opt/b/{nvjpeg12.name}": nvjpeg12.read_bytes()},
            ),
        ],
        tmp_path / "debs",
    )
    result = run_scan(str(root), ScanOptions(use_cache=False))
    got = {p.version: p for p in result.products if p.key == "nvjpeg"}
    assert got["11.9.0.86"].toolkit == "11.8.0"
    assert got["11.9.0.86"].owner is not None and "libnvjpeg11@" in got["11.9.0.86"].owner
    # only a package of the nvidia-cuda-toolkit source: the bare "X~R-N" form names nothing
    assert got["12.3.0.81"].toolkit is None
    # the parts are no toolkit install: no CUDA Toolkit release of their own
    assert "cuda-toolkit" not in {p.key for p in result.products}


_NVJPEG_SOURCE = "/dvs/p4/build/sw/rel/gpgpu/toolkit/r{}/nvJPEG/branches/main/source/JpegParser.cpp"


def test_nvjpeg_build_paths_give_the_release_line(tmp_path: Path) -> None:
    """A libnvjpeg.so.11 copied by its SONAME, owned by nothing: the version is unknown, but
    its build paths name the toolkit tree ("toolkit/r11.8/nvJPEG/...", as in the real
    libnvjpeg.so.11.9.0.86 of CUDA 11.8). Two trees named say nothing; a known release wins."""
    root = tmp_path / "root"
    elf.build_cuda_library(
        root / "opt/a",
        "nvjpeg",
        "11.9.0.86",
        filename="libnvjpeg.so.11",
        strings=[_NVJPEG_SOURCE.format("11.8"), _NVJPEG_SOURCE.format("11.8") + ".h"],
    )
    elf.build_cuda_library(
        root / "opt/b",
        "nvjpeg",
        "12.0.0.1",
        filename="libnvjpeg.so.12",
        strings=[_NVJPEG_SOURCE.format("12.0"), _NVJPEG_SOURCE.format("12.1")],
    )
    result = run_scan(str(root), ScanOptions(use_cache=False))
    got = {p.paths[0]: p for p in result.products if p.key == "nvjpeg"}
    a, b = got["/opt/a/libnvjpeg.so.11"], got["/opt/b/libnvjpeg.so.12"]
    assert (a.version, a.toolkit, a.line) == (None, None, "11.8")
    assert any("toolkit r11.8" in e.source for e in a.evidence)
    assert (b.version, b.line) == (None, None)
    doc = json.loads(to_json(result))
    props = [
        (p["name"], p["value"])
        for c in doc["components"]
        if c["bom-ref"].startswith("product:nvjpeg")
        for p in c.get("properties", [])
    ]
    assert ("gpuprov:product:release-line", "11.8") in props
    # under a toolkit install its release is known: the line is not kept
    tk = _toolkit_root(tmp_path / "tk")
    elf.build_cuda_library(
        tk / TK[1:] / "lib64",
        "nvjpeg",
        "12.3.1.117",
        strings=[_NVJPEG_SOURCE.format("12.4")],
    )
    nvjpeg = _by_key(run_scan(str(tk), ScanOptions(use_cache=False)))["nvjpeg"]
    assert (nvjpeg.toolkit, nvjpeg.line) == ("12.4.1", None)


def test_debian_version_form_without_source_field(tmp_path: Path) -> None:
    """A package named nvidia-cuda-toolkit states its release by its version alone."""
    root = tmp_path / "root"
    pk.write_os_release(root, "debian", "12")
    sanitizer = elf.build_tool(tmp_path / "b", "compute-sanitizer", ["Compute Sanitizer"])
    pk.dpkg_install(
        root,
        [
            pk.DebSpec(
                "nvidia-cuda-toolkit",
                "11.8.89~11.8.0-5~deb12u1",
                files={"/usr/bin/compute-sanitizer": sanitizer.read_bytes()},
            )
        ],
        tmp_path / "debs",
    )
    got = _by_key(run_scan(str(root), ScanOptions(use_cache=False)))
    # no version text and no version of its own in the package: the release is known
    tool = got["compute-sanitizer"]
    assert (tool.version, tool.toolkit) == (None, "11.8.0")
    assert "cuda_toolkit_11_8:" in tool.cpes[1]


def test_launcher_script_joins_its_binary(tmp_path: Path) -> None:
    """Debian's /usr/bin/nvcc is a 59-byte script, "exec /usr/lib/nvidia-cuda-toolkit/bin/nvcc
    "$@"": the nvcc its package ships, not a second nvcc of unknown version."""
    root = tmp_path / "root"
    pk.write_os_release(root, "debian", "12")
    nvcc = elf.build_tool(
        tmp_path / "b", "nvcc", ["Cuda compilation tools, release 11.8, V11.8.89"]
    )
    script = b'#!/bin/sh\n\nexec /usr/lib/nvidia-cuda-toolkit/bin/nvcc "$@"\n'
    pk.dpkg_install(
        root,
        [
            pk.DebSpec(
                "nvidia-cuda-toolkit",
                "11.8.89~11.8.0-5~deb12u1",
                files={
                    "/usr/bin/nvcc": script,
                    "/usr/lib/nvidia-cuda-toolkit/bin/nvcc": nvcc.read_bytes(),
                },
                source="nvidia-cuda-toolkit (11.8.0-5~deb12u1)",
            )
        ],
        tmp_path / "debs",
    )
    (root / "opt/other/bin").mkdir(parents=True)
    (root / "opt/other/bin/cuobjdump").write_bytes(b"#!/bin/sh\nexec /nowhere/cuobjdump\n")
    result = run_scan(str(root), ScanOptions(use_cache=False))
    (tool,) = [p for p in result.products if p.key == "nvcc"]
    assert (tool.version, tool.toolkit) == ("11.8.89", "11.8.0")
    assert tool.paths == ("/usr/lib/nvidia-cuda-toolkit/bin/nvcc", "/usr/bin/nvcc")
    # a launcher that no binary of its package explains stays a product of unknown version
    (lone,) = [p for p in result.products if p.key == "cuobjdump"]
    assert (lone.version, lone.paths) == (None, ("/opt/other/bin/cuobjdump",))


def test_banner_alone_gives_the_release_line(tmp_path: Path) -> None:
    """An nvcc without version.json or package: the release line, no update, so no CPE (a
    guessed "12.4" would read as 12.4 GA and match the wrong bulletins)."""
    root = tmp_path / "root"
    elf.build_tool(root / "opt/cuda/bin", "nvcc", [BANNER])
    got = _by_key(run_scan(str(root), ScanOptions(use_cache=False)))
    tk = got["cuda-toolkit"]
    assert (tk.version, tk.line, tk.cpes, tk.paths) == (None, "12.4", (), ("/opt/cuda",))
    assert got["nvcc"].version == "12.4.131"
    assert got["nvcc"].toolkit is None and got["nvcc"].cpes == ()


def test_nothing_named_nothing_reported(tmp_path: Path) -> None:
    """A runtime-only root (cudart, cuDNN) holds no product a bulletin names."""
    root = tmp_path / "root"
    elf.build_cuda_library(root / "usr/lib/x86_64-linux-gnu", "cudart", "12.4.127")
    result = run_scan(str(root), ScanOptions(use_cache=False))
    assert result.libraries and result.products == ()


def test_products_in_the_bom(toolkit_root: Path) -> None:
    result = run_scan(str(toolkit_root), ScanOptions(use_cache=False))
    doc = to_json(result)
    assert validate_json(doc) is None
    comps = {c["bom-ref"]: c for c in json.loads(doc)["components"]}
    tk = comps["product:cuda-toolkit:12.4.1"]
    assert tk["type"] == "application"
    assert tk["cpe"] == "cpe:2.3:a:nvidia:cuda_toolkit:12.4.1:*:*:*:*:*:*:*"
    assert tk["purl"] == "pkg:generic/nvidia/cuda-toolkit@12.4.1"
    props = [(p["name"], p["value"]) for p in tk["properties"]]
    assert (
        "gpuprov:product:cpe",
        "cpe:2.3:a:nvidia:nvidia_cuda_toolkit:cuda_toolkit_12_4_update_1:*:*:*:*:*:*:*",
    ) in props
    nvcc = comps["product:nvcc:12.4.131"]
    assert nvcc["hashes"][0]["alg"] == "SHA-256"
    assert ("gpuprov:product:toolkit", "12.4.1") in [
        (p["name"], p["value"]) for p in nvcc["properties"]
    ]
    deps = {d["ref"]: d.get("dependsOn", []) for d in json.loads(doc)["dependencies"]}
    assert "product:nvcc:12.4.131" in deps["asset"]


def test_product_libraries_and_packages(tmp_path: Path) -> None:
    """nvJPEG, nvJPEG2000, nvTIFF, DCGM and TensorRT libraries by the classifier table (the
    file names and versions of CUDA 12.4.1's libnvjpeg 12.3.1.117, nvJPEG2000 0.7.5.32, nvTIFF
    0.3.0.75, DCGM 3.3.5, TensorRT 10.0.1.6), the TensorRT-LLM wheel by its package."""
    root = tmp_path / "root"
    lib = root / "usr/lib/x86_64-linux-gnu"
    elf.build_cuda_library(lib, "nvjpeg", "12.3.1.117")
    elf.build_cuda_library(lib, "nvjpeg2k", "0.7.5.32")
    elf.build_cuda_library(lib, "nvtiff", "0.3.0.75")
    elf.build_cuda_library(lib, "dcgm", "3.3.5")
    elf.build_cuda_library(lib, "nvinfer", "10.0.1")
    pk.write_dist_info(
        root / "usr/local/lib/python3.10/dist-packages",
        "tensorrt_llm",
        "0.12.0",
        {"tensorrt_llm/__init__.py": b""},
    )
    result = run_scan(str(root), ScanOptions(use_cache=False))
    got = {p.key: p for p in result.products}
    assert {k: p.version for k, p in got.items()} == {
        "nvjpeg": "12.3.1.117",
        "nvjpeg2000": "0.7.5.32",
        "nvtiff": "0.3.0.75",
        "dcgm": "3.3.5",
        "tensorrt": "10.0.1",
        "tensorrt-llm": "0.12.0",
    }
    # NVIDIA's spellings as its bulletins write them (2025/5661, 2024/5517, 2023/5453, 5648)
    assert "cpe:2.3:a:nvidia:nvjpeg:12_3_1_117:*:*:*:*:*:*:*" in got["nvjpeg"].cpes
    assert "cpe:2.3:a:nvidia:nvjpeg2000_library:0_7_5_32:*:*:*:*:*:*:*" in got["nvjpeg2000"].cpes
    assert "cpe:2.3:a:nvidia:nvtiff_library:0_3_0_75:*:*:*:*:*:*:*" in got["nvtiff"].cpes
    assert "cpe:2.3:a:nvidia:dcgm:3_3_5:*:*:*:*:*:*:*" in got["dcgm"].cpes
    assert got["tensorrt-llm"].purl == "pkg:pypi/tensorrt-llm@0.12.0"
    assert "cpe:2.3:a:nvidia:nvidia_tensorrtllm:0_12_0:*:*:*:*:*:*:*" in got["tensorrt-llm"].cpes
    assert got["nvjpeg"].sha256 == next(
        x.digests.sha256 for x in result.libraries if x.ident.family == "nvjpeg"
    )
    # each is still a GPU library of its own family
    assert {x.ident.family for x in result.libraries} >= {"nvjpeg", "nvjpeg2k", "nvtiff", "dcgm"}
    assert validate_json(to_json(result)) is None


def test_nvjpeg_of_a_toolkit_belongs_to_its_release(toolkit_root: Path) -> None:
    elf.build_cuda_library(
        toolkit_root / TK[1:] / "targets/x86_64-linux/lib", "nvjpeg", "12.3.1.117"
    )
    got = _by_key(run_scan(str(toolkit_root), ScanOptions(use_cache=False)))
    assert (got["nvjpeg"].version, got["nvjpeg"].toolkit) == ("12.3.1.117", "12.4.1")


def test_container_toolkit(tmp_path: Path) -> None:
    """NVIDIA's packages (nvidia-container-toolkit-base owns nvidia-ctk, libnvidia-container-
    tools owns nvidia-container-cli, both 1.17.8-1) and nvidia-ctk's Go build information (the
    "mod<TAB>path<TAB>version" line `go version -m` prints)."""
    root = tmp_path / "root"
    pk.write_os_release(root, "ubuntu", "22.04")
    ctk = elf.build_tool(
        tmp_path / "b", "nvidia-ctk", ["mod\tgithub.com/NVIDIA/nvidia-container-toolkit\tv1.17.8\t"]
    )
    cli = elf.build_tool(tmp_path / "c", "nvidia-container-cli", ["no version text"])
    pk.dpkg_install(
        root,
        [
            pk.DebSpec(
                "nvidia-container-toolkit-base",
                "1.17.8-1",
                files={"/usr/bin/nvidia-ctk": ctk.read_bytes()},
            ),
            pk.DebSpec(
                "libnvidia-container-tools",
                "1.17.8-1",
                files={"/usr/bin/nvidia-container-cli": cli.read_bytes()},
            ),
            pk.DebSpec("nvidia-container-toolkit", "1.17.8-1"),
        ],
        tmp_path / "debs",
    )
    result = run_scan(str(root), ScanOptions(use_cache=False))
    (ct,) = result.products
    assert (ct.key, ct.version) == ("container-toolkit", "1.17.8")
    assert ct.purl == "pkg:golang/github.com/NVIDIA/nvidia-container-toolkit@1.17.8"
    assert ct.cpes == (
        "cpe:2.3:a:nvidia:container_toolkit:1.17.8:*:*:*:*:*:*:*",
        "cpe:2.3:a:nvidia:nvidia_container_toolkit:1_17_8:*:*:*:*:*:*:*",
    )
    assert set(ct.paths) == {"/usr/bin/nvidia-ctk", "/usr/bin/nvidia-container-cli"}
    sources = {e.source for e in ct.evidence}
    assert "mod\tgithub.com/NVIDIA/nvidia-container-toolkit\tv1.17.8" in sources
    assert any("libnvidia-container-tools 1.17.8-1" in s for s in sources)
    assert validate_json(to_json(result)) is None


def test_container_toolkit_versions_apart(tmp_path: Path) -> None:
    """A binary left over from another release than its package is told apart."""
    root = tmp_path / "root"
    elf.build_tool(
        root / "usr/local/bin",
        "nvidia-ctk",
        ["mod\tgithub.com/NVIDIA/nvidia-container-toolkit\tv1.16.1\t"],
    )
    pk.dpkg_install(root, [pk.DebSpec("nvidia-container-toolkit", "1.17.8-1")], tmp_path / "d")
    got = sorted(
        (p.key, p.version) for p in run_scan(str(root), ScanOptions(use_cache=False)).products
    )
    assert got == [("container-toolkit", "1.16.1"), ("container-toolkit", "1.17.8")]


def test_driver_with_its_branch(tmp_path: Path) -> None:
    root = tmp_path / "root"
    lib = root / "usr/lib/x86_64-linux-gnu"
    elf.build_driver_library(lib, "nvidia-ml", "535.129.03")
    elf.build_driver_library(lib, "cuda", "535.129.03")
    result = run_scan(str(root), ScanOptions(use_cache=False))
    (drv,) = result.products
    assert (drv.key, drv.version, drv.branch) == ("driver", "535.129.03", "R535")
    assert drv.cpes[0] == "cpe:2.3:a:nvidia:gpu_display_driver:535.129.03:*:*:*:*:*:*:*"
    assert "cpe:2.3:a:nvidia:tesla:535_129_03:*:*:*:*:*:*:*" in drv.cpes
    assert len(drv.paths) == 2
    comps = json.loads(to_json(result))["components"]
    (comp,) = [c for c in comps if c["bom-ref"] == "product:driver:535.129.03"]
    assert {"name": "gpuprov:driver:branch", "value": "R535"} in comp["properties"]


OPERATOR_LABELS = {
    # the labels of the GPU Operator's Dockerfile (nvcr.io/nvidia/gpu-operator)
    "name": "NVIDIA GPU Operator",
    "io.k8s.display-name": "NVIDIA GPU Operator",
    "vendor": "NVIDIA",
    "version": "v24.6.1",
    "summary": "Automate the management and monitoring of NVIDIA GPUs.",
}


def _operator_image(
    tmp_path: Path, labels: dict[str, str], module_version: str | None = None
) -> ScanResult:
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    if module_version is not None:
        elf.build_tool(
            root / "usr/bin",
            "gpu-operator",
            [f"mod\tgithub.com/NVIDIA/gpu-operator\tv{module_version}\th1:abc="],
        )
    image = im.Image([im.Layer(sc.members_of(root), compression="gzip")], labels=labels)
    target = im.write_image(tmp_path / "img", image, "oci")
    return run_scan(target, ScanOptions(use_cache=False))


def test_the_gpu_operator_image_by_its_labels_and_binary(tmp_path: Path) -> None:
    result = _operator_image(tmp_path, OPERATOR_LABELS, "24.6.1")
    (op,) = result.products
    assert (op.key, op.name, op.version) == ("gpu-operator", "NVIDIA GPU Operator", "24.6.1")
    assert op.purl == "pkg:golang/github.com/NVIDIA/gpu-operator@24.6.1"
    assert op.cpes == (
        "cpe:2.3:a:nvidia:gpu_operator:24.6.1:*:*:*:*:*:*:*",
        "cpe:2.3:a:nvidia:nvidia_gpu_operator:24_6_1:*:*:*:*:*:*:*",
    )
    assert op.paths == ("/usr/bin/gpu-operator",)
    sources = {e.source for e in op.evidence}
    assert "mod\tgithub.com/NVIDIA/gpu-operator\tv24.6.1" in sources
    assert any("name='NVIDIA GPU Operator'" in s and "version='v24.6.1'" in s for s in sources)
    bom = to_json(result)
    assert validate_json(bom) is None
    assert "pkg:golang/github.com/NVIDIA/gpu-operator@24.6.1" in bom


@pytest.mark.parametrize(
    ("labels", "module", "expected"),
    [
        # the labels alone (a binary of no build information)
        (OPERATOR_LABELS, None, [("24.6.1", ())]),
        # labels of another vendor's image of the same name say nothing
        ({**OPERATOR_LABELS, "vendor": "Example Corp"}, None, []),
        ({"version": "v24.6.1", "vendor": "NVIDIA"}, None, []),
        # an unreadable version label: present, version unknown (the matcher's review case)...
        ({**OPERATOR_LABELS, "version": "devel-ubi8"}, None, [(None, ())]),
        # a label as long as an image likes: no version, and quoted in part only (below)
        ({**OPERATOR_LABELS, "version": "v24.6.1" + "x" * 5000}, None, [(None, ())]),
        # ... unless the binary says the version
        (
            {**OPERATOR_LABELS, "version": "unknown"},
            "24.9.0",
            [("24.9.0", ("/usr/bin/gpu-operator",))],
        ),
        # a binary of another release than the labels: both told
        (
            OPERATOR_LABELS,
            "24.9.0",
            [("24.6.1", ()), ("24.9.0", ("/usr/bin/gpu-operator",))],
        ),
        # the binary alone, in an image without the labels
        ({}, "24.9.1", [("24.9.1", ("/usr/bin/gpu-operator",))]),
    ],
)
def test_the_gpu_operator_version_comes_from_what_says_it(
    tmp_path: Path,
    labels: dict[str, str],
    module: str | None,
    expected: list[tuple[str | None, tuple[str, ...]]],
) -> None:
    found = _operator_image(tmp_path, labels, module).products
    assert [(p.version, p.paths) for p in found if p.key == "gpu-operator"] == expected
    assert all(len(e.value) <= 80 and len(e.source) < 300 for p in found for e in p.evidence)
