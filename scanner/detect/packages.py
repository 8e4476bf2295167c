"""What a package's name, version and build, or a library file's name, say of a GPU library:
its family (the classifier table), its version and the CUDA major it was built for.

The one copy of these rules: the scanner reads an owner package's CUDA major with them
(`scanner.detect.identify`), and other tools' BOMs are read with them wherever they are gated
(`scanner.bom.foreign`: `gpuprov gate --bom` and the service's ingest). A number read from a
name has at most nine digits, so it fits a 32-bit column; a longer one raises `OutOfRange`.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import parse_qs, unquote

from msgspec import Struct

from scanner.detect.classifiers import CLASSIFIERS, Classifier, CudaRule, classify_name
from scanner.versions import normalize_version


class OutOfRange(ValueError):
    """A number in a name or version that no CUDA major or column holds: args (message, digits)."""


class Recognized(Struct, frozen=True):
    """What a name or purl says about a GPU library."""

    family: str
    component: str
    version: str | None = None
    cuda_major: int | None = None


_MAX_DIGITS: Final = 9  # every 9-digit number fits a 32-bit column


def number(digits: str) -> int:
    """A number read from a name or version; raises `OutOfRange` past nine digits (no CUDA
    major is that large, and int() refuses thousands of digits)."""
    if len(digits.lstrip("0")) > _MAX_DIGITS:
        shown = digits if len(digits) <= 24 else digits[:24] + "..."
        raise OutOfRange(f"the number {shown} ({len(digits)} digits) is out of range", digits)
    return int(digits)


def own_cuda_major(row: Classifier, library_major: int) -> int | None:
    """The CUDA major a library's own major implies: itself for a runtime-style family (cudart
    12.x is CUDA 12), the row's map for a mapped one (cufft 11.x ships only with CUDA 12)."""
    if row.cuda_rule is CudaRule.OWN:
        return library_major
    if row.cuda_rule is CudaRule.MAPPED:
        return dict(row.cuda_major_map).get(library_major)
    return None


# -- the CUDA major a package states ------------------------------------------------------------

#: in a package name: pip's nvidia-cudnn-cu12 and tensorrt-cu12-libs, NVIDIA's deb/rpm
#: libcudnn9-cuda-12, the CUDA toolkit's deb/rpm libcublas-12-4 and cuda-cudart-12-4
_NAME_CUDA: Final = (
    ("package name", re.compile(r"[-_]cu(\d+)(?:$|[-_])")),
    ("package name", re.compile(r"-cuda-(\d+)(?:$|-)")),
    ("package name", re.compile(r"-(\d+)-\d+$")),
)
#: in a version: libnccl2 2.21.5-1+cuda12.4, libcudnn8 8.9.7.29-1+cuda12.2, an rpm release
#: 10.0.1.6-1.cuda12.4, a local "+cuda12"; torch's 2.5.1+cu121 (cuDNN inside torch/lib)
_VERSION_CUDA: Final = (
    ("package version", re.compile(r"[+~.]cuda(\d{1,2})(?!\d)")),
    ("package version", re.compile(r"\+cu(\d{2})\d\b")),
)
#: in a conda build string: cudnn 8.9.2.26 cuda12_0, pytorch cuda120_py311... (two digits)
_BUILD_CUDA: Final = re.compile(r"cuda(\d{1,2})")


def package_cuda_major(
    name: str, version: str | None = None, build: str | None = None
) -> tuple[int, str] | None:
    """(CUDA major, what said it) that a package's name, version or conda build states, in
    that order; None when none does. Raises `OutOfRange` for an absurd number."""
    lowered = name.lower()
    for what, rx in _NAME_CUDA:
        if (m := rx.search(lowered)) is not None:
            return number(m.group(1)), f"{what} {name}"
    for what, rx in _VERSION_CUDA:
        if version and (m := rx.search(version)) is not None:
            return number(m.group(1)), f"{what} {name} {version}"
    if build and (m := _BUILD_CUDA.search(build)) is not None:
        return int(m.group(1)), f"package build {name} {build}"
    return None


# -- a library file's name ---------------------------------------------------------------------


