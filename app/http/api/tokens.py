"""``/api/v1/tokens``: token management for admins (the secret is shown once, at creation)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.domain import tokens
from app.errors import AppError, BadRequest
from app.http.deps import Admin, SessionDep, WriteSessionDep
from app.http.params import IdPath, Limit, Offset
from app.http.schemas import NewTokenOut, TokenIn, TokenOut, TokenPage

router = APIRouter(tags=["tokens"])


@router.get("/tokens", response_model=TokenPage)
def list_tokens(
    _: Admin, session: SessionDep, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """A page of tokens, oldest first, without secrets."""
    rows, total = tokens.token_page(session, limit, offset)
    return {
        "items": [tokens.token_dict(t) for t in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


@router.post("/tokens", status_code=201, response_model=NewTokenOut)
def create_token(_: Admin, session: WriteSessionDep, body: TokenIn) -> dict[str, Any]:
    """Create a token; the answer is the only place its secret appears."""
    try:
        new = tokens.create_token(session, body.name, body.scopes, body.assets)
    except BadRequest as e:  # the body's content: 422, as every refused body
        raise AppError(e.message, 422, details=[{"pointer": "/body", "message": e.message}]) from e
    return {**tokens.token_dict(new.token), "token": new.secret}


@router.delete("/tokens/{token_id}", response_model=TokenOut)
def revoke_token(_: Admin, session: WriteSessionDep, token_id: IdPath) -> dict[str, Any]:
    """Revoke a token; it stops working at once."""
    return tokens.token_dict(tokens.revoke_token(session, token_id))
