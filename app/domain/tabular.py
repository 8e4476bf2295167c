"""Streamed CSV and JSON exports, shared by every export endpoint: rows go out as they are read,
and no cell of a report reaches a spreadsheet as a formula or as a second row."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

#: a cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV Injection")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_chunks(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Iterator[str]:
    """RFC 4180 CSV text chunks (header first, CRLF rows); a string cell starting with one of
    `FORMULA_STARTS` is prefixed with ' so a spreadsheet shows it as text."""
    buffer = io.StringIO()
    # RFC 4180 section 2.6: a field holding CR, LF, a comma or a double quote is quoted. The
    # csv module quotes a field only for the characters of its line terminator: with "\n" a
    # lone CR went out bare, and a spreadsheet started a new row there.
    writer = csv.DictWriter(
        buffer,
        fieldnames=columns,
        extrasaction="ignore",
        lineterminator="\r\n",
        quoting=csv.QUOTE_MINIMAL,
    )
    writer.writeheader()
    for i, row in enumerate(rows, 1):
        writer.writerow({k: _cell(row.get(k)) for k in columns})
        if i % 500 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _cell(value: Any) -> Any:
    """``value`` as a spreadsheet may show it: a string starting a formula gets a leading '."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def json_chunks(rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """A JSON array, one row per line, streamed (the first row is read before anything is
    yielded, so a database outage surfaces before the response starts)."""
    iterator = iter(rows)
    first = next(iterator, None)
    if first is None:
        yield "[]\n"
        return
    yield "[\n" + json.dumps(first, ensure_ascii=False)
    for row in iterator:
        yield ",\n" + json.dumps(row, ensure_ascii=False)
    yield "\n]\n"
