"""Promotion policies stored by name and versioned: each PUT of a changed document is the next
version; gates and fleet compliance use the current one.

A document is validated by the scanner's own loader (`scanner.policy.document.load_policy`), so
the service and `gpuprov gate --policy-file` accept exactly the same policies; a refused one is
a 422 whose details name each bad field by its path.

Policies are global: one policy gates the images of every team. So storing one needs the
``policy:write`` scope (admins, analysts whose reads cover the whole fleet, tokens given it) and
no team: a team's member reads policies but never changes them (`check_writer`).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.domain import stored as stored_documents
from app.domain.tokens import Principal, Scope
from app.errors import AppError, Forbidden, NotFound
from app.storage.repositories import policies as repo
from app.storage.tables import PromotionPolicyVersion
from scanner.policy.document import LoadedPolicy, PolicyError, load_policy

#: largest policy document accepted
MAX_POLICY_BYTES = 256 * 1024


class InvalidPolicy(AppError):
    """A policy document that cannot be stored; details name each bad field (422)."""

    status = 422


def writer_refusal(principal: Principal) -> str | None:
    """Why `principal` may not store a policy (None: it may): a policy gates every team's
    images, so a caller in a team never may, whatever its scopes; others need policy:write."""
    if Scope.ADMIN.value in principal.scopes:
        return None
    if principal.teams:
        return (
            "policies are global: one policy gates the images of every team, so a member of "
            f"team {', '.join(principal.teams)} reads policies but does not change them; an admin "
            "or an analyst in no team (the policy:write scope) changes them"
        )
    if Scope.POLICY_WRITE.value in principal.scopes:
        return None
    if principal.person is not None and Scope.TRIAGE.value in principal.scopes:
        # an analyst in no team whose reads are confined all the same (GPUPROV_TEAMLESS_ACCESS)
        return (
            "changing a policy needs the policy:write scope: analysts hold it when they see the "
            "whole fleet, and here a person in no team sees no asset (GPUPROV_TEAMLESS_ACCESS="
            "none); an admin changes policies"
        )
    return (
        "changing a policy needs the policy:write scope (admins, analysts in no team, and "
        "tokens given it)"
    )


def check_writer(principal: Principal) -> None:
    """403 with the reason when `principal` may not store a policy (`writer_refusal`)."""
    why = writer_refusal(principal)
    if why is not None:
        raise Forbidden(why)


def _pointer(path: str) -> str:
    """``rules.versions.allow.cudnn`` -> ``/rules/versions/allow/cudnn`` (``[0]`` -> ``/0``)."""
    if path == "(document)":
        return ""
    return "/" + path.replace("[", ".").replace("]", "").replace(".", "/")


def parse(document: bytes, name: str, version: int | None = None) -> LoadedPolicy:
    """Validate a policy document for storage under ``name`` (422 naming each bad field)."""
    loaded = _load(document, version)
    if loaded.policy.name != name:
        raise InvalidPolicy(
            f"the document's name {loaded.policy.name!r} differs from the URL's {name!r}",
            details=[{"pointer": "/name", "message": f"must be {name!r}"}],
        )
    return loaded


def name_of(document: bytes) -> str:
    """The name a valid policy document holds (its ``name:``), under which a form stores it
    (422 naming each bad field, as `parse`)."""
    return _load(document, None).policy.name


def _load(document: bytes, version: int | None) -> LoadedPolicy:
    try:
        document.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidPolicy(f"the policy is not UTF-8: {e.reason} at byte {e.start}") from e
    if "\x00" in document.decode("utf-8"):
        raise InvalidPolicy("the policy holds a NUL character")
    try:
        loaded = load_policy(document, None if version is None else str(version))
    except PolicyError as e:
        details = [{"pointer": _pointer(where), "message": why} for where, why in e.errors]
        raise InvalidPolicy(str(e), details=details) from None
    return loaded


def loaded_of(row: PromotionPolicyVersion) -> LoadedPolicy:
    """A stored version as the evaluator takes it (stored documents were validated on PUT),
    refused (`StoredDocumentAltered`) when its text no longer hashes to the stored digest. One
    stored before a check that now refuses it (a scan_age past its range) is a 422 saying so,
    never evaluated as it reads."""
    document = row.document.encode("utf-8")
    stored_documents.check(
        "policy", f"policy:{row.name}@{row.version}", document, row.content_sha256
    )
    try:
        return load_policy(document, str(row.version))
    except PolicyError as e:
        raise InvalidPolicy(
            f"policy {row.name} version {row.version} is stored but no longer accepted: {e}; "
            f"store a corrected version (PUT /api/v1/policies/{row.name})"
        ) from None


def is_intact(row: PromotionPolicyVersion) -> bool:
    """Whether a stored version's text still hashes to its recorded digest."""
    return stored_documents.is_intact(row.document.encode("utf-8"), row.content_sha256)


def policy_dict(row: PromotionPolicyVersion) -> dict[str, Any]:
    """A stored version, JSON-ready."""
    return {
        "name": row.name,
        "version": row.version,
        "sha256": row.content_sha256,
        "created_at": row.created_at.isoformat(),
        "created_by": row.created_by,
        "document": row.document,
        "intact": is_intact(row),
    }


def put_policy(
    session: Session, name: str, document: bytes, principal: Principal, now: datetime
) -> tuple[PromotionPolicyVersion, bool]:
    """Store ``document`` as the next version of ``name``; the same bytes as the current
    version store nothing. Returns the current row and whether it is new. 403 for a caller
    that may not change policies (`check_writer`)."""
    check_writer(principal)
    parse(document, name)
    repo.lock(session)
    sha256 = hashlib.sha256(document).hexdigest()
    current = repo.current(session, name)
    # an altered current version is never "the same": the new bytes become the next version
    if current is not None and current.content_sha256 == sha256 and is_intact(current):
        return current, False
    row = repo.add(
        session,
        {
            "name": name,
            "document": document.decode("utf-8"),
            "content_sha256": sha256,
            "created_at": now,
            "created_by": principal.name,
            "token_id": principal.token_id,
        },
    )
    return row, True


def stored(session: Session, name: str, version: int | None = None) -> PromotionPolicyVersion:
    """The current (or given) version of a policy; 404 when there is none."""
    row = repo.current(session, name) if version is None else repo.version(session, name, version)
    if row is None:
        which = f"version {version} of policy" if version is not None else "policy"
        raise NotFound(f"no {which} {name!r}; PUT /api/v1/policies/{name} to store one")
    return row


def history(session: Session, name: str, limit: int, offset: int) -> dict[str, Any]:
    """A page of the policy's versions, newest first (404 for an unknown policy)."""
    rows, total = repo.history(session, name, limit, offset)
    if total == 0:
        raise NotFound(f"no policy {name!r}")
    return {
        "items": [policy_dict(r) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


def list_policies(session: Session, limit: int, offset: int) -> dict[str, Any]:
    """A page of policies (current versions), by name."""
    rows, total = repo.page_current(session, limit, offset)
    return {
        "items": [policy_dict(r) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }
