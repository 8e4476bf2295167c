"""Counted nouns read right (issue 18 §6: "1 assets"): the shared wording helpers, and the
dashboard's pages of a fleet where every figure is one."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape
from typing import Any

import pytest

from scanner.wording import counted, plural
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.pages import login

# a count of one followed (after at most two words, not "of" or "all": "1 of 2 files", a count
# beside the asset page's "all files" tab) by a plural noun
_ONE_PLURAL = re.compile(
    r"(?<![\w.,-])1\s+(?:(?!(?:of|all)\b)[A-Za-z-]+\s+){0,2}"
    r"(assets|hosts|images|files|libraries|versions|processes|entries|decisions|controls)\b"
)
POLICY = b"apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\nrules:\n  ownership: {}\n"


@pytest.mark.parametrize(
    ("n", "noun", "many", "said"),
    [
        (0, "asset", None, "0 assets"),
        (1, "asset", None, "1 asset"),
        (2, "asset", None, "2 assets"),
        (1, "library", "libraries", "1 library"),
        (7, "library", "libraries", "7 libraries"),
        (-1, "file", None, "-1 files"),
    ],
)
def test_counted(n: int, noun: str, many: str | None, said: str) -> None:
    assert counted(n, noun, many) == said
    assert plural(noun, n, many) == said.split(" ", 1)[1]


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_the_pattern_finds_what_it_is_for() -> None:
    for wrong in ("1 assets", "on 1 assets", "1 modified files", "1 GPU library files"):
        assert _ONE_PLURAL.search(wrong), wrong
    for right in ("1 asset", "1 of 12 files", "11 assets", "0.1 files", "2026-01 1 file"):
        assert not _ONE_PLURAL.search(right), right


def test_pages_of_a_fleet_of_one(service: Service, post_report: Callable[..., Any]) -> None:
    admin = service.token("admin")
    stored = service.client.put(
        "/api/v1/policies/prod",
        content=POLICY,
        headers=auth(admin, **{"Content-Type": "application/yaml"}),
    )
    assert stored.status_code == 201, stored.text
    stray = boms.Lib(
        path="/opt/app/lib/libcudart.so.12",
        family="cudart",
        component="cudart",
        version="12.4.127",
        integrity="unowned",
    )
    bom = boms.gpuprov_bom(kind="host", name="gpu-node-1", owners=[], extra_libs=[stray])
    answer = post_report(boms.encode(bom))
    assert answer.status_code == 201, answer.text
    asset = answer.json()["asset_id"]
    client = service.client
    client.cookies.clear()
    assert login(client, admin).status_code == 303
    pages = {
        "/": ["1 host", "of 1 GPU library file verified", "1 unowned file on 1 asset"],
        "/compliance?policy=prod": ["1 asset evaluated"],
        f"/assets/{asset}": [],
        "/libraries/search?q=libcudart.so.12": ["1 current file with"],
    }
    for path, says in pages.items():
        page = client.get(path)
        assert page.status_code == 200, (path, page.text[:300])
        text = _text(page.text)
        assert _ONE_PLURAL.search(text) is None, (path, _ONE_PLURAL.search(text))
        for phrase in says:
            assert phrase in text, (path, phrase)
    client.cookies.clear()
