"""Runtime proposals (docs/advisories.md, "Runtime evidence"): affected library files that no
process mapped over a host's observed window, proposed as not in the execute path. Readers list
them; callers holding ``triage`` accept one (an analysis authored by the caller) or dismiss it;
both are audited."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from app.clock import utcnow
from app.domain import proposals
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
from app.http.params import IdPath, Limit, Offset
from app.http.schemas import error_responses
from app.http.schemas_proposals import AcceptedOut, ProposalOut, ProposalPage

router = APIRouter(tags=["advisories"])

ProposalStatus = Annotated[
    Literal["proposed", "accepted", "dismissed", "withdrawn"] | None,
    Query(description="only proposals of this status"),
]
_DECIDED = error_responses(
    (404, "no such proposal"),
    (409, "it is no longer proposed, its evidence expired, or the host's latest scan changed"),
)


@router.get(
    "/assets/{asset_id}/proposals",
    response_model=ProposalPage,
    responses=error_responses((404, "no such asset")),
)
def list_proposals(
    reader: InventoryReader,
    session: SessionDep,
    asset_id: IdPath,
    status: ProposalStatus = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """The host's runtime proposals, newest first: CVE, files, the observed window, the expiry
    an acceptance gives, and what became of each."""
    return proposals.list_proposals(
        session,
        asset_id,
        status=status,
        limit=limit,
        offset=offset,
        now=utcnow(),
        scope=reader.scope,
    )


@router.get(
    "/proposals/{proposal_id}",
    response_model=ProposalOut,
    responses=error_responses((404, "no such proposal")),
)
def get_proposal(reader: InventoryReader, session: SessionDep, proposal_id: IdPath) -> Any:
    """One runtime proposal."""
    return proposals.get_proposal(session, proposal_id, utcnow(), reader.scope)


@router.post(
    "/proposals/{proposal_id}/accept",
    response_model=AcceptedOut,
    responses=_DECIDED,
    summary="Accept a runtime proposal: record its analysis, authored by the caller",
)
def accept_proposal(
    principal: Triager,
    session: WriteSessionDep,
    settings: SettingsDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    proposal_id: IdPath,
) -> dict[str, Any]:
    """Record the proposed analysis (not_affected / vulnerable_code_not_in_execute_path, the
    evidence as detail, the proposal's expiry) authored by the caller; both audited. It changes
    the gate only for an author on GPUPROV_VEX_TRUSTED_AUTHORS."""
    now = utcnow()
    proposal, analysis = proposals.accept(
        session, proposal_id, principal.actor, now, principal.scope
    )
    follow_advisories_change(session, db, background, now, author=analysis["author"])
    shown = {**analysis, "trusted": analysis["author"] in settings.trusted_authors}
    return {"proposal": proposal, "analysis": shown}


class DismissalIn(BaseModel):
    """Why the proposal is dismissed (optional; shown with it and audited)."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=proposals.MAX_REASON)


async def _dismissal(request: Request, _: Triager) -> DismissalIn:
    # a dependency after Triager: the body is read once the caller is known to triage; no
    # body at all is a dismissal without a reason
    if request.headers.get("content-length", "0") == "0" and (
        "transfer-encoding" not in request.headers
    ):
        return DismissalIn()
    return await read_model(request, DismissalIn, "a dismissal")


@router.post(
    "/proposals/{proposal_id}/dismiss",
    response_model=ProposalOut,
    responses={
        **_DECIDED,
        **error_responses(
            (413, "larger than 1 MiB"),
            (415, "not JSON"),
            (422, "not a dismissal this service accepts: the message says why"),
        ),
    },
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": DismissalIn.model_json_schema()}},
        }
    },
    summary="Dismiss a runtime proposal, with an optional reason",
)
def dismiss_proposal(
    principal: Triager,
    body: Annotated[DismissalIn, Depends(_dismissal)],
    session: WriteSessionDep,
    proposal_id: IdPath,
) -> Any:
    """Dismiss the proposal (audited, with the reason given); it is not made again for the same
    files."""
    return proposals.dismiss(
        session, proposal_id, principal.actor, utcnow(), principal.scope, body.reason
    )
