"""The flat inventory export: every current library as one row, streamed as CSV or JSON."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy.orm import Session

from app.domain.tabular import csv_chunks, json_chunks
from app.storage.repositories import inventory as repo
from app.storage.repositories.scopes import AssetScope

EXPORT_COLUMNS = (
    "asset_id",
    "asset_kind",
    "asset_name",
    "asset_identity",
    "family",
    "component",
    "version",
    "cuda_major",
    "kind",
    "path",
    "sha256",
    "integrity",
    "provenance",
    "provenance_signer",
    "owner_purl",
    "layer",
    "loaded_processes",
    "loaded_containers",
    "loaded_copy",
    "disk_sha256",
)


def export_rows(session: Session, scope: AssetScope | None = None) -> Iterator[dict[str, Any]]:
    """Every current library (of the scope's assets) as a flat row (streamed)."""
    for artifact, asset in repo.export_rows(session, scope=scope):
        yield {
            "asset_id": asset.id,
            "asset_kind": asset.kind,
            "asset_name": asset.name,
            "asset_identity": asset.identity,
            "family": artifact.family,
            "component": artifact.component,
            "version": artifact.version,
            "cuda_major": artifact.cuda_major,
            "kind": artifact.kind,
            "path": artifact.path,
            "sha256": artifact.sha256,
            "integrity": artifact.integrity,
            "provenance": artifact.provenance,
            "provenance_signer": artifact.provenance_signer,
            "owner_purl": artifact.owner_purl,
            "layer": artifact.layer,
            # a --runtime host scan: who maps the bytes, and whether the disk still has them
            "loaded_processes": artifact.loaded_processes,
            "loaded_containers": artifact.loaded_containers,
            "loaded_copy": artifact.loaded_copy,
            "disk_sha256": artifact.disk_sha256,
        }


def export(session: Session, format: str, scope: AssetScope | None = None) -> Iterator[str]:
    """The current inventory (of the scope) as ``csv`` or ``json`` text chunks."""
    rows = export_rows(session, scope)
    return csv_chunks(rows, EXPORT_COLUMNS) if format == "csv" else json_chunks(rows)
