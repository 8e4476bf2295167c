"""Identification of one GPU library from every piece of evidence, and scan-level checks.

`build_context` reads the detection metadata a source captured (cuDNN headers, CUDA toolkit
version files) and the image config once per scan; `identify` then weighs, per file, the
ELF facts, the file name, the owner package, and that context, keeping each piece as
`model.Evidence`; `find_mixed_cudnn` compares the cuDNN sub-libraries of one directory.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from scanner.detect.classifiers import (
    Classifier,
    CudaRule,
    NameMatch,
    classify_name,
    package_matches,
)
from scanner.model import (
    AssetInfo,
    Confidence,
    ElfFacts,
    Evidence,
    FileFacts,
    Finding,
    Identification,
    Package,
    Skipped,
)

_HIGH, _MEDIUM, _LOW = Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW
_BINARY, _MANIFEST, _FILENAME = "binary-analysis", "manifest-analysis", "filename"
_HASH = "hash-comparison"

_DEFINE_RE: Final = re.compile(
    rb"^[ \t]*#[ \t]*define[ \t]+CUDNN_(MAJOR|MINOR|PATCHLEVEL)[ \t]+(\d+)", re.MULTILINE
)
_VERSION_TXT_RE: Final = re.compile(rb"CUDA Version (\d+(?:\.\d+)+)")
_LEADING_VERSION_RE: Final = re.compile(r"^(?:\d+:)?(\d+(?:\.\d+)*)")
_MARKER_RE: Final = re.compile(r"cudnn_version_(\d+)_(\d+)_(\d+)_(\d+)")

# CUDA major in owner package names and versions; each names the convention it reads.
_PKG_NAME_CUDA: Final = (
    re.compile(r"[-_]cu(\d{2})(?:$|[-_])"),  # pip: nvidia-cudnn-cu12, tensorrt-cu12-libs
    re.compile(r"-cuda-(\d{2})(?:$|-)"),  # NVIDIA deb/rpm: libcudnn9-cuda-12
    re.compile(r"-(\d{2})-\d{1,2}$"),  # NVIDIA CUDA deb/rpm: libcublas-12-6, cuda-cudart-12-6
)
_PKG_VERSION_CUDA: Final = (
    re.compile(r"[+~]cuda(\d{2})\.\d"),  # libnccl2 2.21.5-1+cuda12.4, nvidia-cudnn ~cuda11.7
    re.compile(r"\+cu(\d{2})\d\b"),  # torch 2.5.1+cu121 (bundles cuDNN in torch/lib)
)
_CONDA_BUILD_CUDA: Final = re.compile(r"cuda(\d{2})")

# CUDA major or version from install paths.
_TARBALL_RE: Final = re.compile(
    r"/cudnn-linux-[A-Za-z0-9_]+-(\d+\.\d+\.\d+\.\d+)_cuda(\d+)-archive/"
)
_PATH_CUDA: Final = (
    re.compile(r"/nvidia/cu(\d{2})/lib/"),  # cu13 wheels: site-packages/nvidia/cu13/lib
    re.compile(r"/cuda-(\d{2})\.\d+/"),  # toolkit: /usr/local/cuda-12.4/...
)
_SYSTEM_PREFIXES: Final = ("/usr/", "/lib/", "/lib64/")

# Ranks break ties between claims of equal confidence: lower is preferred.
_V_MARKER, _V_INTS, _V_OWNER, _V_DRIVER, _V_NAME, _V_PATH, _V_JSON, _V_HEADER, _V_CONFIG = range(9)
_C_BUILD, _C_REFS, _C_OWN, _C_OWNER, _C_JSON, _C_PATH, _C_MAP, _C_CONFIG = range(8)


@dataclass(frozen=True, slots=True)
class HeaderVersion:
    """A cuDNN version header and the install tree it describes."""

    path: str
    root: str  # e.g. "/usr" for /usr/include/x86_64-linux-gnu/cudnn_version_v9.h
    version: str  # "9.1.0" (headers carry no build number)


@dataclass(frozen=True, slots=True)
class ToolkitVersion:
    """A CUDA toolkit's version.json / version.txt and the directory it describes."""

    path: str
    root: str  # the toolkit directory, e.g. /usr/local/cuda-12.4
    cuda_version: str | None  # the toolkit release, "12.4.1"
    components: tuple[tuple[str, str], ...]  # version.json key -> version ("cuda_cudart", ...)


