"""Teams in a real browser: an admin signed in at a real OpenID Provider stores a team with its
group and assigns an asset's scoping labels on the admin page; a viewer in that group then signs
in and sees only the team's assets, the user menu naming their role and team. On a database of
its own (PostgreSQL), so the seeded fleet of the other browser tests is left as it is.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from app.domain.tokens import create_token
from app.main import create_app
from app.storage.migrate import upgrade
from tests.app import boms
from tests.app.conftest import PG_ADMIN, LiveServer, free_port
from tests.app.test_sso import USERS, sso_settings
from tests.browser.test_sso import _loopback_only, _sign_in_at_provider
from tests.fixtures.oidc import RealProvider, modules_ready

ML_IMAGE = "registry.example.com/ml/train:1.0"
OTHER_IMAGE = "registry.example.com/secret/other:9"
#: a viewer whose groups include the team's
ERIN = {"email": "erin@example.com", "name": "Erin", "groups": ["gpuprov-viewers", "ml-eng"]}


@pytest.fixture(scope="module")
def team_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not modules_ready():
        pytest.fail("oidc-provider is not installed: run `make oidc-provider` (npm ci)")
    name = f"gpuprov_teams_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
            upgrade(url)
            port = free_port()
            site = f"http://127.0.0.1:{port}"
            with RealProvider(tmp_path_factory.mktemp("op"), free_port(), [site]) as provider:
                provider.set_users({**USERS, "erin": ERIN})
                app = create_app(sso_settings(url, provider.issuer, site))
                with LiveServer(app.state.settings, port, app):
                    with app.state.db.transaction(write=True) as session:
                        writer = create_token(session, "agent", ["report:write"]).secret
                    ids = {}
                    with httpx.Client(base_url=site, timeout=60) as client:
                        for image in (ML_IMAGE, OTHER_IMAGE):
                            answer = client.post(
                                "/api/v1/reports",
                                content=boms.encode(boms.gpuprov_bom(name=image)),
                                headers={
                                    "Authorization": f"Bearer {writer}",
                                    "Content-Type": "application/vnd.cyclonedx+json",
                                },
                            )
                            assert answer.status_code == 201, answer.text
                            ids[image] = answer.json()["asset_id"]
                    yield {"url": site, "provider": provider, "ids": ids}
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _sign_in(page: Any, site: dict[str, Any], login: str, target: str = "/") -> None:
    _loopback_only(page)
    page.goto(f"{site['url']}{target}")
    page.get_by_role("link", name="Sign in with Test IdP").click()
    _sign_in_at_provider(page, login)
    page.wait_for_url(f"{site['url']}{target}")


def test_an_admin_makes_a_team_and_its_viewer_sees_only_its_assets(
    team_site: dict[str, Any], browser: Any, artifacts: Path
) -> None:
    admin = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    _sign_in(admin, team_site, "alice", "/admin/teams")
    admin.fill('input[name="name"]', "ml")
    admin.fill('textarea[name="labels"]', "team=ml")
    admin.fill('textarea[name="groups"]', "ml-eng")
    admin.get_by_role("button", name="Store").click()
    # stored, or replaced when the module's site is reused (--count)
    assert admin.get_by_role("status").inner_text() in ("Stored team ml.", "Replaced team ml.")
    admin.fill('input[name="asset_id"]', str(team_site["ids"][ML_IMAGE]))
    admin.locator('form[action="/admin/teams/labels"] textarea[name="labels"]').fill("team=ml")
    admin.get_by_role("button", name="Assign").click()
    assert "now has the scoping labels team=ml" in admin.get_by_role("status").inner_text()
    row = admin.locator("table tbody tr", has_text="ml-eng")
    assert row.count() == 1 and "team=ml" in row.inner_text()
    admin.screenshot(path=str(artifacts / "admin-teams.png"), full_page=True)
    admin.context.close()

    viewer = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    _sign_in(viewer, team_site, "erin", "/assets")
    assert viewer.locator(".who").inner_text() == "erin@example.com · viewer · team ml"
    listed = viewer.locator("table tbody").inner_text()
    assert "ml/train:1.0" in listed and "secret/other" not in listed
    assert viewer.get_by_role("link", name="Admin").count() == 0
    hidden = viewer.goto(f"{team_site['url']}/assets/{team_site['ids'][OTHER_IMAGE]}")
    assert hidden is not None and hidden.status == 404
    viewer.context.close()
