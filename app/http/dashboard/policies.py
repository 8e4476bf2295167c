"""``/policies``: the stored promotion policies, each one's versions, a version's document,
and the line diff between two versions; a link to the policy form for those who may change
policies (admins, analysts in no team)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from app.domain import explore, policies
from app.http.dashboard.auth import Reader
from app.http.dashboard.paging import PageNumber, Pager, PerPage
from app.http.dashboard.templating import render
from app.http.deps import SessionDep

router = APIRouter()

PolicyName = Annotated[
    str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
]
Version = Annotated[int, Path(ge=1, le=2_147_483_647)]
VersionQuery = Annotated[int | None, Query(ge=1, le=2_147_483_647)]


@router.get("/policies")
def policy_list(
    request: Request,
    state: Reader,
    session: SessionDep,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """The policies by name, with their current versions."""
    result = policies.list_policies(session, per_page, (page - 1) * per_page)
    return render(
        request,
        "policies.html",
        {
            "policies": result["items"],
            "pager": Pager(page, per_page, result["total"]),
            "may_write": policies.writer_refusal(state.user) is None,
        },
    )


@router.get("/policies/{name}")
def policy_versions(
    request: Request,
    state: Reader,
    session: SessionDep,
    name: PolicyName,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """A policy's versions, newest first, and its current document."""
    result = policies.history(session, name, per_page, (page - 1) * per_page)
    current = policies.policy_dict(policies.stored(session, name))
    return render(
        request,
        "policy.html",
        {
            "name": name,
            "versions": result["items"],
            "current": current,
            "shown": current,
            "pager": Pager(page, per_page, result["total"]),
            "may_write": policies.writer_refusal(state.user) is None,
        },
    )


@router.get("/policies/{name}/versions/{version}")
def policy_version(
    request: Request, state: Reader, session: SessionDep, name: PolicyName, version: Version
) -> Response:
    """One version's document."""
    shown = policies.policy_dict(policies.stored(session, name, version))
    current = policies.policy_dict(policies.stored(session, name))
    return render(
        request,
        "policy.html",
        {
            "name": name,
            "versions": None,
            "current": current,
            "shown": shown,
            "pager": None,
            "may_write": policies.writer_refusal(state.user) is None,
        },
    )


@router.get("/policies/{name}/diff")
def policy_diff(
    request: Request,
    _: Reader,
    session: SessionDep,
    name: PolicyName,
    from_: Annotated[int | None, Query(alias="from", ge=1, le=2_147_483_647)] = None,
    to: VersionQuery = None,
) -> Response:
    """The line diff between two versions (default: the current one and the one before)."""
    current = policies.stored(session, name).version
    new = to or current
    old = from_ or max(1, new - 1)
    return render(
        request, "policy_diff.html", {"diff": explore.policy_diff(session, name, old, new)}
    )
