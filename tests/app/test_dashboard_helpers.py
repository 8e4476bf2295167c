"""The dashboard's pure helpers: the SVG bar chart escapes every label, pagination arithmetic,
URLs that keep the query string, ``next`` targets, and the session cookie's signature."""

from __future__ import annotations

import pytest

from app.errors import BadRequest
from app.http.dashboard.auth import safe_next
from app.http.dashboard.charts import Bar, bar_chart
from app.http.dashboard.paging import Pager, query_string, url_with
from app.http.dashboard.sessions import Signer, same_token


def test_bar_chart_escapes_labels_and_links() -> None:
    svg = str(
        bar_chart(
            [
                Bar('9.1"><script>alert(1)</script>', 5, '/assets?version=9.1"><x'),
                Bar("8.9.7.29", 0),
            ],
            title="<b>versions</b>",
        )
    )
    assert "<script" not in svg and "<b>" not in svg and '"><x' not in svg
    assert "&lt;script&gt;" in svg and "&lt;b&gt;versions&lt;/b&gt;" in svg
    assert 'href="/assets?version=9.1&#34;&gt;&lt;x"' in svg
    assert svg.count("<rect") == 2 and 'width="0"' in svg  # a zero bar is drawn empty
    assert " style=" not in svg


def test_bar_chart_scales_and_shortens() -> None:
    svg = str(bar_chart([Bar("a" * 40, 10), Bar("b", 5)], title="t"))
    assert 'width="260"' in svg and 'width="130"' in svg
    assert "a" * 25 + "…" in svg and "a" * 40 in svg  # shortened label, full one in the title
    assert "nothing to show" in str(bar_chart([], title="t"))


@pytest.mark.parametrize(
    ("page", "per_page", "total", "offset", "pages", "first", "last", "prev", "next"),
    [
        (1, 50, 0, 0, 1, 0, 0, False, False),
        (1, 2, 5, 0, 3, 1, 2, False, True),
        (3, 2, 5, 4, 3, 5, 5, True, False),
        (9, 2, 5, 16, 3, 5, 5, True, False),
    ],
)
def test_pager(
    page: int,
    per_page: int,
    total: int,
    offset: int,
    pages: int,
    first: int,
    last: int,
    prev: bool,
    next: bool,
) -> None:
    p = Pager(page, per_page, total)
    assert (p.offset, p.pages, p.first_row, p.last_row) == (offset, pages, first, last)
    assert (p.has_previous, p.has_next) == (prev, next)


def test_urls_keep_the_query_string() -> None:
    current = [("label", "env=prod"), ("label", "team=ml"), ("page", "3"), ("kind", "")]
    assert url_with("/assets", current, page=4) == (
        "/assets?label=env%3Dprod&label=team%3Dml&page=4"
    )
    assert url_with("/assets", current, label=None, page=None) == "/assets"
    assert url_with("/x", [], a=["1", "2"], b=True) == "/x?a=1&a=2&b=true"
    assert query_string({"q": '"><script>'}) == "q=%22%3E%3Cscript%3E"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "/"),
        ("", "/"),
        ("/assets?kind=image", "/assets?kind=image"),
        ("/login?next=/x", "/"),
        ("/logout", "/"),
        ("/login/sso?next=/login/sso", "/"),
    ],
)
def test_safe_next(value: str | None, expected: str) -> None:
    assert safe_next(value) == expected


@pytest.mark.parametrize(
    "value",
    ["//evil.example", "https://evil.example", "/\\evil", "evil", "/a\tb", "/" + "a" * 3000],
)
def test_unsafe_next(value: str) -> None:
    with pytest.raises(BadRequest):
        safe_next(value)


def test_session_cookie_signature_expiry_and_purpose() -> None:
    signer = Signer("k" * 32)
    cookie = signer.new_session(7, "hash", now=1000, lifetime=60)
    data = signer.session(cookie, 1001)
    assert data is not None and data.token_id == 7 and data.expires_at == 1060
    assert data.binding == signer.binding("hash") != signer.binding("other")
    assert signer.session(cookie, 1060) is None  # expired
    assert signer.session(cookie, 999) is None  # issued in the future
    assert Signer("x" * 32).session(cookie, 1001) is None  # another key
    _, login_cookie = signer.new_login(1000)
    assert signer.session(login_cookie, 1001) is None  # a login cookie is not a session
    assert signer.login_token(cookie, 1001, 60) is None
    assert same_token("abc", "abc") and not same_token("abc", "abd") and not same_token("a", None)
