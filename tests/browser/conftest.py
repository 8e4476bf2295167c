"""Real-browser fixtures: the service (uvicorn on a loopback port, PostgreSQL) seeded with the
scanner's reports of a small real fleet (`tests.browser.fleet`), and Debian's Chromium driven
headless by Playwright (never a downloaded browser).

Screenshots go to ``$GPUPROV_SCREENSHOTS`` when set (``scripts/dashboard_screenshots.sh`` sets
it to docs/img), else to the run's artifacts directory ``$GPUPROV_TEST_ARTIFACTS/screenshots``
(default: ``build/test-artifacts``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.cli_advisories import import_paths
from app.domain.tokens import create_token
from app.main import create_app
from app.settings import Settings
from app.storage.session import Database
from scanner.advisories.document import DEFAULT_MAX_BYTES
from tests.app.conftest import LiveServer, free_port, postgres_url  # noqa: F401 - fixture
from tests.browser.fleet import Fleet, build_fleet, hostile_advisory
from tests.scanner.advisories.documents import PSIRT

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

#: Debian's chromium; $GPUPROV_CHROMIUM overrides
CHROMIUM = os.environ.get("GPUPROV_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SECRET_KEY = "browser-tests-secret-key-0123456789abcdef"


@dataclass
class Seeded:
    """The running service and what the tests log in with and look for."""

    url: str
    reader: str  # inventory:read
    admin: str
    db: Database
    fleet: Fleet
    assets: dict[str, int] = field(default_factory=dict)  # asset name -> id


def _check(response: httpx.Response) -> Any:
    assert response.status_code in (200, 201), (response.status_code, response.text)
    return response.json()


def seed(client: httpx.Client, db: Database, fleet: Fleet) -> tuple[dict[str, str], dict[str, int]]:
    """Tokens, trust policy, catalog, policy versions, NVIDIA's bulletins and a hostile
    advisory, the fleet's reports and gate decisions."""
    with db.transaction(write=True) as session:
        tokens = {
            "reader": create_token(session, "security-team", ["inventory:read"], None).secret,
            "admin": create_token(session, "platform-admin", ["admin"], None).secret,
            "writer": create_token(session, "node-agent", ["report:write"], None).secret,
            "gate": create_token(session, "ci-gate", ["gate"], None).secret,
        }

    def auth(who: str, **headers: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[who]}", **headers}

    yaml = "application/yaml"
    _check(
        client.put(
            "/api/v1/trust-policy",
            content=fleet.trust_policy,
            headers=auth("admin", **{"Content-Type": yaml}),
        )
    )
    _check(
        client.post(
            "/api/v1/catalogs",
            content=fleet.catalog,
            headers=auth("admin", **{"Content-Type": "application/json"}),
        )
    )
    from tests.browser.fleet import DEMO_POLICY, PROD_POLICY, PROD_POLICY_V1

    for name, document in (
        ("prod", PROD_POLICY_V1),
        ("prod", PROD_POLICY),
        ("allowdemo", DEMO_POLICY),
    ):
        _check(
            client.put(
                f"/api/v1/policies/{name}",
                content=document,
                headers=auth("admin", **{"Content-Type": yaml}),
            )
        )
    # the feed before the reports: each report is matched as it arrives
    summary = import_paths(db, [PSIRT], strict=False, max_bytes=DEFAULT_MAX_BYTES)
    assert summary.refused == [] and summary.imported == 131, summary
    _check(
        client.post(
            "/api/v1/advisories",
            content=hostile_advisory(),
            headers=auth("admin", **{"Content-Type": "application/json"}),
        )
    )
    assets: dict[str, int] = {}
    for report in fleet.reports:
        answer = _check(
            client.post(
                "/api/v1/reports",
                content=report.body,
                params=[("label", f"{k}={v}") for k, v in report.labels.items()],
                headers=auth("writer", **{"Content-Type": "application/vnd.cyclonedx+json"}),
            )
        )
        assets[report.name] = answer["asset_id"]
    for report in fleet.images:
        _check(
            client.post(
                "/api/v1/gate",
                json={"policy": "prod", "image": report.digest},
                headers=auth("gate"),
            )
        )
    return tokens, assets


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    """The scanner's reports of the test fleet (built once per session)."""
    return build_fleet(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="session")
def live(postgres_url: str, fleet: Fleet) -> Iterator[Seeded]:  # noqa: F811 - the fixture
    """The service on PostgreSQL behind uvicorn, seeded once for the session."""
    settings = Settings(database_url=postgres_url, environment="test", secret_key=SECRET_KEY)
    app = create_app(settings)
    with LiveServer(settings, free_port(), app) as server:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            tokens, assets = seed(client, app.state.db, fleet)
        yield Seeded(server.url, tokens["reader"], tokens["admin"], app.state.db, fleet, assets)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go (docs/img when regenerating them)."""
    chosen = os.environ.get("GPUPROV_SCREENSHOTS")
    if chosen:
        path = Path(chosen)
    else:
        base = Path(os.environ.get("GPUPROV_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))
        path = base / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright."""
    from playwright.sync_api import sync_playwright

    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: run `make system-deps` (installs Debian's chromium)")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies) and page; any JavaScript dialog is recorded."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.dialogs = []  # type: ignore[attr-defined]

    def on_dialog(dialog: Any) -> None:
        page.dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()
