"""The advisory pages in Debian's Chromium on the live service (NVIDIA's 131 bulletins imported
before the fleet's reports; `tests.browser.fleet.DRIVER_HOST` runs an R535 driver bulletin 5703
names as affected): from the overview's card to the vulnerable host in a few clicks, the
asset's advisory findings, the list's filters as a person uses them, and an advisory whose
notes and title are hostile markup shown sanitised — nothing runs, no console error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.browser.conftest import Seeded
from tests.browser.fleet import DRIVER_HOST, DRIVER_VERSION, HOSTILE_CVE
from tests.browser.test_dashboard import _watch, login


def _path(page: Any) -> str:
    parts = urlsplit(page.url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def test_from_the_overview_card_to_the_vulnerable_host(
    live: Seeded, page: Any, artifacts: Path
) -> None:
    errors = _watch(page)
    login(page, live, live.reader)
    card = page.locator("main .card", has_text="affected by high advisories")
    # one host runs a driver 5703 names; counted nouns agree with their numbers
    assert re.fullmatch(r"1\s+asset affected by high advisories", card.inner_text().strip())
    assert re.fullmatch(
        r"0\s+assets affected by critical advisories",
        page.locator("main .card", has_text="critical advisories").inner_text().strip(),
    )
    card.locator("a").click()
    page.wait_for_url(re.compile(r".*/advisories\?severity=high&affected=true&sort=affected$"))
    rows = page.locator("table.advisories tbody tr")
    assert rows.count() > 1
    for row in rows.all():
        assert "high" in row.inner_text() and re.search(r"\b1 asset\b", row.inner_text())
    page.locator("table.advisories tbody tr", has_text="CVE-2025-23280").get_by_role(
        "link", name="CVE-2025-23280"
    ).click()
    page.wait_for_url(re.compile(r".*/advisories/CVE-2025-23280$"))
    row = page.locator("table.findings tbody tr", has_text=DRIVER_HOST)
    text = row.inner_text()
    assert "affected" in text and DRIVER_VERSION in text and "535.274.02" in text
    assert f"libcuda.so.{DRIVER_VERSION}" in text
    links = page.locator("dd.links a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert "https://nvidia.custhelp.com/app/answers/detail/a_id/5703" in hrefs
    page.screenshot(path=str(artifacts / "advisory-CVE-2025-23280.png"), full_page=True)
    row.get_by_role("link", name=DRIVER_HOST).click()
    assert _path(page) == f"/assets/{live.assets[DRIVER_HOST]}"
    section = page.locator("table.findings tbody tr")
    assert section.count() > 0
    assert "CVE-" in section.first.inner_text() and "affected" in section.first.inner_text()
    page.screenshot(path=str(artifacts / "asset-advisories.png"), full_page=True)
    assert errors == [], errors
    assert page.dialogs == []


def test_the_list_filters_as_a_person_uses_them(live: Seeded, page: Any) -> None:
    login(page, live, live.reader)
    page.goto(live.url + "/advisories")
    total = page.locator("table.advisories tbody tr").count()
    assert total == 50  # a page of the 455+ CVEs
    page.fill("input[name=product]", "GeForce")
    page.select_option("select[name=severity]", "high")
    page.select_option("select[name=affected]", "true")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*/advisories\?.*product=GeForce.*"))
    rows = page.locator("table.advisories tbody tr")
    assert 0 < rows.count() < total
    assert all("high" in r.inner_text() for r in rows.all())
    # a severity card narrows the list and says how many
    page.goto(live.url + "/advisories")
    card = page.locator("main .card", has_text="critical")
    shown = int(card.locator(".figure").inner_text())
    card.locator("a").click()
    assert page.locator("table.advisories tbody tr").count() == min(shown, 50)


def test_hostile_advisory_text_is_sanitised(live: Seeded, page: Any, artifacts: Path) -> None:
    errors = _watch(page)
    login(page, live, live.reader)
    for path in (f"/advisories?cve={HOSTILE_CVE}", f"/advisories/{HOSTILE_CVE}"):
        response = page.goto(live.url + path)
        assert response.status == 200
        page.wait_for_load_state("networkidle")
        main = page.locator("main")
        assert main.locator("script").count() == 0, path
        assert main.locator("img").count() == 0, path
        assert main.locator("[onerror], [onclick], [style]").count() == 0, path
        assert main.locator("a[href^='javascript'], a[href^='JAVASCRIPT']").count() == 0, path
        # the hostile title is text, shown as written
        assert '<script>alert("title")</script>' in main.inner_text(), path
    notes = page.locator(".notes")
    assert notes.locator("b", has_text="widget").count() == 1  # allowed markup stays
    assert notes.locator("li", has_text="upgrade").count() == 1
    fix = notes.get_by_role("link", name="the fix")
    assert fix.get_attribute("href") == "https://example.com/fix"
    assert "noopener" in (fix.get_attribute("rel") or "")
    assert notes.locator("a", has_text="click me").get_attribute("href") is None
    assert "alert" not in notes.inner_text()
    page.screenshot(path=str(artifacts / "advisory-hostile.png"), full_page=True)
    assert page.dialogs == []
    assert errors == [], errors
