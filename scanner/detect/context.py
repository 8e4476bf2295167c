"""The scan-level context of identification: what the scan's metadata says about versions.

`build_context` reads, once per scan, the detection metadata a source captured (cuDNN version
headers, CUDA toolkit version files) and keeps the image config; `digest_records` indexes the
other records of each candidate's exact bytes (package rows, signed catalog entries). Every
`identify` call of the scan reads this context; nothing here looks at a single library.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Final

from msgspec import Struct, field

from scanner.model import AssetInfo, Package, Skipped, Stage
from scanner.versions import dotted_prefix

_DEFINE_RE: Final = re.compile(
    # a number of 19+ digits is no version (int() refuses 4300+ digits of a hostile header)
    rb"^[ \t]*#[ \t]*define[ \t]+CUDNN_(MAJOR|MINOR|PATCHLEVEL)[ \t]+(\d{1,18})(?!\d)",
    re.MULTILINE,
)
_VERSION_TXT_RE: Final = re.compile(rb"CUDA Version (\d+(?:\.\d+)+)")


class HeaderVersion(Struct, frozen=True):
    """A cuDNN version header and the install tree it describes."""

    path: str
    root: str  # e.g. "/usr" for /usr/include/x86_64-linux-gnu/cudnn_version_v9.h
    version: str  # "9.1.0" (headers carry no build number)


class ToolkitVersion(Struct, frozen=True):
    """A CUDA toolkit's version.json / version.txt and the directory it describes."""

    path: str
    root: str  # the toolkit directory, e.g. /usr/local/cuda-12.4
    cuda_version: str | None  # the toolkit release, "12.4.1"
    components: tuple[tuple[str, str], ...]  # version.json key -> version ("cuda_cudart", ...)


class DigestRecord(Struct, frozen=True):
    """Another record of a file's exact bytes, wherever the file lies: a package database row
    (a wheel's RECORD copied along with a relocated CUDA toolkit tree) or a signed catalog
    entry. Same SHA-256, same bytes: its version is the file's version."""

    sha256: str
    path: str  # the file as the record names it
    version: str
    source: str  # the record, for the evidence: a purl, "catalog NAME signed by ..."
    family: str | None = None  # a catalog entry's family; else judged by ``package``
    package: Package | None = None  # the package whose database holds the row
    cuda_major: int | None = None


class DetectContext(Struct, frozen=True):
    """What the scan's metadata says, for every `identify` call of that scan."""

    cudnn_headers: tuple[HeaderVersion, ...] = ()
    toolkits: tuple[ToolkitVersion, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # image config Env
    labels: tuple[tuple[str, str], ...] = ()  # image config Labels
    skipped: tuple[Skipped, ...] = ()  # metadata files that could not be read
    #: records of the scan's candidate digests, by SHA-256 (see `digest_records`)
    records: Mapping[str, tuple[DigestRecord, ...]] = field(default_factory=dict)


def build_context(metadata: Mapping[str, bytes], info: AssetInfo) -> DetectContext:
    """Parse cuDNN headers and CUDA version files among ``metadata``; keep the image config."""
    headers: list[HeaderVersion] = []
    toolkits: list[ToolkitVersion] = []
    skipped: list[Skipped] = []
    for path in sorted(metadata):
        base = posixpath.basename(path)
        data = metadata[path]
        if base.startswith("cudnn") and base.endswith(".h"):
            version = _header_version(data)
            if version is not None:
                headers.append(HeaderVersion(path, tree_root(path, ("include",)), version))
        elif base == "version.json":
            try:
                doc = json.loads(data)
            except (ValueError, RecursionError) as e:  # RecursionError: nested too deep
                skipped.append(Skipped(path, f"invalid CUDA version.json: {e}", Stage.DETECT))
                continue
            toolkit = _toolkit_from_json(path, doc)
            if toolkit is None:
                skipped.append(Skipped(path, "version.json has no CUDA versions", Stage.DETECT))
            else:
                toolkits.append(toolkit)
        elif base == "version.txt":
            m = _VERSION_TXT_RE.search(data)
            if m is not None:
                toolkits.append(
                    ToolkitVersion(path, posixpath.dirname(path), m.group(1).decode(), ())
                )
    return DetectContext(
        cudnn_headers=tuple(headers),
        toolkits=tuple(toolkits),
        env=info.env,
        labels=info.labels,
        skipped=tuple(skipped),
    )


def _header_version(data: bytes) -> str | None:
    found: dict[bytes, str] = {}
    for m in _DEFINE_RE.finditer(data):
        found.setdefault(m.group(1), m.group(2).decode())
    if len(found) < 3:
        return None  # cuDNN 8+ cudnn.h only includes cudnn_version.h
    return f"{int(found[b'MAJOR'])}.{int(found[b'MINOR'])}.{int(found[b'PATCHLEVEL'])}"


def _toolkit_from_json(path: str, doc: object) -> ToolkitVersion | None:
    if not isinstance(doc, dict):
        return None
    components: list[tuple[str, str]] = []
    cuda: str | None = None
    for key, entry in doc.items():
        if not isinstance(key, str) or not isinstance(entry, dict):
            continue
        version = entry.get("version")
        if not isinstance(version, str) or dotted_prefix(version) is None:
            continue
        if key == "cuda":
            cuda = version
        else:
            components.append((key, version))
    if cuda is None and not components:
        return None
    return ToolkitVersion(path, posixpath.dirname(path), cuda, tuple(sorted(components)))


def tree_root(path: str, markers: tuple[str, ...]) -> str:
    """The install tree of a file: the directory above its last include/ or lib*/ part."""
    parts = path.split("/")
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] in markers:
            return "/".join(parts[:i]) or "/"
    return posixpath.dirname(path)


def digest_records(
    wanted: set[str],
    packages: Sequence[Package],
    catalogs: Sequence[tuple[str, Sequence[tuple[str, str, str | None, str | None, int | None]]]],
) -> dict[str, tuple[DigestRecord, ...]]:
    """Index the SHA-256 rows of ``packages`` and catalog entries that name a digest in
    ``wanted`` (the scan's candidates; every other row is ignored, so a large site-packages
    costs one set lookup per row).

    ``catalogs``: (label, entries as (path, sha256, family, version, cuda major)).
    """
    out: dict[str, list[DigestRecord]] = {}
    for pkg in packages:
        for row in pkg.files:
            if row.algorithm == "sha256" and row.digest in wanted:
                rec = DigestRecord(row.digest, row.path, pkg.version, pkg.purl, package=pkg)
                out.setdefault(row.digest, []).append(rec)
    for label, entries in catalogs:
        for path, sha256, family, version, cuda_major in entries:
            if sha256 in wanted and version:
                rec = DigestRecord(sha256, path, version, label, family, cuda_major=cuda_major)
                out.setdefault(sha256, []).append(rec)
    return {k: tuple(v) for k, v in out.items()}
