"""The one YAML and JSON reader (`scanner.loaders`): every limit refused with its reason, and
property tests at the parser boundary (any bytes: a value or a `DocumentError`, never another
exception; a key given twice is always refused, naming it; valid JSON reads as `json` does)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from scanner.loaders import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_NODES,
    MAX_YAML_BYTES,
    DocumentError,
    load_json,
    load_yaml,
)


def laughs(levels: int) -> str:
    """A "billion laughs" document: each level lists the one before nine times."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def _block_nesting(depth: int) -> str:
    return "".join("  " * i + "a:\n" for i in range(depth)) + "  " * depth + "b: 1\n"


HOSTILE_YAML = {
    "5,000-digit integer": ("a: " + "9" * 5000, "an integer of 5000 digits is out of range"),
    "101-digit integer": ("a: " + "1" * 101, "an integer of 101 digits"),
    "hex integer past the range": ("a: 0x" + "f" * 98, "an integer out of range"),
    "50,000-deep flow nesting": ("[" * 50_000 + "]" * 50_000, "nesting"),
    "deep block nesting": (_block_nesting(MAX_DEPTH + 2), f"deeper than {MAX_DEPTH} levels"),
    "billion laughs": (laughs(9), f"more than {MAX_NODES} nodes"),
    "recursive alias": ("a: &a [1, *a]\n", "alias *a refers to a node that contains it"),
    "duplicate key": ("name: a\nrules: {}\nname: b\n", "duplicate key 'name' (line 3"),
    "duplicate nested key": ("rules:\n  x: 1\n  x: 2\n", "duplicate key 'x' (line 3"),
    "duplicate flow key": ("{a: 1, a: 1}", "duplicate key 'a'"),
    "duplicate integer key": ("{1: a, 1: b}", "duplicate key '1'"),
    "no such date": ("a: 2024-13-45\n", "month must be in 1..12"),
    "two documents": ("a: 1\n---\nb: 2\n", "expected a single document"),
    "undefined alias": ("a: *nowhere\n", "found undefined alias"),
    "not UTF-8": (b"a: \xff\xfe", "not UTF-8"),
    "UTF-16": ("a: 1".encode("utf-16"), "not UTF-8"),
    "a Python tag": ("!!python/object/apply:os.system [true]", "could not determine a constructor"),
}


@pytest.mark.parametrize("case", list(HOSTILE_YAML))
def test_hostile_yaml_is_refused_with_its_reason(case: str) -> None:
    text, reason = HOSTILE_YAML[case]
    with pytest.raises(DocumentError) as raised:
        load_yaml(text)
    assert reason in str(raised.value)


def test_the_yaml_limits_hold_at_their_bounds() -> None:
    assert load_yaml("a: " + "9" * MAX_INT_DIGITS) == {"a": int("9" * MAX_INT_DIGITS)}
    assert load_yaml(_block_nesting(MAX_DEPTH - 1))["a"] is not None
    assert len(json.dumps(load_yaml(laughs(6)))) > 9**6  # 531,441 nodes: within the limit
    with pytest.raises(DocumentError, match="nodes once its aliases are expanded"):
        load_yaml(laughs(7))  # 4.8 million
    assert load_yaml(b"a: " + b"b" * (MAX_YAML_BYTES - 3)) is not None
    with pytest.raises(DocumentError, match=f"larger than {MAX_YAML_BYTES} bytes"):
        load_yaml(b"a: " + b"b" * (MAX_YAML_BYTES - 2))


def test_merge_keys_may_be_overridden_as_pyyaml_merges_them() -> None:
    text = "base: &b {a: 1, c: 3}\nmid: &m {<<: *b, a: 2}\ntop: {<<: [*m, *b], c: 4}\n"
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(text)["mid"] == {"a": 2, "c": 3}
    assert load_yaml("\ufeffa: 1") == {"a": 1}  # a UTF-8 byte order mark is ignored
    assert load_yaml(b"") is None


