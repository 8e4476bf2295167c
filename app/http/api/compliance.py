"""``/api/v1/compliance`` and ``/api/v1/controls``: fleet compliance per control under a stored
policy (counted from statuses stored at ingest and policy change), its drill-down and export,
and the controls catalog (SLSA v1.2 Build, CIS Controls v8, NIST CSF 2.0)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse, StreamingResponse

from app.clock import utcnow
from app.domain import compliance
from app.http.deps import DatabaseDep, InventoryReader, SessionDep
from app.http.params import Limit, Offset
from app.http.schemas import ErrorResponse
from app.http.schemas_policy import ComplianceControlPage, ComplianceSummary, ControlsListing

router = APIRouter(tags=["compliance"])
_NO_POLICY: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "no policy of this name is stored"}
}

PolicyQuery = Annotated[
    str,
    Query(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="a stored policy's name",
    ),
]
Framework = Annotated[
    Literal["nist-csf-2.0", "cis-v8", "slsa-v1.2"] | None,
    Query(description="only this framework's controls"),
]


@router.get("/compliance", response_model=ComplianceSummary, responses=_NO_POLICY)
def summary(
    reader: InventoryReader, session: SessionDep, policy: PolicyQuery, framework: Framework = None
) -> dict[str, Any]:
    """Per control the policy cites: how many assets (of the caller's team scope) pass, fail,
    or are not applicable."""
    return compliance.summary(session, policy, framework, utcnow(), reader.scope)


@router.get("/compliance/controls/{control_id}", response_model=ComplianceControlPage)
def control_detail(
    reader: InventoryReader,
    session: SessionDep,
    control_id: Annotated[str, Path(min_length=1, max_length=64, description="e.g. CIS-2.6")],
    policy: PolicyQuery,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """The assets failing one control under a policy, with the failing rules and files."""
    return compliance.control_detail(
        session, policy, control_id, utcnow(), limit, offset, reader.scope
    )


@router.get(
    "/compliance/export",
    responses={200: {"content": {"text/csv": {}, "application/json": {}}}, **_NO_POLICY},
)
def export(
    reader: InventoryReader,
    db: DatabaseDep,
    policy: PolicyQuery,
    framework: Framework = None,
    format: Literal["csv", "json"] = "json",
) -> StreamingResponse:
    """One row per (asset, control) the policy cites, with its status, streamed."""
    now = utcnow()

    def chunks() -> Iterator[str]:
        with db.session() as session:
            rows = compliance.export_rows(session, policy, framework, now, reader.scope)
            yield ""  # the policy is known: the answer starts
            encode = compliance.export_csv if format == "csv" else compliance.export_json
            yield from encode(rows)

    stream = chunks()
    first = next(stream)  # an unknown policy or a database outage answers before streaming
    return StreamingResponse(
        chain([first], stream),
        media_type="text/csv" if format == "csv" else "application/json",
        headers={
            "Content-Disposition": f'attachment; filename="gpuprov-compliance-{policy}.{format}"'
        },
    )


@router.get(
    "/compliance/attestation",
    responses={
        200: {
            "content": {"application/vnd.cyclonedx+json": {"schema": {"type": "object"}}},
            "description": "a CycloneDX 1.6 BOM with definitions.standards and declarations",
        },
        **_NO_POLICY,
    },
)
def attestation(
    reader: InventoryReader,
    session: SessionDep,
    policy: PolicyQuery,
    framework: Framework = None,
) -> JSONResponse:
    """Fleet compliance as a CycloneDX attestation (CDXA) for auditors: the standards and their
    cited requirements, a claim per asset and control with its evidence, and per requirement
    the passing claims, the failing ones as counter claims and a conformance score."""
    return JSONResponse(
        compliance.attestation(session, policy, framework, utcnow(), reader.scope),
        media_type="application/vnd.cyclonedx+json",
        headers={
            "Content-Disposition": f'attachment; filename="gpuprov-attestation-{policy}.cdx.json"'
        },
    )


@router.get("/controls", response_model=ControlsListing)
def controls(_: InventoryReader, framework: Framework = None) -> dict[str, Any]:
    """The controls catalog: frameworks, each control's official ID and title, and the policy
    rules that evidence it."""
    return compliance.catalog_listing(framework)
