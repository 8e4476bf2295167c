"""Streamed CSV and JSON exports, shared by every export endpoint: rows go out as they are read,
and no cell of a report reaches a spreadsheet as a formula."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any


def csv_chunks(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Iterator[str]:
    """CSV text chunks (header first). Cells starting with = + - @ are prefixed with ' so a
    spreadsheet never evaluates a report's strings as formulas."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for i, row in enumerate(rows, 1):
        writer.writerow({k: _csv_safe(row.get(k)) for k in columns})
        if i % 500 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _csv_safe(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
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
