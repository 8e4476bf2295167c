"""The service's provenance inputs: the versioned trust policy and signed reference catalogs.

A policy is checked by loading it with the scanner's `TrustPolicy` (keys and Sigstore roots
inline: the service reads no files). A catalog is verified against the current policy on import
and refused with the reason when its signature or signer is not trusted; every stored catalog is
verified again when the policy changes. Either change re-evaluates stored verdicts
(`app.domain.provenance`) in the same transaction.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.domain import compliance
from app.domain import stored as stored_documents
from app.domain.columns import limits_of, misfit
from app.domain.provenance import (
    ActiveCatalogs,
    CatalogRef,
    Reevaluation,
    active_refs,
    load_active,
    reevaluate_added,
    reevaluate_all,
)
from app.domain.tokens import Principal
from app.errors import AppError, Conflict, NotFound, StoredDocumentAltered
from app.storage.repositories import provenance as repo
from app.storage.tables import CatalogEntryRow, ReferenceCatalog, TrustPolicyVersion
from scanner.errors import ScannerError
from scanner.refcatalog.model import CatalogEntry
from scanner.verify.catalogs import load_catalog
from scanner.verify.provenance import VerifiedCatalog
from scanner.verify.trust import TrustPolicy
from scanner.verify.trust_file import parse_trust_policy

#: largest trust policy document accepted (keys and roots are inline, so allow some room)
MAX_POLICY_BYTES = 1024 * 1024
_POLICY_SOURCE = "the trust policy"


class Unprocessable(AppError):
    """A policy or catalog that cannot be accepted; the message says why (422)."""

    status = 422


# ---------------------------------------------------------------------------- trust policy


def parse_policy(document: bytes) -> TrustPolicy:
    """Load a policy document as the scanner would, refusing file references (422 on error)."""
    try:
        text = document.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Unprocessable(f"the trust policy is not UTF-8: {e.reason} at byte {e.start}") from e
    if not text.strip():
        raise Unprocessable("the trust policy is empty")
    try:
        return parse_trust_policy(document, source=_POLICY_SOURCE, base_dir=None)
    except ScannerError as e:  # the loader names the field and the reason
        raise Unprocessable(f"invalid trust policy: {e}") from e


def policy_dict(row: TrustPolicyVersion, *, document: bool = True) -> dict[str, Any]:
    """A stored policy version, JSON-ready."""
    out: dict[str, Any] = {
        "version": row.version,
        "content_sha256": row.content_sha256,
        "signers": list(row.signers),
        "created_at": row.created_at.isoformat(),
        "created_by": row.created_by,
    }
    if document:
        out["document"] = row.document
    return out


def current_policy(session: Session) -> dict[str, Any]:
    """The current policy version (404 when none was stored)."""
    row = repo.latest_policy(session)
    if row is None:
        raise NotFound("no trust policy is stored; PUT /api/v1/trust-policy to set one")
    return policy_dict(row)


def policy_history(session: Session, limit: int, offset: int) -> dict[str, Any]:
    """Every policy version, newest first, with its document."""
    rows, total = repo.policy_history(session, limit, offset)
    return {
        "items": [policy_dict(r) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


def _stored_policy(session: Session) -> tuple[TrustPolicyVersion, TrustPolicy]:
    row = repo.latest_policy(session)
    if row is None:
        raise Conflict(
            "no trust policy is stored, so no catalog can be trusted: "
            "PUT /api/v1/trust-policy first"
        )
    return row, _checked_policy(row)


def _checked_policy(row: TrustPolicyVersion) -> TrustPolicy:
    """A stored trust policy version, refused when its text no longer hashes to its digest."""
    document = row.document.encode()
    stored_documents.check(
        "trust_policy", f"trust_policy@{row.version}", document, row.content_sha256
    )
    return parse_policy(document)


def checked_active(session: Session) -> ActiveCatalogs:
    """The trusted catalogs as their signed documents say, checked at use: the current trust
    policy's text against its digest, and each active catalog's stored bytes against their
    digest, its signature under that policy, and its stored entries against the entries the
    signed document yields. A catalog that fails is left out (fewer files verified, never
    more), with an audit event; an altered trust policy leaves every catalog out."""
    refs = active_refs(session)
    if not refs:
        return load_active(session, [])
    try:
        row = repo.latest_policy(session)
        if row is None:  # active catalogs need a policy that trusted them
            raise StoredDocumentAltered("trust_policy", "trust_policy", "(a stored policy)", "none")
        policy = _checked_policy(row)
    except StoredDocumentAltered as e:
        stored_documents.record(session, e)
        return load_active(session, [])
    kept = []
    for catalog in repo.all_catalogs(session):
        if not catalog.active:
            continue
        try:
            _check_catalog(session, catalog, policy)
        except StoredDocumentAltered as e:
            stored_documents.record(session, e)
            continue
        kept.append(CatalogRef(catalog.id, catalog.name, catalog.signer or ""))
    return load_active(session, kept)


def _check_catalog(session: Session, catalog: ReferenceCatalog, policy: TrustPolicy) -> None:
    target = f"catalog:{catalog.name}#{catalog.id}"
    raw = gzip.decompress(catalog.gzip_data)
    stored_documents.check("catalog", target, raw, catalog.content_sha256)
    try:
        verified = load_catalog(raw, policy, catalog.name)
    except ScannerError as e:  # marked active, yet its signature is not trusted
        raise StoredDocumentAltered("catalog", target, "a trusted signature", str(e)[:200]) from e
    expected = [_row_tuple(catalog.id, e) for e in _entry_rows(verified)]
    stored = [tuple(r) for r in repo.entries_of(session, [catalog.id])]
    if stored != expected:
        raise StoredDocumentAltered(
            "catalog", f"{target} (its entries)", _digest_rows(expected), _digest_rows(stored)
        )


def _digest_rows(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()


def put_policy(
    session: Session, document: bytes, principal: Principal, now: datetime
) -> tuple[dict[str, Any], list[tuple[str, int]]]:
    """Store a new policy version, verify every stored catalog again under it, and re-evaluate
    stored verdicts when the set of trusted entries changed. Returns the answer and the
    compliance re-evaluations left for after the commit (`compliance.reevaluate_pending_all`)."""
    policy = parse_policy(document)
    repo.lock(session, exclusive=True)
    row = repo.add_policy(
        session,
        {
            "document": document.decode("utf-8"),
            "content_sha256": hashlib.sha256(document).hexdigest(),
            "signers": [s.describe() for s in policy.signers],
            "created_at": now,
            "created_by": principal.name,
            "token_id": principal.token_id,
        },
    )
    changed = False
    for catalog in repo.all_catalogs(session):
        changed |= _reverify(session, catalog, policy, row.version, now)
    reevaluation = None
    pending: list[tuple[str, int]] = []
    if changed:
        done = reevaluate_all(session, _active_now(session))
        if done.changed:  # the facts under the stored compliance changed
            pending = compliance.reevaluate_after_facts_change(session, now)
        reevaluation = {**done.as_dict(), "compliance_pending": bool(pending)}
    answer = {
        **policy_dict(row),
        "catalogs": [catalog_dict(c) for c in repo.all_catalogs(session)],
        "reevaluation": reevaluation,
    }
    return answer, pending


def _active_now(session: Session) -> ActiveCatalogs:
    return checked_active(session)


def _reverify(
    session: Session,
    catalog: ReferenceCatalog,
    policy: TrustPolicy,
    version: int,
    now: datetime,
) -> bool:
    """Verify a stored catalog under `policy`; returns whether its trusted entries changed."""
    raw = gzip.decompress(catalog.gzip_data)
    was_active = catalog.active
    values: dict[str, Any] = {"policy_version": version, "verified_at": now}
    if not stored_documents.is_intact(raw, catalog.content_sha256):
        _update(catalog, {**values, "active": False, "rejected_reason": "altered in the database"})
        stored_documents.record(
            session,
            StoredDocumentAltered(
                "catalog",
                f"catalog:{catalog.name}#{catalog.id}",
                catalog.content_sha256,
                hashlib.sha256(raw).hexdigest(),
            ),
        )
        return was_active
    try:
        verified = load_catalog(raw, policy, catalog.name)
    except ScannerError as e:
        _update(catalog, {**values, "active": False, "rejected_reason": str(e)})
        return was_active
    entries = _entry_rows(verified)
    _check_storable(
        ReferenceCatalog,
        {"name": verified.name, "signer": verified.signer},
        f"catalog {verified.name[:120]!r}",
    )
    stored = [tuple(r) for r in repo.entries_of(session, [catalog.id])]
    same_entries = stored == [_row_tuple(catalog.id, e) for e in entries]
    if not same_entries:
        repo.replace_entries(session, catalog.id, entries)
    changed = not was_active or catalog.signer != verified.signer or not same_entries
    _update(
        catalog,
        {
            **values,
            "active": True,
            "rejected_reason": None,
            "signer": verified.signer,
            "entry_count": len(verified.entries),
            "out_of_scope": verified.out_of_scope,
        },
    )
    return changed


def _update(catalog: ReferenceCatalog, values: dict[str, Any]) -> None:
    for key, value in values.items():
        setattr(catalog, key, value)


def _row_tuple(catalog_id: int, entry: dict[str, Any]) -> tuple[Any, ...]:
    return (
        catalog_id,
        entry["name"],
        entry["sha256"],
        entry["family"],
        entry["component"],
        entry["version"],
        entry["cuda_major"],
        entry["arch"],
        entry["package"],
    )


# ---------------------------------------------------------------------------- catalogs


def catalog_dict(row: ReferenceCatalog) -> dict[str, Any]:
    """A stored catalog's record, JSON-ready."""
    return {
        "id": row.id,
        "name": row.name,
        "format": row.format,
        "signer": row.signer,
        "entries": row.entry_count,
        "out_of_scope": row.out_of_scope,
        "active": row.active,
        "rejected_reason": row.rejected_reason,
        "policy_version": row.policy_version,
        "content_sha256": row.content_sha256,
        "imported_at": row.imported_at.isoformat(),
        "verified_at": row.verified_at.isoformat(),
        "imported_by": row.imported_by,
    }


