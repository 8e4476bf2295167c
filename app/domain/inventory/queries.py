"""Inventory queries: assets, libraries in use, where-used and drift, as JSON-ready data.

Everything here reads current state through the repositories' current-state queries; history is
read only per asset (detail, drift between an asset's last two scans).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.domain.inventory import history
from app.domain.inventory.serializers import asset_dict, library_dict, page, scan_dict
from app.errors import BadRequest, NotFound
from app.storage.repositories import assets as asset_repo
from app.storage.repositories import containers as containers_repo
from app.storage.repositories import gpus as gpus_repo
from app.storage.repositories import inventory as repo
from app.storage.repositories import scans as scan_repo
from app.storage.repositories import scopes
from app.storage.repositories import vulnerabilities as vuln_repo
from app.storage.repositories.inventory import AssetQuery, LibraryMatch
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import Artifact, Asset, AssetFileVerdicts, Scan

HISTORY_LIMIT = 50


def list_assets(
    session: Session, query: AssetQuery, limit: int, offset: int, sort: str | None = None
) -> dict[str, Any]:
    """A page of assets matching the filters (``sort``: one of `repo.SORTS`, ``-`` before it
    for the other way; default by id)."""
    rows, total = repo.list_assets(session, query, limit, offset, sort)
    return page([asset_dict(a, s) for a, s in rows], total, limit, offset)


def status_of(counts: AssetFileVerdicts | None) -> dict[str, Any]:
    """An asset's status from the kept verdict counts of its current files: the worst verdict
    (as `repo.status_rank` orders them) and the counts behind it."""
    if counts is None or counts.files == 0:
        return {"worst": "none", "files": 0}
    no_record = counts.files - counts.integrity_verified - counts.modified - counts.unowned
    if counts.provenance_conflict:
        worst = "conflict"
    elif counts.modified:
        worst = "modified"
    elif counts.unowned:
        worst = "unowned"
    elif counts.integrity_verified < counts.files:
        worst = "no-record"
    else:
        worst = "verified"
    return {
        "worst": worst,
        "files": counts.files,
        "conflict": counts.provenance_conflict,
        "modified": counts.modified,
        "unowned": counts.unowned,
        "no_record": max(0, no_record),
        "integrity_verified": counts.integrity_verified,
        "provenance_verified": counts.provenance_verified,
    }


def asset_statuses(session: Session, asset_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Each asset's status (`status_of`)."""
    counts = repo.file_verdicts(session, asset_ids)
    return {i: status_of(counts.get(i)) for i in asset_ids}


def find_asset(session: Session, asset_id: int, scope: AssetScope | None = None) -> Asset:
    """The asset with this id (404 when there is none, or it lies outside the caller's
    ``scope``: the same answer, so a scoped caller learns nothing of other teams' assets)."""
    asset = asset_repo.by_id(session, asset_id)
    if asset is None or (scope is not None and not scopes.asset_visible(session, asset_id, scope)):
        raise NotFound(f"no asset with id {asset_id}")
    return asset


def asset_detail(
    session: Session, asset_id: int, scope: AssetScope | None = None
) -> dict[str, Any]:
    """An asset with its latest scan, that scan's libraries and packages, and recent history."""
    asset = find_asset(session, asset_id, scope)
    latest = scan_repo.by_id(session, asset.latest_scan_id) if asset.latest_scan_id else None
    detail = asset_dict(asset, latest)
    current = repo.current_artifacts(session, asset_id)
    detail["libraries"] = [library_dict(a) for a in current]
    detail["loaded"] = loaded_summary(current, latest)
    detail["packages"] = (
        [
            {"name": p.name, "version": p.version, "purl": p.purl, "manager": p.manager}
            for p in repo.scan_packages(session, latest.id)
        ]
        if latest
        else []
    )
    detail["history"] = [scan_dict(s) for s in repo.history(session, asset_id, HISTORY_LIMIT)]
    detail.update(_containers(session, asset))
    detail["gpus"] = _gpus(session, asset)
    detail["injected"] = _injected(session, asset)
    detail["conditions"] = [
        {"name": c.name, "value": c.value, "source": c.source}
        for c in vuln_repo.conditions_with_sources(session, asset.id)
    ]
    return detail


def _injected(session: Session, asset: Asset) -> list[dict[str, Any]]:
    """The host files a host's container toolkit injects into its containers."""
    if asset.kind != "host":
        return []
    return [
        {
            "host_path": f.host_path,
            "sha256": f.sha256,
            "family": f.family,
            "version": f.version,
            "container_paths": list(f.container_paths),
            "devices": list(f.devices),
            "sources": list(f.sources),
        }
        for f in gpus_repo.injected_of_host(session, asset.id)
    ]


def loaded_summary(artifacts: Sequence[Artifact], latest: Scan | None) -> dict[str, Any] | None:
    """The "loaded by N processes / containers" for an asset's current libraries; None when its
    latest scan did not look at live processes."""
    if latest is None or latest.runtime is None:
        return None
    pids = {p.get("pid") for a in artifacts for p in a.loaded_by or []}
    containers = {p["container"] for a in artifacts for p in a.loaded_by or [] if "container" in p}
    loaded = [a for a in artifacts if a.loaded_processes]
    return {
        "processes": len(pids) or sum(a.loaded_processes for a in loaded),
        "containers": len(containers),
        "libraries": len(loaded),
        "deleted": sum(1 for a in loaded if a.loaded_deleted),
        "differs_from_disk": sum(1 for a in loaded if a.disk_sha256 is not None),
        "scan": dict(latest.runtime),
    }


