"""``/api/v1/advisories``: security advisories by CVE (docs/advisories.md); admins import one
document at a time (CSAF 2.0, OSV or a CVE Record), as `gpuprov advisories import` does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Path, Query, Request, Response

from app.clock import utcnow
from app.domain import advisories, audit, vulnerabilities
from app.http.body import uploaded
from app.http.deps import (
    Admin,
    DatabaseDep,
    InventoryReader,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
)
from app.http.follow import follow_advisories_change
from app.http.params import IdPath, Limit, Offset
from app.http.schemas import error_responses
from app.http.schemas_advisories import (
    AdvisoryAffectedPage,
    AdvisoryDetailOut,
    AdvisoryImportOut,
    AdvisoryPage,
    AssetVulnerabilityPage,
)

router = APIRouter(tags=["advisories"])

ADVISORY_TYPES = ("application/json", "application/csaf+json", "application/vnd.osv+json")
#: the request body the API document shows: an OSV record (a CSAF document is longer)
ADVISORY_EXAMPLE: dict[str, Any] = {
    "schema_version": "1.6.0",
    "id": "GHSA-xxxx-yyyy-zzzz",
    "modified": "2026-02-01T00:00:00Z",
    "published": "2026-01-15T00:00:00Z",
    "aliases": ["CVE-2026-1111"],
    "summary": "An issue in a CUDA wheel",
    "affected": [
        {
            "package": {"ecosystem": "PyPI", "name": "nvidia-cuda-nvrtc-cu12"},
            "ranges": [
                {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "12.9.86"}]}
            ],
        }
    ],
    "database_specific": {"severity": "HIGH"},
}


async def _advisory_body(
    request: Request, settings: SettingsDep, principal: Admin
) -> AsyncIterator[bytes]:
    async with uploaded(
        request,
        principal,
        settings,
        settings.max_advisory_bytes,
        ADVISORY_TYPES,
        "an advisory document",
        "one CSAF, OSV or CVE Record document",
    ) as raw:
        yield raw


AdvisoryBody = Annotated[bytes, Depends(_advisory_body, scope="function")]


@router.post(
    "/advisories",
    status_code=201,
    response_model=AdvisoryImportOut,
    responses={
        200: {"model": AdvisoryImportOut, "description": "nothing changed (see outcome)"},
        **error_responses(
            (413, "larger than GPUPROV_MAX_ADVISORY_BYTES"),
            (503, "every ingest slot is taken (GPUPROV_MAX_CONCURRENT_INGESTS)"),
            (415, "not a JSON media type"),
            (422, "not JSON, not CSAF 2.0 / OSV / a CVE Record, or a CSAF mandatory test fails"),
        ),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"type": "object"}, "example": ADVISORY_EXAMPLE}
            },
        }
    },
    summary="Import one advisory document (CSAF 2.0, OSV or CVE Record 5.x)",
)
def post_advisory(
    principal: Admin,
    raw: AdvisoryBody,
    session: WriteSessionDep,
    settings: SettingsDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    response: Response,
) -> dict[str, Any]:
    """Read the document as the CLI does and store it under the revision rules; its source is
    recorded as the caller (there is no .sha256 to check: integrity is the caller's TLS)."""
    adv = advisories.parse_document(raw, settings.max_advisory_bytes)
    result = advisories.import_advisory(
        session,
        adv,
        raw,
        source=f"api:{principal.actor.name}",
        digest_mismatch=False,
        now=utcnow(),
    )
    if result.changed:
        # the fleet's findings follow the feed in the same transaction, and the compliance of
        # the policies gating on them (on a large fleet, after the answer)
        vulnerabilities.rematch(session, utcnow())
        follow_advisories_change(session, db, background, utcnow())
        audit.record_advisory(
            session,
            principal.actor,
            adv.publisher_namespace,
            adv.tracking_id,
            {"version": adv.version, "outcome": result.outcome},
        )
    response.status_code = 201 if result.changed else 200
    return {
        "outcome": result.outcome,
        "bulletin": result.tracking_id,
        "version": result.version,
        "vulnerabilities": result.vulnerabilities,
        "unparsed_versions": result.unparsed,
        "note": result.note,
    }


@router.get("/advisories", response_model=AdvisoryPage, response_model_exclude_none=False)
def list_advisories(
    reader: InventoryReader,
    session: SessionDep,
    cve: Annotated[
        str | None, Query(max_length=64, description="exactly this CVE (CVE-2025-23280)")
    ] = None,
    severity: Annotated[
        Literal["low", "medium", "high", "critical"] | None,
        Query(description="only advisories of this severity"),
    ] = None,
    product: Annotated[
        str | None,
        Query(max_length=128, description="a product name contains this text (GeForce, CUDA)"),
    ] = None,
    affected: Annotated[
        bool | None,
        Query(
            description="true: only advisories some asset is affected by (an `affected` "
            "finding on its latest scan); false: only those no asset is"
        ),
    ] = None,
    sort: Annotated[
        Literal["newest", "severity", "affected"],
        Query(
            description="newest published first, worst severity (then score) first, or the "
            "most affected assets first"
        ),
    ] = "newest",
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Advisories by CVE, newest first: every bulletin naming it, its top severity and score,
    how many assets it affects, and whether a document's published digest did not match."""
    return advisories.list_advisories(
        session,
        cve=cve,
        severity=severity,
        product=product,
        affected=affected,
        sort=sort,
        limit=limit,
        offset=offset,
        scope=reader.scope,
    )


@router.get(
    "/advisories/{cve}",
    response_model=AdvisoryDetailOut,
    responses=error_responses((404, "no stored advisory names this CVE")),
)
def get_advisory(
    reader: InventoryReader,
    session: SessionDep,
    cve: Annotated[str, Path(min_length=1, max_length=64, description="the CVE id")],
) -> dict[str, Any]:
    """One CVE: each document's statement of it with every product's status and version text
    (closed statuses with the reason a newer revision gave)."""
    return advisories.get_advisory(session, cve, reader.scope)


FindingStatus = Annotated[
    Literal["affected", "not_affected", "fixed", "under_investigation"] | None,
    Query(description="only findings of this status"),
]


@router.get(
    "/advisories/{cve}/affected",
    response_model=AdvisoryAffectedPage,
    responses=error_responses((404, "no stored advisory names this CVE")),
)
def get_advisory_affected(
    reader: InventoryReader,
    session: SessionDep,
    settings: SettingsDep,
    cve: Annotated[str, Path(min_length=1, max_length=64, description="the CVE id")],
    status: FindingStatus = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """The assets this CVE was matched on, with the files and versions found and the answer
    (affected, not_affected with a justification, fixed, under_investigation)."""
    return vulnerabilities.advisory_affected(
        session,
        cve,
        status=status,
        limit=limit,
        offset=offset,
        trusted=settings.trusted_authors,
        now=utcnow(),
        scope=reader.scope,
    )


@router.get(
    "/assets/{asset_id}/vulnerabilities",
    response_model=AssetVulnerabilityPage,
    responses=error_responses((404, "no such asset")),
)
def get_asset_vulnerabilities(
    reader: InventoryReader,
    session: SessionDep,
    settings: SettingsDep,
    asset_id: IdPath,
    status: FindingStatus = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """The advisories matched on one asset: per CVE and product found, the answer with its
    evidence and the analysis in force, and the feed (imported when) it was matched against."""
    return vulnerabilities.asset_vulnerabilities(
        session,
        asset_id,
        status=status,
        limit=limit,
        offset=offset,
        trusted=settings.trusted_authors,
        now=utcnow(),
        scope=reader.scope,
    )
