"""The dashboard's triage forms (docs/advisories.md, "Triage"): what the asset and advisory pages
need to show analyses and the forms recording them (those pages' modules hold the routes), the
route withdrawing an analysis, and the confirmation a form's redirect carries to the page it
lands on (post/redirect/get).

Every form calls the domain functions ``/api/v1/analyses`` calls, so it accepts and refuses
exactly what the API does: the author is the signed-in user (never a field), the asset scope is
the user's, and every change is audited."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import RedirectResponse, Response

from app.clock import utcnow
from app.domain import analyses
from app.domain.analyses import InvalidAnalysis
from app.http.dashboard.auth import (
    PageState,
    TriageUser,
    _cookie_secure,
    checked_form,
    safe_next,
    signer_of,
)
from app.http.deps import DatabaseDep, SessionDep, WriteSessionDep
from app.http.follow import follow_advisories_change
from app.http.params import MAX_BIGINT, IdPath

router = APIRouter()

#: the confirmation a form's redirect leaves for the page it lands on, signed, for a minute
FLASH_COOKIE = "gpuprov_flash"
FLASH_SECONDS = 60
#: the longest confirmation (JSON-escaped): the signed cookie stays under its 1,024 characters
_FLASH_CHARS = 600
#: the analyses listed on an asset's or an advisory's page, newest first (the API pages on)
ANALYSES_SHOWN = 50
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ID = re.compile(r"[0-9]{1,19}")


def options(state: PageState) -> dict[str, Any]:
    """What the pages' triage forms offer this user: none without ``triage``; label selectors
    only to callers who see the whole fleet (a selector names assets of every team)."""
    return {
        "allowed": state.may_triage,
        "selectors": state.may_triage and state.user.scope is None,
        "states": analyses.STATES,
        "justifications": analyses.JUSTIFICATIONS,
        "tomorrow": (utcnow().date() + timedelta(days=1)).isoformat(),
    }


def _expired(item: Mapping[str, Any], now: datetime) -> bool:
    return item["expires"] is not None and datetime.fromisoformat(item["expires"]) <= now


def listed(
    session: SessionDep,
    state: PageState,
    trusted: Collection[str],
    *,
    cve: str | None = None,
    asset_id: int | None = None,
) -> dict[str, Any]:
    """The newest analyses of a CVE or written for an asset (of the user's scope), each with
    whether it is trusted and where it stands: ``in force`` (the one the asset's finding
    shows), ``outweighed`` (another applies), ``expired``; on a CVE's page only ``expired``."""
    now = utcnow()
    found = analyses.list_analyses(
        session,
        trusted,
        cve=cve,
        asset_id=asset_id,
        limit=ANALYSES_SHOWN,
        offset=0,
        scope=state.user.scope,
    )
    in_force: set[int] = set()
    if asset_id is not None:
        applied = analyses.applied(session, [asset_id], now, trusted)
        in_force = {a.row.id for a in applied.values()}
    for item in found["items"]:
        if _expired(item, now):
            item["standing"] = "expired"
        elif asset_id is not None:
            item["standing"] = "in force" if item["id"] in in_force else "outweighed"
        else:
            item["standing"] = None
    return found


# -- the posted form ----------------------------------------------------------------------------


def expiry(text: str) -> datetime | None:
    """The expiry field: blank (none), a date (the start of that day, UTC: what the browser's
    date field sends) or an RFC 3339 time; the domain checks that it has a zone and lies ahead."""
    text = text.strip()
    if not text:
        return None
    try:
        if _DATE.fullmatch(text):
            return datetime.combine(date.fromisoformat(text), time.min, UTC)
        return datetime.fromisoformat(text.upper())
    except ValueError:
        raise InvalidAnalysis(
            "expires",
            f"{text[:40]!r} is neither a date (2027-01-31) nor a time with its zone "
            "(2027-01-31T12:00:00Z)",
        ) from None


def fields(form: Mapping[str, str]) -> dict[str, Any]:
    """An analysis's own fields from a posted form (blank: none), for the domain to check."""
    return {
        "state": form.get("state", "").strip(),
        "justification": form.get("justification", "").strip() or None,
        "detail": form.get("detail", "").strip() or None,
        "expires": expiry(form.get("expires", "")),
    }


def asset_id_of(text: str) -> int:
    """The asset field: a positive id (the number in /assets/ID)."""
    text = text.strip()
    if not _ID.fullmatch(text) or not 0 < int(text) <= MAX_BIGINT:
        raise InvalidAnalysis("asset_id", "give an asset's id (the number in /assets/ID)")
    return int(text)


def selector_of(text: str) -> dict[str, str]:
    """The selector field: ``label=value`` lines; a line without ``=`` or a label given twice
    is refused, not dropped (the domain checks how many and how long)."""
    labels: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidAnalysis("selector", f"line {line[:80]!r} is not label=value")
        if key in labels:
            raise InvalidAnalysis("selector", f"label {key[:40]!r} is given twice")
        labels[key] = value.strip()
    return labels


def record(
    session: WriteSessionDep,
    state: PageState,
    db: DatabaseDep,
    background: BackgroundTasks,
    form: Mapping[str, str],
    *,
    cve: str,
    asset_id: int | None = None,
    selector: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Store the posted analysis as ``POST /api/v1/analyses`` does: authored by the signed-in
    user, audited, confined to their scope; a trusted author's moves fleet compliance.
    InvalidAnalysis (422) names the field at fault."""
    now = utcnow()
    actor = state.actor
    document = analyses.record_analysis(
        session,
        cve=cve,
        asset_id=asset_id,
        selector=selector,
        **fields(form),
        author=actor.name,
        source=actor.source,
        actor=actor,
        now=now,
        scope=state.user.scope,
    )
    follow_advisories_change(session, db, background, now, author=document["author"])
    return document


def described(document: Mapping[str, Any], asset: str | None = None) -> str:
    """An analysis in words: ``CVE-… not affected (component not present) for <asset>``."""
    what = document["state"].replace("_", " ")
    if document["justification"]:
        what += f" ({document['justification'].replace('_', ' ')})"
    if document["selector"] is not None:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(document["selector"].items()))
        target = f"the assets labelled {labels}"
    else:
        target = asset or f"asset {document['asset_id']}"
    return f"{document['cve']} {what} for {target}"


def recorded_message(document: Mapping[str, Any], trusted: Collection[str], asset: str) -> str:
    """The confirmation of a stored analysis, saying whether the gate counts it."""
    counted = (
        "its author is trusted: the gate and compliance count it"
        if document["author"] in trusted
        else "its author is not on GPUPROV_VEX_TRUSTED_AUTHORS: shown, the gate does not count it"
    )
    return (
        f"Recorded analysis {document['id']}: {described(document, asset)}, "
        f"by {document['author']} ({counted})."
    )


# -- post/redirect/get --------------------------------------------------------------------------


def _bound(state: PageState) -> str:
    # a confirmation is its session's: another sign-in in the same browser never sees it
    return hashlib.sha256(state.csrf.encode()).hexdigest()[:16]


def _fit(message: str) -> str:
    while len(json.dumps(message)) > _FLASH_CHARS:
        message = message[: len(message) * 3 // 4].rstrip() + "…"
    return message


def redirect(request: Request, state: PageState, target: str, message: str) -> Response:
    """303 to ``target`` (a local path), whose page then shows ``message`` once."""
    payload = {
        "m": _fit(message),
        "p": urlsplit(target).path,
        "s": _bound(state),
        "e": int(utcnow().timestamp()) + FLASH_SECONDS,
    }
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        FLASH_COOKIE,
        signer_of(request).sign("flash", payload),
        max_age=FLASH_SECONDS,
        path="/",
        httponly=True,
        samesite="strict",
        secure=_cookie_secure(request),
    )
    return response


def take_flash(request: Request, state: PageState) -> str | None:
    """The confirmation a form's redirect left for this page and session, if any (signed by
    this service: a cookie set by anyone else is no message)."""
    payload = signer_of(request).unsign("flash", request.cookies.get(FLASH_COOKIE))
    if payload is None:
        return None
    try:
        message, path, bound, expires = (
            str(payload["m"]),
            str(payload["p"]),
            str(payload["s"]),
            int(payload["e"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    if path != request.url.path or bound != _bound(state):
        return None
    return message if utcnow().timestamp() < expires else None


def flash_shown(request: Request, response: Response) -> Response:
    """``response`` ending the confirmation it showed (a reload shows the page alone)."""
    response.delete_cookie(
        FLASH_COOKIE, path="/", httponly=True, samesite="strict", secure=_cookie_secure(request)
    )
    return response


# -- withdrawing ----------------------------------------------------------------------------------


@router.post("/analyses/{analysis_id}/withdraw")
async def withdraw_analysis(
    request: Request,
    state: TriageUser,
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    analysis_id: IdPath,
) -> Response:
    """Withdraw an analysis as ``DELETE /api/v1/analyses/{id}`` does (audited; 404 outside the
    user's scope, 403 for a team's user and a label selector's analysis), then back to the page
    it was withdrawn from (``next``, a local path)."""
    form = await checked_form(request, state)
    back = form.get("next", "").strip()
    target = safe_next(back) if back else None
    now = utcnow()
    document = analyses.delete_analysis(session, analysis_id, state.actor, now, state.user.scope)
    follow_advisories_change(session, db, background, now, author=document["author"])
    if target is None:
        target = (
            f"/assets/{document['asset_id']}#vulnerabilities"
            if document["asset_id"] is not None
            else f"/advisories/{quote(document['cve'])}#analyses"
        )
    message = f"Withdrew analysis {analysis_id}: {described(document)}, by {document['author']}."
    return redirect(request, state, target, message)
