"""conda cataloger: packages of each environment's ``conda-meta/*.json`` prefix records.

``paths_data.paths`` lists each file relative to the prefix (the parent of ``conda-meta``) with
its SHA-256. A file conda rewrote at install time (a ``prefix_placeholder``) no longer has the
package's bytes; its digest counts only when conda recorded ``sha256_in_prefix``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from scanner.catalog.interface import (
    CatalogParseError,
    Distro,
    Found,
    is_hex_digest,
    purl,
    root_path,
    skipped,
)
from scanner.model import OwnedFile, Package, PackageManager, Skipped
from scanner.source.interface import RootView

_META_DIR = "/conda-meta/"


def channel_name(record: dict[str, Any]) -> str | None:
    """The channel's name (``conda-forge``, ``pkgs/main``), never its URL or a token in it."""
    short = record.get("schannel")
    if isinstance(short, str) and short and "://" not in short:
        return short
    channel = record.get("channel")
    if not isinstance(channel, str) or not channel:
        return None
    if "://" not in channel:
        return channel.strip("/") or None
    try:
        url_path = urlsplit(channel).path
    except ValueError as e:  # "http://[::1": an invalid IPv6 host
        raise CatalogParseError(f"conda prefix record has a malformed channel URL: {e}") from e
    parts = [p for p in url_path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "t":
        parts = parts[2:]  # /t/<token>/...: anaconda.org access tokens must not leak
    subdir = record.get("subdir")
    if parts and (parts[-1] == subdir or parts[-1] == "noarch"):
        parts = parts[:-1]
    return "/".join(parts) or None


def _owned(entry: dict[str, Any], prefix: str) -> OwnedFile | None:
    rel = entry.get("_path")
    if not isinstance(rel, str) or not rel:
        return None
    path_type = entry.get("path_type", "hardlink")
    if path_type == "directory":
        return None
    path = root_path(f"{prefix}/{rel}")
    if path_type == "softlink":
        return OwnedFile(path, None, None)  # the recorded digest is the link target's
    digest = entry.get("sha256_in_prefix")
    if not isinstance(digest, str) and not entry.get("prefix_placeholder"):
        digest = entry.get("sha256")
    if isinstance(digest, str) and is_hex_digest(digest.lower(), "sha256"):
        return OwnedFile(path, "sha256", digest.lower())
    return OwnedFile(path, None, None)


def load_record(data: bytes) -> dict[str, Any]:
    """Parse a prefix record's JSON; `CatalogParseError` when it is no JSON object."""
    try:
        record = json.loads(data)
    except (ValueError, RecursionError) as e:  # RecursionError: "[[[[..." nested too deep
        raise CatalogParseError(f"corrupt conda prefix record: {e}") from e
    if not isinstance(record, dict):
        raise CatalogParseError("conda prefix record is not a JSON object")
    return record


def package_from_record(record: dict[str, Any], path: str, prefix: str) -> Package:
    """A prefix record (parsed JSON) -> its package; `CatalogParseError` when it is unusable."""
    name, version = record.get("name"), record.get("version")
    if not isinstance(name, str) or not name or not isinstance(version, str) or not version:
        raise CatalogParseError("conda prefix record without name and version")
    build = record.get("build") if isinstance(record.get("build"), str) else None
    subdir = record.get("subdir") if isinstance(record.get("subdir"), str) else None
    channel = channel_name(record)
    files: list[OwnedFile] = []
    paths_data = record.get("paths_data")
    entries = paths_data.get("paths") if isinstance(paths_data, dict) else None
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, dict):
                owned = _owned(entry, prefix)
                if owned is not None:
                    files.append(owned)
    else:
        listed = record.get("files")
        for rel in listed if isinstance(listed, list) else ():
            if isinstance(rel, str) and rel:
                files.append(OwnedFile(root_path(f"{prefix}/{rel}"), None, None))
    extra = {
        "build": build or "",
        "channel": channel or "",
        "subdir": subdir or "",
        "license": record.get("license") if isinstance(record.get("license"), str) else "",
        "prefix": prefix,
    }
    return Package(
        manager=PackageManager.CONDA,
        name=name,
        version=version,
        purl=purl(
            "conda",
            None,
            name.lower(),
            version,
            {"build": build, "channel": channel, "subdir": subdir},
        ),
        arch=subdir,
        source=path,
        files=tuple(files),
        extra=tuple(sorted((k, str(v)) for k, v in extra.items() if v)),
    )


def catalog(view: RootView, distro: Distro) -> Found:
    """Packages of every ``conda-meta/*.json`` record the source captured."""
    del distro  # conda purls carry no distro
    packages: list[Package] = []
    skips: list[Skipped] = []
    for path in sorted(view.metadata):
        if not path.endswith(".json"):
            continue
        directory, _, _ = path.rpartition("/")
        if not (directory + "/").endswith(_META_DIR):
            continue
        prefix = directory.rpartition("/")[0] or "/"
        try:
            packages.append(package_from_record(load_record(view.metadata[path]), path, prefix))
        except CatalogParseError as e:
            skips.append(skipped(path, str(e)))
    return Found(tuple(packages), tuple(skips))
