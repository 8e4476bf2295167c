"""The rules every query string obeys, checked before an endpoint runs: no parameter the
endpoint does not declare (a typo such as ``familly=`` would otherwise return everything), a
single-valued parameter given once, at most ``max_filter_values`` values of a repeatable filter,
and no NUL character (PostgreSQL cannot compare text holding one; SQLite would store it).

Typed bounds (integers within the database's BIGINT, strings within their columns) are declared
with each parameter: `IdPath`, `Limit`, `Offset` and the column-sized string types below.

A caller learns nothing about an authenticated endpoint before it is authenticated: there the
rules run in the authentication dependency once the caller is known and allowed
(`after_authentication`), so a caller without a valid token gets 401, one without the scope
403, before any 400 about its query.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar

from fastapi import Path, Query, Request
from fastapi.dependencies.models import Dependant

from app.errors import BadRequest

#: the largest value of a BIGINT column (ids) and of SQL LIMIT/OFFSET on both databases
MAX_BIGINT = 2**63 - 1

IdPath = Annotated[int, Path(ge=1, le=MAX_BIGINT, description="a positive id")]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=MAX_BIGINT)]

#: RFC 3339 section 5.6 date-time (JSON Schema's format date-time); [0-9], not \d (any digit)
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"
)
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


def rfc3339(value: str | None, name: str) -> datetime | None:
    """A date-time query parameter as an aware UTC datetime: RFC 3339 only (400 for anything
    else, a bare number or a date among them); a time past the ends of datetime's calendar (year
    0, or years 1 and 9999 moved by their offset) is that end, and a leap second is the last
    instant of its minute."""
    if value is None:
        return None
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise BadRequest(f"{name} must be an RFC 3339 date-time such as 2026-12-01T10:00:00Z")
    year, month, day, hour, minute, second = (int(g) for g in match.group(1, 2, 3, 4, 5, 6))
    micro = int((match[7] or "0")[:6].ljust(6, "0"))
    sign, off_hour, off_minute = match[8], int(match[9] or 0), int(match[10] or 0)
    if second == 60:
        second, micro = 59, 999_999
    try:
        if off_hour > 23 or off_minute > 59:
            raise ValueError("offset out of range")
        # year 0 (RFC 3339 has it, datetime not): checked as 2000, whose calendar it shares
        local = datetime(year or 2000, month, day, hour, minute, second, micro, tzinfo=UTC)
    except ValueError as e:
        raise BadRequest(f"{name} {value[:40]!r} is not a date-time: {e}") from None
    if year == 0:
        return _EARLIEST
    offset = timedelta(hours=off_hour, minutes=off_minute) * (-1 if sign == "-" else 1)
    try:
        return local - offset
    except OverflowError:
        return _EARLIEST if offset > timedelta(0) else _LATEST


Timestamp = Annotated[
    str | None,
    Query(
        description="an RFC 3339 date-time, e.g. 2026-12-01T10:00:00Z",
        json_schema_extra={"format": "date-time"},
    ),
]


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


_Call = TypeVar("_Call", bound=Callable[..., Any])
#: the dependencies that authenticate a caller and then call `check_query`
_AUTHENTICATING: set[Callable[..., Any]] = set()


def after_authentication(call: _Call) -> _Call:
    """Mark an authentication dependency that calls `check_query` once the caller is allowed:
    `strict_query` then leaves the routes that depend on it to it."""
    _AUTHENTICATING.add(call)
    return call


def _authenticates(dependant: Dependant) -> bool:
    return any(sub.call in _AUTHENTICATING or _authenticates(sub) for sub in dependant.dependencies)


async def strict_query(request: Request) -> None:
    """Refuse (400) a query string that the endpoint would not read exactly as sent; on a route
    that authenticates, its authentication dependency does it (after the caller is known)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or _authenticates(dependant):
        return
    check_query(request)


def check_query(request: Request) -> None:
    """The rules of the module docstring for the request's route (400 on the first broken)."""
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
