"""The node's sourced data tables: driver -> newest CUDA, L4T -> JetPack, GPU model -> compute
capability (scanner/node/data/*.yaml, each with the NVIDIA page it comes from).

Pure lookups over packaged data; the policy's driver rule uses `default_cuda_drivers` too.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from msgspec import Struct

from scanner.errors import ScannerError
from scanner.versions import version_key


class TableError(ScannerError):
    """A packaged data table that does not hold what its loader expects."""


class Source(Struct, frozen=True):
    name: str
    url: str

    def cite(self) -> str:
        return f"{self.name} <{self.url}>"


class CudaSupport(Struct, frozen=True):
    """What the table says of one driver: the newest CUDA it runs, from which row."""

    cuda: str  # "12.2"
    release: str  # the newest toolkit release the driver meets: "12.2 Update 2"
    #: the driver is newer than the table's newest row: it runs at least ``cuda``
    at_least: bool


class CudaDriverTable(Struct, frozen=True):
    source: Source
    #: (CUDA "X.Y", toolkit release, minimum Linux driver), newest first
    releases: tuple[tuple[str, str, str], ...]

    def newest_cuda(self, driver: str) -> CudaSupport | None:
        """The newest CUDA release whose minimum driver ``driver`` meets; None when it meets
        none or is no driver version."""
        have = version_key(driver)
        if have is None or not re.fullmatch(r"\d+(?:\.\d+)+", driver.strip()):
            return None
        for i, (cuda, release, minimum) in enumerate(self.releases):
            need = version_key(minimum)
            if need is not None and have >= need:
                newest_major = int(self.releases[0][2].split(".")[0])
                at_least = i == 0 and int(driver.split(".")[0]) > newest_major
                return CudaSupport(cuda, release, at_least)
        return None


class JetPack(Struct, frozen=True):
    l4t: str
    jetpack: str
    cuda: str


class JetPackTable(Struct, frozen=True):
    source: Source
    releases: tuple[JetPack, ...]

    def by_l4t(self, l4t: str) -> JetPack | None:
        """The JetPack release of an L4T release ("36.4.0"; "36.4" is read as "36.4.0")."""
        parts = l4t.split(".")
        full = ".".join((parts + ["0", "0"])[:3])
        return next((r for r in self.releases if r.l4t == full), None)


class ComputeCapabilityTable(Struct, frozen=True):
    source: Source
    models: tuple[tuple[re.Pattern[str], str], ...]
    #: compute capability -> architecture ("9.0" -> "hopper")
    architectures: tuple[tuple[str, str], ...] = ()

    def of(self, model: str) -> str | None:
        """The compute capability of a GPU model name, or None when no row names it."""
        return next((cc for pattern, cc in self.models if pattern.search(model)), None)

    def architecture(self, cc: str) -> str | None:
        """The architecture of a compute capability, or None when no row names it."""
        return next((arch for c, arch in self.architectures if c == cc), None)


def _load(name: str) -> dict[str, Any]:
    # Imported here: a host without a driver never reads a table (start-up, docs/benchmarks.md).
    from importlib import resources

    from scanner.loaders import DocumentError, load_yaml

    text = resources.files("scanner.node").joinpath(f"data/{name}").read_text("utf-8")
    try:
        doc = load_yaml(text)
    except DocumentError as e:
        raise TableError(f"{name}: {e}") from None
    if not isinstance(doc, dict):
        raise TableError(f"{name}: not a mapping")
    return doc


def _source(doc: dict[str, Any], name: str) -> Source:
    src = doc.get("source")
    if not isinstance(src, dict) or not src.get("name") or not src.get("url"):
        raise TableError(f"{name}: source.name and source.url are required")
    return Source(str(src["name"]), str(src["url"]))


def _rows(doc: dict[str, Any], key: str, name: str, fields: tuple[str, ...]) -> list[list[str]]:
    rows = doc.get(key)
    if not isinstance(rows, list) or not rows:
        raise TableError(f"{name}: {key} must be a non-empty list")
    out = []
    for row in rows:
        if not isinstance(row, dict) or not all(isinstance(row.get(f), str) for f in fields):
            raise TableError(f"{name}: {row!r}: needs string fields {', '.join(fields)}")
        out.append([row[f] for f in fields])
    return out


def parse_cuda_drivers(doc: dict[str, Any], name: str = "cuda_drivers.yaml") -> CudaDriverTable:
    rows = _rows(doc, "releases", name, ("cuda", "release", "driver"))
    keys = [version_key(r[2]) for r in rows]
    if any(k is None for k in keys) or keys != sorted(keys, reverse=True):  # type: ignore[type-var]
        raise TableError(f"{name}: releases must be newest first with dotted driver versions")
    return CudaDriverTable(_source(doc, name), tuple((r[0], r[1], r[2]) for r in rows))


@cache
def default_cuda_drivers() -> CudaDriverTable:
    """NVIDIA's toolkit/driver table shipped with gpuprov."""
    return parse_cuda_drivers(_load("cuda_drivers.yaml"))


@cache
def default_jetpack() -> JetPackTable:
    """NVIDIA's JetPack/L4T table shipped with gpuprov."""
    name = "jetpack.yaml"
    doc = _load(name)
    rows = _rows(doc, "releases", name, ("l4t", "jetpack", "cuda"))
    return JetPackTable(_source(doc, name), tuple(JetPack(*r) for r in rows))


@cache
def default_compute_capability() -> ComputeCapabilityTable:
    """NVIDIA's compute capability list shipped with gpuprov."""
    name = "compute_capability.yaml"
    doc = _load(name)
    rows = _rows(doc, "models", name, ("match", "cc"))
    archs = _rows(doc, "architectures", name, ("cc", "architecture"))
    return ComputeCapabilityTable(
        _source(doc, name),
        tuple((re.compile(m, re.IGNORECASE), cc) for m, cc in rows),
        tuple((cc, arch) for cc, arch in archs),
    )
