"""Webhooks end to end on SQLite and PostgreSQL (issue 19 §5): endpoints managed by admins with a
secret the service makes and shows once; events written to the outbox in the transaction of
their change; delivered by the worker to a real HTTPS receiver on loopback and verified there by
the Standard Webhooks reference library (``standardwebhooks``); retried with backoff and jitter
on an injected clock (no sleeping), stopped by 410, dead-lettered, and never lost to a crash."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from standardwebhooks import Webhook, WebhookVerificationError
from typer.testing import CliRunner

from app.clock import utcnow
from app.domain import notifications
from app.domain.egress import EgressPolicy
from app.domain.tokens import create_token
from app.domain.webhook_delivery import DeliveryConfig, backoff, run_once
from app.main import create_app
from app.storage.repositories import webhooks as repo
from app.storage.session import Database
from app.storage.tables import WebhookDelivery, WebhookEndpoint
from gpuprov.cli import app as gpuprov_app
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.test_gate_api import HEAD, POLICY, digest, gate, put_policy, tampered
from tests.app.webhook_receiver import Receiver, run_receiver


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    yield from run_receiver(tmp_path / "tls")


@pytest.fixture
def admin(service: Service) -> dict[str, str]:
    return auth(service.token("admin", name="admin"))


def config(receiver: Receiver, **kw: Any) -> DeliveryConfig:
    """Deliveries to the loopback receiver (its private CA), retried on the test's clock."""
    return DeliveryConfig(egress=EgressPolicy(allow_loopback=True, ca_file=receiver.ca_file), **kw)


