"""What a stored report value may be: the string lengths and integer ranges of the columns that
a report fills, read from the table definitions so the ingest checks move with the schema.

The limits are PostgreSQL's (``varchar(n)``, 32- and 64-bit integers) and apply on SQLite too,
which would store anything: a report is accepted or refused the same way on both databases.
Columns without a declared size (``Text``, strings inside ``JSON`` lists and objects) hold at
most `MAX_TEXT` characters, so one value cannot make a row cost megabytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from sqlalchemy import JSON, BigInteger, Integer, String

from app.storage.base import Base, table

#: longest string stored where the column declares no size: a PATH_MAX (4096-byte) path and a
#: reason about it fit
MAX_TEXT = 8192
_INT_RANGES = {32: (-(2**31), 2**31 - 1), 64: (-(2**63), 2**63 - 1)}


@dataclass(frozen=True, slots=True)
class ColumnLimit:
    """The values one column holds: strings up to `max_length`, or integers in a range."""

    max_length: int | None = None
    int_range: tuple[int, int] | None = None


def _limit(column_type: object) -> ColumnLimit | None:
    # BigInteger before Integer: it is a subclass; a variant keeps the base (PostgreSQL) type
    if isinstance(column_type, BigInteger):
        return ColumnLimit(int_range=_INT_RANGES[64])
    if isinstance(column_type, Integer):
        return ColumnLimit(int_range=_INT_RANGES[32])
    if isinstance(column_type, String):  # Text is a String without a length
        return ColumnLimit(max_length=column_type.length or MAX_TEXT)
    if isinstance(column_type, JSON):
        return ColumnLimit(max_length=MAX_TEXT)  # of each string inside
    return None


@cache
def limits_of(model: type[Base]) -> Mapping[str, ColumnLimit]:
    """Column name -> limit, for the string, integer and JSON columns of a table."""
    found = {}
    for column in table(model).columns:
        limit = _limit(column.type)
        if limit is not None:
            found[column.name] = limit
    return found


def misfit(limit: ColumnLimit, value: object) -> tuple[object, str] | None:
    """(the offending value, why) when ``value`` does not fit the column, else None.

    For a list or mapping (a JSON column) the offending value is the first string too long.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        if limit.max_length is not None and len(value) > limit.max_length:
            return value, f"is longer than {limit.max_length} characters"
        return None
    if isinstance(value, int):
        if limit.int_range is not None and not limit.int_range[0] <= value <= limit.int_range[1]:
            low, high = limit.int_range
            return value, f"is outside the range {low}..{high}"
        return None
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            found = misfit(limit, item)
            if found is not None:
                return found
    return None


def max_length(model: type[Base], column: str) -> int:
    """The longest string a column of ``model`` holds."""
    length = limits_of(model)[column].max_length
    if length is None:
        raise TypeError(f"{model.__name__}.{column} is not a string column")
    return length
