"""Pages a person can read (issue 18 §3), in Debian's Chromium at a 1280 px wide window on the
seeded fleet (long paths, a 100-library host): no page scrolls sideways, a column of paths
keeps room for a file name, the 100-library host's page stays under its documented height
(docs/dashboard.md), digests are shortened on screen but whole in the page, and the asset
list and compliance pages say what a reader needs without clicking."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from app.http.dashboard import router
from app.storage.repositories import ci_trust
from tests.browser.conftest import Seeded
from tests.browser.fleet import (
    BIG_HOST,
    BIG_HOST_FILES,
    DRIVER_HOST,
    HOSTILE_CVE,
    HOSTILE_NAME,
    TAMPERED,
    TAMPERED_FILE,
)
from tests.browser.test_dashboard import login

#: the window the pages must fit (a laptop's browser)
WIDTH = 1280
#: the tallest the page of a 100-library host may be at that width (docs/dashboard.md: its
#: libraries are shown 50 at a time, grouped by directory: 5,005 px; all 100 on one page 8,025
#: px; 188,744 px for a 70-library host before issue 18)
ASSET_PAGE_MAX_HEIGHT = 6_500
#: the narrowest a column of file names may be (about 20 monospace characters)
FILE_COLUMN_MIN_WIDTH = 150
#: routes that are not pages to look at (a form's answer, a download)
NOT_PAGES = {"/login", "/assets/{asset_id}/sbom", "/login/sso", "/login/sso/callback"}


def _dashboard_pages() -> set[str]:
    """Every GET route of the dashboard (a new page is checked once it is listed below)."""
    paths = set()
    for included in router.routes:
        for route in getattr(included, "original_router", included).routes:
            if "GET" in getattr(route, "methods", ()):
                paths.add(route.path)
    return paths - NOT_PAGES


def _urls(live: Seeded) -> dict[str, list[str]]:
    """Concrete URLs of each page, filled from the seeded fleet."""
    with live.db.session() as session:
        decision = session.execute(text("SELECT max(id) FROM gate_decision")).scalar_one()
    tampered, big = live.assets[TAMPERED], live.assets[BIG_HOST]
    return {
        "/": ["/"],
        "/assets": [
            "/assets",
            "/assets?sort=-status",
            "/assets?kind=host&sort=libraries",
            "/assets?status=unowned",
            "/assets?gate=deny",
        ],
        "/assets/{asset_id}": [
            f"/assets/{tampered}",
            f"/assets/{big}",
            f"/assets/{big}?page=2",
            f"/assets/{big}?files=findings",
            f"/assets/{live.assets['gpu-node-07']}",
            f"/assets/{live.assets[DRIVER_HOST]}",
            f"/assets/{live.assets[DRIVER_HOST]}?advisory_status=fixed",
        ],
        "/libraries": ["/libraries"],
        "/libraries/where-used": [
            "/libraries/where-used?family=cudnn&version=9.1.0.70",
            "/libraries/where-used?family=cudart",
        ],
        "/libraries/search": [
            "/libraries/search?q=libcudnn_ops.so.9",
            "/libraries/search?q=libcudnn*",
        ],
        "/drift": ["/drift"],
        "/drift/changes": ["/drift/changes"],
        "/drift/parity": ["/drift/parity?label=env&target=prod&baseline=staging"],
        "/advisories": [
            "/advisories",
            "/advisories?sort=severity",
            "/advisories?affected=true&sort=affected",
            "/advisories?product=geforce&severity=high",
        ],
        "/advisories/{cve}": [
            "/advisories/CVE-2025-23280",
            "/advisories/CVE-2025-23339",
            "/advisories/CVE-2024-0108",
            f"/advisories/{HOSTILE_CVE}",
        ],
        "/compliance": ["/compliance", "/compliance?policy=prod&framework=nist-csf-2.0"],
        "/compliance/controls/{control_id}": [
            "/compliance/controls/ID.RA-09?policy=prod",
            "/compliance/controls/CIS-2.3?policy=prod",
        ],
        "/decisions": ["/decisions"],
        "/decisions/{decision_id}": [f"/decisions/{decision}"],
        "/policies": ["/policies"],
        "/policies/{name}": ["/policies/prod"],
        "/policies/{name}/versions/{version}": ["/policies/prod/versions/1"],
        "/policies/{name}/diff": ["/policies/prod/diff?from=1&to=2"],
        "/admin": ["/admin"],
        "/admin/policies": ["/admin/policies?name=prod"],
        "/admin/trust-policy": ["/admin/trust-policy"],
        "/admin/catalogs": ["/admin/catalogs"],
        "/admin/tokens": ["/admin/tokens"],
        "/admin/ci-trust": ["/admin/ci-trust"],
        "/admin/webhooks": ["/admin/webhooks"],
        "/admin/teams": ["/admin/teams"],
        "/admin/group-mappings": ["/admin/group-mappings"],
    }


def _overflow(page: Any) -> dict[str, Any]:
    """How wide the page is against its window, and the elements that stick out of it."""
    return page.evaluate(
        """() => {
        const width = document.documentElement.clientWidth;
        const wide = [];
        for (const el of document.querySelectorAll('main *')) {
          const box = el.getBoundingClientRect();
          if (box.right > width + 1) {
            wide.push(el.tagName + '.' + el.className + ' ' + Math.round(box.right));
          }
        }
        return {scroll: document.documentElement.scrollWidth, width, wide: wide.slice(0, 5)};
      }"""
    )


@pytest.fixture
def narrow(browser: Any) -> Any:
    """A page in a 1280 px wide window."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()


