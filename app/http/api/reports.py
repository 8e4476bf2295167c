"""``POST /api/v1/reports``: agents and CI jobs deliver CycloneDX reports here."""

from __future__ import annotations

import gzip
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from app.clock import utcnow
from app.domain import compliance
from app.domain.ci_tokens import CiGrant, remember_use
from app.domain.ingest import RawReport, ingest
from app.domain.inventory.filters import label_filters
from app.domain.report_parser import LABEL_PATTERN, Report, ReportLimits, parse_report
from app.domain.retention import retention_of
from app.domain.tokens import Principal
from app.errors import Forbidden, PayloadTooLarge
from app.http.body import (
    ACCEPTED_MEDIA_TYPES,
    ReceivedReport,
    ingest_slot,
    read_report,
    report_encoding,
)
from app.http.deps import CatalogsDep, DatabaseDep, ReportWriter, SettingsDep
from app.http.metrics import Metrics
from app.http.schemas import BOM_EXAMPLE, ErrorResponse, IngestAnswer
from app.settings import Settings
from scanner.bom.spdx_reader import media_type_of

router = APIRouter(tags=["reports"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in (
        (400, "bad gzip body, or a bad label parameter"),
        (401, "missing or invalid token"),
        (403, "token lacks report:write or may not report for this asset"),
        (409, "serial number reused with different content"),
        (408, "the body arrived slower than GPUPROV_BODY_MIN_RATE"),
        (
            413,
            "report larger than a configured limit (bytes, components, properties, labels; "
            "labels counted with those the asset keeps)",
        ),
        (
            415,
            "not CycloneDX JSON or SPDX (JSON, tag-value), a charset other than UTF-8, or an "
            "unsupported encoding",
        ),
        (
            422,
            "not a valid CycloneDX or SPDX 2.2/2.3 report (SPDX: details name the SPDX field), "
            "a BOM of neither an image nor a host (an "
            "application's own SBOM), or a value the service cannot store; details carry JSON "
            "pointers",
        ),
        (503, "database unavailable or too many reports at once; retry after Retry-After"),
    )
}


def report_limits(settings: Settings) -> ReportLimits:
    """The report limits the settings give."""
    return ReportLimits(
        max_depth=settings.max_json_depth,
        max_components=settings.max_report_components,
        max_properties=settings.max_component_properties,
        max_clock_skew=timedelta(seconds=settings.max_clock_skew_seconds),
        max_labels=settings.max_asset_labels,
    )


async def _labels(
    settings: SettingsDep,
    label: Annotated[
        list[str] | None,
        Query(
            description="asset label KEY=VALUE (repeatable); overrides gpuprov:label:KEY",
            json_schema_extra={"items": {"type": "string", "pattern": LABEL_PATTERN}},
        ),
    ] = None,
) -> dict[str, str]:
    # query parameters: checked as the label filters are (400, the rules of stored labels),
    # and counted before the body is read
    labels = dict(label_filters(label or []))
    _check_label_count(len(labels), settings, "label parameters")
    return labels


Labels = Annotated[dict[str, str], Depends(_labels)]


def _check_label_count(count: int, settings: Settings, where: str) -> None:
    cap = settings.max_asset_labels
    if count > cap:
        raise PayloadTooLarge(
            f"{count} asset labels ({where}); an asset carries at most {cap} "
            "(GPUPROV_MAX_ASSET_LABELS)"
        )


async def _received(
    request: Request, settings: SettingsDep, principal: ReportWriter, _labels: Labels
) -> AsyncIterator[ReceivedReport]:
    # authorized (and the labels checked), then the headers, then a slot, then the body: no
    # byte of a body is held for a caller who may not send it or while every slot is taken
    encoding = report_encoding(request, settings)
    with ingest_slot(request, principal, settings):
        yield await read_report(request, settings, encoding)


ReportBody = Annotated[ReceivedReport, Depends(_received, scope="function")]


@router.post(
    "/reports",
    status_code=201,
    response_model=IngestAnswer,
    responses={200: {"model": IngestAnswer, "description": "already stored"}, **_ERRORS},
    summary="Ingest a CycloneDX report (JSON, optionally gzip)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "a CycloneDX 1.4-1.7 JSON BOM; `Content-Encoding: gzip` accepted",
            "content": {
                media_type: {"schema": {"type": "object"}, "example": BOM_EXAMPLE}
                for media_type in ACCEPTED_MEDIA_TYPES
            },
        }
    },
)
def post_report(
    principal: ReportWriter,
    body: ReportBody,
    labels: Labels,
    db: DatabaseDep,
    settings: SettingsDep,
    catalogs: CatalogsDep,
    request: Request,
    response: Response,
) -> IngestAnswer:
    """Store a report once: a repeated delivery answers 200 with the stored scan's id.

    A plain function: FastAPI runs it in its thread pool, so decompressing, parsing and checking
    a large report happen off the event loop, and the ingest slot its body was read in bounds
    how many run at once.
    """
    metrics: Metrics = request.app.state.metrics
    started = time.perf_counter()
    try:
        grant = getattr(request.state, "ci_grant", None)
        answer = _ingest(principal, body, db, settings, catalogs, response, labels, metrics, grant)
    except Exception as e:
        metrics.reports.labels("refused").inc()
        if isinstance(e, Forbidden):  # an asset-bound token reporting for another asset
            metrics.auth_failures.labels("asset").inc()
        raise
    metrics.ingest_seconds.observe(time.perf_counter() - started)
    metrics.reports.labels("created" if answer.created else "duplicate").inc()
    return answer


