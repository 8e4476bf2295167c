"""Stored documents checked at use: a promotion policy, the trust policy or a reference catalog
decides only while its stored bytes still hash to the digest recorded when the service
accepted it. A row changed behind the service's back (an UPDATE in the database) is refused,
audited and counted, never obeyed."""

from __future__ import annotations

import hashlib
import hmac
import logging

from sqlalchemy.orm import Session

from app.domain import audit
from app.errors import StoredDocumentAltered

log = logging.getLogger(__name__)

#: who records a mismatch: the service itself, not the caller whose request found it
SERVICE_ACTOR = audit.Actor("service", "gpuprov")


def check(kind: str, target: str, content: bytes, recorded_sha256: str) -> None:
    """Raise `StoredDocumentAltered` unless ``content`` hashes to ``recorded_sha256``."""
    computed = hashlib.sha256(content).hexdigest()
    if not hmac.compare_digest(computed.encode(), recorded_sha256.lower().encode()):
        raise StoredDocumentAltered(kind, target, recorded_sha256, computed)


def is_intact(content: bytes, recorded_sha256: str) -> bool:
    """Whether ``content`` still hashes to the recorded digest."""
    computed = hashlib.sha256(content).hexdigest().encode()
    return hmac.compare_digest(computed, recorded_sha256.lower().encode())


def record(session: Session, error: StoredDocumentAltered) -> None:
    """Log the mismatch and add its audit event in ``session``'s transaction."""
    log.error("stored %s %s altered: %s", error.kind, error.target, error.message)
    audit.record(
        session,
        SERVICE_ACTOR,
        "integrity.mismatch",
        error.target,
        {"kind": error.kind, "recorded_sha256": error.recorded, "computed_sha256": error.computed},
    )
