"""Helpers of the dashboard tests: log a test client in through the login form, read a page's
CSRF token, and reports with image trust for realistic fleets."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from scanner import vocabulary as v

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token of the first form on a page."""
    found = _CSRF.search(html)
    assert found is not None, "no form with a CSRF token on this page"
    return found.group(1)


def login(client: TestClient, token: str, next_url: str = "/") -> Any:
    """Post the login form as a browser would (its CSRF cookie and field); the 303 answer."""
    form = client.get("/login")
    assert form.status_code == 200, form.text
    return client.post(
        "/login",
        data={"token": token, "csrf_token": csrf_of(form.text), "next": next_url},
        follow_redirects=False,
    )


def session_csrf(client: TestClient) -> str:
    """The logged-in session's CSRF token (from the logout form of the overview)."""
    page = client.get("/")
    assert page.status_code == 200, page.text
    return csrf_of(page.text)


def with_trust(
    bom: dict[str, Any], signer: str | None, level: int | None, builder: str | None = None
) -> dict[str, Any]:
    """``bom`` whose image says what its signatures and SLSA provenance established."""
    props = bom["metadata"]["component"].setdefault("properties", [])
    if signer:
        props.append({"name": v.IMAGE_SIGNER, "value": signer})
    if level is not None:
        props.append({"name": v.SLSA_BUILD_LEVEL, "value": str(level)})
    if builder:
        props.append({"name": v.SLSA_BUILDER, "value": builder})
    return bom
