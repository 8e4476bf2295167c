"""Advisory import and queries: a document read by the scanner's pure readers is stored as the
current revision of (publisher namespace, tracking id), following the revision rules.

Rules (docs/advisories.md): the same bytes again change nothing; a newer revision (by
``tracking.version``, integer or semver, then the release date, then the content digest)
replaces the older; a draft or interim never replaces a final; a product status a newer
revision no longer states is closed with that reason, not deleted. A document is identified
with its publisher namespace, so only its own publisher's documents can replace it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

from app.errors import AppError, NotFound, PayloadTooLarge
from app.storage.repositories import advisories as repo
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import AdvisoryDocument, AdvisoryVulnerability
from scanner.advisories.document import Advisory, DocumentRefused, ProductStatus, Vulnerability
from scanner.advisories.feed import read_document

Outcome = Literal["imported", "replaced", "unchanged", "kept_final", "older"]
SEVERITIES = ("LOW", "MEDIUM", "HIGH", "CRITICAL")
#: the advisory list's orders (newest first, worst severity first, most affected assets first)
SORTS = repo.SORTS
#: the severities the overview counts affected assets of (a card each)
OVERVIEW_SEVERITIES = ("CRITICAL", "HIGH")
_SEMVER = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?")


class InvalidAdvisory(AppError):
    """A document that is not an acceptable advisory; the message names why."""

    status = 422


@dataclass
class ImportResult:
    """What importing one document did, and what of it a person must look at."""

    outcome: Outcome
    tracking_id: str
    version: str
    vulnerabilities: list[str]
    unparsed: list[dict[str, str]] = field(default_factory=list)
    note: str | None = None

    @property
    def changed(self) -> bool:
        return self.outcome in ("imported", "replaced")


def parse_document(data: bytes, max_bytes: int) -> Advisory:
    """The ``Advisory`` of a document's bytes; too large is 413, anything else bad is 422."""
    try:
        return read_document(data, max_bytes=max_bytes)
    except DocumentRefused as e:
        if e.reason == "too_large":
            raise PayloadTooLarge(str(e)) from e
        # the pointer "" is the whole document; the reason code is the message's first word
        raise InvalidAdvisory(str(e), details=[{"pointer": "", "message": e.reason}]) from e


def revision_key(version: str) -> tuple[Any, ...]:
    """The order of ``tracking.version`` values: integers and semver numerically (a
    pre-release before its release), anything else (OSV's timestamps) as text after them."""
    if version.isdigit():
        return (0, (int(version), 0, 0), 1, "")
    m = _SEMVER.fullmatch(version)
    if m:
        nums = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        return (0, nums, 0 if m.group(4) else 1, m.group(4) or "")
    return (1, (), 1, version)


