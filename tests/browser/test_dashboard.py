"""The dashboard in a real browser (Debian's Chromium driven by Playwright) on the live service
holding the scanner's reports of the test fleet (`tests.browser.fleet`): log in, every page,
filters, where-used to an asset, an SBOM download, a failing control down to its file, report
values that must stay text, the admin scope, CSRF, logout, and the three clicks from the
overview to the tampered image and why it fails."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from tests.browser.conftest import Seeded
from tests.browser.fleet import HOSTILE_NAME, TAMPERED, TAMPERED_FILE

CSP = "content-security-policy"


def login(page: Any, live: Seeded, token: str) -> None:
    """Log in through the form, as a person would."""
    page.goto(live.url + "/login")
    page.fill("input[name=token]", token)
    page.locator("form button[type=submit], form input[type=submit]").first.click()
    page.wait_for_url(re.compile(r".*/$"))


def _watch(page: Any) -> list[str]:
    """Console errors (a blocked inline script or style is one, a resource that failed to load
    another: the browser's own request for /favicon.ico too) from now on."""
    errors: list[str] = []
    refused: set[str] = set()  # pages answered 4xx on purpose: each test checks that status

    def console(msg: Any) -> None:
        url = msg.location.get("url", "")
        if msg.type == "error":
            if not (msg.text.startswith("Failed to load resource") and url in refused):
                errors.append(f"{msg.text} ({url})")

    def response(answer: Any) -> None:
        if answer.request.resource_type == "document":
            if answer.status >= 400:
                refused.add(answer.url)
        elif answer.status >= 400:
            errors.append(f"{answer.status} {answer.url}")

    page.on("console", console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", response)
    return errors


def _path(page: Any) -> str:
    parts = urlsplit(page.url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _token_count(live: Seeded) -> int:
    with live.db.session() as session:
        return int(session.execute(text("SELECT count(*) FROM api_token")).scalar_one())


def _csrf(page: Any) -> str:
    """The session's CSRF token, as every form of the page carries it."""
    return str(page.locator("input[name=csrf_token]").first.get_attribute("value"))


#: GET routes of the dashboard that are no page: a download
#: GET routes that are no page: a download, and single sign-on's redirects to and from the
#: provider (not configured here; tests/browser/test_sso.py drives them)
NOT_PAGES = {"/assets/{asset_id}/sbom", "/login/sso", "/login/sso/callback"}


def _page_routes() -> set[str]:
    """The path template of every GET route the dashboard serves."""
    from app.http.dashboard import router
    from app.http.observe import served_routes

    return {
        route.path
        for route in served_routes(router.routes)
        if "GET" in (getattr(route, "methods", None) or ())
    }


def test_log_in_and_visit_every_page(live: Seeded, page: Any, artifacts: Path) -> None:
    """Every page of the dashboard (the list is checked against its routes, so a new page is
    visited too) and the API documentation load without one console error in the browser, and
    with the security headers."""
    errors = _watch(page)
    response = page.goto(live.url + "/login")
    assert response.status == 200
    page.wait_for_load_state("networkidle")  # the browser's own request for the icon included
    assert errors == [], errors
    login(page, live, live.admin)
    tampered = live.assets[TAMPERED]
    with live.db.session() as session:
        decision = session.execute(text("SELECT max(id) FROM gate_decision")).scalar_one()
    pages = {
        "admin": "/admin",
        "policy-version": "/policies/prod/versions/1",
        "overview": "/",
        "assets": "/assets",
        "asset-tampered": f"/assets/{tampered}",
        "libraries": "/libraries",
        "where-used": "/libraries/where-used?family=cudnn&version=9.1.0.70",
        "search": "/libraries/search?q=libcudnn_ops.so.9",
        "drift-conflicts": "/drift",
        "drift-changes": "/drift/changes",
        "drift-parity": "/drift/parity?label=env&target=prod&baseline=staging",
        "advisories": "/advisories",
        "advisory": "/advisories/CVE-2025-23280",
        "compliance": "/compliance?policy=prod",
        "compliance-control": "/compliance/controls/ID.RA-09?policy=prod",
        "decisions": "/decisions",
        "decision": f"/decisions/{decision}",
        "policies": "/policies",
        "policy": "/policies/prod",
        "policy-diff": "/policies/prod/diff?from=1&to=2",
        "admin-policies": "/admin/policies?name=prod",
        "admin-trust-policy": "/admin/trust-policy",
        "admin-catalogs": "/admin/catalogs",
        "admin-tokens": "/admin/tokens",
        "admin-ci-trust": "/admin/ci-trust",
        "admin-webhooks": "/admin/webhooks",
        "admin-teams": "/admin/teams",
        "admin-group-mappings": "/admin/group-mappings",
    }
    paths = [urlsplit(p).path for p in ("/login", *pages.values())]
    unvisited = sorted(
        template
        for template in _page_routes() - NOT_PAGES
        if not any(re.fullmatch(re.sub(r"\{[a-z_]+\}", "[^/]+", template), p) for p in paths)
    )
    assert unvisited == [], f"pages this test does not visit: {unvisited}"
    for name, path in pages.items():
        response = page.goto(live.url + path)
        page.wait_for_load_state("networkidle")
        assert response.status == 200, (path, response.status)
        headers = response.headers
        assert "'unsafe-inline'" not in headers[CSP] and "frame-ancestors 'none'" in headers[CSP]
        assert headers["x-content-type-options"] == "nosniff"
        assert page.locator("script:not([src])").count() == 0, path
        assert page.locator("[style]").count() == 0, path
        page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
        assert errors == [], (path, errors)
    for docs in ("/docs", "/redoc"):  # the API's documentation pages, packaged scripts
        assert page.goto(live.url + docs).status == 200
        page.wait_for_load_state("networkidle")
        assert errors == [], (docs, errors)
    assert page.dialogs == []


def test_filter_and_follow_where_used_to_an_asset(live: Seeded, page: Any) -> None:
    login(page, live, live.reader)
    page.goto(live.url + "/libraries")
    page.select_option("select[name=family]", "cudnn")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*/libraries\?family=cudnn.*"))
    rows = page.locator("tbody tr")
    assert rows.count() == 2  # 9.1.0.70 and 9.3.0.75
    assert "cudart" not in page.locator("tbody").inner_text()
    row = page.locator("tbody tr", has_text="9.3.0.75")
    row.get_by_role("link", name="where used").click()
    page.wait_for_url(re.compile(r".*/libraries/where-used\?.*version=9\.3\.0\.75.*"))
    page.get_by_role("link", name="registry.acme.test/ml/infer:v5").click()
    assert _path(page) == f"/assets/{live.assets['registry.acme.test/ml/infer:v5']}"
    assert "libcudnn_ops.so.9" in page.content()
    # the filtered URL is stable: pasted into a new tab it shows the same rows
    page.goto(live.url + "/libraries/where-used?family=cudnn&version=9.3.0.75&label=env%3Dprod")
    assert page.locator("tbody tr").count() == 1


def test_search_by_digest_reaches_every_holder(live: Seeded, page: Any) -> None:
    login(page, live, live.reader)
    page.goto(live.url + "/libraries/search")
    page.fill("input[name=q]", "libcudnn_ops.so.9")
    page.get_by_role("button", name="Search").click()
    rows = page.locator("tbody tr")
    assert rows.count() == 5  # the four images and gpu-node-07
    modified = page.locator("tbody tr", has_text="train:v1-hotfix")
    digest = modified.locator("a[href*='sha256=']").get_attribute("href")
    page.goto(live.url + digest)
    assert page.locator("tbody tr").count() == 1  # the patched copy is on one image only


def test_download_an_sbom(live: Seeded, page: Any) -> None:
    login(page, live, live.reader)
    page.goto(live.url + f"/assets/{live.assets[TAMPERED]}")
    link = page.locator("a[href*='/sbom']").first
    with page.expect_download() as info:
        link.click()
    download = info.value
    bom = json.loads(Path(download.path()).read_bytes())
    assert bom["bomFormat"] == "CycloneDX"
    assert bom["metadata"]["component"]["name"] == TAMPERED


def test_open_a_failing_control_and_reach_the_failing_file(live: Seeded, page: Any) -> None:
    login(page, live, live.reader)
    page.goto(live.url + "/compliance?policy=prod&framework=nist-csf-2.0")
    row = page.locator("tr", has_text="ID.RA-09")
    assert "authenticity and integrity of hardware and software" in row.inner_text()
    row.locator("a.s-fail").click()
    page.wait_for_url(re.compile(r".*/compliance/controls/ID\.RA-09\?policy=prod"))
    assert "The authenticity and integrity" in page.locator("blockquote").inner_text()
    failing = page.locator("tbody tr", has_text=TAMPERED)
    assert "integrity" in failing.inner_text() and "modified" in failing.inner_text()
    failing.get_by_role("link", name=TAMPERED_FILE).first.click()
    assert _path(page) == f"/assets/{live.assets[TAMPERED]}"
    file_row = page.locator("tr", has_text=TAMPERED_FILE).first
    assert "modified" in file_row.inner_text() and "conflict" in file_row.inner_text()


def test_report_values_render_as_text_and_run_nothing(
    live: Seeded, page: Any, artifacts: Path
) -> None:
    errors = _watch(page)
    login(page, live, live.reader)
    hostile = live.assets[HOSTILE_NAME]
    for path in (
        "/assets?label=env%3Dlab",
        f"/assets/{hostile}",
        "/libraries/search?q=libcudart.so.12.4.127",
        "/libraries/where-used?family=cudart&label=env%3Dlab",
    ):
        response = page.goto(live.url + path)
        assert response.status == 200
        assert CSP in response.headers
        assert page.locator("img[src=x]").count() == 0, path
        assert page.locator("script:not([src])").count() == 0, path
        body = page.locator("main").inner_text()
        assert HOSTILE_NAME in body, path
        if "assets?" not in path:
            assert '"><script>alert(1)</script>' in body, path
    page.screenshot(path=str(artifacts / "hostile-values.png"), full_page=True)
    assert page.dialogs == []
    assert errors == [], errors


def test_a_reader_can_neither_see_nor_post_admin_forms(live: Seeded, page: Any) -> None:
    login(page, live, live.reader)
    assert page.locator("header nav a[href^='/admin']").count() == 0
    for path in ("/admin", "/admin/tokens", "/admin/policies", "/admin/trust-policy"):
        assert page.goto(live.url + path).status == 403, path
        assert page.locator("form.admin").count() == 0
    page.goto(live.url + "/")
    before = _token_count(live)
    answer = page.request.post(
        live.url + "/admin/tokens",
        form={"csrf_token": _csrf(page), "name": "sneaky", "scope_admin": "1"},
    )
    assert answer.status == 403
    assert _token_count(live) == before


def test_a_form_posted_without_its_csrf_token_is_refused(live: Seeded, page: Any) -> None:
    login(page, live, live.admin)
    page.goto(live.url + "/admin/tokens")
    before = _token_count(live)
    for form in (
        {"name": "no-csrf", "scope_gate": "1"},
        {"name": "bad-csrf", "scope_gate": "1", "csrf_token": "0" * 43},
    ):
        answer = page.request.post(live.url + "/admin/tokens", form=form)
        assert answer.status == 403, form
        assert "CSRF" in answer.text()
    assert _token_count(live) == before


def test_admin_forms_store_a_policy_version_and_manage_tokens(live: Seeded, page: Any) -> None:
    errors = _watch(page)
    login(page, live, live.admin)
    page.goto(live.url + "/admin/policies?name=prod")
    document = page.locator("textarea[name=document]").input_value()
    assert "name: prod" in document
    page.fill("textarea[name=document]", document + "  duplicates: {}\n")
    page.get_by_role("button", name="Store as the next version").click()
    assert "Stored prod version 3." in page.locator("main").inner_text()
    page.get_by_role("link", name="what changed").click()
    assert "+  duplicates: {}" in page.locator("pre.diff").inner_text()
    # a refused document is shown again with the reason, nothing stored
    page.goto(live.url + "/admin/policies?name=prod")
    page.fill("textarea[name=document]", "name: prod\nrules: {nope: {}}\n")
    page.get_by_role("button", name="Store as the next version").click()
    assert page.locator("p.error").count() == 1
    page.goto(live.url + "/policies/prod")
    assert page.locator("tbody tr").count() == 3
    # a token: created with its secret shown once, then revoked
    page.goto(live.url + "/admin/tokens")
    page.fill("form.admin input[name=name]", "dashboard-made")
    page.check("input[name=scope_inventory_read]")
    page.get_by_role("button", name="Create").click()
    secret = page.locator("code.secret").inner_text()
    assert secret.startswith("gpv_")
    row = page.locator("tbody tr", has_text="dashboard-made")
    row.get_by_role("button", name="Revoke").click()
    assert "revoked" in page.locator("tbody tr", has_text="dashboard-made").inner_text()
    assert secret not in page.content()  # shown once only
    assert errors == [], errors


def test_logout_ends_the_session(live: Seeded, page: Any) -> None:
    login(page, live, live.reader)
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r".*/login.*"))
    page.goto(live.url + "/assets")
    assert urlsplit(page.url).path == "/login"


def test_from_the_overview_to_the_tampered_image_in_three_clicks(
    live: Seeded, page: Any, artifacts: Path
) -> None:
    """A new user's path: the overview links the tampered image (an urgent finding) or the
    image list holding it; its page says why it fails and which controls it breaks."""
    login(page, live, live.reader)
    page.goto(live.url + "/")
    target = f"/assets/{live.assets[TAMPERED]}"
    clicks = 0
    while _path(page) != target and clicks < 3:
        direct = page.locator("main").get_by_role("link", name=TAMPERED)
        if direct.count():
            direct.first.click()
        else:  # the fleet's images, then the image
            page.locator("main a[href^='/assets?']").first.click()
        page.wait_for_load_state()
        clicks += 1
    assert _path(page) == target, f"not reached in {clicks} clicks: {page.url}"
    main = page.locator("main").inner_text()
    # why it fails: the patched file, the unowned copy, no signature; the controls it breaks
    assert TAMPERED_FILE in main and "modified" in main and "unowned" in main
    assert "deny" in main
    for control in ("ID.RA-09", "PR.DS-01", "CIS-2.6"):
        assert control in main, control
    page.screenshot(path=str(artifacts / "tampered-image.png"), full_page=True)


@pytest.mark.parametrize("path", ["/", "/libraries", "/admin/tokens"])
def test_pages_need_a_session(live: Seeded, page: Any, path: str) -> None:
    page.goto(live.url + path)
    assert urlsplit(page.url).path == "/login"
