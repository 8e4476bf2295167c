"""API tokens: creation (the secret is returned once), authentication and revocation.

Tokens are 256-bit random secrets, so a single SHA-256 is a sufficient one-way store (no
password-style stretching is needed); lookups are by that hash.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session, object_session

from app.clock import utcnow
from app.domain.audit import Actor, record
from app.domain.patterns import trimmed_text
from app.domain.teams import team_id, token_membership
from app.errors import BadRequest, Conflict, NotFound, Unauthorized
from app.storage.repositories import tokens as repo
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import ApiToken, Team

TOKEN_PREFIX = "gpv_"
#: last-use times are written at most this often per token, to keep reads read-only
_TOUCH_INTERVAL = timedelta(minutes=1)
#: the longest lifetime or rotation grace period a token may be given
MAX_LIFETIME = timedelta(days=3660)
_DURATION = re.compile(r"([1-9][0-9]{0,6})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def _at_most(n: int) -> str:
    """A regular expression of the decimal numbers 1..n, no leading zero (n >= 1)."""
    digits = str(n)
    alternatives = [f"[1-9][0-9]{{0,{len(digits) - 2}}}"] if len(digits) > 1 else []
    for i, digit in enumerate(digits):
        low, rest = (1 if i == 0 else 0), len(digits) - i - 1
        if int(digit) > low:
            tail = f"[0-9]{{{rest}}}" if rest else ""
            alternatives.append(f"{digits[:i]}[{low}-{int(digit) - 1}]{tail}")
    alternatives.append(digits)
    return "(?:" + "|".join(alternatives) + ")"


_DURATIONS = "|".join(
    _at_most(min(int(MAX_LIFETIME.total_seconds()) // seconds, 9_999_999)) + unit
    for unit, seconds in _UNITS.items()
)
#: a duration `parse_duration` accepts, within `MAX_LIFETIME`, as one regular expression (the
#: API documents ``grace`` with it)
DURATION_PATTERN = f"^(?:{_DURATIONS})$"
#: the forms of an expiry (`parse_expiry`): a duration, a date or an RFC 3339 date-time; whether
#: it lies in the future and within `MAX_LIFETIME` is the time's, not the pattern's
EXPIRY_PATTERN = (
    f"^(?:{_DURATIONS}"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
    r")$"
)
#: a token's name and an asset-name pattern: no control character, no white space around
NAME_PATTERN = trimmed_text(128)
ASSET_PATTERN = trimmed_text(1024)
_NAME = re.compile(NAME_PATTERN)
_EXPIRY = re.compile(EXPIRY_PATTERN)
_ASSET = re.compile(ASSET_PATTERN)


class Scope(StrEnum):
    REPORT_WRITE = "report:write"
    INVENTORY_READ = "inventory:read"
    GATE = "gate"
    #: triage: advisory analyses written and withdrawn, VEX documents imported
    TRIAGE = "triage"
    #: promotion policies stored (new versions): they gate every team's images, so a caller in
    #: a team never holds it (docs/sso.md "Who writes policies")
    POLICY_WRITE = "policy:write"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller: a stored API token, or a CI job by its OIDC ID token."""

    #: the stored token (None for a CI job)
    token_id: int | None
    name: str
    scopes: frozenset[str]
    asset_patterns: tuple[str, ...]
    last_used_at: datetime | None = None
    #: the policies a gate token may gate under (empty: any)
    policy_names: tuple[str, ...] = ()
    #: a CI job's grant: the trust rule that matched and the claims it matched on
    ci: Mapping[str, Any] | None = None
    #: a person signed in with the OpenID Provider: (issuer, subject) of their ID token
    person: tuple[str, str] | None = None
    #: the teams the caller belongs to (by name)
    teams: tuple[str, ...] = ()
    #: the assets the caller may see: None for the whole fleet (admins, callers in no team);
    #: every read applies it (`app.storage.repositories.scopes`)
    asset_scope: AssetScope | None = None
    #: a person's email (the name shown and audited when there is one)
    email: str | None = None

    @property
    def scope(self) -> AssetScope | None:
        """The asset scope of the caller's reads (admins see everything)."""
        return None if Scope.ADMIN.value in self.scopes else self.asset_scope

    @property
    def actor(self) -> Actor:
        """The caller as the audit log names it."""
        if self.ci is not None:
            return Actor("ci", self.name)
        if self.person is not None:
            return Actor("web", self.name, None, self.person[0], self.person[1])
        return Actor("api", self.name, self.token_id)

    @property
    def key(self) -> str:
        """What per-caller limits count by: the token, or the CI rule and repository."""
        if self.person is not None:
            return f"user:{self.person[0]}#{self.person[1]}"
        if self.ci is None:
            return f"token:{self.token_id}"
        return self.name

    def has(self, scope: Scope) -> bool:
        """Whether the caller holds ``scope`` (``admin`` holds every scope)."""
        return scope.value in self.scopes or Scope.ADMIN.value in self.scopes

    def may_gate_under(self, policy_name: str) -> bool:
        """Whether a policy-limited token may gate under this policy (by exact name: a
        ``prod`` limit never admits ``prod-lax``)."""
        return not self.policy_names or policy_name in self.policy_names

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


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``12h``, ``30d`` or ``2w``, at most `MAX_LIFETIME`
    (`DURATION_PATTERN`)."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise BadRequest(f"{text!r} is not a duration such as 90s, 15m, 12h, 30d or 2w")
    duration = timedelta(seconds=int(match[1]) * _UNITS[match[2]])
    if duration > MAX_LIFETIME:
        raise BadRequest(f"{text!r} is longer than {MAX_LIFETIME.days} days")
    return duration


