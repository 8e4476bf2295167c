"""Response and request models of the API (the OpenAPI document at /docs is built from them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.domain import tokens
from app.domain.tokens import Scope
from scanner import vocabulary as v


class ErrorDetail(BaseModel):
    pointer: str = Field(description="JSON pointer into the request (or report) at fault")
    message: str
    spdx: str | None = Field(
        default=None,
        description="an SPDX report's field, rule or element at fault (its pointer is then '')",
    )


class ErrorBody(BaseModel):
    status: int
    message: str
    details: list[ErrorDetail] = []


class ErrorResponse(BaseModel):
    error: ErrorBody


def error_responses(*pairs: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries: each (status, when) answered with an `ErrorResponse`."""
    return {code: {"model": ErrorResponse, "description": text} for code, text in pairs}


class Readiness(BaseModel):
    status: str = Field(description="ready or unavailable")
    schema_: str | None = Field(
        default=None, alias="schema", description="the schema revision, when ready"
    )
    database: str | None = Field(default=None, description="why the database is not ready")


class IngestAnswer(BaseModel):
    scan_id: int
    asset_id: int
    created: bool = Field(description="false when the same report was already stored")
    latest: bool = Field(description="whether this scan is now the asset's latest")
    libraries: int
    asset_url: str
    ignored_labels: list[str] = Field(
        default_factory=list,
        description="label keys the report gave that only admins assign (scoping labels)",
    )


class ImageTrustOut(BaseModel):
    signed: bool = Field(description="an accepted signature named a trusted signer")
    signer: str | None
    slsa_level: int | None = Field(description="verified SLSA Build level")
    slsa_builder: str | None
    slsa_source_repo: str | None
    signature_rejected: list[str] = Field(description="why each rejected signature was refused")


#: examples of the map fields (a renderer invents ``property1``/``property2`` keys for a map
#: without one): real values, as the service answers them
LABELS_EXAMPLE = {"env": "prod", "team": "ml-platform"}
RUNTIME_EXAMPLE = {
    "proc": "/host/proc",
    "processes": 500,
    "loading": 3,
    "unreadable_processes": 1,
    "unreadable_mappings": 0,
}

_CUDART = "/usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127"


def _props(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in pairs]


#: a report as `gpuprov scan` writes it (CycloneDX 1.6): a host with one GPU library file that
#: no package owns; the service accepts it as it stands
BOM_EXAMPLE: dict[str, Any] = {
    "bomFormat": "CycloneDX",
    "specVersion": "1.6",
    "serialNumber": "urn:uuid:3e671687-395b-41f5-a30f-a58921a69b79",
    "version": 1,
    "metadata": {
        "timestamp": "2026-11-30T12:00:00Z",
        "tools": {"components": [{"type": "application", "name": "gpuprov", "version": "0.1.0"}]},
        "component": {
            "type": "operating-system",
            "bom-ref": "asset",
            "name": "gpu-node-1",
            "properties": _props(
                (v.ASSET_KIND, "host"),
                (v.HOST_MACHINE_ID, "54e7ce350b33ee2add03090db5cbb2c7"),
                (v.HOST_HOSTNAME, "gpu-node-1"),
                (v.ASSET_LABEL_PREFIX + "env", "prod"),
            ),
        },
    },
    "components": [
        {
            "type": "file",
            "bom-ref": f"file:{_CUDART}",
            "name": _CUDART,
            "version": "12.4.127",
            "hashes": [
                {
                    "alg": "SHA-256",
                    "content": "1533947a070826cd8a6cc79fb4efc2c08852e29baf965bf6142fc3dca2bdf16a",
                }
            ],
            "properties": _props(
                (v.FILE_PATH, _CUDART),
                (v.LIBRARY_FAMILY, "cudart"),
                (v.LIBRARY_COMPONENT, "cudart"),
                (v.LIBRARY_VERSION, "12.4.127"),
                (v.LIBRARY_ARCH, "x86_64"),
                (v.LIBRARY_CUDA_MAJOR, "12"),
                (v.INTEGRITY, "unowned"),
                (v.PROVENANCE, "unknown"),
            ),
        }
    ],
}


