"""Single sign-on in a real browser: Debian's Chromium signs in through the login page at a real
OpenID Provider (oidc-provider on loopback), lands on the page it asked for with the role its
groups give, and logs out of both the service and the provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select

from app.main import create_app
from app.storage.tables import WebSession
from tests.app.conftest import LiveServer, free_port
from tests.app.test_sso import USERS, sso_settings
from tests.fixtures.oidc import RealProvider, modules_ready


@dataclass
class SsoSite:
    url: str
    provider: RealProvider
    app: Any

    def sessions(self) -> int:
        with self.app.state.db.transaction() as session:
            return int(session.scalar(select(func.count()).select_from(WebSession)) or 0)


@pytest.fixture(scope="module")
def sso_site(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SsoSite]:
    if not modules_ready():
        pytest.fail("oidc-provider is not installed: run `make oidc-provider` (npm ci)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with RealProvider(tmp_path_factory.mktemp("op"), free_port(), [url]) as provider:
        provider.set_users(USERS)
        app = create_app(sso_settings(postgres_url, provider.issuer, url))
        with LiveServer(app.state.settings, port, app):
            yield SsoSite(url, provider, app)


def _loopback_only(page: Any) -> None:
    # the provider's development pages import a web font: nothing leaves the machine
    def route(request_route: Any) -> None:
        if urlsplit(request_route.request.url).hostname == "127.0.0.1":
            request_route.continue_()
        else:
            request_route.abort()

    page.context.route("**/*", route)


def _sign_in_at_provider(page: Any, login: str) -> None:
    page.fill('input[name="login"]', login)
    page.fill('input[name="password"]', "any password")
    page.get_by_role("button", name="Sign-in").click()


def test_sign_in_through_the_login_page_and_log_out_of_both(
    sso_site: SsoSite, page: Any, artifacts: Path
) -> None:
    _loopback_only(page)
    before = sso_site.sessions()
    page.goto(f"{sso_site.url}/assets")
    assert page.url == f"{sso_site.url}/login?next=%2Fassets"
    page.screenshot(path=str(artifacts / "sso-login.png"))
    page.get_by_role("link", name="Sign in with Test IdP").click()
    assert page.url.startswith(f"{sso_site.provider.issuer}/interaction/")
    _sign_in_at_provider(page, "alice")
    page.wait_for_url(f"{sso_site.url}/assets")
    assert page.locator(".who").inner_text() == "alice@example.com · admin"
    assert page.get_by_role("link", name="Admin").is_visible()
    cookie = next(c for c in page.context.cookies() if c["name"] == "gpuprov_user")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert sso_site.sessions() == before + 1
    page.screenshot(path=str(artifacts / "sso-signed-in.png"))

    page.get_by_role("button", name="Log out").click()
    # RP-initiated logout: the provider asks whether to end its own session too
    page.wait_for_url(f"{sso_site.provider.issuer}/session/end**")
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(f"{sso_site.url}/login**")
    assert sso_site.sessions() == before
    page.goto(f"{sso_site.url}/assets")
    assert page.url.startswith(f"{sso_site.url}/login")
    # signed out at the provider too: signing in asks for the account again
    page.get_by_role("link", name="Sign in with Test IdP").click()
    assert page.locator('input[name="login"]').is_visible()
    assert page.dialogs == []


def test_a_person_in_no_mapped_group_sees_why_they_have_no_access(
    sso_site: SsoSite, page: Any
) -> None:
    _loopback_only(page)
    page.goto(f"{sso_site.url}/login")
    page.get_by_role("link", name="Sign in with Test IdP").click()
    _sign_in_at_provider(page, "carol")
    alert = page.get_by_role("alert")
    assert "You have no access to gpuprov" in alert.inner_text()
    assert not any(c["name"] == "gpuprov_user" for c in page.context.cookies())


def test_a_viewer_signs_in_without_the_admin_pages(sso_site: SsoSite, page: Any) -> None:
    _loopback_only(page)
    page.goto(f"{sso_site.url}/")
    page.get_by_role("link", name="Sign in with Test IdP").click()
    _sign_in_at_provider(page, "bob")
    page.wait_for_url(f"{sso_site.url}/")
    assert page.locator(".who").inner_text() == "bob@example.com · viewer"
    assert page.get_by_role("link", name="Admin").count() == 0
