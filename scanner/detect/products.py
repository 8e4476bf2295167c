"""The product table: the NVIDIA products that security bulletins name, and how to spot them.

Bulletins name products (the CUDA Toolkit, `cuobjdump`, nvJPEG, the Container Toolkit, the
driver, DCGM, ...), not library files. This data table says, per product, its CPE spellings
(NVIDIA's, as in its CSAF bulletins, and NVD's), its package URL, the tool binaries that are
it, the version texts embedded in them and the packages that carry it. `detect.present` reads
it; nothing here touches a file.
"""

from __future__ import annotations

import re
from typing import Final

from msgspec import Struct


class ProductRow(Struct, frozen=True):
    """One product a bulletin may name."""

    key: str  # stable id: "cuda-toolkit", "cuobjdump", "nvjpeg", "container-toolkit", ...
    name: str  # as NVIDIA's bulletins write it
    #: CPE 2.3 ``vendor:product`` pairs: NVD's first, then NVIDIA's own (from its CSAF
    #: ``product_identification_helper.cpe`` values; several where it used several)
    nvd: str
    nvidia: tuple[str, ...]
    #: how NVIDIA's CPE version field spells a version: "slug" (``1_17_8``) or "toolkit"
    #: (``cuda_toolkit_12_9_update_1``)
    nvidia_version: str = "slug"
    #: package URL prefix (type/namespace/name) of the product itself
    purl: str = ""
    #: the product's CPEs are those of the CUDA Toolkit release it belongs to (a toolkit tool:
    #: no bulletin names ``cuobjdump`` by CPE, only the toolkit)
    toolkit_part: bool = False


#: Where each CPE spelling comes from: NVIDIA's are copied from the CSAF documents of its PSIRT
#: repository (shared/fixtures/nvidia-psirt: 2022/5334, 2024/5517, 5548, 5585, 2025/5596, 5648,
#: 5659, 5661, 5704, 2023/5453); NVD's are NVD's dictionary names (cuda_toolkit,
#: gpu_display_driver, container_toolkit), otherwise NVIDIA's product name with NVD's dotted
#: version.
PRODUCTS: tuple[ProductRow, ...] = (
    ProductRow(
        "cuda-toolkit",
        "NVIDIA CUDA Toolkit",
        "nvidia:cuda_toolkit",
        ("nvidia:nvidia_cuda_toolkit", "nvidia:cuda_toolkit"),
        nvidia_version="toolkit",
        purl="pkg:generic/nvidia/cuda-toolkit",
    ),
    *(
        ProductRow(
            key,
            name,
            "nvidia:cuda_toolkit",
            ("nvidia:nvidia_cuda_toolkit", "nvidia:cuda_toolkit"),
            nvidia_version="toolkit",
            purl=f"pkg:generic/nvidia/{key}",
            toolkit_part=True,
        )
        for key, name in (
            ("nvcc", "nvcc (CUDA Toolkit)"),
            ("ptxas", "ptxas (CUDA Toolkit)"),
            ("cuobjdump", "cuobjdump (CUDA Toolkit)"),
            ("nvdisasm", "nvdisasm (CUDA Toolkit)"),
            ("compute-sanitizer", "Compute Sanitizer (CUDA Toolkit)"),
            ("cuda-gdb", "CUDA-GDB (CUDA Toolkit)"),
        )
    ),
    ProductRow(
        "nsight-systems",
        "NVIDIA Nsight Systems",
        "nvidia:nsight_systems",
        ("nvidia:nsight_systems",),
        purl="pkg:generic/nvidia/nsight-systems",
    ),
    ProductRow(
        "nsight-compute",
        "NVIDIA Nsight Compute",
        "nvidia:nsight_compute",
        ("nvidia:nsight_compute",),
        purl="pkg:generic/nvidia/nsight-compute",
    ),
    ProductRow(
        "nvjpeg", "nvJPEG", "nvidia:nvjpeg", ("nvidia:nvjpeg",), purl="pkg:generic/nvidia/nvjpeg"
    ),
    ProductRow(
        "nvjpeg2000",
        "nvJPEG2000",
        "nvidia:nvjpeg2000",
        ("nvidia:nvjpeg2000", "nvidia:nvjpeg2000_library"),
        purl="pkg:generic/nvidia/nvjpeg2000",
    ),
    ProductRow(
        "nvtiff",
        "nvTIFF Library",
        "nvidia:nvtiff",
        ("nvidia:nvtiff_library",),
        purl="pkg:generic/nvidia/nvtiff",
    ),
)

