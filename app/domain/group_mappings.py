"""Group mappings: which identity-provider group gives which role (and, optionally, which team)
in gpuprov. Two sources, joined: GPUPROV_OIDC_ROLES in the configuration, read-only here, and
the mappings admins store (API and Admin → Group mappings, each change audited).

A group the configuration maps is never stored (409 naming the setting): one group, one place
that says what it gives. A group neither maps gives nothing: there is no default role. The
effective mapping is read at every sign-in and every page of a signed-in person
(app.domain.users), so removing a mapping removes the access it gave at the person's next page.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from app.domain.audit import Actor, record
from app.domain.oidc import Grant, Role, grants_of
from app.domain.patterns import CONTROL, SPACE_OR_CONTROL
from app.domain.teams import TEAM_NAME_PATTERN
from app.errors import AppError, Conflict, NotFound
from app.storage.repositories import group_mappings as repo
from app.storage.repositories import scopes as team_repo

log = logging.getLogger(__name__)

#: a group's name as the provider puts it in the groups claim: 1-256 characters, no control
#: character, no white space around it, no ``/`` (it names the group in an URL path; Keycloak's
#: "full group path" is best switched off: docs/sso.md)
GROUP_PATTERN = rf"^[^{SPACE_OR_CONTROL}/](?:[^{CONTROL}/]{{0,254}}[^{SPACE_OR_CONTROL}/])?$"
_GROUP = re.compile(GROUP_PATTERN)
_TEAM = re.compile(TEAM_NAME_PATTERN)
ROLES = tuple(r.value for r in Role)
#: where a mapping comes from
CONFIGURATION = "configuration"
DATABASE = "database"
#: the setting a configured mapping lives in (the 409's words)
SETTING = "GPUPROV_OIDC_ROLES"


class InvalidMapping(AppError):
    """A mapping that cannot be stored: the message says which field and why (422)."""

    status = 422


def check_group(group: str) -> str:
    """A group name (`GROUP_PATTERN`), 422 otherwise."""
    if not _GROUP.fullmatch(group):
        raise InvalidMapping(
            f"group {group[:80]!r} must be 1-256 characters without control characters, '/' or "
            "white space around them, as the provider's groups claim names it"
        )
    return group


def _stored(db: Session | Connection) -> dict[str, tuple[Grant, Any]]:
    grants = {}
    for row in repo.rows(db):
        try:
            grant = Grant(Role(row.role), row.team)
        except ValueError:
            # edited behind the service's back into something it never stores: it gives nothing
            log.warning("group mapping %r names no role (%r): not used", row.group_name, row.role)
            continue
        grants[row.group_name] = (grant, row)
    return grants


def effective(db: Session | Connection, configured: Mapping[str, Any]) -> dict[str, Grant]:
    """Every group's grant: the stored mappings and GPUPROV_OIDC_ROLES (`configured`), the
    configuration's for a group both name."""
    grants = {group: grant for group, (grant, _) in _stored(db).items()}
    grants.update(grants_of(configured))
    return grants


def _mapping_dict(
    group: str, grant: Grant, source: str, in_effect: bool, row: Any = None
) -> dict[str, Any]:
    return {
        "group": group,
        "role": grant.role.value,
        "team": grant.team,
        **_origin(source, in_effect, row),
    }


def _origin(source: str, in_effect: bool, row: Any) -> dict[str, Any]:
    return {
        "source": source,
        "in_effect": in_effect,
        "created_at": row.created_at.isoformat() if row is not None else None,
        "updated_at": row.updated_at.isoformat() if row is not None else None,
    }


def list_mappings(db: Session | Connection, configured: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every mapping of both sources, by group: a stored one the configuration also names (set
    after it was stored) is listed with ``in_effect`` false."""
    config = grants_of(configured)
    items = [_mapping_dict(group, grant, CONFIGURATION, True) for group, grant in config.items()]
    items += [
        _mapping_dict(group, grant, DATABASE, group not in config, row)
        for group, (grant, row) in _stored(db).items()
    ]
    return sorted(items, key=lambda m: (m["group"], m["source"] != CONFIGURATION))


def get_mapping(db: Session, group: str, configured: Mapping[str, Any]) -> dict[str, Any]:
    """The mapping in effect for `group` (404 when none maps it)."""
    config = grants_of(configured)
    if group in config:
        return _mapping_dict(group, config[group], CONFIGURATION, True)
    stored = _stored(db).get(group)
    if stored is None:
        raise NotFound(f"no mapping of group {group[:256]!r}: its members have no access")
    return _mapping_dict(group, stored[0], DATABASE, True, stored[1])


def _configured_conflict(group: str) -> Conflict:
    return Conflict(
        f"group {group[:256]!r} is mapped in the configuration ({SETTING}): change it there, "
        "where it stays the one mapping of this group"
    )


def put_mapping(
    session: Session,
    group: str,
    role: str,
    team: str | None,
    configured: Mapping[str, Any],
    actor: Actor,
    now: datetime,
) -> tuple[dict[str, Any], bool]:
    """Store (or replace) the mapping of `group` to `role` and `team` (audited); the mapping and
    whether it is new. 409 for a group the configuration maps; 422 for an unknown role or team."""
    check_group(group)
    if group in configured:
        raise _configured_conflict(group)
    if role not in ROLES:
        raise InvalidMapping(f"role {role[:40]!r} is not one of {', '.join(ROLES)}")
    if team is not None:
        if not _TEAM.fullmatch(team):
            raise InvalidMapping(
                f"team {team[:80]!r} must be 1-64 lower-case letters, digits, '.', '_' or '-'"
            )
        if team_repo.team_by_name(session, team) is None:
            raise InvalidMapping(f"no team named {team!r}: store it first (Admin → Teams)")
        if role == Role.ADMIN:
            raise InvalidMapping("an admin sees every asset: a group giving admin has no team")
    before = repo.by_group(session, group)
    previous = {"role": before.role, "team": before.team} if before is not None else None
    created = repo.put(session, group, role, team, now)
    details = {"role": role, "team": team, "before": previous}
    record(session, actor, "group_mapping.put", f"group:{group}", details, now)
    return get_mapping(session, group, configured), created


def delete_mapping(
    session: Session,
    group: str,
    configured: Mapping[str, Any],
    actor: Actor,
    now: datetime,
) -> dict[str, Any]:
    """Remove the stored mapping of `group` (answered with it; audited): its members lose the
    access it gave at their next page. 409 for a group only the configuration maps, 404 for a
    group nothing maps."""
    check_group(group)
    row = repo.by_group(session, group, lock=True)
    if row is None:
        if group in configured:
            raise _configured_conflict(group)
        raise NotFound(f"no stored mapping of group {group[:256]!r}")
    removed = {"group": group, "role": row.role, "team": row.team, **_origin(DATABASE, False, row)}
    repo.remove(session, group)
    details = {"role": row.role, "team": row.team}
    record(session, actor, "group_mapping.delete", f"group:{group}", details, now)
    return removed
