"""Builders of GPU node roots in the real file formats the driver, the NVIDIA Container Toolkit
and L4T write (each constant says where its format comes from)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures import elf

DRIVER = "535.129.03"
LIB = "/usr/lib/x86_64-linux-gnu"

#: /proc/driver/nvidia/version of the proprietary module (NVIDIA 535.129.03 on Ubuntu 22.04):
#: the NVRM line, then the compiler line; the module pads with two spaces around the version.
PROC_VERSION = (
    f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {DRIVER}  Thu Oct 19 18:56:32 UTC 2023\n"
    "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04) \n"
)
#: ... and of the open GPU kernel modules (their NVRM line adds "Open" and "Release Build").
PROC_VERSION_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04) \n"
)


def information(model: str, bus: str, uuid: str, minor: int, vbios: str) -> str:
    """/proc/driver/nvidia/gpus/<bus>/information as the 535 driver writes it (tab padded)."""
    return (
        f"Model: \t\t {model}\n"
        "IRQ:   \t\t 34\n"
        f"GPU UUID: \t {uuid}\n"
        f"Video BIOS: \t {vbios}\n"
        "Bus Type: \t PCIe\n"
        "DMA Size: \t 52 bits\n"
        "DMA Mask: \t 0xfffffffffffff\n"
        f"Bus Location: \t {bus}\n"
        f"Device Minor: \t {minor}\n"
        "GPU Excluded:\t No\n"
    )


GPUS = (
    ("NVIDIA H100 80GB HBM3", "0000:17:00.0", "GPU-6e8b7d2c-13f4-5d8a-9c01-2b3a4f5e6d7c", 0),
    ("NVIDIA H100 80GB HBM3", "0000:2a:00.0", "GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 1),
)

#: `nvidia-smi -q -x` output, trimmed to the elements gpuprov reads plus neighbours, in the
#: order and nesting of the real document (DTD nvsmi_device_v12, driver 535).
NVIDIA_SMI_XML = f"""<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<timestamp>Tue Dec  1 10:00:00 2026</timestamp>
\t<driver_version>{DRIVER}</driver_version>
\t<cuda_version>12.2</cuda_version>
\t<attached_gpus>2</attached_gpus>
\t<gpu id="00000000:17:00.0">
\t\t<product_name>NVIDIA H100 80GB HBM3</product_name>
\t\t<product_brand>NVIDIA</product_brand>
\t\t<product_architecture>Hopper</product_architecture>
\t\t<display_mode>Disabled</display_mode>
\t\t<serial>1652223012345</serial>
\t\t<uuid>{GPUS[0][2]}</uuid>
\t\t<minor_number>0</minor_number>
\t\t<vbios_version>96.00.74.00.0D</vbios_version>
\t</gpu>
\t<gpu id="00000000:2A:00.0">
\t\t<product_name>NVIDIA H100 80GB HBM3</product_name>
\t\t<product_brand>NVIDIA</product_brand>
\t\t<product_architecture>Hopper</product_architecture>
\t\t<serial>N/A</serial>
\t\t<uuid>{GPUS[1][2]}</uuid>
\t\t<minor_number>1</minor_number>
\t\t<vbios_version>96.00.74.00.0D</vbios_version>
\t</gpu>
</nvidia_smi_log>
"""


def nvidia_smi_xml(virtualization: str | None, architecture: str | None = "Hopper") -> str:
    """`NVIDIA_SMI_XML` with each GPU's ``gpu_virtualization_mode`` block (after
    ``gpu_operation_mode``, as the 535 driver writes it), and its architecture changed."""
    text = NVIDIA_SMI_XML
    if virtualization is not None:
        block = (
            "\t\t<gpu_virtualization_mode>\n"
            f"\t\t\t<virtualization_mode>{virtualization}</virtualization_mode>\n"
            "\t\t\t<host_vgpu_mode>N/A</host_vgpu_mode>\n"
            "\t\t</gpu_virtualization_mode>\n"
        )
        text = text.replace("\t</gpu>\n", block + "\t</gpu>\n")
    arch = f"<product_architecture>{architecture}</product_architecture>" if architecture else ""
    return text.replace("<product_architecture>Hopper</product_architecture>", arch)


#: /etc/nvidia-container-runtime/config.toml as the Container Toolkit 1.17.8 packages write it
#: (`nvidia-ctk config default`; NVIDIA/nvidia-container-toolkit internal/config/toml_test.go
#: at v1.17.8, with the package's host ldconfig): commented lines are the defaults.
TOOLKIT_CONFIG = """#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"
#swarm-resource = "DOCKER_RESOURCE_GPU"

