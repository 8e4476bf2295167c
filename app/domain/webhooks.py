"""Webhook endpoints (docs/webhooks.md): created, listed, removed and their secrets rotated by
admins, and the Standard Webhooks signature every delivery carries.

Signing follows the Standard Webhooks specification (v1, symmetric): the secret is
``whsec_`` + base64 of 32 random bytes (the spec asks for 24 to 64), generated here and shown
once; the signature is ``v1,`` + base64(HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.
{body}")) with the base64-decoded key; after a rotation the previous secret signs too, for
its grace period, the two signatures space-separated in ``webhook-signature``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.domain import audit
from app.domain.egress import EgressPolicy, Refused, parse_target
from app.domain.notifications import EVENTS, SEVERITIES, iso
from app.errors import AppError, Conflict, NotFound
from app.storage.repositories import webhooks as repo
from app.storage.tables import WebhookDelivery, WebhookEndpoint

SECRET_PREFIX = "whsec_"
#: bytes of a generated key (Standard Webhooks: at least 24, at most 64)
SECRET_BYTES = 32
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
#: most labels one filter may require
MAX_FILTER_LABELS = 20
DELIVERY_STATUSES = ("pending", "delivered", "dead", "cancelled")
#: how long the previous secret keeps signing after a rotation, unless asked otherwise
DEFAULT_GRACE = timedelta(hours=24)


def new_secret() -> str:
    """A fresh signing secret, ``whsec_<base64>``."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``{id}.{timestamp}.{body}``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signing_secrets(endpoint: WebhookEndpoint, at: datetime) -> list[str]:
    """The secrets signing a delivery made at ``at``: the current one, and the previous one
    while its grace period lasts."""
    out = [endpoint.secret]
    if (
        endpoint.previous_secret
        and endpoint.previous_until is not None
        and at < endpoint.previous_until
    ):
        out.append(endpoint.previous_secret)
    return out


