"""The allow-list sanitiser of advisory notes (`app.http.dashboard.publisher_html`): hostile
markup loses everything that could run or reach elsewhere, NVIDIA's own markup keeps its
structure and its links, and plain text is escaped."""

from __future__ import annotations

import json
import re

import pytest

from app.http.dashboard.publisher_html import TAGS, publisher_html
from tests.scanner.advisories.documents import PSIRT

REL = 'rel="noopener noreferrer nofollow"'
TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)([^>]*)>")
ATTRIBUTE = re.compile(r"([A-Za-z-]+)=")


@pytest.mark.parametrize(
    ("hostile", "expected"),
    [
        ("<script>alert(1)</script>after", "after"),
        ("<SCRIPT SRC=https://evil.example/x.js></SCRIPT>after", "after"),
        ("<img src=x onerror=alert(1)>text", "text"),
        ('<b onmouseover="alert(1)">bold</b>', "<b>bold</b>"),
        ('<a href="javascript:alert(1)">x</a>', f"<a {REL}>x</a>"),
        ('<a href="JaVaScRiPt:alert(1)">x</a>', f"<a {REL}>x</a>"),
        ('<a href=" javascript:alert(1)">x</a>', f"<a {REL}>x</a>"),
        ('<a href="jav&#x09;ascript:alert(1)">x</a>', f"<a {REL}>x</a>"),
        ('<a href="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;">x</a>', f"<a {REL}>x</a>"),
        ('<a href="vbscript:msgbox(1)">x</a>', f"<a {REL}>x</a>"),
        # a relative link would point into the dashboard itself
        ('<a href="/admin/tokens">x</a>', f"<a {REL}>x</a>"),
        ('<a href="//evil.example/">x</a>', f"<a {REL}>x</a>"),
        (
            '<a href="https://example.com/a" target="_blank" onclick="x()">ok</a>',
            f'<a href="https://example.com/a" {REL}>ok</a>',
        ),
        ('<div style="position:fixed;inset:0" class="x">cover</div>', "<div>cover</div>"),
        ("<svg onload=alert(1)><circle/></svg>t", "t"),
        ("<iframe src=https://evil.example></iframe>t", "t"),
        ("<style>main{display:none}</style>t", "t"),
        ('<form action="https://evil.example"><input name=q></form>t', "t"),
        ("<!-- <script>alert(1)</script> -->t", "t"),
        ("<math><mi xlink:href=javascript:alert(1)>m</mi></math>", ""),
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("<unclosed <b>x", "x"),
    ],
)
def test_hostile_markup_is_neutralised(hostile: str, expected: str) -> None:
    cleaned = str(publisher_html(hostile))
    assert cleaned == expected
    for bad in ("<script", "onerror", "onload", "onclick", "javascript:", "style=", "<iframe"):
        assert bad not in cleaned.lower()


def test_empty_and_missing_text() -> None:
    assert publisher_html(None) == "" and publisher_html("") == ""


def test_nvidia_markup_keeps_its_structure_and_links() -> None:
    """The summary notes of NVIDIA's CSAF documents: their links and lists survive."""
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: this test needs its bulletins")
    doc = json.loads((PSIRT / "2023/5446/5446.json").read_bytes())
    (summary,) = [n["text"] for n in doc["document"]["notes"] if n["category"] == "summary"]
    assert '<a href="https://developer.nvidia.com/cuda-toolkit">' in summary
    cleaned = str(publisher_html(summary))
    assert "<div>" in cleaned
    assert f'<a href="https://developer.nvidia.com/cuda-toolkit" {REL}>' in cleaned
    assert "CUDA Toolkit Downloads</a>" in cleaned
    # every note of every shared bulletin: nothing but allowed markup comes out
    for path in sorted(PSIRT.glob("*/*/[0-9]*.json")):
        doc = json.loads(path.read_bytes())
        notes = [n["text"] for n in doc["document"].get("notes", [])]
        notes += [n["text"] for v in doc.get("vulnerabilities", []) for n in v.get("notes", [])]
        for note in notes:
            for name, attributes in TAG.findall(str(publisher_html(note))):
                assert name.lower() in TAGS, (path, name)
                names = set(ATTRIBUTE.findall(re.sub(r'"[^"]*"', "", attributes)))
                assert names <= {"href", "title", "rel"}, (path, names)
