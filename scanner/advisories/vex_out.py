"""VEX documents of one asset's advisory findings: OpenVEX v0.2.0 and CycloneDX 1.6
(``vulnerabilities[].analysis``), built from the matcher's answers (match.Finding).

Pure: the service (GET /api/v1/assets/{id}/vex, from stored findings) and the offline CLI
(``gpuprov scan --vex-out``, from a scan matched against local advisories) call the same
builders. A document is a function of its facts: the same findings, subject, author and time
give the same bytes, and its id is derived from its own digest (docs/vex.md).

Each statement's product is the asset (an image by its ``pkg:oci`` purl and manifest digest, a
host by ``urn:gpuprov:host:<machine-id>``); the NVIDIA product found on it is the subcomponent
(its purl, CPE and, for a single binary, its SHA-256).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from scanner.advisories.match import Finding
from scanner.advisories.vex_terms import (
    JUSTIFICATION_PROPERTY,
    JUSTIFICATION_TO_CDX,
    OPENVEX_CONTEXT,
    OPENVEX_JUSTIFICATIONS,
    STATE_TO_CDX,
)

#: the namespace of the name-based UUIDs that identify documents (uuid5 of the digest)
_ID_NAMESPACE = uuid.UUID("5b8f6a2e-4c1d-5e0a-9f3b-7d2c1e6a9b40")
_NIL = "urn:uuid:00000000-0000-0000-0000-000000000000"
#: most paths of a product named in a statement's notes
_MAX_PATHS = 5


@dataclass(frozen=True)
class VexSubject:
    """The asset a document speaks of."""

    kind: str  # "image" or "host"
    name: str
    #: an image's ``pkg:oci`` purl (with its manifest digest)
    purl: str | None = None
    #: an image's manifest digest, hex (the ``sha-256`` of the product)
    sha256: str | None = None
    machine_id: str | None = None

    @property
    def iri(self) -> str:
        """The asset's IRI: its purl, else ``urn:gpuprov:host:<machine id or hostname>``."""
        if self.purl:
            return self.purl
        return f"urn:gpuprov:{self.kind}:{quote(self.machine_id or self.name, safe='')}"


@dataclass(frozen=True)
class VulnInfo:
    """What the feed says of one CVE (the newest bulletin naming it)."""

    title: str | None = None
    bulletin: str | None = None
    publisher: str | None = None
    severity: str | None = None
    cvss: float | None = None


@dataclass(frozen=True)
class _Part:
    """A product found on the asset, as a VEX subcomponent."""

    purl: str
    cpe: str | None
    sha256: str | None


def iso(when: datetime) -> str:
    """RFC 3339 UTC to the second (what both documents write)."""
    return when.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def digest_id(digest_hex: str) -> str:
    """The ``urn:uuid:`` id of a document whose content (without its id) has this SHA-256."""
    return f"urn:uuid:{uuid.uuid5(_ID_NAMESPACE, digest_hex)}"


def _part(f: Finding) -> _Part | None:
    """The product a finding was judged on, or None (``component_not_present``: nothing of the
    vulnerable component is on the asset)."""
    from scanner.detect.products import cpes, product_row

    ev = f.evidence or {}
    key = ev.get("product")
    package = ev.get("package")
    if (not isinstance(key, str) or not key) and isinstance(package, str) and "/" in f.product:
        # an OSV finding (product "PyPI/<name>"): the installed package is the subcomponent
        return _Part(_canonical(package), None, None)
    if not isinstance(key, str) or not key:
        return None
    version = ev.get("version") if isinstance(ev.get("version"), str) else None
    try:
        row = product_row(key)
        # a toolkit tool's CPE is its toolkit release's (no bulletin names cuobjdump by CPE)
        release = ev.get("compared_as") if row.toolkit_part else version
        named = cpes(row, release) if isinstance(release, str) else ()
        prefix, cpe = row.purl, (named or (None,))[0]
    except KeyError:  # a key a newer scanner wrote: still named, by the generic form
        prefix, cpe = f"pkg:generic/nvidia/{quote(key, safe='')}", None
    purl = _canonical(f"{prefix}@{quote(version, safe='+')}" if version else prefix)
    sha = ev.get("sha256")
    return _Part(purl, cpe, sha if isinstance(sha, str) and len(sha) == 64 else None)


def _canonical(purl: str) -> str:
    """The purl as packageurl writes it (the CycloneDX writer's form), so both documents name a
    product with the same string."""
    from packageurl import PackageURL

    try:
        return str(PackageURL.from_string(purl).to_string())
    except ValueError:
        return purl


