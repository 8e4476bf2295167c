"""Request and answer models of ``/api/v1/advisories``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.http.schemas import Page


class AdvisoryOut(BaseModel):
    cve: str = Field(description="the CVE id (or the document's own id where it names no CVE)")
    bulletin: str = Field(description="the newest document naming it (its tracking id)")
    bulletins: list[str] = Field(description="every document naming it (tracking ids)")
    title: str | None
    severity: str | None = Field(description="LOW, MEDIUM, HIGH or CRITICAL, of its top score")
    cvss: float | None = Field(description="the highest base score among its products")
    published: str | None
    digest_mismatch: bool = Field(
        description="a document naming it did not match the .sha256 published beside it"
    )
    affected_assets: int | None = Field(
        default=None,
        description="assets with an affected finding of this CVE (their latest scans, "
        "matched against the stored feed)",
    )


class AdvisoryPage(Page):
    items: list[AdvisoryOut]


class ProductStatusOut(BaseModel):
    product: str
    product_id: str
    status: str = Field(description="the CSAF product_status list: known_affected, fixed, ...")
    platform: str | None
    version_text: str | None = Field(description="the version text as the publisher wrote it")
    ranges: list[str | None] = Field(description="the parsed ranges as vers: strings")
    branch: str | None = Field(description="the driver branch the text is scoped to (R535)")
    vers: list[str] = Field(description="vers: ranges the publisher gave (CSAF, OSV)")
    needs_review: bool = Field(description="the text did not parse, or parsed with a doubt")
    review: str | None = Field(description="why a person must look")
    justification: str | None = Field(description="a known_not_affected product's CSAF flag")
    severity: str | None
    cvss: float | None
    cpe: str | None
    purls: list[str]
    closed_reason: str | None = Field(description="why a newer revision closed it")


class AdvisoryDocumentOut(BaseModel):
    bulletin: str
    publisher: str = Field(description="the publisher's namespace")
    format: str = Field(description="csaf, osv or cve_record")
    version: str
    status: str = Field(description="final, draft or interim")
    title: str | None
    source: str
    content_sha256: str
    digest_mismatch: bool
    imported_at: str | None
    description: str | None = Field(description="untrusted publisher text: escape it")
    severity: str | None
    cvss: float | None
    cvss_vector: str | None
    cwe: str | None
    withdrawn_reason: str | None
    products: list[ProductStatusOut]


class AdvisoryDetailOut(AdvisoryOut):
    documents: list[AdvisoryDocumentOut]


class UnparsedVersionOut(BaseModel):
    cve: str
    product: str
    text: str = Field(description="the version text that did not parse (stored: needs review)")


class AdvisoryImportOut(BaseModel):
    outcome: str = Field(
        description="imported, replaced, unchanged (same bytes), older (an older revision), "
        "kept_final (a draft or interim does not replace a final)"
    )
    bulletin: str
    version: str
    vulnerabilities: list[str]
    unparsed_versions: list[UnparsedVersionOut]
    note: str | None


class FeedOut(BaseModel):
    documents: int = Field(description="advisory documents stored")
    imported_at: str | None = Field(description="the newest import of the stored feed")
    matched_at: str | None = Field(
        default=None, description="when the asset was last matched (null: never)"
    )
    matched_feed_imported_at: str | None = Field(
        default=None, description="the newest import of the feed it was matched against"
    )


class VulnerabilityOut(BaseModel):
    cve: str
    bulletin: str | None = Field(description="the bulletin of its top score")
    severity: str | None
    cvss: float | None
    status: str = Field(description="affected, not_affected, fixed or under_investigation")
    justification: str | None = Field(description="a not_affected answer's OpenVEX justification")
    product: str = Field(description="the product key (driver, cuda-toolkit, container-toolkit)")
    component: str | None = Field(description="the component the flaw is in (cuobjdump)")
    installed: str | None = Field(description="the version found")
    affected_text: str | None = Field(description="the bulletin's affected text it matched")
    fixed_in: str | None
    review: str | None = Field(description="why a person must decide (counts as affected)")
    inferred: bool = Field(description="decided by a rule, not a statement (an older branch)")
    conditions_unevaluated: list[str] = Field(
        description="conditions of the text the asset's facts cannot decide (cdi_mode)"
    )
    evidence: dict[str, Any] = Field(
        description="files, package, version compared, range",
        examples=[
            {
                "product": "driver",
                "version": "535.129.03",
                "branch": "R535",
                "paths": ["/usr/lib/x86_64-linux-gnu/libcuda.so.535.129.03"],
                "package": "pkg:deb/debian/libcuda1@535.129.03-1",
                "range": ["vers:generic/<535.274.02"],
            }
        ],
    )


class AssetVulnerabilityPage(Page):
    items: list[VulnerabilityOut]
    feed: FeedOut


class AssetRefOut(BaseModel):
    id: int
    kind: str
    name: str


class AffectedOut(VulnerabilityOut):
    asset: AssetRefOut
    files: list[str]


class AdvisoryAffectedPage(Page):
    cve: str
    items: list[AffectedOut]
    feed: FeedOut


class VexProductOut(BaseModel):
    iri: str | None = Field(description="the product's IRI (OpenVEX @id) or CycloneDX bom-ref")
    purl: str | None
    sha256: str | None = Field(description="its SHA-256, hex")


class VexStatementOut(BaseModel):
    cve: str
    product: VexProductOut
    component: VexProductOut | None = Field(
        description="the subcomponent (OpenVEX) or the component inside the BOM's subject"
    )
    state: str = Field(description="affected, not_affected, fixed or under_investigation")
    justification: str | None = Field(description="one of OpenVEX's five (docs/vex.md)")
    detail: str | None
    action: str | None
    impact: str | None
    author: str | None
    timestamp: str
    source_state: str = Field(description="the state as the document wrote it")
    source_justification: str | None


class VexDryRunOut(BaseModel):
    dry_run: bool
    recorded: bool = Field(description="always false: recording is not wired yet")
    format: str = Field(description="openvex or cyclonedx")
    id: str | None
    author: str | None
    timestamp: str | None
    statements: list[VexStatementOut]