HOSTILE_JSON = {
    "duplicate key": (b'{"name": "x", "scopes": [], "name": "y"}', "duplicate key 'name'"),
    "duplicate nested key": (b'{"a": [{"k": 1, "k": 1}]}', "duplicate key 'k'"),
    "5,000-digit integer": (b'{"a": ' + b"9" * 5000 + b"}", "an integer of 5000 digits"),
    "number past a float": (b"[1e400]", "the number 1e400 is out of range"),
    "NaN": (b"[NaN]", "NaN is not a JSON number"),
    "Infinity": (b'{"a": -Infinity}', "-Infinity is not a JSON number"),
    "past the recursion limit": (b"[" * 200_000 + b"]" * 200_000, "nesting deeper than 64"),
    "past the depth limit": (b"[" * 66 + b"]" * 66, "nesting deeper than 64 levels"),
    "not UTF-8": (b'{"a": "\xff"}', "not UTF-8: invalid start byte at byte 7"),
    "UTF-16": ('{"a": 1}'.encode("utf-16"), "not UTF-8"),
    "malformed": (b'{"a": ', "malformed JSON: Expecting value at line 1 column 7"),
}


@pytest.mark.parametrize("case", list(HOSTILE_JSON))
def test_hostile_json_is_refused_with_its_reason(case: str) -> None:
    data, reason = HOSTILE_JSON[case]
    with pytest.raises(DocumentError) as raised:
        load_json(data)
    assert reason in str(raised.value)


def test_the_json_limits_hold_at_their_bounds() -> None:
    assert load_json("[" * 65 + "]" * 65) is not None  # the top level and 64 below it
    assert load_json(b"[" * 11 + b"]" * 11, max_depth=10) is not None
    with pytest.raises(DocumentError, match="nesting deeper than 10 levels"):
        load_json(b"[" * 12 + b"]" * 12, max_depth=10)
    assert load_json(b"[" + b"9" * MAX_INT_DIGITS + b"]") == [int("9" * MAX_INT_DIGITS)]
    assert load_json(b'\xef\xbb\xbf{"a": 1.5e300}') == {"a": 1.5e300}


# -- properties at the parser boundary ---------------------------------------------------------

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_are_a_document_or_a_document_error(data: bytes) -> None:
    for load in (load_json, load_yaml):
        try:
            load(data)
        except DocumentError:
            pass


@given(_JSON_VALUES)
def test_valid_json_reads_as_the_json_module_reads_it(value: Any) -> None:
    text = json.dumps(value)
    assert load_json(text) == json.loads(text)
    assert load_json(text.encode()) == json.loads(text)


def _dumps(value: Any) -> str:
    # not ASCII-escaped: YAML reads no surrogate-pair escapes (\ud83d\ude00) as JSON does
    return json.dumps(value, ensure_ascii=False)


@st.composite
def _twice(draw: st.DrawFn) -> tuple[str, str]:
    """A JSON object text with one key given twice (somewhere inside), and that key."""
    key = draw(st.text(min_size=1, max_size=8))
    pairs = [(key, draw(_JSON_VALUES)), (key, draw(_JSON_VALUES))]
    others = draw(st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=4))
    pairs += [(k, v) for k, v in others.items() if k != key]
    order = draw(st.permutations(range(len(pairs))))
    item = [f"{_dumps(pairs[i][0])}: {_dumps(pairs[i][1])}" for i in order]
    body = "{" + ", ".join(item)
    text = body + "}"
    for _ in range(draw(st.integers(0, 3))):  # buried in objects and arrays
        text = draw(st.sampled_from(['{"outer": %s}', "[1, %s]", '{"x": [%s]}'])) % text
    return text, key


@given(_twice())
def test_a_key_given_twice_is_refused_naming_it(case: tuple[str, str]) -> None:
    text, key = case
    with pytest.raises(DocumentError) as raised:
        load_json(text)
    assert f"duplicate key {key!r}" in str(raised.value)
    if text.isprintable():  # YAML refuses unprintable characters before it reads a key
        with pytest.raises(DocumentError, match="duplicate key"):  # JSON is YAML: refused too
            load_yaml(text)


def test_a_yaml_syntax_error_says_where_from_1_and_quotes_the_line() -> None:
    with pytest.raises(DocumentError) as raised:
        load_yaml("a: 1\nb: [1, 2\n")
    message = str(raised.value)
    assert message.startswith("line 3, column 1: did not find expected ',' or ']'")
    assert "(while parsing a flow sequence at line 2, column 4)" in message
    assert "unicode string" not in message
    with pytest.raises(DocumentError) as raised:
        load_yaml('a: "\\q"\n')
    assert str(raised.value).splitlines()[1:] == ['a: "\\q"', "    ^"]
    # a line too long to quote (a minified document) is named, not quoted
    with pytest.raises(DocumentError) as raised:
        load_yaml("a: [" + "1, " * 100 + '"\\q"]\n')
    assert len(str(raised.value).splitlines()) == 1
