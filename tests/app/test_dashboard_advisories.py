"""The dashboard's advisory pages on both backends, with NVIDIA's real bulletins matched against
real scanner output (`tests.app.test_advisories_list.fleet`): the list by severity, newest and
most affected with its filters, an advisory's page (assets, files, versions, fixed-in, links),
an asset's advisory findings, the overview's cards, 400/404 pages for input that cannot match,
every link leading somewhere, and a hostile advisory's text sanitised."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import Service, auth
from tests.app.pages import login
from tests.app.test_advisories_list import fleet  # noqa: F401 - the fixture
from tests.scanner.advisories.documents import csaf, encode


@pytest.fixture
def client(service: Service) -> Iterator[TestClient]:
    service.client.cookies.clear()
    assert login(service.client, service.token("inventory:read")).status_code == 303
    yield service.client
    service.client.cookies.clear()


def _page(client: TestClient, path: str, status: int = 200) -> str:
    answer = client.get(path)
    assert answer.status_code == status, (path, answer.status_code, answer.text[-400:])
    assert answer.headers["content-type"].startswith("text/html")
    return answer.text


def _text(page: str) -> str:
    """The page's text as a reader sees it (tags dropped, entities decoded, spaces folded)."""
    body = page.split("<main>", 1)[1].replace("<wbr>", "")
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def _rows(page: str) -> list[str]:
    return [_text("<main>" + r) for r in re.findall(r"<tr>(.*?)</tr>", page, re.S)][1:]


