"""The JSON shapes of stored rows (scans, assets, libraries) that the inventory answers share."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.storage.tables import Artifact, Asset, Scan


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def scan_dict(scan: Scan) -> dict[str, Any]:
    """A scan's summary."""
    return {
        "id": scan.id,
        "serial_number": scan.serial_number,
        "bom_version": scan.bom_version,
        "spec_version": scan.spec_version,
        "producer": scan.producer,
        "tool": scan.tool,
        "scanned_at": _time(scan.scanned_at),
        "received_at": _time(scan.received_at),
        "library_count": scan.library_count,
        "content_sha256": scan.content_sha256,
        "image_trust": image_trust(scan),
        "runtime": dict(scan.runtime) if scan.runtime is not None else None,
    }


def image_trust(scan: Scan) -> dict[str, Any] | None:
    """What the report said the image's signatures and attestations established; None when it
    said nothing (a host, or a scan without a trust policy)."""
    rejected = list(scan.signature_rejected or [])
    if not (scan.image_signer or scan.slsa_level is not None or scan.slsa_builder or rejected):
        return None
    return {
        "signed": scan.image_signer is not None,
        "signer": scan.image_signer,
        "slsa_level": scan.slsa_level,
        "slsa_builder": scan.slsa_builder,
        "slsa_source_repo": scan.slsa_source_repo,
        "signature_rejected": rejected,
    }


def asset_dict(asset: Asset, latest: Scan | None = None) -> dict[str, Any]:
    """An asset's summary, with its latest scan when given."""
    return {
        "id": asset.id,
        "kind": asset.kind,
        "name": asset.name,
        "identity": asset.identity,
        "labels": dict(asset.labels),
        "details": dict(asset.details),
        "first_seen": _time(asset.first_seen),
        "last_seen": _time(asset.last_seen),
        "latest_scan": scan_dict(latest) if latest else None,
    }


def library_dict(artifact: Artifact) -> dict[str, Any]:
    """One GPU library of a scan."""
    return {
        "kind": artifact.kind,
        "name": artifact.name,
        "path": artifact.path,
        "family": artifact.family,
        "component": artifact.component,
        "version": artifact.version,
        "cuda_major": artifact.cuda_major,
        "arch": artifact.arch,
        "sha256": artifact.sha256,
        "integrity": artifact.integrity,
        "integrity_reason": artifact.integrity_reason,
        "provenance": artifact.provenance,
        "provenance_signer": artifact.provenance_signer,
        "provenance_catalog": artifact.provenance_catalog,
        "provenance_reason": artifact.provenance_reason,
        "layer": artifact.layer,
        "owner_purl": artifact.owner_purl,
        "soname": artifact.soname,
        "aliases": list(artifact.aliases),
        "notes": list(artifact.notes),
        "loaded": loaded_dict(artifact),
    }


def loaded_dict(artifact: Artifact) -> dict[str, Any] | None:
    """Which live processes map the file (a --runtime scan); None when none does."""
    if not artifact.loaded_processes and not artifact.loaded_copy:
        return None
    return {
        "processes": artifact.loaded_processes,
        "containers": artifact.loaded_containers,
        "deleted": artifact.loaded_deleted,
        "copy": artifact.loaded_copy,
        "disk_sha256": artifact.disk_sha256,
        "differs_from_disk": artifact.disk_sha256 is not None,
        "by": list(artifact.loaded_by or []),
    }


def page(items: list[dict[str, Any]], total: int, limit: int, offset: int) -> dict[str, Any]:
    """A page of items with its total and window."""
    return {"items": items, "total": total, "limit": limit, "offset": offset}
