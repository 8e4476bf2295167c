"""Contract of the catalog stage: what a cataloger gets (a `RootView` and the distro) and returns.

Each package manager has one module (dpkg, rpm, pip, conda) exposing ``catalog(view, distro)``;
problems with a database are kept as `Skipped` records, never raised past the stage. A parser
raises `CatalogParseError` on malformed input; any other exception is a defect and propagates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from urllib.parse import quote

from msgspec import Struct

from scanner.errors import CatalogError
from scanner.model import OwnedFile, Package, Skipped, Stage
from scanner.source.interface import RootView, normalize

STAGE = Stage.CATALOG

#: Hex digest length per algorithm name, used to reject malformed records.
DIGEST_HEX_LENGTHS: Mapping[str, int] = {
    "md5": 32,
    "sha1": 40,
    "sha224": 56,
    "sha256": 64,
    "sha384": 96,
    "sha512": 128,
}

_HEX = re.compile(r"[0-9a-f]+")


class CatalogParseError(CatalogError):
    """A package database, or one record of it, is malformed. Package databases inside a
    scanned root are untrusted input, so this is expected: the cataloger turns it into a
    `Skipped` entry with this message (for the record, or for the whole database)."""


class Distro(Struct, frozen=True):
    """The operating system of the root, from os-release (empty strings when unknown)."""

    id: str = ""  # os-release ID, lowercased ("debian", "ubuntu", "rhel", "fedora")
    version_id: str = ""  # os-release VERSION_ID ("12", "9.4")
    pretty_name: str = ""

    @property
    def qualifier(self) -> str | None:
        """The purl ``distro`` qualifier value, e.g. ``debian-12``; None when unknown."""
        if self.id and self.version_id:
            return f"{self.id}-{self.version_id}"
        return None

    @classmethod
    def from_os_release(cls, data: bytes) -> Distro:
        """Parse os-release(5): shell-style ``KEY=value`` lines, values optionally quoted."""
        values: dict[str, str] = {}
        for raw in data.decode("utf-8", errors="replace").splitlines():
            line = raw.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _, value = line.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                quote_char = value[0]
                value = value[1:-1]
                if quote_char == '"':
                    # os-release(5): within double quotes, \ escapes $ " \ and `
                    for ch in '\\"$`':
                        value = value.replace("\\" + ch, ch)
            values[key.strip()] = value
        return cls(
            id=values.get("ID", "").strip().lower(),
            version_id=values.get("VERSION_ID", "").strip(),
            pretty_name=values.get("PRETTY_NAME", "").strip(),
        )


class Found(Struct, frozen=True):
    """What one cataloger found: its packages and what it had to skip."""

    packages: tuple[Package, ...] = ()
    skipped: tuple[Skipped, ...] = ()


#: A cataloger reads the view's captured metadata and returns packages with their files.
Cataloger = Callable[[RootView, Distro], Found]


class CatalogResult(Struct, frozen=True):
    """Owner packages of a root and, for each owned path, its owner and recorded digest.

    ``owners`` keys are normalized absolute paths as recorded, plus the real path when a
    recorded path goes through a symlinked directory (``/lib`` -> ``/usr/lib`` on usrmerge).
    """

    packages: tuple[Package, ...]
    owners: dict[str, tuple[Package, OwnedFile]]
    skipped: tuple[Skipped, ...]
    distro: Distro = Distro()

    def owner_of(self, path: str) -> tuple[Package, OwnedFile] | None:
        """The owner package and record of ``path`` (absolute, normalized), if any."""
        return self.owners.get(path)


def skipped(path: str, reason: str) -> Skipped:
    """A catalog-stage `Skipped` record."""
    return Skipped(path=path, reason=reason, stage=STAGE)


def is_hex_digest(value: str, algorithm: str) -> bool:
    """True when ``value`` is lowercase hex of the length ``algorithm`` produces."""
    return len(value) == DIGEST_HEX_LENGTHS.get(algorithm, -1) and _HEX.fullmatch(value) is not None


def root_path(path: str) -> str:
    """`normalize` with a fast path for paths that are already absolute and clean."""
    if (
        path.startswith("/")
        and "//" not in path
        and "/." not in path
        and not path.endswith("/")
        or path == "/"
    ):
        return path
    return normalize(path)


def _pct(value: str) -> str:
    # purl spec "Character encoding": alphanumerics, ".-_~" and ":" are never encoded.
    try:
        raw = value.encode("utf-8", "surrogateescape")  # undecodable bytes stay those bytes
    except UnicodeEncodeError:
        raw = value.encode("utf-8", "replace")
    return quote(raw, safe=":")


def purl(
    type_: str,
    namespace: str | None,
    name: str,
    version: str | None,
    qualifiers: Mapping[str, str | None] | None = None,
) -> str:
    """A canonical package URL (purl spec "How to build"): encoded parts, sorted qualifiers."""
    out = ["pkg:", type_.lower(), "/"]
    if namespace:
        segments = [s for s in namespace.strip("/").split("/") if s]
        out.append("/".join(_pct(s) for s in segments))
        out.append("/")
    out.append(_pct(name.strip("/")))
    if version:
        out.append("@")
        out.append(_pct(version))
    if qualifiers:
        pairs = sorted(f"{k.lower()}={_pct(v)}" for k, v in qualifiers.items() if v)
        if pairs:
            out.append("?")
            out.append("&".join(pairs))
    return "".join(out)
