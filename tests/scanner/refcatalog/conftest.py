"""Builders of real-format inputs for catalog tests: wheels, redistrib archives and manifests."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.sigstore_private import PrivateSigstore


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    *,
    record_override: dict[str, str] | None = None,
    platform: str = "manylinux2014_x86_64",
) -> Path:
    """A wheel as pip and PyPI build them: files, METADATA, WHEEL and a hashed RECORD."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = directory / f"{dist}-py3-none-{platform}.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n".encode()
    members = dict(files)
    members[f"{dist}.dist-info/METADATA"] = meta
    members[f"{dist}.dist-info/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
    record = io.StringIO()
    for member, data in members.items():
        digest = (record_override or {}).get(member, _record_hash(data))
        record.write(f"{member},{digest},{len(data)}\n")
    record.write(f"{dist}.dist-info/RECORD,,\n")
    members[f"{dist}.dist-info/RECORD"] = record.getvalue().encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


def make_tar(path: Path, top: str, files: dict[str, bytes], links: dict[str, str]) -> Path:
    """A redistrib-style .tar.xz with one top directory, files and symlinks."""
    with tarfile.open(path, "w:xz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    return path


def manifest_entry(archive: Path, relative_dir: str) -> dict[str, str]:
    data = archive.read_bytes()
    return {
        "relative_path": f"{relative_dir}/{archive.name}",
        "sha256": hashlib.sha256(data).hexdigest(),
        "md5": hashlib.md5(data).hexdigest(),
        "size": str(len(data)),  # sizes are strings in NVIDIA manifests
    }


def write_manifest(path: Path, doc: dict[str, object]) -> Path:
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.fixture(scope="session")
def instance() -> PrivateSigstore:
    """A private Sigstore instance for keyless catalog signatures."""
    return PrivateSigstore(name="catalog-test")


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never read or write the user's cache (a refreshed public-good root lives there)."""
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path_factory.mktemp("gpuprov-cache")))
