"""The GPU-library classifier table: which file names are GPU libraries and how to read them.

Detection (``scanner.detect``) is driven by this data, not by code branches: one row per
library family says which file names belong to it, which owner packages carry its version,
where its CUDA major comes from and which metadata keys describe it.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import Final

from msgspec import Struct

from scanner.detect.products import TOOL_NAMES


class CudaRule(StrEnum):
    """How a family's CUDA major is known."""

    #: the library's own major is the CUDA major (cudart 12.x is CUDA 12)
    OWN = "own"
    #: only the majors listed in ``cuda_major_map`` are certain (cufft 11.x ships in CUDA 12)
    MAPPED = "mapped"
    #: built against some CUDA: binary facts, package name, install path (cuDNN, NCCL, ...)
    BUILT = "built"
    #: not built for a CUDA major at all (the driver)
    NONE = "none"


class ContentSearch(StrEnum):
    """Content searches `analyze_elf` runs for a family (each one costs a bounded read)."""

    #: exported ``cudnn*_version`` ints, the ``cudnn_version_*`` marker, cudnnGetCudartVersion
    CUDNN = "cudnn"
    #: "libcublasLt.so.12"-style names in read-only data
    CUDA_REFS = "cuda-refs"
    #: NVML-style driver version strings ("535.309.01")
    DRIVER = "driver"
    #: the CUDA Toolkit release line of NVIDIA's build tree, kept in the library's source paths
    #: ("/dvs/p4/build/sw/rel/gpgpu/toolkit/r11.8/nvJPEG/...": CUDA 11.8)
    TOOLKIT_BUILD = "toolkit-build"


class Classifier(Struct, frozen=True):
    """One family of GPU libraries."""

    family: str
    #: regex for the name between ``lib`` and ``.so`` (no groups)
    name_re: str
    #: literal name starts (after ``lib``) for the cheap pre-test of every walked path
    prefixes: tuple[str, ...]
    #: the name whose component is the family itself (other matches are sub-libraries)
    primary: str
    #: owner packages whose version is this library's version (searched, case-insensitive)
    package_re: str
    cuda_rule: CudaRule
    #: SONAME major == version major (libcudnn_ops.so.9 is 9.x; libcuda.so.1 is not 1.x)
    soname_is_major: bool = True
    cuda_major_map: tuple[tuple[int, int], ...] = ()
    #: key of this component in a CUDA toolkit's version.json
    version_json_key: str | None = None
    #: image config env vars / labels whose value is this library's version
    config_env: tuple[str, ...] = ()
    config_labels: tuple[str, ...] = ()
    scans: frozenset[ContentSearch] = frozenset()
    note: str = ""
    #: its PyPI wheels, ``nvidia-<name>-cu<major>`` (how the service knows them in other tools'
    #: BOMs; TensorRT's wheels are named otherwise: `app/domain/recognize.py`)
    pypi: tuple[str, ...] = ()
    #: its deb/rpm/conda runtime packages: regexes matched after a ``-<cuda major>-<minor>`` or
    #: ``-cuda-<major>`` suffix is dropped (``-dev``/``-devel``/... packages are never runtimes)
    os_packages: tuple[str, ...] = ()


