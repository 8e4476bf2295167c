"""Asset facts: the frozen input of policy evaluation, built from a scan or from a BOM.

Evaluation never sees a ScanResult or a database row: the CLI builds facts from a scan
(`facts_from_scan`) or a CycloneDX BOM (scanner/policy/bom_facts.py), the service from its
inventory. A verdict that was never computed is None, so a rule can say "no verdict" instead
of passing.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Protocol

from msgspec import Struct

from scanner.detect.classifiers import DRIVER_FAMILIES
from scanner.model import AssetKind, ScanResult


class FileFact(Struct, frozen=True):
    path: str
    family: str
    component: str
    version: str | None
    cuda_major: int | None
    sha256: str | None
    layer: str | None = None
    #: "verified" | "modified" | "no-record" | "unowned"; None: no verdict (another tool's BOM)
    integrity: str | None = None
    integrity_reason: str = ""
    #: "verified" | "conflict" | "unknown"; None: not evaluated (no reference catalog)
    provenance: str | None = None
    provenance_signer: str | None = None
    provenance_reason: str = ""
    owner: str | None = None  # owner package purl
    #: live processes mapping these bytes (``--runtime``); 0 when none or not looked at
    loaded_processes: int = 0
    loaded_containers: int = 0
    #: a process maps it although the file was deleted (or replaced) on disk
    loaded_deleted: bool = False
    #: bytes only processes hold: the file at the path on disk is other bytes (``disk_sha256``)
    #: or none at all
    loaded_copy: bool = False
    disk_sha256: str | None = None

    def summary(self) -> dict[str, str | None]:
        """The file as a reason lists it: path, family, version, sha256, layer."""
        return {
            "path": self.path,
            "family": self.family,
            "version": self.version,
            "sha256": self.sha256,
            "layer": self.layer,
        }


class ImageTrustFacts(Struct, frozen=True):
    """What the image's signatures established; absent when no trust policy was applied."""

    signer: str | None
    slsa_level: int | None
    builder: str | None = None
    rejected: tuple[str, ...] = ()


class VulnerabilityFact(Struct, frozen=True):
    """One advisory finding of the asset (the matcher's answer per CVE and product found), with
    the trusted analysis in force for it, if any (docs/advisories.md, "Triage")."""

    cve: str
    #: the matcher's answer: affected, not_affected, fixed or under_investigation
    status: str
    #: LOW, MEDIUM, HIGH or CRITICAL (the CVE's highest score); None: the feed gives none
    severity: str | None
    product: str
    component: str | None = None
    installed: str | None = None
    #: the vendor names a fixed version (or a vendor fix) for it
    fix_available: bool = False
    #: why a person must decide (an affected answer that is not a proof)
    review: str | None = None
    #: the state of a trusted author's analysis in force (replaces ``status`` for the gate)
    analysis_state: str | None = None
    analysis_author: str | None = None
    analysis_reason: str | None = None

    @property
    def effective(self) -> str:
        """The status the gate judges: a trusted analysis's state, else the matcher's."""
        return self.analysis_state or self.status


class AdvisoryFacts(Struct, frozen=True):
    """The asset's advisory findings and the feed they were matched against. An asset whose
    facts carry no ``AdvisoryFacts`` was matched against no feed at all."""

    #: when the feed was last imported (service) or written (files read by ``gate``)
    feed_at: datetime | None
    documents: int
    #: where the feed came from: "database", or the paths given to ``--advisories``
    source: str
    findings: tuple[VulnerabilityFact, ...] = ()
    #: why the findings do not speak for the feed as it is now (matched against an older one)
    stale: str | None = None
    #: when the feed was last read from its publisher, changed or not (service: the newest
    #: import that read a document; None: ``feed_at``): its age for ``max_feed_age_hours``
    checked_at: datetime | None = None


