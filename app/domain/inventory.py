"""Inventory queries: assets, libraries in use, where-used, drift and exports, as JSON-ready data.

Everything here reads current state through the repositories' current-state queries; history is
read only per asset (detail, drift between an asset's last two scans).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.domain.bom import check_label
from app.domain.versions import VersionFilter, parse_version_filter
from app.errors import BadRequest, InvalidReport, NotFound
from app.storage.repositories import assets as asset_repo
from app.storage.repositories import inventory as repo
from app.storage.repositories import scans as scan_repo
from app.storage.repositories.inventory import AssetQuery, LibraryMatch
from app.storage.tables import Artifact, Asset, Scan
from scanner import vocabulary as v

HISTORY_LIMIT = 50
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


def version_filter(expression: str | None) -> VersionFilter | None:
    """Parse a ``version`` query parameter, answering 400 on bad syntax."""
    if expression is None:
        return None
    try:
        return parse_version_filter(expression)
    except ValueError as e:
        raise BadRequest(f"version: {e}") from e


#: the values of the ``verdict`` filter: an integrity or a provenance verdict
VERDICT_VALUES = tuple(dict.fromkeys((*v.INTEGRITY_VALUES, *v.PROVENANCE_VALUES)))


def check_choice(name: str, value: str | None, allowed: Sequence[str]) -> str | None:
    """A query parameter that must be one of ``allowed`` (400 otherwise)."""
    if value is not None and value not in allowed:
        raise BadRequest(f"{name} must be one of {', '.join(allowed)}")
    return value


def check_verdict(verdict: str | None) -> str | None:
    """A ``verdict`` query parameter: an integrity or a provenance value (400 otherwise)."""
    return check_choice("verdict", verdict, VERDICT_VALUES)


def library_match(
    *,
    family: str | None = None,
    version: str | None = None,
    sha256: str | None = None,
    verdict: str | None = None,
    integrity: str | None = None,
    provenance: str | None = None,
) -> LibraryMatch:
    """The library filters of a request, each checked (400 on a value that cannot match)."""
    return LibraryMatch(
        family=family,
        version=version_filter(version),
        sha256=sha256,
        verdict=check_verdict(verdict),
        integrity=check_choice("integrity", integrity, v.INTEGRITY_VALUES),
        provenance=check_choice("provenance", provenance, v.PROVENANCE_VALUES),
    )


def label_filters(values: Sequence[str]) -> list[tuple[str, str]]:
    """``label`` filters as pairs; a key or value no stored label can have is a 400 (the rules
    are the ones ingest applies to the labels it stores)."""
    pairs = parse_labels(values)
    for key, value in pairs:
        try:
            check_label(key, value)
        except InvalidReport as e:
            raise BadRequest(e.message) from e
    return pairs


def parse_labels(values: Sequence[str]) -> list[tuple[str, str]]:
    """``key=value`` strings to pairs, answering 400 on a missing '='."""
    pairs = []
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise BadRequest(f"label {value!r} must be KEY=VALUE")
        pairs.append((key, val))
    return pairs


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
    }


def _page(items: list[dict[str, Any]], total: int, limit: int, offset: int) -> dict[str, Any]:
    return {"items": items, "total": total, "limit": limit, "offset": offset}


def list_assets(session: Session, query: AssetQuery, limit: int, offset: int) -> dict[str, Any]:
    """A page of assets matching the filters."""
    rows, total = repo.list_assets(session, query, limit, offset)
    return _page([asset_dict(a, s) for a, s in rows], total, limit, offset)


def _asset(session: Session, asset_id: int) -> Asset:
    asset = asset_repo.by_id(session, asset_id)
    if asset is None:
        raise NotFound(f"no asset with id {asset_id}")
    return asset


def asset_detail(session: Session, asset_id: int) -> dict[str, Any]:
    """An asset with its latest scan, that scan's libraries and packages, and recent history."""
    asset = _asset(session, asset_id)
    latest = scan_repo.by_id(session, asset.latest_scan_id) if asset.latest_scan_id else None
    detail = asset_dict(asset, latest)
    detail["libraries"] = [library_dict(a) for a in repo.current_artifacts(session, asset_id)]
    detail["packages"] = (
        [
            {"name": p.name, "version": p.version, "purl": p.purl, "manager": p.manager}
            for p in repo.scan_packages(session, latest.id)
        ]
        if latest
        else []
    )
    detail["history"] = [scan_dict(s) for s in repo.history(session, asset_id, HISTORY_LIMIT)]
    return detail


def raw_sbom(session: Session, asset_id: int, scan_id: int | None) -> tuple[bytes, str]:
    """The asset's latest (or given) report exactly as received, and its media type."""
    scan = _scan_of(session, asset_id, scan_id)
    raw = scan_repo.raw_bom(session, scan.id)
    if raw is None:
        raise NotFound(f"scan {scan.id} has no stored report")
    return gzip.decompress(raw.gzip_data), raw.media_type


