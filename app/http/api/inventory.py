"""``/api/v1``: libraries in use, where-used, drift, and the streamed inventory export."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, StreamingResponse

from app.domain.inventory import export as inventory_export
from app.domain.inventory import filters, queries
from app.http.api.assets import Family, Integrity, Labels, Loaded, Provenance, Verdict, Version
from app.http.deps import DatabaseDep, InventoryReader, SessionDep
from app.http.params import Limit, Offset
from app.http.schemas import Drift, LibraryPage, WhereUsedPage

router = APIRouter(tags=["inventory"])


# The hot list endpoints answer with JSONResponse: the models document them, and skipping the
# re-validation of thousands of rows per page keeps them within their latency budget.
@router.get("/libraries", response_model=LibraryPage)
def libraries(
    reader: InventoryReader,
    session: SessionDep,
    family: Family = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSONResponse:
    """Each (family, version, CUDA major) in use, with how many assets, images and hosts (of
    the caller's team scope)."""
    return JSONResponse(queries.libraries(session, family, limit, offset, reader.scope))


@router.get("/where-used", response_model=WhereUsedPage)
def where_used(
    reader: InventoryReader,
    session: SessionDep,
    family: Family = None,
    version: Version = None,
    sha256: Annotated[
        str | None,
        Query(
            max_length=71,
            description="file digest, 64 hex digits, optionally sha256:-prefixed",
            json_schema_extra={"pattern": filters.SHA256_PATTERN},
        ),
    ] = None,
    verdict: Verdict = None,
    integrity: Integrity = None,
    provenance: Provenance = None,
    loaded: Loaded = None,
    kind: Literal["image", "host"] | None = None,
    label: Labels = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> JSONResponse:
    """Every asset whose latest scan holds a library (by family, version, digest, verdicts or
    loaded; at least one of them, 400 otherwise, and every given filter must hold)."""
    match = filters.library_match(
        family=family,
        version=version,
        sha256=sha256,
        verdict=verdict,
        integrity=integrity,
        provenance=provenance,
        loaded=loaded,
    )
    query = filters.asset_query(kind=kind, labels=label or [], scope=reader.scope)
    return JSONResponse(queries.where_used(session, match, query, limit, offset))


@router.get("/drift", response_model=Drift)
def drift(
    reader: InventoryReader,
    session: SessionDep,
    family: Family = None,
    kind: Literal["image", "host"] | None = None,
    label: Labels = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSONResponse:
    """Digest conflicts and version spread (of ``family``, or all), and per-asset changes
    between the last two scans for a page of the assets that ``kind`` and ``label`` select."""
    query = filters.asset_query(kind=kind, labels=label or [], scope=reader.scope)
    # a page of rescanned assets' changes runs to thousands of entries (440 KB for 30 assets
    # whose every file changed): not validated again, as the list endpoints above
    return JSONResponse(queries.drift(session, family, query, limit, offset))


@router.get(
    "/inventory/export",
    responses={200: {"content": {"text/csv": {}, "application/json": {}}}},
)
def export(
    reader: InventoryReader,
    db: DatabaseDep,
    format: Literal["csv", "json"] = "json",
) -> StreamingResponse:
    """The whole current inventory, one row per library, streamed."""

    def chunks() -> Iterator[str]:
        with db.session() as session:
            yield from inventory_export.export(session, format, reader.scope)

    stream = chunks()
    first = next(stream)  # reach the database now, so an outage is a 503 rather than a cut stream
    media = "text/csv" if format == "csv" else "application/json"
    return StreamingResponse(
        chain([first], stream),
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="gpuprov-inventory.{format}"'},
    )