def recognize_file(file_name: str) -> Recognized | None:
    """A shared library by its file name (a path's last component), with the scanner's table:
    the same names, families and components as the scanner's own BOMs. A version is read only
    from a complete one (libcudnn_ops.so.9.7.0): libcudart.so.11.0 is a SONAME, not 11.0."""
    match = classify_name(file_name.rsplit("/", 1)[-1])
    if match is None:
        return None
    row = match.classifier
    suffix = match.suffix
    major = None
    if suffix and row.soname_is_major:
        # libcudart.so.12: a runtime-style library's own major is the CUDA major
        major = own_cuda_major(row, number(suffix.split(".", 1)[0]))
    version = suffix if suffix and suffix.count(".") >= 2 else None
    return Recognized(row.family, match.component, version, major)


# -- a package's purl or name ------------------------------------------------------------------

# PyPI: nvidia-<lib>-cu<major> (CUDA 13's toolkit wheels drop the suffix: nvidia-cuda-runtime),
# and the family's deb/rpm/conda runtime packages: the rows of the classifier table
_PYPI: Final = {name: row for row in CLASSIFIERS for name in row.pypi}
_PYPI_NAME: Final = re.compile(r"^nvidia-(?P<lib>[a-z][a-z0-9\-]*?)(?:-cu(?P<major>\d+))?$")
_PYPI_TENSORRT: Final = re.compile(r"^tensorrt(?:-cu(?P<major>\d+))?(?:-libs)?$")
_TENSORRT: Final = next(row for row in CLASSIFIERS if row.family == "nvinfer")
#: matched after dropping a trailing "-<cuda major>-<minor>" or "-cuda-<major>"
_OS_PACKAGES: Final = tuple(
    (re.compile(pattern), row) for row in CLASSIFIERS for pattern in row.os_packages
)
_OS_SUFFIX: Final = re.compile(r"-cuda-\d+$|-\d+-\d+$")
#: -dev/-devel/-doc/-static/... packages hold headers, documents or archives, not the runtime
NOT_RUNTIME: Final = re.compile(r"-(dev|devel|doc|docs|static|samples|tests?)(-|$)")


def parse_purl(purl: str) -> tuple[str, str, str | None] | None:
    """(type, name, version) of a package URL, without a full purl parser's strictness."""
    if not purl.startswith("pkg:"):
        return None
    body = purl[4:].split("#", 1)[0].split("?", 1)[0]
    ptype, _, rest = body.partition("/")
    name_part, _, version = rest.rpartition("@") if "@" in rest else (rest, "", "")
    name = unquote(name_part.rsplit("/", 1)[-1])
    return ptype.lower(), name, unquote(version) or None


def purl_qualifier(purl: str | None, key: str) -> str | None:
    """One qualifier of a package URL (``?arch=amd64&build=cuda12_0``), or None."""
    if not purl or "?" not in purl:
        return None
    values = parse_qs(purl.split("?", 1)[1].split("#", 1)[0]).get(key)
    return values[0] if values else None


def recognize_package(
    purl: str | None, name: str | None, version: str | None, build: str | None = None
) -> Recognized | None:
    """A GPU runtime package from its purl (preferred) or its bare name, version and conda
    build (the purl's ``build`` qualifier when it has one)."""
    ptype = None
    if purl:
        parsed = parse_purl(purl)
        if parsed:
            ptype, name, version = parsed[0], parsed[1], parsed[2] or version
            build = purl_qualifier(purl, "build") or build
    if not name:
        return None
    lowered = name.lower()
    row: Classifier | None = None
    if ptype in (None, "pypi"):
        row = _pypi_row(lowered.replace("_", "-"))
        if row is None and ptype == "pypi":
            return None
    if row is None:
        if NOT_RUNTIME.search(lowered):
            return None
        base = _OS_SUFFIX.sub("", lowered)
        row = next((r for pattern, r in _OS_PACKAGES if pattern.match(base)), None)
        if row is None:
            return None
    stated = package_cuda_major(name, version, build)
    major = stated[0] if stated else None
    if major is None and version:
        head = (normalize_version(version) or "").split(".", 1)[0]
        if head.isdecimal():
            # cudart 12.4.127 is CUDA 12 (an epoch "1:" is not the major)
            major = own_cuda_major(row, number(head))
    return Recognized(row.family, row.family, normalize_version(version), major)


def _pypi_row(name: str) -> Classifier | None:
    match = _PYPI_NAME.match(name)
    if match and match.group("lib") in _PYPI:
        return _PYPI[match.group("lib")]
    return _TENSORRT if _PYPI_TENSORRT.match(name) else None
