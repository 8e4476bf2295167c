"""Property test of the ingest boundary: whatever a valid report is mutated into, the service
answers 2xx or 4xx, never 5xx (issue 7, section 5), on both databases.

A mutation replaces, deletes or adds one value anywhere in a real report (ours, Trivy's or
Syft's) with values chosen to hit the limits: integers around 2^31 and 2^63, long digit runs,
long strings, NUL and lone surrogates, timestamps at the ends of the calendar, purls and file
names with huge numbers. A few dozen examples per run keep it fast.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanner import vocabulary as v
from tests.app import boms
from tests.app.conftest import Service

Path = tuple[str | int, ...]

_EDGE_STRINGS = [
    "",
    "\u0000",
    "\ud800",
    "a\udfffb",
    "9999-12-31T23:59:59-05:00",
    "0001-01-01T00:00:00+05:00",
    "9999-12-30T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "2026-11-30",
    "pkg:",
    "pkg:pypi/nvidia-cudnn-cu12@" + "9" * 5000,
    "pkg:" + "x" * 40 + "/libcudnn9-cuda-12@9.1",
    "pkg:deb/ubuntu/libcudnn9-cuda-99999999999@9.1",
    "pkg:pypi/nvidia-cuda-runtime-cu99999999999@12.4",
    "/usr/lib/libcudart.so.99999999999999999999.1",
    "/usr/lib/libcudnn_ops.so." + "9." * 100 + "9",
    "libnccl.so.2",
    "sha256:" + "a" * 64,
    "a" * 64 + "\n",
    "cudnn\n",
    "image",
    "host",
    "container",
    "file",
    "verified",
    *(v_name for v_name in vars(v).values() if isinstance(v_name, str) and ":" in v_name),
]
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**31 - 2, max_value=2**64),
    st.integers(min_value=-(2**64), max_value=-1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.from_regex(r"\d{1,25}(\.\d{1,25}){0,3}", fullmatch=True),
    st.sampled_from(_EDGE_STRINGS),
    st.builds(lambda c, n: c * n, st.sampled_from("9x./:@"), st.integers(100, 9000)),
)
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["name", "value", "type", "version", "purl"]), children)
    ),
    max_leaves=4,
)


def _paths(node: Any, here: Path = ()) -> list[Path]:
    found = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*here, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*here, i))
    return found


def _parent(document: Any, path: Path) -> Any:
    for step in path[:-1]:
        document = document[step]
    return document


def _edit_string(text: str, data: st.DataObject) -> str:
    how = data.draw(st.sampled_from(["digits", "edge", "grow", "insert", "suffix"]), label="edit")
    if how == "edge":
        return data.draw(st.sampled_from(_EDGE_STRINGS), label="edge string")
    if how == "digits":  # every number in it becomes a long one
        run = "9" * data.draw(st.sampled_from([10, 20, 130, 5000]), label="run")
        return re.sub(r"\d+", run, text) if re.search(r"\d", text) else text + run
    if how == "grow":
        return text * data.draw(st.sampled_from([2, 3, 100, 1000]), label="times")
    at = data.draw(st.integers(0, len(text)), label="at")
    piece = data.draw(st.sampled_from(["\u0000", "\ud800", "\n", "%00", "@", "/", ":", "é"]))
    return text[:at] + piece + text[at:] if how == "insert" else text + piece


def _shape(path: Path) -> Path:
    return tuple("*" if isinstance(step, int) else step for step in path)


def _mutate(document: dict[str, Any], data: st.DataObject) -> None:
    # Each kind of value (a shape: "/components/*/purl") is as likely as the next, however many
    # of them the report holds; mostly edits that keep the type, so the report still passes
    # the schema and its values reach the checks behind it.
    paths = _paths(document)[1:]
    shapes: dict[Path, list[Path]] = {}
    for p in paths:
        shapes.setdefault(_shape(p), []).append(p)
    shape = data.draw(st.sampled_from(sorted(shapes, key=str)), label="shape")
    path = data.draw(st.sampled_from(shapes[shape]), label="path")
    parent = _parent(document, path)
    current = parent[path[-1]]
    actions = ["edit"] * 7 + ["replace", "delete", "add"]
    action = data.draw(st.sampled_from(actions), label="action")
    if action == "replace":
        parent[path[-1]] = data.draw(_values, label="value")
    elif action == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif action == "add" and isinstance(current, dict | list):
        value = data.draw(_values, label="value")
        if isinstance(current, dict):
            current[data.draw(st.sampled_from(["name", "version", "purl", "x"]))] = value
        else:
            current.append(value)
    elif isinstance(current, str):
        parent[path[-1]] = _edit_string(current, data)
    elif isinstance(current, int) and not isinstance(current, bool):
        parent[path[-1]] = data.draw(st.sampled_from([2**31, 2**63, 10**20, 2**31 - 1, -1, 0]))
    elif isinstance(current, list):
        parent[path[-1]] = current * 2


_REPORTS: list[Callable[[], dict[str, Any]]] = [
    boms.gpuprov_bom,
    lambda: boms.gpuprov_bom(kind="host", name="gpu-node-1"),
    boms.trivy_bom,
    boms.syft_bom,
]


@settings(
    max_examples=100,
    deadline=None,
    database=None,  # no example files in the checkout; a failure prints its reproduction
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_reports_never_answer_5xx(
    service: Service, post_report: Callable[..., Any], data: st.DataObject
) -> None:
    document = data.draw(st.sampled_from(_REPORTS), label="report")()
    for _ in range(data.draw(st.integers(1, 2), label="mutations")):
        _mutate(document, data)
    body = json.dumps(document).encode()
    answer = post_report(body)
    assert answer.status_code < 500, answer.text
    if answer.status_code >= 400:
        assert answer.json()["error"]["message"]


@settings(
    max_examples=30,
    deadline=None,
    database=None,  # no example files in the checkout; a failure prints its reproduction
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_bytes_never_answer_5xx(
    service: Service, post_report: Callable[..., Any], data: st.DataObject
) -> None:
    body = bytearray(boms.encode(boms.gpuprov_bom()))
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(body) - 1), label="at")
        body[at : at + 1] = data.draw(st.binary(min_size=0, max_size=3), label="bytes")
    answer = post_report(bytes(body))
    assert answer.status_code < 500, answer.text
