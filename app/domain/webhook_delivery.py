"""The delivery worker: takes due deliveries from the outbox, signs and posts each, and records
the outcome (docs/webhooks.md, "Delivery").

A 2xx answer delivers; 410 Gone disables the endpoint and cancels what it still had pending;
anything else (another status, a redirect, no answer, an address the SSRF rules refuse) is
retried with exponential backoff and jitter (a Retry-After on 429/503 is honoured when longer)
until the attempts run out, when the delivery is dead-lettered (``dead``, kept and listed).

A delivery is claimed for a lease before it is sent and its outcome recorded after, in
separate transactions: no database transaction stays open across the network, and a worker
that dies in between leaves the row pending, due again when the lease ends. The clock, the
random source and the resolver are parameters, so tests run retries without sleeping.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError

from app.clock import utcnow
from app.domain import notifications
from app.domain.egress import Answer, EgressPolicy, Refused, Resolver, post, system_resolver
from app.domain.notifications import TEST_EVENT, iso, new_message_id
from app.domain.webhooks import endpoint_of, signed_headers, signing_secrets
from app.settings import Settings
from app.storage.repositories import webhooks as repo
from app.storage.session import Database
from app.storage.tables import WebhookDelivery, WebhookEndpoint
from scanner import __version__

log = logging.getLogger(__name__)

USER_AGENT = f"gpuprov-webhooks/{__version__}"


@dataclass(frozen=True, slots=True)
class DeliveryConfig:
    """How deliveries are made and retried."""

    egress: EgressPolicy = field(default_factory=EgressPolicy)
    #: attempts before a delivery is dead-lettered
    max_attempts: int = 15
    #: the first retry's delay; each further one doubles it, up to ``backoff_max``
    backoff_base: float = 10.0
    backoff_max: float = 6 * 3600.0
    #: seconds a claimed delivery is held before another worker may take it again
    lease: float = 120.0
    #: deliveries taken per claim
    batch: int = 20
    #: a token.expiring event is sent this long before a token expires
    token_warning: timedelta = timedelta(days=7)


def delivery_config(settings: Settings) -> DeliveryConfig:
    """The delivery settings of ``GPUPROV_WEBHOOK_*``."""
    return DeliveryConfig(
        egress=EgressPolicy(
            allow_loopback=settings.webhook_allow_loopback,
            connect_timeout=settings.webhook_connect_timeout_seconds,
            read_timeout=settings.webhook_timeout_seconds,
            max_response_bytes=settings.webhook_max_response_bytes,
            ca_file=settings.webhook_ca_file,
        ),
        max_attempts=settings.webhook_max_attempts,
        backoff_base=settings.webhook_backoff_seconds,
        backoff_max=settings.webhook_backoff_max_seconds,
        token_warning=timedelta(days=settings.webhook_token_warning_days),
    )


def backoff(attempts: int, config: DeliveryConfig, rand: Callable[[], float]) -> float:
    """Seconds before the next attempt after ``attempts`` failures: exponential, capped, with
    "equal jitter" (half fixed, half random) so receivers that failed together are not all
    retried at the same instant."""
    delay = min(config.backoff_max, config.backoff_base * 2.0 ** max(0, attempts - 1))
    return float(delay / 2 + rand() * delay / 2)


@dataclass
class RunSummary:
    """What one run of the worker did."""

    attempted: int = 0
    delivered: int = 0
    retrying: int = 0
    dead: int = 0
    disabled: int = 0
    events: int = 0

    def as_dict(self) -> dict[str, int]:
        """JSON-ready."""
        return {
            "attempted": self.attempted,
            "delivered": self.delivered,
            "retrying": self.retrying,
            "dead": self.dead,
            "disabled": self.disabled,
            "events": self.events,
        }


def attempt(
    endpoint: WebhookEndpoint,
    message_id: str,
    body: str,
    at: datetime,
    config: DeliveryConfig,
    resolver: Resolver,
) -> Answer:
    """Sign and post one message to an endpoint, now (``at``: the attempt's timestamp)."""
    data = body.encode()
    timestamp = int(at.timestamp())
    headers = {
        **signed_headers(signing_secrets(endpoint, at), message_id, timestamp, data),
        "user-agent": USER_AGENT,
    }
    try:
        return post(endpoint.url, data, headers, config.egress, resolver)
    except Refused as e:
        return Answer(None, f"refused: {e}")


def _describe(answer: Answer) -> str | None:
    if answer.status is None:
        return answer.error
    if 200 <= answer.status < 300:
        return None
    if 300 <= answer.status < 400:
        return f"answered {answer.status}: redirects are not followed (update the URL)"
    return f"answered {answer.status}"


def _record(
    db: Database,
    delivery: WebhookDelivery,
    endpoint: WebhookEndpoint,
    answer: Answer,
    at: datetime,
    config: DeliveryConfig,
    rand: Callable[[], float],
    summary: RunSummary,
) -> bool:
    """Store an attempt's outcome; whether it disabled the endpoint."""
    attempts = delivery.attempts + 1
    values: dict[str, object] = {
        "attempts": attempts,
        "last_attempt_at": at,
        "last_status": answer.status,
        "last_error": _describe(answer),
    }
    with db.transaction(write=True) as session:
        if answer.status is not None and 200 <= answer.status < 300:
            values.update(status="delivered", delivered_at=at)
            summary.delivered += 1
        elif answer.status == 410:
            # Standard Webhooks: the receiver wants no more; stop, and say so
            values.update(status="cancelled")
            repo.update_delivery(session, delivery.id, values)
            reason = f"the receiver answered 410 Gone at {iso(at)}"
            repo.disable(session, endpoint.id, at, reason)
            log.warning("webhook %s disabled: %s", endpoint.name, reason)
            summary.disabled += 1
            return True
        elif attempts >= config.max_attempts:
            values.update(status="dead")
            summary.dead += 1
            log.warning(
                "webhook %s: delivery %s dead after %d attempts (%s)",
                endpoint.name,
                delivery.id,
                attempts,
                values["last_error"],
            )
        else:
            wait = backoff(attempts, config, rand)
            if answer.retry_after is not None:
                wait = max(wait, min(answer.retry_after, config.backoff_max))
            values["next_attempt_at"] = at + timedelta(seconds=wait)
            summary.retrying += 1
        repo.update_delivery(session, delivery.id, values)
    return False


def run_once(
    db: Database,
    config: DeliveryConfig,
    *,
    clock: Callable[[], datetime] = utcnow,
    rand: Callable[[], float] = random.random,
    resolver: Resolver = system_resolver,
    limit: int = 1000,
    stop: threading.Event | None = None,
) -> RunSummary:
    """Deliver what is due now (at most ``limit`` attempts); first write the token.expiring
    events that are due. Each delivery is attempted at most once per run."""
    summary = RunSummary()
    disabled: set[int] = set()
    # reads first: an idle round never takes SQLite's write lock (ingests would wait on it)
    with db.transaction() as session:
        tokens_wanted = notifications.wanted(session, notifications.TOKEN_EXPIRING)
    if tokens_wanted:
        with db.transaction(write=True) as session:
            summary.events += notifications.tokens_expiring(session, clock(), config.token_warning)
    while summary.attempted < limit and not (stop is not None and stop.is_set()):
        now = clock()
        with db.transaction() as session:
            if not repo.any_due(session, now):
                break
        with db.transaction(write=True) as session:
            lease = now + timedelta(seconds=config.lease)
            batch = min(config.batch, limit - summary.attempted)
            claimed = repo.claim_due(session, now, lease, batch)
        if not claimed:
            break
        for delivery, endpoint in claimed:
            if endpoint.id in disabled:  # a 410 earlier in this batch cancelled the rest
                continue
            at = clock()
            answer = attempt(endpoint, delivery.message_id, delivery.body, at, config, resolver)
            summary.attempted += 1
            if _record(db, delivery, endpoint, answer, at, config, rand, summary):
                disabled.add(endpoint.id)
    return summary


def send_test(db: Database, name: str, config: DeliveryConfig, now: datetime) -> Answer:
    """Post a signed ``webhook.test`` message to an endpoint now, outside the outbox; the
    answer's status (or why there was none), never its body."""
    with db.transaction() as session:
        endpoint = endpoint_of(session, name)
    body = notifications.body_of(
        notifications.Event(
            TEST_EVENT,
            {"webhook": endpoint.name},
            lambda _: f"gpuprov test message for webhook *{notifications.slack_escape(name)}*",
        ),
        None,
        now,
    )
    return attempt(endpoint, new_message_id(), body, now, config, system_resolver)


class Worker:
    """The in-process delivery worker: a thread running `run_once` every ``interval`` seconds
    until stopped (the service's lifespan owns it)."""

    def __init__(self, db: Database, config: DeliveryConfig, interval: float) -> None:
        self._db = db
        self._config = config
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuprov-webhooks", daemon=True)

    def start(self) -> None:
        """Start delivering."""
        self._thread.start()

    def stop(self, timeout: float = 30) -> None:
        """Stop after the attempt under way (deliveries not attempted stay in the outbox)."""
        self._stop.set()
        self._thread.join(timeout=timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                run_once(self._db, self._config, stop=self._stop)
            except SQLAlchemyError as e:  # the database is away: the next round tries again
                log.warning("webhook delivery round failed: %s", str(e).splitlines()[0])
            except Exception:  # never let the thread die: events would pile up unseen
                log.exception("webhook delivery round failed")
