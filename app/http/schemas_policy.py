"""Response models of the policy, gate, compliance and controls endpoints (OpenAPI at /docs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.http.schemas import AssetDetail, Page


class PolicyOut(BaseModel):
    name: str
    version: int
    sha256: str = Field(description="SHA-256 of the document's bytes")
    created_at: str
    created_by: str | None
    document: str = Field(description="the YAML policy as stored")
    intact: bool = Field(
        description="whether the stored text still hashes to sha256; false: it was changed "
        "behind the service's back, and gates and compliance refuse it (409)"
    )


class PolicyPage(Page):
    items: list[PolicyOut]


class PolicyPutOut(PolicyOut):
    created: bool = Field(description="false when the document equals the current version")
    compliance_evaluated: int | None = Field(
        description="assets whose compliance was evaluated under the new version (null when "
        "nothing was stored, or when the evaluation is pending)"
    )
    compliance_pending: bool = Field(
        description="a large fleet is evaluated after the answer: until it ends, compliance "
        "counts the assets not yet evaluated under this version as outdated"
    )


class FileOut(BaseModel):
    path: str
    family: str
    version: str | None
    sha256: str | None
    layer: str | None


class RuleOut(BaseModel):
    rule: str
    action: str = Field(description="deny or warn")
    status: str = Field(description="pass, fail or not_applicable")
    message: str
    missing_input: bool
    files: list[FileOut]
    evidence: dict[str, Any]
    controls: list[str]


class PolicyRef(BaseModel):
    name: str
    version: str | None = Field(description="the stored policy version")
    sha256: str


class SubjectOut(BaseModel):
    kind: str
    name: str
    digest: str | None
    scanned_at: str | None
    labels: dict[str, str]
    producer: str


class GateAnswer(BaseModel):
    decision: str = Field(description="allow, warn or deny")
    policy: PolicyRef
    subject: SubjectOut
    reasons: list[RuleOut] = Field(description="the failing rules")
    rules: list[RuleOut] = Field(description="every rule of the policy")
    controls: dict[str, str] = Field(description="control id -> pass, fail or not_applicable")
    decision_id: int = Field(description="the audit record (GET /api/v1/gate/decisions)")
    decided_at: str
    vsa: dict[str, Any] | None = Field(
        default=None, description="on allow with GPUPROV_VSA_KEY_FILE: the signed VSA (DSSE)"
    )
    vsa_error: str | None = Field(default=None, description="why no VSA could be made")
    promotion_diff: PromotionDiff | None = Field(
        default=None,
        description="with a parity rule: GPU library changes from the image of the same "
        "repository labelled label=baseline that the candidate replaces",
    )


class DecisionPolicy(BaseModel):
    name: str
    version: int


class DecisionSubject(BaseModel):
    kind: str
    name: str
    digest: str | None
    asset_id: int | None
    scan_id: int | None


class DecisionOut(BaseModel):
    id: int
    decided_at: str
    token_name: str
    policy: DecisionPolicy
    policy_sha256: str
    decision: str
    subject: DecisionSubject
    reasons: list[RuleOut]
    controls: dict[str, str]


class GateDecisionPage(Page):
    items: list[DecisionOut]


class DiffImage(BaseModel):
    asset_id: int
    name: str
    digest: str
    scan_id: int


class DiffLibrary(BaseModel):
    path: str
    family: str
    component: str | None
    version: str | None
    sha256: str | None


class DiffChange(BaseModel):
    path: str
    family: str
    from_: DiffLibrary = Field(alias="from")
    to: DiffLibrary

    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class PromotionDiff(BaseModel):
    from_: DiffImage = Field(alias="from")
    to: DiffImage
    added: list[DiffLibrary]
    removed: list[DiffLibrary]
    version_changed: list[DiffChange]
    digest_changed: list[DiffChange]

    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class ControlOut(BaseModel):
    id: str
    title: str
    framework: str
    source: str
    implementation_groups: list[int] = Field(description="CIS Implementation Groups")
    level: int | None = Field(description="SLSA Build level")


class ControlCounts(ControlOut):
    pass_: int = Field(alias="pass", description="assets passing")
    fail: int = Field(description="assets failing")
    not_applicable: int

    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class CompliancePolicy(BaseModel):
    name: str
    version: int
    sha256: str


class AssetCounts(BaseModel):
    evaluated: int = Field(description="assets whose latest scan is evaluated")
    outdated: int = Field(
        description="assets counted from an older scan: updating after their last report failed"
    )
    not_evaluated: int = Field(description="assets with a scan but no stored evaluation")


class ComplianceSummary(BaseModel):
    policy: CompliancePolicy
    framework: str | None
    assets: AssetCounts
    controls: list[ControlCounts]


class FailingAssetRef(BaseModel):
    id: int
    kind: str
    name: str
    identity: str


class FailingAsset(BaseModel):
    asset: FailingAssetRef
    scan_id: int | None
    reasons: list[RuleOut]


class ComplianceControlPage(Page):
    policy: CompliancePolicy
    control: ControlOut
    items: list[FailingAsset]


class Framework(BaseModel):
    id: str
    title: str
    source: str


class CatalogControl(ControlOut):
    rules: list[str] = Field(description="policy rules that evidence the control")


class ControlsListing(BaseModel):
    frameworks: list[Framework]
    items: list[CatalogControl]
    total: int


class AssetPolicyRef(BaseModel):
    name: str
    version: int


class AssetCompliance(BaseModel):
    policy: AssetPolicyRef
    decision: str
    scan_id: int | None
    evaluated_at: str
    controls: dict[str, str]
    reasons: list[RuleOut]


GateAnswer.model_rebuild()


class AssetDetailWithCompliance(AssetDetail):
    compliance: list[AssetCompliance] = Field(
        description="the latest scan under every stored policy (scan_age judged now)"
    )
