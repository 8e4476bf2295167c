"""VEX of the fleet: an asset's stored advisory findings written as OpenVEX v0.2.0 or CycloneDX
1.6 VEX by the scanner's builder (scanner/advisories/vex_out.py, the one ``gpuprov scan
--vex-out`` uses), and VEX documents read for a dry run of what an import would record.

A document is a function of stored facts: the asset, its findings, the feed they were matched
against and the configured author; its time is the newest of the asset's latest scan and that
feed's import, so the same facts give the same document (and the same id).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal
from urllib.parse import unquote

from packageurl import PackageURL
from sqlalchemy.orm import Session

from app.domain import analyses
from app.domain.audit import Actor
from app.errors import AppError, NotFound
from app.storage.repositories import analyses as analyses_repo
from app.storage.repositories import scopes
from app.storage.repositories import vulnerabilities as repo
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import AdvisoryFinding, Asset
from scanner.advisories.match import Finding
from scanner.advisories.vex_in import VexRefused, VexStatement, read_vex
from scanner.advisories.vex_out import (
    VexSubject,
    VulnInfo,
    build_cyclonedx,
    build_openvex,
    openvex_json,
)

VexFormat = Literal["openvex", "cyclonedx"]
MEDIA_TYPES: dict[str, str] = {
    # OpenVEX registers no media type of its own; its tools read and write JSON
    "openvex": "application/json",
    "cyclonedx": "application/vnd.cyclonedx+json; version=1.6",
}
#: most findings of one asset a document states (an asset holds a few hundred at most)
MAX_FINDINGS = 50_000


def _finding(row: AdvisoryFinding) -> Finding:
    return Finding(
        cve=row.cve,
        status=row.status,  # type: ignore[arg-type]  # stored from the matcher's Status
        product=row.product,
        component=row.component,
        installed=row.installed,
        justification=row.justification,
        affected_text=row.affected_text,
        fixed_in=row.fixed_in,
        review=row.review,
        inferred=row.inferred,
        conditions_unevaluated=tuple(row.conditions_unevaluated or ()),
        evidence=dict(row.evidence or {}),
    )


def subject(asset: Asset) -> VexSubject:
    """A stored asset as a VEX subject (an image by its ``pkg:oci`` purl and digest)."""
    from scanner.imageref import oci_purl

    details = asset.details or {}
    digest = details.get("digest")
    if asset.kind == "image" and isinstance(digest, str) and digest.startswith("sha256:"):
        purl = oci_purl(asset.name, digest, details.get("platform")).to_string()
        return VexSubject(kind="image", name=asset.name, purl=purl, sha256=digest[7:])
    machine = details.get("machine_id")
    return VexSubject(
        kind=asset.kind,
        name=asset.name,
        machine_id=machine if isinstance(machine, str) else None,
    )


def _info(session: Session, cves: list[str]) -> dict[str, VulnInfo]:
    """Per CVE: the title, bulletin, publisher and score of its highest-scored statement."""
    best: dict[str, tuple[float, VulnInfo]] = {}
    for vuln, doc in repo.vulnerability_facts(session, sorted(set(cves))):
        score = vuln.cvss if vuln.cvss is not None else -1.0
        if vuln.cve not in best or score > best[vuln.cve][0]:
            best[vuln.cve] = (
                score,
                VulnInfo(
                    title=vuln.title or doc.title,
                    bulletin=doc.tracking_id,
                    publisher=doc.publisher_name,
                    severity=vuln.severity,
                    cvss=vuln.cvss,
                ),
            )
    return {cve: info for cve, (_, info) in best.items()}


def asset_vex(
    session: Session,
    asset_id: int,
    fmt: VexFormat,
    *,
    author: str,
    tooling: str,
    scope: AssetScope | None = None,
) -> str:
    """The VEX document of one asset's findings; 404 for an unknown asset or one outside the
    caller's ``scope``, or for an OpenVEX document with nothing to state (OpenVEX needs a
    statement)."""
    asset = session.get(Asset, asset_id)
    if asset is None or not scopes.asset_visible(session, asset_id, scope):
        raise NotFound(f"no asset {asset_id}")
    rows, total = repo.findings_of(session, asset_id, None, MAX_FINDINGS, 0)
    if total > MAX_FINDINGS:
        raise AppError(f"asset {asset_id} has {total} findings, more than {MAX_FINDINGS}", 422)
    findings = [_finding(r) for r in rows]
    state = repo.match_state(session, asset_id)
    if state is None:
        raise NotFound(f"asset {asset_id} was never matched against the advisory feed")
    when = _newest(asset.latest_scanned_at, state.feed_imported_at, state.matched_at)
    info = _info(session, [f.cve for f in findings])
    subj = subject(asset)
    if fmt == "cyclonedx":
        return build_cyclonedx(subj, findings, info, author=author, timestamp=when)
    if not findings:
        raise NotFound(
            f"asset {asset_id} has no advisory finding (feed of {state.feed_documents} "
            "documents): an OpenVEX document needs at least one statement; "
            "format=cyclonedx answers an empty VEX"
        )
    doc = build_openvex(subj, findings, info, author=author, timestamp=when, tooling=tooling)
    return openvex_json(doc)


def _newest(*times: datetime | None) -> datetime:
    # matched_at is the fallback only: it changes with every full re-match of the same facts
    known = [t for t in times[:-1] if t is not None]
    return max(known) if known else times[-1]  # type: ignore[return-value]


#: the outcome of one statement of an imported document
RECORDED, WOULD_RECORD, UNMATCHED = "recorded", "would record", "unmatched"


def import_vex(
    session: Session,
    data: bytes,
    *,
    max_bytes: int,
    dry_run: bool,
    author: str,
    actor: Actor,
    now: datetime,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """Read an OpenVEX or CycloneDX VEX document and record each statement as an analysis of
    every stored asset it names (``dry_run``: only say what would be recorded). The author is
    the importing principal, never the document's own claim (which goes into the source): an
    author on GPUPROV_VEX_TRUSTED_AUTHORS is someone the service authenticated. A document
    refused, or one statement refused by the analyses' rules, records nothing (422)."""
    try:
        doc = read_vex(data, max_bytes=max_bytes)
    except VexRefused as e:
        status = 413 if e.reason == "too_large" else 422
        raise AppError(str(e), status, details=[{"reason": e.reason}]) from None
    named = doc.id or f"sha256:{hashlib.sha256(data).hexdigest()}"
    source = f"{doc.format} VEX {named}" + (f" by {doc.author}" if doc.author else "")
    # a team's analyst imports for the team's assets only: the others are not named
    targets = [
        [a for a in assets if scopes.asset_visible(session, a, scope)]
        if scope is not None
        else assets
        for assets in _targets(session, doc.statements)
    ]
    recorded = 0
    items: list[dict[str, Any]] = []
    for index, (statement, assets) in enumerate(zip(doc.statements, targets, strict=True)):
        outcome = UNMATCHED if not assets else WOULD_RECORD if dry_run else RECORDED
        for asset_id in assets:
            try:
                if dry_run:
                    analyses.check_analysis(
                        **_analysis(statement, asset_id, named),
                        author=author,
                        source=source[:512],
                        now=now,
                    )
                else:
                    analyses.record_analysis(
                        session,
                        **_analysis(statement, asset_id, named),
                        author=author,
                        source=source[:512],
                        actor=actor,
                        now=now,
                    )
                    recorded += 1
            except analyses.InvalidAnalysis as e:
                raise AppError(
                    f"statement {index} ({statement.cve}) cannot be recorded: {e}", 422
                ) from None
        items.append({**_statement(statement), "assets": assets, "outcome": outcome})
    return {
        "dry_run": dry_run,
        "recorded": recorded,
        "format": doc.format,
        "id": doc.id,
        "author": doc.author,
        "timestamp": doc.timestamp,
        "statements": items,
    }


