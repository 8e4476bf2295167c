"""`gpuprov catalog from-wheel`: a reference catalog from real NVIDIA wheels.

Each shared library's SHA-256 comes from the wheel's RECORD and is checked against the bytes
in the wheel; the wheel's own SHA-256 is recorded as the entry source.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import zipfile
from collections.abc import Sequence
from pathlib import Path

from scanner.catalog.interface import purl
from scanner.catalog.pip import normalize_name
from scanner.detect.packages import OutOfRange, package_cuda_major, recognize_package
from scanner.hash import hash_reader
from scanner.model import Sha256
from scanner.refcatalog.model import (
    Catalog,
    CatalogEntry,
    CatalogSource,
    RefCatalogError,
    family_of,
    is_shared_library,
    merge,
    sha256_file,
)

_ARCHES = {"x86_64": "x86_64", "aarch64": "aarch64", "ppc64le": "ppc64le", "amd64": "x86_64"}


def _metadata(zf: zipfile.ZipFile, dist_info: str) -> tuple[str, str]:
    try:
        text = zf.read(f"{dist_info}/METADATA").decode("utf-8", errors="replace")
    except KeyError as e:
        raise RefCatalogError(f"{dist_info} has no METADATA") from e
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line:
            break
        key, sep, value = line.partition(":")
        if sep and key not in headers:
            headers[key.strip().lower()] = value.strip()
    if "name" not in headers or "version" not in headers:
        raise RefCatalogError(f"{dist_info}/METADATA lacks Name or Version")
    return headers["name"], headers["version"]


def _arch(wheel_name: str) -> str | None:
    for tag, arch in _ARCHES.items():
        if wheel_name.removesuffix(".whl").endswith(tag) or f"_{tag}." in wheel_name:
            return arch
    return None


def _record_digest(value: str, where: str) -> str:
    algorithm, sep, encoded = value.partition("=")
    if algorithm != "sha256" or not sep:
        raise RefCatalogError(f"{where}: RECORD has no sha256 digest")
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex()
    except (binascii.Error, ValueError) as e:
        raise RefCatalogError(f"{where}: RECORD digest is not base64: {e}") from e


def _cuda_major(name: str, version: str, path: Path) -> int | None:
    """The CUDA major the wheel is built for, by the rules the scanner and the BOM reader apply
    (scanner/detect/packages.py): nvidia-cudnn-cu12, CUDA 13's nvidia-cuda-runtime 13.0.96,
    torch 2.5.1+cu121."""
    try:
        stated = package_cuda_major(normalize_name(name), version)
        if stated is not None:
            return stated[0]
        found = recognize_package(None, normalize_name(name), version)
    except OutOfRange as e:
        raise RefCatalogError(f"{path}: {e.args[0]}") from None
    return found.cuda_major if found is not None else None


def catalog_from_wheel(path: Path) -> Catalog:
    """Catalog every shared library of one wheel, RECORD digests checked against the bytes."""
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise RefCatalogError(f"{path} is not a readable wheel: {e}") from e
    with zf:
        dist_infos = {
            n.split("/", 1)[0] for n in zf.namelist() if n.split("/", 1)[0].endswith(".dist-info")
        }
        if len(dist_infos) != 1:
            raise RefCatalogError(f"{path} must hold exactly one .dist-info directory")
        dist_info = dist_infos.pop()
        name, version = _metadata(zf, dist_info)
        try:
            record = zf.read(f"{dist_info}/RECORD").decode("utf-8")
        except KeyError as e:
            raise RefCatalogError(f"{path} has no RECORD") from e
        package = purl("pypi", None, normalize_name(name), version)
        cuda = _cuda_major(name, version, path)
        arch = _arch(path.name)
        entries = []
        for row in csv.reader(io.StringIO(record)):
            if not row or not is_shared_library(row[0]):
                continue
            member = row[0]
            where = f"{path.name}:{member}"
            if len(row) < 2 or not row[1]:
                raise RefCatalogError(f"{where}: RECORD has no digest for this library")
            recorded = _record_digest(row[1], where)
            actual, size = _hash_member(zf, member, where)
            if actual != recorded:
                raise RefCatalogError(
                    f"{where}: sha256 {actual} differs from the RECORD's {recorded}"
                )
            family, component = family_of(member)
            entries.append(
                CatalogEntry(
                    member,
                    Sha256(actual),
                    family,
                    component,
                    version,
                    cuda,
                    arch,
                    size,
                    package,
                )
            )
    if not entries:
        raise RefCatalogError(f"{path} contains no shared library")
    source = CatalogSource("wheel", path.name, sha256_file(path), f"{name} {version}")
    return Catalog(f"{name} {version}", tuple(entries), (source,))


def _hash_member(zf: zipfile.ZipFile, member: str, where: str) -> tuple[str, int]:
    try:
        with zf.open(member) as f:
            digests = hash_reader(f)
    except KeyError as e:
        raise RefCatalogError(f"{where}: listed in RECORD but missing from the wheel") from e
    except (zipfile.BadZipFile, OSError) as e:
        raise RefCatalogError(f"{where}: cannot read: {e}") from e
    return digests.sha256, digests.size


def catalog_from_wheels(paths: Sequence[Path], name: str | None = None) -> Catalog:
    """One catalog for several wheels."""
    catalogs = [catalog_from_wheel(p) for p in paths]
    if len(catalogs) == 1 and name is None:
        return catalogs[0]
    return merge(catalogs, name or ", ".join(c.name for c in catalogs))