class Clock:
    """A clock the test moves."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def create(
    service: Service, admin: dict[str, str], url: str, events: list[str], **body: Any
) -> dict[str, Any]:
    answer = service.client.post(
        "/api/v1/webhooks",
        json={"name": body.pop("name", "ops"), "url": url, "events": events, **body},
        headers=admin,
    )
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def deliveries(service: Service) -> list[WebhookDelivery]:
    with service.db.session() as session:
        return list(session.scalars(select(WebhookDelivery).order_by(WebhookDelivery.id)))


def emit_test_event(service: Service, **kw: Any) -> int:
    """An event written as the domain writes one (its own transaction)."""
    event = notifications.Event(
        notifications.GATE_DENIED,
        {"x": 1},
        lambda assets: "t",
        assets=kw.pop("assets", [{"id": 1, "kind": "image", "name": "a", "labels": {}}]),
        **kw,
    )
    with service.db.transaction(write=True) as session:
        return notifications.emit(session, event, utcnow())


def verified(secret: str, received: Any) -> dict[str, Any]:
    """The body as the Standard Webhooks reference library accepts it."""
    payload: dict[str, Any] = Webhook(secret).verify(received.body, received.headers)
    return payload


# --------------------------------------------------------------------------- management


def test_endpoints_are_managed_by_admins_and_the_secret_is_shown_once(
    service: Service, admin: dict[str, str]
) -> None:
    created = create(
        service,
        admin,
        "https://hooks.example.com/gpuprov",
        ["gate.denied", "advisory.affected"],
        filter={"min_severity": "high", "labels": {"env": "prod"}},
    )
    secret = created["secret"]
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) == 32
    assert created["filter"] == {"min_severity": "high", "labels": {"env": "prod"}}
    assert created["enabled"] is True
    listed = service.client.get("/api/v1/webhooks", headers=admin)
    assert listed.status_code == 200 and secret not in listed.text
    (item,) = listed.json()["items"]
    assert "secret" not in item and item["deliveries"]["pending"] == 0
    one = service.client.get("/api/v1/webhooks/ops", headers=admin)
    assert one.status_code == 200 and secret not in one.text
    rotated = service.client.post("/api/v1/webhooks/ops/rotate?grace=1h", headers=admin)
    assert rotated.status_code == 201
    assert rotated.json()["secret"] != secret and rotated.json()["previous_secret_until"]
    audit = service.client.get("/api/v1/audit?target=webhook:ops", headers=admin).json()
    assert [e["action"] for e in audit["items"]] == ["webhook.rotate", "webhook.create"]
    assert secret not in json.dumps(audit)
    gone = service.client.delete("/api/v1/webhooks/ops", headers=admin)
    assert gone.status_code == 200 and gone.json()["name"] == "ops"
    assert service.client.get("/api/v1/webhooks/ops", headers=admin).status_code == 404
    assert service.client.delete("/api/v1/webhooks/ops", headers=admin).status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "pointer"),
    [
        ({"secret": "whsec_AAAA"}, 422, "/body/secret"),
        ({"events": ["nope"]}, 422, "/body/events/0"),
        ({"events": []}, 422, "/body/events"),
        ({"url": "http://hooks.example.com/x"}, 422, "/url"),
        ({"url": "https://169.254.169.254/latest/meta-data/"}, 422, "/url"),
        ({"url": "https://[fd00::1]/x"}, 422, "/url"),
        ({"url": "https://10.0.0.1/x"}, 422, "/url"),
        ({"name": "bad name"}, 422, "/body/name"),
        ({"filter": {"min_severity": "urgent"}}, 422, "/body/filter/min_severity"),
        ({"extra": 1}, 422, "/body/extra"),
    ],
)
def test_bad_endpoints_are_refused_by_field(
    service: Service, admin: dict[str, str], body: dict[str, Any], status: int, pointer: str
) -> None:
    document = {"name": "ops", "url": "https://hooks.example.com/x", "events": ["gate.denied"]}
    answer = service.client.post("/api/v1/webhooks", json={**document, **body}, headers=admin)
    assert answer.status_code == status, answer.text
    details = answer.json()["error"]["details"]
    assert any(d["pointer"] == pointer for d in details), details
    assert service.count("webhook_endpoint") == 0


def test_names_are_unique_and_only_admins_manage(service: Service, admin: dict[str, str]) -> None:
    create(service, admin, "https://hooks.example.com/x", ["gate.denied"])
    again = service.client.post(
        "/api/v1/webhooks",
        json={"name": "ops", "url": "https://hooks.example.com/y", "events": ["gate.denied"]},
        headers=admin,
    )
    assert again.status_code == 409
    reader = auth(service.token("inventory:read", "gate", "report:write"))
    for method, path in [
        ("GET", "/api/v1/webhooks"),
        ("GET", "/api/v1/webhooks/ops"),
        ("DELETE", "/api/v1/webhooks/ops"),
        ("POST", "/api/v1/webhooks/ops/rotate"),
        ("GET", "/api/v1/webhooks/ops/deliveries"),
        ("POST", "/api/v1/webhooks/ops/test"),
    ]:
        assert service.client.request(method, path, headers=reader).status_code == 403
        assert service.client.request(method, path).status_code == 401


def test_without_the_loopback_flag_loopback_endpoints_are_refused(service: Service) -> None:
    settings = service.settings.model_copy(update={"webhook_allow_loopback": False})
    with TestClient(create_app(settings)) as client:
        admin = auth(service.token("admin"))
        for url in ("https://127.0.0.1:8443/x", "https://[::1]/x", "http://localhost/x"):
            answer = client.post(
                "/api/v1/webhooks",
                json={"name": "lo", "url": url, "events": ["gate.denied"]},
                headers=admin,
            )
            assert answer.status_code == 422, (url, answer.text)
        # a name that resolves to loopback passes the static check and is refused at delivery
        ok = client.post(
            "/api/v1/webhooks",
            json={"name": "lo", "url": "https://localhost:9/x", "events": ["gate.denied"]},
            headers=admin,
        )
        assert ok.status_code == 201
    assert emit_test_event(service) == 1
    summary = run_once(service.db, DeliveryConfig(egress=EgressPolicy(allow_loopback=False)))
    assert summary.attempted == 1 and summary.retrying == 1
    (row,) = deliveries(service)
    assert row.status == "pending" and row.last_status is None
    assert row.last_error is not None and "resolves to" in row.last_error
    assert "loopback" in row.last_error


# ------------------------------------------------------------------------------ delivery


def test_a_gate_denial_is_delivered_signed_as_standard_webhooks_says(
    service: Service,
    admin: dict[str, str],
    receiver: Receiver,
    post_report: Callable[..., Any],
) -> None:
    secret = create(service, admin, receiver.url(), ["gate.denied"])["secret"]
    put_policy(service, POLICY)
    bom = tampered("reg.example/<!channel>&co:2")
    assert post_report(boms.encode(bom)).status_code == 201
    decision = gate(service, service.token("gate"), policy="prod", image=digest(bom)).json()
    assert decision["decision"] == "deny"
    # written with the decision, not yet sent
    (row,) = deliveries(service)
    assert (row.status, row.attempts, row.event_type) == ("pending", 0, "gate.denied")
    assert receiver.received == []

    summary = run_once(service.db, config(receiver))
    assert (summary.attempted, summary.delivered) == (1, 1)
    (got,) = receiver.received
    assert got.headers["content-type"] == "application/json"
    assert got.headers["webhook-id"] == row.message_id and row.message_id.startswith("msg_")
    assert got.headers["webhook-signature"].startswith("v1,")
    body = verified(secret, got)
    assert body["type"] == "gate.denied"
    assert body["data"]["decision_id"] == decision["decision_id"]
    assert body["data"]["policy"] == decision["policy"]
    assert body["data"]["reasons"][0]["rule"] == "integrity"
    assert body["data"]["assets"][0]["name"] == "reg.example/<!channel>&co:2"
    # Slack's control characters escaped in the text: no channel mention, no forged link
    assert "&lt;!channel&gt;&amp;co:2" in body["text"] and "<!channel>" not in body["text"]
    # a tampered body, or another secret, fails verification
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(got.body.replace(b"deny", b"allo"), got.headers)
    other = "whsec_" + base64.b64encode(b"k" * 32).decode()
    with pytest.raises(WebhookVerificationError):
        Webhook(other).verify(got.body, got.headers)
    (row,) = deliveries(service)
    assert (row.status, row.attempts, row.last_status) == ("delivered", 1, 200)
    # delivered once: a second run sends nothing
    assert run_once(service.db, config(receiver)).attempted == 0


def test_an_allowed_gate_and_an_unsubscribed_event_write_nothing(
    service: Service, admin: dict[str, str], post_report: Callable[..., Any]
) -> None:
    create(service, admin, "https://hooks.example.com/x", ["token.expiring"])
    put_policy(service, POLICY)
    bom = tampered("reg.example/t:1")
    post_report(boms.encode(bom))
    assert (
        gate(service, service.token("gate"), policy="prod", image=digest(bom)).json()["decision"]
        == "deny"
    )
    assert deliveries(service) == []


def test_only_a_denial_writes_a_gate_denied_event(
    service: Service, admin: dict[str, str], post_report: Callable[..., Any]
) -> None:
    """A subscriber of gate.denied hears of a deny, never of an allow or a warn (a warning
    promotes the image)."""
    create(service, admin, "https://hooks.example.com/x", ["gate.denied"])
    put_policy(service, HEAD + "rules:\n  integrity: {forbid: [modified], action: warn}\n")
    put_policy(service, HEAD.replace("prod", "open") + "rules: {}\n", name="open")
    bom = tampered("reg.example/w:1")
    post_report(boms.encode(bom))
    token = service.token("gate")
    for policy, expected in (("prod", "warn"), ("open", "allow")):
        answer = gate(service, token, policy=policy, image=digest(bom)).json()
        assert answer["decision"] == expected, answer
    assert deliveries(service) == []


def test_integrity_modified_on_ingest(
    service: Service, admin: dict[str, str], receiver: Receiver, post_report: Callable[..., Any]
) -> None:
    secret = create(
        service,
        admin,
        receiver.url(),
        ["integrity.modified"],
        filter={"labels": {"env": "prod"}},
    )["secret"]
    # verified files: no event; modified files of an asset without the label: filtered out
    post_report(boms.encode(boms.gpuprov_bom(name="reg.example/clean:1")))
    post_report(boms.encode(tampered("reg.example/staging:1")), label=["env=staging"])
    assert deliveries(service) == []
    answer = post_report(boms.encode(tampered("reg.example/prod:1")), label=["env=prod"])
    assert answer.status_code == 201, answer.text
    (row,) = deliveries(service)
    run_once(service.db, config(receiver))
    body = verified(secret, receiver.received[0])
    assert body["type"] == "integrity.modified"
    assert body["data"]["file_count"] == 1
    assert body["data"]["files"][0]["path"].endswith("libcudnn_ops.so.9")
    assert body["data"]["assets"] == [
        {
            "id": answer.json()["asset_id"],
            "kind": "image",
            "name": "reg.example/prod:1",
            "labels": {"env": "prod"},
        }
    ]


def test_drift_opened_when_a_report_brings_a_new_digest(
    service: Service, admin: dict[str, str], post_report: Callable[..., Any]
) -> None:
    create(service, admin, "https://hooks.example.com/x", ["drift.opened"])
    post_report(boms.encode(boms.gpuprov_bom(name="reg.example/a:1")))
    # the same libraries elsewhere: no drift
    post_report(boms.encode(boms.gpuprov_bom(name="reg.example/b:1")))
    assert deliveries(service) == []
    wheel = boms.cudnn_wheel()
    wheel.libs = [
        boms.Lib(**{**lib.__dict__, "sha256": "e" * 64}) if lib.component == "cudnn_ops" else lib
        for lib in wheel.libs
    ]
    post_report(boms.encode(boms.gpuprov_bom(name="reg.example/c:1", owners=[wheel])))
    (row,) = deliveries(service)
    body = json.loads(row.body)
    assert body["type"] == "drift.opened"
    (conflict,) = body["data"]["conflicts"]
    assert conflict["component"] == "cudnn_ops" and conflict["sha256"] == "e" * 64
    assert len(conflict["known"]) == 1 and conflict["paths"][0].endswith("libcudnn_ops.so.9")


def test_retries_back_off_exponentially_with_jitter_then_deliver(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    secret = create(service, admin, receiver.url(), ["gate.denied"])["secret"]
    emit_test_event(service)
    receiver.statuses = [500, 503, 429, 200]
    receiver.answer_headers = {"retry-after": "120"}
    clock = Clock()
    start = clock.now
    cfg = config(receiver, backoff_base=10, backoff_max=3600, max_attempts=5)
    schedule = []
    for _ in range(3):
        summary = run_once(service.db, cfg, clock=clock, rand=lambda: 1.0)
        assert (summary.attempted, summary.retrying) == (1, 1)
        (row,) = deliveries(service)
        schedule.append((row.next_attempt_at - clock.now).total_seconds())
        # not due yet: nothing is sent
        assert run_once(service.db, cfg, clock=clock).attempted == 0
        clock.advance(schedule[-1])
    # 10 s, then 20 s (503's Retry-After of 120 s is longer: it wins), then 429's 120 s wins
    # over 40 s; rand=1.0 is the top of each jitter range
    assert schedule == [10.0, 120.0, 120.0]
    assert run_once(service.db, cfg, clock=clock).delivered == 1
    (row,) = deliveries(service)
    assert (row.status, row.attempts, row.last_status, row.last_error) == (
        "delivered",
        4,
        200,
        None,
    )
    ids = {r.headers["webhook-id"] for r in receiver.received}
    stamps = [int(r.headers["webhook-timestamp"]) for r in receiver.received]
    assert len(ids) == 1 and len(receiver.received) == 4  # one message, four attempts
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] == int(
        (clock.now - start).total_seconds()
    )
    # each attempt is signed for its own timestamp
    for got in receiver.received:
        at = datetime.fromtimestamp(int(got.headers["webhook-timestamp"]), UTC)
        expected = Webhook(secret).sign(got.headers["webhook-id"], at, got.body)
        assert got.headers["webhook-signature"] == expected


def test_backoff_is_exponential_capped_and_jittered() -> None:
    cfg = DeliveryConfig(backoff_base=10, backoff_max=100)
    assert [backoff(n, cfg, lambda: 1.0) for n in range(1, 6)] == [10, 20, 40, 80, 100]
    assert [backoff(n, cfg, lambda: 0.0) for n in range(1, 6)] == [5, 10, 20, 40, 50]
    assert backoff(3, cfg, lambda: 0.5) == 30


def test_410_disables_the_endpoint_and_cancels_what_it_had(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    create(service, admin, receiver.url(), ["gate.denied"])
    emit_test_event(service)
    emit_test_event(service)
    receiver.statuses = [410]
    summary = run_once(service.db, config(receiver))
    assert (summary.attempted, summary.disabled) == (1, 1)
    assert len(receiver.received) == 1
    rows = deliveries(service)
    assert [r.status for r in rows] == ["cancelled", "cancelled"]
    shown = service.client.get("/api/v1/webhooks/ops", headers=admin).json()
    assert shown["enabled"] is False and "410 Gone" in shown["disabled_reason"]
    assert shown["deliveries"]["cancelled"] == 2
    # a disabled endpoint gets no new events, and nothing more is sent
    assert emit_test_event(service) == 0
    assert run_once(service.db, config(receiver)).attempted == 0


def test_dead_letter_after_the_attempts_run_out_and_the_api_shows_it(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    create(service, admin, receiver.url(), ["gate.denied"])
    emit_test_event(service)
    receiver.statuses = [500]
    receiver.answer_body = b"RECEIVER-INTERNAL-DETAIL stack trace"
    clock = Clock()
    cfg = config(receiver, max_attempts=3, backoff_base=1, backoff_max=1)
    for _ in range(5):
        run_once(service.db, cfg, clock=clock)
        clock.advance(3600)
    assert len(receiver.received) == 3
    page = service.client.get("/api/v1/webhooks/ops/deliveries?status=dead", headers=admin)
    assert page.status_code == 200
    (item,) = page.json()["items"]
    assert (item["status"], item["attempts"], item["last_status"]) == ("dead", 3, 500)
    assert item["last_error"] == "answered 500" and item["next_attempt_at"] is None
    assert "RECEIVER-INTERNAL-DETAIL" not in page.text
    assert service.client.get(
        "/api/v1/webhooks/ops/deliveries?status=bogus", headers=admin
    ).status_code in (400, 422)


def test_the_outbox_survives_a_crash_between_commit_and_delivery(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    secret = create(service, admin, receiver.url(), ["gate.denied"])["secret"]
    emit_test_event(service)
    # the process dies after the commit: a new one (a new engine) finds the row and delivers it
    restarted = Database(service.settings)
    try:
        assert run_once(restarted, config(receiver)).delivered == 1
    finally:
        restarted.dispose()
    verified(secret, receiver.received[0])

    # a worker dies after claiming a delivery, before sending it: it is due again when the
    # claim's lease ends, and the next worker delivers it
    emit_test_event(service)
    clock = Clock()
    cfg = config(receiver, lease=60)
    with service.db.transaction(write=True) as session:
        (claimed,) = repo.claim_due(session, clock(), clock() + timedelta(seconds=60), 10)
    assert run_once(service.db, cfg, clock=clock).attempted == 0
    clock.advance(61)
    assert run_once(service.db, cfg, clock=clock).delivered == 1
    assert len(receiver.received) == 2


def test_a_rolled_back_change_leaves_no_event(service: Service, admin: dict[str, str]) -> None:
    create(service, admin, "https://hooks.example.com/x", ["gate.denied"])
    event = notifications.Event(notifications.GATE_DENIED, {}, lambda a: "t", assets=None)
    with pytest.raises(RuntimeError), service.db.transaction(write=True) as session:
        assert notifications.emit(session, event, utcnow()) == 1
        raise RuntimeError("the change failed after the event was written")
    assert deliveries(service) == []


def test_rotation_sends_both_signatures_during_the_grace_period(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    old = create(service, admin, receiver.url(), ["gate.denied"])["secret"]
    new = service.client.post("/api/v1/webhooks/ops/rotate?grace=1h", headers=admin).json()[
        "secret"
    ]
    emit_test_event(service)
    run_once(service.db, config(receiver))
    got = receiver.received[-1]
    signatures = got.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
    verified(new, got)
    verified(old, got)  # a receiver not yet given the new secret still verifies
    # after the grace period only the new secret signs
    clock = Clock(utcnow() + timedelta(hours=2))
    emit_test_event(service)
    with service.db.transaction(write=True) as session:
        session.execute(update(WebhookDelivery).values(next_attempt_at=clock.now))
    run_once(service.db, config(receiver), clock=clock)
    last = receiver.received[-1]
    assert len(last.headers["webhook-signature"].split(" ")) == 1
    # (verification with the library uses the wall clock: the timestamp is two hours ahead)
    with pytest.raises(WebhookVerificationError):
        Webhook(new).verify(last.body, last.headers)
    assert (
        Webhook(new).sign(
            last.headers["webhook-id"],
            datetime.fromtimestamp(int(last.headers["webhook-timestamp"]), UTC),
            last.body,
        )
        == last.headers["webhook-signature"]
    )
    # rotating with no grace drops the old secret at once
    service.client.post("/api/v1/webhooks/ops/rotate?grace=0s", headers=admin)
    with service.db.session() as session:
        endpoint = session.scalars(select(WebhookEndpoint)).one()
        assert endpoint.previous_secret is None


def test_filters_by_severity_and_labels(service: Service, admin: dict[str, str]) -> None:
    create(
        service,
        admin,
        "https://hooks.example.com/x",
        ["gate.denied"],
        name="prod-high",
        filter={"min_severity": "high", "labels": {"env": "prod"}},
    )
    create(service, admin, "https://hooks.example.com/y", ["gate.denied"], name="all")
    prod = {"id": 1, "kind": "image", "name": "p", "labels": {"env": "prod"}}
    dev = {"id": 2, "kind": "image", "name": "d", "labels": {"env": "dev"}}
    assert emit_test_event(service, assets=[dev]) == 1  # only "all"
    assert emit_test_event(service, assets=[prod, dev], severity="medium") == 1
    assert emit_test_event(service, assets=[prod, dev], severity="critical") == 2
    assert emit_test_event(service, assets=[prod], severity=None) == 2  # unranked: passes
    with service.db.session() as session:
        endpoint_id = session.scalars(
            select(WebhookEndpoint.id).where(WebhookEndpoint.name == "prod-high")
        ).one()
        bodies = session.scalars(
            select(WebhookDelivery.body).where(WebhookDelivery.endpoint_id == endpoint_id)
        ).all()
    # the filtered endpoint's body names only the assets that pass its labels
    assert [json.loads(b)["data"]["assets"] for b in bodies] == [[prod], [prod]]


def test_token_expiring_is_sent_once(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    secret = create(service, admin, receiver.url(), ["token.expiring"])["secret"]
    with service.db.transaction(write=True) as session:
        create_token(
            session, "agent-<x>", ["report:write"], expires_at=utcnow() + timedelta(days=2)
        )
        create_token(session, "later", ["report:write"], expires_at=utcnow() + timedelta(days=60))
    assert run_once(service.db, config(receiver)).delivered == 1
    assert run_once(service.db, config(receiver)).attempted == 0  # once per token and expiry
    body = verified(secret, receiver.received[0])
    assert body["type"] == "token.expiring" and body["data"]["token"]["name"] == "agent-<x>"
    assert "agent-&lt;x&gt;" in body["text"] and "assets" not in body["data"]


def test_send_test_reports_the_status_only(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    create(service, admin, receiver.url(), ["gate.denied"])
    settings = service.settings.model_copy(update={"webhook_ca_file": receiver.ca_file})
    receiver.answer_body = b"RECEIVER-SECRET-BODY"
    with TestClient(create_app(settings)) as client:
        answer = client.post("/api/v1/webhooks/ops/test", headers=admin)
        assert answer.status_code == 200
        assert answer.json() == {"delivered": True, "status": 200, "error": None}
        receiver.statuses = [404]
        answer = client.post("/api/v1/webhooks/ops/test", headers=admin)
        assert answer.json() == {"delivered": False, "status": 404, "error": "answered 404"}
        assert "RECEIVER-SECRET-BODY" not in answer.text
        assert client.post("/api/v1/webhooks/nope/test", headers=admin).status_code == 404
    (first, _) = receiver.received
    assert json.loads(first.body)["type"] == "webhook.test"
    assert deliveries(service) == []  # never in the outbox


def test_the_cli_delivers_what_is_due(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    create(service, admin, receiver.url(), ["gate.denied"])
    emit_test_event(service)
    env = {
        "GPUPROV_DATABASE_URL": service.url,
        "GPUPROV_WEBHOOK_ALLOW_LOOPBACK": "1",
        "GPUPROV_WEBHOOK_CA_FILE": str(receiver.ca_file),
    }
    result = CliRunner().invoke(gpuprov_app, ["webhooks", "deliver"], env=env)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["delivered"] == 1
    assert len(receiver.received) == 1


def test_the_services_own_worker_delivers(
    service: Service, admin: dict[str, str], receiver: Receiver
) -> None:
    import time

    create(service, admin, receiver.url(), ["gate.denied"])
    emit_test_event(service)
    settings = service.settings.model_copy(
        update={"webhook_ca_file": receiver.ca_file, "webhook_worker_seconds": 0.05}
    )
    with TestClient(create_app(settings)):
        deadline = time.monotonic() + 20
        while not receiver.received and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(receiver.received) == 1
    assert [r.status for r in deliveries(service)] == ["delivered"]


# ------------------------------------------------------------------------------ advisories


def _toolkit_image(base: Path, name: str) -> str:
    """An image with the CUDA 11.8 toolkit's cuobjdump, and a file making its digest its own."""
    from tests.app.test_advisory_matching import _image, _toolkit_118

    def build(root: Path) -> None:
        _toolkit_118(root)
        (root / "etc").mkdir(exist_ok=True)
        (root / "etc/image-name").write_text(name)

    return _image(base, name, build)


