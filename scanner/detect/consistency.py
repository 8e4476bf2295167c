"""Scan-level consistency of identifications: what one library's evidence cannot say alone.

After every file is identified, `find_mixed_cudnn` reports directories whose cuDNN
sub-libraries disagree, `fill_from_siblings` gives a cuDNN sub-library without a version the
one its siblings agree on, and `fill_from_identical` the one of byte-identical files.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from msgspec.structs import replace

from scanner.model import (
    Confidence,
    Evidence,
    EvidenceField,
    EvidenceMethod,
    Finding,
    FindingKind,
    Identification,
)
from scanner.versions import dotted_parts


def find_mixed_cudnn(libs: Sequence[tuple[str, Identification]]) -> list[Finding]:
    """A "mixed" finding per directory whose cuDNN sub-libraries of one major differ in version.

    Versions compare on major.minor.patch (one file may know the build number, its siblings
    not); cuDNN 8 and 9 side by side in one directory are separate installs, not a mix.
    """
    groups: dict[tuple[str, int], dict[tuple[int, ...], list[str]]] = {}
    for path, ident in libs:
        if ident.family != "cudnn" or ident.version is None:
            continue
        parts = dotted_parts(ident.version)
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
                FindingKind.MIXED,
                f"mixed cuDNN {major} sub-libraries in {directory}: {described}",
                paths,
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
        parts = dotted_parts(ident.version) if ident.version else None
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
                    EvidenceField.VERSION,
                    version,
                    EvidenceMethod.OTHER,
                    f"sibling {posixpath.basename(source)} in the same directory",
                    Confidence.LOW,
                )
            )
        cuda = majors.get(key, set())
        if cuda_major is None and len(cuda) == 1:
            cuda_major = next(iter(cuda))
            evidence.append(
                Evidence(
                    EvidenceField.CUDA_MAJOR,
                    str(cuda_major),
                    EvidenceMethod.OTHER,
                    "cuDNN siblings in the same directory",
                    Confidence.LOW,
                )
            )
        if (version, cuda_major) == (ident.version, ident.cuda_major):
            out.append(ident)
        else:
            out.append(
                replace(ident, version=version, cuda_major=cuda_major, evidence=tuple(evidence))
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
                EvidenceField.VERSION,
                other.version or "",
                EvidenceMethod.HASH_COMPARISON,
                f"same SHA-256 as {src[0]}",
                Confidence.HIGH,
            ),
        )
        out.append(
            replace(
                ident,
                version=other.version,
                cuda_major=ident.cuda_major if ident.cuda_major is not None else other.cuda_major,
                evidence=evidence,
            )
        )
    return out
