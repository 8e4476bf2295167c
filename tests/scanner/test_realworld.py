"""Real NVIDIA bytes (realworld group): the `nvidia-cuda-runtime-cu12` wheel from the package
index, and the CUDA toolkit of this machine under /usr/local/cuda-X.Y when there is one.

The wheel is downloaded once into ~/.cache/gpuprov-tests/wheels (only when not cached) and
installed offline from that file with `pip install --no-deps --target` into a temporary root's
site-packages. The scan must report each library with the wheel's version and a SHA-256 equal
to its RECORD entry, verified; the same as an image in every format; `modified` after one byte
is flipped; an unowned copy elsewhere `unowned` with the version found by hash comparison.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scanner.model import Integrity, ScanResult
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures import images as im
from tests.fixtures import packages as pk
from tests.scanner import scenarios as sc

pytestmark = pytest.mark.realworld

CACHE = Path.home() / ".cache" / "gpuprov-tests" / "wheels"
PROJECT = "nvidia-cuda-runtime-cu12"
PATTERN = "nvidia_cuda_runtime_cu12-*-manylinux*x86_64*.whl"
SITE = "/usr/local/lib/python3.11/site-packages"


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def wheel() -> Path:
    if not sorted(CACHE.glob(PATTERN)):
        CACHE.mkdir(parents=True, exist_ok=True)
        done = _pip(
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux2014_x86_64",
            "--python-version",
            "3.11",
            PROJECT,
            "-d",
            str(CACHE),
        )
        if done.returncode != 0:
            # the realworld group may reach the package index: a failed download is a failure
            pytest.fail(f"cannot download {PROJECT}: {done.stderr.strip()[-300:]}")
    return sorted(CACHE.glob(PATTERN))[-1]


@pytest.fixture(scope="module")
def version(wheel: Path) -> str:
    """The wheel's version, from its file name (PEP 427: name-version-tags.whl)."""
    return wheel.name.split("-")[1]