def parse_expiry(text: str, now: datetime) -> datetime:
    """When a token given ``--expires TEXT`` expires: a duration from now (`parse_duration`), a
    date (``2027-01-31``: the start of that day, UTC) or an RFC 3339 time; in the future and
    within `MAX_LIFETIME`."""
    if not _EXPIRY.fullmatch(text):
        raise BadRequest(
            f"expiry {text[:80]!r} is neither a duration (30d, 12h, 2w) nor a date (2027-01-31) "
            "or an RFC 3339 time (2027-01-31T12:00:00Z)"
        )
    if _DURATION.fullmatch(text):
        return now + parse_duration(text)
    try:
        if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
            when = datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
        else:
            when = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
            when = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise BadRequest(
            f"expiry {text!r} is neither a duration (30d, 12h, 2w) nor a date (2027-01-31) "
            "or an RFC 3339 time"
        ) from None
    if when <= now:
        raise BadRequest(f"expiry {text!r} is not in the future")
    if when - now > MAX_LIFETIME:
        raise BadRequest(f"expiry {text!r} is more than {MAX_LIFETIME.days} days away")
    return when


def _token_target(token: ApiToken) -> str:
    return f"token:{token.id}"


def create_token(
    session: Session,
    name: str,
    scopes: list[str],
    asset_patterns: list[str] | None = None,
    *,
    expires_at: datetime | None = None,
    actor: Actor | None = None,
    policy_names: list[str] | None = None,
    team: str | None = None,
) -> NewToken:
    """Create a token; refuses unknown scopes, asset patterns on tokens that cannot write and
    policy limits on tokens that cannot gate, and a team on an admin token (which sees
    everything) or a policy:write token (policies gate every team's images). With an `actor`,
    the creation is recorded in the audit log."""
    if not _NAME.fullmatch(name):
        raise BadRequest(
            "token name must be 1-128 characters without control characters or white space "
            "around them"
        )
    known = {s.value for s in Scope}
    unknown = sorted(set(scopes) - known)
    if unknown or not scopes:
        raise BadRequest(
            f"unknown or missing scopes {unknown}; choose from {', '.join(sorted(known))}"
        )
    patterns = checked_asset_patterns(list(asset_patterns or []), scopes)
    policies = checked_policy_limits(policy_names or [], scopes)
    now = utcnow()
    if expires_at is not None and expires_at <= now:
        raise BadRequest("the token's expiry is not in the future")
    team_ref = None
    if team is not None:
        if Scope.ADMIN.value in scopes:
            raise BadRequest("an admin token sees every asset: it cannot belong to a team")
        if Scope.POLICY_WRITE.value in scopes:
            raise BadRequest(
                "a policy:write token changes policies that gate every team's images: it cannot "
                "belong to a team"
            )
        team_ref = team_id(session, team)
    new = _new_token(
        session, name, sorted(set(scopes)), patterns, now, expires_at, policies, team_ref
    )
    if actor is not None:
        record(session, actor, "token.create", _token_target(new.token), _summary(new.token), now)
    return new