def _notes(f: Finding, info: VulnInfo) -> str:
    """How the status was determined (OpenVEX ``status_notes``, CycloneDX ``analysis.detail``)."""
    what = f.product + (f" ({f.component})" if f.component else "")
    bulletin = f" of bulletin {info.bulletin}" if info.bulletin else ""
    parts = [
        f"gpuprov matched {what} {f.installed or '(version unknown)'} against the feed{bulletin}"
    ]
    if f.affected_text:
        parts.append(f"affected: {f.affected_text}")
    if f.fixed_in:
        parts.append(f"fixed in: {f.fixed_in}")
    if f.justification and f.status == "not_affected":
        parts.append(f"justification: {f.justification}")
    paths = [str(p) for p in (f.evidence or {}).get("paths") or []]
    if paths:
        more = f" (+{len(paths) - _MAX_PATHS} more)" if len(paths) > _MAX_PATHS else ""
        parts.append("found at " + ", ".join(paths[:_MAX_PATHS]) + more)
    if f.inferred:
        parts.append("inferred by a rule (no statement of the bulletin names this version)")
    decided = [
        c
        for key in ("conditions", "fix_disabled_by")
        for c in (f.evidence or {}).get(key) or ()
        if isinstance(c, dict) and c.get("asset") is not None
    ]
    if decided:
        parts.append(
            "decided by the asset's facts: "
            + ", ".join(f"{c.get('name')} = {c.get('asset')}" for c in decided)
        )
    if f.conditions_unevaluated:
        parts.append("conditions not evaluated: " + ", ".join(f.conditions_unevaluated))
    if f.review:
        parts.append(f"needs review: {f.review}")
    return "; ".join(parts)


def _action(f: Finding) -> str:
    """What to do about an ``affected`` finding (OpenVEX requires an action statement)."""
    what = f.component or f.product
    if f.fixed_in:
        text = f"Update {what} to a fixed version ({f.fixed_in}) or remove it."
    else:
        text = f"No fixed version is listed for {what} {f.installed or ''}".rstrip() + (
            "; remove it or apply the bulletin's mitigations."
        )
    if f.review:
        text += " A person must review this finding before relying on it."
    return text


def _sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    def key(f: Finding) -> tuple[str, ...]:
        part = _part(f)
        return (f.cve, f.status, part.purl if part else "", f.product, f.component or "")

    return sorted(findings, key=key)


# -- OpenVEX ----------------------------------------------------------------------------------


def build_openvex(
    subject: VexSubject,
    findings: Sequence[Finding],
    info: Mapping[str, VulnInfo],
    *,
    author: str,
    timestamp: datetime,
    tooling: str,
) -> dict[str, Any]:
    """The OpenVEX v0.2.0 document of these findings (one statement per finding, duplicates
    merged). Raises ValueError when there is nothing to state (OpenVEX needs a statement)."""
    statements: list[dict[str, Any]] = []
    seen: set[str] = set()
    for f in _sorted_findings(findings):
        st = _statement(subject, f, info.get(f.cve) or VulnInfo())
        text = json.dumps(st, sort_keys=True)
        if text not in seen:
            seen.add(text)
            statements.append(st)
    if not statements:
        raise ValueError("no advisory finding to state: an OpenVEX document needs a statement")
    doc: dict[str, Any] = {
        "@context": OPENVEX_CONTEXT,
        "@id": _NIL,
        "author": author,
        "timestamp": iso(timestamp),
        "version": 1,
        "tooling": tooling,
        "statements": statements,
    }
    doc["@id"] = digest_id(hashlib.sha256(canonical(doc).encode()).hexdigest())
    return doc


def _statement(subject: VexSubject, f: Finding, info: VulnInfo) -> dict[str, Any]:
    product: dict[str, Any] = {"@id": subject.iri}
    if subject.purl:
        product["identifiers"] = {"purl": subject.purl}
    if subject.sha256:
        product["hashes"] = {"sha-256": subject.sha256}
    part = _part(f)
    if part is not None:
        sub: dict[str, Any] = {"@id": part.purl, "identifiers": {"purl": part.purl}}
        if part.cpe:
            sub["identifiers"]["cpe23"] = part.cpe
        if part.sha256:
            sub["hashes"] = {"sha-256": part.sha256}
        product["subcomponents"] = [sub]
    vuln: dict[str, Any] = {"name": f.cve}
    if info.title:
        vuln["description"] = info.title
    st: dict[str, Any] = {
        "vulnerability": vuln,
        "products": [product],
        "status": f.status,
        "status_notes": _notes(f, info),
    }
    if f.status == "not_affected":
        if f.justification in OPENVEX_JUSTIFICATIONS:
            st["justification"] = f.justification
        else:  # a justification outside CISA's five is said in words, never dropped
            st["impact_statement"] = f"not affected: {f.justification or 'no reason recorded'}"
    elif f.status == "affected":
        st["action_statement"] = _action(f)
    return st


