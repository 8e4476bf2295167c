"""The audit log of administrative actions: who (a token's name, or the CLI's operating-system
user) did what to which object, when, from which request. Token secrets and hashes never
appear in it; a token is named by its id, name and prefix."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.clock import utcnow
from app.errors import BadRequest
from app.logs import REQUEST_ID
from app.storage.repositories import audit as repo
from app.storage.tables import AuditEvent

#: every action the log records
ACTIONS = (
    "token.create",
    "token.revoke",
    "token.rotate",
    "trust_policy.put",
    "catalog.import",
    "policy.put",
    "advisory.import",
    "analysis.put",
    "analysis.delete",
    # an analysis ended by the service (its runtime evidence no longer holds)
    "analysis.expire",
    "proposal.accept",
    "proposal.dismiss",
    "proposal.withdraw",
    "ci_trust.put",
    "ci_trust.delete",
    "webhook.create",
    "webhook.delete",
    "webhook.rotate",
    "team.put",
    "team.delete",
    "asset.labels",
    "group_mapping.put",
    "group_mapping.delete",
    # a stored document found altered behind the service's back (app/domain/stored.py)
    "integrity.mismatch",
)


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acted: an API token (``api``), a dashboard user (``web``), the command line
    (``cli``), a CI job by its OIDC token (``ci``), or the service itself (``service``: what it
    found on its own)."""

    source: str
    name: str
    token_id: int | None = None
    #: a person signed in with the OpenID Provider (the name is their email, else subject)
    issuer: str | None = None
    subject: str | None = None


def cli_actor() -> Actor:
    """The command line, named by the operating-system user running it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        user = "unknown"
    return Actor("cli", f"cli:{user}"[:128])


def record(
    session: Session,
    actor: Actor,
    action: str,
    target: str,
    details: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> None:
    """Add an event in the caller's transaction: it is stored exactly when the action is."""
    assert action in ACTIONS, action
    repo.add(
        session,
        AuditEvent(
            at=now or utcnow(),
            source=actor.source,
            actor=actor.name,
            actor_token_id=actor.token_id,
            actor_issuer=actor.issuer,
            actor_subject=actor.subject,
            action=action,
            target=target[:1024],
            details=details or {},
            request_id=REQUEST_ID.get(),
        ),
    )


def web_actor(name: str, token_id: int | None) -> Actor:
    """A dashboard user, named by the token that signed in."""
    return Actor("web", name, token_id)


def record_trust_policy(session: Session, actor: Actor, stored: dict[str, Any]) -> None:
    """A new trust policy version (`catalogs.put_policy`'s answer)."""
    details = {"version": stored["version"], "sha256": stored["content_sha256"]}
    record(session, actor, "trust_policy.put", f"trust_policy@{stored['version']}", details)


def record_catalog(session: Session, actor: Actor, catalog: dict[str, Any]) -> None:
    """A catalog imported (`catalogs.catalog_dict`)."""
    details = {
        "name": catalog["name"],
        "signer": catalog["signer"],
        "entries": catalog["entries"],
        "sha256": catalog["content_sha256"],
    }
    record(session, actor, "catalog.import", f"catalog:{catalog['name']}", details)


def record_policy(session: Session, actor: Actor, name: str, version: int, sha256: str) -> None:
    """A new promotion policy version."""
    details = {"version": version, "sha256": sha256}
    record(session, actor, "policy.put", f"policy:{name}@{version}", details)


def record_advisory(
    session: Session, actor: Actor, namespace: str, tracking_id: str, details: dict[str, Any]
) -> None:
    """An advisory document stored (new or a newer revision) through the API."""
    record(session, actor, "advisory.import", f"advisory:{namespace}#{tracking_id}", details)


def event_dict(event: AuditEvent) -> dict[str, Any]:
    """An event as the API shows it."""
    return {
        "id": event.id,
        "at": event.at.isoformat(),
        "source": event.source,
        "actor": event.actor,
        "actor_token_id": event.actor_token_id,
        "actor_user": (
            {"issuer": event.actor_issuer, "subject": event.actor_subject}
            if event.actor_subject is not None
            else None
        ),
        "action": event.action,
        "target": event.target,
        "details": event.details,
        "request_id": event.request_id,
    }


def events_page(
    session: Session,
    limit: int,
    offset: int,
    *,
    action: str | None = None,
    actor: str | None = None,
    target: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """A page of the log, newest first; a filter that no event can match (an unknown action, a
    window that ends before it starts) is a 400, not an empty page that reads as "nothing
    happened"."""
    if action is not None and action not in ACTIONS:
        raise BadRequest(f"action must be one of {', '.join(ACTIONS)}")
    if since is not None and until is not None and since >= until:
        raise BadRequest("since must be before until (events at or after since, before until)")
    rows, total = repo.page(
        session, limit, offset, action=action, actor=actor, target=target, since=since, until=until
    )
    return {
        "items": [event_dict(e) for e in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }
