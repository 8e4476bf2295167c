"""The asset page's runtime proposals (docs/advisories.md, "Runtime evidence"): the forms that
accept or dismiss one, for signed-in callers holding ``triage`` (CSRF-checked, audited as the
API's); the page lists them through `asset_context`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import RedirectResponse, Response

from app.clock import utcnow
from app.domain import proposals
from app.domain.tokens import Scope
from app.http.dashboard.auth import PageState, TriageUser, checked_form
from app.http.deps import DatabaseDep, SessionDep, WriteSessionDep
from app.http.follow import follow_advisories_change
from app.http.params import IdPath

router = APIRouter()

#: the asset page's proposals, newest first
PROPOSALS_SHOWN = 50


def asset_context(session: SessionDep, state: PageState, asset_id: int) -> dict[str, Any]:
    """What the asset page's proposals section shows (its own template, `_proposals.html`)."""
    page = proposals.list_proposals(
        session,
        asset_id,
        status=None,
        limit=PROPOSALS_SHOWN,
        offset=0,
        now=utcnow(),
        scope=state.user.scope,
    )
    return {
        "proposals": page,
        "proposals_triage": state.user.has(Scope.TRIAGE),
        "proposals_max_reason": proposals.MAX_REASON,
    }


@router.post("/proposals/{proposal_id}/accept")
async def accept(
    request: Request,
    state: TriageUser,
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    proposal_id: IdPath,
) -> Response:
    """Accept the proposal: its analysis, authored by the signed-in caller (back to the asset)."""
    await checked_form(request, state)
    now = utcnow()
    proposal, analysis = proposals.accept(session, proposal_id, state.actor, now, state.user.scope)
    follow_advisories_change(session, db, background, now, author=analysis["author"])
    return RedirectResponse(f"/assets/{proposal['asset_id']}#proposals", status_code=303)


@router.post("/proposals/{proposal_id}/dismiss")
async def dismiss(
    request: Request, state: TriageUser, session: WriteSessionDep, proposal_id: IdPath
) -> Response:
    """Dismiss the proposal with the reason typed, if any (back to the asset)."""
    form = await checked_form(request, state)
    proposal = proposals.dismiss(
        session, proposal_id, state.actor, utcnow(), state.user.scope, form.get("reason")
    )
    return RedirectResponse(f"/assets/{proposal['asset_id']}#proposals", status_code=303)