def canonical(doc: Any) -> str:
    """The JSON text whose digest identifies a document: sorted keys, no spaces."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def openvex_json(doc: Mapping[str, Any]) -> str:
    """An OpenVEX document as written (indented, in the spec's key order)."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# -- CycloneDX --------------------------------------------------------------------------------


def build_cyclonedx(
    subject: VexSubject,
    findings: Sequence[Finding],
    info: Mapping[str, VulnInfo],
    *,
    author: str,
    timestamp: datetime,
) -> str:
    """The CycloneDX 1.6 VEX (a BOM with ``vulnerabilities[].analysis``) of these findings, as
    JSON; its serial number is derived from its content."""
    from decimal import Decimal

    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.contact import OrganizationalContact
    from cyclonedx.model.impact_analysis import (
        ImpactAnalysisJustification,
        ImpactAnalysisResponse,
        ImpactAnalysisState,
    )
    from cyclonedx.model.vulnerability import (
        BomTarget,
        Vulnerability,
        VulnerabilityAnalysis,
        VulnerabilityRating,
        VulnerabilitySeverity,
        VulnerabilitySource,
    )
    from cyclonedx.output import make_outputter
    from cyclonedx.schema import OutputFormat, SchemaVersion
    from packageurl import PackageURL

    asset = Component(
        type=ComponentType.CONTAINER if subject.kind == "image" else ComponentType.OPERATING_SYSTEM,
        name=subject.name,
        bom_ref=subject.iri,
        purl=PackageURL.from_string(subject.purl) if subject.purl else None,
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=subject.sha256)]
        if subject.sha256
        else None,
    )
    parts: dict[str, Component] = {}
    vulns = []
    refs: set[str] = set()
    for f in _sorted_findings(findings):
        vi = info.get(f.cve) or VulnInfo()
        part = _part(f)
        ref = subject.iri
        if part is not None:
            ref = part.purl
            if part.purl not in parts and part.purl != subject.iri:
                try:
                    purl: PackageURL | None = PackageURL.from_string(part.purl)
                except ValueError:  # named by its reference alone rather than not at all
                    purl = None
                parts[part.purl] = Component(
                    type=ComponentType.APPLICATION,
                    name=purl.name if purl else part.purl,
                    version=purl.version if purl else None,
                    bom_ref=part.purl,
                    purl=purl,
                    cpe=part.cpe,
                    hashes=[HashType(alg=HashAlgorithm.SHA_256, content=part.sha256)]
                    if part.sha256
                    else None,
                )
        justification = None
        props = []
        if f.status == "not_affected" and f.justification in JUSTIFICATION_TO_CDX:
            justification = ImpactAnalysisJustification(JUSTIFICATION_TO_CDX[f.justification])
            props.append(Property(name=JUSTIFICATION_PROPERTY, value=f.justification))
        responses = [ImpactAnalysisResponse.UPDATE] if f.status == "affected" and f.fixed_in else []
        ratings = []
        if vi.severity or vi.cvss is not None:
            sev = (vi.severity or "").lower()
            ratings.append(
                VulnerabilityRating(
                    score=Decimal(str(vi.cvss)) if vi.cvss is not None else None,
                    severity=VulnerabilitySeverity(sev)
                    if sev in {s.value for s in VulnerabilitySeverity}
                    else None,
                )
            )
        # the library invents random references: a deterministic one, unique in the document
        vref = f"{f.cve}@{ref}"
        while vref in refs:
            vref += "#"
        refs.add(vref)
        vulns.append(
            Vulnerability(
                bom_ref=vref,
                id=f.cve,
                source=VulnerabilitySource(name=vi.publisher) if vi.publisher else None,
                description=vi.title,
                ratings=ratings,
                recommendation=_action(f) if f.status == "affected" else None,
                analysis=VulnerabilityAnalysis(
                    state=ImpactAnalysisState(STATE_TO_CDX[f.status]),
                    justification=justification,
                    responses=responses,
                    detail=_notes(f, vi),
                ),
                affects=[BomTarget(ref=ref)],
                properties=props,
            )
        )
    bom = Bom(
        serial_number=uuid.UUID(int=0),
        metadata=BomMetaData(
            timestamp=timestamp.astimezone(UTC).replace(microsecond=0),
            authors=[OrganizationalContact(name=author)],
            component=asset,
        ),
        components=list(parts.values()),
        vulnerabilities=vulns,
    )
    bom.register_dependency(asset, list(parts.values()))
    text = str(
        make_outputter(bom, OutputFormat.JSON, SchemaVersion.V1_6).output_as_string(indent=2)
    )
    doc = json.loads(text)
    doc.pop("serialNumber", None)
    serial = digest_id(hashlib.sha256(canonical(doc).encode()).hexdigest())
    return text.replace(_NIL, serial, 1) + ("" if text.endswith("\n") else "\n")
