"""Queries on promotion policy versions: the current version of a name, one version, history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, func, select, text
from sqlalchemy.orm import Session

from app.storage.tables import PromotionPolicyVersion as Policy

#: PostgreSQL advisory lock key serializing policy versions and their compliance ("gpol")
_LOCK_KEY = 0x67706F6C


def lock(session: Session, *, exclusive: bool = True) -> None:
    """Serialize policy changes (version numbers, fleet-wide re-evaluation; exclusive) against
    per-asset compliance updates (shared, so those run side by side) for the rest of the
    transaction; SQLite write transactions already run one at a time."""
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        conn.execute(text(f"SELECT {function}(:key)"), {"key": _LOCK_KEY})


def any_stored(conn: Session | Connection) -> bool:
    """Whether any policy is stored."""
    return conn.execute(select(Policy.id).limit(1)).first() is not None


def current(session: Session, name: str) -> Policy | None:
    """The highest version of the named policy."""
    return session.scalars(
        select(Policy).where(Policy.name == name).order_by(Policy.version.desc()).limit(1)
    ).first()


def version(session: Session, name: str, number: int) -> Policy | None:
    """One version of the named policy."""
    return session.scalars(
        select(Policy).where(Policy.name == name, Policy.version == number)
    ).first()


def add(session: Session, values: Mapping[str, Any]) -> Policy:
    """Store the next version of ``values["name"]``."""
    top = session.scalar(select(func.max(Policy.version)).where(Policy.name == values["name"]))
    row = Policy(version=(top or 0) + 1, **values)
    session.add(row)
    session.flush()
    return row


def history(session: Session, name: str, limit: int, offset: int) -> tuple[Sequence[Policy], int]:
    """A page of the named policy's versions, newest first, and their number."""
    total = session.scalar(select(func.count()).where(Policy.name == name)) or 0
    rows = session.scalars(
        select(Policy)
        .where(Policy.name == name)
        .order_by(Policy.version.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, total


def _latest_ids() -> Any:
    return select(func.max(Policy.id)).group_by(Policy.name)


def current_all(session: Session) -> Sequence[Policy]:
    """The current version of every policy, by name."""
    return session.scalars(
        select(Policy).where(Policy.id.in_(_latest_ids())).order_by(Policy.name)
    ).all()


def page_current(session: Session, limit: int, offset: int) -> tuple[Sequence[Policy], int]:
    """A page of the policies' current versions, by name, and how many policies there are."""
    total = session.scalar(select(func.count(func.distinct(Policy.name)))) or 0
    rows = session.scalars(
        select(Policy)
        .where(Policy.id.in_(_latest_ids()))
        .order_by(Policy.name)
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, total