def _scan_of(session: Session, asset_id: int, scan_id: int | None) -> Scan:
    asset = _asset(session, asset_id)
    wanted = scan_id or asset.latest_scan_id
    scan = scan_repo.by_id(session, wanted) if wanted else None
    if scan is None or scan.asset_id != asset.id:
        raise NotFound(f"asset {asset_id} has no scan {wanted}")
    return scan


def normalized_sbom(session: Session, asset_id: int, scan_id: int | None) -> dict[str, Any]:
    """A CycloneDX 1.6 BOM rebuilt from what the service stored for one scan."""
    asset = _asset(session, asset_id)
    scan = _scan_of(session, asset_id, scan_id)
    artifacts = repo.scan_artifacts(session, [scan.id])
    packages = repo.scan_packages(session, scan.id)
    properties = [{"name": v.ASSET_KIND, "value": asset.kind}]
    details = asset.details
    component: dict[str, Any] = {"bom-ref": f"asset:{asset.id}", "name": asset.name}
    if asset.kind == "image":
        component["type"] = "container"
        if digest := details.get("digest"):
            properties.append({"name": v.IMAGE_DIGEST, "value": digest})
            repo_name = asset.name.rsplit("@", 1)[0].rsplit(":", 1)[0].rsplit("/", 1)[-1]
            component["purl"] = f"pkg:oci/{repo_name.lower()}@{digest.replace(':', '%3A')}"
        if config := details.get("config_digest"):
            properties.append({"name": v.IMAGE_ID, "value": config})
        properties.append({"name": v.IMAGE_REFERENCE, "value": asset.name})
        trust = [
            (v.IMAGE_SIGNER, scan.image_signer),
            (v.SLSA_BUILD_LEVEL, str(scan.slsa_level) if scan.slsa_level is not None else None),
            (v.SLSA_BUILDER, scan.slsa_builder),
            (v.SLSA_SOURCE_REPO, scan.slsa_source_repo),
            *((v.IMAGE_SIGNATURE_REJECTED, r) for r in scan.signature_rejected or []),
        ]
        properties += [{"name": n, "value": val} for n, val in trust if val]
    else:
        component["type"] = "operating-system"
        if machine_id := details.get("machine_id"):
            properties.append({"name": v.HOST_MACHINE_ID, "value": machine_id})
        properties.append({"name": v.HOST_HOSTNAME, "value": asset.name})
    properties += [
        {"name": v.ASSET_LABEL_PREFIX + k, "value": val} for k, val in sorted(asset.labels.items())
    ]
    component["properties"] = properties
    components: list[dict[str, Any]] = []
    refs: set[str] = set()
    for package in packages:
        ref = package.purl or f"package:{package.id}"
        if ref in refs:
            continue
        refs.add(ref)
        entry: dict[str, Any] = {"type": "library", "bom-ref": ref, "name": package.name}
        if package.version:
            entry["version"] = package.version
        if package.purl:
            entry["purl"] = package.purl
        components.append(entry)
    for artifact in artifacts:
        if artifact.kind != "file":
            continue
        components.append(_file_component(artifact, refs))
    return {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": uuid.uuid5(
            uuid.NAMESPACE_URL, f"gpuprov:normalized:{scan.id}:{scan.content_sha256}"
        ).urn,
        "version": 1,
        "metadata": {
            "timestamp": scan.scanned_at.isoformat().replace("+00:00", "Z"),
            "tools": {
                "components": [
                    {"type": "application", "name": "gpuprov-service", "version": "0.1.0"}
                ]
            },
            "component": component,
            "properties": [{"name": "gpuprov:source:tool", "value": scan.tool}],
        },
        "components": components,
    }


def _file_component(artifact: Artifact, refs: set[str]) -> dict[str, Any]:
    pairs = [
        (v.FILE_PATH, artifact.path),
        (v.LIBRARY_FAMILY, artifact.family),
        (v.LIBRARY_COMPONENT, artifact.component),
        (v.LIBRARY_VERSION, artifact.version),
        (v.LIBRARY_CUDA_MAJOR, str(artifact.cuda_major) if artifact.cuda_major else None),
        (v.LIBRARY_ARCH, artifact.arch),
        (v.LIBRARY_SONAME, artifact.soname),
        (v.OWNER_PURL, artifact.owner_purl),
        (v.INTEGRITY, artifact.integrity),
        (v.INTEGRITY_REASON, artifact.integrity_reason),
        (v.PROVENANCE, artifact.provenance),
        (v.PROVENANCE_SIGNER, artifact.provenance_signer),
        (v.PROVENANCE_CATALOG, artifact.provenance_catalog),
        (v.PROVENANCE_REASON, artifact.provenance_reason),
        (v.LAYER, artifact.layer),
        (v.FILE_ALIASES, ",".join(artifact.aliases) if artifact.aliases else None),
    ]
    ref = f"file:{artifact.path or artifact.name}"
    while ref in refs:
        ref += "#"
    refs.add(ref)
    entry: dict[str, Any] = {
        "type": "file",
        "bom-ref": ref,
        "name": artifact.name,
        "properties": [{"name": n, "value": val} for n, val in pairs if val]
        + [{"name": v.NOTE, "value": note} for note in artifact.notes],
    }
    if artifact.sha256:
        entry["hashes"] = [{"alg": "SHA-256", "content": artifact.sha256}]
    return entry