def checked_asset_patterns(patterns: list[str], scopes: list[str]) -> list[str]:
    """The asset-name patterns a report:write caller is bound to (token or CI rule), checked:
    none empty (which would bind to nothing, and so report for every asset)."""
    if any(not p.strip() for p in patterns):
        # dropping it would leave a token bound to nothing, one that reports for every asset
        empty = next(n for n, p in enumerate(patterns, 1) if not p.strip())
        raise BadRequest(
            f"asset pattern {empty} is empty; give a name or a glob "
            "such as node-*, or no pattern for a token that reports for every asset"
        )
    bad = [p for p in patterns if not _ASSET.fullmatch(p)]
    if bad:
        raise BadRequest(
            f"asset pattern {bad[0][:80]!r} must be 1-1024 characters without control "
            "characters or white space around them"
        )
    if patterns and Scope.REPORT_WRITE.value not in scopes:
        raise BadRequest("asset patterns only apply to tokens with the report:write scope")
    return patterns


_POLICY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def checked_policy_limits(names: list[str], scopes: list[str]) -> list[str]:
    """A gate token's policy limit: exact policy names, none empty; refused on tokens that
    cannot gate, and on admin tokens (which can store any policy, so a limit would be void)."""
    if not names:
        return []
    for name in names:
        if not _POLICY_NAME.fullmatch(name):
            raise BadRequest(
                f"policy limit {name[:80]!r} is not a policy name (letters, digits, '.', '_', "
                "'-'; 1-128 characters)"
            )
    if Scope.GATE.value not in scopes or Scope.ADMIN.value in scopes:
        raise BadRequest("policy limits only apply to tokens with the gate scope, not admin")
    return sorted(set(names))


def _new_token(
    session: Session,
    name: str,
    scopes: list[str],
    patterns: list[str],
    now: datetime,
    expires_at: datetime | None,
    policy_names: list[str] | None = None,
    team: int | None = None,
) -> NewToken:
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        name=name,
        token_hash=hash_secret(secret),
        prefix=secret[:12],
        scopes=scopes,
        asset_patterns=patterns,
        policy_names=policy_names or [],
        created_at=now,
        expires_at=expires_at,
        team_id=team,
    )
    return NewToken(repo.add(session, token), secret)


def _summary(token: ApiToken) -> dict[str, Any]:
    """What the audit log keeps of a token: never its hash or secret."""
    return {
        "name": token.name,
        "prefix": token.prefix,
        "scopes": list(token.scopes),
        "assets": list(token.asset_patterns),
        "policies": list(token.policy_names),
        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        "replaced_by": token.replaced_by_id,
        "team": _team_name(token),
    }


def authenticate(
    db: Session | Connection, secret: str, now: datetime | None = None, teamless: str = "fleet"
) -> Principal:
    """The principal of a bearer secret; raises `Unauthorized` for unknown, revoked or expired
    tokens (unknown and revoked ones get the same message). ``teamless``: what a token of no
    team sees (GPUPROV_TEAMLESS_ACCESS)."""
    row = repo.credentials(db, hash_secret(secret))
    if row is None:
        raise Unauthorized("unknown or revoked token", reason="invalid")
    if row.revoked_at is not None:
        raise Unauthorized("unknown or revoked token", reason="revoked")
    if row.expires_at is not None and row.expires_at <= (now or utcnow()):
        raise Unauthorized("the token has expired", reason="expired")
    team = token_membership(db, row.team_id, teamless)
    return Principal(
        row.id,
        row.name,
        frozenset(row.scopes),
        tuple(row.asset_patterns),
        row.last_used_at,
        tuple(row.policy_names or ()),
        teams=team.teams,
        asset_scope=team.scope,
    )


