"""Teams and asset scopes: a team's members (users by issuer and subject, IdP groups), its asset
scope (scoping labels and name patterns), which teams a caller belongs to, and the scoping
labels admins assign to assets.

Scoping labels are facts the service stores (`AssetScopeLabel`), set only here by an admin;
a report's labels never reach them, and a report may not set a label whose key is a scoping
key (`protected_keys`): an agent, a team token or a CI job cannot relabel an asset into or out
of a team's view. Every read for a team-scoped caller adds
`app.storage.repositories.scopes.asset_condition` (docs/teams.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from app.clock import utcnow
from app.domain.audit import Actor, record
from app.domain.patterns import CONTROL, SPACE_OR_CONTROL
from app.domain.report_parser import LABEL_PATTERN, check_label
from app.errors import BadRequest, Conflict, InvalidReport, NotFound
from app.storage.repositories import assets as asset_repo
from app.storage.repositories import scopes as repo
from app.storage.repositories.scopes import AssetScope, TeamSelector
from app.storage.tables import Team

#: a team's name: what the API path, the token's ``team`` and the group mapping name
TEAM_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
_TEAM_NAME = re.compile(TEAM_NAME_PATTERN)
#: an asset name pattern of a team: ``*`` and ``?`` over literal characters (no ``[`` ``]``),
#: 1-1024 characters without control characters or white space around them
NAME_PATTERN = (
    rf"^[^{SPACE_OR_CONTROL}\[\]](?:[^{CONTROL}\[\]]{{0,1022}}[^{SPACE_OR_CONTROL}\[\]])?$"
)
_NAME = re.compile(NAME_PATTERN)
#: a scoping label's key and value (the rules of the labels reports carry: `check_label`)
LABEL_KEY_PATTERN = LABEL_PATTERN.split("=", 1)[0] + "$"
LABEL_VALUE_PATTERN = r"^[^\u0000-\u001f\u007f]{0,256}$"
MAX_ITEMS = 256


def check_team_name(name: str) -> str:
    """A team name (`TEAM_NAME_PATTERN`), 400 otherwise."""
    if not _TEAM_NAME.fullmatch(name):
        raise BadRequest(
            f"team name {name[:80]!r} must be 1-64 lower-case letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True, slots=True)
class TeamSpec:
    """A team as an admin states it, checked."""

    labels: dict[str, str]
    names: list[str]
    users: list[dict[str, str]]
    groups: list[str]


def _strings(body: Mapping[str, Any], field: str) -> list[Any]:
    value = body.get(field, [])
    if not isinstance(value, list):
        raise BadRequest(f"{field} must be a list")
    if len(value) > MAX_ITEMS:
        raise BadRequest(f"{field} holds {len(value)} entries; at most {MAX_ITEMS}")
    return value


def check_team(body: Mapping[str, Any]) -> TeamSpec:
    """A team document ``{"labels": {"env": "prod"}, "names": ["ml-*"], "users": [{"issuer",
    "subject"}], "groups": ["ml-viewers"]}``, checked: a scope of nothing is refused, since it
    would be read as every asset or as none."""
    unknown = sorted(set(body) - {"labels", "names", "users", "groups"})
    if unknown:
        raise BadRequest(f"unknown team fields {unknown}; a team has labels, names, users, groups")
    labels = body.get("labels", {})
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise BadRequest("labels must be an object of label keys to values")
    if len(labels) > MAX_ITEMS:
        raise BadRequest(f"labels holds {len(labels)} entries; at most {MAX_ITEMS}")
    for key, value in labels.items():
        try:
            check_label(key, value)
        except InvalidReport as e:
            raise BadRequest(e.message) from e
    names = _strings(body, "names")
    for pattern in names:
        if isinstance(pattern, str) and ("[" in pattern or "]" in pattern):
            raise BadRequest(
                f"name pattern {pattern[:80]!r}: team patterns know * and ? only (no [ ])"
            )
        if not isinstance(pattern, str) or not _NAME.fullmatch(pattern):
            raise BadRequest(
                f"name pattern {str(pattern)[:80]!r} must be 1-1024 characters without control "
                "characters or white space around them"
            )
    if not labels and not names:
        raise BadRequest(
            "a team needs an asset scope: scoping labels (env=prod) or name patterns (ml-*)"
        )
    users = []
    for entry in _strings(body, "users"):
        if (
            not isinstance(entry, dict)
            or set(entry) != {"issuer", "subject"}
            or not all(isinstance(v, str) and 0 < len(v) <= 1024 for v in entry.values())
        ):
            raise BadRequest('a user is {"issuer": ..., "subject": ...} (the ID token iss and sub)')
        users.append({"issuer": entry["issuer"], "subject": entry["subject"]})
    groups = _strings(body, "groups")
    if not all(isinstance(g, str) and 0 < len(g) <= 256 for g in groups):
        raise BadRequest("groups must be IdP group names of 1-256 characters")
    return TeamSpec(dict(sorted(labels.items())), sorted(set(names)), users, sorted(set(groups)))


def team_dict(team: Team) -> dict[str, Any]:
    """A team as the API shows it."""
    return {
        "name": team.name,
        "labels": dict(team.labels),
        "names": list(team.names),
        "users": [dict(u) for u in team.users],
        "groups": list(team.groups),
        "created_at": team.created_at.isoformat(),
        "updated_at": team.updated_at.isoformat(),
    }


def put_team(session: Session, name: str, spec: TeamSpec, actor: Actor) -> tuple[Team, bool]:
    """Create or replace a team (audited); whether it is new."""
    check_team_name(name)
    now = utcnow()
    team = repo.team_by_name(session, name, lock=True)
    created = team is None
    if team is None:
        team = Team(name=name, created_at=now)
        session.add(team)
    team.labels, team.names, team.users, team.groups = (
        spec.labels,
        spec.names,
        spec.users,
        spec.groups,
    )
    team.updated_at = now
    session.flush()
    details = {"labels": spec.labels, "names": spec.names, "users": spec.users}
    record(session, actor, "team.put", f"team:{name}", {**details, "groups": spec.groups}, now)
    return team, created


def get_team(session: Session, name: str) -> Team:
    """The team of this name (404 otherwise)."""
    team = repo.team_by_name(session, check_team_name(name))
    if team is None:
        raise NotFound(f"no team named {name!r}")
    return team


def list_teams(session: Session) -> list[Team]:
    """Every team, by name."""
    return repo.teams(session)


def delete_team(session: Session, name: str, actor: Actor) -> Team:
    """Delete a team (audited); 409 while tokens belong to it, which would otherwise be left
    seeing the whole fleet."""
    team = repo.team_by_name(session, check_team_name(name), lock=True)
    if team is None:
        raise NotFound(f"no team named {name!r}")
    holders = repo.token_count(session, team.id)
    if holders:
        raise Conflict(
            f"{holders} token(s) belong to team {name!r}; revoke them (or move them) first"
        )
    record(session, actor, "team.delete", f"team:{name}", team_dict(team))
    session.delete(team)
    return team


def team_id(session: Session, name: str) -> int:
    """The id of a named team, for a token joining it (400: the name is the caller's input)."""
    team = repo.team_by_name(session, check_team_name(name))
    if team is None:
        raise NotFound(f"no team named {name!r}")
    return team.id


# -- who is in which team ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Membership:
    """The teams of a caller and the asset scope they give (None: the whole fleet)."""

    teams: tuple[str, ...]
    scope: AssetScope | None


UNSCOPED = Membership((), None)
#: a caller in no team with GPUPROV_TEAMLESS_ACCESS=none: no asset at all
TEAMLESS = Membership((), AssetScope(()))


def _teamless(access: str) -> Membership:
    return TEAMLESS if access == "none" else UNSCOPED


def _selector(row: Any) -> TeamSelector:
    return TeamSelector(tuple(sorted(dict(row.labels).items())), tuple(row.names))


def _membership(rows: Sequence[Any], teamless: str = "fleet") -> Membership:
    if not rows:
        return _teamless(teamless)
    return Membership(tuple(r.name for r in rows), AssetScope(tuple(_selector(r) for r in rows)))


def token_membership(
    db: Session | Connection, team: int | None, teamless: str = "fleet"
) -> Membership:
    """A token's team and scope (no team: the whole fleet, as before teams existed, or nothing
    with ``teamless`` ``none``)."""
    if team is None:
        return _teamless(teamless)
    rows = [r for r in repo.team_rows(db) if r.id == team]
    # a token whose team vanished sees nothing rather than everything (the FK forbids it)
    return _membership(rows) if rows else Membership(("?",), AssetScope(()))


def person_membership(
    db: Session | Connection,
    issuer: str,
    subject: str,
    groups: Iterable[str],
    mapped_teams: Iterable[str] = (),
    teamless: str = "fleet",
) -> Membership:
    """A signed-in person's teams: those naming them (issuer and subject), one of their groups,
    or mapped from a group by GPUPROV_OIDC_ROLES; no team: the whole fleet, or nothing with
    ``teamless`` ``none`` (GPUPROV_TEAMLESS_ACCESS)."""
    mine, named = set(groups), set(mapped_teams)
    rows = [
        r
        for r in repo.team_rows(db)
        if r.name in named
        or mine.intersection(r.groups)
        or {"issuer": issuer, "subject": subject} in list(r.users)
    ]
    missing = named - {r.name for r in rows}
    if missing and not rows:
        # a group mapped to a team that does not exist confines to nothing, never to everything
        return Membership(tuple(sorted(missing)), AssetScope(()))
    return _membership(rows, teamless)


# -- scoping labels ---------------------------------------------------------------------


def protected_keys(db: Session | Connection, configured: Iterable[str]) -> frozenset[str]:
    """The label keys no report may set: GPUPROV_SCOPING_LABELS and every key a team's scope
    selects on."""
    keys = set(configured)
    for row in repo.team_rows(db):
        keys.update(dict(row.labels))
    return frozenset(keys)


def reported_labels(
    labels: Mapping[str, str], protected: frozenset[str], assigned: Mapping[str, str]
) -> dict[str, str]:
    """A report's labels less those it may not set: scoping keys, and keys an admin assigned
    to the asset (which keep the admin's value)."""
    return {k: v for k, v in labels.items() if k not in protected and k not in assigned}


def check_scope_labels(body: Any) -> dict[str, str]:
    """``{"labels": {"team": "ml"}}``: the scoping labels an admin assigns, checked."""
    if not isinstance(body, dict) or set(body) != {"labels"}:
        raise BadRequest('the body is {"labels": {"key": "value", ...}}')
    labels = body["labels"]
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise BadRequest("labels must be an object of label keys to values")
    if len(labels) > MAX_ITEMS:
        raise BadRequest(f"labels holds {len(labels)} entries; at most {MAX_ITEMS}")
    for key, value in labels.items():
        try:
            check_label(key, value)
        except InvalidReport as e:
            raise BadRequest(e.message) from e
    return dict(sorted(labels.items()))


def scope_labels_of(session: Session, asset_id: int) -> dict[str, str]:
    """The scoping labels an admin assigned to the asset (404 for no asset)."""
    if not repo.asset_visible(session, asset_id, None):
        raise NotFound(f"no asset with id {asset_id}")
    return repo.scope_labels(session, asset_id)


def assign_labels(
    session: Session, asset_id: int, labels: Mapping[str, str], actor: Actor
) -> dict[str, str]:
    """Make the asset's scoping labels exactly ``labels`` (audited); the asset's shown labels
    follow: assigned keys take the assigned value, keys no longer assigned are dropped."""
    asset = asset_repo.by_id(session, asset_id)
    if asset is None:
        raise NotFound(f"no asset with id {asset_id}")
    before = repo.scope_labels(session, asset_id)
    repo.set_scope_labels(session, asset_id, labels)
    shown = {k: v for k, v in asset.labels.items() if k not in before}
    shown.update(labels)
    if shown != asset.labels:
        asset_repo.replace_labels(session, asset_id, shown)
        asset.labels = shown
    record(
        session,
        actor,
        "asset.labels",
        f"asset:{asset_id}",
        {"name": asset.name, "labels": dict(labels), "before": before},
    )
    return dict(labels)


def assign_on_create(session: Session, asset_id: int, scope: AssetScope) -> dict[str, str]:
    """An asset without scoping labels reported by a team's token joins that team: its scoping
    labels become the team's (stored facts of the token, never the report's); the labels
    assigned."""
    if not scope.selectors:
        return {}
    labels = dict(scope.selectors[0].labels)
    if labels:
        repo.set_scope_labels(session, asset_id, labels)
    return labels
