"""Asset scopes in SQL: which assets a team-scoped caller may see, as one condition every
asset-reading query adds (`asset_condition`, `in_scope`), and the scoping labels admins assign.

A scope is the union of its teams' selectors; a selector holds when the asset carries every one
of its scoping labels (`AssetScopeLabel`, never a report's labels) and its name matches one of
its name patterns (none: any name). A scope of no selector selects nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Connection,
    Select,
    and_,
    delete,
    exists,
    false,
    func,
    insert,
    literal,
    or_,
    select,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ColumnElement as _Element

from app.storage.base import table
from app.storage.tables import ApiToken, Asset, AssetScopeLabel, Team


@dataclass(frozen=True, slots=True)
class TeamSelector:
    """One team's part of a scope: scoping labels (all) and name patterns (any; none: any)."""

    labels: tuple[tuple[str, str], ...]
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AssetScope:
    """What a team-scoped caller sees: the assets of any of its teams' selectors."""

    selectors: tuple[TeamSelector, ...]


class _NameGlob(_Element[bool]):
    """``name`` matches a pattern of literal characters, ``*`` and ``?`` (the domain refuses
    ``[`` and ``]``), case-sensitively on both dialects: SQLite's LIKE ignores ASCII case, its
    GLOB does not; PostgreSQL's LIKE is exact."""

    inherit_cache = False
    type = Boolean()

    def __init__(self, column: ColumnElement[str], pattern: str) -> None:
        self.column = column
        self.pattern = pattern


@compiles(_NameGlob)
def _like(element: _NameGlob, compiler: SQLCompiler, **kw: Any) -> str:
    escaped = element.pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = escaped.replace("*", "%").replace("?", "_")
    return compiler.process(element.column.like(literal(pattern), escape="\\"), **kw)


@compiles(_NameGlob, "sqlite")
def _glob(element: _NameGlob, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.column.op("GLOB")(literal(element.pattern)), **kw)


def _selector(selector: TeamSelector) -> ColumnElement[bool]:
    conds: list[ColumnElement[bool]] = [
        exists().where(
            AssetScopeLabel.asset_id == Asset.id,
            AssetScopeLabel.key == key,
            AssetScopeLabel.value == value,
        )
        for key, value in selector.labels
    ]
    if selector.names:
        conds.append(or_(*(_NameGlob(Asset.name.expression, p) for p in selector.names)))
    # a selector of nothing would select everything: the domain refuses such a team
    return and_(*conds) if conds else false()


def asset_condition(scope: AssetScope) -> ColumnElement[bool]:
    """The condition on `Asset` rows of the scope."""
    if not scope.selectors:
        return false()
    return or_(*(_selector(s) for s in scope.selectors))


def visible_ids(scope: AssetScope) -> Select[int]:
    """The ids of the scope's assets, a subquery."""
    return select(Asset.id).where(asset_condition(scope))


def in_scope(asset_id: Any, scope: AssetScope | None) -> ColumnElement[bool] | None:
    """The condition that ``asset_id`` (a column) names an asset of the scope; None for the
    whole fleet (an unscoped caller)."""
    if scope is None:
        return None
    condition: ColumnElement[bool] = asset_id.in_(visible_ids(scope))
    return condition


def asset_visible(db: Session | Connection, asset_id: int, scope: AssetScope | None) -> bool:
    """Whether the asset exists and lies in the scope."""
    query = select(Asset.id).where(Asset.id == asset_id)
    if scope is not None:
        query = query.where(asset_condition(scope))
    return db.execute(query).first() is not None


def scope_labels(db: Session | Connection, asset_id: int) -> dict[str, str]:
    """The scoping labels assigned to an asset."""
    rows = db.execute(
        select(AssetScopeLabel.key, AssetScopeLabel.value).where(
            AssetScopeLabel.asset_id == asset_id
        )
    ).all()
    return {str(k): str(v) for k, v in rows}


def set_scope_labels(session: Session, asset_id: int, labels: Mapping[str, str]) -> None:
    """Make the asset's scoping labels exactly ``labels``."""
    conn = session.connection()
    conn.execute(delete(AssetScopeLabel).where(AssetScopeLabel.asset_id == asset_id))
    if labels:
        conn.execute(
            insert(table(AssetScopeLabel)),
            [{"asset_id": asset_id, "key": k, "value": v} for k, v in labels.items()],
        )


def teams(db: Session | Connection) -> list[Team]:
    """Every team, by name (a handful: read whole per request)."""
    return list(db.execute(select(Team).order_by(Team.name)).scalars())


def team_rows(db: Session | Connection) -> list[Any]:
    """Every team as plain rows (id, name, labels, names, users, groups), by name: what
    authentication reads on every request."""
    return list(
        db.execute(
            select(Team.id, Team.name, Team.labels, Team.names, Team.users, Team.groups).order_by(
                Team.name
            )
        ).all()
    )


def token_count(session: Session, team_id: int) -> int:
    """How many tokens (revoked ones too) belong to the team."""
    count = select(func.count()).select_from(ApiToken).where(ApiToken.team_id == team_id)
    return int(session.scalar(count) or 0)


def team_by_name(session: Session, name: str, *, lock: bool = False) -> Team | None:
    """The team of this name."""
    query = select(Team).where(Team.name == name)
    if lock:
        query = query.with_for_update()
    return session.scalars(query).first()
