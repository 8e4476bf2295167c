"""Version normalization, sortable version keys and version-range filters.

The one copy of the version rule: the service filters its inventory with it and promotion
policies (scanner/policy) match library versions with it. A version key is four numeric
components, each zero-padded to six digits: digit strings of one
length sort the same in every collation, so range queries are plain index-backed comparisons.
"""

from __future__ import annotations

import re
from functools import lru_cache

from msgspec import Struct

_PARTS = 4
_WIDTH = 6
_MAX = 10**_WIDTH - 1
#: The version-prefix rule: an optional dpkg/rpm epoch ("1:"), an optional "v", dotted numbers.
_LEADING = re.compile(r"^(?:\d+:)?v?(\d+(?:\.\d+)*)")
#: at most 18 digits a part: no real version has more, and int() refuses 4300+ digits
_DOTTED = re.compile(r"\d{1,18}(?:\.\d{1,18})*")
_OPERATORS = ("==", ">=", "<=", ">", "<")


def dotted_prefix(raw: str) -> str | None:
    """The upstream dotted-numeric version at the start of a version string, without an epoch
    or a leading "v" ("1:9.7.0.66-1" -> "9.7.0.66"); None when it starts with no number."""
    match = _LEADING.match(raw)
    return match.group(1) if match else None


def dotted_parts(version: str) -> tuple[int, ...] | None:
    """The numbers of a version that is dotted numbers only ("9.1.0" -> (9, 1, 0)), else None
    (also for a part of more than 18 digits)."""
    if _DOTTED.fullmatch(version) is None:
        return None
    return tuple(int(p) for p in version.split("."))


def normalize_version(raw: str | None) -> str | None:
    """The leading dotted-numeric part of a version ("9.7.0.66-1" -> "9.7.0.66"), else ``raw``."""
    if raw is None:
        return None
    raw = raw.strip()
    if not raw:
        return None
    return dotted_prefix(raw) or raw


def _numbers(version: str) -> list[int] | None:
    match = _LEADING.match(version.strip())
    if match is None:
        return None
    # a part longer than the key's width saturates without int() (which refuses 4300+ digits)
    parts = match.group(1).split(".")[:_PARTS]
    return [min(int(p), _MAX) if len(p.lstrip("0")) <= _WIDTH else _MAX for p in parts]


def _encode(parts: list[int]) -> str:
    padded = parts + [0] * (_PARTS - len(parts))
    return "".join(f"{p:0{_WIDTH}d}" for p in padded)


# ingest asks for every file of every report, and a fleet has few distinct versions
@lru_cache(maxsize=4096)
def version_key(version: str | None) -> str | None:
    """The sortable key of a version, or None when it has no numeric prefix."""
    if version is None:
        return None
    parts = _numbers(version)
    return _encode(parts) if parts else None


def _after_prefix(parts: list[int]) -> str:
    # the smallest key above every version that starts with `parts` ("9.1" -> key of "9.2")
    bumped = list(parts)
    bumped[-1] = min(bumped[-1] + 1, _MAX)
    return _encode(bumped)


class VersionFilter(Struct, frozen=True):
    """Keys in ``[lower, upper)``, or an exact string for versions without a numeric prefix."""

    lower: str | None = None
    upper: str | None = None
    exact: str | None = None


def parse_version_filter(expression: str) -> VersionFilter:
    """Parse ``9.1.0``, ``9.1.*``, ``>=9.0,<9.2`` and similar (comma means "and").

    A bare version matches itself and every longer version it prefixes (``9.1.0`` matches
    ``9.1.0.70``); ``<=X`` and ``>X`` treat X the same way. Raises ValueError on bad syntax.
    """
    expression = expression.strip()
    if not expression:
        raise ValueError("empty version expression")
    lower: str | None = None
    upper: str | None = None
    for clause in (c.strip() for c in expression.split(",")):
        operator = next((op for op in _OPERATORS if clause.startswith(op)), "")
        value = clause[len(operator) :].strip().removesuffix(".*")
        if not value:
            raise ValueError(f"missing version in {clause!r}")
        parts = _numbers(value)
        if parts is None or normalize_version(value) != value.lstrip("v"):
            if operator in ("", "==") and "," not in expression:
                return VersionFilter(exact=value)
            raise ValueError(f"{value!r} is not a numeric version (like 9.1.0)")
        low, high = _encode(parts), _after_prefix(parts)
        if operator in ("", "=="):
            lower, upper = _max(lower, low), _min(upper, high)
        elif operator == ">=":
            lower = _max(lower, low)
        elif operator == ">":
            lower = _max(lower, high)
        elif operator == "<":
            upper = _min(upper, low)
        else:  # "<="
            upper = _min(upper, high)
    return VersionFilter(lower=lower, upper=upper)


def _max(a: str | None, b: str) -> str:
    return b if a is None else max(a, b)


def _min(a: str | None, b: str) -> str:
    return b if a is None else min(a, b)


def version_matches(version: str | None, expression: str | VersionFilter) -> bool:
    """Whether ``version`` satisfies ``expression`` (``9.1.0``, ``9.1.*``, ``>=9.0,<9.2``).

    A version without a numeric prefix matches only an exact expression equal to it; None never
    matches. Raises ValueError on a bad expression.
    """
    flt = parse_version_filter(expression) if isinstance(expression, str) else expression
    if version is None:
        return False
    if flt.exact is not None:
        return version.strip() == flt.exact or normalize_version(version) == flt.exact
    key = version_key(version)
    if key is None:
        return False
    return (flt.lower is None or key >= flt.lower) and (flt.upper is None or key < flt.upper)