def session_principal(
    db: Session | Connection, token_id: int, now: datetime, teamless: str = "fleet"
) -> tuple[Principal, str] | None:
    """The principal of a dashboard session's token and the token's stored hash (the session is
    bound to it); None when the token is gone, revoked or expired, which ends its sessions."""
    row = repo.credentials_by_id(db, token_id)
    if row is None or row.revoked_at is not None:
        return None
    if row.expires_at is not None and row.expires_at <= now:
        return None
    team = token_membership(db, row.team_id, teamless)
    principal = Principal(
        row.id,
        row.name,
        frozenset(row.scopes),
        tuple(row.asset_patterns),
        row.last_used_at,
        tuple(row.policy_names or ()),
        teams=team.teams,
        asset_scope=team.scope,
    )
    return principal, row.token_hash


class SessionEnd(StrEnum):
    """Why a dashboard session ended, as its login page says it (no more than the API tells the
    holder of the token's secret: unknown and revoked tokens read the same)."""

    SESSION_EXPIRED = "session-expired"
    TOKEN_EXPIRED = "token-expired"
    TOKEN_REVOKED = "token-revoked"
    LOGGED_OUT = "logged-out"
    #: a person's sign-in: its session row is gone (signed out in another browser, or rotated
    #: by signing in again) or their groups no longer give them a role
    SESSION_ENDED = "session-ended"
    ACCESS_REMOVED = "access-removed"


def session_end(db: Session | Connection, token_id: int, now: datetime) -> SessionEnd:
    """Why a session of this token no longer works (`session_principal` refused it): the token
    expired, or it is unknown, revoked or replaced."""
    row = repo.credentials_by_id(db, token_id)
    if row is not None and row.revoked_at is None and row.expires_at is not None:
        if row.expires_at <= now:
            return SessionEnd.TOKEN_EXPIRED
    return SessionEnd.TOKEN_REVOKED


class TokenState(StrEnum):
    """What a token can do now: `GRACE` is a rotated token whose secret still works until its
    expiry, `ACTIVE` one that works and was not replaced."""

    ACTIVE = "active"
    GRACE = "grace"
    EXPIRED = "expired"
    REVOKED = "revoked"


def token_state(token: ApiToken, now: datetime) -> TokenState:
    """The state of a token at ``now`` (revocation first: a revoked token's expiry is moot)."""
    if token.revoked_at is not None:
        return TokenState.REVOKED
    if token.expires_at is not None and token.expires_at <= now:
        return TokenState.EXPIRED
    if token.replaced_by_id is not None:
        return TokenState.GRACE
    return TokenState.ACTIVE


def use_is_due(principal: Principal, now: datetime) -> bool:
    """Whether the token's last-use time is stale enough to write again (never for a CI job,
    which has no stored token)."""
    if principal.token_id is None:
        return False
    last = principal.last_used_at
    return last is None or now - last > _TOUCH_INTERVAL


def record_use(session: Session, principal: Principal, now: datetime) -> None:
    """Write the token's last-use time."""
    if principal.token_id is not None:
        repo.touch(session, principal.token_id, now)


def revoke_token(session: Session, token_id: int, actor: Actor | None = None) -> ApiToken:
    """Revoke a token (idempotent: only the first revocation is recorded)."""
    token = repo.by_id(session, token_id, lock=True)
    if token is None:
        raise NotFound(f"no token with id {token_id}")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        if actor is not None:
            record(session, actor, "token.revoke", _token_target(token), _summary(token))
    return token


def revoke_by_secret(session: Session, secret: str, actor: Actor | None = None) -> ApiToken:
    """Revoke the token of a secret (`revoke_token`), for whoever holds the secret but not the
    id: `make run` revoking the tokens of its previous run. 404 for a secret of no token."""
    row = repo.credentials(session, hash_secret(secret.strip()))
    if row is None:
        raise NotFound("no token has this secret")
    return revoke_token(session, row.id, actor)


def rotate_token(
    session: Session, token_id: int, grace: timedelta = timedelta(0), actor: Actor | None = None
) -> NewToken:
    """Replace a token by a new secret with the same name, scopes, asset and policy limits and
    lifetime
    (an expiring token's new expiry is as far from now as the old one's was from its
    creation). The old secret is revoked now, or with a `grace` period keeps working until then
    (its expiry brought forward), so agents can be moved to the new one without a gap."""
    # locked: of concurrent rotations one succeeds, the others then see it rotated (409)
    old = repo.by_id(session, token_id, lock=True)
    if old is None:
        raise NotFound(f"no token with id {token_id}")
    now = utcnow()
    if old.revoked_at is not None or (old.expires_at is not None and old.expires_at <= now):
        raise Conflict(f"token {token_id} is revoked or expired; create a new one instead")
    if old.replaced_by_id is not None:
        # in its grace period: its expiry is the grace's end, no longer its lifetime
        raise Conflict(
            f"token {token_id} was rotated already: token {old.replaced_by_id} replaces it;"
            " rotate that one"
        )
    if grace < timedelta(0) or grace > MAX_LIFETIME:
        raise BadRequest(f"the grace period must be between 0 and {MAX_LIFETIME.days} days")
    expires_at = None
    if old.expires_at is not None:
        expires_at = now + (old.expires_at - old.created_at)
    new = _new_token(
        session,
        old.name,
        list(old.scopes),
        list(old.asset_patterns),
        now,
        expires_at,
        list(old.policy_names),
        old.team_id,
    )
    old.replaced_by_id = new.token.id
    if grace:
        end = now + grace
        old.expires_at = end if old.expires_at is None else min(old.expires_at, end)
    else:
        old.revoked_at = now
    if actor is not None:
        details = {
            **_summary(new.token),
            "replaced": old.id,
            # the old secret works until then (its new expiry, or now: revoked)
            "replaced_until": (old.expires_at if grace and old.expires_at else now).isoformat(),
            "grace_seconds": int(grace.total_seconds()),
        }
        record(session, actor, "token.rotate", _token_target(new.token), details, now)
    return new


def list_tokens(session: Session) -> list[ApiToken]:
    """Every token (hashes never leave the service)."""
    return list(repo.all_tokens(session))


def token_page(session: Session, limit: int, offset: int) -> tuple[list[ApiToken], int]:
    """A page of tokens, oldest first, and how many there are."""
    rows, total = repo.page(session, limit, offset)
    return list(rows), total


def token_overview(
    session: Session, limit: int, offset: int, now: datetime
) -> tuple[list[dict[str, Any]], int]:
    """A page of tokens as the admin page shows them: each with its state at ``now`` and its
    successor's name (a rotated token's), and how many tokens there are."""
    rows, total = token_page(session, limit, offset)
    names = {t.id: t.name for t in rows}
    for t in rows:
        if t.replaced_by_id is not None and t.replaced_by_id not in names:
            successor = repo.by_id(session, t.replaced_by_id)
            names[t.replaced_by_id] = successor.name if successor is not None else ""
    items = [
        {
            **token_dict(t, now),
            "replaced_by_name": names.get(t.replaced_by_id) if t.replaced_by_id else None,
        }
        for t in rows
    ]
    return items, total


def token_dict(token: ApiToken, now: datetime) -> dict[str, Any]:
    """A token as the API shows it at ``now`` (its state then): never its hash or secret."""
    return {
        "id": token.id,
        "name": token.name,
        "prefix": token.prefix,
        "scopes": list(token.scopes),
        "assets": list(token.asset_patterns),
        "policies": list(token.policy_names),
        "created_at": token.created_at.isoformat(),
        "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
        "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        "replaced_by": token.replaced_by_id,
        "state": token_state(token, now).value,
        "team": _team_name(token),
    }


def _team_name(token: ApiToken) -> str | None:
    if token.team_id is None:
        return None
    session = object_session(token)
    team = session.get(Team, token.team_id) if session is not None else None
    return team.name if team is not None else None
