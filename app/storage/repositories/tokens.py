"""Queries on API tokens."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, func, select, update
from sqlalchemy.orm import Session

from app.storage.tables import ApiToken


def by_hash(session: Session, token_hash: str) -> ApiToken | None:
    """The token with this SHA-256, revoked or not."""
    return session.scalars(select(ApiToken).where(ApiToken.token_hash == token_hash)).first()


_CREDENTIALS = select(
    ApiToken.id,
    ApiToken.name,
    ApiToken.scopes,
    ApiToken.asset_patterns,
    ApiToken.last_used_at,
    ApiToken.revoked_at,
    ApiToken.expires_at,
    ApiToken.policy_names,
    ApiToken.team_id,
).where(ApiToken.token_hash == bindparam("token_hash"))


def credentials(
    db: Session | Connection, token_hash: str
) -> Row[int, str, Any, Any, Any, Any, Any, Any, Any] | None:
    """(id, name, scopes, asset patterns, last use, revocation, expiry, policy names, team) of the
    token with this hash, read as one plain row by a statement built once: it runs on every
    request."""
    row: Row[int, str, Any, Any, Any, Any, Any, Any, Any] | None = db.execute(
        _CREDENTIALS, {"token_hash": token_hash}
    ).first()
    return row


_CREDENTIALS_BY_ID = select(
    ApiToken.id,
    ApiToken.name,
    ApiToken.scopes,
    ApiToken.asset_patterns,
    ApiToken.last_used_at,
    ApiToken.revoked_at,
    ApiToken.expires_at,
    ApiToken.policy_names,
    ApiToken.token_hash,
    ApiToken.team_id,
).where(ApiToken.id == bindparam("token_id"))


def credentials_by_id(
    db: Session | Connection, token_id: int
) -> Row[int, str, Any, Any, Any, Any, Any, Any, str, Any] | None:
    """The columns of `credentials` and the token's hash, by id: a dashboard session names its
    token by id and is bound to its hash."""
    row: Row[int, str, Any, Any, Any, Any, Any, Any, str, Any] | None = db.execute(
        _CREDENTIALS_BY_ID, {"token_id": token_id}
    ).first()
    return row


def by_id(session: Session, token_id: int, *, lock: bool = False) -> ApiToken | None:
    """The token with this id; ``lock`` holds its row until the transaction ends (a change of
    state happens once, whatever races it)."""
    if lock:
        # populate_existing: the row as it is once the lock is held, not as first read
        return session.get(ApiToken, token_id, with_for_update=True, populate_existing=True)
    return session.get(ApiToken, token_id)


def add(session: Session, token: ApiToken) -> ApiToken:
    """Insert a token and assign its id."""
    session.add(token)
    session.flush()
    return token


def all_tokens(session: Session) -> Sequence[ApiToken]:
    """Every token, oldest first."""
    return session.scalars(select(ApiToken).order_by(ApiToken.id)).all()


def page(session: Session, limit: int, offset: int) -> tuple[Sequence[ApiToken], int]:
    """A page of tokens, oldest first, and their number."""
    total = session.scalar(select(func.count()).select_from(ApiToken)) or 0
    rows = session.scalars(select(ApiToken).order_by(ApiToken.id).limit(limit).offset(offset))
    return rows.all(), total


def touch(session: Session, token_id: int, now: datetime) -> None:
    """Record a use of the token."""
    session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now))