def signed_headers(
    secrets_: Sequence[str], message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt."""
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(s, message_id, timestamp, body) for s in secrets_),
    }


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """An endpoint to create, as the API and the dashboard's form give it."""

    name: str
    url: str
    events: tuple[str, ...]
    min_severity: str | None
    labels: Mapping[str, str]


def _refuse(pointer: str, message: str) -> AppError:
    return AppError(message, 422, details=[{"pointer": pointer, "message": message}])


def check_spec(spec: EndpointSpec, policy: EgressPolicy) -> None:
    """Refuse what the service will not deliver to, by field (422)."""
    if not re.match(NAME_PATTERN, spec.name):
        raise _refuse(
            "/name", "name: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    if len(spec.url) > 2048:
        raise _refuse("/url", "url: at most 2048 characters")
    try:
        parse_target(spec.url, policy)
    except Refused as e:
        raise _refuse("/url", f"url: {e}") from None
    if not spec.events:
        raise _refuse("/events", f"events: name at least one of {', '.join(EVENTS)}")
    for event in spec.events:
        if event not in EVENTS:
            raise _refuse("/events", f"events: {event!r} is not one of {', '.join(EVENTS)}")
    if len(set(spec.events)) != len(spec.events):
        raise _refuse("/events", "events: an event type is named twice")
    if spec.min_severity is not None and spec.min_severity not in SEVERITIES:
        raise _refuse(
            "/filter/min_severity", f"filter.min_severity: one of {', '.join(SEVERITIES)}"
        )
    if len(spec.labels) > MAX_FILTER_LABELS:
        raise _refuse("/filter/labels", f"filter.labels: at most {MAX_FILTER_LABELS} labels")
    for key, value in spec.labels.items():
        if not key or len(key) > 128 or not isinstance(value, str) or len(value) > 256:
            raise _refuse(
                "/filter/labels", "filter.labels: names of 1-128 characters, values of at most 256"
            )


@dataclass(frozen=True, slots=True)
class NewSecret:
    """An endpoint and the secret made for it (shown once)."""

    endpoint: WebhookEndpoint
    secret: str


def create_endpoint(
    session: Session, spec: EndpointSpec, policy: EgressPolicy, actor: audit.Actor, now: datetime
) -> NewSecret:
    """Store an endpoint with a new secret (409 when the name is taken)."""
    check_spec(spec, policy)
    if repo.by_name(session, spec.name) is not None:
        raise Conflict(f"a webhook named {spec.name!r} exists; delete it first or pick a name")
    secret = new_secret()
    endpoint = repo.add(
        session,
        WebhookEndpoint(
            name=spec.name,
            url=spec.url,
            events=list(spec.events),
            filter={"min_severity": spec.min_severity, "labels": dict(spec.labels)},
            secret=secret,
            created_at=now,
        ),
    )
    audit.record(
        session,
        actor,
        "webhook.create",
        f"webhook:{spec.name}",
        {"url": spec.url, "events": list(spec.events)},
        now,
    )
    return NewSecret(endpoint, secret)


def endpoint_of(session: Session, name: str) -> WebhookEndpoint:
    """The endpoint of this name (404 otherwise)."""
    endpoint = repo.by_name(session, name)
    if endpoint is None:
        raise NotFound(f"no webhook named {name!r}")
    return endpoint


def delete_endpoint(
    session: Session, name: str, actor: audit.Actor, now: datetime
) -> dict[str, Any]:
    """Remove an endpoint and its outbox; its last state."""
    endpoint = endpoint_of(session, name)
    shown = endpoint_dict(endpoint, repo.status_counts(session, [endpoint.id]).get(endpoint.id))
    repo.delete(session, endpoint)
    audit.record(session, actor, "webhook.delete", f"webhook:{name}", {"url": shown["url"]}, now)
    return shown


def rotate_secret(
    session: Session, name: str, grace: timedelta, actor: audit.Actor, now: datetime
) -> NewSecret:
    """A new secret for an endpoint; the old one keeps signing (a second signature) for
    ``grace`` (0: it stops at once)."""
    endpoint = endpoint_of(session, name)
    secret = new_secret()
    endpoint.previous_secret = endpoint.secret if grace > timedelta(0) else None
    endpoint.previous_until = now + grace if grace > timedelta(0) else None
    endpoint.secret = secret
    session.flush()
    audit.record(
        session,
        actor,
        "webhook.rotate",
        f"webhook:{name}",
        {"grace_seconds": int(grace.total_seconds())},
        now,
    )
    return NewSecret(endpoint, secret)


def endpoint_dict(endpoint: WebhookEndpoint, counts: Mapping[str, int] | None) -> dict[str, Any]:
    """An endpoint as the API shows it (never its secret)."""
    spec = endpoint.filter or {}
    return {
        "name": endpoint.name,
        "url": endpoint.url,
        "events": list(endpoint.events),
        "filter": {
            "min_severity": spec.get("min_severity"),
            "labels": dict(spec.get("labels") or {}),
        },
        "created_at": iso(endpoint.created_at),
        "enabled": endpoint.disabled_at is None,
        "disabled_at": iso(endpoint.disabled_at) if endpoint.disabled_at else None,
        "disabled_reason": endpoint.disabled_reason,
        "previous_secret_until": (
            iso(endpoint.previous_until) if endpoint.previous_until is not None else None
        ),
        "deliveries": {s: int((counts or {}).get(s, 0)) for s in DELIVERY_STATUSES},
    }


def list_endpoints(session: Session) -> list[dict[str, Any]]:
    """Every endpoint, by name, with its deliveries counted by status."""
    rows = repo.endpoints(session)
    counts = repo.status_counts(session, [e.id for e in rows])
    return [endpoint_dict(e, counts.get(e.id)) for e in rows]


def get_endpoint(session: Session, name: str) -> dict[str, Any]:
    """One endpoint as the API shows it."""
    endpoint = endpoint_of(session, name)
    return endpoint_dict(endpoint, repo.status_counts(session, [endpoint.id]).get(endpoint.id))


def delivery_dict(d: WebhookDelivery) -> dict[str, Any]:
    """A delivery as the API shows it: its state, never the receiver's answer body."""
    return {
        "id": d.id,
        "message_id": d.message_id,
        "event": d.event_type,
        "status": d.status,
        "attempts": d.attempts,
        "created_at": iso(d.created_at),
        "next_attempt_at": iso(d.next_attempt_at) if d.status == "pending" else None,
        "last_attempt_at": iso(d.last_attempt_at) if d.last_attempt_at else None,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "delivered_at": iso(d.delivered_at) if d.delivered_at else None,
    }


def deliveries(
    session: Session, name: str, status: str | None, limit: int, offset: int
) -> dict[str, Any]:
    """A page of an endpoint's deliveries, newest first."""
    endpoint = endpoint_of(session, name)
    rows, total = repo.deliveries_page(session, endpoint.id, status, limit, offset)
    return {
        "items": [delivery_dict(d) for d in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }
