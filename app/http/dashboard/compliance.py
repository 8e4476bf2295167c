"""``/compliance``: per framework (NIST CSF 2.0, CIS Controls v8, SLSA v1.2) and per control
the policy cites, its official title and source with pass / fail / not-applicable counts; a
control's page lists the failing assets with the failing rules and their files."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from app.clock import utcnow
from app.domain import compliance, explore
from app.errors import BadRequest
from app.http.dashboard.auth import Reader
from app.http.dashboard.paging import PageNumber, Pager, PerPage, blank_to_none
from app.http.dashboard.templating import render
from app.http.deps import SessionDep, SettingsDep

router = APIRouter()

PolicyName = Annotated[str | None, Query(max_length=128)]
ControlId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]


def _framework(value: str | None) -> str | None:
    value = blank_to_none(value)
    if value is not None and value not in explore.framework_ids():
        raise BadRequest(f"framework must be one of {', '.join(explore.framework_ids())}")
    return value


@router.get("/compliance")
def summary(
    request: Request,
    state: Reader,
    session: SessionDep,
    settings: SettingsDep,
    policy: PolicyName = None,
    framework: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    """Per control of the chosen policy (`explore.choose_policy`: the one asked for, the
    configured default, the most gated, the first by name), the assets passing, failing and
    not applicable, grouped by framework; the page says which policy and why."""
    names = explore.policy_names(session)
    now = utcnow()
    choice = explore.choose_policy(session, blank_to_none(policy), settings.default_policy, now)
    chosen = choice.name
    fw = _framework(framework)
    scope = state.user.scope
    result = compliance.summary(session, chosen, fw, now, scope) if chosen else None
    frameworks = explore.frameworks()
    grouped = []
    if result is not None:
        for f in frameworks:
            controls = [c for c in result["controls"] if c["framework"] == f["id"]]
            if controls:
                grouped.append({**f, "controls": controls})
    return render(
        request,
        "compliance.html",
        {
            "policies": names,
            "policy": chosen,
            "choice": choice,
            "framework": fw,
            "frameworks": frameworks,
            "result": result,
            "grouped": grouped,
        },
    )


@router.get("/compliance/controls/{control_id}")
def control(
    request: Request,
    state: Reader,
    session: SessionDep,
    settings: SettingsDep,
    control_id: ControlId,
    policy: PolicyName = None,
    page: PageNumber = 1,
    per_page: PerPage = 25,
) -> Response:
    """The assets failing one control under the policy (chosen as the compliance page
    chooses it), each with the failing rules that cite the control and the files they name."""
    choice = explore.choose_policy(
        session, blank_to_none(policy), settings.default_policy, utcnow()
    )
    chosen = choice.name
    if chosen is None:
        raise BadRequest("no promotion policy is stored yet")
    result = compliance.control_detail(
        session, chosen, control_id, utcnow(), per_page, (page - 1) * per_page, state.user.scope
    )
    return render(
        request,
        "control.html",
        {
            "result": result,
            "policy": chosen,
            "frameworks": {f["id"]: f for f in explore.frameworks()},
            "pager": Pager(page, per_page, result["total"]),
        },
    )
