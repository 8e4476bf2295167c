"""Ingest one checked report: one transaction, idempotent, safe under concurrent reports.

The asset row is upserted and locked first, so reports for one asset are applied one at a time;
the scan with the latest (scanned_at, id) is the asset's latest, whatever order reports arrive
in (a spooled old report delivered late joins the history without replacing current state; of
two reports with the same timestamp the one stored last wins). Parsing refuses timestamps ahead
of the service's clock; a latest scan stored before that rule, dated beyond any accepted skew,
gives way to the next report instead of holding the asset forever.
The scan insert itself is the idempotency check (``ON CONFLICT (dedup_key) DO NOTHING``).
Once the service holds reference catalogs, library files get its own provenance verdicts (the
service is the system of record); until then they keep the verdicts their report carries.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.domain import notifications, proposals, teams, vulnerabilities
from app.domain.provenance import ActiveCatalogs, CatalogCache
from app.domain.report_parser import Report, ReportLibrary
from app.domain.retention import RetentionPolicy, prune_asset
from app.domain.tokens import Principal
from app.domain.versions import version_key
from app.errors import Conflict, Forbidden, PayloadTooLarge
from app.storage.repositories import assets, containers, fleet, gpus, scans, scopes
from app.storage.tables import Scan

#: beyond the largest clock skew the settings accept: a latest scan dated this far ahead of
#: now was stored before future timestamps were refused
_FUTURE = timedelta(days=1, minutes=1)


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What happened to a report."""

    scan_id: int
    asset_id: int
    created: bool  # False: the same report was already stored
    latest: bool  # whether it is now the asset's latest scan
    library_count: int
    #: a repeated delivery of the asset's latest scan: its compliance is brought up to date
    #: again, in case the evaluation after the first delivery was cut short (its answer lost)
    redelivered_latest: bool = False
    #: label keys the report gave that only admins set (scoping labels: docs/teams.md)
    ignored_labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RawReport:
    """The report bytes as received, compressed for storage."""

    media_type: str
    size: int
    gzip_data: bytes


