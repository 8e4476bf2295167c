"""Recognize GPU libraries in BOMs that lack the ``gpuprov:`` properties (Trivy, Syft, cdxgen).

File names (``libcudnn_ops.so.9.1.0``) are read with the scanner's classifier table
(scanner/detect/classifiers.py), so both halves know the same libraries; package names per
ecosystem have a table here (``pkg:pypi/nvidia-cudnn-cu12``, ``pkg:deb/.../libcudnn9-cuda-12``,
``pkg:rpm/.../libnccl``, ``pkg:conda/cudnn``). Our own scanner's BOMs do not need this: they carry
family and version as properties. A number read from a name has at most nine digits, so it fits
the 32-bit column it is stored in (`_number` raises ValueError beyond).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from app.domain.versions import normalize_version
from scanner.detect.classifiers import CLASSIFIERS, CudaRule, classify_name


@dataclass(frozen=True, slots=True)
class Recognized:
    """What a name or purl says about a GPU library."""

    family: str
    component: str
    version: str | None = None
    cuda_major: int | None = None


def recognize_file(file_name: str) -> Recognized | None:
    """Recognize a shared library by its file name (a path's last component), with the scanner's
    classifier table: the same names, families and components as the scanner's own BOMs."""
    match = classify_name(file_name.rsplit("/", 1)[-1])
    if match is None:
        return None
    row = match.classifier
    suffix = match.suffix
    major = None
    if suffix and row.cuda_rule is CudaRule.OWN and row.soname_is_major:
        # libcudart.so.12: a runtime-style library's own major is the CUDA major
        major = _number(suffix.split(".", 1)[0])
    return Recognized(row.family, match.component, _full_version(suffix), major)


def _full_version(ver: str | None) -> str | None:
    # "9" is only the SONAME major, not a version; "9.1.0" from a real file name is one
    return ver if ver and "." in ver else None


# PyPI: nvidia-<lib>-cu<major>, and the family's deb/rpm/conda runtime packages: the rows of the
# scanner's classifier table (one place per family)
_PYPI = {name: row.family for row in CLASSIFIERS for name in row.pypi}
_PYPI_NAME = re.compile(r"^nvidia-(?P<lib>[a-z\-]+?)-cu(?P<major>\d+)$")
_PYPI_TENSORRT = re.compile(r"^tensorrt(?:-cu(?P<major>\d+))?(?:-libs)?$")

# matched after dropping a trailing "-<cuda major>-<minor>" or "-cuda-<major>"; -dev/-devel/
# -doc/-static packages hold headers, not the runtime library
_OS_PACKAGES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), row.family) for row in CLASSIFIERS for pattern in row.os_packages
)
_CUDA_SUFFIX = re.compile(r"-cuda-(?P<major>\d+)$|-(?P<major2>\d+)-\d+$")
_NOT_RUNTIME = re.compile(r"-(dev|devel|doc|docs|static|samples|tests?)(-|$)")
_BUILT_FOR_CUDA = re.compile(r"\+cuda(?P<major>\d+)")


def parse_purl(purl: str) -> tuple[str, str, str | None] | None:
    """(type, name, version) of a package URL, without a full purl parser's strictness."""
    if not purl.startswith("pkg:"):
        return None
    body = purl[4:].split("#", 1)[0].split("?", 1)[0]
    ptype, _, rest = body.partition("/")
    name_part, _, version = rest.rpartition("@") if "@" in rest else (rest, "", "")
    name = unquote(name_part.rsplit("/", 1)[-1])
    return ptype.lower(), name, unquote(version) or None


def recognize_package(purl: str | None, name: str | None, version: str | None) -> Recognized | None:
    """Recognize a GPU runtime package from its purl (preferred) or its bare name."""
    ptype = None
    if purl:
        parsed = parse_purl(purl)
        if parsed:
            ptype, name, version = parsed[0], parsed[1], parsed[2] or version
    if not name:
        return None
    lowered = name.lower()
    if ptype in (None, "pypi"):
        found = _recognize_pypi(lowered.replace("_", "-"), version)
        if found or ptype == "pypi":
            return found
    if _NOT_RUNTIME.search(lowered):
        return None
    major: int | None = None
    base = lowered
    suffix = _CUDA_SUFFIX.search(lowered)
    if suffix:
        major = _number(suffix.group("major") or suffix.group("major2"))
        base = lowered[: suffix.start()]
    for pattern, family in _OS_PACKAGES:
        if pattern.match(base):
            if major is None and version:
                built = _BUILT_FOR_CUDA.search(version)
                major = _number(built.group("major")) if built else None
            if family == "cudart" and major is None and version:
                major = _leading_int(version)
            return Recognized(family, family, normalize_version(version), major)
    return None


def _recognize_pypi(name: str, version: str | None) -> Recognized | None:
    match = _PYPI_NAME.match(name)
    if match and match.group("lib") in _PYPI:
        family = _PYPI[match.group("lib")]
        major = _number(match.group("major"))
        return Recognized(family, family, normalize_version(version), major)
    trt = _PYPI_TENSORRT.match(name)
    if trt:
        digits = trt.group("major")
        return Recognized(
            "nvinfer", "nvinfer", normalize_version(version), _number(digits) if digits else None
        )
    return None


def _leading_int(version: str) -> int | None:
    # the version rule's numeric prefix (an epoch "1:" is not the major)
    prefix = normalize_version(version) or ""
    head = prefix.split(".", 1)[0]
    return _number(head) if head.isdecimal() else None


_MAX_DIGITS = 9  # every 9-digit number fits a 32-bit column


def _number(digits: str) -> int:
    """A number read from a name or version; raises ValueError(message, digits) past nine digits
    (no CUDA major is that large, and int() refuses thousands of digits)."""
    if len(digits.lstrip("0")) > _MAX_DIGITS:
        shown = digits if len(digits) <= 24 else digits[:24] + "..."
        raise ValueError(f"the number {shown} ({len(digits)} digits) is out of range", digits)
    return int(digits)