PRODUCTS += (
    ProductRow(
        "tensorrt",
        "NVIDIA TensorRT",
        "nvidia:tensorrt",
        ("nvidia:tensorrt",),
        purl="pkg:generic/nvidia/tensorrt",
    ),
    ProductRow(
        "tensorrt-llm",
        "NVIDIA TensorRT-LLM",
        "nvidia:tensorrt-llm",
        ("nvidia:nvidia_tensorrtllm",),
        purl="pkg:pypi/tensorrt-llm",
    ),
    ProductRow("dcgm", "DCGM", "nvidia:dcgm", ("nvidia:dcgm",), purl="pkg:generic/nvidia/dcgm"),
    ProductRow(
        "container-toolkit",
        "NVIDIA Container Toolkit",
        "nvidia:container_toolkit",
        ("nvidia:nvidia_container_toolkit",),
        # the Go module OSV's advisories for the toolkit name
        purl="pkg:golang/github.com/NVIDIA/nvidia-container-toolkit",
    ),
    ProductRow(
        "gpu-operator",
        "NVIDIA GPU Operator",
        "nvidia:gpu_operator",
        ("nvidia:nvidia_gpu_operator",),
        # its Go module (the operator's own image runs /usr/bin/gpu-operator built from it)
        purl="pkg:golang/github.com/NVIDIA/gpu-operator",
    ),
    ProductRow(
        "driver",
        "NVIDIA GPU Display Driver",
        "nvidia:gpu_display_driver",
        # one Linux driver package serves every product line the bulletins list separately
        ("nvidia:tesla", "nvidia:geforce", "nvidia:nvidia_rtx_quadro_nvs"),
        purl="pkg:generic/nvidia/driver",
    ),
)

_BY_KEY: Final = {row.key: row for row in PRODUCTS}


class PackageRow(Struct, frozen=True):
    """Packages whose presence is a product (whose upstream version is its version)."""

    product: str  # `ProductRow.key`
    name_re: str  # matched on the package's lowercased name


PACKAGES: Final[tuple[PackageRow, ...]] = (
    # the toolkit's own Go packages ship as deb/rpm: nvidia-container-toolkit(-base) holds
    # nvidia-ctk and the runtime, libnvidia-container1/-tools the library and
    # nvidia-container-cli; versions are the toolkit's (1.17.8-1)
    PackageRow(
        "container-toolkit",
        r"^(?:nvidia-container-toolkit(?:-base)?|libnvidia-container1|libnvidia-container-tools"
        r"|nvidia-container-runtime)$",
    ),
    PackageRow("dcgm", r"^datacenter-gpu-manager(?:-\d+)?(?:-core)?$"),
    # the TensorRT-LLM wheel (PEP 503 normalized), the TensorRT meta packages
    PackageRow("tensorrt-llm", r"^tensorrt[-_.]llm$"),
    PackageRow("tensorrt", r"^tensorrt(?:-cu\d+)?$"),
)


class LabelRow(Struct, frozen=True):
    """An image whose config labels say it is a product: every ``(label, value)`` of one of
    ``names`` present, its version in the first of ``version_labels`` set."""

    product: str  # `ProductRow.key`
    names: tuple[tuple[tuple[str, str], ...], ...]
    version_labels: tuple[str, ...] = ("version", "org.opencontainers.image.version")


#: The GPU Operator's image (nvcr.io/nvidia/gpu-operator) sets, in its Dockerfile,
#: ``LABEL io.k8s.display-name="NVIDIA GPU Operator"``, ``name="NVIDIA GPU Operator"``,
#: ``vendor="NVIDIA"`` and ``version="${VERSION}"`` (v24.6.1); an image built FROM it inherits
#: them, and runs the operator too.
LABELS: Final[tuple[LabelRow, ...]] = (
    LabelRow(
        "gpu-operator",
        (
            (("name", "NVIDIA GPU Operator"), ("vendor", "NVIDIA")),
            (("io.k8s.display-name", "NVIDIA GPU Operator"), ("vendor", "NVIDIA")),
        ),
    ),
)