def libraries(session: Session, family: str | None, limit: int, offset: int) -> dict[str, Any]:
    """Each (family, version, CUDA major) in use with how many assets, images and hosts."""
    rows, total = repo.libraries(session, family, limit, offset)
    items = [
        {
            "family": fam,
            "version": ver,
            "cuda_major": cuda,
            "assets": int(assets),
            "images": int(images),
            "hosts": int(hosts),
            "files": int(files),
        }
        for fam, ver, cuda, assets, images, hosts, files in rows
    ]
    return _page(items, total, limit, offset)


def where_used(
    session: Session, match: LibraryMatch, query: AssetQuery, limit: int, offset: int
) -> dict[str, Any]:
    """Every asset whose latest scan holds the library, with the matching files."""
    if not match.any:
        raise BadRequest(
            "give at least one of family, version, sha256, verdict, integrity, provenance"
        )
    assets, files, total = repo.where_used(session, match, query, limit, offset)
    grouped: dict[int, list[dict[str, Any]]] = {asset.id: [] for asset in assets}
    for row in files:
        entry = dict(row)
        grouped[entry.pop("asset_id")].append(entry)
    items = [
        {
            "asset": {
                "id": asset.id,
                "kind": asset.kind,
                "name": asset.name,
                "identity": asset.identity,
                "labels": dict(asset.labels),
            },
            "libraries": grouped[asset.id],
        }
        for asset in assets
    ]
    return _page(items, total, limit, offset)


def _change_key(artifact: Artifact) -> tuple[str, str]:
    return (artifact.kind, artifact.path or f"{artifact.family}:{artifact.name}")


def _state(artifact: Artifact) -> dict[str, Any]:
    return {"version": artifact.version, "sha256": artifact.sha256, "family": artifact.family}


def drift(
    session: Session, family: str | None, query: AssetQuery, limit: int, offset: int
) -> dict[str, Any]:
    """(a) digest conflicts across the fleet, (b) changes between each asset's last two scans
    for a page of assets, (c) version spread per family."""
    conflicts: dict[tuple[Any, ...], dict[str, Any]] = {}
    for fam, comp, ver, cuda, arch, sha, assets, path in repo.digest_conflicts(
        session, family, limit=500
    ):
        group = conflicts.setdefault(
            (fam, comp, ver, cuda, arch),
            {
                "family": fam,
                "component": comp,
                "version": ver,
                "cuda_major": cuda,
                "arch": arch,
                "digests": [],
            },
        )
        group["digests"].append({"sha256": sha, "assets": int(assets), "example_path": path})

    spread: dict[str, dict[str, Any]] = {}
    for fam, ver, count in repo.version_spread(session, family):
        entry = spread.setdefault(fam, {"family": fam, "versions": []})
        entry["versions"].append({"version": ver, "assets": int(count)})

    asset_ids = repo.page_asset_ids(session, query, limit, offset)
    last_two = repo.last_two_scans(session, asset_ids)
    pairs = {a: ids for a, ids in last_two.items() if len(ids) == 2}
    artifacts = repo.scan_artifacts(session, [i for ids in pairs.values() for i in ids])
    by_scan: dict[int, dict[tuple[str, str], Artifact]] = {}
    for artifact in artifacts:
        by_scan.setdefault(artifact.scan_id, {})[_change_key(artifact)] = artifact
    changes = []
    for asset_id in asset_ids:
        if asset_id not in pairs:
            continue
        new_id, old_id = pairs[asset_id]
        new, old = by_scan.get(new_id, {}), by_scan.get(old_id, {})
        added = [{"path": k[1], **_state(new[k])} for k in sorted(new.keys() - old.keys())]
        removed = [{"path": k[1], **_state(old[k])} for k in sorted(old.keys() - new.keys())]
        changed = [
            {"path": k[1], "from": _state(old[k]), "to": _state(new[k])}
            for k in sorted(new.keys() & old.keys())
            if (new[k].sha256, new[k].version) != (old[k].sha256, old[k].version)
        ]
        if added or removed or changed:
            changes.append(
                {
                    "asset_id": asset_id,
                    "from_scan": old_id,
                    "to_scan": new_id,
                    "added": added,
                    "removed": removed,
                    "changed": changed,
                }
            )
    return {
        "digest_conflicts": list(conflicts.values()),
        "asset_changes": {"items": changes, "limit": limit, "offset": offset},
        "version_spread": [
            {**entry, "distinct_versions": len(entry["versions"])} for entry in spread.values()
        ],
    }


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