@dataclass(frozen=True, slots=True)
class DigestRecord:
    """Another record of a file's exact bytes, wherever the file lies: a package database row
    (a wheel's RECORD copied along with a relocated CUDA toolkit tree) or a signed catalog
    entry. Same SHA-256, same bytes: its version is the file's version."""

    sha256: str
    path: str  # the file as the record names it
    version: str
    source: str  # the record, for the evidence: a purl, "catalog NAME signed by ..."
    family: str | None = None  # a catalog entry's family; else judged by ``package``
    package: Package | None = None  # the package whose database holds the row
    cuda_major: int | None = None


@dataclass(frozen=True, slots=True)
class DetectContext:
    """What the scan's metadata says, for every `identify` call of that scan."""

    cudnn_headers: tuple[HeaderVersion, ...] = ()
    toolkits: tuple[ToolkitVersion, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # image config Env
    labels: tuple[tuple[str, str], ...] = ()  # image config Labels
    skipped: tuple[Skipped, ...] = ()  # metadata files that could not be read
    #: records of the scan's candidate digests, by SHA-256 (see `digest_records`)
    records: Mapping[str, tuple[DigestRecord, ...]] = field(default_factory=dict)


def build_context(metadata: Mapping[str, bytes], info: AssetInfo) -> DetectContext:
    """Parse cuDNN headers and CUDA version files among ``metadata``; keep the image config."""
    headers: list[HeaderVersion] = []
    toolkits: list[ToolkitVersion] = []
    skipped: list[Skipped] = []
    for path in sorted(metadata):
        base = posixpath.basename(path)
        data = metadata[path]
        if base.startswith("cudnn") and base.endswith(".h"):
            version = _header_version(data)
            if version is not None:
                headers.append(HeaderVersion(path, _tree_root(path, ("include",)), version))
        elif base == "version.json":
            try:
                doc = json.loads(data)
            except (ValueError, UnicodeDecodeError) as e:
                skipped.append(Skipped(path, f"invalid CUDA version.json: {e}", "detect"))
                continue
            toolkit = _toolkit_from_json(path, doc)
            if toolkit is None:
                skipped.append(Skipped(path, "version.json has no CUDA versions", "detect"))
            else:
                toolkits.append(toolkit)
        elif base == "version.txt":
            m = _VERSION_TXT_RE.search(data)
            if m is not None:
                toolkits.append(
                    ToolkitVersion(path, posixpath.dirname(path), m.group(1).decode(), ())
                )
    return DetectContext(
        cudnn_headers=tuple(headers),
        toolkits=tuple(toolkits),
        env=info.env,
        labels=info.labels,
        skipped=tuple(skipped),
    )


def _header_version(data: bytes) -> str | None:
    found: dict[bytes, str] = {}
    for m in _DEFINE_RE.finditer(data):
        found.setdefault(m.group(1), m.group(2).decode())
    if len(found) < 3:
        return None  # cuDNN 8+ cudnn.h only includes cudnn_version.h
    return f"{int(found[b'MAJOR'])}.{int(found[b'MINOR'])}.{int(found[b'PATCHLEVEL'])}"


def _toolkit_from_json(path: str, doc: object) -> ToolkitVersion | None:
    if not isinstance(doc, dict):
        return None
    components: list[tuple[str, str]] = []
    cuda: str | None = None
    for key, entry in doc.items():
        if not isinstance(key, str) or not isinstance(entry, dict):
            continue
        version = entry.get("version")
        if not isinstance(version, str) or _LEADING_VERSION_RE.match(version) is None:
            continue
        if key == "cuda":
            cuda = version
        else:
            components.append((key, version))
    if cuda is None and not components:
        return None
    return ToolkitVersion(path, posixpath.dirname(path), cuda, tuple(sorted(components)))


def _tree_root(path: str, markers: tuple[str, ...]) -> str:
    """The install tree of a file: the directory above its last include/ or lib*/ part."""
    parts = path.split("/")
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] in markers:
            return "/".join(parts[:i]) or "/"
    return posixpath.dirname(path)


