"""The NVIDIA driver and GPUs of a node: the kernel module's version files, the driver's per-GPU
information files and ``nvidia-smi -q -x`` output.

Formats (recorded from real drivers; tests/scanner/node/test_driver.py holds them verbatim):
``/proc/driver/nvidia/version`` starts with an NVRM line naming the module, its version and
build ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 ..." for the
proprietary module, "... NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build
..." for the open one); ``/sys/module/nvidia/version`` holds the bare version;
``/proc/driver/nvidia/gpus/<bus id>/information`` holds "Key: value" lines (Model, GPU UUID,
Video BIOS, Bus Location, Device Minor). Parsing is pure; `read_driver` does the reading.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from msgspec.structs import replace

from scanner.model import DriverFacts, GpuDevice
from scanner.node.rootfs import read_small

if TYPE_CHECKING:
    from xml.etree import ElementTree

_NVRM: Final = re.compile(
    r"^NVRM version:\s+(?P<module>NVIDIA UNIX .*?)\s+(?P<version>\d+(?:\.\d+){1,3})"
    r"(?:\s+(?P<build>.*?))?\s*$",
    re.MULTILINE,
)
_VERSION: Final = re.compile(r"\d+(?:\.\d+){1,3}")
_BUS: Final = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
#: nvidia-smi runs at most this long (it can hang on a wedged GPU)
SMI_TIMEOUT: Final = 30.0
SMI_MAX: Final = 16 << 20


class NvidiaSmiError(ValueError):
    """nvidia-smi XML that cannot be read."""


def parse_nvrm(text: str) -> tuple[str, str, str | None] | None:
    """(version, flavor, build) from /proc/driver/nvidia/version text; None without an NVRM
    line. The flavor is "open" for the open GPU kernel modules, else "proprietary"."""
    m = _NVRM.search(text)
    if m is None:
        return None
    flavor = "open" if " Open Kernel Module" in m.group("module") else "proprietary"
    build = (m.group("build") or "").strip() or None
    return m.group("version"), flavor, build


def parse_module_version(text: str) -> str | None:
    """The bare version in /sys/module/nvidia/version."""
    value = text.strip()
    return value if _VERSION.fullmatch(value) else None


def short_bus_id(bus: str) -> str:
    """A PCI bus id as the kernel writes it: nvidia-smi's 8-digit domain cut to 4."""
    bus = bus.strip().lower()
    domain, sep, rest = bus.partition(":")
    if sep and rest.count(":") == 1 and len(domain) == 8 and domain.startswith("0000"):
        return domain[4:] + ":" + rest
    return bus


