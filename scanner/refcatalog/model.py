"""The reference catalog format: an in-toto Statement v1 with gpuprov's own predicate.

Subjects are library files (name = path as shipped, digest = SHA-256); the predicate
(`PREDICATE_TYPE`, documented in docs/provenance.md) carries per-file family, version, CUDA
major, architecture, owning package and where each entry came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from msgspec import Struct

import scanner
from scanner.detect.classifiers import classify_name
from scanner.errors import ScannerError
from scanner.hash import hash_reader
from scanner.loaders import load_json
from scanner.model import Sha256

PREDICATE_TYPE = "https://gpuprov.dev/reference-catalog/v1"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"

_SHARED_LIB = re.compile(r"\.so(?:\.\d+)*$")
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: the ranges of an entry's numbers (a CUDA major; a file size that a 64-bit column holds)
MAX_CUDA_MAJOR = 999
MAX_FILE_SIZE = 2**63 - 1


class RefCatalogError(ScannerError):
    """A reference catalog cannot be built or read (bad input, digest mismatch, bad format)."""


def is_shared_library(name: str) -> bool:
    """`libfoo.so`, `libfoo.so.12`, `libfoo.so.9.1.0`: what a catalog lists."""
    return _SHARED_LIB.search(name.rsplit("/", 1)[-1]) is not None


def family_of(name: str) -> tuple[str | None, str | None]:
    """Family and component from the scanner's classifier table, so both sides agree."""
    match = classify_name(name.rsplit("/", 1)[-1])
    if match is None:
        return None, None
    return match.classifier.family, match.component


def sha256_file(path: Path) -> str:
    """Streaming SHA-256 of a file (archives and wheels can be large)."""
    with path.open("rb") as f:
        return hash_reader(f).sha256


class CatalogSource(Struct, frozen=True):
    """Where entries came from: a wheel, a redistrib archive, a golden scan."""

    kind: str  # "wheel" | "redist" | "scan"
    name: str  # file name of the wheel / archive / report
    sha256: str | None  # of that file
    detail: str = ""  # e.g. the redistrib release label, the scanned asset


class CatalogEntry(Struct, frozen=True):
    """One known-good file."""

    name: str  # path as shipped: relative in a wheel or archive, absolute in a scan
    sha256: Sha256
    family: str | None = None
    component: str | None = None
    version: str | None = None
    cuda_major: int | None = None
    arch: str | None = None
    size: int | None = None
    package: str | None = None  # purl of the package that ships the file
    source: int = 0  # index into Catalog.sources

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "sha256": self.sha256, "source": self.source}
        for key, value in (
            ("family", self.family),
            ("component", self.component),
            ("version", self.version),
            ("cudaMajor", self.cuda_major),
            ("arch", self.arch),
            ("size", self.size),
            ("package", self.package),
        ):
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, doc: object, sources: int) -> CatalogEntry:
        if not isinstance(doc, dict):
            raise RefCatalogError("catalog entry is not an object")
        name, digest = doc.get("name"), str(doc.get("sha256", "")).lower()
        if not isinstance(name, str) or not name or not _HEX64.fullmatch(digest):
            raise RefCatalogError(f"catalog entry needs a name and a SHA-256: {doc!r:.120}")
        source = doc.get("source", 0)
        if not isinstance(source, int) or not 0 <= source < max(sources, 1):
            raise RefCatalogError(f"catalog entry {name} names an unknown source")
        cuda = _opt_int(doc.get("cudaMajor"), MAX_CUDA_MAJOR, f"catalog entry {name}: cudaMajor")
        size = _opt_int(doc.get("size"), MAX_FILE_SIZE, f"catalog entry {name}: size")
        return cls(
            name,
            Sha256(digest),
            _opt_str(doc.get("family")),
            _opt_str(doc.get("component")),
            _opt_str(doc.get("version")),
            cuda,
            _opt_str(doc.get("arch")),
            size,
            _opt_str(doc.get("package")),
            source,
        )