#: PyPI packages of a GPU stack that hold no GPU library file of their own, whose OSV records
#: an asset's answer needs (PEP 503 names): the deep-learning frameworks and their CUDA builds,
#: and NVIDIA's own wheels. A scan reports them beside the owners of its GPU files, and the
#: service keeps them from any BOM, so that an OSV record of ``torch`` judges the torch it holds.
STACK_PACKAGES: Final = re.compile(
    r"^(?:torch|torchvision|torchaudio|tensorflow(?:-gpu)?|tf-nightly(?:-gpu)?|jax|jaxlib"
    r"|jax-cuda\d+-(?:plugin|pjrt)|cupy-cuda\w+|triton|onnxruntime-gpu|paddlepaddle-gpu"
    r"|tensorrt(?:-[a-z0-9]+)*|nvidia-[a-z0-9-]+|xformers|flash-attn|vllm|deepspeed)$"
)
_PEP503: Final = re.compile(r"[-_.]+")


def is_stack_package(purl_type: str, name: str) -> bool:
    """Whether a package (its purl type and name) is one of `STACK_PACKAGES`."""
    return purl_type == "pypi" and STACK_PACKAGES.match(_PEP503.sub("-", name).lower()) is not None


def is_stack_purl(purl: str) -> bool:
    """Whether a package URL names one of `STACK_PACKAGES`."""
    # imported here: scanner.detect.packages imports the classifiers, which import this table
    from scanner.detect.packages import parse_purl

    parsed = parse_purl(purl)
    return parsed is not None and is_stack_package(parsed[0], parsed[1])


def product_row(key: str) -> ProductRow:
    """The table row of a product key (KeyError for a key the table lacks: a defect)."""
    return _BY_KEY[key]


class ToolRow(Struct, frozen=True):
    """A tool binary a bulletin names: its file names and the version texts inside it."""

    product: str  # `ProductRow.key`
    names: tuple[str, ...]  # exact base names
    #: regexes over the binary's bytes (group "version": the tool's version; group "release":
    #: the toolkit release line it was built for); searched within `MAX_TOOL_SCAN` bytes
    markers: tuple[bytes, ...] = ()
    #: regex over the path (install directories carry the version: nsight-compute-2024.1.1)
    path_version: str | None = None
    #: key of the tool in a CUDA toolkit's version.json
    version_json_key: str | None = None
    #: owner packages whose version is the tool's version (searched, case-insensitive)
    package_re: str = ""


#: ``nvcc --version``'s fourth line, one C string in every compiler-driver binary of the
#: toolkit: "Cuda compilation tools, release 13.0, V13.0.88" (read from the real nvcc and ptxas
#: of CUDA 13.0.88, /usr/local/cuda-13.0 of the development machine; cuobjdump and nvdisasm
#: print the same line).
_RELEASE_LINE: Final = (
    rb"Cuda compilation tools, release (?P<release>\d{1,3}\.\d{1,3}), "
    rb"V(?P<version>\d{1,3}\.\d{1,3}\.\d{1,6})"
)

