"""Queries on CI trust rules and on the CI ID tokens already used."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.storage.tables import CiTokenUse, CiTrustRule


def all_rules(db: Session | Connection) -> Sequence[dict[str, Any]]:
    """Every rule's document, by name."""
    return list(db.execute(select(CiTrustRule.document).order_by(CiTrustRule.name)).scalars())


def rules_of(db: Session | Connection, issuer: str) -> Sequence[dict[str, Any]]:
    """The documents of the rules naming this issuer, by name."""
    query = select(CiTrustRule.document).where(CiTrustRule.issuer == issuer)
    return list(db.execute(query.order_by(CiTrustRule.name)).scalars())


def issuers(db: Session | Connection) -> set[str]:
    """The issuers some rule names: the only ones whose keys are ever fetched."""
    return set(db.execute(select(CiTrustRule.issuer).distinct()).scalars())


def by_name(session: Session, name: str, *, lock: bool = False) -> CiTrustRule | None:
    """The rule called `name`."""
    query = select(CiTrustRule).where(CiTrustRule.name == name)
    return session.scalars(query.with_for_update() if lock else query).first()


def put(session: Session, name: str, document: dict[str, Any], now: datetime) -> bool:
    """Store a rule under `name`; True when it is new."""
    row = by_name(session, name, lock=True)
    if row is None:
        session.add(
            CiTrustRule(
                name=name,
                issuer=document["issuer"],
                document=document,
                created_at=now,
                updated_at=now,
            )
        )
        session.flush()
        return True
    row.issuer = document["issuer"]
    row.document = document
    row.updated_at = now
    session.flush()
    return False


def remove(session: Session, name: str) -> bool:
    """Delete the rule called `name`; whether there was one."""
    result = session.execute(delete(CiTrustRule).where(CiTrustRule.name == name))
    return bool(getattr(result, "rowcount", 0))


def claim_use(session: Session, key: str, expires_at: datetime, now: datetime) -> bool:
    """Record the use of the token `key` until `expires_at`; False when it was used already.
    Uses past their expiry are dropped on the way (the token itself is refused by then)."""
    session.execute(delete(CiTokenUse).where(CiTokenUse.expires_at <= now))
    try:
        with session.begin_nested():
            session.add(CiTokenUse(key=key, expires_at=expires_at))
    except IntegrityError:
        return False
    return True
