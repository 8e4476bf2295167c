"""The stored CI trust rules: stored, listed and removed by admins, each change audited."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.domain.audit import Actor, record
from app.domain.ci_claims import build_rule
from app.errors import NotFound
from app.settings import Settings
from app.storage.repositories import ci_trust as repo


def put_rule(
    session: Session,
    name: str,
    body: dict[str, Any],
    settings: Settings,
    actor: Actor,
    now: datetime,
) -> tuple[dict[str, Any], bool]:
    """Store the rule `name` (checked by `build_rule`); the stored document and whether it is
    new."""
    rule = build_rule(
        name, body, audience=settings.ci_audience, allow_loopback=settings.allow_loopback_issuers
    )
    document = rule.as_dict()
    created = repo.put(session, name, document, now)
    record(session, actor, "ci_trust.put", f"ci-trust:{name}", document, now)
    return document, created


def list_rules(session: Session) -> list[dict[str, Any]]:
    """Every stored rule, by name."""
    return list(repo.all_rules(session))


def get_rule(session: Session, name: str) -> dict[str, Any]:
    """The stored rule `name` (404 when there is none)."""
    row = repo.by_name(session, name)
    if row is None:
        raise NotFound(f"no CI trust rule named {name!r}")
    return dict(row.document)


def delete_rule(session: Session, name: str, actor: Actor, now: datetime) -> dict[str, Any]:
    """Remove the rule `name` (its document returned): tokens it admitted are refused from
    now on."""
    document = get_rule(session, name)
    repo.remove(session, name)
    record(session, actor, "ci_trust.delete", f"ci-trust:{name}", document, now)
    return document
