"""Runtime proposals (docs/advisories.md, "Runtime evidence"): affected library files that no
process mapped over a host's observed window, proposed as not in the execute path. Readers list
them; callers holding ``triage`` accept one (an analysis authored by the caller) or dismiss it;
both are audited."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Query

from app.clock import utcnow
from app.domain import compliance, proposals
from app.http.deps import (
    DatabaseDep,
    InventoryReader,
    SessionDep,
    SettingsDep,
    Triager,
    WriteSessionDep,
)
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
    trusted = settings.trusted_authors
    if analysis["author"] in trusted:  # what the advisories rule sees changed
        pending = compliance.reevaluate_after_advisories_change(session, now, trusted)
        if pending:
            background.add_task(compliance.reevaluate_pending_all, db, pending, now)
    shown = {**analysis, "trusted": analysis["author"] in trusted}
    return {"proposal": proposal, "analysis": shown}


@router.post(
    "/proposals/{proposal_id}/dismiss",
    response_model=ProposalOut,
    responses=_DECIDED,
    summary="Dismiss a runtime proposal",
)
def dismiss_proposal(principal: Triager, session: WriteSessionDep, proposal_id: IdPath) -> Any:
    """Dismiss the proposal (audited); it is not made again for the same files."""
    return proposals.dismiss(session, proposal_id, principal.actor, utcnow(), principal.scope)
