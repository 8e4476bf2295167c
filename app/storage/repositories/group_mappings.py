"""Queries on the group mappings admins store (identity-provider group → role and team)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.storage.tables import OidcGroupMapping


def rows(db: Session | Connection) -> Sequence[Any]:
    """Every stored mapping as plain rows (group_name, role, team, updated_at), by group: what
    every signed-in page reads."""
    query = select(
        OidcGroupMapping.group_name,
        OidcGroupMapping.role,
        OidcGroupMapping.team,
        OidcGroupMapping.created_at,
        OidcGroupMapping.updated_at,
    ).order_by(OidcGroupMapping.group_name)
    return list(db.execute(query).all())


def by_group(session: Session, group: str, *, lock: bool = False) -> OidcGroupMapping | None:
    """The stored mapping of `group`."""
    query = select(OidcGroupMapping).where(OidcGroupMapping.group_name == group)
    return session.scalars(query.with_for_update() if lock else query).first()


def put(session: Session, group: str, role: str, team: str | None, now: datetime) -> bool:
    """Store the mapping of `group` (replacing the one stored); True when it is new."""
    row = by_group(session, group, lock=True)
    if row is None:
        try:
            with session.begin_nested():
                session.add(
                    OidcGroupMapping(
                        group_name=group, role=role, team=team, created_at=now, updated_at=now
                    )
                )
            return True
        except IntegrityError:  # stored by a concurrent request since: replace it
            row = by_group(session, group, lock=True)
            assert row is not None
    row.role, row.team, row.updated_at = role, team, now
    session.flush()
    return False


def remove(session: Session, group: str) -> bool:
    """Delete the mapping of `group`; whether there was one."""
    result = session.execute(delete(OidcGroupMapping).where(OidcGroupMapping.group_name == group))
    return bool(getattr(result, "rowcount", 0))