def _long_ci_rule(live: Seeded) -> None:
    """A CI trust rule with the longest values a real one carries (a reusable workflow's ref)."""
    document = {
        "name": "trainer-release-reusable-gate",
        "issuer": "https://token.actions.githubusercontent.com/acme-corporation-enterprise",
        "provider": "github",
        "audience": "gpuprov",
        "claims": {
            "repository_owner_id": "123456789",
            "repository_id": "987654321",
            "job_workflow_ref": "acme-corporation/platform-ci-workflows/.github/workflows/"
            "gpuprov-gate-reusable.yml@refs/heads/main",
            "ref": "refs/tags/release-candidate-*",
        },
        "scopes": ["gate", "report:write"],
        "assets": ["registry.example.com/acme-corporation/ml-platform/trainer-*"],
        "policies": ["prod", "prod-eu", "prod-us"],
    }
    with live.db.transaction(write=True) as session:
        ci_trust.put(session, document["name"], document, datetime.now(UTC))


def test_no_page_scrolls_sideways_at_1280_px(live: Seeded, narrow: Any, artifacts: Path) -> None:
    _long_ci_rule(live)
    urls = _urls(live)
    assert set(urls) == _dashboard_pages(), "a dashboard page is missing from this test"
    wide = {}
    narrow.goto(live.url + "/login")  # the one page before a session
    found = _overflow(narrow)
    if found["scroll"] > found["width"] or found["wide"]:
        wide["/login"] = found
    login(narrow, live, live.admin)
    # and an error page
    missing = "/assets/999999999"
    for path in [*(u for group in urls.values() for u in group), missing]:
        response = narrow.goto(live.url + path)
        assert response.status == (404 if path == missing else 200), (path, response.status)
        name = re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-") or "overview"
        narrow.screenshot(path=str(artifacts / f"1280-{name}.png"), full_page=True)
        found = _overflow(narrow)
        if found["scroll"] > found["width"] or found["wide"]:
            wide[path] = found
    assert wide == {}, wide


