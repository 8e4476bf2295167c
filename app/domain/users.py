"""People who sign in with the OpenID Provider: users created on first sign-in (by issuer and
subject, never by email), their server-side dashboard sessions (a random id in the cookie, its
SHA-256 here; deleting the row ends the session), and the sign-ins under way (state, nonce and
PKCE verifier, good once, bound to the browser that started them).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.domain.oidc import Grant, Role, lower, mapped_teams, role_for, role_scopes
from app.domain.teams import person_membership
from app.domain.tokens import Principal, SessionEnd
from app.errors import ServiceUnavailable
from app.storage.repositories import users as repo
from app.storage.tables import AppUser, SsoLogin, WebSession

#: seconds a sign-in may take at the provider before its state is forgotten
LOGIN_SECONDS = 600
#: most sign-ins under way at once: each start stores a row before anyone is known, so their
#: number is bounded (beyond it, 503 until some are used or expire)
MAX_PENDING_LOGINS = 10_000


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class PendingLogin:
    """A started sign-in: the cookie value binding it to the browser, and the parameters of
    the authorization request."""

    browser: str
    state: str
    nonce: str
    code_verifier: str


def start_login(
    session: Session, next_url: str, now: datetime, limit: int = MAX_PENDING_LOGINS
) -> PendingLogin:
    """Remember a new sign-in (random state, nonce and 64-byte PKCE verifier); 503 when
    `limit` sign-ins are under way already."""
    repo.prune(session, now)
    if repo.pending_logins(session) >= limit:
        raise ServiceUnavailable("too many sign-ins are under way; try again in a minute", 60)
    pending = PendingLogin(
        browser=secrets.token_urlsafe(32),
        state=secrets.token_urlsafe(32),
        nonce=secrets.token_urlsafe(32),
        code_verifier=secrets.token_urlsafe(64),  # RFC 7636 §4.1: 43 to 128 characters
    )
    repo.add(
        session,
        SsoLogin(
            state_hash=_digest(pending.state),
            browser_hash=_digest(pending.browser),
            nonce=pending.nonce,
            code_verifier=pending.code_verifier,
            next_url=next_url,
            expires_at=now + timedelta(seconds=LOGIN_SECONDS),
        ),
    )
    return pending


def take_login(session: Session, state: str, browser: str | None, now: datetime) -> SsoLogin | None:
    """The sign-in a callback's state names, used up; None when unknown, used before, expired,
    or started by another browser (login CSRF)."""
    row = repo.take_login(session, _digest(state))
    if row is None or row.expires_at <= now or browser is None:
        return None
    if not secrets.compare_digest(row.browser_hash, _digest(browser)):
        return None
    return row


@dataclass(frozen=True, slots=True)
class NewSession:
    """A session just started: the cookie's value (shown only here) and its CSRF token."""

    cookie: str
    csrf: str


def _profile(claims: Mapping[str, Any]) -> tuple[str | None, str | None]:
    email, name = claims.get("email"), claims.get("name")
    return (
        email[:320] if isinstance(email, str) else None,
        name[:256] if isinstance(name, str) else None,
    )


def _user(session: Session, issuer: str, claims: Mapping[str, Any], now: datetime) -> AppUser:
    """The user of (iss, sub), created on first sign-in; their profile as the token says."""
    email, name = _profile(claims)
    user = repo.user_by_subject(session, issuer, claims["sub"])
    if user is None:
        # OIDC Core §5.7: only (iss, sub) identifies; a known email under a new sub is a new user
        user = AppUser(
            issuer=issuer,
            subject=claims["sub"],
            created_at=now,
            last_login_at=now,
        )
        repo.add(session, user)
    user.email, user.name, user.last_login_at = email, name, now
    return user


def refuse_access(session: Session, issuer: str, claims: Mapping[str, Any], now: datetime) -> None:
    """A valid sign-in whose groups give no role: the user keeps no role and no session."""
    user = _user(session, issuer, claims, now)
    user.role = None
    repo.delete_sessions_of(session, user.id)