class Health(BaseModel):
    status: Literal["ok"] = Field(description="always ok: the process answers")


class ScanOut(BaseModel):
    id: int
    serial_number: str | None
    bom_version: int
    spec_version: str
    producer: str
    tool: str
    scanned_at: str | None
    received_at: str | None
    library_count: int
    content_sha256: str
    image_trust: ImageTrustOut | None = Field(
        default=None, description="image signatures and SLSA provenance, as the report stated"
    )
    runtime: dict[str, Any] | None = Field(
        default=None,
        description="a --runtime host scan: proc, processes, loading, unreadable_processes, "
        "unreadable_mappings; null when live processes were not looked at",
        examples=[RUNTIME_EXAMPLE],
    )


class AssetOut(BaseModel):
    id: int
    kind: str
    name: str
    identity: str
    labels: dict[str, str] = Field(examples=[LABELS_EXAMPLE])
    details: dict[str, Any] = Field(
        description="an image's reference, digest and platform; a host's hostname and machine id",
        examples=[
            {
                "reference": "registry.example.com/ml/train:1.0",
                "digest": "sha256:1a1c65818a60eb5b920182bc768a7dd5f7ae3a899a8ffd55eaa518e2a8cfb2c2",
                "platform": "linux/amd64",
            },
            {"hostname": "gpu-node-1", "machine_id": "54e7ce350b33ee2add03090db5cbb2c7"},
        ],
    )
    first_seen: str | None
    last_seen: str | None
    latest_scan: ScanOut | None


class LoadedProcess(BaseModel):
    pid: int
    exe: str | None = None
    container: str | None = None
    engine: str | None = Field(default=None, description="docker, containerd, cri-o, podman")
    pod: str | None = Field(default=None, description="Kubernetes pod uid")
    deleted: bool = False
    sha256: str | None = Field(default=None, description="the loaded bytes; null: unreadable")
    via: str | None = Field(default=None, description="map_files or inode")


class LoadedOut(BaseModel):
    processes: int = Field(description="live processes that map these bytes")
    containers: int = Field(description="distinct containers among them")
    deleted: bool = Field(description="the processes' maps mark the file deleted")
    copy_: bool = Field(alias="copy", description="bytes only processes hold (not on disk)")
    disk_sha256: str | None = Field(description="the other file at the path now (drift)")
    differs_from_disk: bool
    by: list[LoadedProcess]

    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class LoadedSummary(BaseModel):
    processes: int
    containers: int
    libraries: int = Field(description="GPU library files mapped by at least one process")
    deleted: int
    differs_from_disk: int
    scan: dict[str, Any] = Field(
        description="what the --runtime scan looked at (the scan's runtime)",
        examples=[RUNTIME_EXAMPLE],
    )


class LibraryOut(BaseModel):
    kind: str
    name: str
    path: str | None
    family: str
    component: str | None
    version: str | None
    cuda_major: int | None
    arch: str | None
    sha256: str | None
    integrity: str | None
    integrity_reason: str | None
    provenance: str | None
    provenance_signer: str | None
    provenance_catalog: str | None
    provenance_reason: str | None
    layer: str | None
    owner_purl: str | None
    soname: str | None
    aliases: list[str]
    notes: list[str]
    loaded: LoadedOut | None = Field(
        default=None, description="the live processes that map these bytes (--runtime)"
    )


class PackageOut(BaseModel):
    name: str
    version: str | None
    purl: str | None
    manager: str | None


class NodeContainerOut(BaseModel):
    engine: str = Field(description="containerd or docker")
    namespace: str = Field(description="containerd namespace (k8s.io, moby, ...); empty for Docker")
    container_id: str
    image_name: str
    image_digest: str | None = Field(description="the image's manifest digest")
    image_config: str | None = Field(description="the image's config digest (Docker's image ID)")
    image_asset_id: int | None = Field(description="the image asset, once its report is stored")


class RunningOn(BaseModel):
    host_asset_id: int
    host_name: str
    engine: str
    namespace: str
    container_id: str