def ingest(
    session: Session,
    report: Report,
    raw: RawReport,
    principal: Principal,
    labels: Mapping[str, str],
    now: datetime,
    catalogs: CatalogCache | None = None,
    retention: RetentionPolicy | None = None,
    max_labels: int | None = None,
    scoping_labels: Sequence[str] = (),
    proposal_days: int = proposals.DEFAULT_DAYS,
) -> IngestResult:
    """Store a report (the caller commits); raises Forbidden, Conflict or PayloadTooLarge (more
    than ``max_labels`` labels with the asset's stored ones), and then the caller's rollback
    leaves nothing behind. With `catalogs`, files get the service's verdicts; with
    `retention`, the asset's history past it goes in the same transaction. A host's runtime
    proposals follow its report (``proposal_days``: their expiry after the window).

    Labels whose key is a scoping key (``scoping_labels``, GPUPROV_SCOPING_LABELS, and every key
    a team selects on) or that an admin assigned to the asset are not the report's to set: they
    are ignored (and named in the result). A team's token writes only within its team's scope:
    an asset outside it is refused as an asset pattern refuses one, and an asset no admin has
    given scoping labels takes the team's."""
    spec = report.asset
    if not principal.may_report_for(spec.name):
        raise Forbidden(f"token {principal.name!r} may not report for asset {spec.name!r}")
    # before any row lock: catalog changes take this lock first too
    active = catalogs.for_ingest(session) if catalogs is not None else None
    asset = assets.upsert_locked(
        session,
        {
            "kind": spec.kind,
            "identity": spec.identity,
            "name": spec.name,
            "labels": {},
            "details": dict(spec.details),
            "first_seen": now,
            "last_seen": now,
        },
    )
    if asset.name != spec.name and not principal.may_report_for(asset.name):
        raise Forbidden(f"token {principal.name!r} may not report for asset {asset.name!r}")
    assigned = _confine(session, principal, asset.id, asset.name)

    scanned_at = report.timestamp or now
    scan_id = scans.insert_if_new(
        session,
        {
            "asset_id": asset.id,
            "dedup_key": report.dedup_key,
            "serial_number": report.serial_number,
            "bom_version": report.bom_version,
            "content_sha256": report.content_sha256,
            "spec_version": report.spec_version,
            "producer": report.producer,
            "tool": report.tool,
            "scanned_at": scanned_at,
            "received_at": now,
            "library_count": len(report.libraries),
            "findings": list(report.findings),
            "skipped": list(report.skipped),
            "token_id": principal.token_id,
            "image_signer": spec.trust.signer,
            "slsa_level": spec.trust.slsa_level,
            "slsa_builder": spec.trust.builder,
            "slsa_source_repo": spec.trust.source_repo,
            "signature_rejected": list(spec.trust.rejected),
            "runtime": dict(report.runtime) if report.runtime is not None else None,
        },
    )
    if scan_id is None:  # stored before (possibly by a concurrent delivery of the same report)
        existing = scans.by_dedup_key(session, report.dedup_key)
        assert existing is not None
        return _duplicate(session, existing, report, raw, existing.id == asset.latest_scan_id)

    previous = (
        (asset.latest_scanned_at, asset.latest_scan_id)
        if asset.latest_scan_id is not None and asset.latest_scanned_at is not None
        else None
    )
    latest = previous is None or (scanned_at, scan_id) >= previous or previous[0] > now + _FUTURE
    files = _store_contents(session, scan_id, asset.id, report, raw, latest, active)
    # webhooks: in this transaction, so the event exists exactly when the report does
    ref = {
        "id": asset.id,
        "kind": spec.kind,
        "name": asset.name,
        "labels": {**asset.labels, **spec.labels, **labels},
    }
    notifications.integrity_modified(session, now, ref, scan_id, files)
    if retention is not None:  # under the asset's row lock: no other report of it interleaves
        prune_asset(session, retention, asset.id, now, spare=scan_id)
    if not latest:
        assets.set_latest(session, asset.id, {"last_seen": now})
        return IngestResult(scan_id, asset.id, True, False, len(report.libraries))
    known = asset.latest_scan_id is not None  # a new asset has no current rows to replace
    retired = (
        scans.retire_current(session, asset.latest_scan_id)
        if asset.latest_scan_id is not None
        else []
    )
    scans.replace_summary(
        session, asset.id, summary_rows(asset.id, spec.kind, report), replace=known
    )
    if spec.kind == "host" and (known or spec.containers):
        containers.replace_for_host(
            session,
            asset.id,
            [
                {
                    "engine": c.engine,
                    "namespace": c.namespace,
                    "container_id": c.container_id,
                    "image_name": c.image_name,
                    "image_digest": c.image_digest,
                    "image_config": c.image_config,
                }
                for c in spec.containers
            ],
            replace=known,
        )
    if spec.kind == "host" and (known or spec.gpus):
        gpus.replace_for_host(
            session,
            asset.id,
            [
                {
                    "bus_id": g.bus_id,
                    "model": g.model,
                    "uuid": g.uuid,
                    "minor": g.minor,
                    "vbios": g.vbios,
                    "architecture": g.architecture,
                    "compute_capability": g.compute_capability,
                }
                for g in spec.gpus
            ],
            replace=known,
        )
    if spec.kind == "host" and (known or spec.injected):
        gpus.replace_injected(
            session,
            asset.id,
            [
                {
                    "host_path": f.host_path,
                    "sha256": f.sha256,
                    "family": f.family,
                    "version": f.version,
                    "container_paths": list(f.container_paths),
                    "devices": list(f.devices),
                    "sources": list(f.sources),
                }
                for f in spec.injected
            ],
            replace=known,
        )
    values: dict[str, object] = {
        "latest_scan_id": scan_id,
        "latest_scanned_at": scanned_at,
        "details": dict(spec.details),
        "last_seen": now,
    }
    if spec.kind == "host":
        # a host is named by its own hostname: a renamed machine is renamed here. An image keeps
        # the name it was first stored under: one digest has as many names as tags, registries
        # and files it was read from, and a report names it after its source (a gate of
        # `oci-archive:image.tar` says `image:demo`), which is no reason to rename it
        values["name"] = spec.name
    # a report sets the labels it gives and keeps the others: a push or a gate without the
    # agent's `label=` parameters must not drop what an earlier push gave the asset; scoping
    # labels are the admins' (an agent relabelling its report moves nothing between teams)
    protected = teams.protected_keys(session, scoping_labels)
    given = {**spec.labels, **labels}
    allowed = teams.reported_labels(given, protected, assigned)
    ignored = tuple(sorted(given.keys() - allowed.keys()))
    merged = {**asset.labels, **allowed, **assigned}
    if max_labels is not None and len(merged) > max_labels:
        raise PayloadTooLarge(
            f"the asset would carry {len(merged)} labels (those stored and this report's); "
            f"at most {max_labels} (GPUPROV_MAX_ASSET_LABELS)"
        )
    if merged != asset.labels:
        values["labels"] = merged
        assets.replace_labels(session, asset.id, merged, replace=bool(asset.labels))
    assets.set_latest(session, asset.id, values)
    if principal.scope is not None and not scopes.asset_visible(session, asset.id, principal.scope):
        # a host renamed by its own report out of its writer's team scope
        raise Forbidden(f"token {principal.name!r} may not report for asset {spec.name!r}")
    # the advisories the new latest scan carries, against the stored feed
    vulnerabilities.store_products(session, asset.id, report.products, replace=known)
    vulnerabilities.store_conditions(session, asset.id, spec.conditions, replace=known)
    facts = vulnerabilities.facts_of_report(
        report.products,
        (lib.family for lib in report.libraries),
        spec.conditions,
        report.packages,
    )
    vulnerabilities.rematch(session, now, [asset.id], facts=facts)
    if spec.kind == "host":  # runtime evidence: what live processes map (--runtime)
        seen = proposals.observation(scan_id, scanned_at, report.runtime)
        proposals.observe(session, asset.id, seen, now, proposal_days)
    notifications.drift_of_report(session, now, {**ref, "labels": merged}, retired, files)
    # last before the commit: rows other assets' ingests share stay locked the least time
    fleet.apply_asset_change(session, asset.id, retired, files)
    return IngestResult(
        scan_id, asset.id, True, True, len(report.libraries), ignored_labels=ignored
    )