_LIB_DIRS: Final = ("lib", "lib64", "lib32", "libx32")


# -- identification ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Claim:
    parts: tuple[int, ...]
    value: str
    confidence: Confidence
    rank: int


@dataclass(frozen=True, slots=True)
class _MajorClaim:
    major: int
    confidence: Confidence
    rank: int


class _Collector:
    """Evidence in the order it was found, with the claims it supports."""

    def __init__(self) -> None:
        self.evidence: list[Evidence] = []
        self.versions: list[_Claim] = []
        self.majors: list[_MajorClaim] = []

    def name(self, value: str, method: str, source: str, confidence: Confidence) -> None:
        self.evidence.append(Evidence("name", value, method, source, confidence))

    def version(
        self, value: str, method: str, source: str, confidence: Confidence, rank: int
    ) -> None:
        parts = _parts(value)
        if parts is None:
            return
        self.evidence.append(Evidence("version", value, method, source, confidence))
        self.versions.append(_Claim(parts, value, confidence, rank))

    def cuda(self, major: int, method: str, source: str, confidence: Confidence, rank: int) -> None:
        if not 1 <= major < 100:
            return
        self.evidence.append(Evidence("cuda-major", str(major), method, source, confidence))
        self.majors.append(_MajorClaim(major, confidence, rank))


def _parts(version: str) -> tuple[int, ...] | None:
    if re.fullmatch(r"\d+(?:\.\d+)*", version) is None:
        return None
    return tuple(int(p) for p in version.split("."))


def _package_version(version: str) -> str | None:
    """Upstream dotted version of a package version: 1:9.7.0.66-1 -> 9.7.0.66."""
    m = _LEADING_VERSION_RE.match(version)
    return m.group(1) if m else None


def _resolve_version(claims: list[_Claim], abi_major: int | None) -> _Claim | None:
    """The file's own strongest claim, refined by the most precise claim agreeing with it.

    A claim whose major contradicts the SONAME cannot describe this file (a package's version
    is not the version of a replaced file), so it never wins.
    """
    usable = [c for c in claims if abi_major is None or c.parts[0] == abi_major]
    if not usable:
        return None
    truth = max(usable, key=lambda c: (c.confidence.score, -c.rank))
    agreeing = [c for c in usable if c.parts[: len(truth.parts)] == truth.parts]
    return max(agreeing, key=lambda c: (len(c.parts), c.confidence.score, -c.rank))


def _resolve_major(claims: list[_MajorClaim]) -> int | None:
    if not claims:
        return None
    return max(claims, key=lambda c: (c.confidence.score, -c.rank)).major


def _decode_cudnn_int(value: int) -> str | None:
    major, minor, patch = value >> 16, (value >> 8) & 0xFF, value & 0xFF
    return f"{major}.{minor}.{patch}" if 1 <= major < 100 else None


def _owner_cuda_major(pkg: Package) -> tuple[int, str] | None:
    for rx in _PKG_NAME_CUDA:
        m = rx.search(pkg.name)
        if m is not None:
            return int(m.group(1)), f"package name {pkg.name}"
    for rx in _PKG_VERSION_CUDA:
        m = rx.search(pkg.version)
        if m is not None:
            return int(m.group(1)), f"package version {pkg.name} {pkg.version}"
    extra = dict(pkg.extra)
    for key in ("build", "build_string"):
        if key in extra:
            m = _CONDA_BUILD_CUDA.search(extra[key])
            if m is not None:
                return int(m.group(1)), f"package build {pkg.name} {extra[key]}"
    return None


def _abi_suffix_major(suffix: str | None) -> int | None:
    if not suffix:
        return None
    return int(suffix.split(".")[0])