CLASSIFIERS: Final[tuple[Classifier, ...]] = (
    Classifier(
        family="cudnn",
        # any sub-library, including ones added later (libcudnn_engines_tensor_ir, ...)
        name_re=r"cudnn(?:_[A-Za-z0-9_]+)?",
        prefixes=("cudnn",),
        primary="cudnn",
        package_re=r"cudnn",
        cuda_rule=CudaRule.BUILT,
        config_env=("NV_CUDNN_VERSION",),
        config_labels=("com.nvidia.cudnn.version",),
        scans=frozenset({ContentSearch.CUDNN, ContentSearch.CUDA_REFS}),
        note="libcudnn.so.N is the shim; cuDNN 8: ops/cnn/adv _infer/_train; cuDNN 9: graph, ...",
        pypi=("cudnn",),
        os_packages=(r"^libcudnn\d*$", r"^cudnn$"),
    ),
    Classifier(
        family="cudart",
        name_re=r"cudart",
        prefixes=("cudart",),
        primary="cudart",
        package_re=r"cudart|cuda-runtime",
        cuda_rule=CudaRule.OWN,
        version_json_key="cuda_cudart",
        # CUDA_VERSION is the toolkit release (12.6.3), not cudart's own version (12.6.77)
        config_env=("NV_CUDA_CUDART_VERSION",),
        pypi=("cuda-runtime",),
        os_packages=(r"^(cuda-)?cudart\d*(\.\d+)?$", r"^libcudart\d*(\.\d+)?$", r"^cuda-cudart$"),
    ),
    Classifier(
        family="cublasLt",
        name_re=r"cublasLt",
        prefixes=("cublasLt",),
        primary="cublasLt",
        package_re=r"cublas",
        cuda_rule=CudaRule.OWN,
        version_json_key="libcublas",
        config_env=("NV_LIBCUBLAS_VERSION",),
    ),
    Classifier(
        family="cublas",
        # NVBLAS, the BLAS-interposing front end, ships in the same packages (libnvblas.so.12)
        name_re=r"cublas|nvblas",
        prefixes=("cublas", "nvblas"),
        primary="cublas",
        package_re=r"cublas",
        cuda_rule=CudaRule.OWN,
        version_json_key="libcublas",
        config_env=("NV_LIBCUBLAS_VERSION",),
        pypi=("cublas",),
        os_packages=(r"^libcublas(lt)?\d*(\.\d+)?$",),
    ),
    Classifier(
        family="cufft",
        name_re=r"cufftw?",
        prefixes=("cufft",),
        primary="cufft",
        package_re=r"cufft",
        cuda_rule=CudaRule.MAPPED,
        # cufft 10.x shipped with both CUDA 10 and 11; 11.x only with CUDA 12
        cuda_major_map=((11, 12),),
        version_json_key="libcufft",
        pypi=("cufft",),
        os_packages=(r"^libcufft\d*$",),
    ),
    Classifier(
        family="curand",
        name_re=r"curand",
        prefixes=("curand",),
        primary="curand",
        package_re=r"curand",
        # curand 10.x ships with CUDA 10 through 13: its major says nothing
        cuda_rule=CudaRule.MAPPED,
        version_json_key="libcurand",
        pypi=("curand",),
        os_packages=(r"^libcurand\d*$",),
    ),
    Classifier(
        family="cusparse",
        name_re=r"cusparse",
        prefixes=("cusparse",),
        primary="cusparse",
        package_re=r"cusparse",
        cuda_rule=CudaRule.MAPPED,
        # cusparse 12.x spans CUDA 12 and 13; 11.x is CUDA 11 only
        cuda_major_map=((11, 11),),
        version_json_key="libcusparse",
        config_env=("NV_LIBCUSPARSE_VERSION",),
        pypi=("cusparse",),
        os_packages=(r"^libcusparse\d*$",),
    ),
    Classifier(
        family="cusolver",
        name_re=r"cusolver(?:Mg)?",
        prefixes=("cusolver",),
        primary="cusolver",
        package_re=r"cusolver",
        # cusolver 10.x spans CUDA 10.x/11.0 and 11.x spans CUDA 11.1+ and 12: nothing certain
        cuda_rule=CudaRule.MAPPED,
        version_json_key="libcusolver",
        pypi=("cusolver",),
        os_packages=(r"^libcusolver\d*$",),
    ),
    Classifier(
        family="nccl",
        name_re=r"nccl",
        prefixes=("nccl",),
        primary="nccl",
        package_re=r"nccl",
        cuda_rule=CudaRule.BUILT,
        config_env=("NCCL_VERSION", "NV_LIBNCCL_PACKAGE_VERSION"),
        scans=frozenset({ContentSearch.CUDA_REFS}),
        pypi=("nccl",),
        os_packages=(r"^(lib)?nccl\d*$",),
    ),
    Classifier(
        family="nvrtc",
        name_re=r"nvrtc(?:-builtins)?",
        prefixes=("nvrtc",),
        primary="nvrtc",
        package_re=r"nvrtc",
        cuda_rule=CudaRule.OWN,
        version_json_key="cuda_nvrtc",
        pypi=("cuda-nvrtc",),
        os_packages=(r"^(cuda-)?nvrtc$", r"^libnvrtc\d*(\.\d+)?$"),
    ),
    Classifier(
        family="nvjitlink",
        name_re=r"nvJitLink",
        prefixes=("nvJitLink",),
        primary="nvJitLink",
        package_re=r"nvjitlink",
        cuda_rule=CudaRule.OWN,
        version_json_key="libnvjitlink",
        pypi=("nvjitlink",),
        os_packages=(r"^libnvjitlink\d*$",),
    ),
    Classifier(
        family="nvinfer",
        name_re=r"nvinfer(?:_[A-Za-z0-9_]+)?|nvonnxparser|nvparsers",
        prefixes=("nvinfer", "nvonnxparser", "nvparsers"),
        primary="nvinfer",
        package_re=r"tensorrt|nvinfer|nvonnxparser|nvparsers",
        cuda_rule=CudaRule.BUILT,
        config_env=("TRT_VERSION", "TENSORRT_VERSION"),
        scans=frozenset({ContentSearch.CUDA_REFS}),
        note="TensorRT",
        os_packages=(r"^libnvinfer\d*$",),
    ),
    # nvJPEG2000 before nvJPEG: the narrower name first
    Classifier(
        family="nvjpeg2k",
        name_re=r"nvjpeg2k",
        prefixes=("nvjpeg2k",),
        primary="nvjpeg2k",
        package_re=r"nvjpeg2k|nvjpeg2000",
        cuda_rule=CudaRule.BUILT,
        scans=frozenset({ContentSearch.CUDA_REFS}),
        note="nvJPEG2000 (libnvjpeg2k.so.0, 0.x), a product of its own",
        pypi=("nvjpeg2k",),
        os_packages=(r"^libnvjpeg2k\d*$",),
    ),
    Classifier(
        family="nvjpeg",
        name_re=r"nvjpeg",
        prefixes=("nvjpeg",),
        primary="nvjpeg",
        package_re=r"nvjpeg(?!2)",
        cuda_rule=CudaRule.OWN,
        version_json_key="libnvjpeg",
        # a copy named by its SONAME (libnvjpeg.so.11, unowned) has no version of its own: its
        # build paths still name the toolkit release line (libnvjpeg.so.11.9.0.86 of Debian's
        # libnvjpeg11: "toolkit/r11.8/nvJPEG/")
        scans=frozenset({ContentSearch.TOOLKIT_BUILD}),
        note="nvJPEG, shipped with the CUDA Toolkit (libnvjpeg.so.12 is 12.x)",
        pypi=("nvjpeg",),
        os_packages=(r"^libnvjpeg\d*$",),
    ),
    Classifier(
        family="nvtiff",
        name_re=r"nvtiff",
        prefixes=("nvtiff",),
        primary="nvtiff",
        package_re=r"nvtiff",
        cuda_rule=CudaRule.BUILT,
        scans=frozenset({ContentSearch.CUDA_REFS}),
        note="nvTIFF (libnvtiff.so.0, 0.x)",
        pypi=("nvtiff",),
        os_packages=(r"^libnvtiff\d*$",),
    ),
    Classifier(
        family="dcgm",
        name_re=r"dcgm",
        prefixes=("dcgm",),
        primary="dcgm",
        package_re=r"datacenter-gpu-manager|dcgm",
        # DCGM talks to the driver through NVML; no CUDA major is certain
        cuda_rule=CudaRule.MAPPED,
        note="DCGM (libdcgm.so.3 is DCGM 3.x); nv-hostengine is its daemon",
        os_packages=(r"^datacenter-gpu-manager(?:-\d+)?(?:-core)?$",),
    ),
    Classifier(
        family="libcuda",
        name_re=r"cuda",
        prefixes=("cuda.",),
        primary="cuda",
        # the driver packages (Jetson: nvidia-l4t-cuda); not cuda-driver-dev-*, a link stub
        package_re=(
            r"^(?:libcuda1|libnvidia-compute|nvidia-driver|cuda-compat|libnvidia-gl"
            r"|nvidia-l4t-cuda)"
        ),
        cuda_rule=CudaRule.NONE,
        soname_is_major=False,
        scans=frozenset({ContentSearch.DRIVER}),
        note="the CUDA driver (libcuda.so.1); version is the driver version",
        os_packages=(r"^libcuda1$",),
    ),
    Classifier(
        family="nvidia-ml",
        name_re=r"nvidia-ml",
        prefixes=("nvidia-ml",),
        primary="nvidia-ml",
        package_re=r"^(?:libnvidia-ml|libnvidia-compute|nvidia-driver)",
        cuda_rule=CudaRule.NONE,
        soname_is_major=False,
        scans=frozenset({ContentSearch.DRIVER}),
        note="NVML, shipped with the driver; version is the driver version",
        os_packages=(r"^libnvidia-ml1$",),
    ),
)