def _confine(session: Session, principal: Principal, asset_id: int, name: str) -> dict[str, str]:
    """The asset's scoping labels, once a team-scoped writer is known to write within its
    scope (the asset's row is locked: its scoping labels cannot change meanwhile). An asset no
    admin has labelled takes the writer's team's labels; one outside the scope is refused."""
    assigned = scopes.scope_labels(session, asset_id)
    scope = principal.scope
    if scope is None or scopes.asset_visible(session, asset_id, scope):
        return assigned
    if not assigned:
        assigned = teams.assign_on_create(session, asset_id, scope)
        if scopes.asset_visible(session, asset_id, scope):
            return assigned
    raise Forbidden(f"token {principal.name!r} may not report for asset {name!r}")


def _duplicate(
    session: Session, existing: Scan, report: Report, raw: RawReport, is_latest: bool
) -> IngestResult:
    if existing.content_sha256 != report.content_sha256 and not _same_document(
        session, existing.id, raw
    ):
        raise Conflict(
            f"serial number {report.serial_number} version {report.bom_version} was already "
            "ingested with different content; give a changed BOM a new serial number or "
            "a higher version"
        )
    return IngestResult(
        existing.id, existing.asset_id, False, False, existing.library_count, is_latest
    )


def _same_document(session: Session, scan_id: int, raw: RawReport) -> bool:
    """Whether the stored report and this one are the same JSON in other bytes (a BOM pushed,
    then sent inside a gate request, which serializes it again)."""
    stored = scans.raw_bom(session, scan_id)
    if stored is None:
        return False
    try:
        before = json.loads(gzip.decompress(stored.gzip_data))
        return bool(before == json.loads(gzip.decompress(raw.gzip_data)))
    except (OSError, ValueError, RecursionError):
        return False


