"""The ``gpuprov:`` CycloneDX property vocabulary: the contract between scanner and service.

Pure constants (the verdict values come from the model's enums); the service imports this
module. Documented in docs/bom-properties.md.
"""

from typing import Final

from scanner.advisories import conditions as _conditions
from scanner.model import Integrity, Provenance

NS: Final = "gpuprov"

# on each GPU library `file` component
FILE_PATH: Final = "gpuprov:file:path"
FILE_ALIASES: Final = "gpuprov:file:aliases"  # comma-separated absolute paths of symlinks
FILE_ERROR: Final = "gpuprov:file:error"  # why the ELF facts could not be read (truncated, ...)
LIBRARY_FAMILY: Final = "gpuprov:library:family"
LIBRARY_COMPONENT: Final = "gpuprov:library:component"
LIBRARY_VERSION: Final = "gpuprov:library:version"
LIBRARY_CUDA_MAJOR: Final = "gpuprov:library:cuda-major"
LIBRARY_ARCH: Final = "gpuprov:library:arch"
LIBRARY_SONAME: Final = "gpuprov:library:soname"
OWNER_PURL: Final = "gpuprov:owner:purl"
INTEGRITY: Final = "gpuprov:integrity"
INTEGRITY_REASON: Final = "gpuprov:integrity:reason"
LAYER: Final = "gpuprov:layer"
NOTE: Final = "gpuprov:note"  # repeated; e.g. "mixed-cudnn: ..."
PROVENANCE: Final = "gpuprov:provenance"
PROVENANCE_SIGNER: Final = "gpuprov:provenance:signer"
PROVENANCE_CATALOG: Final = "gpuprov:provenance:catalog"
PROVENANCE_REASON: Final = "gpuprov:provenance:reason"

# on GPU library `file` components that live processes have mapped (``--runtime``)
#: repeated, one per process: a compact JSON object {"pid", "exe", "container", "engine",
#: "pod", "deleted", "sha256", "via"} (absent keys: unknown); see docs/bom-properties.md
RUNTIME_PROCESS: Final = "gpuprov:runtime:process"
RUNTIME_PROCESSES: Final = "gpuprov:runtime:processes"  # how many processes map these bytes
RUNTIME_CONTAINERS: Final = "gpuprov:runtime:containers"  # in how many distinct containers
#: "false": bytes only processes still hold (deleted, replaced, or outside the scanned root)
RUNTIME_ON_DISK: Final = "gpuprov:runtime:on-disk"
#: the file at the loaded copy's path now, when its bytes differ (drift)
RUNTIME_DISK_SHA256: Final = "gpuprov:runtime:disk-sha256"
RUNTIME_DELETED: Final = "gpuprov:runtime:deleted"  # "true": maps marks the file deleted

# on each product component (an NVIDIA product a bulletin names: docs/bom-properties.md)
PRODUCT_KEY: Final = "gpuprov:product:key"  # the product table's key ("cuda-toolkit", "nvcc")
PRODUCT_CPE: Final = "gpuprov:product:cpe"  # repeated: every CPE spelling (NVD's, NVIDIA's)
PRODUCT_PATH: Final = "gpuprov:product:path"  # repeated: a file or install directory
PRODUCT_TOOLKIT: Final = "gpuprov:product:toolkit"  # the CUDA Toolkit release a part belongs to
PRODUCT_LINE: Final = "gpuprov:product:release-line"  # a toolkit known by its release line only
DRIVER_BRANCH: Final = "gpuprov:driver:branch"  # a driver product's branch ("R535")

# on each owner package `library` component
PACKAGE_MANAGER: Final = "gpuprov:package:manager"  # "dpkg", "rpm", "pip", "conda"
PACKAGE_DB: Final = "gpuprov:package:db"  # the database file inside the root it came from
#: a dpkg package's source package (its ``Source:`` field) and the source's version: what
#: OSV's Debian advisories name
PACKAGE_SOURCE_NAME: Final = "gpuprov:package:source-name"
PACKAGE_SOURCE_VERSION: Final = "gpuprov:package:source-version"

# on metadata.component (the asset)
ASSET_KIND: Final = "gpuprov:asset:kind"  # "host" | "image"
IMAGE_DIGEST: Final = "gpuprov:image:digest"
#: the config digest (Docker's image ID): the only identity of a legacy `docker save` archive
IMAGE_ID: Final = "gpuprov:image:id"
IMAGE_REFERENCE: Final = "gpuprov:image:reference"
IMAGE_PLATFORM: Final = "gpuprov:image:platform"
HOST_MACHINE_ID: Final = "gpuprov:host:machine-id"
HOST_HOSTNAME: Final = "gpuprov:host:hostname"
#: repeated, one running container each: "ENGINE NAMESPACE ID DIGEST CONFIG NAME" ("-" = none)
NODE_CONTAINER: Final = "gpuprov:node:container"
ASSET_LABEL_PREFIX: Final = "gpuprov:label:"  # gpuprov:label:env=prod style labels from agents
#: most labels an asset carries (the service's GPUPROV_MAX_ASSET_LABELS default); the CLI
#: refuses more ``--label`` options than this
MAX_ASSET_LABELS: Final = 100
SLSA_BUILD_LEVEL: Final = "gpuprov:slsa:build-level"
SLSA_BUILDER: Final = "gpuprov:slsa:builder"
IMAGE_SIGNER: Final = "gpuprov:image:signer"
SLSA_SOURCE_REPO: Final = "gpuprov:slsa:source-repo"
IMAGE_SIGNATURE_REJECTED: Final = "gpuprov:image:signature-rejected"  # repeated: one reason each