#: Families of the driver's own libraries (not built for a CUDA major): their version is the
#: installed driver's.
DRIVER_FAMILIES: Final[tuple[str, ...]] = tuple(
    row.family for row in CLASSIFIERS if row.cuda_rule is CudaRule.NONE
)

# One regex for every row: the named group r<i> tells which row matched.
_NAME_PATTERN: Final = (
    r"lib(?:"
    + "|".join(f"(?P<r{i}>{c.name_re})" for i, c in enumerate(CLASSIFIERS))
    + r")\.so(?:\.(?P<ver>\d+(?:\.\d+)*))?"
)
_NAME_RE: Final = re.compile(_NAME_PATTERN)
_PREFIXES: Final = tuple(sorted({"lib" + p for c in CLASSIFIERS for p in c.prefixes}))
_PACKAGE_RES: Final = tuple(re.compile(c.package_re, re.IGNORECASE) for c in CLASSIFIERS)

#: Bump the leading number whenever what detection extracts changes (cached facts are redone).
_ANALYSIS_REVISION: Final = "3"  # 2: not-elf facts, ET_EXEC is no library; 3: tool binaries
DETECT_VERSION: Final = (
    f"{_ANALYSIS_REVISION}-"
    + hashlib.sha256((_NAME_PATTERN + "|" + ",".join(sorted(TOOL_NAMES))).encode()).hexdigest()[:10]
)