def _push(post_report: Callable[..., Any], target: str, cache: Path) -> int:
    from scanner.bom.cyclonedx import to_json
    from scanner.pipeline import ScanOptions, run_scan

    answer = post_report(to_json(run_scan(target, ScanOptions(cache_dir=cache))).encode())
    assert answer.status_code == 201, answer.text
    return int(answer.json()["asset_id"])


def test_advisory_affected_when_the_feed_or_a_report_brings_new_findings(
    service: Service,
    admin: dict[str, str],
    receiver: Receiver,
    post_report: Callable[..., Any],
    tmp_path: Path,
) -> None:
    from app.cli_advisories import import_paths
    from scanner.advisories.document import DEFAULT_MAX_BYTES
    from tests.scanner.advisories.documents import PSIRT

    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: this test needs its bulletins")
    secret = create(service, admin, receiver.url(), ["advisory.affected"])["secret"]
    create(
        service,
        admin,
        "https://hooks.example.com/x",
        ["advisory.affected"],
        name="critical-only",
        filter={"min_severity": "critical"},
    )
    cache = tmp_path / "cache"
    first = _push(post_report, _toolkit_image(tmp_path, "toolkit"), cache)
    assert deliveries(service) == []  # no feed yet: nothing affects it

    # a new advisory affects an asset: CVE-2023-0193 (cuobjdump prior to 12.1, MEDIUM)
    summary = import_paths(
        service.db, [PSIRT / "2023" / "5446"], strict=False, max_bytes=DEFAULT_MAX_BYTES
    )
    assert summary.refused == [], summary.refused
    run_once(service.db, config(receiver))
    bodies = [verified(secret, r) for r in receiver.received]
    by_cve = {b["data"]["cve"]: b for b in bodies}
    assert "CVE-2023-0193" in by_cve, [b["data"]["cve"] for b in bodies]
    event = by_cve["CVE-2023-0193"]
    assert event["type"] == "advisory.affected"
    assert event["data"]["severity"] == "medium" and event["data"]["bulletins"] == ["5446"]
    assert [a["id"] for a in event["data"]["assets"]] == [first]
    assert event["text"].startswith(":rotating_light: CVE-2023-0193 (MEDIUM")
    # the critical-only endpoint got nothing of a medium advisory
    with service.db.session() as session:
        names = session.execute(
            select(WebhookEndpoint.name)
            .join(WebhookDelivery, WebhookDelivery.endpoint_id == WebhookEndpoint.id)
            .distinct()
        ).all()
    assert [n for (n,) in names] == ["ops"]

    # a new report matches it: an event naming the new asset only
    count = len(receiver.received)
    second = _push(post_report, _toolkit_image(tmp_path, "toolkit2"), cache)
    run_once(service.db, config(receiver))
    new = [verified(secret, r) for r in receiver.received[count:]]
    assert new and {b["data"]["cve"] for b in new} <= set(by_cve)
    assert all([a["id"] for a in b["data"]["assets"]] == [second] for b in new)

    assert second != first
    # the feed imported again (unchanged), the fleet matched again: nothing new
    count = len(receiver.received)
    import_paths(service.db, [PSIRT / "2023" / "5446"], strict=False, max_bytes=DEFAULT_MAX_BYTES)
    # and an asset scanned again with the same findings: nothing new either
    assert _push(post_report, _toolkit_image(tmp_path / "again", "toolkit2"), cache) == second
    run_once(service.db, config(receiver))
    assert len(receiver.received) == count
