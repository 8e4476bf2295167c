"""In Debian's Chromium: the service's pages load everything from the service itself (an
air-gapped network has no CDN)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.browser.conftest import Seeded


def test_api_docs_render_from_the_service_alone(live: Seeded, page: Any, artifacts: Path) -> None:
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(urlsplit(request.url).netloc))
    page.goto(live.url + "/docs")
    page.get_by_text("POST/api/v1/reports").first.wait_for()
    page.screenshot(path=str(artifacts / "api-docs.png"))
    assert hosts == {urlsplit(live.url).netloc}
    assert page.dialogs == []