def _analysis(statement: VexStatement, asset_id: int, document: str) -> dict[str, Any]:
    """The analysis one statement makes for one asset (its words, not the service's)."""
    said = [
        f"{label}: {text}"
        for label, text in (
            ("impact", statement.impact),
            ("action", statement.action),
            ("notes", statement.detail),
        )
        if text
    ]
    detail = "; ".join(said) or None
    if statement.state == "fixed" and detail is None:
        # the document itself is what says the fix is in: name it
        detail = f"fixed, as VEX document {document} states"
    return {
        "cve": statement.cve,
        "asset_id": asset_id,
        "state": statement.state,
        "justification": statement.justification,
        "detail": detail[: analyses.MAX_DETAIL] if detail else None,
    }


def _targets(session: Session, statements: Sequence[VexStatement]) -> list[list[int]]:
    """Per statement, the stored assets it names: the asset itself (an image by its manifest
    digest or ``pkg:oci`` purl, a host by ``urn:gpuprov:host:<machine id>`` as
    ``GET /assets/{id}/vex`` writes them), else the assets holding the product (component) by
    its SHA-256."""
    images: dict[int, str] = {}
    hosts: dict[int, str] = {}
    hashes: dict[int, list[str]] = {}
    for i, s in enumerate(statements):
        digest = _image_digest(s.product)
        host = _host_id(s.product)
        if digest is not None:
            images[i] = digest
        elif host is not None:
            hosts[i] = host
        else:
            hashes[i] = [p.sha256 for p in (s.component, s.product) if p and p.sha256]
    by_digest = analyses_repo.assets_by_identity(session, "image", list(images.values()))
    by_host = analyses_repo.assets_by_identity(
        session, "host", [h for v in hosts.values() for h in (v, f"name:{v}")]
    )
    holding = analyses_repo.assets_with_product(session, [h for v in hashes.values() for h in v])
    out: list[list[int]] = []
    for i in range(len(statements)):
        if i in images:
            found = [by_digest[images[i]]] if images[i] in by_digest else []
        elif i in hosts:
            ids = {by_host[k] for k in (hosts[i], f"name:{hosts[i]}") if k in by_host}
            found = sorted(ids)
        else:
            found = sorted({a for h in hashes[i] for a in holding.get(h, [])})
        out.append(found)
    return out


def _image_digest(product: Any) -> str | None:
    if product.sha256 and (product.purl or product.iri or "").startswith("pkg:oci/"):
        return f"sha256:{product.sha256}"
    purl = product.purl or (product.iri if (product.iri or "").startswith("pkg:oci/") else None)
    if purl is None:
        return None
    try:
        parsed = PackageURL.from_string(purl)
    except ValueError:
        return None
    version = parsed.version or ""
    return version if re.fullmatch(r"sha256:[0-9a-f]{64}", version) else None


def _host_id(product: Any) -> str | None:
    iri = product.iri or ""
    prefix = "urn:gpuprov:host:"
    return unquote(iri[len(prefix) :]) or None if iri.startswith(prefix) else None


def _statement(s: Any) -> dict[str, Any]:
    def ref(p: Any) -> dict[str, Any] | None:
        return None if p is None else {"iri": p.iri, "purl": p.purl, "sha256": p.sha256}

    return {
        "cve": s.cve,
        "product": ref(s.product),
        "component": ref(s.component),
        "state": s.state,
        "justification": s.justification,
        "detail": s.detail,
        "action": s.action,
        "impact": s.impact,
        "author": s.author,
        "timestamp": s.timestamp,
        "source_state": s.source_state,
        "source_justification": s.source_justification,
    }
