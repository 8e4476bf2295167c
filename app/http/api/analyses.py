"""``/api/v1/analyses``: triage decisions on advisories per CVE and asset or label selector
(docs/advisories.md, "Triage"). Callers holding ``triage`` (analysts, admins) write them;
the author is the authenticated caller, never a field of the body; every change is audited."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Query, Request, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from app.clock import utcnow
from app.domain import analyses
from app.http.body import read_model
from app.http.deps import (
    DatabaseDep,
    InventoryReader,
    SessionDep,
    SettingsDep,
    Triager,
    WriteSessionDep,
)
from app.http.follow import follow_advisories_change
from app.http.params import MAX_BIGINT, IdPath, Limit, Offset
from app.http.schemas import error_responses
from app.http.schemas_advisories import AnalysisOut, AnalysisPage

router = APIRouter(tags=["advisories"])

_EXAMPLE: dict[str, Any] = {
    "cve": "CVE-2023-0193",
    "asset_id": 12,
    "state": "not_affected",
    "justification": "vulnerable_code_not_in_execute_path",
    "detail": "cuobjdump is never run in this image: only its runtime libraries are used",
    "expires": "2027-06-30T00:00:00Z",
}


class AnalysisIn(BaseModel):
    """An analysis of one CVE for one asset (``asset_id``) or for the assets carrying every
    label of ``selector`` (exactly one of the two); the author is the caller. A not_affected
    analysis needs a justification or a detail, a fixed one a detail; a justification goes
    with not_affected only; an expiry lies in the future."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_EXAMPLE]})

    cve: str = Field(max_length=64, pattern=analyses.CVE_PATTERN)
    asset_id: int | None = Field(default=None, ge=1, le=MAX_BIGINT)
    selector: dict[Annotated[str, Field(max_length=128)], Annotated[str, Field(max_length=256)]] | (
        None
    ) = Field(default=None, max_length=analyses.MAX_SELECTOR_LABELS, examples=[{"env": "prod"}])
    state: Literal["not_affected", "affected", "fixed", "under_investigation"]
    justification: (
        Literal[
            "component_not_present",
            "vulnerable_code_not_present",
            "vulnerable_code_not_in_execute_path",
            "vulnerable_code_cannot_be_controlled_by_adversary",
            "inline_mitigations_already_exist",
        ]
        | None
    ) = None
    detail: str | None = Field(default=None, max_length=analyses.MAX_DETAIL)
    expires: AwareDatetime | None = None


async def _analysis_request(request: Request, _: Triager) -> AnalysisIn:
    # a dependency after Triager: the body is read once the caller is known to triage
    return await read_model(request, AnalysisIn, "an analysis")


@router.post(
    "/analyses",
    status_code=201,
    response_model=AnalysisOut,
    responses=error_responses(
        (404, "no such asset"),
        (413, "larger than 1 MiB"),
        (415, "not JSON"),
        (422, "not an analysis this service accepts: the message says why"),
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": AnalysisIn.model_json_schema()}},
        }
    },
    summary="Record an analysis of a CVE for an asset or a label selector",
)
def post_analysis(
    principal: Triager,
    body: Annotated[AnalysisIn, Depends(_analysis_request)],
    session: WriteSessionDep,
    settings: SettingsDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    response: Response,
) -> dict[str, Any]:
    """Store an analysis authored by the caller, audited. A not_affected analysis needs a
    justification or a detail, a fixed one a detail; an expiry must lie ahead."""
    expires: datetime | None = body.expires
    document = analyses.record_analysis(
        session,
        cve=body.cve,
        asset_id=body.asset_id,
        selector=body.selector,
        state=body.state,
        justification=body.justification,
        detail=body.detail,
        expires=expires,
        author=principal.actor.name,
        source=principal.actor.source,
        actor=principal.actor,
        now=utcnow(),
        scope=principal.scope,
    )
    response.headers["Location"] = f"/api/v1/analyses/{document['id']}"
    follow_advisories_change(session, db, background, utcnow(), author=document["author"])
    return {**document, "trusted": document["author"] in settings.trusted_authors}


@router.get("/analyses", response_model=AnalysisPage)
def list_analyses(
    reader: InventoryReader,
    session: SessionDep,
    settings: SettingsDep,
    cve: Annotated[str | None, Query(max_length=64, description="only this CVE")] = None,
    asset_id: Annotated[
        int | None,
        Query(ge=1, le=MAX_BIGINT, description="only those written for this asset"),
    ] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Analyses, newest first, each with whether its author is trusted."""
    return analyses.list_analyses(
        session,
        settings.trusted_authors,
        cve=cve,
        asset_id=asset_id,
        limit=limit,
        offset=offset,
        scope=reader.scope,
    )


@router.get(
    "/analyses/{analysis_id}",
    response_model=AnalysisOut,
    responses=error_responses((404, "no such analysis")),
)
def get_analysis(
    reader: InventoryReader, session: SessionDep, settings: SettingsDep, analysis_id: IdPath
) -> dict[str, Any]:
    """One analysis."""
    return analyses.get_analysis(session, analysis_id, settings.trusted_authors, reader.scope)


@router.delete(
    "/analyses/{analysis_id}",
    response_model=AnalysisOut,
    responses=error_responses((404, "no such analysis")),
)
def delete_analysis(
    principal: Triager,
    session: WriteSessionDep,
    settings: SettingsDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    analysis_id: IdPath,
) -> dict[str, Any]:
    """Withdraw an analysis (answered with it), audited: the finding shows the matcher's
    answer again from the next request on."""
    document = analyses.delete_analysis(
        session, analysis_id, principal.actor, utcnow(), principal.scope
    )
    follow_advisories_change(session, db, background, utcnow(), author=document["author"])
    return {**document, "trusted": document["author"] in settings.trusted_authors}