def test_a_100_library_host_page_is_readable_and_bounded(live: Seeded, narrow: Any) -> None:
    login(narrow, live, live.reader)
    narrow.goto(live.url + f"/assets/{live.assets[BIG_HOST]}")
    main = narrow.locator("main").inner_text()
    assert f"GPU libraries ({BIG_HOST_FILES})" in main
    height = narrow.evaluate("document.documentElement.scrollHeight")
    assert height <= ASSET_PAGE_MAX_HEIGHT, height
    widths = narrow.eval_on_selector_all(
        "td.file", "cells => cells.map(c => c.getBoundingClientRect().width)"
    )
    assert len(widths) == 50  # the first page of 100
    assert min(widths) >= FILE_COLUMN_MIN_WIDTH, min(widths)
    # each directory is named once, above its files, and the next page holds the rest
    directories = narrow.locator("tr.dir").all_inner_texts()
    assert len(directories) == len(set(directories))
    narrow.get_by_role("link", name=re.compile("next")).first.click()
    assert len(narrow.locator("td.file").all()) == BIG_HOST_FILES - 50


def test_digests_are_short_on_screen_and_whole_in_the_page(live: Seeded, narrow: Any) -> None:
    login(narrow, live, live.reader)
    narrow.goto(live.url + f"/assets/{live.assets[TAMPERED]}")
    row = narrow.locator("tr", has_text=TAMPERED_FILE.rpartition("/")[2]).first
    digest = row.locator(".digest").first
    full = digest.get_attribute("title")
    assert full is not None and re.fullmatch(r"[0-9a-f]{64}", full)
    assert digest.text_content() == full  # what a copy takes
    shown = digest.evaluate("d => d.getBoundingClientRect().width")
    whole = digest.evaluate("d => d.scrollWidth")
    assert shown < whole  # cut short on screen


def test_the_asset_list_shows_status_and_gate_decisions(live: Seeded, narrow: Any) -> None:
    login(narrow, live, live.reader)
    narrow.goto(live.url + "/assets?sort=status")
    first = narrow.locator("tbody tr").first
    assert TAMPERED in first.inner_text() and "conflict" in first.inner_text()
    assert "deny" in first.inner_text() and "prod" in first.inner_text()
    # train:v1 and train:v1-hotfix: the row of the one that is not the hotfix
    rows = [r for r in narrow.locator("tbody tr").all() if "v1-hotfix" not in r.inner_text()]
    signed = next(r for r in rows if "train:v1" in r.inner_text())
    assert "verified" in signed.inner_text() and "allow" in signed.inner_text()
    narrow.goto(live.url + "/assets?gate=deny")
    names = narrow.locator("tbody tr td:first-child").all_inner_texts()
    assert TAMPERED in names and "registry.acme.test/ml/train:v1" not in names
    narrow.goto(live.url + "/assets?status=unowned")
    names = narrow.locator("tbody tr td:first-child").all_inner_texts()
    # the tampered image's unowned file: its worst is a conflict; the driver host's libcuda and
    # NVML belong to no package record
    assert names == [HOSTILE_NAME, DRIVER_HOST]
    # the advisory column: the worst severity a host is affected by, linked to those findings
    narrow.goto(live.url + "/assets?kind=host")
    cell = narrow.locator("tbody tr", has_text=DRIVER_HOST).locator("a[href*='advisory_status']")
    assert cell.inner_text().startswith("high")


def test_the_asset_page_lists_its_gate_decisions(live: Seeded, narrow: Any) -> None:
    login(narrow, live, live.reader)
    narrow.goto(live.url + f"/assets/{live.assets[TAMPERED]}")
    narrow.locator("main table").first.get_by_role("link", name="deny").first.click()
    narrow.wait_for_url(re.compile(r".*/decisions/\d+$"))
    assert TAMPERED in narrow.locator("h1").inner_text()


def test_compliance_says_which_policy_it_shows(live: Seeded, narrow: Any) -> None:
    login(narrow, live, live.reader)
    narrow.goto(live.url + "/compliance")
    chosen = narrow.locator("p.chosen").inner_text()
    # allowdemo comes first by name, but the gate decides under prod
    assert "prod" in chosen and "gate used most" in chosen and "allowdemo" not in chosen
    assert narrow.locator("select[name=policy] option[selected]").inner_text() == "prod"
