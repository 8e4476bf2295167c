"""``/admin``: the admin scope's pages, each a form posted with the session's CSRF token:
promotion policies (store a new version; policy writers too: analysts in no team), the trust
policy, reference catalogs (import a signed one), API tokens (create, revoke), CI trust rules
(store, remove), webhooks (create, remove, send a test message), teams (store, remove), the
scoping labels of assets, and the group mappings (store, remove). They call the same
domain services as the API, so a form accepts and refuses exactly what the API does; a refusal
shows the form again with the reason."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Path, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from app.clock import utcnow
from app.domain import (
    audit,
    catalogs,
    ci_rules,
    compliance,
    group_mappings,
    policies,
    teams,
    tokens,
    webhooks,
)
from app.domain.notifications import EVENTS, SEVERITIES
from app.domain.tokens import Scope
from app.domain.webhook_delivery import delivery_config, send_test
from app.errors import AppError, NotFound
from app.http.dashboard.auth import AdminUser, PageState, PolicyWriterUser, checked_form
from app.http.dashboard.paging import PageNumber, Pager, PerPage
from app.http.dashboard.templating import render
from app.http.deps import DatabaseDep, SessionDep, SettingsDep, WriteSessionDep
from app.http.params import IdPath
from scanner.wording import counted

router = APIRouter(prefix="/admin")

SCOPES = tuple(s.value for s in Scope)
#: the expiry the token form offers (docs/dashboard.md): a token made in a browser is short-lived
#: unless its maker asks otherwise; a blank field makes one that never expires, as the CLI does
TOKEN_EXPIRY_DEFAULT = "90d"


def _actor(state: PageState) -> audit.Actor:
    """The signed-in admin as the audit log names them."""
    return state.actor


def _refused(
    request: Request,
    session: WriteSessionDep,
    template: str,
    context: Callable[[], dict[str, Any]],
    error: AppError,
    *,
    unprocessable: bool = False,
    **shown: Any,
) -> Response:
    """The form's page again with the refusal and what was typed (``shown``), nothing of the
    post kept. ``unprocessable``: a 400 is answered 422, as the API answers the same check."""
    session.rollback()  # before the context is read: the page shows what is stored
    status = 422 if unprocessable and error.status == 400 else error.status
    return render(request, template, {**context(), "error": error.message, **shown}, status=status)


def _field(scope: str) -> str:
    return "scope_" + scope.replace(":", "_")


def _policies_context(session: SessionDep) -> dict[str, Any]:
    return {"policies": policies.list_policies(session, 200, 0)["items"]}


@router.get("")
def admin_index(request: Request, _: AdminUser) -> Response:
    """What an admin can change here."""
    return render(request, "admin_index.html", {})


@router.get("/policies")
def policy_form(
    request: Request, _: PolicyWriterUser, session: SessionDep, name: str | None = None
) -> Response:
    """The form storing a new version of a promotion policy (prefilled with the current one)."""
    document = ""
    if name:
        try:
            document = policies.stored(session, name).document
        except NotFound:
            document = ""
    return render(
        request,
        "admin_policies.html",
        {**_policies_context(session), "name": name or "", "document": document},
    )


@router.post("/policies")
async def store_policy(
    request: Request,
    state: PolicyWriterUser,
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
) -> Response:
    """Store the posted document as the next version of the policy it names (its ``name:``;
    no field asks for it again) and re-evaluate fleet compliance under it (after answering, on
    a large fleet)."""
    form = await checked_form(request, state)
    document = form.get("document", "")
    name = ""
    now = utcnow()
    try:
        name = policies.name_of(document.encode())
        row, created = policies.put_policy(session, name, document.encode(), state.user, now)
        if created:
            audit.record_policy(session, _actor(state), row.name, row.version, row.content_sha256)
    except AppError as e:
        details = getattr(e, "details", None) or []
        return _refused(
            request,
            session,
            "admin_policies.html",
            lambda: _policies_context(session),
            e,
            name=name,
            document=document,
            details=details,
        )
    trusted = db.settings.trusted_authors
    evaluated = compliance.reevaluate_on_store(session, row, now, trusted) if created else None
    if created and evaluated is None:
        background.add_task(compliance.reevaluate_pending, db, row.name, row.version, now)
    message = (
        f"Stored {row.name} version {row.version}."
        if created
        else f"{row.name} version {row.version} is already this document: nothing stored."
    )
    session.flush()
    return render(
        request,
        "admin_policies.html",
        {
            **_policies_context(session),
            "name": row.name,
            "document": row.document,
            "message": message,
            "stored": {"name": row.name, "version": row.version},
        },
    )


def _trust_context(session: SessionDep) -> dict[str, Any]:
    history = catalogs.policy_history(session, 20, 0)["items"]
    return {"history": history, "current": history[0] if history else None}


def _pending(pending: list[tuple[str, int]]) -> str:
    if not pending:
        return ""
    return (
        " Fleet compliance is being evaluated again; until it ends the fleet counts as not"
        " evaluated."
    )


@router.get("/trust-policy")
def trust_form(request: Request, _: AdminUser, session: SessionDep) -> Response:
    """The current trust policy and the form storing a new version."""
    context = _trust_context(session)
    document = context["current"]["document"] if context["current"] else ""
    return render(request, "admin_trust.html", {**context, "document": document})


@router.post("/trust-policy")
async def store_trust(
    request: Request,
    state: AdminUser,
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
) -> Response:
    """Store the posted trust policy; every stored catalog is verified again under it."""
    form = await checked_form(request, state)
    document = form.get("document", "")
    now = utcnow()
    try:
        stored, pending = catalogs.put_policy(session, document.encode(), state.user, now)
        audit.record_trust_policy(session, _actor(state), stored)
        if pending:  # runs once the change is committed and the page sent
            background.add_task(compliance.reevaluate_pending_all, db, pending, now)
    except AppError as e:
        return _refused(
            request,
            session,
            "admin_trust.html",
            lambda: _trust_context(session),
            e,
            document=document,
        )
    return render(
        request,
        "admin_trust.html",
        {
            **_trust_context(session),
            "document": stored["document"],
            "message": f"Stored trust policy version {stored['version']}." + _pending(pending),
        },
    )


@router.get("/catalogs")
def catalog_list(
    request: Request,
    _: AdminUser,
    session: SessionDep,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """The imported reference catalogs and the import form."""
    result = catalogs.list_catalogs(session, per_page, (page - 1) * per_page)
    return render(
        request,
        "admin_catalogs.html",
        {"catalogs": result["items"], "pager": Pager(page, per_page, result["total"])},
    )


@router.post("/catalogs")
async def import_catalog(
    request: Request,
    state: AdminUser,
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
) -> Response:
    """Verify the posted signed catalog (DSSE envelope or Sigstore bundle) against the trust
    policy and import it."""
    form = await checked_form(request, state)
    raw, name = form.get("catalog", ""), form.get("name", "").strip() or None
    context: dict[str, Any] = {}
    status = 200
    now = utcnow()
    try:
        result = catalogs.import_catalog(session, raw.encode(), name, state.user, now)
        if result.created:
            audit.record_catalog(session, _actor(state), result.catalog)
        if result.compliance_pending:  # runs once the import is committed and the page sent
            background.add_task(
                compliance.reevaluate_pending_all, db, result.compliance_pending, now
            )
    except AppError as e:
        session.rollback()
        context, status = {"error": e.message, "posted": raw, "name": name or ""}, e.status
    else:
        what = "Imported" if result.created else "Already imported:"
        context = {
            "message": f"{what} {result.catalog['name']} "
            f"({counted(result.catalog['entries'], 'file')})." + _pending(result.compliance_pending)
        }
        session.flush()
    listing = catalogs.list_catalogs(session, 50, 0)
    return render(
        request,
        "admin_catalogs.html",
        {**context, "catalogs": listing["items"], "pager": Pager(1, 50, listing["total"])},
        status=status,
    )


def _tokens_context(session: SessionDep, page: int, per_page: int) -> dict[str, Any]:
    rows, total = tokens.token_overview(session, per_page, (page - 1) * per_page, utcnow())
    return {
        "tokens": rows,
        "pager": Pager(page, per_page, total),
        "scopes": [(s, _field(s)) for s in SCOPES],
        "expires": TOKEN_EXPIRY_DEFAULT,
        "teams": [t.name for t in teams.list_teams(session)],
    }


@router.get("/tokens")
def token_list(
    request: Request,
    _: AdminUser,
    session: SessionDep,
    page: PageNumber = 1,
    per_page: PerPage = 50,
) -> Response:
    """Every token (never a secret or hash) and the form creating one."""
    return render(request, "admin_tokens.html", _tokens_context(session, page, per_page))


@router.post("/tokens")
async def create_token(request: Request, state: AdminUser, session: WriteSessionDep) -> Response:
    """Create a token; its secret is shown once, on the answer to this form."""
    form = await checked_form(request, state)
    scopes = [s for s in SCOPES if form.get(_field(s))]
    # a blank field: no pattern; else every comma-separated entry (the spaces around it are the
    # list's, not the pattern's), an empty one refused
    assets = form.get("assets", "")
    patterns = [p.strip() for p in assets.split(",")] if assets.strip() else []
    # every comma-separated entry is a policy name: an empty one is refused, not dropped
    limit = form.get("policies", "").strip()
    policy_names = [p.strip() for p in limit.split(",")] if limit else []
    expires = form.get("expires", "").strip()
    try:
        expires_at = tokens.parse_expiry(expires, utcnow()) if expires else None
        new = tokens.create_token(
            session,
            form.get("name", "").strip(),
            scopes,
            patterns,
            expires_at=expires_at,
            actor=_actor(state),
            policy_names=policy_names,
            team=form.get("team", "").strip() or None,
        )
    except AppError as e:
        return _refused(
            request,
            session,
            "admin_tokens.html",
            lambda: _tokens_context(session, 1, 50),
            e,
            expires=expires,
        )
    session.flush()
    return render(
        request,
        "admin_tokens.html",
        {
            **_tokens_context(session, 1, 50),
            "created": {
                "name": new.token.name,
                "secret": new.secret,
                "id": new.token.id,
                "expires_at": new.token.expires_at,
            },
        },
    )


@router.post("/tokens/{token_id}/revoke")
async def revoke_token(
    request: Request, state: AdminUser, session: WriteSessionDep, token_id: IdPath
) -> Response:
    """Revoke a token: its sessions end at their next page."""
    await checked_form(request, state)
    token = tokens.revoke_token(session, token_id, _actor(state))
    session.flush()
    return render(
        request,
        "admin_tokens.html",
        {**_tokens_context(session, 1, 50), "message": f"Revoked token {token.name}."},
    )


# ------------------------------------------------------------------------ CI trust rules

_RULE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


def _ci_context(session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    return {"rules": ci_rules.list_rules(session), "audience": settings.ci_audience}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _claims(text: str) -> dict[str, str]:
    """``claim=value`` lines; a line without ``=`` is refused, not dropped."""
    claims: dict[str, str] = {}
    for line in _lines(text):
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise AppError(f"claim line {line[:80]!r} is not claim=value", 422)
        if key.strip() in claims:
            raise AppError(f"claim {key.strip()!r} is given twice", 422)
        claims[key.strip()] = value.strip()
    return claims


@router.get("/ci-trust")
def ci_trust_list(
    request: Request, _: AdminUser, session: SessionDep, settings: SettingsDep
) -> Response:
    """The CI trust rules (docs/ci.md) and the form storing one."""
    return render(request, "admin_ci_trust.html", _ci_context(session, settings))


@router.post("/ci-trust")
async def store_ci_rule(
    request: Request, state: AdminUser, session: WriteSessionDep, settings: SettingsDep
) -> Response:
    """Store (or replace) a CI trust rule, checked as the API checks it."""
    form = await checked_form(request, state)
    name = form.get("name", "").strip()
    body: dict[str, Any] = {
        "issuer": form.get("issuer", "").strip(),
        "scopes": [s for s in ("gate", "report:write") if form.get(_field(s))],
        "assets": _lines(form.get("assets", "")),
        "policies": _lines(form.get("policies", "")),
    }
    if form.get("provider", "") in ("github", "gitlab"):
        body["provider"] = form["provider"]
    try:
        if not re.fullmatch(_RULE_NAME, name):
            raise AppError("a rule name is 1 to 128 letters, digits, '.', '_' or '-'", 422)
        body["claims"] = _claims(form.get("claims", ""))
        document, created = ci_rules.put_rule(
            session, name, body, settings, _actor(state), utcnow()
        )
    except AppError as e:
        return _refused(
            request,
            session,
            "admin_ci_trust.html",
            lambda: _ci_context(session, settings),
            e,
            unprocessable=True,
            form=dict(form),
        )
    verb = "Stored" if created else "Replaced"
    return render(
        request,
        "admin_ci_trust.html",
        {**_ci_context(session, settings), "message": f"{verb} CI trust rule {document['name']}."},
    )


@router.post("/ci-trust/{name}/delete")
async def delete_ci_rule(
    request: Request,
    state: AdminUser,
    session: WriteSessionDep,
    settings: SettingsDep,
    name: Annotated[str, Path(pattern=_RULE_NAME)],
) -> Response:
    """Remove a CI trust rule: the tokens it admitted are refused from the next request on."""
    await checked_form(request, state)
    ci_rules.delete_rule(session, name, _actor(state), utcnow())
    return render(
        request,
        "admin_ci_trust.html",
        {**_ci_context(session, settings), "message": f"Removed CI trust rule {name}."},
    )


# ------------------------------------------------------------------------------- webhooks


def _webhooks_context(session: SessionDep) -> dict[str, Any]:
    return {
        "webhooks": webhooks.list_endpoints(session),
        "events": EVENTS,
        "severities": SEVERITIES,
    }


@router.get("/webhooks")
def webhook_list(request: Request, _: AdminUser, session: SessionDep) -> Response:
    """The webhook endpoints (never a secret), their deliveries by state, and the form adding
    one."""
    return render(request, "admin_webhooks.html", _webhooks_context(session))


@router.post("/webhooks")
async def create_webhook(
    request: Request, state: AdminUser, session: WriteSessionDep, settings: SettingsDep
) -> Response:
    """Create an endpoint; its secret is shown once, on the answer to this form."""
    form = await checked_form(request, state)
    try:
        spec = webhooks.EndpointSpec(
            name=form.get("name", "").strip(),
            url=form.get("url", "").strip(),
            events=tuple(e for e in EVENTS if form.get("event_" + e.replace(".", "_"))),
            min_severity=form.get("min_severity", "").strip() or None,
            labels=_pairs(form.get("labels", ""), "label"),
        )
        new = webhooks.create_endpoint(
            session, spec, delivery_config(settings).egress, _actor(state), utcnow()
        )
    except AppError as e:
        return _refused(
            request,
            session,
            "admin_webhooks.html",
            lambda: _webhooks_context(session),
            e,
            form=dict(form),
        )
    session.flush()
    return render(
        request,
        "admin_webhooks.html",
        {
            **_webhooks_context(session),
            "created": {"name": new.endpoint.name, "secret": new.secret},
        },
    )


WebhookName = Annotated[str, Path(pattern=webhooks.NAME_PATTERN)]


@router.post("/webhooks/{name}/delete")
async def delete_webhook(
    request: Request, state: AdminUser, session: WriteSessionDep, name: WebhookName
) -> Response:
    """Remove an endpoint and the deliveries it still had."""
    await checked_form(request, state)
    webhooks.delete_endpoint(session, name, _actor(state), utcnow())
    session.flush()
    return render(
        request,
        "admin_webhooks.html",
        {**_webhooks_context(session), "message": f"Removed webhook {name}."},
    )


@router.post("/webhooks/{name}/test")
async def test_webhook(
    request: Request,
    state: AdminUser,
    session: SessionDep,
    db: DatabaseDep,
    settings: SettingsDep,
    name: WebhookName,
) -> Response:
    """Post a signed test message now; the page says the receiver's status, never its body."""
    await checked_form(request, state)
    answer = await run_in_threadpool(send_test, db, name, delivery_config(settings), utcnow())
    if answer.status is not None and 200 <= answer.status < 300:
        context = {"message": f"Test message to {name}: delivered (HTTP {answer.status})."}
    else:
        why = answer.error or f"the receiver answered HTTP {answer.status}"
        context = {"error": f"Test message to {name}: not delivered: {why}."}
    return render(request, "admin_webhooks.html", {**_webhooks_context(session), **context})


