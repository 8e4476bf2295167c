"""``/api/v1/tokens``: token management for admins (the secret is shown once, at creation or
rotation), and ``/api/v1/audit``: the log of administrative actions."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from app.clock import utcnow
from app.domain import audit, tokens
from app.errors import AppError, BadRequest
from app.http.body import read_model
from app.http.deps import Admin, SessionDep, WriteSessionDep
from app.http.params import IdPath, Limit, Offset, Timestamp, rfc3339
from app.http.schemas import (
    AuditPage,
    ErrorResponse,
    NewTokenOut,
    TokenIn,
    TokenOut,
    TokenPage,
    error_responses,
)

router = APIRouter(tags=["tokens"])


@router.get("/tokens", response_model=TokenPage)
def list_tokens(
    _: Admin, session: SessionDep, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """A page of tokens, oldest first, without secrets."""
    rows, total = tokens.token_page(session, limit, offset)
    now = utcnow()
    return {
        "items": [tokens.token_dict(t, now) for t in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


async def _token_request(request: Request, _: Admin) -> TokenIn:
    # a dependency after Admin: the body is read once the caller is known to be an admin
    return await read_model(request, TokenIn, "a token request")


@router.post(
    "/tokens",
    status_code=201,
    response_model=NewTokenOut,
    responses=error_responses(
        (404, "no team of the given name"),
        (413, "larger than 1 MiB"),
        (415, "not JSON"),
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": TokenIn.model_json_schema()}},
        }
    },
)
def create_token(
    principal: Admin, session: WriteSessionDep, body: Annotated[TokenIn, Depends(_token_request)]
) -> dict[str, Any]:
    """Create a token; the answer is the only place its secret appears."""
    try:
        expires_at = tokens.parse_expiry(body.expires, utcnow()) if body.expires else None
        new = tokens.create_token(
            session,
            body.name,
            body.scopes,
            body.assets,
            expires_at=expires_at,
            actor=principal.actor,
            policy_names=body.policies,
            team=body.team,
        )
    except BadRequest as e:  # the body's content: 422, as every refused body
        raise AppError(e.message, 422, details=[{"pointer": "/body", "message": e.message}]) from e
    return {**tokens.token_dict(new.token, utcnow()), "token": new.secret}


@router.delete("/tokens/{token_id}", response_model=TokenOut)
def revoke_token(principal: Admin, session: WriteSessionDep, token_id: IdPath) -> dict[str, Any]:
    """Revoke a token; it stops working at once."""
    return tokens.token_dict(tokens.revoke_token(session, token_id, principal.actor), utcnow())


@router.post(
    "/tokens/{token_id}/rotate",
    status_code=201,
    response_model=NewTokenOut,
    responses={409: {"model": ErrorResponse, "description": "the token is revoked or expired"}},
)
def rotate_token(
    principal: Admin,
    session: WriteSessionDep,
    token_id: IdPath,
    grace: Annotated[
        str | None,
        Query(
            max_length=16,
            description="how long the old secret keeps working (`15m`, `24h`, `7d`; at most "
            "3660 days); default: revoked at once",
            json_schema_extra={"pattern": tokens.DURATION_PATTERN},
        ),
    ] = None,
) -> dict[str, Any]:
    """Replace a token's secret: a new token with the same name, scopes, asset patterns and
    lifetime; the answer is the only place its secret appears."""
    period = tokens.parse_duration(grace) if grace else timedelta(0)
    new = tokens.rotate_token(session, token_id, period, principal.actor)
    return {**tokens.token_dict(new.token, utcnow()), "token": new.secret}


@router.get("/audit", response_model=AuditPage)
def audit_log(
    _: Admin,
    session: SessionDep,
    action: Annotated[
        str | None,
        Query(description="one of the actions", json_schema_extra={"enum": list(audit.ACTIONS)}),
    ] = None,
    actor: Annotated[
        str | None, Query(min_length=1, max_length=128, description="token name or cli:USER")
    ] = None,
    target: Annotated[
        str | None, Query(min_length=1, max_length=1024, description="e.g. token:12")
    ] = None,
    since: Timestamp = None,
    until: Timestamp = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """The audit log of administrative actions, newest first: token creation, revocation and
    rotation (by the API or `gpuprov token`), trust policy, catalog and promotion policy
    changes; events at or after ``since`` and before ``until`` (``since`` after ``until``:
    400)."""
    return audit.events_page(
        session,
        limit,
        offset,
        action=action,
        actor=actor,
        target=target,
        since=rfc3339(since, "since"),
        until=rfc3339(until, "until"),
    )
