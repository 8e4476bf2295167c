"""pip cataloger: Python distributions from ``*.dist-info`` (RECORD, METADATA) and ``*.egg-info``.

RECORD rows carry a URL-safe base64 digest (``sha256=...``) of each installed file, with paths
relative to the directory holding the ``.dist-info`` (site-packages); they are turned into hex
digests and absolute paths inside the root. ``.egg-info`` installs record no digests.
"""

from __future__ import annotations

import base64
import binascii
import csv
import re

from scanner.catalog.interface import (
    DIGEST_HEX_LENGTHS,
    Distro,
    Found,
    is_hex_digest,
    purl,
    root_path,
    skipped,
)
from scanner.model import OwnedFile, Package, PackageManager, Skipped
from scanner.source.interface import RootView

_NAME_RUNS = re.compile(r"[-_.]+")


def normalize_name(name: str) -> str:
    """PEP 503 normalized project name, as the pypi purl type requires."""
    return _NAME_RUNS.sub("-", name).lower()


def _headers(data: bytes) -> dict[str, str]:
    """The first value of each header of a core-metadata file (RFC 822 style, up to the body)."""
    out: dict[str, str] = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            break
        if line[0] in " \t":
            continue
        key, sep, value = line.partition(":")
        if sep:
            out.setdefault(key.strip().lower(), value.strip())
    return out


def _decode_hash(field: str) -> tuple[str, str] | None:
    """``sha256=<urlsafe b64, no padding>`` -> (algorithm, lowercase hex); None when malformed."""
    algorithm, sep, encoded = field.partition("=")
    algorithm = algorithm.strip().lower()
    if not sep or algorithm not in DIGEST_HEX_LENGTHS:
        return None
    encoded = encoded.strip()
    if is_hex_digest(encoded.lower(), algorithm):
        # Debian's python3-* packages write hex digests into RECORD (not per the spec, but real).
        return algorithm, encoded.lower()
    try:
        # validate=True: the lenient decoder would silently drop characters outside the alphabet.
        raw = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return None
    digest = raw.hex()
    if len(digest) != DIGEST_HEX_LENGTHS[algorithm]:
        return None
    return algorithm, digest


def parse_record(data: bytes, site: str) -> tuple[tuple[OwnedFile, ...], int]:
    """RECORD rows -> owned files (absolute paths inside the root) and the malformed row count."""
    files: list[OwnedFile] = []
    bad = 0
    text = data.decode("utf-8", errors="surrogateescape")
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error:
        return (), 1
    for row in rows:
        if not row or not row[0].strip():
            continue
        rel = row[0]
        path = root_path(rel if rel.startswith("/") else f"{site}/{rel}")
        hash_field = row[1] if len(row) > 1 else ""
        if not hash_field:
            # RECORD itself and files written at install time (.pyc) carry no hash.
            files.append(OwnedFile(path, None, None))
            continue
        decoded = _decode_hash(hash_field)
        if decoded is None:
            bad += 1
            files.append(OwnedFile(path, None, None))
            continue
        files.append(OwnedFile(path, decoded[0], decoded[1]))
    return tuple(files), bad


def _name_version_from_dir(directory: str, suffix: str) -> tuple[str, str]:
    stem = directory.rpartition("/")[2][: -len(suffix)]
    name, sep, version = stem.rpartition("-")
    return (name, version) if sep else (stem, "")


def _package(
    name: str, version: str, source: str, files: tuple[OwnedFile, ...], extra: dict[str, str]
) -> Package:
    return Package(
        manager=PackageManager.PIP,
        name=name,
        version=version,
        purl=purl("pypi", None, normalize_name(name), version),
        source=source,
        files=files,
        extra=tuple(sorted((k, v) for k, v in extra.items() if v)),
    )


def _dist_info(view: RootView, directory: str, skips: list[Skipped]) -> Package | None:
    metadata = view.metadata
    meta = metadata.get(directory + "/METADATA")
    headers = _headers(meta) if meta is not None else {}
    fallback_name, fallback_version = _name_version_from_dir(directory, ".dist-info")
    name = headers.get("name") or fallback_name
    version = headers.get("version") or fallback_version
    if not name or not version:
        skips.append(skipped(directory, "dist-info without a project name and version"))
        return None
    record_path = directory + "/RECORD"
    record = metadata.get(record_path)
    files: tuple[OwnedFile, ...] = ()
    if record is not None:
        site = directory.rpartition("/")[0] or "/"
        files, bad = parse_record(record, site)
        if bad:
            skips.append(skipped(record_path, f"{bad} malformed RECORD row(s): no digest kept"))
    extra = {"summary": headers.get("summary", ""), "license": headers.get("license", "")}
    source = directory + "/METADATA" if meta is not None else record_path
    return _package(name, version, source, files, extra)


def _egg_info(view: RootView, path: str, skips: list[Skipped]) -> Package | None:
    """An ``.egg-info`` directory (PKG-INFO, installed-files.txt) or single ``.egg-info`` file."""
    metadata = view.metadata
    if path.endswith("/PKG-INFO"):
        directory = path.rpartition("/")[0]
        listing = metadata.get(directory + "/installed-files.txt")
    else:
        directory, listing = path, None
    headers = _headers(metadata[path])
    fallback_name, fallback_version = _name_version_from_dir(directory, ".egg-info")
    name = headers.get("name") or fallback_name
    version = headers.get("version") or fallback_version
    if not name or not version:
        skips.append(skipped(path, "egg-info without a project name and version"))
        return None
    files: list[OwnedFile] = []
    if listing is not None:
        # installed-files.txt paths are relative to the .egg-info directory itself.
        for line in listing.decode("utf-8", errors="surrogateescape").splitlines():
            if line.strip():
                rel = line.strip()
                target = rel if rel.startswith("/") else f"{directory}/{rel}"
                files.append(OwnedFile(root_path(target), None, None))
    extra = {"summary": headers.get("summary", ""), "license": headers.get("license", "")}
    return _package(name, version, path, tuple(files), extra)


def catalog(view: RootView, distro: Distro) -> Found:
    """Distributions of every ``.dist-info`` and ``.egg-info`` the source captured."""
    del distro  # PyPI purls carry no distro
    packages: list[Package] = []
    skips: list[Skipped] = []
    dist_infos: set[str] = set()
    eggs: list[str] = []
    for path in view.metadata:
        if path.endswith(("/METADATA", "/RECORD")):
            directory = path.rpartition("/")[0]
            if directory.endswith(".dist-info"):
                dist_infos.add(directory)
        elif path.endswith(".egg-info") or path.endswith(".egg-info/PKG-INFO"):
            eggs.append(path)
    for directory in sorted(dist_infos):
        package = _dist_info(view, directory, skips)
        if package is not None:
            packages.append(package)
    for path in sorted(eggs):
        package = _egg_info(view, path, skips)
        if package is not None:
            packages.append(package)
    return Found(tuple(packages), tuple(skips))
