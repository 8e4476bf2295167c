"""VEX of the fleet: an asset's stored advisory findings written as OpenVEX v0.2.0 or CycloneDX
1.6 VEX by the scanner's builder (scanner/advisories/vex_out.py, the one ``gpuprov scan
--vex-out`` uses), and VEX documents read for a dry run of what an import would record.

A document is a function of stored facts: the asset, its findings, the feed they were matched
against and the configured author; its time is the newest of the asset's latest scan and that
feed's import, so the same facts give the same document (and the same id).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

from app.errors import AppError, NotFound
from app.storage.repositories import vulnerabilities as repo
from app.storage.tables import AdvisoryFinding, Asset
from scanner.advisories.match import Finding
from scanner.advisories.vex_in import VexRefused, read_vex
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


def asset_vex(session: Session, asset_id: int, fmt: VexFormat, *, author: str, tooling: str) -> str:
    """The VEX document of one asset's findings; 404 for an unknown asset, or for an OpenVEX
    document with nothing to state (OpenVEX needs a statement)."""
    asset = session.get(Asset, asset_id)
    if asset is None:
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


def dry_run(data: bytes, *, max_bytes: int) -> dict[str, Any]:
    """What importing a VEX document would record: its statements, read and checked; a
    malformed one is a 422 naming why. Records nothing."""
    try:
        doc = read_vex(data, max_bytes=max_bytes)
    except VexRefused as e:
        status = 413 if e.reason == "too_large" else 422
        raise AppError(str(e), status, details=[{"reason": e.reason}]) from None
    return {
        "dry_run": True,
        "recorded": False,
        "format": doc.format,
        "id": doc.id,
        "author": doc.author,
        "timestamp": doc.timestamp,
        "statements": [_statement(s) for s in doc.statements],
    }


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
