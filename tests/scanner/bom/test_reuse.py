"""The kept CycloneDX document of a rescan (scanner/bom/reuse.py) is the library's own bytes.

A kept document written again must equal what cyclonedx-python-lib encodes for the same result,
serial number and timestamp; anything that changes the document changes the key.
"""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import msgspec
import pytest
from msgspec.structs import replace

from scanner.bom import reuse
from scanner.bom.cyclonedx import to_json
from scanner.model import ScanResult
from tests.scanner.bom.test_cyclonedx import SPECS, golden_host_result, golden_image_result

S1 = UUID("11111111-1111-4111-8111-111111111111")
S2 = UUID("22222222-2222-4222-8222-222222222222")
T1 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
T2 = datetime(2026, 6, 7, 8, 9, 10, tzinfo=UTC)  # no microseconds: isoformat omits them


def _results() -> list[ScanResult]:
    return [golden_image_result(), golden_host_result()]


def _no_encoder(*args: object, **kwargs: object) -> str:
    raise AssertionError("the encoder ran although the document was kept")


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("index", [0, 1])
def test_kept_document_is_the_librarys(
    index: int, spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _results()[index]
    first = reuse.cyclonedx_json(result, spec, tmp_path, serial_number=S1, timestamp=T1)
    assert first == to_json(result, spec, serial_number=S1, timestamp=T1)
    assert len(list((tmp_path / "cyclonedx").glob("*.json"))) == 1
    monkeypatch.setattr(reuse, "_encode", _no_encoder)
    for serial, stamp in ((S1, T1), (S2, T2)):
        again = reuse.cyclonedx_json(result, spec, tmp_path, serial_number=serial, timestamp=stamp)
        assert again == to_json(result, spec, serial_number=serial, timestamp=stamp)
    fresh = json.loads(reuse.cyclonedx_json(result, spec, tmp_path))
    assert fresh["serialNumber"] not in (S1.urn, S2.urn)
    assert fresh["metadata"]["timestamp"] not in (T1.isoformat(), T2.isoformat())


def test_fields_left_out_of_the_key_are_read_by_no_encoder() -> None:
    result = golden_host_result()
    other = replace(result, started_at="1999-01-01T00:00:00Z", stats={"seconds_total": 9.0})
    assert set(reuse.VOLATILE) == {"started_at", "stats"}
    for spec in SPECS:
        assert to_json(other, spec, serial_number=S1, timestamp=T1) == to_json(
            result, spec, serial_number=S1, timestamp=T1
        )
    assert reuse._key(other, "1.6") == reuse._key(result, "1.6")


def test_an_equal_result_built_apart_is_the_same_document(tmp_path: Path) -> None:
    """A rescan rebuilds an equal result from its caches, whose objects are not shared as the
    cold scan's were: the kept document is still found (a pickled key missed it)."""
    result = golden_host_result()
    apart = msgspec.convert(msgspec.to_builtins(result), ScanResult)
    assert apart == result and pickle.dumps(apart) != pickle.dumps(result)
    assert reuse._key(apart, "1.6") == reuse._key(result, "1.6")
    reuse.cyclonedx_json(result, "1.6", tmp_path, serial_number=S1, timestamp=T1)
    assert len(list((tmp_path / "cyclonedx").glob("*.json"))) == 1
    again = reuse.cyclonedx_json(apart, "1.6", tmp_path, serial_number=S1, timestamp=T1)
    assert again == to_json(result, "1.6", serial_number=S1, timestamp=T1)
    assert len(list((tmp_path / "cyclonedx").glob("*.json"))) == 1


def test_another_result_or_spec_is_another_document(tmp_path: Path) -> None:
    result = golden_host_result()
    lib = result.libraries[0]
    changed = replace(
        result, libraries=(replace(lib, notes=(*lib.notes, "x")), *result.libraries[1:])
    )
    keys = {reuse._key(r, s) for r in (result, changed) for s in SPECS}
    assert len(keys) == 4
    for r in (result, changed):
        for spec in SPECS:
            got = reuse.cyclonedx_json(r, spec, tmp_path, serial_number=S1, timestamp=T1)
            assert got == to_json(r, spec, serial_number=S1, timestamp=T1)
    assert len(list((tmp_path / "cyclonedx").glob("*.json"))) == 4


def test_no_cache_directory_keeps_nothing_and_a_bad_file_is_ignored(tmp_path: Path) -> None:
    result = golden_image_result()
    assert reuse.cyclonedx_json(result, "1.6", None, serial_number=S1, timestamp=T1) == to_json(
        result, "1.6", serial_number=S1, timestamp=T1
    )
    kept = tmp_path / "cyclonedx" / f"{reuse._key(result, '1.6')}.json"
    kept.parent.mkdir()
    kept.write_text('{"not": "a kept document"}')
    got = reuse.cyclonedx_json(result, "1.6", tmp_path, serial_number=S1, timestamp=T1)
    assert got == to_json(result, "1.6", serial_number=S1, timestamp=T1)
    assert "\0" in kept.read_text()  # rewritten as a template


def test_only_the_most_recent_documents_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reuse, "KEEP", 2)
    result = golden_host_result()
    for n in range(4):
        reuse.cyclonedx_json(replace(result, tool_version=f"0.{n}"), "1.6", tmp_path)
    assert len(list((tmp_path / "cyclonedx").glob("*.json"))) == 2
