"""``/decisions``: the gate's recorded decisions, filtered by policy, decision and subject
(an image digest or an exact name), each with its reasons and the controls they cite."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.domain import explore, gate
from app.domain.inventory import filters
from app.http.dashboard.auth import Reader
from app.http.dashboard.paging import PageNumber, Pager, PerPage, blank_to_none
from app.http.dashboard.templating import render
from app.http.deps import SessionDep
from app.http.params import IdPath

router = APIRouter()


@router.get("/decisions")
def decision_list(
    request: Request,
    state: Reader,
    session: SessionDep,
    policy: Annotated[str | None, Query(max_length=128)] = None,
    decision: Annotated[str | None, Query(max_length=8)] = None,
    subject: Annotated[str | None, Query(max_length=1024)] = None,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """Decisions, newest first."""
    policy, decision, subject = map(blank_to_none, (policy, decision, subject))
    filters.check_choice("decision", decision, gate.DECISIONS)
    result = gate.list_decisions(
        session,
        per_page,
        (page - 1) * per_page,
        policy=policy,
        decision=decision,
        subject=subject,
        scope=state.user.scope,
    )
    return render(
        request,
        "decisions.html",
        {
            "decisions": result["items"],
            "pager": Pager(page, per_page, result["total"]),
            "filters": {"policy": policy, "decision": decision, "subject": subject},
            "policies": explore.policy_names(session),
            "choices": gate.DECISIONS,
        },
    )


@router.get("/decisions/{decision_id}")
def decision_page(
    request: Request, state: Reader, session: SessionDep, decision_id: IdPath
) -> Response:
    """One decision: subject, policy version, every reason with its files and controls (404
    for a decision on an asset outside the user's team scope)."""
    found = explore.decision(session, decision_id, state.user.scope)
    return render(request, "decision.html", {"d": found})