class AssetFacts(Struct, frozen=True):
    kind: AssetKind
    name: str
    digest: str | None
    scanned_at: datetime | None
    files: tuple[FileFact, ...]
    labels: tuple[tuple[str, str], ...] = ()
    #: None: the scan applied no trust policy to the image, so signature and SLSA are unknown
    image_trust: ImageTrustFacts | None = None
    driver_version: str | None = None
    #: the newest CUDA the host's driver runs ("12.2"), from nvidia-smi, the sourced toolkit
    #: table or JetPack (scanner/node); None when unknown
    driver_cuda_max: str | None = None
    findings: tuple[tuple[str, str], ...] = ()  # (kind, message)
    #: who produced the facts: "gpuprov" or the BOM's tool ("syft 1.0", "trivy", ...)
    producer: str = "gpuprov"
    #: the scan looked at live processes (``--runtime``); what it could not read
    runtime: bool = False
    runtime_unreadable: tuple[str, ...] = ()  # one message per thing not read
    #: the advisory findings (``gate --advisories``, the service's stored feed); None: no feed
    advisories: AdvisoryFacts | None = None

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)

    def subject(self) -> dict[str, object]:
        """The subject of a gate decision (JSON)."""
        return {
            "kind": self.kind.value,
            "name": self.name,
            "digest": self.digest,
            "scanned_at": self.scanned_at.isoformat() if self.scanned_at else None,
            "labels": dict(self.labels),
            "producer": self.producer,
        }