class GpuOut(BaseModel):
    bus_id: str = Field(description="PCI location, 0000:17:00.0")
    model: str = Field(description="NVIDIA H100 80GB HBM3")
    uuid: str | None
    minor: int | None = Field(description="N of /dev/nvidiaN")
    vbios: str | None
    architecture: str | None = Field(description="nvidia-smi's product architecture (Hopper)")
    compute_capability: str | None = Field(description="9.0")


class InjectedOut(BaseModel):
    host_path: str = Field(description="/usr/lib/x86_64-linux-gnu/libcuda.so.535.129.03")
    sha256: str | None = Field(description="the host file's digest; null for a socket or device")
    family: str | None = Field(description="GPU library family of its name (libcuda)")
    version: str | None
    container_paths: list[str] = Field(description="where containers see it")
    devices: list[str] = Field(description="CDI devices it comes with (nvidia.com/gpu=all)")
    sources: list[str] = Field(description="cdi:/etc/cdi/nvidia.yaml, nvidia-container-cli list")


class ConditionOut(BaseModel):
    name: str = Field(description="cdi_mode, ldconfig_from_container, vgpu_guest, ...")
    value: str = Field(description='"true", "false", or both ("false|true"): either can happen')
    source: str | None = Field(description="where the host read it (its config.toml, nvidia-smi)")


class AssetDetail(AssetOut):
    libraries: list[LibraryOut]
    packages: list[PackageOut]
    history: list[ScanOut]
    containers: list[NodeContainerOut] = Field(
        default_factory=list,
        description="a host's running containers (its agent's latest report), linked to images",
    )
    running_on: list[RunningOn] = Field(
        default_factory=list,
        description="an image's running containers and their hosts (at most 500)",
    )
    loaded: LoadedSummary | None = Field(
        default=None,
        description="loaded by N processes / containers (a host's --runtime scan); null when "
        "its latest scan did not look at live processes",
    )
    gpus: list[GpuOut] = Field(
        default_factory=list,
        description="a host's GPUs (its latest report's device components); its driver is in "
        "details (driver_version, driver_cuda_max, ...)",
    )
    injected: list[InjectedOut] = Field(
        default_factory=list,
        description="the host files a host's NVIDIA Container Toolkit injects into its "
        "containers (CDI specs, nvidia-container-cli list)",
    )
    conditions: list[ConditionOut] = Field(
        default_factory=list,
        description="a host's condition facts (its latest report's), which decide bulletins' "
        "conditions (docs/advisories.md, Conditions); an undecided one is absent",
    )


class Page(BaseModel):
    total: int
    limit: int
    offset: int


class AssetPage(Page):
    items: list[AssetOut]


class LibraryUse(BaseModel):
    family: str
    version: str | None
    cuda_major: int | None
    assets: int
    images: int
    hosts: int
    files: int


class LibraryPage(Page):
    items: list[LibraryUse]


class AssetRef(BaseModel):
    id: int
    kind: str
    name: str
    identity: str
    labels: dict[str, str] = Field(examples=[LABELS_EXAMPLE])


class LibraryRef(BaseModel):
    kind: str
    path: str | None
    family: str
    component: str | None
    version: str | None
    cuda_major: int | None
    sha256: str | None
    integrity: str | None
    provenance: str | None
    loaded_processes: int = Field(default=0, description="live processes mapping the file")
    loaded_containers: int = 0
    loaded_deleted: bool = False
    loaded_copy: bool = False
    disk_sha256: str | None = None


class WhereUsedItem(BaseModel):
    asset: AssetRef
    libraries: list[LibraryRef]


class WhereUsedPage(Page):
    items: list[WhereUsedItem]


class DigestCount(BaseModel):
    sha256: str
    assets: int
    example_path: str | None


class DigestConflict(BaseModel):
    family: str
    component: str | None
    version: str | None
    cuda_major: int | None
    arch: str | None
    digests: list[DigestCount]


class FileState(BaseModel):
    version: str | None
    sha256: str | None
    family: str