# ---------------------------------------------------------------------------------- teams


def _teams_context(session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    return {
        "teams": [teams.team_dict(t) for t in teams.list_teams(session)],
        "mappings": group_mappings.list_mappings(session, settings.oidc_roles),
        "scoping_labels": settings.scoping_labels,
        "teamless": settings.teamless_access,
    }


def _pairs(text: str, what: str) -> dict[str, str]:
    """``key=value`` lines; a line without ``=`` is refused, not dropped."""
    pairs: dict[str, str] = {}
    for line in _lines(text):
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise AppError(f"{what} line {line[:80]!r} is not key=value", 422)
        pairs[key.strip()] = value.strip()
    return pairs


def _members(text: str) -> list[dict[str, str]]:
    """``issuer subject`` lines (the ID token's ``iss`` and ``sub``)."""
    members = []
    for line in _lines(text):
        issuer, _, subject = line.rpartition(" ")
        if not issuer.strip() or not subject:
            raise AppError(f"user line {line[:80]!r} is not 'issuer subject'", 422)
        members.append({"issuer": issuer.strip(), "subject": subject})
    return members


@router.get("/teams")
def team_list(
    request: Request, _: AdminUser, session: SessionDep, settings: SettingsDep
) -> Response:
    """Teams (members, asset scope), the group mappings, and the forms changing them."""
    return render(request, "admin_teams.html", _teams_context(session, settings))


@router.post("/teams")
async def store_team(
    request: Request, state: AdminUser, session: WriteSessionDep, settings: SettingsDep
) -> Response:
    """Store (or replace) a team, checked as the API checks it (audited)."""
    form = await checked_form(request, state)
    name = form.get("name", "").strip()
    try:
        spec = teams.check_team(
            {
                "labels": _pairs(form.get("labels", ""), "label"),
                "names": _lines(form.get("names", "")),
                "users": _members(form.get("users", "")),
                "groups": _lines(form.get("groups", "")),
            }
        )
        _, created = teams.put_team(session, name, spec, _actor(state))
    except AppError as e:
        return _refused(
            request,
            session,
            "admin_teams.html",
            lambda: _teams_context(session, settings),
            e,
            unprocessable=True,
            form=dict(form),
        )
    session.flush()
    verb = "Stored" if created else "Replaced"
    return render(
        request,
        "admin_teams.html",
        {**_teams_context(session, settings), "message": f"{verb} team {name}."},
    )


@router.post("/teams/{name}/delete")
async def delete_team(
    request: Request,
    state: AdminUser,
    session: WriteSessionDep,
    settings: SettingsDep,
    name: Annotated[str, Path(pattern=teams.TEAM_NAME_PATTERN)],
) -> Response:
    """Remove a team (refused while tokens belong to it)."""
    await checked_form(request, state)
    try:
        teams.delete_team(session, name, _actor(state))
    except AppError as e:
        return _refused(
            request, session, "admin_teams.html", lambda: _teams_context(session, settings), e
        )
    session.flush()
    return render(
        request,
        "admin_teams.html",
        {**_teams_context(session, settings), "message": f"Removed team {name}."},
    )


@router.post("/teams/labels")
async def assign_scope_labels(
    request: Request, state: AdminUser, session: WriteSessionDep, settings: SettingsDep
) -> Response:
    """Assign an asset's scoping labels (exactly those given; audited)."""
    form = await checked_form(request, state)
    try:
        raw = form.get("asset_id", "").strip()
        if not raw.isdigit() or not 0 < int(raw) < 2**63:
            raise AppError("an asset id is a positive number (the one in /assets/ID)", 422)
        labels = teams.check_scope_labels({"labels": _pairs(form.get("labels", ""), "label")})
        teams.assign_labels(session, int(raw), labels, _actor(state))
    except AppError as e:
        return _refused(
            request,
            session,
            "admin_teams.html",
            lambda: _teams_context(session, settings),
            e,
            unprocessable=True,
            form=dict(form),
        )
    session.flush()
    shown = ", ".join(f"{k}={v}" for k, v in labels.items()) or "none"
    return render(
        request,
        "admin_teams.html",
        {
            **_teams_context(session, settings),
            "message": f"Asset {raw} now has the scoping labels {shown}.",
        },
    )


# -------------------------------------------------------------------------- group mappings


def _mappings_context(session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    return {
        "mappings": group_mappings.list_mappings(session, settings.oidc_roles),
        "roles": group_mappings.ROLES,
        "teams": [t.name for t in teams.list_teams(session)],
        "sso": settings.oidc_enabled,
        "teamless": settings.teamless_access,
    }


@router.get("/group-mappings")
def group_mapping_list(
    request: Request, _: AdminUser, session: SessionDep, settings: SettingsDep
) -> Response:
    """The group mappings (the configuration's, read-only, and the stored ones) and the form
    storing one."""
    return render(request, "admin_group_mappings.html", _mappings_context(session, settings))


@router.post("/group-mappings")
async def store_group_mapping(
    request: Request, state: AdminUser, session: WriteSessionDep, settings: SettingsDep
) -> Response:
    """Store (or replace) a group mapping, checked as the API checks it (audited)."""
    form = await checked_form(request, state)
    group = form.get("group", "").strip()
    try:
        mapping, created = group_mappings.put_mapping(
            session,
            group,
            form.get("role", "").strip(),
            form.get("team", "").strip() or None,
            settings.oidc_roles,
            _actor(state),
            utcnow(),
        )
    except AppError as e:
        return _refused(
            request,
            session,
            "admin_group_mappings.html",
            lambda: _mappings_context(session, settings),
            e,
            unprocessable=True,
            form=dict(form),
        )
    session.flush()
    verb = "Stored" if created else "Replaced"
    team = f" in team {mapping['team']}" if mapping["team"] else ""
    return render(
        request,
        "admin_group_mappings.html",
        {
            **_mappings_context(session, settings),
            "message": f"{verb} the mapping of group {group}: {mapping['role']}{team}.",
        },
    )


@router.post("/group-mappings/{name}/delete")
async def delete_group_mapping(
    request: Request,
    state: AdminUser,
    session: WriteSessionDep,
    settings: SettingsDep,
    name: Annotated[str, Path(max_length=256, pattern=group_mappings.GROUP_PATTERN)],
) -> Response:
    """Remove a stored group mapping: its members lose the access it gave at their next page."""
    await checked_form(request, state)
    try:
        group_mappings.delete_mapping(session, name, settings.oidc_roles, _actor(state), utcnow())
    except AppError as e:
        return _refused(
            request,
            session,
            "admin_group_mappings.html",
            lambda: _mappings_context(session, settings),
            e,
        )
    session.flush()
    return render(
        request,
        "admin_group_mappings.html",
        {
            **_mappings_context(session, settings),
            "message": f"Removed the mapping of group {name}.",
        },
    )
