"""The rules every query string obeys, checked before an endpoint runs: no parameter the
endpoint does not declare (a typo such as ``familly=`` would otherwise return everything), a
single-valued parameter given once, at most ``max_filter_values`` values of a repeatable filter,
and no NUL character (PostgreSQL cannot compare text holding one; SQLite would store it).

Typed bounds (integers within the database's BIGINT, strings within their columns) are declared
with each parameter: `IdPath`, `Limit`, `Offset` and the column-sized string types below.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any

from fastapi import Path, Query, Request
from fastapi.dependencies.models import Dependant

from app.errors import BadRequest

#: the largest value of a BIGINT column (ids) and of SQL LIMIT/OFFSET on both databases
MAX_BIGINT = 2**63 - 1

IdPath = Annotated[int, Path(ge=1, le=MAX_BIGINT, description="a positive id")]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=MAX_BIGINT)]


def _is_sequence(annotation: Any) -> bool:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_is_sequence(arg) for arg in typing.get_args(annotation))
    return typing.get_origin(annotation) in (list, tuple, set, frozenset)


def _collect(dependant: Dependant, found: dict[str, bool]) -> None:
    for field in dependant.query_params:
        found[field.alias] = _is_sequence(field.field_info.annotation)
    for sub in dependant.dependencies:
        _collect(sub, found)


def declared_query(dependant: Dependant) -> dict[str, bool]:
    """The query parameters an endpoint declares, each with whether it is repeatable (a walk
    over a handful of fields: cheaper than caching on unhashable dependants)."""
    found: dict[str, bool] = {}
    _collect(dependant, found)
    return found


async def strict_query(request: Request) -> None:
    """Refuse (400) a query string that the endpoint would not read exactly as sent."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    declared = declared_query(dependant)
    params = request.query_params
    unknown = sorted(set(params.keys()) - declared.keys())
    if unknown:
        accepted = ", ".join(sorted(declared)) or "none"
        raise BadRequest(
            f"unknown query parameter {', '.join(unknown)}; this endpoint accepts: {accepted}"
        )
    limit: int = request.app.state.settings.max_filter_values
    for key in dict.fromkeys(params.keys()):
        values = params.getlist(key)
        if not declared[key] and len(values) > 1:
            raise BadRequest(f"query parameter {key} may be given once, not {len(values)} times")
        if request.method == "GET" and len(values) > limit:
            raise BadRequest(
                f"query parameter {key} is given {len(values)} times; at most {limit} values "
                "per filter (setting GPUPROV_MAX_FILTER_VALUES)"
            )
        if any("\x00" in value for value in values):
            raise BadRequest(f"query parameter {key} holds a NUL character")
