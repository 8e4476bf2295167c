"""``/api/v1/tokens``: token management for admins (the secret is shown once, at creation)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.domain import tokens
from app.errors import AppError, BadRequest
from app.http.deps import Admin, SessionDep, WriteSessionDep
from app.http.params import IdPath, Limit, Offset
from app.http.schemas import NewTokenOut, TokenIn, TokenOut, TokenPage
from app.storage.tables import ApiToken

router = APIRouter(tags=["tokens"])


def _token(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "prefix": token.prefix,
        "scopes": list(token.scopes),
        "assets": list(token.asset_patterns),
        "created_at": token.created_at.isoformat(),
        "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }


@router.get("/tokens", response_model=TokenPage)
def list_tokens(
    _: Admin, session: SessionDep, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """A page of tokens, oldest first, without secrets."""
    rows, total = tokens.token_page(session, limit, offset)
    return {"items": [_token(t) for t in rows], "total": total, "limit": limit, "offset": offset}


@router.post("/tokens", status_code=201, response_model=NewTokenOut)
def create_token(_: Admin, session: WriteSessionDep, body: TokenIn) -> dict[str, Any]:
    """Create a token; the answer is the only place its secret appears."""
    try:
        new = tokens.create_token(session, body.name, body.scopes, body.assets)
    except BadRequest as e:  # the body's content: 422, as every refused body
        raise AppError(e.message, 422, details=[{"pointer": "/body", "message": e.message}]) from e
    return {**_token(new.token), "token": new.secret}


@router.delete("/tokens/{token_id}", response_model=TokenOut)
def revoke_token(_: Admin, session: WriteSessionDep, token_id: IdPath) -> dict[str, Any]:
    """Revoke a token; it stops working at once."""
    return _token(tokens.revoke_token(session, token_id))
