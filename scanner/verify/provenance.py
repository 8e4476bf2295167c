"""Provenance verdict: is a file's digest in a trusted, signed reference catalog?

A pure function over the hash stage's digest, the detect stage's identification and the
catalogs that `scanner.verify.catalogs.load_catalog` verified: `verified` (with the catalog
and the signer), `conflict` (a catalog knows this library with another digest: a tampering
alarm) or `unknown`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from msgspec import Struct

from scanner import vocabulary as V
from scanner.model import Provenance as Provenance  # re-exported for its importers
from scanner.refcatalog.model import CatalogEntry

_PURL = re.compile(r"^pkg:(?P<type>[^/]+)/(?:(?P<ns>.+)/)?(?P<name>[^/@?#]+)@(?P<version>[^?#]+)")
_LIB_STEM = re.compile(r"^(?P<stem>.+?)\.so(?:\.\d+)*$")


class ProvenanceVerdict(Struct, frozen=True):
    provenance: Provenance
    reason: str
    signer: str | None = None
    catalog: str | None = None

    def properties(self) -> list[tuple[str, str]]:
        """The BOM properties of this verdict (gpuprov:provenance, :signer, :catalog)."""
        out = [(V.PROVENANCE, self.provenance.value)]
        if self.signer:
            out.append((V.PROVENANCE_SIGNER, self.signer))
        if self.catalog:
            out.append((V.PROVENANCE_CATALOG, self.catalog))
        return out


@dataclass(frozen=True)
class VerifiedCatalog:
    """A catalog whose signature and signer were verified; entries outside the signer's scope
    are already dropped (counted in `out_of_scope`)."""

    name: str
    signer: str
    entries: tuple[CatalogEntry, ...]
    out_of_scope: int = 0
    by_digest: dict[str, list[CatalogEntry]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, list[CatalogEntry]] = {}
        for entry in self.entries:
            index.setdefault(entry.sha256, []).append(entry)
        object.__setattr__(self, "by_digest", index)


def _purl_key(purl: str | None) -> tuple[str, str, str] | None:
    if not purl:
        return None
    m = _PURL.match(purl)
    if m is None:
        return None
    name = re.sub(r"[-_.]+", "-", m.group("name").lower())
    return m.group("type").lower(), name, m.group("version")


def _stem(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    m = _LIB_STEM.match(base)
    return m.group("stem") if m else base


def versions_match(a: str | None, b: str | None) -> bool:
    """Equal, or one is a dotted prefix of the other with at least major.minor.patch
    ("9.1.0" names the same release as wheel version "9.1.0.70")."""
    if not a or not b:
        return False
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return short.count(".") >= 2 and long.startswith(short + ".")


def _path_matches(entry_path: str, path: str) -> bool:
    if entry_path.startswith("/"):
        return entry_path == path
    return path == entry_path or path.endswith("/" + entry_path)


def _expected(entry: CatalogEntry) -> str:
    return f"{entry.name} sha256:{entry.sha256[:16]}…"


def provenance_verdict(
    path: str,
    family: str | None,
    version: str | None,
    sha256: str | None,
    catalogs: Sequence[VerifiedCatalog],
    *,
    cuda_major: int | None = None,
    arch: str | None = None,
    package_purl: str | None = None,
) -> ProvenanceVerdict:
    """Decide one file's provenance from verified catalogs (first matching catalog wins).

    conflict when, with another digest, a catalog lists (a) this path shipped by this very
    package (same purl name and version), or (b) the same library: same family, same version,
    same file stem (libcudnn_graph), and same CUDA major and architecture where both are known.
    """
    if not catalogs:
        return ProvenanceVerdict(Provenance.UNKNOWN, "no reference catalog was given")
    if not sha256:
        return ProvenanceVerdict(Provenance.UNKNOWN, "the file could not be hashed")
    digest = sha256.lower()
    for catalog in catalogs:
        found = catalog.by_digest.get(digest)
        if found:
            entry = found[0]
            what = " ".join(x for x in (entry.family, entry.version) if x) or "listed file"
            return ProvenanceVerdict(
                Provenance.VERIFIED,
                f"sha256 listed as {entry.name} ({what}) in catalog {catalog.name}",
                catalog.signer,
                catalog.name,
            )
    own = _purl_key(package_purl)
    stem = _stem(path)
    for catalog in catalogs:
        for entry in catalog.entries:
            if own is not None and _purl_key(entry.package) == own:
                if _path_matches(entry.name, path):
                    return ProvenanceVerdict(
                        Provenance.CONFLICT,
                        f"catalog {catalog.name} lists {_expected(entry)} for package "
                        f"{package_purl}; this file has sha256:{digest[:16]}…",
                        catalog.signer,
                        catalog.name,
                    )
            if (
                family
                and entry.family == family
                and versions_match(entry.version, version)
                and _stem(entry.name) == stem
                and (
                    cuda_major is None or entry.cuda_major is None or cuda_major == entry.cuda_major
                )
                and (arch is None or entry.arch is None or arch == entry.arch)
            ):
                return ProvenanceVerdict(
                    Provenance.CONFLICT,
                    f"catalog {catalog.name} lists {family} {version} as {_expected(entry)}; "
                    f"this file has sha256:{digest[:16]}…",
                    catalog.signer,
                    catalog.name,
                )
    return ProvenanceVerdict(Provenance.UNKNOWN, "no trusted catalog lists this file's digest")
