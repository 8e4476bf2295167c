"""``/api/v1/assets``: the fleet's images and hosts, one asset's detail, and its SBOMs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response

from app.clock import utcnow
from app.domain import compliance
from app.domain.inventory import filters, queries, sbom, spdx
from app.domain.report_parser import LABEL_PATTERN
from app.http.deps import InventoryReader, SessionDep
from app.http.params import MAX_BIGINT, IdPath, Limit, Offset
from app.http.schemas import AssetPage, ErrorResponse
from app.http.schemas_policy import AssetDetailWithCompliance
from scanner import vocabulary as v

router = APIRouter(tags=["inventory"])

# String filters are bounded by the columns they are compared with (asset.name, artifact.family,
# artifact.version), so a value no row can hold is refused the same way on both databases; an
# empty one is refused too (it would otherwise select nothing less: a filter silently ignored).
Labels = Annotated[
    list[str] | None,
    Query(
        description="KEY=VALUE, repeatable (all must match; at most max_filter_values)",
        json_schema_extra={"items": {"type": "string", "pattern": LABEL_PATTERN}},
    ),
]
Family = Annotated[
    str | None, Query(min_length=1, max_length=64, description="library family, e.g. cudnn")
]
Version = Annotated[
    str | None,
    Query(
        max_length=128,
        description="9.1.0, 9.1.*, >=9.0,<9.2 (any family unless given), or one exact version",
        json_schema_extra={"pattern": filters.VERSION_PATTERN},
    ),
]
Verdict = Annotated[
    str | None,
    Query(
        description="integrity or provenance verdict of a library (either matches)",
        json_schema_extra={"enum": list(filters.VERDICT_VALUES)},
    ),
]
Integrity = Annotated[
    str | None,
    Query(
        description="integrity verdict of a library",
        json_schema_extra={"enum": list(v.INTEGRITY_VALUES)},
    ),
]
Loaded = Annotated[
    bool | None,
    Query(
        description="true: a library some live process maps (a host's --runtime scan); "
        "false: one no process maps"
    ),
]
Provenance = Annotated[
    str | None,
    Query(
        description="provenance verdict of a library",
        json_schema_extra={"enum": list(v.PROVENANCE_VALUES)},
    ),
]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}


@router.get("/assets", response_model=AssetPage)
def list_assets(
    reader: InventoryReader,
    session: SessionDep,
    kind: Literal["image", "host"] | None = None,
    name: Annotated[
        str | None,
        Query(min_length=1, max_length=1024, description="exact name, or a pattern with *"),
    ] = None,
    label: Labels = None,
    family: Family = None,
    version: Version = None,
    verdict: Verdict = None,
    integrity: Integrity = None,
    provenance: Provenance = None,
    loaded: Loaded = None,
    min_slsa_level: Annotated[
        int | None, Query(ge=0, le=3, description="verified SLSA Build level at least N")
    ] = None,
    signed: Annotated[
        bool | None, Query(description="whether the latest scan names an accepted image signer")
    ] = None,
    gpu_model: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=256,
            description="hosts with a GPU of this model (NVIDIA H100 80GB HBM3), or a pattern "
            "with *",
        ),
    ] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Assets, filtered by kind, name, labels, image trust, a host's GPU model and the libraries
    their latest scan holds."""
    match = filters.library_match(
        family=family,
        version=version,
        verdict=verdict,
        integrity=integrity,
        provenance=provenance,
        loaded=loaded,
    )
    query = filters.asset_query(
        kind=kind,
        name=name,
        labels=label or [],
        match=match,
        min_slsa_level=min_slsa_level,
        signed=signed,
        gpu_model=gpu_model,
        scope=reader.scope,
    )
    return queries.list_assets(session, query, limit, offset)


@router.get("/assets/{asset_id}", response_model=AssetDetailWithCompliance, responses=_NOT_FOUND)
def get_asset(reader: InventoryReader, session: SessionDep, asset_id: IdPath) -> dict[str, Any]:
    """One asset: its latest scan with libraries and packages, its scan history, and its
    compliance under every stored policy (404 outside the caller's team scope)."""
    detail = queries.asset_detail(session, asset_id, reader.scope)
    return {**detail, "compliance": compliance.asset_compliance(session, asset_id, utcnow())}


@router.get(
    "/assets/{asset_id}/sbom",
    responses={
        200: {"content": {sbom.MEDIA_TYPE: {}, spdx.MEDIA_TYPE: {}, "text/spdx": {}}},
        **_NOT_FOUND,
    },
)
def get_sbom(
    reader: InventoryReader,
    session: SessionDep,
    asset_id: IdPath,
    scan_id: Annotated[
        int | None,
        Query(ge=1, le=MAX_BIGINT, description="a scan of the history; default latest"),
    ] = None,
    format: Annotated[
        Literal["original", "normalized", "spdx"],
        Query(
            description="original: byte-for-byte as received (CycloneDX or SPDX); normalized: "
            "rebuilt CycloneDX 1.6; spdx: rebuilt SPDX 2.3 JSON"
        ),
    ] = "original",
) -> Response:
    """The SBOM of the asset's latest (or given) scan (404 outside the caller's team scope)."""
    queries.find_asset(session, asset_id, reader.scope)
    if format == "normalized":
        return Response(
            sbom.normalized_sbom(session, asset_id, scan_id), media_type=sbom.MEDIA_TYPE
        )
    if format == "spdx":
        return Response(
            spdx.spdx_sbom(session, asset_id, scan_id),
            media_type=spdx.MEDIA_TYPE,
            headers={"Content-Disposition": f'attachment; filename="asset-{asset_id}.spdx.json"'},
        )
    data, media_type = sbom.raw_sbom(session, asset_id, scan_id)
    # an SPDX report is handed back as SPDX; anything else was read as CycloneDX JSON
    spdx_media = media_type in (spdx.MEDIA_TYPE, "text/spdx")
    if not spdx_media:
        media_type = sbom.MEDIA_TYPE
    suffix = {"text/spdx": "spdx", spdx.MEDIA_TYPE: "spdx.json"}.get(media_type, "cdx.json")
    return Response(
        data,
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="asset-{asset_id}.{suffix}"'},
    )