def test_the_list_by_severity_newest_and_affected(
    client: TestClient,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    page = _page(client, "/advisories")
    text = _text(page)
    assert "3 advisory documents stored" in text
    # counts per severity, each a filter; nouns agree with their numbers
    assert re.search(r"\b5 high advisories\b", text), text[:600]
    assert re.search(r"\b1 low advisory\b", text)
    assert "/advisories?severity=high" in html.unescape(page)
    rows = _rows(page)
    assert any("CVE-2025-23280" in r and "1 asset" in r for r in rows)
    # the affected filter and the "most affected first" order
    hit = _rows(_page(client, "/advisories?affected=true&sort=affected"))
    assert hit and all(re.search(r"\b\d+ assets?\b", r) for r in hit)
    assert {r.split()[0] for r in hit} >= {"CVE-2025-23280", "CVE-2023-0193"}
    assert all("none" in r for r in _rows(_page(client, "/advisories?affected=false")))
    worst = _rows(_page(client, "/advisories?sort=severity"))
    assert "high" in worst[0] and "low" in worst[-1]
    only = _rows(_page(client, "/advisories?cve=CVE-2023-0193&severity=&product="))
    assert len(only) == 1 and "CVE-2023-0193" in only[0] and "5446" in only[0]
    none = _text(_page(client, "/advisories?cve=CVE-1999-0001"))
    assert "No advisory matches these filters." in none


@pytest.mark.parametrize(
    "query",
    ["severity=urgent", "affected=yes", "sort=random", "per_page=0", "page=0"],
)
def test_filters_that_cannot_match_are_a_400_page(
    client: TestClient,
    query: str,
) -> None:
    _page(client, f"/advisories?{query}", 400)


def test_an_advisory_page_names_assets_files_versions_and_fixes(
    client: TestClient,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    page = _page(client, "/advisories/CVE-2025-23280")
    text = _text(page)
    rows = _rows(page)
    vulnerable = next(r for r in rows if "gpu-535.129.03" in r)
    assert "affected" in vulnerable and "535.129.03" in vulnerable and "535.274.02" in vulnerable
    assert "libcuda.so.535.129.03" in vulnerable
    assert "All driver versions prior to 535.274.02" in vulnerable
    patched = next(r for r in rows if "gpu-535.274.02" in r)
    assert "fixed" in patched
    # affected first
    assert rows.index(vulnerable) < rows.index(patched)
    assert "affected (1)" in text and "fixed (1)" in text and "all (2)" in text
    assert "Bulletin 5703" in text and "digest mismatch" in text  # 5703's .sha256 is stale
    assert 'href="https://nvidia.custhelp.com/app/answers/detail/a_id/5703"' in page
    assert 'href="https://nvd.nist.gov/vuln/detail/CVE-2025-23280"' in page
    # the bulletin's own statement: products, version texts, branches
    assert "Linux(R535)" in text or "R535" in text
    only = _rows(_page(client, "/advisories/CVE-2025-23280?status=fixed"))
    assert [r.split()[0] for r in only if "gpu-" in r] == ["gpu-535.274.02"]
    component = _rows(_page(client, "/advisories/CVE-2023-0193"))
    cuobjdump = next(r for r in component if "layout:toolkit" in r)
    assert "cuobjdump" in cuobjdump and "/usr/local/cuda-11.8/bin/cuobjdump" in cuobjdump
    assert "12.1" in cuobjdump
    _page(client, "/advisories/CVE-1999-0001", 404)
    _page(client, "/advisories/CVE-2025-23280?status=maybe", 400)


def test_the_asset_page_lists_its_advisories(
    client: TestClient,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    host = fleet["gpu-535.129.03"]
    page = _page(client, f"/assets/{host}")
    text = _text(page)
    section = text.split("Advisories (", 1)[1].split("GPU libraries (", 1)[0]
    assert re.match(r"\d+ affected CVEs\)", section)
    assert "CVE-2025-23280" in section and "535.129.03" in section
    first = section.split("Evidence Analysis", 1)[1]
    assert first.split()[0].startswith("CVE-") and " affected " in first[:200]
    fixed = _text(_page(client, f"/assets/{host}?advisory_status=fixed"))
    assert "No fixed finding on this asset." in fixed or " fixed " in fixed
    _page(client, f"/assets/{host}?advisory_status=bogus", 400)
    image = _text(_page(client, f"/assets/{fleet['layout:toolkit']}"))
    section = image.split("Advisories (", 1)[1].split("GPU libraries (", 1)[0]
    assert section.startswith("2 affected CVEs)")  # CVE-2023-0193 and -0196: cuobjdump 11.8
    assert "to act on (2) all (3) affected (2) not affected (0) fixed (1)" in section
    # the default shows what to act on; the fixed one is a tab away
    assert "CVE-2023-0193" in section and "CVE-2022-34667" not in section
    every = _text(_page(client, f"/assets/{fleet['layout:toolkit']}?advisory_status=all"))
    every = every.split("Advisories (", 1)[1].split("GPU libraries (", 1)[0]
    assert "CVE-2022-34667" in every and " fixed " in every
    assert every.index("CVE-2023-0193") < every.index("CVE-2022-34667")  # affected first
    # the asset list's advisory column: the worst severity it is affected by
    listed = _rows(_page(client, "/assets"))
    assert any("gpu-535.129.03" in r and "high" in r for r in listed)


def test_the_overview_cards_count_affected_assets(
    service: Service,
    client: TestClient,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    page = _page(client, "/")
    text = _text(page)
    assert "1 asset affected by high advisories" in text
    assert "0 assets affected by critical advisories" in text
    link = "/advisories?severity=high&amp;affected=true&amp;sort=affected"
    assert f'href="{link}"' in page
    listed = _rows(_page(client, html.unescape(link)))
    assert listed and all("high" in r and "asset" in r for r in listed)


def test_every_link_of_the_advisory_pages_leads_somewhere(
    client: TestClient,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    pages = [
        "/advisories",
        "/advisories?sort=affected&affected=true",
        "/advisories/CVE-2025-23280",
        "/advisories/CVE-2023-0193",
        f"/assets/{fleet['gpu-535.129.03']}",
    ]
    links: set[str] = set()
    for path in pages:
        found = re.findall(r'href="(/[^"]*)"', _page(client, path))
        links |= {html.unescape(h).split("#")[0] for h in found}
    assert len(links) > 20
    for link in sorted(links):
        if link.startswith(("/static/", "/favicon")):
            continue
        answer = client.get(link)
        assert answer.status_code == 200, (link, answer.status_code)


HOSTILE = (
    'Overflow <script>alert("desc")</script> in <b>widget</b>.'
    '<img src=x onerror=alert("img")>'
    "<a href=\"javascript:alert('js')\">click</a> "
    '<a href="https://example.com/fix" onclick="alert(\'click\')">the fix</a>'
    '<ul><li>one</li></ul><div style="position:fixed">two</div>'
    "<iframe src=https://example.com></iframe><svg onload=alert(1)></svg>"
)


def test_a_hostile_advisory_is_sanitised(service: Service, client: TestClient) -> None:
    doc: dict[str, Any] = csaf()
    doc["vulnerabilities"][0]["notes"] = [
        {"category": "description", "text": HOSTILE},
    ]
    doc["vulnerabilities"][0]["title"] = '<script>alert("title")</script>'
    answer = service.client.post(
        "/api/v1/advisories",
        content=encode(doc),
        headers=auth(service.token("admin"), **{"Content-Type": "application/json"}),
    )
    assert answer.status_code == 201, answer.text
    # the API returns the text as published (its readers escape it)
    detail = service.client.get(
        "/api/v1/advisories/CVE-2026-0001", headers=auth(service.token("inventory:read"))
    ).json()
    assert detail["documents"][0]["description"] == HOSTILE
    for path in ("/advisories", "/advisories/CVE-2026-0001"):
        page = _page(client, path)
        main = page.split("<main>", 1)[1]
        assert "<script" not in main, path
        for bad in ("onerror", "onclick", "onload", "javascript:", "<iframe", "<svg", "style="):
            assert bad not in main.lower(), (path, bad)
        # a title is text, escaped: shown, never run
        assert "&lt;script&gt;alert(&#34;title&#34;)&lt;/script&gt;" in main, path
    page = _page(client, "/advisories/CVE-2026-0001")
    notes = page.split('<div class="notes">', 1)[1].split("</div>\n", 1)[0]
    assert "<b>widget</b>" in notes and "<ul><li>one</li></ul>" in notes
    assert '<a href="https://example.com/fix" rel="noopener noreferrer nofollow">the fix</a>' in (
        notes
    )
    assert "<a rel=" in notes and ">click</a>" in notes  # the link's text without its target
    assert "alert" not in notes  # no script's text, no handler, no javascript: target


def test_publisher_text_reaches_pages_only_through_the_filter() -> None:
    """Every template that shows a description runs it through ``publisher_html``."""
    from pathlib import Path

    import app.http.dashboard as dashboard

    templates = Path(dashboard.__file__).parent / "templates"
    for path in templates.glob("*.html"):
        for use in re.findall(r"\{\{[^}]*description[^}]*\}\}", path.read_text()):
            assert "|publisher_html" in use, (path.name, use)
    assert json.dumps(HOSTILE)  # the hostile text is plain data for the API