def parse_information(text: str, source: str) -> GpuDevice | None:
    """One GPU from its /proc/driver/nvidia/gpus/<bus>/information text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    bus = fields.get("bus location")
    model = fields.get("model")
    if not bus or not _BUS.match(bus) or not model:
        return None
    minor = fields.get("device minor", "")
    uuid = fields.get("gpu uuid")
    vbios = fields.get("video bios")
    return GpuDevice(
        bus_id=short_bus_id(bus),
        model=model,
        uuid=uuid if uuid and not uuid.startswith("GPU-????") else None,
        minor=int(minor) if minor.isdigit() else None,
        vbios=vbios if vbios and "?" not in vbios else None,
        compute_capability=_compute_capability(model),
        source=source,
    )


def _compute_capability(model: str) -> str | None:
    # The tables are loaded only for a node that shows a GPU or a driver (start-up).
    from scanner.node.tables import default_compute_capability

    return default_compute_capability().of(model)


def _text(el: ElementTree.Element | None, path: str) -> str | None:
    found = el.find(path) if el is not None else None
    value = (found.text or "").strip() if found is not None else ""
    return value if value and value not in ("N/A", "Unknown Error") else None


def parse_nvidia_smi(xml: str) -> tuple[str | None, str | None, list[GpuDevice]]:
    """(driver version, CUDA version, GPUs) from ``nvidia-smi -q -x`` output.

    The document (root ``nvidia_smi_log``, DTD nvsmi_device_v12) has ``driver_version`` and
    ``cuda_version`` at its top and one ``gpu id="00000000:17:00.0"`` per GPU with
    ``product_name``, ``product_architecture``, ``uuid``, ``minor_number``, ``vbios_version``
    and ``gpu_virtualization_mode/virtualization_mode`` (NVML's nvmlGpuVirtualizationMode_t as
    text: "None" bare metal, "Pass-Through", "VGPU" a vGPU in a guest VM, "Host VGPU" and
    "Host VSGA" a hypervisor's GPU). Raises NvidiaSmiError when it is no such document. The
    DTD is never fetched: ElementTree ignores the DOCTYPE and expands no external entity.
    """
    from xml.etree import ElementTree  # a node without nvidia-smi output never parses XML

    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as e:
        raise NvidiaSmiError(f"not XML: {e}") from None
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiError(f"root element is <{root.tag}>, not <nvidia_smi_log>")
    driver = _text(root, "driver_version")
    cuda = _text(root, "cuda_version")
    gpus = []
    for g in root.findall("gpu"):
        bus = g.get("id") or _text(g, "pci/pci_bus_id") or ""
        if not _BUS.match(bus.strip()):
            continue
        model = _text(g, "product_name")
        minor = _text(g, "minor_number") or ""
        gpus.append(
            GpuDevice(
                bus_id=short_bus_id(bus),
                model=model,
                uuid=_text(g, "uuid"),
                minor=int(minor) if minor.isdigit() else None,
                vbios=_text(g, "vbios_version"),
                architecture=_text(g, "product_architecture"),
                compute_capability=_compute_capability(model) if model else None,
                source="nvidia-smi",
                virtualization=_text(g, "gpu_virtualization_mode/virtualization_mode"),
            )
        )
    if driver is not None and not _VERSION.fullmatch(driver):
        driver = None
    if cuda is not None and not re.fullmatch(r"\d+\.\d+", cuda):
        cuda = None
    return driver, cuda, gpus


def merge_gpus(proc: Iterable[GpuDevice], smi: Iterable[GpuDevice]) -> tuple[GpuDevice, ...]:
    """One device per bus id: the driver's /proc files, completed by nvidia-smi's facts."""
    by_bus = {g.bus_id: g for g in proc}
    for g in smi:
        have = by_bus.get(g.bus_id)
        if have is None:
            by_bus[g.bus_id] = g
            continue
        by_bus[g.bus_id] = replace(
            have,
            uuid=have.uuid or g.uuid,
            minor=have.minor if have.minor is not None else g.minor,
            vbios=have.vbios or g.vbios,
            architecture=have.architecture or g.architecture,
            compute_capability=have.compute_capability or g.compute_capability,
            virtualization=have.virtualization or g.virtualization,
        )
    return tuple(sorted(by_bus.values(), key=lambda g: g.bus_id))


def run_nvidia_smi() -> tuple[str | None, str | None]:
    """(XML, None) from the live node's nvidia-smi, or (None, why not); (None, None) when the
    node has no nvidia-smi at all."""
    import shutil
    import subprocess

    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None, None
    try:
        done = subprocess.run(
            [binary, "-q", "-x"],
            capture_output=True,
            timeout=SMI_TIMEOUT,
            check=False,
            env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"nvidia-smi -q -x failed: {e}"
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, f"nvidia-smi -q -x exited {done.returncode}: {err[0] if err else ''}"
    return done.stdout[:SMI_MAX].decode("utf-8", "replace"), None


def read_driver(
    proc: str,
    sys: str,
    *,
    smi_xml: str | None = None,
    smi_source: str = "nvidia-smi",
    libcuda: tuple[str, ...] = (),
    nvml: tuple[str, ...] = (),
) -> tuple[DriverFacts | None, tuple[GpuDevice, ...], list[str]]:
    """The driver facts and GPUs of a node from its proc and sys directories (on this machine)
    and nvidia-smi XML when there is some; the notes say what disagreed or was unreadable."""
    notes: list[str] = []
    version = flavor = build = source = None
    proc_version = os.path.join(proc, "driver/nvidia/version")
    text = read_small(proc_version)
    if text is not None:
        parsed = parse_nvrm(text)
        if parsed is None:
            notes.append(f"driver: {proc_version}: no NVRM version line")
        else:
            version, flavor, build = parsed
            source = "/proc/driver/nvidia/version"
    sys_version = os.path.join(sys, "module/nvidia/version")
    text = read_small(sys_version)
    module = parse_module_version(text) if text is not None else None
    if module is not None:
        if version is None:
            version, source = module, "/sys/module/nvidia/version"
        elif module != version:
            notes.append(f"driver: /sys/module/nvidia/version says {module}, NVRM says {version}")
    proc_gpus = []
    gpus_dir = os.path.join(proc, "driver/nvidia/gpus")
    try:
        buses = sorted(os.listdir(gpus_dir))
    except OSError:
        buses = []
    for bus in buses:
        info = read_small(os.path.join(gpus_dir, bus, "information"))
        if info is None:
            continue
        gpu = parse_information(info, f"/proc/driver/nvidia/gpus/{bus}/information")
        if gpu is None:
            notes.append(f"gpu: /proc/driver/nvidia/gpus/{bus}/information: no model or bus")
        else:
            proc_gpus.append(gpu)
    smi_gpus: list[GpuDevice] = []
    smi_cuda = None
    if smi_xml is not None:
        try:
            smi_driver, smi_cuda, smi_gpus = parse_nvidia_smi(smi_xml)
        except NvidiaSmiError as e:
            notes.append(f"nvidia-smi: {smi_source}: {e}")
        else:
            if version is None and smi_driver is not None:
                version, source = smi_driver, smi_source
            elif smi_driver is not None and smi_driver != version:
                notes.append(f"driver: {smi_source} says {smi_driver}, the module {version}")
    gpus = merge_gpus(proc_gpus, smi_gpus)
    user = sorted(set(libcuda) | set(nvml))
    if version is not None and any(v != version for v in user):
        notes.append(
            f"driver-mismatch: the loaded kernel module is {version}, the user-space driver "
            f"libraries are {', '.join(user)} (CUDA fails with 'driver/library version "
            "mismatch' until they agree)"
        )
    if version is None and not user and not gpus:
        return None, gpus, notes
    facts = DriverFacts(
        version=version,
        source=source,
        flavor=flavor,
        build=build,
        libcuda=tuple(sorted(set(libcuda))),
        nvml=tuple(sorted(set(nvml))),
    )
    return with_cuda_max(facts, smi_cuda, smi_source), gpus, notes


def with_cuda_max(facts: DriverFacts, smi_cuda: str | None, smi_source: str) -> DriverFacts:
    """The newest CUDA the driver runs: what nvidia-smi says the driver reports, else the
    sourced toolkit/driver table's answer for the module's (or libcuda's) version."""
    if smi_cuda is not None:
        return replace(facts, cuda_max=smi_cuda, cuda_max_source=smi_source)
    version = facts.version or (facts.libcuda[0] if facts.libcuda else None)
    if version is None:
        return facts
    from scanner.node.tables import default_cuda_drivers

    table = default_cuda_drivers()
    support = table.newest_cuda(version)
    if support is None:
        return facts
    return replace(
        facts,
        cuda_max=support.cuda,
        cuda_max_source=f"{table.source.name} ({support.release}) <{table.source.url}>",
        cuda_max_at_least=support.at_least,
    )
