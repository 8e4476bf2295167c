"""API tokens: creation (the secret is returned once), authentication and revocation.

Tokens are 256-bit random secrets, so a single SHA-256 is a sufficient one-way store (no
password-style stretching is needed); lookups are by that hash.
"""

from __future__ import annotations

import fnmatch
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from app.clock import utcnow
from app.errors import BadRequest, NotFound, Unauthorized
from app.storage.repositories import tokens as repo
from app.storage.tables import ApiToken

TOKEN_PREFIX = "gpv_"
#: last-use times are written at most this often per token, to keep reads read-only
_TOUCH_INTERVAL = timedelta(minutes=1)


class Scope(StrEnum):
    REPORT_WRITE = "report:write"
    INVENTORY_READ = "inventory:read"
    GATE = "gate"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller."""

    token_id: int
    name: str
    scopes: frozenset[str]
    asset_patterns: tuple[str, ...]
    last_used_at: datetime | None = None

    def has(self, scope: Scope) -> bool:
        """Whether the caller holds ``scope`` (``admin`` holds every scope)."""
        return scope.value in self.scopes or Scope.ADMIN.value in self.scopes

    def may_report_for(self, asset_name: str) -> bool:
        """Whether an asset-bound token may write this asset's inventory."""
        if not self.asset_patterns:
            return True
        return any(fnmatch.fnmatchcase(asset_name, p) for p in self.asset_patterns)


@dataclass(frozen=True, slots=True)
class NewToken:
    """A freshly created token: the only time its secret exists outside the caller's hands."""

    token: ApiToken
    secret: str


def hash_secret(secret: str) -> str:
    """The stored form of a token secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(
    session: Session, name: str, scopes: list[str], asset_patterns: list[str] | None = None
) -> NewToken:
    """Create a token; refuses unknown scopes and asset patterns on tokens that cannot write."""
    name = name.strip()
    if not name or len(name) > 128:
        raise BadRequest("token name must be 1-128 characters")
    known = {s.value for s in Scope}
    unknown = sorted(set(scopes) - known)
    if unknown or not scopes:
        raise BadRequest(
            f"unknown or missing scopes {unknown}; choose from {', '.join(sorted(known))}"
        )
    patterns = [p.strip() for p in asset_patterns or [] if p.strip()]
    if patterns and Scope.REPORT_WRITE.value not in scopes:
        raise BadRequest("asset patterns only apply to tokens with the report:write scope")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        name=name,
        token_hash=hash_secret(secret),
        prefix=secret[:12],
        scopes=sorted(set(scopes)),
        asset_patterns=patterns,
        created_at=utcnow(),
    )
    return NewToken(repo.add(session, token), secret)


def authenticate(db: Session | Connection, secret: str) -> Principal:
    """The principal of a bearer secret; raises `Unauthorized` for unknown or revoked tokens."""
    row = repo.credentials(db, hash_secret(secret))
    if row is None or row.revoked_at is not None:
        raise Unauthorized("unknown or revoked token")
    return Principal(
        row.id, row.name, frozenset(row.scopes), tuple(row.asset_patterns), row.last_used_at
    )


def use_is_due(principal: Principal, now: datetime) -> bool:
    """Whether the token's last-use time is stale enough to write again."""
    last = principal.last_used_at
    return last is None or now - last > _TOUCH_INTERVAL


def record_use(session: Session, principal: Principal, now: datetime) -> None:
    """Write the token's last-use time."""
    repo.touch(session, principal.token_id, now)


def revoke_token(session: Session, token_id: int) -> ApiToken:
    """Revoke a token (idempotent)."""
    token = repo.by_id(session, token_id)
    if token is None:
        raise NotFound(f"no token with id {token_id}")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
    return token


def list_tokens(session: Session) -> list[ApiToken]:
    """Every token (hashes never leave the service)."""
    return list(repo.all_tokens(session))


def token_page(session: Session, limit: int, offset: int) -> tuple[list[ApiToken], int]:
    """A page of tokens, oldest first, and how many there are."""
    rows, total = repo.page(session, limit, offset)
    return list(rows), total


def token_dict(token: ApiToken) -> dict[str, Any]:
    """A token as the API shows it: never its hash or secret."""
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