class StoredFile(Protocol):
    """What a rule reads of a stored GPU library: an `Artifact` or a row of its fact columns
    (`app.storage.repositories.gate.library_facts_of`), or another tool's component as
    read (`scanner.bom.foreign.ForeignLibrary`)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def family(self) -> str: ...
    @property
    def component(self) -> str | None: ...
    @property
    def version(self) -> str | None: ...
    @property
    def cuda_major(self) -> int | None: ...
    @property
    def sha256(self) -> str | None: ...
    @property
    def layer(self) -> str | None: ...
    @property
    def integrity(self) -> str | None: ...
    @property
    def integrity_reason(self) -> str | None: ...
    @property
    def provenance(self) -> str | None: ...
    @property
    def provenance_signer(self) -> str | None: ...
    @property
    def provenance_reason(self) -> str | None: ...
    @property
    def owner_purl(self) -> str | None: ...
    @property
    def loaded_processes(self) -> int: ...
    @property
    def loaded_containers(self) -> int: ...
    @property
    def loaded_deleted(self) -> bool: ...
    @property
    def loaded_copy(self) -> bool: ...
    @property
    def disk_sha256(self) -> str | None: ...


def file_fact(a: StoredFile) -> FileFact:
    """The facts of one GPU library as stored or read from a BOM: the one mapping the service
    (its stored rows) and `gate --bom` (another tool's components) share."""
    return FileFact(
        path=a.path or a.name,
        family=a.family,
        component=a.component or a.family,
        version=a.version,
        cuda_major=a.cuda_major,
        sha256=a.sha256,
        layer=a.layer,
        integrity=a.integrity,
        integrity_reason=a.integrity_reason or "",
        provenance=a.provenance,
        provenance_signer=a.provenance_signer,
        provenance_reason=a.provenance_reason or "",
        owner=a.owner_purl,
        loaded_processes=a.loaded_processes or 0,
        loaded_containers=a.loaded_containers or 0,
        loaded_deleted=bool(a.loaded_deleted),
        loaded_copy=bool(a.loaded_copy),
        disk_sha256=a.disk_sha256,
    )


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time in UTC (naive ones are UTC, as the service stores every time); None
    when absent, bad or out of range."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


def driver_version_of(files: tuple[FileFact, ...]) -> str | None:
    """The driver version the asset's own driver libraries state (libcuda, NVML)."""
    versions = sorted({f.version for f in files if f.family in DRIVER_FAMILIES and f.version})
    return versions[0] if versions else None


def unreadable_of(processes: int, mappings: int) -> tuple[str, ...]:
    """What a ``--runtime`` scan could not read, one message per kind, from the counts its BOM
    states (``gpuprov:runtime:unreadable``, ``...:unreadable-mappings``)."""
    return tuple(
        text
        for count, text in (
            (processes, f"the memory maps of {processes} process(es)"),
            (mappings, f"the loaded bytes of {mappings} mapping(s)"),
        )
        if count
    )


def findings_of(values: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """A scan's ``gpuprov:scan:finding`` values ("KIND: message") as (kind, message) pairs; a
    value without a kind is a plain "finding"."""
    out = []
    for value in values:
        kind, sep, message = value.partition(":")
        out.append((kind.strip(), message.strip()) if sep else ("finding", value))
    return tuple(out)


def driver_of(module: str | None, jetson: bool, files: tuple[FileFact, ...]) -> str | None:
    """The driver version: the loaded kernel module's where the scan read it, else the asset's
    driver libraries' (a Jetson's driver is L4T's: its libraries carry no desktop version)."""
    return module or (None if jetson else driver_version_of(files))


def trust_of(
    signer: str | None, slsa_level: int | None, builder: str | None, rejected: Iterable[str]
) -> ImageTrustFacts | None:
    """The image's trust facts, or None when the scan states no outcome at all (it applied no
    trust policy, so signature and SLSA level are unknown rather than absent)."""
    rejected = tuple(rejected)
    if signer is None and slsa_level is None and builder is None and not rejected:
        return None
    return ImageTrustFacts(signer, slsa_level, builder, rejected)


def node_driver(result: ScanResult) -> tuple[str | None, str | None]:
    """(driver version, newest CUDA it runs) of a host scan's node facts: the loaded kernel
    module is the driver that serves CUDA, whatever libraries lie on disk."""
    node = result.node
    driver = node.driver if node is not None else None
    if driver is None:
        return None, None
    return driver.version, driver.cuda_max


def is_jetson(result: ScanResult) -> bool:
    """A Jetson's driver is L4T's: its libraries carry no desktop driver version."""
    return result.node is not None and result.node.l4t is not None


def facts_from_scan(result: ScanResult) -> AssetFacts:
    """The facts of a finished scan."""
    files = tuple(
        FileFact(
            path=lib.ref.path,
            family=lib.ident.family,
            component=lib.ident.component,
            version=lib.ident.version,
            cuda_major=lib.ident.cuda_major,
            sha256=lib.digests.sha256,
            layer=lib.ref.layer,
            integrity=lib.integrity.value,
            integrity_reason=lib.integrity_reason,
            provenance=lib.provenance,
            provenance_signer=lib.provenance_signer,
            provenance_reason=lib.provenance_reason,
            owner=lib.owner.purl if lib.owner else None,
            loaded_processes=len({p.pid for p in lib.loaded_by}),
            loaded_containers=len({p.container_id for p in lib.loaded_by if p.container_id}),
            loaded_deleted=any(p.deleted for p in lib.loaded_by),
            loaded_copy=lib.loaded_copy,
            disk_sha256=lib.disk_sha256,
        )
        for lib in result.libraries
    )
    trust = result.image_trust
    asset = result.asset
    module, cuda_max = node_driver(result)
    return AssetFacts(
        kind=asset.kind,
        name=asset.name,
        digest=asset.digest or asset.config_digest or asset.machine_id,
        scanned_at=parse_time(result.started_at),
        files=files,
        labels=asset.labels,
        image_trust=(
            trust_of(trust.signer, trust.slsa_level, trust.builder, trust.rejected)
            if trust is not None
            else None
        ),
        driver_version=driver_of(module, is_jetson(result), files),
        driver_cuda_max=cuda_max,
        findings=tuple((f.kind, f.message) for f in result.findings),
        producer=f"gpuprov {result.tool_version}",
        runtime=result.runtime is not None,
        runtime_unreadable=unreadable_of(
            len(result.runtime.unreadable), result.runtime.unreadable_mappings
        )
        if result.runtime is not None
        else (),
    )
