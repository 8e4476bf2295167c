"""`gpuprov catalog from-redist`: a reference catalog from NVIDIA redistrib archives.

The manifest (`redistrib_X.Y.Z.json`) gives each archive's SHA-256 and size; each archive given
is checked against it, then every shared library inside is hashed. Manifest shapes (see
reference/signing.md): `cuda_variant` lists sit among the platform keys, sizes are strings, and
CUDA toolkit components map a platform straight to its archive, without a CUDA level.
"""

from __future__ import annotations

import re
import tarfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from msgspec import Struct

from scanner.catalog.interface import purl
from scanner.hash import hash_reader
from scanner.loaders import load_json
from scanner.refcatalog.model import (
    Catalog,
    CatalogEntry,
    CatalogSource,
    RefCatalogError,
    family_of,
    is_shared_library,
    sha256_file,
)

_PACKAGE_KEYS = {"name", "license", "license_path", "version", "cuda_variant"}
_PLATFORM_ARCH = {
    "linux-x86_64": "x86_64",
    "linux-sbsa": "aarch64",
    "linux-aarch64": "aarch64",
    "linux-ppc64le": "ppc64le",
    "windows-x86_64": "x86_64",
}
_VARIANT = re.compile(r"cuda(\d+)$")


class ManifestArchive(Struct, frozen=True):
    package: str  # manifest key, e.g. "cudnn" or "cuda_cudart"
    version: str
    platform: str
    variant: str | None  # "cuda12", or None for toolkit components
    relative_path: str
    sha256: str
    size: int | None


def read_manifest(raw: bytes) -> tuple[str, list[ManifestArchive]]:
    """Every archive a redistrib manifest lists, with the release label."""
    try:
        doc = load_json(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise RefCatalogError(f"manifest is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise RefCatalogError("manifest is not a JSON object")
    archives = []
    for key, package in doc.items():
        if not isinstance(package, dict) or "version" not in package:
            continue  # release_date, release_label, release_product
        version = str(package["version"])
        for platform, value in package.items():
            if platform in _PACKAGE_KEYS or not isinstance(value, dict):
                continue
            if "relative_path" in value:
                archives.append(_archive(key, version, platform, None, value))
                continue
            for variant, leaf in value.items():
                if isinstance(leaf, dict) and "relative_path" in leaf:
                    archives.append(_archive(key, version, platform, variant, leaf))
    label = str(doc.get("release_label", ""))
    return f"{doc.get('release_product', 'redist')} {label}".strip(), archives


def _archive(
    key: str, version: str, platform: str, variant: str | None, leaf: dict[str, Any]
) -> ManifestArchive:
    size = leaf.get("size")
    try:
        size_int = int(size) if size is not None else None  # sizes are strings in manifests
    except ValueError as e:
        raise RefCatalogError(
            f"manifest size of {leaf.get('relative_path')} is not a number"
        ) from e
    digest = str(leaf.get("sha256", "")).lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise RefCatalogError(f"manifest has no sha256 for {leaf.get('relative_path')}")
    return ManifestArchive(
        key, version, platform, variant, str(leaf["relative_path"]), digest, size_int
    )


def _members(path: Path) -> Iterator[tuple[str, IO[bytes]]]:
    """(name, stream) of each regular file that is a shared library; never extracts."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.is_dir() and is_shared_library(info.filename):
                    with zf.open(info) as f:
                        yield info.filename, f
        return
    try:
        with tarfile.open(path, "r:*") as tf:
            for member in tf:
                if member.isfile() and is_shared_library(member.name):
                    stream = tf.extractfile(member)
                    if stream is not None:
                        yield member.name, stream
    except (tarfile.TarError, OSError, EOFError) as e:
        raise RefCatalogError(f"{path} is not a readable archive: {e}") from e


def _strip_top(name: str) -> str:
    # Archives hold one top directory (cudnn-linux-x86_64-9.1.0.70_cuda12-archive/...).
    parts = name.lstrip("./").split("/", 1)
    return parts[1] if len(parts) == 2 else parts[0]


def catalog_from_redist(
    manifest: Path, archives: Sequence[Path], name: str | None = None
) -> Catalog:
    """Check each archive against the manifest, then hash every library inside it."""
    try:
        label, listed = read_manifest(manifest.read_bytes())
    except OSError as e:
        raise RefCatalogError(f"cannot read {manifest}: {e.strerror}") from e
    by_name: dict[str, ManifestArchive] = {}
    for listed_item in listed:
        by_name[listed_item.relative_path.rsplit("/", 1)[-1]] = listed_item
    entries: list[CatalogEntry] = []
    sources: list[CatalogSource] = []
    for path in archives:
        item = by_name.get(path.name)
        if item is None:
            raise RefCatalogError(f"{path.name} is not listed in {manifest.name}")
        actual = sha256_file(path)
        if actual != item.sha256:
            raise RefCatalogError(
                f"{path.name}: sha256 {actual} differs from {item.sha256} in {manifest.name}"
            )
        if item.size is not None and path.stat().st_size != item.size:
            raise RefCatalogError(f"{path.name}: size differs from {manifest.name}")
        variant = _VARIANT.match(item.variant or "")
        package = purl("generic", "nvidia", item.package, item.version)
        source_index = len(sources)
        sources.append(
            CatalogSource("redist", path.name, actual, f"{label}: {item.package} {item.platform}")
        )
        found = 0
        for member, stream in _members(path):
            digests = hash_reader(stream)
            family, component = family_of(member)
            entries.append(
                CatalogEntry(
                    _strip_top(member),
                    digests.sha256,
                    family,
                    component,
                    item.version,
                    int(variant.group(1)) if variant else None,
                    _PLATFORM_ARCH.get(item.platform),
                    digests.size,
                    package,
                    source_index,
                )
            )
            found += 1
        if not found:
            raise RefCatalogError(f"{path.name} contains no shared library")
    return Catalog(name or label, tuple(entries), tuple(sources))