def identify(
    path: str,
    facts: FileFacts | None,
    owner: Package | None,
    context: DetectContext,
    *,
    aliases: Sequence[str] = (),
) -> Identification:
    """Family, component, version and CUDA major of one library, with every piece of evidence.

    ``path`` is the real file's absolute path in the root; ``aliases`` its symlink names,
    used when the real file's own name is not a library name.
    """
    elf = facts.elf if facts is not None else None
    base = posixpath.basename(path)
    by_name = classify_name(base)
    name_source = base
    if by_name is None:
        for alias in aliases:
            by_name = classify_name(posixpath.basename(alias))
            if by_name is not None:
                name_source = posixpath.basename(alias)
                break
    by_soname = classify_name(elf.soname) if elf is not None and elf.soname else None
    chosen = by_soname or by_name
    arch = elf.machine if elf is not None else None
    soname = elf.soname if elf is not None else None
    if chosen is None:
        return Identification(
            family="unknown",
            component=base,
            version=None,
            cuda_major=None,
            arch=arch,
            soname=soname,
        )
    cls = chosen.classifier
    col = _Collector()

    # 1. name: the file name says, the SONAME (the bytes) confirms or overrides
    if by_name is not None:
        col.name(by_name.component, _FILENAME, name_source, _MEDIUM)
    if by_soname is not None:
        col.name(by_soname.component, _BINARY, f"soname {soname}", _HIGH)
    # The ABI major (libcudnn_ops.so.9 -> 9) rules out claims of another major.
    abi_major = None
    if cls.soname_is_major:
        if by_soname is not None:
            abi_major = _abi_suffix_major(by_soname.suffix)
        elif by_name is not None and by_name.classifier == cls:
            abi_major = _abi_suffix_major(by_name.suffix)

    # 2. version claims
    if elf is not None:
        _binary_versions(col, cls, elf, base)
    if by_name is not None and by_name.classifier == cls and by_name.suffix:
        suffix = by_name.suffix
        n_parts = suffix.count(".") + 1
        same_as_soname = by_soname is not None and by_soname.suffix == suffix
        if n_parts >= 3 or (n_parts == 2 and by_soname is not None and not same_as_soname):
            col.version(suffix, _FILENAME, name_source, _MEDIUM, _V_NAME)
    if owner is not None and package_matches(cls, owner.name):
        v = _package_version(owner.version)
        if v is not None:
            col.version(
                v, _MANIFEST, owner.purl or f"{owner.manager} {owner.name}", _HIGH, _V_OWNER
            )
    records = _records_for(cls, facts, owner, context)
    for rec in records:
        v = _package_version(rec.version)
        if v is not None:
            col.version(v, _HASH, f"{rec.source}: {rec.path} has this SHA-256", _HIGH, _V_OWNER)
    tarball = _TARBALL_RE.search(path) if cls.family == "cudnn" else None
    if tarball is not None:
        col.version(tarball.group(1), _FILENAME, f"path {tarball.group(0)}", _MEDIUM, _V_PATH)
    toolkits = [t for t in context.toolkits if _under(path, aliases, t.root)]
    if cls.version_json_key is not None:
        for t in toolkits:
            for key, value in t.components:
                if key == cls.version_json_key:
                    v = _package_version(value)
                    if v is not None:
                        col.version(v, _MANIFEST, f"{t.path} {key}", _MEDIUM, _V_JSON)
    if cls.family == "cudnn":
        lib_root = _tree_root(path, _LIB_DIRS)
        for h in context.cudnn_headers:
            if h.root == lib_root:
                col.version(h.version, "source-code-analysis", h.path, _MEDIUM, _V_HEADER)
    system = path.startswith(_SYSTEM_PREFIXES) and "-packages/" not in path
    if system:
        _config_versions(col, cls, context)

    version_claim = _resolve_version(col.versions, abi_major)
    version = version_claim.value if version_claim is not None else None

    # 3. CUDA major claims
    if cls.cuda_rule is not CudaRule.NONE:
        _cuda_majors(
            col, cls, elf, by_soname, version_claim, owner, path, toolkits, system, context
        )
        for rec in records:
            _record_cuda_major(col, rec)
    cuda_major = _resolve_major(col.majors) if cls.cuda_rule is not CudaRule.NONE else None

    return Identification(
        family=cls.family,
        component=chosen.component,
        version=version,
        cuda_major=cuda_major,
        arch=arch,
        evidence=tuple(col.evidence),
        soname=soname,
    )


