"""``/api/v1/assets``: the fleet's images and hosts, one asset's detail, and its SBOMs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response

from app.domain import inventory
from app.http.deps import InventoryReader, SessionDep
from app.http.schemas import AssetDetail, AssetPage, ErrorResponse
from app.storage.repositories.inventory import AssetQuery, LibraryMatch

router = APIRouter(tags=["inventory"])

Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0)]
Labels = Annotated[list[str] | None, Query(description="KEY=VALUE, repeatable (all must match)")]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}


@router.get("/assets", response_model=AssetPage)
def list_assets(
    _: InventoryReader,
    session: SessionDep,
    kind: Literal["image", "host"] | None = None,
    name: Annotated[str | None, Query(description="exact name, or a pattern with *")] = None,
    label: Labels = None,
    family: str | None = None,
    version: Annotated[str | None, Query(description="9.1.0, 9.1.*, >=9.0,<9.2")] = None,
    verdict: Annotated[
        str | None, Query(description="integrity or provenance verdict of a library")
    ] = None,
    min_slsa_level: Annotated[
        int | None, Query(ge=0, le=3, description="verified SLSA Build level at least N")
    ] = None,
    signed: Annotated[
        bool | None, Query(description="whether the latest scan names an accepted image signer")
    ] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Assets, filtered by kind, name, labels, image trust and the libraries their latest scan
    holds."""
    match = LibraryMatch(
        family=family,
        version=inventory.version_filter(version),
        verdict=inventory.check_verdict(verdict),
    )
    query = AssetQuery(
        kind=kind,
        name=name,
        labels=inventory.parse_labels(label or []),
        match=match,
        min_slsa_level=min_slsa_level,
        signed=signed,
    )
    return inventory.list_assets(session, query, limit, offset)


@router.get("/assets/{asset_id}", response_model=AssetDetail, responses=_NOT_FOUND)
def get_asset(_: InventoryReader, session: SessionDep, asset_id: int) -> dict[str, Any]:
    """One asset: its latest scan with libraries and packages, and its scan history."""
    return inventory.asset_detail(session, asset_id)


@router.get(
    "/assets/{asset_id}/sbom",
    responses={
        200: {"content": {"application/vnd.cyclonedx+json": {}}},
        **_NOT_FOUND,
    },
)
def get_sbom(
    _: InventoryReader,
    session: SessionDep,
    asset_id: int,
    scan_id: Annotated[
        int | None, Query(description="a scan of the history; default latest")
    ] = None,
    format: Annotated[
        Literal["original", "normalized"],
        Query(description="original: byte-for-byte as received; normalized: rebuilt 1.6"),
    ] = "original",
) -> Response:
    """The SBOM of the asset's latest (or given) scan."""
    if format == "normalized":
        return JSONResponse(
            inventory.normalized_sbom(session, asset_id, scan_id),
            media_type="application/vnd.cyclonedx+json",
        )
    data, _media_type = inventory.raw_sbom(session, asset_id, scan_id)
    return Response(
        data,
        media_type="application/vnd.cyclonedx+json",
        headers={"Content-Disposition": f'attachment; filename="asset-{asset_id}.cdx.json"'},
    )
