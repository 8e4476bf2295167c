"""Queries on people signed in with the OpenID Provider, their dashboard sessions and the
sign-ins under way."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.storage.tables import AppUser, SsoLogin, WebSession


def user_by_subject(session: Session, issuer: str, subject: str) -> AppUser | None:
    """The user an ID token's (iss, sub) names, locked for the sign-in's update."""
    query = select(AppUser).where(AppUser.issuer == issuer, AppUser.subject == subject)
    return session.scalars(query.with_for_update()).first()


def add(session: Session, row: AppUser | WebSession | SsoLogin) -> None:
    """Stage a new row (flushed so a user's id is known)."""
    session.add(row)
    session.flush()


def session_with_user(db: Session, id_hash: str) -> tuple[WebSession, AppUser] | None:
    """A session row and its user."""
    query = (
        select(WebSession, AppUser)
        .join(AppUser, AppUser.id == WebSession.user_id)
        .where(WebSession.id_hash == id_hash)
    )
    row = db.execute(query).first()
    return (row[0], row[1]) if row is not None else None


def delete_session(session: Session, id_hash: str) -> str | None:
    """Remove a session; the ID token it held (None when there was none or no session)."""
    row = session.get(WebSession, id_hash)
    if row is None:
        return None
    id_token = row.id_token
    session.delete(row)
    return id_token


def delete_sessions_of(session: Session, user_id: int) -> None:
    """Remove every session of a user (their access was withdrawn)."""
    session.execute(delete(WebSession).where(WebSession.user_id == user_id))


def pending_logins(session: Session) -> int:
    """How many sign-ins are under way."""
    return int(session.scalar(select(func.count()).select_from(SsoLogin)) or 0)


def take_login(session: Session, state_hash: str) -> SsoLogin | None:
    """The sign-in under way for a state, deleted as it is read: a state works once."""
    row = session.get(SsoLogin, state_hash, with_for_update=True)
    if row is not None:
        session.delete(row)
        session.flush()
    return row


def prune(session: Session, now: datetime) -> None:
    """Forget expired sessions and abandoned sign-ins."""
    session.execute(delete(WebSession).where(WebSession.expires_at <= now))
    session.execute(delete(SsoLogin).where(SsoLogin.expires_at <= now))