#: host scans with ``--runtime``: the proc directory read and how many processes it held,
#: mapped a GPU library, and could not be read
RUNTIME_PROC: Final = "gpuprov:runtime:proc"
RUNTIME_SCANNED: Final = "gpuprov:runtime:scanned-processes"
RUNTIME_LOADING: Final = "gpuprov:runtime:loading-processes"
RUNTIME_UNREADABLE: Final = "gpuprov:runtime:unreadable-processes"
#: mappings whose loaded bytes could not be read (no CAP_SYS_ADMIN for map_files)
RUNTIME_UNREADABLE_MAPPINGS: Final = "gpuprov:runtime:unreadable-mappings"

# on metadata.component of a host: its NVIDIA driver (docs/bom-properties.md, "Node")
DRIVER_VERSION: Final = "gpuprov:driver:version"  # the loaded kernel module's version
DRIVER_SOURCE: Final = "gpuprov:driver:source"  # where it was read
DRIVER_FLAVOR: Final = "gpuprov:driver:flavor"  # "open" | "proprietary" kernel module
DRIVER_BUILD: Final = "gpuprov:driver:build"
DRIVER_LIBCUDA_VERSION: Final = "gpuprov:driver:libcuda-version"  # repeated
DRIVER_NVML_VERSION: Final = "gpuprov:driver:nvml-version"  # repeated
DRIVER_CUDA_MAX: Final = "gpuprov:driver:cuda-max"  # newest CUDA the driver runs, "12.2"
DRIVER_CUDA_MAX_SOURCE: Final = "gpuprov:driver:cuda-max-source"
DRIVER_CUDA_MAX_AT_LEAST: Final = "gpuprov:driver:cuda-max-at-least"  # "true": a lower bound
GPU_COUNT: Final = "gpuprov:gpu:count"
L4T_RELEASE: Final = "gpuprov:l4t:release"  # Jetson Linux release, "36.4.0"
L4T_SOURCE: Final = "gpuprov:l4t:source"
L4T_BOARD: Final = "gpuprov:l4t:board"
JETPACK_RELEASE: Final = "gpuprov:jetpack:release"
JETPACK_CUDA: Final = "gpuprov:jetpack:cuda"
NODE_NOTE: Final = "gpuprov:node:note"  # repeated: what disagreed or could not be read
INJECTED_DEVICE_NODE: Final = "gpuprov:injected:device-node"  # repeated: /dev/nvidia0 ...
INJECTED_LINK: Final = "gpuprov:injected:link"  # repeated: "LINK -> TARGET" in containers
#: a host's decided condition facts (scanner/advisories/conditions.py names them):
#: ``gpuprov:condition:cdi_mode`` = "true" | "false" | "false|true", and beside it
#: ``gpuprov:condition:cdi_mode:source`` = where it was read. Only a host's BOM carries them.
CONDITION_PREFIX: Final = _conditions.PROPERTY_PREFIX
CONDITION_SOURCE_SUFFIX: Final = _conditions.SOURCE_SUFFIX

# on each GPU `device` component
GPU_BUS_ID: Final = "gpuprov:gpu:bus-id"
GPU_UUID: Final = "gpuprov:gpu:uuid"
GPU_MINOR: Final = "gpuprov:gpu:minor"
GPU_VBIOS: Final = "gpuprov:gpu:vbios"
GPU_ARCHITECTURE: Final = "gpuprov:gpu:architecture"
GPU_COMPUTE_CAPABILITY: Final = "gpuprov:gpu:compute-capability"
GPU_SOURCE: Final = "gpuprov:gpu:source"

# on each `file` component of a host file the NVIDIA Container Toolkit injects into containers
INJECTED_HOST_PATH: Final = "gpuprov:injected:host-path"
INJECTED_CONTAINER_PATH: Final = "gpuprov:injected:container-path"  # repeated
INJECTED_SOURCE: Final = "gpuprov:injected:source"  # repeated: "cdi:/etc/cdi/nvidia.yaml", ...
INJECTED_DEVICE: Final = "gpuprov:injected:device"  # repeated: "nvidia.com/gpu=all", "...=*"
INJECTED_FAMILY: Final = "gpuprov:injected:family"
INJECTED_VERSION: Final = "gpuprov:injected:version"
INJECTED_ERROR: Final = "gpuprov:injected:error"

# on the BOM's metadata (scan-level)
SCAN_FINDING: Final = "gpuprov:finding"  # repeated: "kind: message"
SCAN_SKIPPED: Final = "gpuprov:skipped"  # repeated: "stage: path: reason"

INTEGRITY_VALUES: Final = tuple(verdict.value for verdict in Integrity)
PROVENANCE_VALUES: Final = tuple(verdict.value for verdict in Provenance)
