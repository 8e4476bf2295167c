"""Real NVIDIA wheel (realworld group): catalog, sign, install, verdicts verified / conflict.

The wheel is downloaded once with pip into ~/.cache/gpuprov-tests/wheels and installed from
that file (no index) with `pip install --no-deps --target`.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scanner.catalog.interface import purl
from scanner.catalog.pip import normalize_name
from scanner.detect.classifiers import classify_name
from scanner.refcatalog.wheel import catalog_from_wheel
from scanner.verify.catalogs import load_catalog, sign_catalog
from scanner.verify.keys import TrustedKey
from scanner.verify.provenance import Provenance, VerifiedCatalog, provenance_verdict
from scanner.verify.trust import Scope, Signer, TrustPolicy
from tests.fixtures import keys

pytestmark = pytest.mark.realworld

CACHE = Path.home() / ".cache" / "gpuprov-tests" / "wheels"
PROJECT = "nvidia-cuda-runtime-cu12"


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def wheel() -> Path:
    pattern = "nvidia_cuda_runtime_cu12-*.whl"
    if not sorted(CACHE.glob(pattern)):
        CACHE.mkdir(parents=True, exist_ok=True)
        done = _pip("download", "--no-deps", "--only-binary=:all:", PROJECT, "-d", str(CACHE))
        if done.returncode != 0:
            # the realworld group may reach the package index: a failed download is a failure
            pytest.fail(f"cannot download {PROJECT}: {done.stderr.strip()[-300:]}")
    return sorted(CACHE.glob(pattern))[-1]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site-packages")
    done = _pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel))
    assert done.returncode == 0, done.stderr
    return target


@pytest.fixture(scope="module")
def catalog(wheel: Path) -> VerifiedCatalog:
    built = catalog_from_wheel(wheel)
    key = keys.shared("ecdsa", "nvidia-catalog")
    signed = sign_catalog(built.to_bytes(), key).to_json().encode()
    signer = Signer(
        "nvidia-catalog",
        Scope(("cudart",)),
        key=TrustedKey.from_pem(keys.public_pem(key)),
    )
    return load_catalog(signed, TrustPolicy((signer,), ()), wheel.name)


def _identify(installed: Path, library: Path) -> tuple[str, str, str]:
    """What the scanner's detect and pip stages report: family, version, owner purl."""
    match = classify_name(library.name)
    assert match is not None
    (dist_info,) = installed.glob("nvidia_cuda_runtime_cu12-*.dist-info")
    meta = dict(
        line.split(": ", 1)
        for line in (dist_info / "METADATA").read_text().splitlines()
        if ": " in line
    )
    owner = purl("pypi", None, normalize_name(meta["Name"]), meta["Version"])
    return match.classifier.family, meta["Version"], owner


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_catalog_lists_the_runtime(catalog: VerifiedCatalog) -> None:
    names = {e.name for e in catalog.entries}
    assert "nvidia/cuda_runtime/lib/libcudart.so.12" in names
    cudart = next(e for e in catalog.entries if e.name.endswith("libcudart.so.12"))
    assert (cudart.family, cudart.cuda_major) == ("cudart", 12)
    assert catalog.signer.startswith("nvidia-catalog")


def test_installed_copy_is_verified_and_a_flipped_byte_conflicts(
    installed: Path, catalog: VerifiedCatalog, tmp_path: Path
) -> None:
    library = installed / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12"
    family, version, owner = _identify(installed, library)
    verdict = provenance_verdict(
        str(library), family, version, _sha256(library), [catalog], package_purl=owner
    )
    assert verdict.provenance is Provenance.VERIFIED, verdict.reason
    assert verdict.signer == catalog.signer and verdict.catalog == catalog.name

    tampered_root = tmp_path / "site-packages"
    shutil.copytree(installed, tampered_root)
    tampered = tampered_root / library.relative_to(installed)
    data = bytearray(tampered.read_bytes())
    data[len(data) // 2] ^= 0x01
    tampered.write_bytes(bytes(data))
    digest = _sha256(tampered)
    by_package = provenance_verdict(
        str(tampered), family, version, digest, [catalog], package_purl=owner
    )
    assert by_package.provenance is Provenance.CONFLICT, by_package.reason
    # Even with the pip metadata gone, family + version + library name still catch it.
    by_identity = provenance_verdict(str(tampered), family, version, digest, [catalog])
    assert by_identity.provenance is Provenance.CONFLICT, by_identity.reason