def _records_for(
    cls: Classifier, facts: FileFacts | None, owner: Package | None, context: DetectContext
) -> list[DigestRecord]:
    """The records of these bytes that describe this family (the owner's own row aside)."""
    if facts is None or not context.records:
        return []
    out = []
    for rec in context.records.get(facts.digests.sha256, ()):
        if rec.package is not None and owner is not None and rec.package.purl == owner.purl:
            continue  # already the owner's claim
        if rec.family is not None:
            if rec.family != cls.family:
                continue
        elif rec.package is None or not package_matches(cls, rec.package.name):
            continue
        out.append(rec)
    return out


def _record_cuda_major(col: _Collector, rec: DigestRecord) -> None:
    if rec.cuda_major is not None:
        col.cuda(rec.cuda_major, _HASH, f"{rec.source}: {rec.path}", _HIGH, _C_OWNER)
    elif rec.package is not None:
        hit = _owner_cuda_major(rec.package)
        if hit is not None:
            col.cuda(hit[0], _HASH, f"{hit[1]} (same SHA-256 as {rec.path})", _HIGH, _C_OWNER)


def digest_records(
    wanted: set[str],
    packages: Sequence[Package],
    catalogs: Sequence[tuple[str, Sequence[tuple[str, str, str | None, str | None, int | None]]]],
) -> dict[str, tuple[DigestRecord, ...]]:
    """Index the SHA-256 rows of ``packages`` and catalog entries that name a digest in
    ``wanted`` (the scan's candidates; every other row is ignored, so a large site-packages
    costs one set lookup per row).

    ``catalogs``: (label, entries as (path, sha256, family, version, cuda major)).
    """
    out: dict[str, list[DigestRecord]] = {}
    for pkg in packages:
        for row in pkg.files:
            if row.algorithm == "sha256" and row.digest in wanted:
                rec = DigestRecord(row.digest, row.path, pkg.version, pkg.purl, package=pkg)
                out.setdefault(row.digest, []).append(rec)
    for label, entries in catalogs:
        for path, sha256, family, version, cuda_major in entries:
            if sha256 in wanted and version:
                rec = DigestRecord(sha256, path, version, label, family, cuda_major=cuda_major)
                out.setdefault(sha256, []).append(rec)
    return {k: tuple(v) for k, v in out.items()}


def _binary_versions(col: _Collector, cls: Classifier, elf: ElfFacts, base: str) -> None:
    for marker in elf.markers:
        m = _MARKER_RE.match(marker)
        if m is not None:
            col.version(
                ".".join(str(int(g)) for g in m.groups()),
                _BINARY,
                f"marker {marker}",
                _HIGH,
                _V_MARKER,
            )
    for sym, value in elf.version_ints:
        decoded = _decode_cudnn_int(value)
        if decoded is not None:
            col.version(decoded, _BINARY, f"symbol {sym}={value:#08x}", _HIGH, _V_INTS)
    if elf.version_strings and cls.cuda_rule is CudaRule.NONE:
        named = classify_name(base)
        claimed = named.suffix if named is not None else None
        if claimed in elf.version_strings:
            col.version(claimed, _BINARY, f"string {claimed}", _HIGH, _V_DRIVER)
        elif len(elf.version_strings) == 1:
            s = elf.version_strings[0]
            col.version(s, _BINARY, f"string {s}", _MEDIUM, _V_DRIVER)
        else:
            for s in elf.version_strings:
                col.version(s, _BINARY, f"string {s} (one of several)", _LOW, _V_DRIVER)


def _config_versions(col: _Collector, cls: Classifier, context: DetectContext) -> None:
    env = dict(context.env)
    labels = dict(context.labels)
    for key in cls.config_env:
        if key in env:
            v = _package_version(env[key])
            if v is not None:
                col.version(v, "other", f"image env {key}={env[key]}", _LOW, _V_CONFIG)
    for key in cls.config_labels:
        if key in labels:
            v = _package_version(labels[key])
            if v is not None:
                col.version(v, "other", f"image label {key}={labels[key]}", _LOW, _V_CONFIG)