def _when(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _order(version: str, updated: datetime | None, digest: str) -> tuple[Any, ...]:
    return (revision_key(version), updated or datetime.min.replace(tzinfo=UTC), digest)


def unparsed_versions(adv: Advisory) -> list[dict[str, str]]:
    """Each (CVE, product, text) whose version text did not parse, once."""
    seen: dict[tuple[str, str, str], None] = {}
    for vuln in adv.vulnerabilities:
        for s in vuln.statuses:
            if s.parsed is not None and not s.parsed.get("parsed"):
                seen[(vuln.id, s.product, s.version_text or s.product_id)] = None
    return [{"cve": c, "product": p, "text": t} for c, p, t in seen]


def _worst(vuln: Vulnerability) -> tuple[str | None, float | None, str | None]:
    """(severity, cvss, vector) of the highest score among the vulnerability's products."""
    scores = [s.score for s in vuln.statuses if s.score is not None] + list(vuln.scores)
    if not scores:
        return None, None, None
    top = max(
        scores,
        key=lambda s: (
            s.base_score if s.base_score is not None else -1.0,
            SEVERITIES.index(s.severity.upper()) if s.severity in SEVERITIES else -1,
        ),
    )
    severity = top.severity.upper() if top.severity else None
    return severity, top.base_score, top.vector


def _status_row(vulnerability_id: int, s: ProductStatus) -> dict[str, Any]:
    review = s.needs_review
    return {
        "vulnerability_id": vulnerability_id,
        "product_id": s.product_id[:512],
        "product": s.product[:256],
        "status": s.status,
        "platform": s.platform[:256] if s.platform else None,
        "version_text": s.version_text,
        "parsed": s.parsed,
        "needs_review": review,
        "vers": list(s.vers),
        "cpe": s.cpe[:512] if s.cpe else None,
        "purls": list(s.purls),
        "hashes": [list(h) for h in s.hashes],
        "justification": s.justification[:64] if s.justification else None,
        "remediations": list(s.remediations),
        "severity": s.score.severity.upper() if s.score and s.score.severity else None,
        "cvss": s.score.base_score if s.score else None,
        "closed_at": None,
        "closed_reason": None,
    }


def import_advisory(
    session: Session,
    adv: Advisory,
    data: bytes,
    *,
    source: str,
    digest_mismatch: bool,
    now: datetime,
) -> ImportResult:
    """Store ``adv`` (read from ``data``) as its document's current revision, following the
    revision rules; never commits (the caller's transaction does)."""
    repo.lock(session)
    digest = hashlib.sha256(data).hexdigest()
    cves = list(dict.fromkeys(v.id for v in adv.vulnerabilities))
    result = ImportResult("imported", adv.tracking_id, adv.version, cves, unparsed_versions(adv))
    doc = repo.document(session, adv.publisher_namespace, adv.tracking_id)
    updated = _when(adv.updated)
    if doc is not None:
        # read from its publisher now, whatever the revision rules make of it
        doc.checked_at = now
        if doc.content_sha256 == digest:
            # the same bytes: only what the digest file said may have changed
            doc.digest_mismatch = digest_mismatch
            doc.source = source[:2048]
            result.outcome = "unchanged"
            return result
        if adv.status != "final" and doc.status == "final":
            result.outcome = "kept_final"
            result.note = f"a {adv.status} revision never replaces the final {doc.version}"
            return result
        mine = _order(adv.version, updated, digest)
        theirs = _order(doc.version, doc.updated_at, doc.content_sha256)
        if mine < theirs and not (adv.status == "final" and doc.status != "final"):
            result.outcome = "older"
            result.note = f"revision {adv.version} is older than the stored {doc.version}"
            return result
        result.outcome = "replaced"
        previous: str | None = doc.version
    else:
        doc = AdvisoryDocument(
            publisher_namespace=adv.publisher_namespace[:512],
            tracking_id=adv.tracking_id[:256],
        )
        session.add(doc)
        previous = None
    doc.format = adv.format
    doc.publisher_name = adv.publisher_name[:256]
    doc.version = adv.version[:64]
    doc.status = adv.status
    doc.title = adv.title
    doc.published_at = _when(adv.published)
    doc.updated_at = updated
    doc.content_sha256 = digest
    doc.size_bytes = len(data)
    doc.source = source[:2048]
    doc.digest_mismatch = digest_mismatch
    doc.imported_at = now
    doc.checked_at = now
    doc.previous_version = previous
    session.flush()
    _store_vulnerabilities(session, doc, adv, previous, now)
    return result


def _store_vulnerabilities(
    session: Session, doc: AdvisoryDocument, adv: Advisory, previous: str | None, now: datetime
) -> None:
    stored = {v.cve: v for v in repo.vulnerabilities(session, doc.id)}
    reason = f"dropped by revision {adv.version} of {adv.tracking_id} (was {previous})"
    incoming = {v.id: v for v in adv.vulnerabilities}
    rows: dict[str, AdvisoryVulnerability] = {}
    for cve, vuln in incoming.items():
        row = stored.get(cve) or AdvisoryVulnerability(document_id=doc.id, cve=cve[:64])
        severity, cvss, vector = _worst(vuln)
        row.aliases = list(vuln.aliases)
        row.title = vuln.title or adv.title
        row.description = vuln.description
        row.severity, row.cvss = severity, cvss
        row.cvss_vector = vector[:256] if vector else None
        row.cwe = vuln.cwe[:32] if vuln.cwe else None
        row.published_at = _when(vuln.published) or _when(adv.published)
        row.withdrawn_reason = None
        session.add(row)
        rows[cve] = row
    for cve, row in stored.items():
        if cve not in incoming:
            row.withdrawn_reason = reason
    session.flush()
    new_keys = {(cve, s.product_id, s.status) for cve, v in incoming.items() for s in v.statuses}
    by_id = {row.id: cve for cve, row in stored.items()}
    restated = []
    for old in repo.open_statuses(session, list(by_id)):
        if (by_id[old.vulnerability_id], old.product_id, old.status) in new_keys:
            restated.append(old.id)
        else:
            old.closed_at, old.closed_reason = now, reason
    repo.delete_statuses(session, restated)
    repo.add_statuses(
        session,
        [_status_row(rows[cve].id, s) for cve, v in incoming.items() for s in v.statuses],
    )


# -- queries ----------------------------------------------------------------------------------


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


def _summary(
    cve: str,
    pairs: list[tuple[AdvisoryVulnerability, AdvisoryDocument]],
    affected: int | None = None,
) -> dict[str, Any]:
    live = [(v, d) for v, d in pairs if v.withdrawn_reason is None] or pairs
    top = max(live, key=lambda p: p[0].cvss if p[0].cvss is not None else -1.0)[0]
    published = [v.published_at for v, _ in live if v.published_at is not None]
    newest = max(live, key=lambda p: (p[0].published_at is not None, p[0].published_at, p[1].id))
    return {
        "cve": cve,
        "bulletin": newest[1].tracking_id,
        "bulletins": sorted({d.tracking_id for _, d in live}),
        "title": next((v.title for v, _ in live if v.title), None),
        "severity": top.severity,
        "cvss": top.cvss,
        "published": _iso(min(published)) if published else None,
        "digest_mismatch": any(d.digest_mismatch for _, d in live),
        "affected_assets": affected,
    }


def _severity(severity: str | None) -> str | None:
    if severity is not None and severity.upper() not in SEVERITIES:
        raise AppError(f"severity must be one of {', '.join(s.lower() for s in SEVERITIES)}", 422)
    return severity


def list_advisories(
    session: Session,
    *,
    cve: str | None,
    severity: str | None,
    product: str | None,
    affected: bool | None = None,
    sort: str = "newest",
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """A page of advisories (one per CVE, every bulletin naming it), newest first unless
    ``sort`` says ``severity`` (worst first) or ``affected`` (most affected assets first);
    ``affected``: only those some asset is affected by (true) or none is (false); the assets
    and their counts are those of the caller's ``scope``."""
    if sort not in SORTS:
        raise AppError(f"sort must be one of {', '.join(SORTS)}", 422)
    cves, total = repo.cve_page(
        session,
        cve=cve,
        severity=_severity(severity),
        product=product,
        affected=affected,
        sort=sort,
        limit=limit,
        offset=offset,
        scope=scope,
    )
    grouped: dict[str, list[tuple[AdvisoryVulnerability, AdvisoryDocument]]] = {c: [] for c in cves}
    for vuln, doc in repo.by_cves(session, cves):
        grouped[vuln.cve].append((vuln, doc))
    counts = repo.affected_counts(session, cves, scope)
    items = [_summary(c, grouped[c], counts.get(c, 0)) for c in cves if grouped[c]]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


def severity_counts(
    session: Session,
    *,
    cve: str | None,
    product: str | None,
    affected: bool | None,
    scope: AssetScope | None = None,
) -> dict[str, int]:
    """Per severity (low … critical), how many CVEs the list shows with that severity filter
    and these others."""
    counts = repo.severity_counts(session, cve=cve, product=product, affected=affected, scope=scope)
    return {s.lower(): counts.get(s, 0) for s in reversed(SEVERITIES)}


def assets_affected_by_severity(
    session: Session, scope: AssetScope | None = None
) -> dict[str, int]:
    """Per severity of ``OVERVIEW_SEVERITIES``, the assets (of the scope) with an ``affected``
    finding of an advisory of that severity (the overview's cards)."""
    return {s.lower(): repo.assets_affected_at(session, [s], scope) for s in OVERVIEW_SEVERITIES}


def get_advisory(session: Session, cve: str, scope: AssetScope | None = None) -> dict[str, Any]:
    """One CVE with each bulletin's statement of it and every product status (closed ones
    with the reason); the affected asset count of the caller's ``scope``."""
    pairs = list(repo.by_cves(session, [cve]))
    if not pairs:
        raise NotFound(f"no advisory names {cve}")
    statuses: dict[int, list[dict[str, Any]]] = {v.id: [] for v, _ in pairs}
    for s in repo.statuses_of(session, list(statuses)):
        statuses[s.vulnerability_id].append(
            {
                "product": s.product,
                "product_id": s.product_id,
                "status": s.status,
                "platform": s.platform,
                "version_text": s.version_text,
                "ranges": [r.get("vers") for r in (s.parsed or {}).get("ranges", [])],
                "branch": (s.parsed or {}).get("branch"),
                "vers": s.vers,
                "needs_review": s.needs_review,
                "review": (s.parsed or {}).get("review") or (s.parsed or {}).get("reason")
                if s.needs_review
                else None,
                "justification": s.justification,
                "severity": s.severity,
                "cvss": s.cvss,
                "cpe": s.cpe,
                "purls": s.purls,
                "closed_reason": s.closed_reason,
            }
        )
    return {
        **_summary(cve, pairs, repo.affected_counts(session, [cve], scope).get(cve, 0)),
        "documents": [
            {
                "bulletin": d.tracking_id,
                "publisher": d.publisher_namespace,
                "format": d.format,
                "version": d.version,
                "status": d.status,
                "title": d.title,
                "source": d.source,
                "content_sha256": d.content_sha256,
                "digest_mismatch": d.digest_mismatch,
                "imported_at": _iso(d.imported_at),
                "description": v.description,
                "severity": v.severity,
                "cvss": v.cvss,
                "cvss_vector": v.cvss_vector,
                "cwe": v.cwe,
                "withdrawn_reason": v.withdrawn_reason,
                "products": statuses[v.id],
            }
            for v, d in pairs
        ],
    }
