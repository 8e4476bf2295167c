"""VEX (docs/vex.md): ``GET /api/v1/assets/{id}/vex`` writes one asset's advisory findings as
OpenVEX v0.2.0 or CycloneDX 1.6 VEX; ``POST /api/v1/vex`` (triage) reads an OpenVEX or
CycloneDX VEX document and records its statements as analyses of the assets they name
(``dry_run=true``: only what it would record)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Query, Request
from fastapi.responses import Response

from app.clock import utcnow
from app.domain import vex
from app.http.body import uploaded
from app.http.deps import (
    DatabaseDep,
    InventoryReader,
    SessionDep,
    SettingsDep,
    Triager,
    WriteSessionDep,
)
from app.http.follow import follow_advisories_change
from app.http.params import IdPath
from app.http.schemas import error_responses
from app.http.schemas_advisories import VexImportOut
from scanner import __version__

router = APIRouter(tags=["advisories"])

VEX_TYPES = ("application/json", "application/vnd.cyclonedx+json")
#: the request body the API document shows: a one-statement OpenVEX document
EXAMPLE: dict[str, Any] = {
    "@context": "https://openvex.dev/ns/v0.2.0",
    "@id": "urn:uuid:2f4c3b1e-0f7a-5d2b-9c1e-6a8b7d5e4f30",
    "author": "Example Corp PSIRT",
    "timestamp": "2026-01-15T00:00:00Z",
    "version": 1,
    "statements": [
        {
            "vulnerability": {"name": "CVE-2023-0193"},
            "products": [
                {
                    "@id": "pkg:oci/train@sha256:" + "ab" * 32,
                    "subcomponents": [{"@id": "pkg:generic/nvidia/cuobjdump@11.8.86"}],
                }
            ],
            "status": "not_affected",
            "justification": "vulnerable_code_not_in_execute_path",
        }
    ],
}


@router.get(
    "/assets/{asset_id}/vex",
    responses={
        200: {"content": {media: {} for media in vex.MEDIA_TYPES.values()}},
        **error_responses(
            (404, "no such asset, never matched, or (OpenVEX) no finding to state"),
        ),
    },
    summary="The asset's advisory findings as a VEX document",
)
def get_asset_vex(
    reader: InventoryReader,
    session: SessionDep,
    settings: SettingsDep,
    asset_id: IdPath,
    format: Annotated[
        Literal["openvex", "cyclonedx"],
        Query(description="openvex: OpenVEX v0.2.0; cyclonedx: CycloneDX 1.6 VEX"),
    ] = "openvex",
) -> Response:
    """One statement per finding (CVE, product found): status, justification or action, and
    how it was determined; the same stored facts give the same document."""
    text = vex.asset_vex(
        session,
        asset_id,
        format,
        author=settings.vex_author,
        tooling=f"gpuprov {__version__}",
        scope=reader.scope,
    )
    suffix = "openvex.json" if format == "openvex" else "cdx.json"
    return Response(
        text,
        media_type=vex.MEDIA_TYPES[format],
        headers={"Content-Disposition": f'attachment; filename="asset-{asset_id}.{suffix}"'},
    )


async def _vex_body(
    request: Request, settings: SettingsDep, principal: Triager
) -> AsyncIterator[bytes]:
    # megabytes and a schema check
    async with uploaded(
        request,
        principal,
        settings,
        settings.max_vex_bytes,
        VEX_TYPES,
        "a VEX document",
        "one OpenVEX or CycloneDX VEX document",
    ) as raw:
        yield raw


VexBody = Annotated[bytes, Depends(_vex_body, scope="function")]


@router.post(
    "/vex",
    response_model=VexImportOut,
    responses=error_responses(
        (413, "larger than GPUPROV_MAX_VEX_BYTES"),
        (415, "not a JSON media type"),
        (503, "every ingest slot is taken (GPUPROV_MAX_CONCURRENT_INGESTS)"),
        (422, "not OpenVEX v0.2.0 / CycloneDX VEX, or a statement refused (the reason said)"),
    ),
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}}
    },
    summary="Import a VEX document as analyses of the assets it names",
)
def post_vex(
    principal: Triager,
    raw: VexBody,
    settings: SettingsDep,
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    dry_run: Annotated[
        bool, Query(description="true: answer what would be recorded, and record nothing")
    ] = False,
) -> dict[str, Any]:
    """Each statement becomes an analysis of every stored asset it names, authored by the
    caller (the document's own author is kept in the source), audited; a statement that names
    no stored asset is listed as unmatched. All or nothing: one refused statement records none."""
    now = utcnow()
    answer = vex.import_vex(
        session,
        raw,
        max_bytes=settings.max_vex_bytes,
        dry_run=dry_run,
        author=principal.actor.name,
        actor=principal.actor,
        now=now,
        scope=principal.scope,
    )
    if answer["recorded"]:
        follow_advisories_change(session, db, background, now, author=principal.actor.name)
    return answer
