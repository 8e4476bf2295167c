"""Recognize GPU libraries in BOMs that lack the ``gpuprov:`` properties (Trivy, Syft, cdxgen).

Two small data tables: shared-library file names (``libcudnn_ops.so.9.1.0``) and package names
per ecosystem (``pkg:pypi/nvidia-cudnn-cu12``, ``pkg:deb/.../libcudnn9-cuda-12``,
``pkg:rpm/.../libnccl``, ``pkg:conda/cudnn``). Our own scanner's BOMs do not need this: they carry
family and version as properties. A number read from a name has at most nine digits, so it fits
the 32-bit column it is stored in (`_number` raises ValueError beyond).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from app.domain.versions import normalize_version


@dataclass(frozen=True, slots=True)
class Recognized:
    """What a name or purl says about a GPU library."""

    family: str
    component: str
    version: str | None = None
    cuda_major: int | None = None


# (family, file-name stem without "lib"), most specific first; the SONAME major equals the CUDA
# major for the runtime-style libraries in _CUDA_MAJOR_FROM_SONAME.
_FILE_STEMS: tuple[tuple[str, str], ...] = (
    ("cublasLt", "cublasLt"),
    ("cublas", "cublas"),
    ("cudart", "cudart"),
    ("cufft", "cufftw"),
    ("cufft", "cufft"),
    ("curand", "curand"),
    ("cusparse", "cusparse"),
    ("cusolver", "cusolverMg"),
    ("cusolver", "cusolver"),
    ("nccl", "nccl"),
    ("nvrtc", "nvrtc-builtins"),
    ("nvrtc", "nvrtc"),
    ("nvjitlink", "nvJitLink"),
    ("nvinfer", "nvinfer_plugin"),
    ("nvinfer", "nvinfer"),
    ("nvidia-ml", "nvidia-ml"),
    ("libcuda", "cuda"),
)
_CUDA_MAJOR_FROM_SONAME = frozenset({"cudart", "cublas", "cublasLt", "nvrtc", "nvjitlink"})
_SO = re.compile(r"^lib(?P<stem>[A-Za-z][A-Za-z_\-]*)\.so(?:\.(?P<ver>\d+(?:\.\d+)*))?$")
_CUDNN = re.compile(r"^libcudnn(?P<sub>_[a-z_]+)?\.so(?:\.(?P<ver>\d+(?:\.\d+)*))?$")


def recognize_file(file_name: str) -> Recognized | None:
    """Recognize a shared library by its file name (a path's last component)."""
    name = file_name.rsplit("/", 1)[-1]
    cudnn = _CUDNN.match(name)
    if cudnn:
        sub = cudnn.group("sub") or ""
        return Recognized("cudnn", "cudnn" + sub, _full_version(cudnn.group("ver")))
    match = _SO.match(name)
    if not match:
        return None
    stem = match.group("stem")
    for family, expected in _FILE_STEMS:
        if stem == expected:
            ver = match.group("ver")
            major = None
            if family in _CUDA_MAJOR_FROM_SONAME and ver:
                major = _number(ver.split(".")[0])
            component = "libcuda" if family == "libcuda" else expected
            return Recognized(family, component, _full_version(ver), major)
    return None


def _full_version(ver: str | None) -> str | None:
    # "9" is only the SONAME major, not a version; "9.1.0" from a real file name is one
    return ver if ver and "." in ver else None


# PyPI: nvidia-<lib>-cu<major>; the value is the family
_PYPI = {
    "cudnn": "cudnn",
    "cuda-runtime": "cudart",
    "cublas": "cublas",
    "cufft": "cufft",
    "curand": "curand",
    "cusparse": "cusparse",
    "cusolver": "cusolver",
    "nccl": "nccl",
    "cuda-nvrtc": "nvrtc",
    "nvjitlink": "nvjitlink",
}
_PYPI_NAME = re.compile(r"^nvidia-(?P<lib>[a-z\-]+?)-cu(?P<major>\d+)$")
_PYPI_TENSORRT = re.compile(r"^tensorrt(?:-cu(?P<major>\d+))?(?:-libs)?$")

# deb/rpm/conda package names, matched after dropping a trailing "-<cuda major>-<minor>" or
# "-cuda-<major>"; -dev/-devel/-doc/-static packages hold headers, not the runtime library
_OS_PACKAGES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), family)
    for p, family in (
        (r"^libcudnn\d*$", "cudnn"),
        (r"^cudnn$", "cudnn"),
        (r"^(cuda-)?cudart\d*(\.\d+)?$", "cudart"),
        (r"^libcudart\d*(\.\d+)?$", "cudart"),
        (r"^cuda-cudart$", "cudart"),
        (r"^libcublas(lt)?\d*(\.\d+)?$", "cublas"),
        (r"^libcufft\d*$", "cufft"),
        (r"^libcurand\d*$", "curand"),
        (r"^libcusparse\d*$", "cusparse"),
        (r"^libcusolver\d*$", "cusolver"),
        (r"^(lib)?nccl\d*$", "nccl"),
        (r"^(cuda-)?nvrtc$", "nvrtc"),
        (r"^libnvrtc\d*(\.\d+)?$", "nvrtc"),
        (r"^libnvjitlink\d*$", "nvjitlink"),
        (r"^libnvinfer\d*$", "nvinfer"),
        (r"^libcuda1$", "libcuda"),
        (r"^libnvidia-ml1$", "nvidia-ml"),
    )
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
    match = re.match(r"\d+", version)
    return _number(match.group(0)) if match else None


_MAX_DIGITS = 9  # every 9-digit number fits a 32-bit column


def _number(digits: str) -> int:
    """A number read from a name or version; raises ValueError(message, digits) past nine digits
    (no CUDA major is that large, and int() refuses thousands of digits)."""
    if len(digits.lstrip("0")) > _MAX_DIGITS:
        shown = digits if len(digits) <= 24 else digits[:24] + "..."
        raise ValueError(f"the number {shown} ({len(digits)} digits) is out of range", digits)
    return int(digits)
