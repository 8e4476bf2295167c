"""Each regular expression the API documents a parameter with is the rule its check applies:
every string it matches is accepted, every other one refused (hypothesis draws both)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.domain.inventory.filters import (
    SHA256_PATTERN,
    VERSION_PATTERN,
    file_digest,
    label_filters,
    version_range,
)
from app.domain.report_parser import LABEL_PATTERN
from app.domain.tokens import DURATION_PATTERN, parse_duration
from app.errors import AppError

RULES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "version": (VERSION_PATTERN, version_range),
    "sha256": (SHA256_PATTERN, file_digest),
    "label": (LABEL_PATTERN, lambda value: label_filters([value])),
    "grace": (DURATION_PATTERN, parse_duration),
}
#: text near each rule's alphabet, so that a random string is often almost valid
NEAR = st.text(
    alphabet=st.sampled_from("9.1,<>=*v ,aAfF:sha256=k/x-_\t\n\u00a0\u3000\x00\x85wdhms")
)


def _accepts(check: Callable[[str], Any], value: str) -> bool:
    try:
        check(value)
    except AppError:
        return False
    return True


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_string_the_pattern_matches_is_accepted(rule: str) -> None:
    pattern, check = RULES[rule]

    @settings(
        max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(st.from_regex(pattern, fullmatch=True))
    def run(value: str) -> None:
        assert _accepts(check, value), value

    run()


#: strings at the rules' edges (a trailing newline passed "$" with re.match)
EDGES = [
    *("a" * 64 + "\n", "sha256:" + "a" * 64 + "\n", "SHA256:" + "A" * 64, "sha256:" + "a" * 63),
    *(" 5m", "5m ", "5m\n", "0m", "3660d", "3661d", "523w", "87841h", "5270401m", "10000000s"),
    *("k=v\n", "k=", "=v", "k=v\x7f", "k=v\x85", "-k=v", "k" * 129 + "=v", "k=" + "v" * 257),
    *("9.1\n", "=x", ".*", ".5", ">=x", "9,", " ", "", "a\u3000", "==abc", "abc ", "v9", "vv9"),
]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_a_string_is_accepted_only_if_the_pattern_matches(rule: str) -> None:
    pattern, check = RULES[rule]
    compiled = re.compile(pattern)
    for value in EDGES:
        assert _accepts(check, value) == bool(compiled.fullmatch(value)), value

    @settings(
        max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(NEAR | st.text())
    def run(value: str) -> None:
        # fullmatch: "$" would let a trailing newline through, which ECMA-262's "$" does not
        assert _accepts(check, value) == bool(compiled.fullmatch(value)), value

    run()
