"""Hosts use every version source their tree offers (issue 7, section 2): the same libcudart
bytes had version ``?`` on a host and ``13.0.96`` in an image, whose config says it.

The trees mirror what real installs hold (looked at on a machine with CUDA 13.0 installed
from NVIDIA's wheels: ``/usr/local/cuda-13.0/lib/libcudart.so.13`` beside
``/usr/local/cuda-13.0/dist-info/nvidia_cuda_runtime-13.0.96.dist-info`` whose RECORD names the
file as ``nvidia/cu13/lib/libcudart.so.13``; runfile installs have ``version.json``), but are
built here with a compiled library.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuprov.cli import app
from scanner.model import GpuLibrary, ScanResult
from scanner.pipeline import ScanOptions, run_scan
from scanner.verify.inputs import TrustInputs
from tests.fixtures import elf
from tests.fixtures import images as im
from tests.fixtures.keys import generate, write_keypair
from tests.scanner import scenarios as sc

OPTIONS = ScanOptions(use_cache=False, workers=1)


@pytest.fixture(scope="module")
def cudart13(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("cudart13")
    return elf.build_cuda_library(out, "cudart", "13.0.96", filename="libcudart.so.13").read_bytes()


def library(result: ScanResult, path: str) -> GpuLibrary:
    (lib,) = [lib for lib in result.libraries if lib.ref.path == path]
    return lib


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def wheel_toolkit(root: Path, data: bytes) -> str:
    """A CUDA toolkit tree laid out from NVIDIA's wheels, with their dist-info kept aside."""
    toolkit = root / "usr/local/cuda-13.0"
    (toolkit / "lib").mkdir(parents=True)
    (toolkit / "lib/libcudart.so.13").write_bytes(data)
    (toolkit / "lib/libcudart.so").symlink_to("libcudart.so.13")
    info = toolkit / "dist-info/nvidia_cuda_runtime-13.0.96.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.4\nName: nvidia-cuda-runtime\nVersion: 13.0.96\n"
    )
    (info / "RECORD").write_text(
        f"nvidia/cu13/lib/libcudart.so.13,{_record_hash(data)},{len(data)}\n"
        "nvidia_cuda_runtime-13.0.96.dist-info/RECORD,,\n"
    )
    return "/usr/local/cuda-13.0/lib/libcudart.so.13"


def test_host_and_image_agree_on_a_wheel_toolkit(tmp_path: Path, cudart13: bytes) -> None:
    root = tmp_path / "root"
    path = wheel_toolkit(root, cudart13)
    host = library(run_scan(str(root), OPTIONS), path)
    assert host.ident.version == "13.0.96"
    assert host.ident.cuda_major == 13
    (ev,) = [e for e in host.ident.evidence if e.field == "version"]
    assert ev.method == "hash-comparison"
    assert "nvidia/cu13/lib/libcudart.so.13" in ev.source and "nvidia-cuda-runtime" in ev.source
    # the RECORD is evidence of the version, not an owner: integrity stays honest
    assert host.owner is None and host.integrity.value == "unowned"

    # The same tree in an image, and the image config of NVIDIA's CUDA images, agree.
    image = im.Image([im.Layer(sc.members_of(root))], env=("NV_CUDA_CUDART_VERSION=13.0.96",))
    target = im.write_image(tmp_path / "image", image, "oci")
    in_image = library(run_scan(target, OPTIONS), path)
    assert in_image.ident.version == host.ident.version == "13.0.96"


def test_a_record_of_other_bytes_is_no_evidence(tmp_path: Path, cudart13: bytes) -> None:
    root = tmp_path / "root"
    path = wheel_toolkit(root, cudart13)
    (root / path.lstrip("/")).write_bytes(sc.flip_byte(cudart13))
    lib = library(run_scan(str(root), OPTIONS), path)
    assert lib.ident.version is None  # the RECORD lists other bytes: nothing is claimed


def test_host_toolkit_version_json(tmp_path: Path, cudart13: bytes) -> None:
    """A runfile install: ``version.json`` at the toolkit root names each component."""
    root = tmp_path / "root"
    lib_dir = root / "usr/local/cuda-13.0/targets/x86_64-linux/lib"
    lib_dir.mkdir(parents=True)
    (lib_dir / "libcudart.so.13").write_bytes(cudart13)
    (root / "usr/local/cuda-13.0/version.json").write_text(
        json.dumps({"cuda": {"version": "13.0.2"}, "cuda_cudart": {"version": "13.0.96"}})
    )
    lib = library(
        run_scan(str(root), OPTIONS),
        "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13",
    )
    assert lib.ident.version == "13.0.96"
    assert any("version.json cuda_cudart" in e.source for e in lib.ident.evidence)


def test_signed_catalog_given_to_the_scan_names_the_version(
    tmp_path: Path, cudart13: bytes
) -> None:
    """A signed catalog that lists these bytes gives their version on a bare host tree."""
    runner = CliRunner()
    golden = tmp_path / "golden"
    wheel_toolkit(golden, cudart13)
    report = tmp_path / "golden.cdx.json"
    res = runner.invoke(
        app, ["scan", str(golden), "--no-cache", "-f", "cyclonedx", "-o", str(report)]
    )
    assert res.exit_code == 0, res.output
    unsigned = tmp_path / "catalog.json"
    assert (
        runner.invoke(app, ["catalog", "from-scan", str(report), "-o", str(unsigned)]).exit_code
        == 0
    )
    priv, pub = write_keypair(tmp_path, "vendor", generate("ecdsa"))
    signed = tmp_path / "catalog.dsse.json"
    res = runner.invoke(
        app, ["catalog", "sign", str(unsigned), "--key", str(priv), "-o", str(signed)]
    )
    assert res.exit_code == 0, res.output

    bare = tmp_path / "bare"
    (bare / "opt/app/lib").mkdir(parents=True)
    (bare / "opt/app/lib/libcudart.so.13").write_bytes(cudart13)
    path = "/opt/app/lib/libcudart.so.13"
    assert library(run_scan(str(bare), OPTIONS), path).ident.version is None
    trusted = ScanOptions(
        use_cache=False, workers=1, trust=TrustInputs(trust_key=pub, catalogs=(signed,))
    )
    lib = library(run_scan(str(bare), trusted), path)
    assert lib.ident.version == "13.0.96"
    assert lib.provenance == "verified"
    assert any(e.source.startswith("catalog ") for e in lib.ident.evidence)


@pytest.mark.parametrize("layout", ["wheels", "runfile"])
def test_include_still_reads_the_trees_version_sources(
    tmp_path: Path, cudart13: bytes, layout: str
) -> None:
    """``--include`` of a library directory must not lose what the tree above it says."""
    root = tmp_path / "root"
    if layout == "wheels":
        path = wheel_toolkit(root, cudart13)
    else:
        path = "/usr/local/cuda-13.0/lib64/libcudart.so.13"
        (root / "usr/local/cuda-13.0/lib64").mkdir(parents=True)
        (root / path.lstrip("/")).write_bytes(cudart13)
        (root / "usr/local/cuda-13.0/version.json").write_text(
            json.dumps({"cuda": {"version": "13.0.2"}, "cuda_cudart": {"version": "13.0.96"}})
        )
    include = (path.rsplit("/", 1)[0],)
    full = library(run_scan(str(root), OPTIONS), path)
    limited = library(
        run_scan(str(root), ScanOptions(use_cache=False, workers=1, include=include)), path
    )
    assert full.ident.version == limited.ident.version == "13.0.96"
    assert full.ident.evidence == limited.ident.evidence
