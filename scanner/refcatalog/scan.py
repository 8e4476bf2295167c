"""`gpuprov catalog from-scan`: a reference catalog from a trusted golden scan.

Reads a CycloneDX report written by gpuprov: every `file` component with a SHA-256 hash and
`gpuprov:` properties becomes an entry. Files whose integrity verdict was `modified` are left
out unless asked for: a golden scan should not bless bytes its own package manager disowns.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scanner import vocabulary as V
from scanner.loaders import load_json
from scanner.model import Sha256
from scanner.refcatalog.model import (
    Catalog,
    CatalogEntry,
    CatalogSource,
    RefCatalogError,
    sha256_file,
)


def _components(items: object) -> Iterator[dict[str, Any]]:
    if not isinstance(items, list):
        return
    for item in items:
        if isinstance(item, dict):
            yield item
            yield from _components(item.get("components"))


def _sha256(component: dict[str, Any]) -> str | None:
    for h in component.get("hashes") or []:
        content = h.get("content") if isinstance(h, dict) else None
        if isinstance(content, str) and h.get("alg") == "SHA-256":
            return content.lower()
    return None


def catalog_from_scan(
    report: Path, name: str | None = None, *, include_modified: bool = False
) -> Catalog:
    """Catalog the GPU library files of a gpuprov CycloneDX report."""
    try:
        doc = load_json(report.read_bytes())
    except OSError as e:
        raise RefCatalogError(f"cannot read {report}: {e.strerror}") from e
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise RefCatalogError(f"{report} is not JSON: {e}") from e
    if not isinstance(doc, dict) or doc.get("bomFormat") != "CycloneDX":
        raise RefCatalogError(f"{report} is not a CycloneDX BOM")
    asset = (doc.get("metadata") or {}).get("component") or {}
    asset_name = str(asset.get("name", "")) if isinstance(asset, dict) else ""
    entries = []
    for component in _components(doc.get("components")):
        if component.get("type") != "file":
            continue
        props: dict[str, str] = {}
        for p in component.get("properties") or []:
            if isinstance(p, dict) and isinstance(p.get("name"), str):
                props.setdefault(p["name"], str(p.get("value", "")))
        digest = _sha256(component)
        family = props.get(V.LIBRARY_FAMILY)
        if digest is None or not family:
            continue
        if props.get(V.INTEGRITY) == "modified" and not include_modified:
            continue
        cuda = props.get(V.LIBRARY_CUDA_MAJOR, "")
        entries.append(
            CatalogEntry(
                props.get(V.FILE_PATH) or str(component.get("name", "")),
                Sha256(digest),
                family,
                props.get(V.LIBRARY_COMPONENT) or None,
                props.get(V.LIBRARY_VERSION) or component.get("version") or None,
                int(cuda) if cuda.isdigit() else None,
                props.get(V.LIBRARY_ARCH) or None,
                None,
                props.get(V.OWNER_PURL) or None,
            )
        )
    if not entries:
        raise RefCatalogError(f"{report} lists no GPU library file with a SHA-256")
    serial = str(doc.get("serialNumber", ""))
    source = CatalogSource(
        "scan", report.name, sha256_file(report), f"{asset_name} {serial}".strip()
    )
    return Catalog(name or f"golden scan of {asset_name or report.name}", tuple(entries), (source,))