[nvidia-container-cli]
#debug = "/var/log/nvidia-container-toolkit.log"
environment = []
#ldcache = "/etc/ld.so.cache"
ldconfig = "@/sbin/ldconfig"
load-kmods = true
#no-cgroups = false
#path = "/usr/bin/nvidia-container-cli"
#root = "/run/nvidia/driver"
#user = "root:video"

[nvidia-container-runtime]
#debug = "/var/log/nvidia-container-runtime.log"
log-level = "info"
mode = "auto"
runtimes = ["docker-runc", "runc", "crun"]

[nvidia-container-runtime.modes]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]

[nvidia-container-runtime.modes.csv]
mount-spec-path = "/etc/nvidia-container-runtime/host-files-for-container.d"

[nvidia-container-runtime.modes.legacy]
cuda-compat-mode = "ldconfig"

[nvidia-container-runtime-hook]
path = "nvidia-container-runtime-hook"
skip-mode-detection = false

[nvidia-ctk]
path = "nvidia-ctk"
"""


def cdi_spec(driver: str = DRIVER, lib: str = LIB, root: str = "") -> str:
    """A CDI spec as `nvidia-ctk cdi generate` (Container Toolkit 1.16/1.17) writes it: spec-wide
    containerEdits (device nodes, the driver's libraries, binaries, firmware, IPC socket, the
    create-symlinks and update-ldcache hooks of nvidia-cdi-hook) and one device per GPU index,
    UUID and "all". ``root`` prefixes host paths (the GPU Operator's /run/nvidia/driver)."""
    mount = "    options:\n    - ro\n    - nosuid\n    - nodev\n    - bind\n"

    def m(path: str) -> str:
        return f"  - containerPath: {path}\n    hostPath: {root}{path}\n{mount}"

    mounts = "".join(
        m(p)
        for p in (
            f"{lib}/libcuda.so.{driver}",
            f"{lib}/libcudadebugger.so.{driver}",
            f"{lib}/libnvidia-ml.so.{driver}",
            f"{lib}/libnvidia-ptxjitcompiler.so.{driver}",
            "/usr/bin/nvidia-smi",
            f"/lib/firmware/nvidia/{driver}/gsp_ga10x.bin",
        )
    )
    mounts += (
        "  - containerPath: /run/nvidia-persistenced/socket\n"
        "    hostPath: /run/nvidia-persistenced/socket\n"
        "    options:\n    - ro\n    - nosuid\n    - nodev\n    - bind\n    - noexec\n"
    )
    devices = ""
    for name, nodes in (
        ("0", ["/dev/nvidia0"]),
        ("1", ["/dev/nvidia1"]),
        (GPUS[0][2], ["/dev/nvidia0"]),
        ("all", ["/dev/nvidia0", "/dev/nvidia1"]),
    ):
        paths = "".join(f"    - path: {n}\n" for n in nodes)
        name_yaml = f'"{name}"' if name.isdigit() else name  # nvidia-ctk quotes "0"
        devices += f"- containerEdits:\n    deviceNodes:\n{paths}  name: {name_yaml}\n"
    return (
        "---\n"
        "cdiVersion: 0.5.0\n"
        "containerEdits:\n"
        "  deviceNodes:\n"
        "  - path: /dev/nvidia-modeset\n"
        "  - path: /dev/nvidia-uvm\n"
        "  - path: /dev/nvidia-uvm-tools\n"
        "  - path: /dev/nvidiactl\n"
        "  env:\n"
        "  - NVIDIA_VISIBLE_DEVICES=void\n"
        "  hooks:\n"
        "  - args:\n"
        "    - nvidia-cdi-hook\n"
        "    - create-symlinks\n"
        "    - --link\n"
        f"    - libcuda.so.1::{lib}/libcuda.so\n"
        "    - --link\n"
        f"    - libnvidia-ml.so.1::{lib}/libnvidia-ml.so\n"
        "    hookName: createContainer\n"
        "    path: /usr/bin/nvidia-cdi-hook\n"
        "  - args:\n"
        "    - nvidia-cdi-hook\n"
        "    - update-ldcache\n"
        "    - --folder\n"
        f"    - {lib}\n"
        "    hookName: createContainer\n"
        "    path: /usr/bin/nvidia-cdi-hook\n"
        "  mounts:\n"
        f"{mounts}"
        "devices:\n"
        f"{devices}"
        "kind: nvidia.com/gpu\n"
    )


#: `nvidia-container-cli list` output (libnvidia-container 1.14, driver 535): device nodes,
#: binaries, libraries, the persistenced socket and GSP firmware, one absolute path a line.
def container_cli_list(driver: str = DRIVER, lib: str = LIB) -> str:
    return (
        "\n".join(
            [
                "/dev/nvidiactl",
                "/dev/nvidia-uvm",
                "/dev/nvidia-uvm-tools",
                "/dev/nvidia-modeset",
                "/dev/nvidia0",
                "/usr/bin/nvidia-smi",
                "/usr/bin/nvidia-debugdump",
                f"{lib}/libnvidia-ml.so.{driver}",
                f"{lib}/libcuda.so.{driver}",
                f"{lib}/libnvidia-ptxjitcompiler.so.{driver}",
                "/run/nvidia-persistenced/socket",
                f"/lib/firmware/nvidia/{driver}/gsp_ga10x.bin",
            ]
        )
        + "\n"
    )


#: /etc/nv_tegra_release of Jetson Linux 36.4 (JetPack 6.1), as nvidia-l4t-core installs it.
TEGRA_RELEASE_36 = (
    "# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64, "
    "DATE: Fri Sep 13 04:36:44 UTC 2024\n"
    "# KERNEL_VARIANT: oot\n"
    "TARGET_USERSPACE_LIB_DIR=nvidia\n"
    "TARGET_USERSPACE_LIB_DIR_PATH=usr/lib/aarch64-linux-gnu/nvidia\n"
)
#: ... and of L4T 32.7.1 (JetPack 4.6.1) on a Jetson Nano.
TEGRA_RELEASE_32 = (
    "# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t210ref, EABI: aarch64, "
    "DATE: Sat Feb 19 17:05:08 UTC 2022\n"
)


def dpkg_status(packages: list[tuple[str, str, str]]) -> str:
    """A dpkg status file of (name, version, architecture) installed packages."""
    return "\n".join(
        f"Package: {name}\nStatus: install ok installed\nPriority: optional\n"
        f"Section: libs\nMaintainer: NVIDIA Corporation\nArchitecture: {arch}\n"
        f"Version: {version}\nDescription: {name}\n"
        for name, version, arch in packages
    )


def write(root: Path, path: str, text: str | bytes) -> Path:
    dest = root / path.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        dest.write_bytes(text)
    else:
        dest.write_text(text)
    return dest


def gpu_node(root: Path, *, driver: str = DRIVER) -> Path:
    """A GPU node root: module version files, two H100s, the driver's libraries (compiled
    stand-ins carrying the version), nvidia-smi and firmware stand-ins, a CDI spec."""
    write(root, "/etc/hostname", "gpu-node-1\n")
    write(root, "/etc/machine-id", "0123456789abcdef0123456789abcdef\n")
    write(root, "/proc/driver/nvidia/version", PROC_VERSION.replace(DRIVER, driver))
    write(root, "/sys/module/nvidia/version", f"{driver}\n")
    for model, bus, uuid, minor in GPUS:
        write(
            root,
            f"/proc/driver/nvidia/gpus/{bus}/information",
            information(model, bus, uuid, minor, "96.00.74.00.0d"),
        )
    libdir = root / LIB.lstrip("/")
    elf.build_driver_library(libdir, "cuda", driver)
    elf.build_driver_library(libdir, "nvidia-ml", driver)
    (libdir / "libcuda.so.1").symlink_to(f"libcuda.so.{driver}")
    write(root, f"{LIB}/libcudadebugger.so.{driver}", b"\x7fELF stand-in debugger")
    write(root, f"{LIB}/libnvidia-ptxjitcompiler.so.{driver}", b"\x7fELF stand-in jit")
    write(root, "/usr/bin/nvidia-smi", b"\x7fELF stand-in nvidia-smi")
    write(root, f"/lib/firmware/nvidia/{driver}/gsp_ga10x.bin", b"GSP firmware stand-in")
    write(root, "/etc/cdi/nvidia.yaml", cdi_spec(driver))
    return root


def as_json_spec(yaml_text: str) -> str:
    """The same spec as JSON (nvidia-ctk cdi generate --format=json)."""
    import yaml

    return json.dumps(yaml.safe_load(yaml_text), indent=2)
