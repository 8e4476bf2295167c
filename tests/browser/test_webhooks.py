"""The dashboard's webhooks page in a real browser (Debian's Chromium driven by Playwright), on a
service of its own (uvicorn, a fresh SQLite database) allowed to deliver to a real HTTPS
receiver on loopback: an endpoint created with its secret shown once, a test message sent and
reported by status only, a refused URL shown with the reason, CSRF required, removal."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import text
from standardwebhooks import Webhook

from app.domain.tokens import create_token
from app.main import create_app
from app.settings import Settings
from app.storage.migrate import upgrade
from app.storage.session import Database
from tests.app.conftest import LiveServer, free_port
from tests.app.webhook_receiver import Receiver, run_receiver
from tests.browser.conftest import SECRET_KEY
from tests.browser.test_dashboard import _csrf, _watch, login


@dataclass
class Hooked:
    """The service, its admin token, its database and the receiver it may deliver to."""

    url: str
    admin: str
    reader: str
    db: Database
    receiver: Receiver


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hooked]:
    base = tmp_path_factory.mktemp("webhooks")
    receivers = run_receiver(base / "tls")
    receiver = next(receivers)
    url = f"sqlite:///{base / 'gpuprov.db'}"
    upgrade(url)
    settings = Settings(
        database_url=url,
        environment="test",
        secret_key=SECRET_KEY,
        webhook_allow_loopback=True,
        webhook_ca_file=receiver.ca_file,
        webhook_worker_seconds=0,
    )
    app = create_app(settings)
    with LiveServer(settings, free_port(), app) as server:
        db: Database = app.state.db
        with db.transaction(write=True) as session:
            admin = create_token(session, "platform-admin", ["admin"], None).secret
            reader = create_token(session, "security-team", ["inventory:read"], None).secret
        yield Hooked(server.url, admin, reader, db, receiver)
    receivers.close()


def _count(hooked: Hooked) -> int:
    with hooked.db.session() as session:
        return int(session.execute(text("SELECT count(*) FROM webhook_endpoint")).scalar_one())


def test_create_test_and_remove_a_webhook(hooked: Hooked, page: Any) -> None:
    errors = _watch(page)
    login(page, hooked, hooked.admin)  # type: ignore[arg-type]
    page.goto(hooked.url + "/admin/webhooks")
    assert "No webhook is configured" in page.locator("main").inner_text()
    # an internal address is refused with the reason, the form kept
    page.fill("form.admin input[name=name]", "ops")
    page.fill("form.admin input[name=url]", "https://169.254.169.254/latest/meta-data/")
    page.check("input[name=event_gate_denied]")
    page.get_by_role("button", name="Create").click()
    assert "link-local" in page.locator("p.error").inner_text()
    assert page.locator("form.admin input[name=name]").input_value() == "ops"
    assert _count(hooked) == 0
    # created: the secret shown once
    page.fill("form.admin input[name=url]", hooked.receiver.url())
    page.check("input[name=event_advisory_affected]")
    page.select_option("select[name=min_severity]", "high")
    page.fill("textarea[name=labels]", "env=prod")
    page.get_by_role("button", name="Create").click()
    secret = page.locator("code.secret").inner_text()
    assert secret.startswith("whsec_")
    row = page.locator("tbody tr", has_text="ops")
    assert "severity ≥ high" in row.inner_text() and "env=prod" in row.inner_text()
    # send test: the receiver gets a signed message; the page says the status, not the body
    hooked.receiver.answer_body = b"RECEIVER-BODY-NEVER-SHOWN"
    row.get_by_role("button", name="Send test").click()
    assert "delivered (HTTP 200)" in page.locator("p.notice").inner_text()
    got = hooked.receiver.received[-1]
    assert Webhook(secret).verify(got.body, got.headers)["type"] == "webhook.test"
    hooked.receiver.statuses = [503]
    page.locator("tbody tr", has_text="ops").get_by_role("button", name="Send test").click()
    assert "HTTP 503" in page.locator("p.error").inner_text()
    assert "RECEIVER-BODY-NEVER-SHOWN" not in page.content()
    assert secret not in page.content()  # shown once only
    hooked.receiver.statuses = [200]
    # removed
    page.locator("tbody tr", has_text="ops").get_by_role("button", name="Remove").click()
    assert "Removed webhook ops." in page.locator("p.notice").inner_text()
    assert _count(hooked) == 0
    assert errors == [], errors


def test_webhook_forms_need_the_admin_scope_and_csrf(hooked: Hooked, page: Any) -> None:
    login(page, hooked, hooked.admin)  # type: ignore[arg-type]
    page.goto(hooked.url + "/admin/webhooks")
    form = {"name": "sneaky", "url": hooked.receiver.url(), "event_gate_denied": "1"}
    for bad in ({}, {"csrf_token": "0" * 43}):
        answer = page.request.post(hooked.url + "/admin/webhooks", form={**form, **bad})
        assert answer.status == 403 and "CSRF" in answer.text()
    assert _count(hooked) == 0
    page.context.clear_cookies()
    login(page, hooked, hooked.reader)  # type: ignore[arg-type]
    assert page.goto(hooked.url + "/admin/webhooks").status == 403
    answer = page.request.post(
        hooked.url + "/admin/webhooks", form={**form, "csrf_token": _csrf(page)}
    )
    assert answer.status == 403
    assert _count(hooked) == 0
