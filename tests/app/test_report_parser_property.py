"""Property tests of the CycloneDX ingest parser itself (no database: thousands of examples a
second): whatever a report is mutated into, `parse_report` returns a report or raises the
service's own error (422 / 413 with a message), never another exception; nesting past the depth
limit is refused before anything recurses. The HTTP round trip is test_ingest_fuzz.py's."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from app.domain.report_parser import ReportLimits, parse_report
from app.errors import AppError
from tests.app import boms
from tests.app.test_ingest_fuzz import _REPORTS, _mutate
from tests.scanner.test_hostile_properties import mutated

NOW = datetime(2026, 12, 2, tzinfo=UTC)
LIMITS = ReportLimits(max_depth=64, max_components=500, max_properties=50)


def _parse(data: bytes) -> None:
    try:
        parse_report(data, LIMITS, now=NOW)
    except AppError as e:
        assert e.status in (413, 422) and e.message


@given(data=st.data())
def test_mutated_documents(data: st.DataObject) -> None:
    document = data.draw(st.sampled_from(_REPORTS), label="report")()
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        _mutate(document, data)
    _parse(json.dumps(document).encode())


@given(data=mutated(boms.encode(boms.gpuprov_bom())))
def test_mutated_bytes(data: bytes) -> None:
    _parse(data)


@given(depth=st.integers(1, 3000), container=st.sampled_from(["[", '{"a":']))
def test_nesting(depth: int, container: str) -> None:
    close = "]" if container == "[" else "}"
    bom = boms.gpuprov_bom()
    bom["metadata"]["x"] = "@"
    text = json.dumps(bom).replace('"@"', container * depth + "1" + close * depth)
    try:
        parse_report(text.encode(), LIMITS, now=NOW)
    except AppError as e:
        assert e.status == 422
        if depth + 2 > LIMITS.max_depth:  # the root object and metadata are two levels
            assert "deep" in e.message or "nest" in e.message, e.message


def test_the_seeds_parse() -> None:
    for make in _REPORTS:
        parse_report(json.dumps(make()).encode(), LIMITS, now=datetime.now(UTC))