def _opt_int(value: object, largest: int, what: str) -> int | None:
    # a value given but unusable is refused: dropped, a cudaMajor would match every major
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= largest:
        raise RefCatalogError(f"{what} must be an integer from 0 to {largest}: {value!r:.40}")
    return value


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class Catalog(Struct, frozen=True):
    """An unsigned reference catalog."""

    name: str
    entries: tuple[CatalogEntry, ...]
    sources: tuple[CatalogSource, ...]
    created: str = ""

    def to_statement(self) -> dict[str, Any]:
        """The in-toto Statement v1 (subjects in entry order)."""
        created = self.created or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": e.name, "digest": {"sha256": e.sha256}} for e in self.entries],
            "predicateType": PREDICATE_TYPE,
            "predicate": {
                "name": self.name,
                "createdAt": created,
                "generator": {"name": "gpuprov", "version": scanner.__version__},
                "sources": [
                    {"kind": s.kind, "name": s.name, "sha256": s.sha256, "detail": s.detail}
                    for s in self.sources
                ],
                "entries": [e.to_json() for e in self.entries],
            },
        }

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_statement(), indent=2) + "\n").encode()

    @classmethod
    def from_statement(cls, doc: object) -> Catalog:
        """Read a catalog statement; subjects and entries must describe the same files."""
        try:
            return cls._from_statement(doc)
        except (AttributeError, TypeError, ValueError) as e:
            raise RefCatalogError(f"malformed catalog statement: {e}") from e

    @classmethod
    def _from_statement(cls, doc: object) -> Catalog:
        if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
            raise RefCatalogError("not an in-toto Statement v1")
        if doc.get("predicateType") != PREDICATE_TYPE:
            raise RefCatalogError(
                f"predicate type {doc.get('predicateType')!r} is not {PREDICATE_TYPE}"
            )
        predicate = doc.get("predicate")
        if not isinstance(predicate, dict):
            raise RefCatalogError("catalog predicate is missing")
        raw_sources = predicate.get("sources") or []
        if not isinstance(raw_sources, list):
            raise RefCatalogError("catalog sources must be a list")
        sources = tuple(
            CatalogSource(
                str(s.get("kind", "")),
                str(s.get("name", "")),
                s.get("sha256") if isinstance(s.get("sha256"), str) else None,
                str(s.get("detail", "")),
            )
            for s in raw_sources
            if isinstance(s, dict)
        )
        raw_entries = predicate.get("entries")
        if not isinstance(raw_entries, list):
            raise RefCatalogError("catalog entries must be a list")
        entries = tuple(CatalogEntry.from_json(e, len(sources)) for e in raw_entries)
        subjects = doc.get("subject")
        if not isinstance(subjects, list):
            raise RefCatalogError("statement has no subject list")
        listed = [
            (s.get("name"), str((s.get("digest") or {}).get("sha256", "")).lower())
            for s in subjects
            if isinstance(s, dict)
        ]
        if listed != [(e.name, e.sha256) for e in entries]:
            raise RefCatalogError("catalog subjects and entries disagree")
        return cls(
            str(predicate.get("name", "")), entries, sources, str(predicate.get("createdAt", ""))
        )

    @classmethod
    def from_bytes(cls, raw: bytes) -> Catalog:
        try:
            return cls.from_statement(load_json(raw))
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise RefCatalogError(f"catalog is not JSON: {e}") from e


def merge(catalogs: Sequence[Catalog], name: str) -> Catalog:
    """One catalog from several builder runs (source indexes renumbered)."""
    entries: list[CatalogEntry] = []
    sources: list[CatalogSource] = []
    for catalog in catalogs:
        offset = len(sources)
        sources.extend(catalog.sources)
        for e in catalog.entries:
            entries.append(
                CatalogEntry(
                    e.name,
                    e.sha256,
                    e.family,
                    e.component,
                    e.version,
                    e.cuda_major,
                    e.arch,
                    e.size,
                    e.package,
                    e.source + offset,
                )
            )
    return Catalog(name, tuple(entries), tuple(sources))
