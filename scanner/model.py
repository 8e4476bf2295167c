"""Frozen values shared by every scanner stage.

Each stage of the pipeline (source -> catalog -> detect -> hash -> verify -> bom) takes and
returns these values; nothing here touches a filesystem.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import StrEnum
from typing import NewType

from msgspec import Struct, field

#: Lowercase hexadecimal SHA-256 digest (64 chars), without an algorithm prefix.
Sha256 = NewType("Sha256", str)
#: An OCI content digest with its algorithm, e.g. ``sha256:ab12...``.
OciDigest = NewType("OciDigest", str)
#: A host file's state: (device, inode, size, mtime_ns, ctime_ns). mtime can be set back by
#: anyone who can write the file (``touch -d``); ctime cannot, so a rewrite always changes it.
StatKey = tuple[int, int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    """The `StatKey` of a stat result (no file is touched here)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class AssetKind(StrEnum):
    HOST = "host"
    IMAGE = "image"


class NodeKind(StrEnum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    OTHER = "other"  # devices, fifos, sockets: listed, never read


class Integrity(StrEnum):
    VERIFIED = "verified"
    MODIFIED = "modified"
    NO_RECORD = "no-record"
    UNOWNED = "unowned"


class Confidence(StrEnum):
    """How much a piece of evidence is worth; mapped to CycloneDX's 0..1 confidence."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def score(self) -> float:
        return {"high": 0.9, "medium": 0.6, "low": 0.3}[self.value]


class Stage(StrEnum):
    """The pipeline stage that skipped something (`Skipped.stage`)."""

    SOURCE = "source"
    CATALOG = "catalog"
    DETECT = "detect"
    HASH = "hash"


class PackageManager(StrEnum):
    """The package databases the catalog stage reads (`Package.manager`)."""

    DPKG = "dpkg"
    RPM = "rpm"
    PIP = "pip"
    CONDA = "conda"


class EvidenceField(StrEnum):
    """What a piece of evidence identifies (`Evidence.field`)."""

    NAME = "name"
    VERSION = "version"
    CUDA_MAJOR = "cuda-major"


class EvidenceMethod(StrEnum):
    """How a piece of evidence was found (`Evidence.method`), named after CycloneDX's
    evidence.identity.methods techniques."""

    FILENAME = "filename"
    BINARY_ANALYSIS = "binary-analysis"
    MANIFEST_ANALYSIS = "manifest-analysis"
    SOURCE_CODE_ANALYSIS = "source-code-analysis"
    HASH_COMPARISON = "hash-comparison"
    OTHER = "other"


class Provenance(StrEnum):
    """A file's provenance verdict against signed reference catalogs."""

    VERIFIED = "verified"
    CONFLICT = "conflict"
    UNKNOWN = "unknown"


class FindingKind(StrEnum):
    """Every kind of scan-level `Finding`; each is a ``--fail-on`` kind, in this order."""

    MODIFIED = "modified"
    UNOWNED = "unowned"
    MIXED = "mixed"
    NO_RECORD = "no-record"
    CONFLICT = "conflict"
    UNSIGNED = "unsigned"
    NOT_ELF = "not-elf"
    UNREADABLE = "unreadable"
    #: a GPU library mapped into a live process that no package owns (``--runtime``)
    LOADED_UNOWNED = "loaded-unowned"
    #: a process maps a GPU library file deleted (or replaced) on disk since it was loaded
    LOADED_DELETED = "loaded-deleted"
    #: the bytes a process has loaded differ from the file at that path on disk now
    LOADED_DIFFERS = "loaded-differs-from-disk"


class Skipped(Struct, frozen=True):
    """Something the scan could not handle, kept as data so every output shows it."""

    path: str
    reason: str
    stage: Stage


class AssetInfo(Struct, frozen=True):
    """What is being scanned: a host root or an image."""

    kind: AssetKind
    name: str  # hostname, or image reference without transport (e.g. "demo/cuda:12")
    reference: str  # the target as the user gave it
    digest: OciDigest | None = None  # image manifest digest
    config_digest: OciDigest | None = None
    machine_id: str | None = None
    platform: str | None = None  # "linux/amd64"
    env: tuple[tuple[str, str], ...] = ()  # image config Env, in order
    labels: tuple[tuple[str, str], ...] = ()  # image config Labels, sorted
    layers: tuple[OciDigest, ...] = ()  # layer digests, base first

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def label_dict(self) -> dict[str, str]:
        return dict(self.labels)


class Digests(Struct, frozen=True):
    """Digests of one file's bytes, computed in a single read."""

    size: int
    sha256: Sha256
    md5: str | None = None  # only computed when an owner may have recorded MD5 (dpkg)


class ElfFacts(Struct, frozen=True):
    """What static ELF analysis found in a shared library."""

    machine: str  # "x86_64", "aarch64", ...
    soname: str | None = None
    needed: tuple[str, ...] = ()
    #: exported integer version objects, e.g. ("cudnn_graph_version", 0x090100)
    version_ints: tuple[tuple[str, int], ...] = ()
    #: version marker strings, e.g. "cudnn_version_9_1_0_70_c34102860_e0"
    markers: tuple[str, ...] = ()
    #: other version strings found in read-only data (e.g. NVML's "535.309.01")
    version_strings: tuple[str, ...] = ()
    #: CUDA runtime version the library was built against, as CUDA encodes it (12040 = 12.4)
    cudart_build: int | None = None
    #: CUDA major versions referenced by name ("libcublasLt.so.12" -> 12)
    referenced_cuda_majors: tuple[int, ...] = ()
    #: the CUDA Toolkit release line of the build tree its source paths name ("11.8"), when
    #: they all name one
    toolkit_line: str | None = None


class FileFacts(Struct, frozen=True):
    """Content-derived facts of one candidate file (cached per layer or per inode)."""

    digests: Digests
    elf: ElfFacts | None = None
    error: str | None = None  # why ELF analysis failed (truncated, not ELF, ...)
    #: the bytes are no ELF shared library at all (text, an executable, an object file):
    #: the file is reported as a ``not-elf`` finding, never as a GPU library
    not_elf: bool = False


class FileRef(Struct, frozen=True):
    """A file's identity: its real absolute path inside the root and the layer it came from."""

    path: str
    layer: OciDigest | None = None


class Candidate(Struct, frozen=True):
    """A file whose name looks like a GPU library, with every alias that resolves to it."""

    ref: FileRef
    size: int
    aliases: tuple[str, ...] = ()  # symlink paths (absolute, inside the root) pointing here
    facts: FileFacts | None = None  # filled by image sources during the layer read
    host_path: str | None = None  # where the bytes can be read on this machine (host sources)
    stat_key: StatKey | None = None  # file state, the key of the host digest cache


class OwnedFile(Struct, frozen=True):
    """One file as an owner package recorded it."""

    path: str  # absolute path inside the root
    algorithm: str | None  # "sha256", "md5", "sha1", ... or None when nothing is recorded
    digest: str | None  # lowercase hex


class Package(Struct, frozen=True):
    """An owner package from a package database inside the root."""

    manager: PackageManager
    name: str
    version: str
    purl: str
    arch: str | None = None
    source: str = ""  # the database file it came from
    files: tuple[OwnedFile, ...] = ()
    # extra facts for evidence (license, summary, ...) as sorted key/value pairs
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        return self.purl

    @property
    def built_from(self) -> tuple[str, str] | None:
        """(name, version) of the source package a dpkg package was built from, where its
        ``Source:`` field names one ("nvidia-graphics-drivers (535.261.03-1)"; without the
        parenthesis the source's version is the binary's); None without the field."""
        field = dict(self.extra).get("source-package", "").strip()
        if not field:
            return None
        name, _, rest = field.partition(" ")
        version = rest.strip()
        if version.startswith("(") and version.endswith(")"):
            version = version[1:-1].strip()
        return name, version or self.version


class Evidence(Struct, frozen=True):
    """One piece of identification evidence (maps to CycloneDX evidence.identity)."""

    field: EvidenceField
    value: str
    method: EvidenceMethod
    source: str  # where it came from: "soname", "symbol cudnn_graph_version", a path, ...
    confidence: Confidence


class Identification(Struct, frozen=True):
    """What the detect stage concluded about one library file."""

    family: str  # "cudnn", "cudart", "cublas", ...
    component: str  # sub-library, e.g. "cudnn_graph", or the family for single-file libraries
    version: str | None
    cuda_major: int | None
    arch: str | None
    evidence: tuple[Evidence, ...] = ()
    soname: str | None = None


class LoadedVia(StrEnum):
    """How the bytes a process has loaded were read (`LoadedBy.via`)."""

    #: through /proc/PID/map_files: the mapped inode itself, deleted or not
    MAP_FILES = "map_files"
    #: the mapped inode (device and inode number) is the file the scan hashed at that path
    INODE = "inode"
    #: not read: the loaded bytes are unknown
    NONE = "none"


class LoadedBy(Struct, frozen=True):
    """A live process that has a GPU library file mapped (``--runtime``)."""

    pid: int
    exe: str | None  # /proc/PID/exe's target
    container_id: str | None = None  # from /proc/PID/cgroup; None: not in a container
    engine: str | None = None  # "docker", "containerd", "cri-o", "podman"; None: unknown
    pod_uid: str | None = None  # Kubernetes pod
    deleted: bool = False  # maps marks the mapped file deleted
    sha256: Sha256 | None = None  # of the loaded bytes; None: they could not be read
    via: LoadedVia = LoadedVia.NONE


class RuntimeScan(Struct, frozen=True):
    """What the ``--runtime`` walk of live processes covered."""

    proc: str  # the proc directory read
    processes: int  # processes whose maps were looked at
    loading: int  # processes that map at least one GPU library
    unreadable: tuple[int, ...] = ()  # pids whose maps could not be read
    #: mappings (process, file) whose loaded bytes could not be read
    unreadable_mappings: int = 0


class GpuLibrary(Struct, frozen=True):
    """One GPU library file with its identification, owner and verdicts."""

    ref: FileRef
    size: int
    aliases: tuple[str, ...]
    ident: Identification
    digests: Digests  # a file that could not be read is an `unreadable` finding, not a library
    owner: Package | None
    integrity: Integrity
    integrity_reason: str
    notes: tuple[str, ...] = ()  # e.g. "mixed cuDNN: ..."
    #: why its ELF facts could not be read (a truncated or malformed ELF library); its name,
    #: digest and integrity verdict still stand
    error: str | None = None
    #: provenance against signed reference catalogs: None when no catalog was given
    provenance: Provenance | None = None
    provenance_reason: str = ""
    provenance_signer: str | None = None
    provenance_catalog: str | None = None
    #: live processes that map exactly these bytes (``--runtime``)
    loaded_by: tuple[LoadedBy, ...] = ()
    #: False: bytes only a process still holds (deleted or replaced on disk, or a container's
    #: file outside the scanned root); ``ref.path`` is the path the processes mapped
    on_disk: bool = True
    #: for a loaded copy: the digest of the other file at its path now (drift)
    disk_sha256: Sha256 | None = None
    #: known only from the processes that map it, not from the scanned tree (a deleted or
    #: replaced file, a container's own file, a file outside the walked subtrees)
    loaded_copy: bool = False


class ImageTrust(Struct, frozen=True):
    """What the image's signatures and attestations establish under the trust policy."""

    signed: bool
    signer: str | None
    slsa_level: int | None  # verified SLSA Build level, None without accepted provenance
    builder: str | None
    source_repo: str | None
    checked: int  # signature and attestation layers examined
    rejected: tuple[str, ...] = ()  # one reason per rejected layer


class Finding(Struct, frozen=True):
    """A scan-level finding that a `--fail-on` rule can match."""

    kind: FindingKind
    message: str
    paths: tuple[str, ...] = ()
    #: other ``--fail-on`` kinds this finding matches: a file that is no readable library
    #: still has an integrity verdict (an unreadable packaged file may be modified)
    also: tuple[FindingKind, ...] = ()


class ContainerLink(Struct, frozen=True):
    """A container running on a host, linked to the image it runs (found in the node's
    containerd or Docker store): the image's report is keyed by ``image_digest`` (its manifest
    digest) or, for a Docker data root that keeps no manifest, by ``image_config``."""

    engine: str  # "containerd" | "docker"
    namespace: str  # containerd namespace ("k8s.io"); "" for Docker
    id: str
    image_name: str
    image_digest: OciDigest | None
    image_config: OciDigest | None


class GpuDevice(Struct, frozen=True):
    """One GPU of a node, as the driver lists it (CycloneDX ``device`` component)."""

    bus_id: str  # PCI location, "0000:17:00.0" (nvidia-smi's "00000000:17:00.0" shortened)
    model: str | None
    uuid: str | None = None
    minor: int | None = None  # /dev/nvidiaN
    vbios: str | None = None
    architecture: str | None = None  # nvidia-smi's product_architecture ("Hopper")
    compute_capability: str | None = None  # "9.0", from the model name (scanner/node/data)
    source: str = ""  # the file (or "nvidia-smi") it was read from
    #: nvidia-smi's virtualization mode: "None", "Pass-Through", "VGPU", "Host VGPU", ...
    virtualization: str | None = None


class DriverFacts(Struct, frozen=True):
    """The node's NVIDIA driver: the loaded kernel module and its user-space libraries."""

    version: str | None  # the loaded kernel module's version ("535.129.03")
    source: str | None = None  # where ``version`` was read
    flavor: str | None = None  # "open" | "proprietary" kernel module, when it says
    build: str | None = None  # the NVRM line's build stamp
    #: versions of the user-space libraries on the node (libcuda, NVML), from their ELF
    libcuda: tuple[str, ...] = ()
    nvml: tuple[str, ...] = ()
    #: the newest CUDA the driver runs ("12.2"), from nvidia-smi or the sourced table
    cuda_max: str | None = None
    cuda_max_source: str | None = None
    cuda_max_at_least: bool = False  # the driver is newer than the table's newest row


class InjectedFile(Struct, frozen=True):
    """A host file the NVIDIA Container Toolkit puts into containers (CDI or legacy list)."""

    host_path: str  # absolute, inside the scanned root
    container_paths: tuple[str, ...]  # where containers see it (empty: the legacy list's lib dir)
    sources: tuple[str, ...]  # "cdi:/etc/cdi/nvidia.yaml", "nvidia-container-cli list"
    #: CDI devices it comes with ("nvidia.com/gpu=all"; "nvidia.com/gpu=*": every one)
    devices: tuple[str, ...] = ()
    digests: Digests | None = None
    family: str | None = None  # GPU library family of its name (libcuda, nvidia-ml)
    version: str | None = None  # from the file name (libcuda.so.535.129.03)
    error: str | None = None  # why it could not be hashed (missing, not a regular file)


class L4tFacts(Struct, frozen=True):
    """A Jetson's Linux for Tegra release and the JetPack it belongs to."""

    release: str  # "36.4.0"
    source: str  # "/etc/nv_tegra_release" or "dpkg nvidia-l4t-core 36.4.0-20240912212859"
    board: str | None = None
    jetpack: str | None = None  # None when the sourced table does not list the release
    cuda: str | None = None  # JetPack's CUDA


class ConditionFact(Struct, frozen=True):
    """A fact of the host that decides a bulletin's condition (scanner/advisories/conditions.py
    names them): its value ("true", "false|true") and where it was read."""

    name: str  # "cdi_mode"
    value: str
    source: str  # '/etc/nvidia-container-runtime/config.toml: mode = "cdi"'


class NodeFacts(Struct, frozen=True):
    """What a GPU node says beyond its files: driver, GPUs, injected files, Jetson release,
    and the facts that decide bulletins' conditions."""

    driver: DriverFacts | None = None
    gpus: tuple[GpuDevice, ...] = ()
    injected: tuple[InjectedFile, ...] = ()
    #: CDI create-symlinks hooks: (link in the container, its target)
    container_links: tuple[tuple[str, str], ...] = ()
    device_nodes: tuple[str, ...] = ()  # /dev entries the toolkit gives containers
    l4t: L4tFacts | None = None
    notes: tuple[str, ...] = ()  # what disagreed or could not be read ("driver-mismatch: ...")
    #: decided conditions only, by name; an undecided one is absent (never a default)
    conditions: tuple[ConditionFact, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.driver
            or self.gpus
            or self.injected
            or self.device_nodes
            or self.l4t
            or self.notes
            or self.conditions
        )


class Product(Struct, frozen=True):
    """An NVIDIA product a security bulletin may name, present in the root: a CUDA Toolkit
    release, a toolkit tool binary, nvJPEG, the Container Toolkit, the driver, ... (one per
    product and version; `scanner.detect.products` is the table)."""

    key: str  # the table's key: "cuda-toolkit", "cuobjdump", "driver", ...
    name: str  # as NVIDIA's bulletins name it
    version: str | None  # None: present, version unknown (a finding for the matcher)
    purl: str | None = None
    cpes: tuple[str, ...] = ()  # CPE 2.3: NVD's spelling first, then NVIDIA's
    paths: tuple[str, ...] = ()  # the files or install directories it was found at
    sha256: Sha256 | None = None  # a single binary's digest (tools)
    owner: str | None = None  # purl of the package that carries it
    toolkit: str | None = None  # the CUDA Toolkit release a tool belongs to ("12.4.1")
    #: a toolkit known only by its compiler's banner ("release 12.4"): the line, not the update
    line: str | None = None
    branch: str | None = None  # a driver's branch ("R535")
    layer: OciDigest | None = None
    evidence: tuple[Evidence, ...] = ()


class ScanResult(Struct, frozen=True):
    """Everything a scan produced; input of every output format."""

    asset: AssetInfo
    libraries: tuple[GpuLibrary, ...]
    #: owner packages of a GPU library or product, and the GPU stack's packages OSV records name
    packages: tuple[Package, ...]
    findings: tuple[Finding, ...]
    skipped: tuple[Skipped, ...]
    started_at: str  # RFC 3339 UTC
    tool_version: str
    stats: dict[str, float] = field(default_factory=dict)
    image_trust: ImageTrust | None = None
    #: containers running on the host (an agent's host report), each linked to its image
    containers: tuple[ContainerLink, ...] = ()
    #: None: live processes were not looked at (no ``--runtime``)
    runtime: RuntimeScan | None = None
    #: a host's driver, GPUs, container-toolkit injections and Jetson release (host scans)
    node: NodeFacts | None = None
    #: the NVIDIA products bulletins name, found in the root (toolkit, tools, driver, ...)
    products: tuple[Product, ...] = ()


class ProgressStage(StrEnum):
    """What a `Progress` event reports on."""

    WALK = "walk"  # host files walked
    LAYERS = "layers"  # image layers read
    CATALOG = "catalog"
    HASH = "hash"  # bytes of host candidates hashed
    VERIFY = "verify"


class Progress(Struct, frozen=True):
    """How far a scan has got, for a progress display (the stages themselves never print);
    ``total`` is None while unknown."""

    stage: ProgressStage
    done: int = 0
    total: int | None = None
    unit: str = ""  # "files", "layers", "bytes"
    candidates: int = 0  # GPU-library candidates found so far


#: Receives `Progress` events; called on the scanning thread, so it must be quick.
ProgressFn = Callable[[Progress], None]