def _cuda_majors(
    col: _Collector,
    cls: Classifier,
    elf: ElfFacts | None,
    by_soname: NameMatch | None,
    version: _Claim | None,
    owner: Package | None,
    path: str,
    toolkits: list[ToolkitVersion],
    system: bool,
    context: DetectContext,
) -> None:
    soname_major = _abi_suffix_major(by_soname.suffix) if by_soname is not None else None
    if cls.cuda_rule is CudaRule.BUILT and elf is not None:
        if elf.cudart_build is not None:
            col.cuda(
                elf.cudart_build // 1000,
                _BINARY,
                f"cudnnGetCudartVersion returns {elf.cudart_build}",
                _HIGH,
                _C_BUILD,
            )
        refs = elf.referenced_cuda_majors
        if len(refs) == 1:
            col.cuda(
                refs[0],
                _BINARY,
                f"references CUDA {refs[0]} libraries (libcublasLt.so.N)",
                _HIGH,
                _C_REFS,
            )
        else:
            for r in refs:
                col.cuda(
                    r, _BINARY, f"references CUDA {r} libraries (one of several)", _LOW, _C_REFS
                )
    if cls.cuda_rule in (CudaRule.OWN, CudaRule.MAPPED):
        own: tuple[int, str, Confidence] | None = None
        if soname_major is not None and cls.soname_is_major:
            own = (soname_major, f"soname major {soname_major}", _HIGH)
        elif version is not None:
            own = (version.parts[0], f"version {version.value}", version.confidence)
        if own is not None:
            lib_major, source, conf = own
            if cls.cuda_rule is CudaRule.OWN:
                col.cuda(
                    lib_major,
                    _BINARY if conf is _HIGH else _FILENAME,
                    f"{cls.family} {source}",
                    conf,
                    _C_OWN,
                )
            else:
                mapped = dict(cls.cuda_major_map).get(lib_major)
                if mapped is not None:
                    col.cuda(
                        mapped,
                        "other",
                        f"{cls.family} {lib_major}.x ships only with CUDA {mapped} ({source})",
                        _MEDIUM,
                        _C_MAP,
                    )
    if owner is not None:
        hit = _owner_cuda_major(owner)
        if hit is not None:
            col.cuda(hit[0], _MANIFEST, hit[1], _HIGH, _C_OWNER)
    for t in toolkits:
        if t.cuda_version is not None:
            parts = _parts(_package_version(t.cuda_version) or "")
            if parts:
                col.cuda(parts[0], _MANIFEST, f"{t.path} cuda {t.cuda_version}", _MEDIUM, _C_JSON)
    for rx in (_TARBALL_RE, *_PATH_CUDA):
        m = rx.search(path)
        if m is not None:
            col.cuda(
                int(m.group(m.lastindex or 1)), _FILENAME, f"path {m.group(0)}", _MEDIUM, _C_PATH
            )
            break
    if system:
        env = dict(context.env)
        cuda_version = env.get("CUDA_VERSION")
        parts = _parts(_package_version(cuda_version) or "") if cuda_version else None
        if parts:
            col.cuda(parts[0], "other", f"image env CUDA_VERSION={cuda_version}", _LOW, _C_CONFIG)


def _under(path: str, aliases: Sequence[str], root: str) -> bool:
    prefix = root.rstrip("/") + "/"
    return path.startswith(prefix) or any(a.startswith(prefix) for a in aliases)


# -- scan-level checks ------------------------------------------------------------------------


def find_mixed_cudnn(libs: Sequence[tuple[str, Identification]]) -> list[Finding]:
    """A "mixed" finding per directory whose cuDNN sub-libraries of one major differ in version.

    Versions compare on major.minor.patch (one file may know the build number, its siblings
    not); cuDNN 8 and 9 side by side in one directory are separate installs, not a mix.
    """
    groups: dict[tuple[str, int], dict[tuple[int, ...], list[str]]] = {}
    for path, ident in libs:
        if ident.family != "cudnn" or ident.version is None:
            continue
        parts = _parts(ident.version)
        if parts is None:
            continue
        key = (posixpath.dirname(path), parts[0])
        groups.setdefault(key, {}).setdefault(parts[:3], []).append(path)
    findings: list[Finding] = []
    for (directory, major), by_version in sorted(groups.items()):
        if len(by_version) < 2:
            continue
        described = "; ".join(
            f"{'.'.join(map(str, v))} ({', '.join(sorted(posixpath.basename(p) for p in ps))})"
            for v, ps in sorted(by_version.items())
        )
        paths = tuple(sorted(p for ps in by_version.values() for p in ps))
        findings.append(
            Finding(
                "mixed", f"mixed cuDNN {major} sub-libraries in {directory}: {described}", paths
            )
        )
    return findings


