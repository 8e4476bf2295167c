"""The flat inventory export: every current library as one row, streamed as CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy.orm import Session

from app.storage.repositories import inventory as repo

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
)


def export_rows(session: Session) -> Iterator[dict[str, Any]]:
    """Every current library as a flat row (streamed)."""
    for artifact, asset in repo.export_rows(session):
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
        }


def export_csv(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    """CSV text chunks (header first). Cells starting with = + - @ are prefixed with ' so a
    spreadsheet never evaluates a report's strings as formulas."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for i, row in enumerate(rows, 1):
        writer.writerow({k: _csv_safe(val) for k, val in row.items()})
        if i % 500 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _csv_safe(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def export_json(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    """A JSON array, one row per line, streamed (the first row is read before anything is
    yielded, so a database outage surfaces before the response starts)."""
    iterator = iter(rows)
    first = next(iterator, None)
    if first is None:
        yield "[]\n"
        return
    yield "[\n" + json.dumps(first, ensure_ascii=False)
    for row in iterator:
        yield ",\n" + json.dumps(row, ensure_ascii=False)
    yield "\n]\n"


def export(session: Session, format: str) -> Iterator[str]:
    """The whole current inventory as ``csv`` or ``json`` text chunks."""
    rows = export_rows(session)
    return export_csv(rows) if format == "csv" else export_json(rows)