def list_catalogs(session: Session, limit: int, offset: int) -> dict[str, Any]:
    """A page of catalogs in import order (the order verdicts consult them in)."""
    rows, total = repo.list_catalogs(session, limit, offset)
    return {
        "items": [catalog_dict(r) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


@dataclass(frozen=True, slots=True)
class ImportResult:
    """A catalog import: the stored record, whether it is new, and the re-evaluation."""

    catalog: dict[str, Any]
    created: bool
    reevaluation: Reevaluation | None
    #: compliance re-evaluations to run after the commit (`compliance.reevaluate_pending_all`)
    compliance_pending: list[tuple[str, int]] = field(default_factory=list)

    def reevaluation_dict(self) -> dict[str, Any] | None:
        """The re-evaluation as the API answers it."""
        if self.reevaluation is None:
            return None
        return {**self.reevaluation.as_dict(), "compliance_pending": bool(self.compliance_pending)}


def _entry_rows(verified: VerifiedCatalog) -> list[dict[str, Any]]:
    rows = []
    for position, entry in enumerate(verified.entries):
        rows.append(_entry_row(position, entry))
    return rows


def _entry_row(position: int, entry: CatalogEntry) -> dict[str, Any]:
    basename = entry.name.rsplit("/", 1)[-1]
    where = f"catalog entry {position} ({entry.name[:120]!r})"
    if not basename:
        raise Unprocessable(f"{where}: the file name must not be empty")
    row = {
        "position": position,
        "name": entry.name,
        "basename": basename,
        "sha256": entry.sha256,
        "family": entry.family,
        "component": entry.component,
        "version": entry.version,
        "cuda_major": entry.cuda_major,
        "arch": entry.arch,
        "package": entry.package,
    }
    # A signed catalog is trusted for what it vouches for, not for fitting the columns: the
    # same table-derived limits as report ingest, the same on SQLite and PostgreSQL.
    _check_storable(CatalogEntryRow, row, where)
    return row


def _check_storable(
    model: type[CatalogEntryRow | ReferenceCatalog], row: dict[str, Any], where: str
) -> None:
    """Refuse (422) a value its column cannot hold: too long, out of range, or a string no
    database stores verbatim (NUL, lone surrogates)."""
    limits = limits_of(model)
    for column, value in row.items():
        if isinstance(value, str) and not _encodable(value):
            raise Unprocessable(f"{where}: {column} holds a NUL or an unpaired surrogate")
        if column in limits and (found := misfit(limits[column], value)) is not None:
            raise Unprocessable(f"{where}: {column} {found[1]}")


def _encodable(value: str) -> bool:
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _format(raw: bytes) -> str:
    try:
        doc = json.loads(raw)
    except ValueError:
        return "unknown"
    return "dsse" if isinstance(doc, dict) and "payloadType" in doc else "sigstore-bundle"


def import_catalog(
    session: Session, raw: bytes, name: str | None, principal: Principal, now: datetime
) -> ImportResult:
    """Verify a signed catalog against the current policy and store it (422 with the reason
    when it is not trusted: nothing is stored), then fold it into stored verdicts."""
    repo.lock(session, exclusive=True)
    content_sha256 = hashlib.sha256(raw).hexdigest()
    existing = repo.catalog_by_sha256(session, content_sha256)
    if existing is not None:
        return ImportResult(catalog_dict(existing), False, None)
    policy_row, policy = _stored_policy(session)
    try:
        verified = load_catalog(raw, policy, name or "catalog")
    except ScannerError as e:
        raise Unprocessable(f"catalog rejected: {e}") from e
    if not verified.entries:
        what = (
            f"its signer {verified.signer} may vouch for none of its {verified.out_of_scope} "
            "entries (families outside the signer's scope in the trust policy)"
            if verified.out_of_scope
            else "it lists no files"
        )
        raise Unprocessable(f"catalog rejected: {verified.name}: {what}")
    entries = _entry_rows(verified)
    _check_storable(
        ReferenceCatalog,
        {"name": verified.name, "signer": verified.signer},
        f"catalog {verified.name[:120]!r}",
    )
    # Stored verdicts reflect the active catalogs only once one exists (before, they are the
    # reports' own, or "no trusted catalog"): then a full pass, else an incremental one.
    first = not active_refs(session)
    row = repo.add_catalog(
        session,
        {
            "name": verified.name,
            "content_sha256": content_sha256,
            "format": _format(raw),
            "signer": verified.signer,
            "entry_count": len(verified.entries),
            "out_of_scope": verified.out_of_scope,
            "active": True,
            "rejected_reason": None,
            "policy_version": policy_row.version,
            "imported_at": now,
            "verified_at": now,
            "imported_by": principal.name,
            "token_id": principal.token_id,
            "gzip_data": gzip.compress(raw, compresslevel=6),
        },
        entries,
    )
    if first:
        reevaluation = reevaluate_all(session, _active_now(session))
    else:
        added = ActiveCatalogs(
            [CatalogRef(row.id, verified.name, verified.signer)], [verified.entries]
        )
        reevaluation = reevaluate_added(session, added)
    pending: list[tuple[str, int]] = []
    if reevaluation.changed:  # the facts under the stored compliance changed
        pending = compliance.reevaluate_after_facts_change(session, now)
    return ImportResult(catalog_dict(row), True, reevaluation, pending)
