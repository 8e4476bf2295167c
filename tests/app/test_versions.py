"""Version keys and version-range filters."""

import pytest

from app.domain.versions import normalize_version, parse_version_filter, version_key


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("9.7.0.66-1", "9.7.0.66"),
        ("11.8.89~11.8.0-5~deb12u1", "11.8.89"),
        ("1:2.3", "2.3"),
        ("v12.4", "12.4"),
        ("unknown", "unknown"),
        ("", None),
        (None, None),
    ],
)
def test_normalize(raw: str | None, expected: str | None) -> None:
    assert normalize_version(raw) == expected


def test_keys_sort_numerically() -> None:
    versions = ["9.10.0", "9.1.0.70", "9.2", "12.4.127", "12.4.5.8", "9.1.0"]
    ordered = sorted(versions, key=lambda x: version_key(x) or "")
    assert ordered == ["9.1.0", "9.1.0.70", "9.2", "9.10.0", "12.4.5.8", "12.4.127"]
    assert version_key("not a version") is None


def _matches(expression: str, version: str) -> bool:
    spec = parse_version_filter(expression)
    if spec.exact is not None:
        return version == spec.exact
    key = version_key(version)
    assert key is not None
    return (spec.lower is None or key >= spec.lower) and (spec.upper is None or key < spec.upper)


@pytest.mark.parametrize(
    ("expression", "version", "expected"),
    [
        ("9.1.0", "9.1.0", True),
        ("9.1.0", "9.1.0.70", True),
        ("9.1.0", "9.1.1", False),
        ("9.1", "9.1.9.9", True),
        ("9.1.*", "9.10.0", False),
        ("==9", "9.28.0", True),
        (">=9.0,<9.2", "9.1.0.70", True),
        (">=9.0,<9.2", "9.2.0", False),
        (">=9.0,<9.2", "8.9.7", False),
        (">9.1", "9.1.5", False),
        (">9.1", "9.2.0", True),
        ("<=9.1", "9.1.5", True),
        ("<9.1", "9.0.99", True),
        ("beta", "beta", True),
    ],
)
def test_filter(expression: str, version: str, expected: bool) -> None:
    assert _matches(expression, version) is expected


@pytest.mark.parametrize("bad", ["", ">=", ">=abc", ">=9,<x", "==9,beta"])
def test_bad_filter(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_version_filter(bad)


@pytest.mark.parametrize("digits", [7, 20, 5000])
def test_long_version_parts_saturate(digits: int) -> None:
    # int() refuses strings of more than 4300 digits; a key part is at most six digits anyway
    assert version_key("9" * digits + ".1") == "999999000001" + "0" * 12
    assert version_key("0000001.2") == version_key("1.2")
