"""Response models of the policy, gate, compliance and controls endpoints (OpenAPI at /docs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.http.schemas import LABELS_EXAMPLE, AssetDetail, Page

#: real values of the map fields (a renderer invents ``property1``/``property2`` keys for a map
#: without an example)
CONTROLS_EXAMPLE = {
    "CIS-2.3": "fail",
    "CIS-2.6": "pass",
    "ID.RA-09": "pass",
    "PR.PS-02": "not_applicable",
    "PR.PS-05": "fail",
}
#: a VSA as the gate signs it (Ed25519, a key made for this example)
VSA_EXAMPLE = {
    "payloadType": "application/vnd.in-toto+json",
    "payload": (
        "eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEiLCJwcmVkaWNhdGUiOnsiZ3B1cHJvdiI6"
        "eyJwb2xpY3lOYW1lIjoicHJvZCIsInByb2R1Y2VyIjoiZ3B1cHJvdiJ9LCJwb2xpY3kiOnsiZGlnZXN0Ijp7InNo"
        "YTI1NiI6IjZlNjk3OWZmMWM2ZmMwNjIwODg2MWI3ZjQ3MDI1MWIzZTIyOGIwY2Y3YzM1OWNiZGYyMzhkOThmMjJl"
        "NGYyMWYifSwidXJpIjoiaHR0cHM6Ly9ncHVwcm92LmV4YW1wbGUuY29tL2FwaS92MS9wb2xpY2llcy9wcm9kP3Zl"
        "cnNpb249MSJ9LCJyZXNvdXJjZVVyaSI6InJlZ2lzdHJ5LmV4YW1wbGUuY29tL21sL3RyYWluOjEuMEBzaGEyNTY6"
        "MWExYzY1ODE4YTYwZWI1YjkyMDE4MmJjNzY4YTdkZDVmN2FlM2E4OTlhOGZmZDU1ZWFhNTE4ZTJhOGNmYjJjMiIs"
        "InNsc2FWZXJzaW9uIjoiMS4yIiwidGltZVZlcmlmaWVkIjoiMjAyNi0xMi0wN1QwNjowODoyOVoiLCJ2ZXJpZmlj"
        "YXRpb25SZXN1bHQiOiJQQVNTRUQiLCJ2ZXJpZmllZExldmVscyI6WyJTTFNBX0JVSUxEX0xFVkVMXzAiXSwidmVy"
        "aWZpZXIiOnsiaWQiOiJodHRwczovL2dwdXByb3YuZGV2L2dhdGUiLCJ2ZXJzaW9uIjp7ImdwdXByb3YiOiIwLjEu"
        "MCJ9fX0sInByZWRpY2F0ZVR5cGUiOiJodHRwczovL3Nsc2EuZGV2L3ZlcmlmaWNhdGlvbl9zdW1tYXJ5L3YxIiwi"
        "c3ViamVjdCI6W3siZGlnZXN0Ijp7InNoYTI1NiI6IjFhMWM2NTgxOGE2MGViNWI5MjAxODJiYzc2OGE3ZGQ1Zjdh"
        "ZTNhODk5YThmZmQ1NWVhYTUxOGUyYThjZmIyYzIifSwibmFtZSI6InJlZ2lzdHJ5LmV4YW1wbGUuY29tL21sL3Ry"
        "YWluOjEuMCJ9XX0="
    ),
    "signatures": [
        {
            "keyid": "",
            "sig": "pT4MLYuTRcq5Y8qLsWnhYF1OC/Agxv0CWt7KTcJQkhGH"
            "mjc/WYpuo1CUjtOv8KLHfQOSnwwIhNJNG7+pOBsYCA==",
        }
    ],
}


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
    evidence: dict[str, Any] = Field(
        description="the values the rule decided on", examples=[{"forbid": "modified"}]
    )
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
    labels: dict[str, str] = Field(examples=[LABELS_EXAMPLE])
    producer: str


class GateAnswer(BaseModel):
    decision: str = Field(description="allow, warn or deny")
    policy: PolicyRef
    subject: SubjectOut
    reasons: list[RuleOut] = Field(description="the failing rules")
    rules: list[RuleOut] = Field(description="every rule of the policy")
    controls: dict[str, str] = Field(
        description="control id -> pass, fail or not_applicable", examples=[CONTROLS_EXAMPLE]
    )
    decision_id: int = Field(description="the audit record (GET /api/v1/gate/decisions)")
    decided_at: str
    vsa: dict[str, Any] | None = Field(
        default=None,
        description="on allow with GPUPROV_VSA_KEY_FILE: the signed VSA (DSSE)",
        examples=[VSA_EXAMPLE],
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


class CiGrantOut(BaseModel):
    rule: str
    claims: dict[str, str] = Field(
        examples=[{"iss": "https://token.actions.githubusercontent.com", "repository_id": "2002"}]
    )


class DecisionOut(BaseModel):
    id: int
    decided_at: str
    token_name: str
    policy: DecisionPolicy
    policy_sha256: str
    decision: str
    subject: DecisionSubject
    reasons: list[RuleOut]
    controls: dict[str, str] = Field(examples=[CONTROLS_EXAMPLE])
    granted: CiGrantOut | None = Field(
        default=None, description="a CI job's decision: the trust rule and claims it was granted on"
    )


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
    controls: dict[str, str] = Field(examples=[CONTROLS_EXAMPLE])
    reasons: list[RuleOut]


GateAnswer.model_rebuild()


class AssetDetailWithCompliance(AssetDetail):
    compliance: list[AssetCompliance] = Field(
        description="the latest scan under every stored policy (scan_age judged now)"
    )