def _provenance(lib: ReportLibrary, active: ActiveCatalogs | None) -> dict[str, str | None]:
    if active is None or lib.kind != "file":
        return {
            "provenance": lib.provenance,
            "provenance_signer": lib.provenance_signer,
            "provenance_catalog": lib.provenance_catalog,
            "provenance_reason": lib.provenance_reason,
        }
    verdict = active.verdict(
        lib.path or lib.name,
        lib.family,
        lib.version,
        lib.sha256,
        cuda_major=lib.cuda_major,
        arch=lib.arch,
        owner_purl=lib.owner_purl,
    )
    return {
        "provenance": verdict.provenance.value,
        "provenance_signer": verdict.signer,
        "provenance_catalog": verdict.catalog,
        "provenance_reason": verdict.reason,
    }


def _store_contents(
    session: Session,
    scan_id: int,
    asset_id: int,
    report: Report,
    raw: RawReport,
    latest: bool,
    active: ActiveCatalogs | None,
) -> list[dict[str, Any]]:
    """Store the scan's raw BOM, packages and artifacts; returns the artifact rows."""
    packages = [
        {
            "scan_id": scan_id,
            "purl": p.purl,
            "manager": p.manager,
            "name": p.name,
            "version": p.version,
            "bom_ref": p.bom_ref,
            "source_name": p.source_name,
            "source_version": p.source_version,
        }
        for p in report.packages
    ]
    artifacts = artifact_rows(report, scan_id, asset_id, latest, active)
    raw_row = {
        "scan_id": scan_id,
        "media_type": raw.media_type,
        "size": raw.size,
        "gzip_data": raw.gzip_data,
    }
    scans.add_contents(session, raw_row, packages, artifacts)
    return artifacts


def artifact_rows(
    report: Report, scan_id: int, asset_id: int, latest: bool, active: ActiveCatalogs | None
) -> list[dict[str, Any]]:
    """The file rows a report's scan stores (current when it is the asset's latest), each
    file's provenance judged against the ``active`` catalogs when there are any."""
    return [
        {
            "scan_id": scan_id,
            "asset_id": asset_id,
            "is_current": latest,
            "kind": lib.kind,
            "name": lib.name,
            "path": lib.path,
            "family": lib.family,
            "component": lib.component,
            "version": lib.version,
            "version_key": version_key(lib.version),
            "cuda_major": lib.cuda_major,
            "arch": lib.arch,
            "sha256": lib.sha256,
            "integrity": lib.integrity,
            "integrity_reason": lib.integrity_reason,
            **_provenance(lib, active),
            "layer": lib.layer,
            "owner_purl": lib.owner_purl,
            "soname": lib.soname,
            "aliases": list(lib.aliases),
            "notes": list(lib.notes),
            "loaded_processes": lib.loaded_processes,
            "loaded_containers": lib.loaded_containers,
            "loaded_deleted": lib.loaded_deleted,
            "loaded_copy": lib.loaded_copy,
            "disk_sha256": lib.disk_sha256,
            "loaded_by": [dict(p) for p in lib.loaded_by],
        }
        for lib in report.libraries
    ]


def summary_rows(asset_id: int, asset_kind: str, report: Report) -> list[dict[str, object]]:
    """The asset's current-state summary rows for a report that became its latest."""
    counts = Counter((lib.family, lib.version, lib.cuda_major) for lib in report.libraries)
    return [
        {
            "asset_id": asset_id,
            "asset_kind": asset_kind,
            "family": family,
            "version": version,
            "version_key": version_key(version),
            "cuda_major": cuda_major,
            "file_count": count,
        }
        for (family, version, cuda_major), count in counts.items()
    ]