def _gpus(session: Session, asset: Asset) -> list[dict[str, Any]]:
    """A host's GPUs (its latest report's), by PCI bus id; none for an image."""
    if asset.kind != "host":
        return []
    return [
        {
            "bus_id": g.bus_id,
            "model": g.model,
            "uuid": g.uuid,
            "minor": g.minor,
            "vbios": g.vbios,
            "architecture": g.architecture,
            "compute_capability": g.compute_capability,
        }
        for g in gpus_repo.of_host(session, asset.id)
    ]


#: hosts listed as running one image in its detail
RUNNING_ON_LIMIT = 500


def _containers(session: Session, asset: Asset) -> dict[str, list[dict[str, Any]]]:
    """A host's running containers linked to their image assets; the hosts an image runs on."""
    if asset.kind == "host":
        return {
            "containers": [
                {
                    "engine": c.engine,
                    "namespace": c.namespace,
                    "container_id": c.container_id,
                    "image_name": c.image_name,
                    "image_digest": c.image_digest,
                    "image_config": c.image_config,
                    "image_asset_id": image_id,
                }
                for c, image_id in containers_repo.of_host(session, asset.id)
            ],
            "running_on": [],
        }
    identity = asset.identity
    digest = identity if identity.startswith("sha256:") else None
    config = identity.removeprefix("config:") if identity.startswith("config:") else None
    config = config or (asset.details or {}).get("config_digest") or None
    return {
        "containers": [],
        "running_on": [
            {
                "host_asset_id": host.id,
                "host_name": host.name,
                "engine": c.engine,
                "namespace": c.namespace,
                "container_id": c.container_id,
            }
            for c, host in containers_repo.running_image(session, digest, config, RUNNING_ON_LIMIT)
        ],
    }


def find_scan(
    session: Session, asset_id: int, scan_id: int | None, scope: AssetScope | None = None
) -> Scan:
    """The asset's latest scan, or the given one of its history (404 otherwise, and for an
    asset outside ``scope``)."""
    asset = find_asset(session, asset_id, scope)
    wanted = scan_id or asset.latest_scan_id
    scan = scan_repo.by_id(session, wanted) if wanted else None
    if scan is None or scan.asset_id != asset.id:
        raise NotFound(f"asset {asset_id} has no scan {wanted}")
    return scan


def libraries(
    session: Session, family: str | None, limit: int, offset: int, scope: AssetScope | None = None
) -> dict[str, Any]:
    """Each (family, version, CUDA major) in use (in the scope) with how many assets, images
    and hosts."""
    rows, total = repo.libraries(session, family, limit, offset, scope)
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
    return page(items, total, limit, offset)


def where_used(
    session: Session, match: LibraryMatch, query: AssetQuery, limit: int, offset: int
) -> dict[str, Any]:
    """Every asset whose latest scan holds the library, with the matching files."""
    if not match.any:
        raise BadRequest(
            "give at least one of family, version, sha256, verdict, integrity, provenance, loaded"
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
    return page(items, total, limit, offset)


def digest_conflicts(
    session: Session, family: str | None, limit: int, scope: AssetScope | None = None
) -> list[dict[str, Any]]:
    """Current files of one (family, component, version, CUDA major, arch) with more than one
    digest across the fleet (at most ``limit`` groups), each digest with its asset count and an
    example path: the API's drift answer and the dashboard's drift page."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for fam, comp, ver, cuda, arch, sha, assets, path in repo.digest_conflicts(
        session, family, limit=limit, scope=scope
    ):
        group = groups.setdefault(
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
    return list(groups.values())


def drift(
    session: Session, family: str | None, query: AssetQuery, limit: int, offset: int
) -> dict[str, Any]:
    """(a) digest conflicts across the fleet, (b) changes between each asset's last two scans
    for a page of assets, (c) version spread per family; for a scoped caller (``query.scope``)
    all three over the scope's assets only."""
    scope = query.scope
    conflicts = digest_conflicts(session, family, 500, scope)

    spread: dict[str, dict[str, Any]] = {}
    for fam, ver, count in repo.version_spread(session, family, scope):
        entry = spread.setdefault(fam, {"family": fam, "versions": []})
        entry["versions"].append({"version": ver, "assets": int(count)})

    asset_ids = repo.page_asset_ids(session, query, limit, offset)
    last_two = repo.last_two_scans(session, asset_ids)
    pairs = {a: ids for a, ids in last_two.items() if len(ids) == 2}
    by_scan = history.by_key(
        repo.scan_change_facts(session, [i for ids in pairs.values() for i in ids])
    )
    changes = []
    for asset_id in asset_ids:
        if asset_id not in pairs:
            continue
        new_id, old_id = pairs[asset_id]
        diff = history.compare(by_scan.get(old_id, {}), by_scan.get(new_id, {}))
        if diff["added"] or diff["removed"] or diff["changed"]:
            changes.append({"asset_id": asset_id, "from_scan": old_id, "to_scan": new_id, **diff})
    loaded = [
        {
            "asset_id": asset_id,
            "path": path,
            "family": fam,
            "version": ver,
            "loaded_sha256": sha,
            "disk_sha256": disk,
            "processes": int(processes),
            "containers": int(containers),
            "deleted": bool(deleted),
        }
        for asset_id, path, fam, ver, sha, disk, processes, containers, deleted in (
            repo.loaded_drift(session, family, limit=500, scope=scope)
        )
    ]
    return {
        "loaded_differs_from_disk": loaded,
        "digest_conflicts": conflicts,
        "asset_changes": {"items": changes, "limit": limit, "offset": offset},
        "version_spread": [
            {**entry, "distinct_versions": len(entry["versions"])} for entry in spread.values()
        ],
    }


def fleet_counts(session: Session) -> dict[str, int]:
    """Fleet totals for the metrics endpoint: assets per kind, scans, current libraries."""
    return repo.counts(session)
