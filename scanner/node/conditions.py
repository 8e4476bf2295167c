"""The condition facts of a host (scanner/advisories/conditions.py names them) from what a node
scan reads: the NVIDIA Container Toolkit's config.toml files, the NVIDIA CDI specs present, and
the GPUs the driver lists.

A fact is decided only from evidence. A config that is absent, unreadable or malformed, a mode
the rules below do not know, a GPU whose architecture or virtualization mode is unknown, leaves
the fact out: undecided, so the matcher names the condition in ``conditions_unevaluated`` and
the finding stays affected. A default that would let a finding pass is never assumed.

``cdi_mode`` says which ways into a container the toolkit can take on this host: "true" (CDI),
"false" (the legacy nvidia-container-cli path), or both ("false|true"):
- ``mode = "cdi"`` (or ``jit-cdi``, 1.18+): CDI; the hook, which Docker's ``--gpus`` and
  Podman's OCI hook run, refuses any mode but legacy (``assertModeIsLegacy``) unless
  ``skip-mode-detection = true``, which adds the legacy path;
- ``mode = "legacy"``: the legacy path; an NVIDIA CDI spec in /etc/cdi or /var/run/cdi adds CDI
  (an engine with CDI support reads the spec itself, hooks included, without the runtime);
- ``mode = "auto"`` (the default, so also when the key is absent): both. The runtime picks per
  container: CDI when a container asks only for fully qualified CDI devices, else legacy (1.17)
  or just-in-time CDI (1.18+), and the hook still resolves "auto" to legacy
  (``internal/info/auto.go``, ``cmd/nvidia-container-runtime-hook``). A bulletin's "does not
  impact use cases where CDI is used" therefore still holds for an "auto" host;
- ``csv`` (Jetson) or any other mode: undecided.
Several configs (the packages' and the GPU Operator's) give the union of their facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from scanner.advisories import conditions as C
from scanner.model import ConditionFact, GpuDevice
from scanner.node.rootfs import Root
from scanner.node.toolkit import CONFIG_PATHS, ConfigError, ToolkitConfig, parse_config

#: a config.toml is a few KiB; a larger one is not read (it could only be cut, and a cut TOML
#: file could parse to other settings)
CONFIG_MAX: Final = 1 << 20
#: nvidia-smi's virtualization modes that say the host is no vGPU guest: bare metal and a
#: hypervisor's own GPU. "Pass-Through" decides nothing: a passed-through GPU runs either the
#: datacenter driver or the vGPU guest driver (cloud images with the GRID driver do).
_NOT_GUEST: Final = frozenset({"None", "Host VGPU", "Host VSGA"})
#: the modes of a hypervisor's GPU that its vGPU Manager drives (NVML: associated with a vGPU
#: host; VMware's shared graphics, VSGA, runs on the same vGPU Manager); the others say the
#: driver is no vGPU Manager (bare metal, a guest's vGPU or passed-through GPU)
_HOST: Final = frozenset({"Host VGPU", "Host VSGA"})
_NOT_HOST: Final = frozenset({"None", "VGPU", "Pass-Through"})
#: what only the vGPU software's guest driver (NVIDIA-Linux-<arch>-<version>-grid.run) installs:
#: its licensing daemon's libraries, where NVIDIA's driver container runs ``nvidia-gridd`` from
#: for its "vgpu" driver type (NVIDIA/gpu-driver-container, <dist>/nvidia-driver,
#: ``_start_daemons``: ``LD_LIBRARY_PATH=/usr/lib/$DRIVER_ARCH-linux-gnu/nvidia/gridd
#: nvidia-gridd`` on Ubuntu, ``/usr/lib64/nvidia/gridd`` on RHEL; commit 06a208ca), and the
#: daemon itself where the installer puts the driver's programs (/usr/bin)
GRID_PATHS: Final = (
    "/usr/lib/x86_64-linux-gnu/nvidia/gridd",
    "/usr/lib/aarch64-linux-gnu/nvidia/gridd",
    "/usr/lib64/nvidia/gridd",
    "/usr/bin/nvidia-gridd",
)
_NOTEBOOK: Final = re.compile(r"\b\d{3,4}M\b")


def read_configs(root: Root, notes: list[str]) -> tuple[list[ToolkitConfig], bool]:
    """The toolkit configs present in the root, and whether every one present could be read
    (False: the facts they decide stay undecided; the notes say why)."""
    configs: list[ToolkitConfig] = []
    ok = True
    for path in CONFIG_PATHS:
        if root.kind(path) is None:
            continue
        text = root.read_text(path, CONFIG_MAX + 1)
        why = None
        if text is None:
            why = "not a readable regular file"
        elif len(text.encode("utf-8")) > CONFIG_MAX:
            why = f"larger than {CONFIG_MAX} bytes, not read"
        elif "\ufffd" in text:
            # read with errors replaced: a TOML file must be UTF-8 (TOML 1.0, "Spec"), and one
            # that is not could read as other settings here than in the toolkit
            why = "not UTF-8, which TOML requires"
        else:
            try:
                configs.append(parse_config(text, path))
            except ConfigError as e:
                why = str(e)
        if why is not None:
            ok = False
            notes.append(f"toolkit-config: {path}: {why} (its conditions stay undecided)")
    return configs, ok


def _cdi_paths(cfg: ToolkitConfig, nvidia_specs: Sequence[str]) -> tuple[set[str], str] | None:
    mode = cfg.mode if cfg.mode is not None else "auto"
    said = f'{cfg.source}: nvidia-container-runtime.mode = "{mode}"'
    if cfg.mode is None:
        said += " (absent: the default)"
    if mode in ("cdi", "jit-cdi"):
        if cfg.skip_mode_detection:
            return {"true", "false"}, said + "; nvidia-container-runtime-hook.skip-mode-detection"
        return {"true"}, said
    if mode == "legacy":
        if nvidia_specs:
            return {"true", "false"}, said + "; NVIDIA CDI specs: " + ", ".join(nvidia_specs)
        return {"false"}, said + "; no NVIDIA CDI spec"
    if mode == "auto":
        return {"true", "false"}, said + " (CDI or legacy, per container)"
    return None


def _ldconfig(cfg: ToolkitConfig) -> tuple[set[str], str] | None:
    if cfg.ldconfig is None:
        return {"false"}, f'{cfg.source}: nvidia-container-cli.ldconfig absent ("@/sbin/ldconfig")'
    if not cfg.ldconfig:
        return None  # an empty path: what the CLI then runs is not documented
    value = "false" if cfg.ldconfig.startswith("@") else "true"
    return {value}, f"{cfg.source}: nvidia-container-cli.ldconfig = {cfg.ldconfig[:200]!r}"


def _compat(cfg: ToolkitConfig) -> tuple[set[str], str]:
    said = [
        f"features.allow-cuda-compat-libs-from-container = "
        f"{str(cfg.allow_cuda_compat_libs).lower()}"
    ]
    if cfg.cuda_compat_mode is not None:
        said.append(f"modes.legacy.cuda-compat-mode = {cfg.cuda_compat_mode[:40]!r}")
    on = cfg.allow_cuda_compat_libs or cfg.cuda_compat_mode == "mount"
    return {"true" if on else "false"}, f"{cfg.source}: " + "; ".join(said)


def _merge(name: str, found: Iterable[tuple[set[str], str] | None]) -> ConditionFact | None:
    values: set[str] = set()
    sources: list[str] = []
    for one in found:
        if one is None:
            return None
        values |= one[0]
        sources.append(one[1])
    if not values:
        return None
    return ConditionFact(name, C.join(values), "; ".join(sources))


def toolkit_conditions(
    configs: Sequence[ToolkitConfig], nvidia_specs: Sequence[str]
) -> list[ConditionFact]:
    """The Container Toolkit's facts of these configs (none without a config)."""
    if not configs:
        return []
    facts = [
        _merge(C.CDI_MODE, (_cdi_paths(c, nvidia_specs) for c in configs)),
        _merge(C.LDCONFIG_FROM_CONTAINER, (_ldconfig(c) for c in configs)),
        _merge(C.CUDA_COMPAT_LIBS_FROM_CONTAINER, (_compat(c) for c in configs)),
    ]
    return [f for f in facts if f is not None]


