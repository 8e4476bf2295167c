"""Server-side pagination and stable URLs: every filter of a page lives in its query string,
and links (next page, a changed filter) are built from the current query string, so a page's
URL can be pasted into a ticket and shows the same thing.

A page declares ``page: PageNumber = 1`` and ``per_page: PerPage = 50`` and builds a `Pager`
from the total count; templates call ``url_with(page=N)`` or ``url_with(kind="image", page=None)``
(None drops a parameter: a changed filter starts again at page 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Query

#: the largest page number accepted (offsets stay far below a BIGINT)
MAX_PAGE = 1_000_000
PageNumber = Annotated[int, Query(ge=1, le=MAX_PAGE, description="page number, from 1")]
PerPage = Annotated[int, Query(ge=1, le=200, description="rows per page")]


@dataclass(frozen=True, slots=True)
class Pager:
    """One page of a server-side paginated table."""

    page: int
    per_page: int
    total: int

    @property
    def offset(self) -> int:
        """SQL OFFSET of the page."""
        return (self.page - 1) * self.per_page

    @property
    def pages(self) -> int:
        """How many pages the table has (at least one)."""
        return max(1, -(-self.total // self.per_page))

    @property
    def first_row(self) -> int:
        """1-based number of the page's first row (0 when empty)."""
        return min(self.offset + 1, self.total) if self.total else 0

    @property
    def last_row(self) -> int:
        """1-based number of the page's last row."""
        return min(self.offset + self.per_page, self.total)

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        return self.page < self.pages


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def query_string(params: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> str:
    """``params`` url-encoded; None and empty values are left out, lists repeat their key."""
    items = params.items() if isinstance(params, Mapping) else params
    pairs: list[tuple[str, str]] = []
    for key, value in items:
        values = value if isinstance(value, list | tuple) else [value]
        pairs += [(key, _text(v)) for v in values if v is not None and v != ""]
    return urlencode(pairs)


def url_with(path: str, current: Iterable[tuple[str, str]], **changes: Any) -> str:
    """``path`` with the current query parameters, each key in ``changes`` replaced by its
    value (a list repeats the key; None removes it)."""
    kept = [(k, v) for k, v in current if k not in changes]
    query = query_string([*kept, *changes.items()])
    return f"{path}?{query}" if query else path


def blank_to_none(value: str | None) -> str | None:
    """An empty form field means "any" (a GET form sends every field, the empty ones too)."""
    return value if value else None
