"""Identification of one GPU library file from every piece of evidence.

`identify` weighs, per file, the ELF facts, the file name, the owner package, other records of
the same bytes and the scan's `DetectContext`, keeping each piece as `model.Evidence`; the
strongest claims give the version and the CUDA major.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from typing import Final

from msgspec import Struct

from scanner.detect.classifiers import (
    Classifier,
    CudaRule,
    NameMatch,
    classify_name,
    package_matches,
)
from scanner.detect.context import DetectContext, DigestRecord, ToolkitVersion, tree_root
from scanner.detect.packages import OutOfRange, package_cuda_major
from scanner.model import (
    Confidence,
    ElfFacts,
    Evidence,
    EvidenceField,
    EvidenceMethod,
    FileFacts,
    Identification,
    Package,
)
from scanner.versions import dotted_parts, dotted_prefix

_HIGH, _MEDIUM, _LOW = Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW
_BINARY, _MANIFEST = EvidenceMethod.BINARY_ANALYSIS, EvidenceMethod.MANIFEST_ANALYSIS
_FILENAME, _HASH, _OTHER = (
    EvidenceMethod.FILENAME,
    EvidenceMethod.HASH_COMPARISON,
    EvidenceMethod.OTHER,
)

_MARKER_RE: Final = re.compile(r"cudnn_version_(\d+)_(\d+)_(\d+)_(\d+)")

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

_LIB_DIRS: Final = ("lib", "lib64", "lib32", "libx32")


class _Claim(Struct, frozen=True):
    parts: tuple[int, ...]
    value: str
    confidence: Confidence
    rank: int


class _MajorClaim(Struct, frozen=True):
    major: int
    confidence: Confidence
    rank: int


class _Collector:
    """Evidence in the order it was found, with the claims it supports."""

    def __init__(self) -> None:
        self.evidence: list[Evidence] = []
        self.versions: list[_Claim] = []
        self.majors: list[_MajorClaim] = []

    def name(self, value: str, method: EvidenceMethod, source: str, confidence: Confidence) -> None:
        self.evidence.append(Evidence(EvidenceField.NAME, value, method, source, confidence))

    def version(
        self,
        value: str,
        method: EvidenceMethod,
        source: str,
        confidence: Confidence,
        rank: int,
    ) -> None:
        parts = dotted_parts(value)
        if parts is None:
            return
        self.evidence.append(Evidence(EvidenceField.VERSION, value, method, source, confidence))
        self.versions.append(_Claim(parts, value, confidence, rank))

    def cuda(
        self, major: int, method: EvidenceMethod, source: str, confidence: Confidence, rank: int
    ) -> None:
        if not 1 <= major < 100:
            return
        self.evidence.append(
            Evidence(EvidenceField.CUDA_MAJOR, str(major), method, source, confidence)
        )
        self.majors.append(_MajorClaim(major, confidence, rank))


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
    extra = dict(pkg.extra)
    build = extra.get("build") or extra.get("build_string")
    try:
        return package_cuda_major(pkg.name, pkg.version, build)
    except OutOfRange:  # no CUDA major has ten digits: the name says nothing
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
        # a driver library's two-part suffix is its ABI (Jetson's libcuda.so.1.1), no version
        two_part = n_parts == 2 and cls.soname_is_major
        if n_parts >= 3 or (two_part and by_soname is not None and not same_as_soname):
            col.version(suffix, _FILENAME, name_source, _MEDIUM, _V_NAME)
    if owner is not None and package_matches(cls, owner.name):
        v = dotted_prefix(owner.version)
        if v is not None:
            col.version(
                v, _MANIFEST, owner.purl or f"{owner.manager} {owner.name}", _HIGH, _V_OWNER
            )
    records = _records_for(cls, facts, owner, context)
    for rec in records:
        v = dotted_prefix(rec.version)
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
                    v = dotted_prefix(value)
                    if v is not None:
                        col.version(v, _MANIFEST, f"{t.path} {key}", _MEDIUM, _V_JSON)
    if cls.family == "cudnn":
        lib_root = tree_root(path, _LIB_DIRS)
        for h in context.cudnn_headers:
            if h.root == lib_root:
                col.version(
                    h.version, EvidenceMethod.SOURCE_CODE_ANALYSIS, h.path, _MEDIUM, _V_HEADER
                )
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
            v = dotted_prefix(env[key])
            if v is not None:
                col.version(v, _OTHER, f"image env {key}={env[key]}", _LOW, _V_CONFIG)
    for key in cls.config_labels:
        if key in labels:
            v = dotted_prefix(labels[key])
            if v is not None:
                col.version(v, _OTHER, f"image label {key}={labels[key]}", _LOW, _V_CONFIG)


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
                        _OTHER,
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
            parts = dotted_parts(dotted_prefix(t.cuda_version) or "")
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
        parts = dotted_parts(dotted_prefix(cuda_version) or "") if cuda_version else None
        if parts:
            col.cuda(parts[0], _OTHER, f"image env CUDA_VERSION={cuda_version}", _LOW, _C_CONFIG)


def _under(path: str, aliases: Sequence[str], root: str) -> bool:
    prefix = root.rstrip("/") + "/"
    return path.startswith(prefix) or any(a.startswith(prefix) for a in aliases)