@pytest.fixture(scope="module")
def root(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("realworld") / "root"
    pk.write_os_release(root, "debian", "12")
    done = _pip("install", "--no-deps", "--no-index", "--target", str(root / SITE[1:]), str(wheel))
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def record(root: Path) -> dict[str, str]:
    """RECORD's SHA-256 (hex) of each shared library the wheel installed, by path in the root."""
    (dist_info,) = (root / SITE[1:]).glob("nvidia_cuda_runtime_cu12-*.dist-info")
    out: dict[str, str] = {}
    for row in csv.reader(io.StringIO((dist_info / "RECORD").read_text())):
        if len(row) < 2 or not re.search(r"\.so(\.\d+)*$", row[0]):
            continue
        algorithm, _, b64 = row[1].partition("=")
        assert algorithm == "sha256", row
        digest = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
        out[f"{SITE}/{row[0]}"] = digest
    assert out, "the wheel's RECORD lists no shared library"
    return out


def check_wheel_libraries(
    result: ScanResult, record: dict[str, str], version: str, root: Path
) -> None:
    """Every RECORD library reported once: verified, right digest, owner, family, version."""
    libs = {lib.ref.path: lib for lib in result.libraries}
    assert sorted(libs) == sorted(record)
    purl = f"pkg:pypi/{PROJECT}@{version}"
    for path, digest in record.items():
        lib = libs[path]
        assert lib.digests is not None
        assert lib.digests.sha256 == digest, path
        assert hashlib.sha256((root / path[1:]).read_bytes()).hexdigest() == digest
        assert lib.integrity is Integrity.VERIFIED, lib.integrity_reason
        assert lib.owner is not None and lib.owner.purl == purl
        assert lib.ident.version == version
    cudart = next(lib for lib in libs.values() if lib.ident.family == "cudart")
    assert cudart.ident.cuda_major == int(version.split(".")[0])
    assert cudart.ident.soname == f"libcudart.so.{version.split('.')[0]}"


def test_installed_wheel(root: Path, record: dict[str, str], version: str) -> None:
    result = run_scan(str(root), ScanOptions(use_cache=False))
    check_wheel_libraries(result, record, version, root)
    assert result.findings == () and result.skipped == ()


@pytest.mark.parametrize("fmt", im.FORMATS)
def test_wheel_in_an_image(
    root: Path, record: dict[str, str], version: str, tmp_path: Path, fmt: str
) -> None:
    base = im.Layer(sc.members_of(root, lambda p: not p.startswith(SITE)), compression="gzip")
    app = im.Layer(sc.members_of(root, lambda p: p.startswith(SITE)), compression="zstd")
    image = im.Image([base, app])
    target = im.write_image(tmp_path, image, fmt)
    result = run_scan(target, ScanOptions(use_cache=False))
    check_wheel_libraries(result, record, version, root)
    built = (image.uncompressed() if fmt.startswith("docker") else image).build()
    assert {lib.ref.layer for lib in result.libraries} == {built.layer_digests[1]}


def _copy(root: Path, dest: Path) -> Path:
    shutil.copytree(root, dest, symlinks=True)
    return dest


def test_flipped_byte_is_modified(
    root: Path, record: dict[str, str], version: str, tmp_path: Path
) -> None:
    tree = _copy(root, tmp_path / "root")
    path = next(p for p in record if "libcudart" in p)
    host = tree / path[1:]
    data = bytearray(host.read_bytes())
    data[len(data) // 2] ^= 0x01
    host.write_bytes(bytes(data))
    result = run_scan(str(tree), ScanOptions(use_cache=False))
    lib = next(lib for lib in result.libraries if lib.ref.path == path)
    assert lib.integrity is Integrity.MODIFIED
    assert lib.digests is not None and lib.digests.sha256 == hashlib.sha256(data).hexdigest()
    assert lib.digests.sha256 != record[path]
    assert lib.owner is not None and lib.ident.version == version  # still identified
    assert [f.paths for f in result.findings if f.kind == "modified"] == [(path,)]


def test_unowned_copy_gets_the_version_by_hash(
    root: Path, record: dict[str, str], version: str, tmp_path: Path
) -> None:
    tree = _copy(root, tmp_path / "root")
    path = next(p for p in record if "libcudart" in p)
    copy = "/opt/vendor/lib/" + path.rsplit("/", 1)[1]
    (tree / copy[1:]).parent.mkdir(parents=True)
    shutil.copyfile(tree / path[1:], tree / copy[1:])
    result = run_scan(str(tree), ScanOptions(use_cache=False))
    libs = {lib.ref.path: lib for lib in result.libraries}
    assert sorted(libs) == sorted([*record, copy])
    lib = libs[copy]
    assert lib.integrity is Integrity.UNOWNED and lib.owner is None
    assert lib.digests is not None and lib.digests.sha256 == record[path]
    assert lib.ident.family == "cudart" and lib.ident.version == version
    assert any(
        e.field == "version" and e.method == "hash-comparison" and e.value == version
        for e in lib.ident.evidence
    )
    assert libs[path].integrity is Integrity.VERIFIED


def _toolkits() -> list[Path]:
    found = {p.resolve() for p in Path("/usr/local").glob("cuda*") if p.is_dir()}
    return sorted(p for p in found if re.fullmatch(r"cuda-\d+\.\d+", p.name))


def test_local_cuda_toolkits() -> None:
    toolkits = _toolkits()
    assert toolkits, "no CUDA toolkit under /usr/local/cuda-X.Y: this test scans a real one"
    result = run_scan("/", ScanOptions(use_cache=False, include=tuple(map(str, toolkits))))
    for toolkit in toolkits:
        major = int(toolkit.name.removeprefix("cuda-").split(".")[0])
        cudart = [
            lib
            for lib in result.libraries
            if lib.ref.path.startswith(f"{toolkit}/") and lib.ident.family == "cudart"
        ]
        assert cudart, f"no libcudart found in {toolkit}"
        for lib in cudart:
            assert lib.ident.cuda_major == major, lib.ref.path
            assert lib.ident.soname == f"libcudart.so.{major}"
            assert lib.digests is not None
            real = hashlib.sha256(Path(lib.ref.path).read_bytes()).hexdigest()
            assert lib.digests.sha256 == real
            assert all(a.startswith(f"{toolkit}/") for a in lib.aliases)
