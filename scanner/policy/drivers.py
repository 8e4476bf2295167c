"""Minimum Linux driver per CUDA major, from packaged data (data/drivers.yaml) with its source."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from msgspec import Struct

from scanner.loaders import DocumentError, load_yaml
from scanner.policy.document import PolicyError
from scanner.versions import version_key


class DriverTable(Struct, frozen=True):
    source_name: str
    source_url: str
    minimum: dict[int, str]  # CUDA major -> minimum driver version ("525.60.13")

    def satisfies(self, driver: str, cuda_major: int) -> bool | None:
        """Whether ``driver`` runs CUDA ``cuda_major``; None when the table has no such major."""
        need = self.minimum.get(cuda_major)
        have = version_key(driver)
        if need is None or have is None:
            return None
        need_key = version_key(need)
        return need_key is not None and have >= need_key


def parse_drivers(doc: Any) -> DriverTable:
    if not isinstance(doc, dict):
        raise PolicyError("driver table: not a mapping")
    source = doc.get("source")
    table = doc.get("minimum_linux_driver")
    if not isinstance(source, dict) or not source.get("name") or not source.get("url"):
        raise PolicyError("driver table: source.name and source.url are required")
    if not isinstance(table, dict) or not table:
        raise PolicyError("driver table: minimum_linux_driver must be a non-empty mapping")
    minimum: dict[int, str] = {}
    for major, version in table.items():
        if not isinstance(major, int) or not isinstance(version, str) or not version_key(version):
            raise PolicyError(f"driver table: {major!r}: {version!r} is no CUDA major -> version")
        minimum[major] = version
    return DriverTable(str(source["name"]), str(source["url"]), minimum)


@cache
def default_drivers() -> DriverTable:
    """The table shipped with gpuprov (NVIDIA's CUDA compatibility document)."""
    text = resources.files("scanner.policy").joinpath("data/drivers.yaml").read_text("utf-8")
    try:
        return parse_drivers(load_yaml(text))
    except DocumentError as e:
        raise PolicyError(f"driver table: {e}") from None
