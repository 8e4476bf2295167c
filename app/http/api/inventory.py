"""``/api/v1``: libraries in use, where-used, drift, and the streamed inventory export."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import chain
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, StreamingResponse

from app.domain import inventory
from app.errors import BadRequest
from app.http.api.assets import Labels, Limit, Offset
from app.http.deps import DatabaseDep, InventoryReader, SessionDep
from app.http.schemas import Drift, LibraryPage, WhereUsedPage
from app.storage.repositories.inventory import AssetQuery, LibraryMatch

router = APIRouter(tags=["inventory"])
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


# The hot list endpoints answer with JSONResponse: the models document them, and skipping the
# re-validation of thousands of rows per page keeps them within their latency budget.
@router.get("/libraries", response_model=LibraryPage)
def libraries(
    _: InventoryReader,
    session: SessionDep,
    family: str | None = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> JSONResponse:
    """Each (family, version, CUDA major) in use, with how many assets, images and hosts."""
    return JSONResponse(inventory.libraries(session, family, limit, offset))


@router.get("/where-used", response_model=WhereUsedPage)
def where_used(
    _: InventoryReader,
    session: SessionDep,
    family: str | None = None,
    version: Annotated[str | None, Query(description="9.1.0, 9.1.*, >=9.0,<9.2")] = None,
    sha256: Annotated[str | None, Query(description="file digest, 64 hex digits")] = None,
    verdict: Annotated[
        str | None, Query(description="integrity or provenance verdict, e.g. conflict")
    ] = None,
    kind: Literal["image", "host"] | None = None,
    label: Labels = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> JSONResponse:
    """Every asset whose latest scan holds a library (by family/version, digest or verdict)."""
    if sha256 is not None:
        sha256 = sha256.lower().removeprefix("sha256:")
        if not _SHA256.match(sha256):
            raise BadRequest("sha256 must be 64 hexadecimal digits")
    if version is not None and family is None:
        raise BadRequest("version needs family")
    match = LibraryMatch(
        family=family,
        version=inventory.version_filter(version),
        sha256=sha256,
        verdict=inventory.check_verdict(verdict),
    )
    query = AssetQuery(kind=kind, labels=inventory.parse_labels(label or []))
    return JSONResponse(inventory.where_used(session, match, query, limit, offset))


@router.get("/drift", response_model=Drift)
def drift(
    _: InventoryReader,
    session: SessionDep,
    family: str | None = None,
    kind: Literal["image", "host"] | None = None,
    label: Labels = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Digest conflicts, per-asset changes between the last two scans, version spread."""
    query = AssetQuery(kind=kind, labels=inventory.parse_labels(label or []))
    return inventory.drift(session, family, query, limit, offset)


@router.get(
    "/inventory/export",
    responses={200: {"content": {"text/csv": {}, "application/json": {}}}},
)
def export(
    _: InventoryReader,
    db: DatabaseDep,
    format: Literal["csv", "json"] = "json",
) -> StreamingResponse:
    """The whole current inventory, one row per library, streamed."""

    def chunks() -> Iterator[str]:
        with db.session() as session:
            rows = inventory.export_rows(session)
            yield from (inventory.export_csv if format == "csv" else inventory.export_json)(rows)

    stream = chunks()
    first = next(stream)  # reach the database now, so an outage is a 503 rather than a cut stream
    media = "text/csv" if format == "csv" else "application/json"
    return StreamingResponse(
        chain([first], stream),
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="gpuprov-inventory.{format}"'},
    )
