"""Inventory request filters: each query parameter checked (400 on a value that cannot match)
and turned into the storage layer's plain criteria (`AssetQuery`, `LibraryMatch`).

The version rule stays in ``scanner.versions``: an expression becomes a `VersionRange` of
sortable keys here, so the repositories compare columns and never parse versions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.domain.patterns import CONTROL, SPACE_OR_CONTROL
from app.domain.report_parser import check_label
from app.domain.versions import parse_version_filter
from app.errors import BadRequest, InvalidReport
from app.storage.repositories.inventory import SORTS as SORTS  # the asset list's orders
from app.storage.repositories.inventory import STATUSES as STATUSES  # worst first
from app.storage.repositories.inventory import AssetQuery, LibraryMatch, VersionRange
from app.storage.repositories.scopes import AssetScope
from scanner import vocabulary as v

#: the values of the ``verdict`` filter: an integrity or a provenance verdict
VERDICT_VALUES = tuple(dict.fromkeys((*v.INTEGRITY_VALUES, *v.PROVENANCE_VALUES)))


# The ``version`` filter's syntax, one regular expression (the API documents the parameter with
# it): a range of clauses joined by "," (an operator, a dotted number with an optional "v" and
# ".*"), or one exact version (anything else, up to its first comma: no control character,
# not starting with an operator, ".", or a space, and not ending with a space). Spaces only as
# " ", so Python's, ECMA-262's and Rust's regular expressions read it alike.
_CLAUSE = r" *(?:==|>=|<=|>|<)? *v?[0-9]+(?:\.[0-9]+)*(?:\.\*)? *"
_EXACT = rf" *(?:== *)?[^{SPACE_OR_CONTROL},.<>=](?:[^{CONTROL},]*[^{SPACE_OR_CONTROL},])? *"
VERSION_PATTERN = rf"^(?:{_CLAUSE}(?:,{_CLAUSE})*|{_EXACT})$"
_VERSION = re.compile(VERSION_PATTERN)


def version_range(expression: str | None) -> VersionRange | None:
    """Parse a ``version`` query parameter into key criteria, answering 400 on bad syntax."""
    if expression is None:
        return None
    try:
        parsed = parse_version_filter(expression)
    except ValueError as e:
        raise BadRequest(f"version: {e}") from e
    if not _VERSION.fullmatch(expression):  # what the parser would take, and the API refuses
        raise BadRequest(
            f"version: {expression[:80]!r} is neither a range (9.1.0, 9.1.*, >=9.0,<9.2) nor one "
            "exact version (no comma or control character, not starting with < > = or .)"
        )
    return VersionRange(lower=parsed.lower, upper=parsed.upper, exact=parsed.exact)


#: a ``sha256`` filter: 64 hexadecimal digits, optionally ``sha256:``-prefixed, in either case
SHA256_PATTERN = r"^(?:[Ss][Hh][Aa]256:)?[0-9A-Fa-f]{64}$"
_SHA256 = re.compile(SHA256_PATTERN)


def file_digest(value: str | None) -> str | None:
    """A ``sha256`` query parameter (`SHA256_PATTERN`); 400 otherwise, since a malformed digest
    would match nothing and read as "not in the fleet"."""
    if value is None:
        return None
    if not _SHA256.fullmatch(value):  # fullmatch: "$" alone let a trailing newline through
        raise BadRequest("sha256 must be 64 hexadecimal digits, optionally sha256:-prefixed")
    return value.lower().removeprefix("sha256:")


def check_choice(name: str, value: str | None, allowed: Sequence[str]) -> str | None:
    """A query parameter that must be one of ``allowed`` (400 otherwise)."""
    if value is not None and value not in allowed:
        raise BadRequest(f"{name} must be one of {', '.join(allowed)}")
    return value


def check_verdict(verdict: str | None) -> str | None:
    """A ``verdict`` query parameter: an integrity or a provenance value (400 otherwise)."""
    return check_choice("verdict", verdict, VERDICT_VALUES)


def library_match(
    *,
    family: str | None = None,
    version: str | None = None,
    sha256: str | None = None,
    verdict: str | None = None,
    integrity: str | None = None,
    provenance: str | None = None,
    loaded: bool | None = None,
) -> LibraryMatch:
    """The library filters of a request, each checked (400 on a value that cannot match)."""
    return LibraryMatch(
        family=family,
        version=version_range(version),
        sha256=file_digest(sha256),
        verdict=check_verdict(verdict),
        integrity=check_choice("integrity", integrity, v.INTEGRITY_VALUES),
        provenance=check_choice("provenance", provenance, v.PROVENANCE_VALUES),
        loaded=loaded,
    )


def asset_query(
    *,
    kind: str | None = None,
    name: str | None = None,
    labels: Sequence[str] = (),
    match: LibraryMatch | None = None,
    min_slsa_level: int | None = None,
    signed: bool | None = None,
    gpu_model: str | None = None,
    status: str | None = None,
    gate: str | None = None,
    scope: AssetScope | None = None,
) -> AssetQuery:
    """The asset filters of a request; ``labels`` are ``KEY=VALUE`` strings, checked; ``scope``
    the caller's (`app.domain.tokens.Principal.scope`)."""
    return AssetQuery(
        kind=kind,
        name=name,
        labels=label_filters(labels),
        match=match if match is not None else LibraryMatch(),
        min_slsa_level=min_slsa_level,
        signed=signed,
        gpu_model=gpu_model,
        status=status,
        gate=gate,
        scope=scope,
    )


def label_filters(values: Sequence[str]) -> list[tuple[str, str]]:
    """``label`` filters as pairs; a key or value no stored label can have is a 400 (the rules
    are the ones ingest applies to the labels it stores)."""
    pairs = parse_labels(values)
    for key, value in pairs:
        try:
            check_label(key, value)
        except InvalidReport as e:
            raise BadRequest(e.message) from e
    return pairs


def parse_labels(values: Sequence[str]) -> list[tuple[str, str]]:
    """``key=value`` strings to pairs, answering 400 on a missing '='."""
    pairs = []
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise BadRequest(f"label {value!r} must be KEY=VALUE")
        pairs.append((key, val))
    return pairs