class AddedOrRemoved(FileState):
    path: str


class Changed(BaseModel):
    path: str
    from_: FileState = Field(alias="from")
    to: FileState

    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class AssetChange(BaseModel):
    asset_id: int
    from_scan: int
    to_scan: int
    added: list[AddedOrRemoved]
    removed: list[AddedOrRemoved]
    changed: list[Changed]


class AssetChanges(BaseModel):
    items: list[AssetChange]
    limit: int
    offset: int


class VersionCount(BaseModel):
    version: str | None
    assets: int


class VersionSpread(BaseModel):
    family: str
    versions: list[VersionCount]
    distinct_versions: int


class LoadedDrift(BaseModel):
    asset_id: int
    path: str | None
    family: str
    version: str | None
    loaded_sha256: str | None
    disk_sha256: str
    processes: int
    containers: int
    deleted: bool


class Drift(BaseModel):
    loaded_differs_from_disk: list[LoadedDrift] = Field(
        default_factory=list,
        description="current files whose loaded bytes differ from the file on disk (at most 500)",
    )
    digest_conflicts: list[DigestConflict]
    asset_changes: AssetChanges
    version_spread: list[VersionSpread]


class TokenIn(BaseModel):
    """A token to create. The patterns document the domain's rules (`app.domain.tokens`), which
    refuse the rest with their own messages; asset patterns need the report:write scope, policy
    limits the gate scope without admin, a team neither admin nor policy:write."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {
                    "anyOf": [
                        {
                            "properties": {
                                "scopes": {"contains": {"const": Scope.REPORT_WRITE.value}}
                            }
                        },
                        {"properties": {"assets": {"maxItems": 0}}},
                    ]
                },
                {
                    "anyOf": [
                        {
                            "properties": {
                                "scopes": {
                                    "contains": {"const": Scope.GATE.value},
                                    "not": {"contains": {"const": Scope.ADMIN.value}},
                                }
                            }
                        },
                        {"properties": {"policies": {"maxItems": 0}}},
                    ]
                },
                # a team confines reads: never an admin's (it sees everything), nor a
                # policy:write token's (a policy gates every team's images)
                {
                    "anyOf": [
                        {"not": {"required": ["team"]}},
                        {"properties": {"team": {"type": "null"}}},
                        {
                            "properties": {
                                "scopes": {
                                    "not": {
                                        "anyOf": [
                                            {"contains": {"const": Scope.ADMIN.value}},
                                            {"contains": {"const": Scope.POLICY_WRITE.value}},
                                        ]
                                    }
                                }
                            }
                        },
                    ]
                },
            ]
        },
    )

    name: str = Field(
        min_length=1, max_length=128, json_schema_extra={"pattern": tokens.NAME_PATTERN}
    )
    scopes: list[str] = Field(
        min_length=1,
        max_length=16,
        json_schema_extra={"items": {"type": "string", "enum": [s.value for s in Scope]}},
    )
    assets: list[str] = Field(
        default=[],
        max_length=100,
        description="asset-name patterns (report:write only)",
        json_schema_extra={
            "items": {"type": "string", "maxLength": 1024, "pattern": tokens.ASSET_PATTERN}
        },
    )
    policies: list[
        Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
    ] = Field(
        default=[],
        max_length=100,
        description="the only policies a gate token may gate under (exact names; default any)",
    )
    team: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$",
        description="the team whose asset scope confines the token (not with admin or "
        "policy:write, whose policies gate every team); default none: the whole fleet",
    )
    expires: str | None = Field(
        default=None,
        max_length=64,
        description="when the token stops working: a duration (`30d`, `12h`, `2w`), a date "
        "(`2027-01-31`, the start of that day UTC) or an RFC 3339 time, in the future and at "
        "most 3660 days away (format `gpuprov-expiry`); default never",
        json_schema_extra={"pattern": tokens.EXPIRY_PATTERN, "format": "gpuprov-expiry"},
    )


class TokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    scopes: list[str]
    assets: list[str]
    policies: list[str] = Field(description="the policies it may gate under (empty: any)")
    created_at: str
    last_used_at: str | None
    revoked_at: str | None
    expires_at: str | None
    replaced_by: int | None = Field(
        default=None, description="the token that replaced this one when it was rotated"
    )
    state: Literal["active", "grace", "expired", "revoked"] = Field(
        description="at the time of the answer: `grace` is a rotated token whose secret still "
        "works until `expires_at`; `revoked` outranks `expired`"
    )
    team: str | None = Field(default=None, description="the team whose scope confines it")


class NewTokenOut(TokenOut):
    token: str = Field(description="the secret; shown only in this answer")


class TokenPage(Page):
    items: list[TokenOut]


class ActorUserOut(BaseModel):
    """A person signed in with the OpenID Provider, as their ID token identifies them."""

    issuer: str = Field(examples=["https://login.example.com"])
    subject: str = Field(examples=["00u1a2b3c4d5e6f7g8h9"])


class AuditEventOut(BaseModel):
    id: int
    at: str
    source: str = Field(
        description="`api` (a token), `web` (the dashboard), `cli`, `ci` (a CI job's OIDC "
        "token) or `service`"
    )
    actor: str = Field(
        description="the acting token's name, `cli:USER`, `ci:RULE:REPOSITORY` for a CI job, "
        "or a signed-in person's email (else their subject)"
    )
    actor_token_id: int | None
    actor_user: ActorUserOut | None = Field(
        default=None,
        description="a person signed in with the OpenID Provider: their ID token's `issuer` and "
        "`subject`, which identify them (the email in `actor` does not)",
    )
    action: str
    target: str = Field(description="`token:ID`, `policy:NAME@VERSION`, `catalog:NAME`, ...")
    details: dict[str, Any] = Field(
        description="what the action changed (never a token's secret or hash)",
        examples=[
            {
                "version": 1,
                "sha256": "6e6979ff1c6fc06208861b7f470251b3e228b0cf7c359cbdf238d98f22e4f21f",
            }
        ],
    )
    request_id: str | None


class AuditPage(Page):
    items: list[AuditEventOut]


class TrustPolicyOut(BaseModel):
    version: int
    content_sha256: str
    signers: list[str] = Field(description="the trusted signers as verdicts name them")
    created_at: str
    created_by: str | None
    document: str = Field(description="the YAML policy as stored")


class TrustPolicyPage(Page):
    items: list[TrustPolicyOut]


class CatalogOut(BaseModel):
    id: int
    name: str
    format: str = Field(description="dsse or sigstore-bundle")
    signer: str | None
    entries: int = Field(description="entries inside the signer's scope")
    out_of_scope: int = Field(description="entries the signer may not vouch for (ignored)")
    active: bool = Field(description="whether the current trust policy trusts it")
    rejected_reason: str | None
    policy_version: int = Field(description="the policy version it was last verified under")
    content_sha256: str
    imported_at: str
    verified_at: str
    imported_by: str | None


class CatalogPage(Page):
    items: list[CatalogOut]


class ReevaluationOut(BaseModel):
    mode: str = Field(description="incremental (a catalog added) or full")
    candidates: int = Field(description="stored files evaluated one by one")
    changed: int = Field(description="stored verdicts that changed")
    compliance_pending: bool = Field(
        default=False,
        description="fleet compliance is evaluated again after the answer (a fleet of more than"
        " 1,000 scanned assets); until then its assets count as not evaluated",
    )


class PolicyChangeOut(TrustPolicyOut):
    catalogs: list[CatalogOut]
    reevaluation: ReevaluationOut | None


class CatalogImportOut(CatalogOut):
    created: bool = Field(description="false when the same bytes were imported before")
    reevaluation: ReevaluationOut | None


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema with its nested models written in place: a request body
    declared in ``openapi_extra`` is not registered under components, so a ``#/$defs/...``
    reference would point nowhere in the OpenAPI document (ReDoc refuses it)."""
    schema = model.model_json_schema()
    defs: dict[str, Any] = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    inlined: dict[str, Any] = inline(schema)
    return inlined