def _architecture(gpu: GpuDevice) -> str | None:
    if gpu.architecture:
        arch = "-".join(gpu.architecture.lower().split())
        return arch if re.fullmatch(r"[a-z0-9][a-z0-9-]{0,31}", arch) else None
    if gpu.compute_capability:
        from scanner.node.tables import default_compute_capability

        return default_compute_capability().architecture(gpu.compute_capability)
    return None


def _mode_fact(
    name: str, gpus: Sequence[GpuDevice], yes: frozenset[str], no: frozenset[str]
) -> list[ConditionFact]:
    """``name`` from the GPUs' virtualization modes: "true" when one GPU's mode is in ``yes``,
    "false" when every GPU's is in ``no``, else undecided (none)."""
    hit = next((g for g in gpus if g.virtualization in yes), None)
    if hit is not None:
        where = f"{hit.source}: {hit.bus_id} virtualization mode {hit.virtualization}"
        return [ConditionFact(name, "true", where)]
    if all(g.virtualization in no for g in gpus):
        modes = ", ".join(sorted({str(g.virtualization) for g in gpus}))
        where = f"{gpus[0].source}: virtualization mode {modes} on every GPU"
        return [ConditionFact(name, "false", where)]
    return []


def gpu_conditions(gpus: Sequence[GpuDevice]) -> list[ConditionFact]:
    """``vgpu_guest``, ``vgpu_host`` and ``gpu_architecture`` of the GPUs the driver lists (none
    without GPUs: a host whose driver shows none decides none of them)."""
    out: list[ConditionFact] = []
    if not gpus:
        return out
    out += _mode_fact(C.VGPU_GUEST, gpus, frozenset({"VGPU"}), _NOT_GUEST)
    out += _mode_fact(C.VGPU_HOST, gpus, _HOST, _NOT_HOST)
    archs: set[str] = set()
    for g in gpus:
        arch = _architecture(g)
        if arch is None:
            return out  # one GPU of unknown architecture: the host's set is unknown
        archs.add(arch)
        if arch == "kepler" and "geforce" in (g.model or "").lower():
            # NVIDIA's R470 rows "for support of GeForce Kepler desktop": notebook parts end in M
            if not _NOTEBOOK.search(g.model or ""):
                archs.add("kepler-desktop")
    how = {
        "nvidia-smi product_architecture" if g.architecture else "the compute capability table"
        for g in gpus
    }
    source = f"{len(gpus)} GPU(s), from " + " and ".join(sorted(how))
    out.append(ConditionFact(C.GPU_ARCHITECTURE, C.join(archs), source))
    return out


def guest_driver_condition(root: Root, decided: Sequence[ConditionFact]) -> list[ConditionFact]:
    """``vgpu_guest`` "true" when the GPUs left it undecided (a passed-through GPU, no
    nvidia-smi output) and the root holds the vGPU guest driver's ``nvidia-gridd``: the driver
    installed is the vGPU software's, whose bulletin lines judge it. Its absence decides nothing
    (a guest driver installed elsewhere), nor does it overrule what the GPUs say."""
    if any(c.name == C.VGPU_GUEST for c in decided):
        return []
    for path in GRID_PATHS:
        if root.kind(path) is not None:
            return [
                ConditionFact(
                    C.VGPU_GUEST,
                    "true",
                    f"{path}: the vGPU guest driver's licensing daemon (nvidia-gridd)",
                )
            ]
    return []
