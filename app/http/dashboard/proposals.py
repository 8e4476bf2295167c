"""The asset page's runtime proposals (docs/advisories.md, "Runtime evidence"): the forms that
accept or dismiss one, for signed-in callers holding ``triage`` (CSRF-checked, audited as the
API's); the page lists them through `asset_context`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import RedirectResponse, Response

from app.clock import utcnow
from app.domain import audit, compliance, proposals
from app.domain.tokens import Scope
from app.errors import Forbidden
from app.http.dashboard.auth import PageState, Reader, checked_form
from app.http.deps import DatabaseDep, SessionDep, SettingsDep, WriteSessionDep
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
    return {"proposals": page, "proposals_triage": state.user.has(Scope.TRIAGE)}


def _actor(state: PageState) -> audit.Actor:
    if state.user.person is not None:
        return state.user.actor  # the person signed in with the OpenID Provider
    return audit.web_actor(state.user.name, state.user.token_id)


async def _triager(request: Request, state: PageState) -> None:
    # the scope first, then the form (its CSRF token): a reader's post is refused unread
    if not state.user.has(Scope.TRIAGE):
        raise Forbidden("deciding a runtime proposal needs the triage scope")
    await checked_form(request, state)


@router.post("/proposals/{proposal_id}/accept")
async def accept(
    request: Request,
    state: Reader,
    session: WriteSessionDep,
    settings: SettingsDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    proposal_id: IdPath,
) -> Response:
    """Accept the proposal: its analysis, authored by the signed-in caller (back to the asset)."""
    await _triager(request, state)
    now = utcnow()
    proposal, analysis = proposals.accept(
        session, proposal_id, _actor(state), now, state.user.scope
    )
    trusted = settings.trusted_authors
    if analysis["author"] in trusted:  # what the advisories rule sees changed
        pending = compliance.reevaluate_after_advisories_change(session, now, trusted)
        if pending:
            background.add_task(compliance.reevaluate_pending_all, db, pending, now)
    return RedirectResponse(f"/assets/{proposal['asset_id']}#proposals", status_code=303)


@router.post("/proposals/{proposal_id}/dismiss")
async def dismiss(
    request: Request, state: Reader, session: WriteSessionDep, proposal_id: IdPath
) -> Response:
    """Dismiss the proposal (back to the asset)."""
    await _triager(request, state)
    proposal = proposals.dismiss(session, proposal_id, _actor(state), utcnow(), state.user.scope)
    return RedirectResponse(f"/assets/{proposal['asset_id']}#proposals", status_code=303)
