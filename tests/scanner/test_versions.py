"""version_matches: the service's version syntax as a predicate (scanner/versions.py)."""

from __future__ import annotations

import pytest

import app.domain.versions as app_versions
from scanner import versions
from scanner.versions import dotted_parts, dotted_prefix, version_matches


@pytest.mark.parametrize(
    ("version", "expression", "expected"),
    [
        ("9.1.0.70", "9.1.0", True),
        ("9.1.0.70", "9.1.*", True),
        ("9.2.0", "9.1.*", False),
        ("9.1.0", ">=9.0,<9.2", True),
        ("9.2.0", ">=9.0,<9.2", False),
        ("10.0", ">=9.1,<10", False),
        ("12.4.127", ">=12.2", True),
        ("11.8.89", ">=12.2", False),
        ("9.7.0.66-1", "9.7.0", True),
        (None, "9.1.0", False),
        ("nightly", "nightly", True),
        ("nightly", ">=9", False),
    ],
)
def test_version_matches(version: str | None, expression: str, expected: bool) -> None:
    assert version_matches(version, expression) is expected


def test_the_service_uses_the_same_rule() -> None:
    assert app_versions.parse_version_filter is versions.parse_version_filter
    assert app_versions.version_key is versions.version_key


def test_dotted_prefix_is_the_one_version_prefix_rule() -> None:
    assert dotted_prefix("1:9.7.0.66-1") == "9.7.0.66"
    assert dotted_prefix("v12.4") == "12.4"
    assert dotted_prefix("2.21.5-1+cuda12.4") == "2.21.5"
    assert dotted_prefix("cudnn9") is None
    assert dotted_parts("9.1.0") == (9, 1, 0)
    assert dotted_parts("9.1.0-1") is None
    assert dotted_parts("") is None
    assert dotted_parts("1" * 18) == (int("1" * 18),)
    assert dotted_parts("9." + "1" * 19) is None  # no version part has 19+ digits
    assert dotted_parts("9" * 5000) is None  # int() would refuse it