def fill_from_siblings(libs: Sequence[tuple[str, Identification]]) -> list[Identification]:
    """Give a cuDNN sub-library without its own version the one its siblings agree on.

    Most cuDNN 9 sub-libraries carry no version of their own (only cudnn_graph, cudnn_ops
    and cudnn_adv export one), so an unowned tarball install would leave them blank. Within
    one directory and SONAME major, when every sibling that knows its version agrees on
    major.minor.patch, the most precise of those versions is taken, as low-confidence
    evidence naming the sibling; when they disagree (a mixed install) nothing is guessed.
    """
    known: dict[tuple[str, str], dict[tuple[int, ...], tuple[str, str]]] = {}
    majors: dict[tuple[str, str], set[int]] = {}
    for path, ident in libs:
        if ident.family != "cudnn":
            continue
        key = (posixpath.dirname(path), _soname_major(ident, path))
        if ident.cuda_major is not None:
            majors.setdefault(key, set()).add(ident.cuda_major)
        parts = _parts(ident.version) if ident.version else None
        if parts is None:
            continue
        best = known.setdefault(key, {}).get(parts[:3])
        if best is None or len(ident.version or "") > len(best[0]):
            known[key][parts[:3]] = (ident.version or "", path)
    out: list[Identification] = []
    for path, ident in libs:
        key = (posixpath.dirname(path), _soname_major(ident, path))
        if ident.family != "cudnn":
            out.append(ident)
            continue
        evidence = list(ident.evidence)
        version, cuda_major = ident.version, ident.cuda_major
        versions = known.get(key, {})
        if version is None and len(versions) == 1:
            version, source = next(iter(versions.values()))
            evidence.append(
                Evidence(
                    "version",
                    version,
                    "other",
                    f"sibling {posixpath.basename(source)} in the same directory",
                    Confidence.LOW,
                )
            )
        cuda = majors.get(key, set())
        if cuda_major is None and len(cuda) == 1:
            cuda_major = next(iter(cuda))
            evidence.append(
                Evidence(
                    "cuda-major",
                    str(cuda_major),
                    "other",
                    "cuDNN siblings in the same directory",
                    Confidence.LOW,
                )
            )
        if (version, cuda_major) == (ident.version, ident.cuda_major):
            out.append(ident)
        else:
            out.append(
                dataclasses.replace(
                    ident, version=version, cuda_major=cuda_major, evidence=tuple(evidence)
                )
            )
    return out


def _soname_major(ident: Identification, path: str) -> str:
    name = ident.soname or posixpath.basename(path)
    m = re.search(r"\.so\.(\d+)", name)
    return m.group(1) if m else ""


def fill_from_identical(
    libs: Sequence[tuple[str, str | None, Identification]],
) -> list[Identification]:
    """Give a library without a version the one known for byte-identical files in the scan.

    An unowned copy of a packaged library (a vendored libcudart next to the pip one) has no
    version of its own; identical SHA-256 means identical bytes, so the other file's version
    and CUDA major apply with high confidence, recorded as hash-comparison evidence.
    """
    by_digest: dict[str, tuple[str, Identification]] = {}
    for path, sha, ident in libs:
        if sha and ident.version is not None:
            best = by_digest.get(sha)
            if best is None or len(ident.version) > len(best[1].version or ""):
                by_digest[sha] = (path, ident)
    out: list[Identification] = []
    for path, sha, ident in libs:
        src = by_digest.get(sha) if sha else None
        if src is None or src[0] == path or ident.version is not None:
            out.append(ident)
            continue
        other = src[1]
        evidence = (
            *ident.evidence,
            Evidence(
                "version",
                other.version or "",
                "hash-comparison",
                f"same SHA-256 as {src[0]}",
                Confidence.HIGH,
            ),
        )
        out.append(
            dataclasses.replace(
                ident,
                version=other.version,
                cuda_major=ident.cuda_major if ident.cuda_major is not None else other.cuda_major,
                evidence=evidence,
            )
        )
    return out