def sign_in(
    session: Session,
    issuer: str,
    claims: Mapping[str, Any],
    role: Role,
    id_token: str,
    now: datetime,
    lifetime: int,
    replaces: str | None = None,
    groups: Sequence[str] = (),
) -> NewSession:
    """A new session for the ID token's user with `role` and the ID token's `groups` (their
    teams follow from them at each request; the session it `replaces`, a cookie value, is
    deleted: the id changes at every sign-in)."""
    user = _user(session, issuer, claims, now)
    user.role = role.value
    user.groups = list(groups)
    if replaces:
        repo.delete_session(session, _digest(replaces))
    cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    repo.add(
        session,
        WebSession(
            id_hash=_digest(cookie),
            user_id=user.id,
            role=role.value,
            csrf=csrf,
            created_at=now,
            expires_at=now + timedelta(seconds=lifetime),
            verified_at=now,
            id_token=id_token,
        ),
    )
    return NewSession(cookie, csrf)


@dataclass(frozen=True, slots=True)
class PersonSession:
    """A valid session of a signed-in person."""

    principal: Principal
    csrf: str
    #: when the provider last vouched for the person's groups
    verified_at: datetime
    role: Role


def _role_now(row: WebSession, user: AppUser, mapping: Mapping[str, Grant]) -> Role | None:
    """The role a session holds now: what the group mappings give the groups of the person's
    last sign-in, never more than the sign-in gave (a higher role waits for the provider's word
    at the next refresh); None when the mappings give those groups nothing any more."""
    if user.role is None:
        return None
    mapped = role_for(user.groups or (), mapping)
    return None if mapped is None else lower(Role(row.role), mapped)


def session_of(
    db: Session,
    cookie: str | None,
    now: datetime,
    mapping: Mapping[str, Grant] | None = None,
    teamless: str = "fleet",
) -> PersonSession | None:
    """The session a cookie names, its role and teams from the group mappings in effect now
    (`mapping`: GPUPROV_OIDC_ROLES and the stored ones, app.domain.group_mappings), its person in
    the teams that name them or their groups; None when there is none, it outlived its lifetime,
    or the mappings no longer give its groups a role."""
    if not cookie or len(cookie) > 128:
        return None
    found = repo.session_with_user(db, _digest(cookie))
    if found is None:
        return None
    row, user = found
    mapping = mapping or {}
    role = _role_now(row, user, mapping)
    if row.expires_at <= now or role is None:
        return None
    groups = list(user.groups or ())
    team = person_membership(
        db, user.issuer, user.subject, groups, mapped_teams(groups, mapping), teamless
    )
    principal = Principal(
        None,
        (user.email or user.subject)[:128],
        # policy:write only for a role whose reads cover the whole fleet (in no team)
        role_scopes(role, fleet_wide=team.scope is None),
        (),
        person=(user.issuer, user.subject),
        teams=team.teams,
        asset_scope=team.scope,
        email=user.email,
    )
    return PersonSession(principal, row.csrf, row.verified_at, role)


def session_end(
    db: Session, cookie: str, now: datetime, mapping: Mapping[str, Grant] | None = None
) -> SessionEnd:
    """Why the session a cookie names no longer works (`session_of` refused it): it outlived
    its lifetime, its user lost every mapped group (at a sign-in, or a mapping removed since),
    or it is gone."""
    found = repo.session_with_user(db, _digest(cookie)) if len(cookie) <= 128 else None
    if found is None:
        return SessionEnd.SESSION_ENDED
    row, user = found
    if row.expires_at <= now:
        return SessionEnd.SESSION_EXPIRED
    if _role_now(row, user, mapping or {}) is None:
        return SessionEnd.ACCESS_REMOVED
    return SessionEnd.SESSION_ENDED


def end_session(session: Session, cookie: str | None) -> tuple[bool, str | None]:
    """Delete the session a cookie names: whether there was one, and its ID token (the
    ``id_token_hint`` of logging out at the provider)."""
    if not cookie or len(cookie) > 128:
        return False, None
    id_hash = _digest(cookie)
    existed = repo.session_with_user(session, id_hash) is not None
    return existed, repo.delete_session(session, id_hash)