def _count_failures(metrics: Metrics, report: Report) -> None:
    """Count the verification failures a new report states: files whose bytes differ from
    their package's record, files a signed catalog contradicts, rejected image signatures."""
    failures = metrics.verification_failures
    for library in report.libraries:
        if library.integrity == "modified":
            failures.labels("file_integrity").inc()
        if library.provenance == "conflict":
            failures.labels("file_provenance").inc()
    if report.asset.trust.rejected:
        failures.labels("image_signature").inc(len(report.asset.trust.rejected))


def _ingest(
    principal: Principal,
    body: ReceivedReport,
    db: DatabaseDep,
    settings: Settings,
    catalogs: CatalogsDep,
    response: Response,
    labels: dict[str, str],
    metrics: Metrics,
    grant: CiGrant | None = None,
) -> IngestAnswer:
    now = utcnow()
    data = body.decompressed()
    report = parse_report(data, report_limits(settings), now=now)
    merged = report.asset.labels.keys() | labels.keys()
    _check_label_count(len(merged), settings, "the report's and the label parameters together")
    # the stored copy: the gzip stream as received, else compressed at a fast level
    stored = body.gzip_data or gzip.compress(data, compresslevel=1)
    # the content says what the report is: SPDX sent as application/json is kept as SPDX
    raw = RawReport(media_type_of(data) or body.media_type, len(data), stored)
    metrics.report_bytes.observe(len(data))
    # the transaction is opened here, not by a dependency: a sync dependency costs two more
    # worker-thread hops per report (enter and exit); it commits before the answer is sent
    with db.transaction(write=True) as session:
        if grant is not None:  # a CI job's token pushes one report (refused in the same commit)
            remember_use(session, grant, now)
        result = ingest(
            session,
            report,
            raw,
            principal,
            labels,
            now,
            catalogs,
            retention_of(settings),
            max_labels=settings.max_asset_labels,
            scoping_labels=settings.scoping_labels,
            proposal_days=settings.runtime_proposal_days,
        )
    # compliance follows the asset's latest scan, once it is committed; a retried delivery
    # (the first answer was lost, perhaps with the evaluation that followed it) redoes it
    if result.latest or result.redelivered_latest:
        compliance.after_ingest(db, result.asset_id, now)
    if result.created:
        _count_failures(metrics, report)
    response.status_code = 201 if result.created else 200
    url = f"/api/v1/assets/{result.asset_id}"
    response.headers["Location"] = url
    return IngestAnswer(
        scan_id=result.scan_id,
        asset_id=result.asset_id,
        created=result.created,
        latest=result.latest,
        libraries=result.library_count,
        asset_url=url,
        ignored_labels=list(result.ignored_labels),
    )
