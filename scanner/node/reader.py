"""Node facts of a host root: driver and GPUs, what the NVIDIA Container Toolkit injects into
containers, a Jetson's L4T/JetPack release (issue 11, sections 2, 3 and 5), and the facts that
decide bulletins' conditions (the toolkit's config.toml, GPU architecture, vGPU guest).

`read_node` runs after the detect stage of a host scan (it takes the driver libraries'
versions from the scan's libraries) and returns `NodeFacts`, or None when the root shows none
of them. It reads small files, hashes injected files the scan has not hashed already, and runs
``nvidia-smi -q -x`` only on the live root when the binary exists.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from msgspec.structs import replace

from scanner.detect.classifiers import classify_name
from scanner.errors import HashError, UsageError
from scanner.hash import HostFactsCache, hash_file
from scanner.model import (
    Digests,
    DriverFacts,
    FileFacts,
    GpuLibrary,
    InjectedFile,
    NodeFacts,
    NodeKind,
    stat_key,
)
from scanner.node.cdi import (
    LEGACY_SOURCE,
    SPEC_DIRS,
    SPEC_SUFFIXES,
    CdiError,
    Injection,
    parse_legacy_list,
    parse_spec,
)
from scanner.node.conditions import (
    gpu_conditions,
    guest_driver_condition,
    read_configs,
    toolkit_conditions,
)
from scanner.node.driver import read_driver, run_nvidia_smi
from scanner.node.inputs import NodeInputs
from scanner.node.rootfs import MAX_SMALL, Root, read_small
from scanner.node.tegra import read_l4t

_DRIVER_LIBS = {"libcuda": "libcuda", "nvidia-ml": "nvml"}
#: key of injected files' digests in the host digest cache (only the digests are kept)
_CACHE_VERSION = "node-injected-1"
#: Where the node's own driver libraries live: the loader's directories (Debian, RHEL, Jetson's
#: nvidia/ and tegra/ subdirectories) and the GPU Operator's driver root. Copies elsewhere
#: (container layers under /var/lib, a cuda-compat forward-compatibility libcuda) are not the
#: driver the node runs.
_DRIVER_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu/nvidia",
    "/usr/lib/aarch64-linux-gnu/tegra",
    "/usr/lib",
)
_DRIVER_ROOT = "/run/nvidia/driver/"


def _is_node_driver(path: str) -> bool:
    path = path.removeprefix(_DRIVER_ROOT[:-1])
    return path.rsplit("/", 1)[0] in _DRIVER_DIRS


def _read_given(path: str, what: str) -> str:
    text = read_small(path, MAX_SMALL)
    if text is None:
        raise UsageError(f"{path}: cannot read {what} (no such regular file, or unreadable)")
    return text


def _injections(root: Root, inputs: NodeInputs, notes: list[str]) -> list[Injection]:
    found: list[Injection] = []
    seen: set[str] = set()
    for directory in SPEC_DIRS:
        for name in root.listdir(directory):
            path = f"{directory}/{name}"
            real = root.resolve(path)
            if not name.endswith(SPEC_SUFFIXES) or real is None or real in seen:
                continue
            seen.add(real)
            text = root.read_text(path)
            if text is None:
                notes.append(f"cdi: {path}: not a readable regular file")
                continue
            try:
                found.append(parse_spec(text, f"cdi:{path}"))
            except CdiError as e:
                notes.append(f"cdi: {path}: {e}")
    for path in inputs.extra_cdi:
        try:
            found.append(parse_spec(_read_given(path, "a CDI spec"), f"cdi:{path}"))
        except CdiError as e:
            raise UsageError(f"{path}: not a CDI spec: {e}") from None
    if inputs.container_cli_list is not None:
        text = _read_given(inputs.container_cli_list, "nvidia-container-cli list output")
        try:
            found.append(parse_legacy_list(text, LEGACY_SOURCE))
        except CdiError as e:
            raise UsageError(
                f"{inputs.container_cli_list}: not nvidia-container-cli list output: {e}"
            ) from None
    return found


def _hashed(libraries: Iterable[GpuLibrary]) -> dict[str, Digests]:
    out: dict[str, Digests] = {}
    for lib in libraries:
        for path in (lib.ref.path, *lib.aliases):
            out[path] = lib.digests
    return out


def _digests(host_path: str, cache: HostFactsCache | None) -> Digests:
    """A host file's digests, from the digest cache while its state (inode, size, mtime,
    ctime) is unchanged; raises HashError."""
    try:
        before = stat_key(os.stat(host_path))
    except OSError as e:
        raise HashError(f"{host_path}: cannot stat: {e.strerror}") from e
    hit = cache.get(before, _CACHE_VERSION, need_md5=False) if cache is not None else None
    if hit is not None:
        return hit.digests
    digests = hash_file(host_path)
    try:
        after = stat_key(os.stat(host_path))
    except OSError:
        after = None
    if cache is not None and after == before:
        cache.put(before, _CACHE_VERSION, FileFacts(digests=digests))
    return digests


def _injected(
    root: Root,
    found: list[Injection],
    known: dict[str, Digests],
    cache: HostFactsCache | None = None,
) -> list[InjectedFile]:
    merged: dict[str, tuple[set[str], set[str], set[str]]] = {}
    for inj in found:
        for host, (paths, devices) in inj.mounts.items():
            c, d, s = merged.setdefault(host, (set(), set(), set()))
            c.update(paths)
            d.update(devices)
            s.add(inj.source)
    out = []
    for host in sorted(merged):
        containers, devices, sources = merged[host]
        digests, error = None, None
        real = root.resolve(host)
        kind = root.kind(host)
        if real is None or kind is None:
            error = "not found in the root"
        elif kind is NodeKind.DIR:
            error = "a directory (mounted whole, not hashed)"
        elif kind is not NodeKind.FILE:
            error = "not a regular file (a socket or device), not hashed"
        else:
            digests = known.get(real) or known.get(host)
            if digests is None:
                try:
                    digests = _digests(root.host(real), cache)
                except HashError as e:
                    error = str(e).replace(root.host(real), host)
        base = host.rsplit("/", 1)[-1]
        match = classify_name(base)
        suffix = match.suffix if match else None
        out.append(
            InjectedFile(
                host_path=host,
                container_paths=tuple(sorted(containers)),
                sources=tuple(sorted(sources)),
                devices=tuple(sorted(devices)),
                digests=digests,
                family=match.classifier.family if match else None,
                version=suffix if suffix and suffix.count(".") >= 2 else None,
                error=error,
            )
        )
    return out


def read_node(
    root_path: str,
    inputs: NodeInputs,
    libraries: Iterable[GpuLibrary] = (),
    cache: HostFactsCache | None = None,
) -> NodeFacts | None:
    """The node facts of a host root; None when it shows no driver, GPU, injection or L4T.
    ``cache`` keeps injected files' digests between scans (the host digest cache's rule)."""
    if not inputs.enabled:
        return None
    root = Root(root_path)
    libraries = list(libraries)
    notes: list[str] = []
    user: dict[str, set[str]] = {"libcuda": set(), "nvml": set()}
    for lib in libraries:
        key = _DRIVER_LIBS.get(lib.ident.family)
        if key and lib.ident.version and _is_node_driver(lib.ref.path):
            user[key].add(lib.ident.version)
    smi_xml, smi_source = None, "nvidia-smi"
    if inputs.nvidia_smi_xml is not None:
        smi_xml = _read_given(inputs.nvidia_smi_xml, "nvidia-smi -q -x output")
        smi_source = f"nvidia-smi -q -x ({os.path.basename(inputs.nvidia_smi_xml)})"
    elif root.live:
        smi_xml, why = run_nvidia_smi()
        if why:
            notes.append(f"nvidia-smi: {why}")
    driver, gpus, driver_notes = read_driver(
        inputs.proc or root.host("/proc"),
        inputs.sys or root.host("/sys"),
        smi_xml=smi_xml,
        smi_source=smi_source,
        libcuda=tuple(user["libcuda"]),
        nvml=tuple(user["nvml"]),
    )
    notes.extend(driver_notes)
    found = _injections(root, inputs, notes)
    injected = _injected(root, found, _hashed(libraries), cache)
    if cache is not None:
        try:
            cache.save()
        except OSError as e:
            notes.append(f"cache: the injected files' digests were not saved: {e}")
    l4t, l4t_notes = read_l4t(root)
    notes.extend(l4t_notes)
    configs, configs_ok = read_configs(root, notes)
    nvidia_specs = sorted(
        inj.source.removeprefix("cdi:") for inj in found if inj.kind.startswith("nvidia.com/")
    )
    conditions = gpu_conditions(gpus)
    conditions += guest_driver_condition(root, conditions)
    if configs_ok:
        conditions += toolkit_conditions(configs, nvidia_specs)
    if l4t is not None and l4t.cuda and (driver is None or driver.cuda_max is None):
        # a Jetson's driver is L4T's: JetPack names the CUDA it ships
        driver = replace(
            driver or DriverFacts(version=None),
            cuda_max=l4t.cuda,
            cuda_max_source=f"JetPack {l4t.jetpack}",
        )
    facts = NodeFacts(
        driver=driver,
        gpus=gpus,
        injected=tuple(injected),
        container_links=tuple(sorted({link for inj in found for link in inj.links})),
        device_nodes=tuple(sorted({n for inj in found for n in inj.device_nodes})),
        l4t=l4t,
        notes=tuple(notes),
        conditions=tuple(sorted(conditions, key=lambda c: c.name)),
    )
    return facts or None