TOOLS: Final[tuple[ToolRow, ...]] = (
    ToolRow("nvcc", ("nvcc",), (_RELEASE_LINE,), version_json_key="cuda_nvcc", package_re=r"nvcc"),
    ToolRow(
        "ptxas", ("ptxas",), (_RELEASE_LINE,), version_json_key="cuda_nvcc", package_re=r"nvcc"
    ),
    ToolRow(
        "cuobjdump",
        ("cuobjdump",),
        (_RELEASE_LINE,),
        version_json_key="cuda_cuobjdump",
        package_re=r"cuobjdump",
    ),
    ToolRow(
        "nvdisasm",
        ("nvdisasm",),
        (_RELEASE_LINE,),
        version_json_key="cuda_nvdisasm",
        package_re=r"nvdisasm",
    ),
    ToolRow(
        "compute-sanitizer",
        ("compute-sanitizer",),
        version_json_key="cuda_sanitizer_api",
        package_re=r"sanitizer",
    ),
    ToolRow(
        "cuda-gdb",
        ("cuda-gdb",),
        # `cuda-gdb --version`'s first line: "NVIDIA (R) cuda-gdb 12.4"
        (rb"NVIDIA \(R\) cuda-gdb (?P<release>\d{1,3}\.\d{1,3})(?![\d.])",),
        version_json_key="cuda_gdb",
        package_re=r"cuda-gdb",
    ),
    ToolRow(
        "nsight-systems",
        ("nsys",),
        # `nsys --version`: "NVIDIA Nsight Systems version 2024.2.1.106-242134037904v0"
        (rb"NVIDIA Nsight Systems version (?P<version>\d{4}\.\d{1,3}\.\d{1,3}(?:\.\d{1,6})?)",),
        path_version=r"/nsight-systems[-/](?P<version>\d{4}\.\d+\.\d+(?:\.\d+)?)/",
        version_json_key="nsight_systems",
        package_re=r"nsight-systems",
    ),
    ToolRow(
        "container-toolkit",
        ("nvidia-ctk", "nvidia-container-runtime", "nvidia-container-runtime-hook"),
        # a Go binary's build information ("go version -m"): the module line of the main module
        # when it was built from a tagged checkout: "mod\t<path>\tv1.17.8\t..."
        (rb"mod\tgithub\.com/NVIDIA/nvidia-container-toolkit\tv(?P<version>\d+\.\d+\.\d+)",),
        package_re=r"nvidia-container",
    ),
    ToolRow(
        "container-toolkit",
        ("nvidia-container-cli",),
        # `nvidia-container-cli --version`'s first line, "cli-version: 1.17.8"
        (rb"cli-version: (?P<version>\d+\.\d+\.\d+)",),
        package_re=r"nvidia-container",
    ),
    ToolRow(
        "gpu-operator",
        ("gpu-operator",),
        # the operator's Go build information, as for the Container Toolkit's binaries
        (rb"mod\tgithub\.com/NVIDIA/gpu-operator\tv(?P<version>\d+\.\d+\.\d+)",),
    ),
    ToolRow(
        "dcgm",
        ("nv-hostengine", "dcgmi"),
        package_re=r"datacenter-gpu-manager|dcgm",
    ),
    ToolRow(
        "nsight-compute",
        ("ncu",),
        path_version=r"/nsight-compute[-/](?P<version>\d{4}\.\d+\.\d+(?:\.\d+)?)/",
        version_json_key="nsight_compute",
        package_re=r"nsight-compute",
    ),
)

#: Most bytes of a tool binary searched for its version texts (nvcc 13.0: 30 MB; cuda-gdb and
#: nsys are larger, and their texts lie in the first read-only data).
MAX_TOOL_SCAN: Final = 128 << 20

_TOOL_BY_NAME: Final = {name: row for row in TOOLS for name in row.names}
TOOL_NAMES: Final = frozenset(_TOOL_BY_NAME)
_TOOL_MARKERS: Final = {row: tuple(re.compile(m) for m in row.markers) for row in TOOLS}


def tool_of(basename: str) -> ToolRow | None:
    """The tool row of a file's base name ("nvcc"), or None."""
    return _TOOL_BY_NAME.get(basename)


def is_tool_path(path: str) -> bool:
    """Whether a path's file name is a tool binary a bulletin names (called for every path)."""
    return path[path.rfind("/") + 1 :] in TOOL_NAMES


def tool_markers(row: ToolRow) -> tuple[re.Pattern[bytes], ...]:
    """The compiled version-text regexes of a tool."""
    return _TOOL_MARKERS[row]


def package_product(name: str) -> str | None:
    """The product a package is (its key), or None."""
    low = name.lower()
    for row in PACKAGES:
        if re.match(row.name_re, low):
            return row.product
    return None


def cpes(row: ProductRow, version: str | None) -> tuple[str, ...]:
    """The product's CPE 2.3 names for ``version`` (NVD's first, then NVIDIA's), or none when
    the version is unknown: a CPE with a guessed version would match the wrong bulletins."""
    if not version:
        return ()
    nvd = f"cpe:2.3:a:{row.nvd}:{_cpe_escape(version)}:*:*:*:*:*:*:*"
    slug = re.sub(r"[^0-9a-z]+", "_", version.lower()).strip("_")
    if row.nvidia_version == "toolkit":
        parts = version.split(".")
        slug = f"cuda_toolkit_{parts[0]}_{parts[1] if len(parts) > 1 else '0'}"
        if len(parts) > 2 and parts[2] not in ("", "0"):
            slug += f"_update_{parts[2]}"
    nvidia = [f"cpe:2.3:a:{p}:{slug}:*:*:*:*:*:*:*" for p in row.nvidia]
    return (nvd, *(c for c in nvidia if c != nvd))


def _cpe_escape(value: str) -> str:
    # CPE 2.3 formatted string (NISTIR 7695 §6.2.2.2): quote every character but letters,
    # digits, "_", "-" and "."
    return re.sub(r"([^A-Za-z0-9_.\-])", r"\\\1", value)