class NameMatch(Struct, frozen=True):
    """A file name (or SONAME) matched against the table."""

    classifier: Classifier
    component: str  # "cudnn_graph", or the family for the primary library
    suffix: str | None  # the digits after ".so.", e.g. "9.1.0"; None for a bare ".so"


def classify_name(basename: str) -> NameMatch | None:
    """Match a base name ("libcudnn_ops.so.9.1.0") against the table; None if no row fits."""
    if not basename.startswith(_PREFIXES):
        return None
    m = _NAME_RE.fullmatch(basename)
    if m is None:
        return None
    for i, c in enumerate(CLASSIFIERS):
        matched = m.group(f"r{i}")
        if matched is not None:
            component = c.family if matched == c.primary else matched
            return NameMatch(c, component, m.group("ver"))
    return None  # pragma: no cover - the pattern has one group per row


def package_matches(classifier: Classifier, package_name: str) -> bool:
    """Whether an owner package's version is this family's version (torch's is not cuDNN's)."""
    return _PACKAGE_RES[CLASSIFIERS.index(classifier)].search(package_name) is not None


def is_candidate_path(path: str) -> bool:
    """Whether a path's file name looks like a GPU shared library (called for every walked path)."""
    base = path[path.rfind("/") + 1 :]
    if not base.startswith(_PREFIXES) or ".so" not in base:
        return False
    return _NAME_RE.fullmatch(base) is not None


def is_metadata_path(path: str) -> bool:
    """Whether a path is a detection metadata file: cuDNN version headers, a CUDA version file."""
    slash = path.rfind("/")
    base = path[slash + 1 :]
    if base.startswith("cudnn"):
        return base.endswith(".h") and (base == "cudnn.h" or base.startswith("cudnn_version"))
    if base == "version.json" or base == "version.txt":
        parent = path[path.rfind("/", 0, max(slash, 0)) + 1 : max(slash, 0)]
        return parent.startswith("cuda")
    return False
