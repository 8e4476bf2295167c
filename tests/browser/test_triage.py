"""Triage in Debian's Chromium on the live service (issue 19 §4): an analyst opens the vulnerable
driver host's advisory finding, records an analysis with the form folded under it (state,
justification, detail, expiry), lands back on the finding with a confirmation, sees the analysis
beside it, has a refused one shown again with the reason, and withdraws it; a reader sees the
analysis and no form. Nothing runs, no console error; the seeded fleet is left as it was."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import text

from app.domain.tokens import create_token
from tests.browser.conftest import Seeded
from tests.browser.fleet import DRIVER_HOST
from tests.browser.test_dashboard import _watch, login

CVE = "CVE-2025-23280"


def _analyses(live: Seeded) -> int:
    with live.db.session() as session:
        return int(session.execute(text("SELECT count(*) FROM advisory_analysis")).scalar_one())


def test_an_analyst_records_and_withdraws_an_analysis(
    live: Seeded, page: Any, browser: Any, artifacts: Path
) -> None:
    errors = _watch(page)
    with live.db.transaction(write=True) as session:
        secret = create_token(session, "analyst-ann", ["inventory:read", "triage"]).secret
    before = _analyses(live)
    host = live.assets[DRIVER_HOST]
    login(page, live, secret)
    page.goto(f"{live.url}/assets/{host}")
    row = page.locator("table.findings tbody tr", has_text=CVE)
    assert "none" in row.locator("td.analysis-cell").inner_text()
    row.locator("summary", has_text="Triage").click()
    form = row.locator("form.triage")
    # a refused analysis: fixed needs a detail; the page again, the form open with the reason
    form.locator("select[name=state]").select_option("fixed")
    form.get_by_role("button", name="Record analysis").click()
    page.wait_for_load_state()
    alert = page.locator("main > p.error[role=alert]")
    assert "a fixed analysis needs a detail" in alert.inner_text()
    row = page.locator("table.findings tbody tr", has_text=CVE)
    assert row.locator("details.triage[open] p.error").count() == 1
    assert _analyses(live) == before
    # recorded: back on the finding, a confirmation, the analysis beside it
    form = row.locator("form.triage")
    form.locator("select[name=state]").select_option("not_affected")
    form.locator("select[name=justification]").select_option("vulnerable_code_not_in_execute_path")
    form.locator("textarea[name=detail]").fill("this build host never loads <the module>")
    form.locator("input[name=expires]").fill("2099-06-30")
    form.get_by_role("button", name="Record analysis").click()
    page.wait_for_url(re.compile(rf".*/assets/{host}#vulnerabilities$"))
    notice = page.get_by_role("status")
    assert notice.inner_text().startswith("Recorded analysis ")
    assert f"{CVE} not affected (vulnerable code not in execute path) for {DRIVER_HOST}" in (
        notice.inner_text()
    )
    cell = page.locator("table.findings tbody tr", has_text=CVE).locator("td.analysis-cell")
    shown = cell.inner_text()
    assert "not affected" in shown and "by analyst-ann" in shown and "not trusted" in shown
    assert "until 2099-06-30 00:00 UTC" in shown and "<the module>" in shown
    assert _analyses(live) == before + 1
    page.screenshot(path=str(artifacts / "asset-triage.png"), full_page=True)
    # a reload shows the page alone
    page.reload()
    assert page.get_by_role("status").count() == 0

    # a reader sees the analysis, and nothing to change it with
    reader = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    login(reader, live, live.reader)
    reader.goto(f"{live.url}/assets/{host}")
    cell = reader.locator("table.findings tbody tr", has_text=CVE).locator("td.analysis-cell")
    assert "by analyst-ann" in cell.inner_text()
    assert reader.locator("details.triage, form[action*='/withdraw']").count() == 0
    reader.context.close()

    # withdrawn from the finding: the matcher's answer alone again
    page.locator("table.findings tbody tr", has_text=CVE).get_by_role(
        "button", name="Withdraw"
    ).click()
    page.wait_for_url(re.compile(rf".*/assets/{host}#vulnerabilities$"))
    assert page.get_by_role("status").inner_text().startswith("Withdrew analysis ")
    cell = page.locator("table.findings tbody tr", has_text=CVE).locator("td.analysis-cell")
    assert cell.inner_text().startswith("none")
    assert urlsplit(page.url).path == f"/assets/{host}"
    assert _analyses(live) == before
    assert errors == [], errors
    assert page.dialogs == []
