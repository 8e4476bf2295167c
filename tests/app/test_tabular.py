"""The CSV every export writes (app/domain/tabular.py), read back twice: by the csv module (the
values round-trip) and the way a spreadsheet reads a file (a CR or LF outside quotes ends a row,
and a cell starting with = + - @ TAB or CR is a formula)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from app.domain.tabular import csv_chunks

COLUMNS = ("id", "name", "path")
#: OWASP's formula starts, written here, not imported: the test holds the code to them
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: cells that split a row, start a formula, or both (CR alone was written bare: issue 17)
HOSTILE = [
    "\r=1+2",
    '=HYPERLINK("http://x","y")',
    "+1+2",
    "-2+3",
    "@SUM(A1:A2)",
    "\t=1",
    "a\rb",
    "a\nb",
    "a\r\nb",
    "ends with CR\r",
    'say "hi", twice',
    "x,=1+2",
    "plain",
    "",
]


def spreadsheet_rows(text: str) -> list[list[str]]:
    """Rows as a spreadsheet splits them: RFC 4180 quoting, and any CR or LF outside quotes
    ends a row (a spreadsheet does not wait for CRLF)."""
    rows: list[list[str]] = []
    row: list[str] = []
    cell: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == '"' and text[i + 1 : i + 2] == '"':
                cell.append('"')
                i += 1
            elif ch == '"':
                quoted = False
            else:
                cell.append(ch)
        elif ch == '"' and not cell:
            quoted = True
        elif ch == '"':
            raise AssertionError(f"a bare quote inside a cell at {i}: {text[i - 20 : i + 20]!r}")
        elif ch == ",":
            row.append("".join(cell))
            cell = []
        elif ch in "\r\n":
            row.append("".join(cell))
            rows.append(row)
            row, cell = [], []
            if ch == "\r" and text[i + 1 : i + 2] == "\n":
                i += 1
        else:
            cell.append(ch)
        i += 1
    assert not quoted, "the file ends inside a quoted cell"
    if cell or row:
        rows.append([*row, "".join(cell)])
    return rows


def _csv(rows: list[dict[str, Any]]) -> str:
    return "".join(csv_chunks(rows, COLUMNS))


def test_hostile_cells_stay_in_their_row_and_are_never_formulas() -> None:
    rows = [{"id": n, "name": value, "path": "/opt/" + value} for n, value in enumerate(HOSTILE)]
    text = _csv(rows)
    # the csv module reads every value back, a formula start behind one '
    back = list(csv.DictReader(io.StringIO(text, newline="")))
    expected = [
        {
            "id": str(n),
            "name": ("'" + value) if value.startswith(FORMULA_STARTS) else value,
            "path": "/opt/" + value,
        }
        for n, value in enumerate(HOSTILE)
    ]
    assert back == expected
    # a spreadsheet sees the header and one row per record, and no cell is a formula
    table = spreadsheet_rows(text)
    assert table[0] == list(COLUMNS)
    assert [r[0] for r in table[1:]] == [str(n) for n in range(len(HOSTILE))]
    assert all(len(r) == len(COLUMNS) for r in table)
    formulas = [cell for r in table for cell in r if cell.startswith(FORMULA_STARTS)]
    assert formulas == []
    assert text.endswith("\r\n") and text.count("\r\n") >= len(HOSTILE) + 1


@pytest.mark.parametrize("value", ["\r=1+2", "a\rb", "a\nb"])
def test_a_line_break_in_a_cell_is_quoted(value: str) -> None:
    """RFC 4180 section 2.6: a field holding CR or LF is enclosed in double quotes."""
    text = _csv([{"id": 1, "name": value, "path": None}])
    line = text.split("\r\n", 1)[1]
    assert line.startswith('1,"'), text


def test_numbers_and_empty_cells_are_written_as_they_are() -> None:
    text = _csv([{"id": -1, "name": None, "path": True}])
    assert text == "id,name,path\r\n-1,,True\r\n"


def test_rows_stream_in_chunks() -> None:
    rows = ({"id": n, "name": "=x", "path": "p"} for n in range(1200))
    chunks = list(csv_chunks(rows, COLUMNS))
    assert len(chunks) == 3
    assert len(spreadsheet_rows("".join(chunks))) == 1201
