"""Node facts benchmark: what reading a GPU node's driver, GPUs, CDI spec and L4T release adds
to a host scan; prints JSON.

Builds a node root with 8 GPUs' information files, the module's version files, the driver's
libraries (32 MiB stand-ins each, as big as a real libcuda), and the CDI spec `nvidia-ctk cdi
generate` writes for them (40 mounts); times, in process, the node stage alone (cold: every
injected file hashed; cached: their digests from the digest cache) and a warm host scan with and
without node facts (median of --runs). Injected files keep their digests in the host digest
cache (``node-files.json``), keyed by file state as host libraries are.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from scanner.hash import HostFactsCache
from scanner.node.inputs import NodeInputs
from scanner.node.reader import read_node
from scanner.pipeline import ScanOptions, run_scan

DRIVER = "535.129.03"
LIB = "usr/lib/x86_64-linux-gnu"
MIB = 1 << 20


def _write(root: Path, path: str, data: bytes | str) -> None:
    dest = root / path
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        dest.write_text(data)
    else:
        dest.write_bytes(data)


def build_node(root: Path, gpus: int = 8, big: int = 32 * MIB) -> None:
    _write(root, "etc/hostname", "bench-gpu-node\n")
    _write(
        root,
        "proc/driver/nvidia/version",
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {DRIVER}  Thu Oct 19 18:56:32 UTC 2023\n",
    )
    _write(root, "sys/module/nvidia/version", f"{DRIVER}\n")
    for i in range(gpus):
        bus = f"0000:{0x17 + i * 0x10:02x}:00.0"
        _write(
            root,
            f"proc/driver/nvidia/gpus/{bus}/information",
            "Model: \t\t NVIDIA H100 80GB HBM3\n"
            f"GPU UUID: \t GPU-{i:08x}-0000-0000-0000-000000000000\n"
            f"Video BIOS: \t 96.00.74.00.0d\nBus Location: \t {bus}\nDevice Minor: \t {i}\n",
        )
    names = ["cuda", "nvidia-ml", "nvidia-ptxjitcompiler", "cudadebugger", "nvidia-nvvm"]
    names += [f"nvidia-extra{i}" for i in range(35)]
    mounts = []
    for n, name in enumerate(names):
        path = f"/{LIB}/lib{name}.so.{DRIVER}"
        size = big if n < 2 else MIB
        _write(root, path.lstrip("/"), os.urandom(size))
        mounts.append(
            f"  - containerPath: {path}\n    hostPath: {path}\n"
            "    options: [ro, nosuid, nodev, bind]\n"
        )
    devices = "".join(
        f'- name: "{i}"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia{i}\n'
        for i in range(gpus)
    )
    _write(
        root,
        "etc/cdi/nvidia.yaml",
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ncontainerEdits:\n  deviceNodes:\n"
        "  - path: /dev/nvidiactl\n  mounts:\n" + "".join(mounts) + "devices:\n" + devices,
    )


def _median(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuprov-node-bench-") as tmp:
        root = Path(tmp) / "root"
        build_node(root)
        cache = Path(tmp) / "cache"
        warm = ScanOptions(cache_dir=cache)
        without = ScanOptions(cache_dir=cache, node=NodeInputs(enabled=False))
        result = run_scan(str(root), warm)  # fills the host digest caches
        digests = HostFactsCache(cache / "node-files.json")
        assert result.node is not None and len(result.node.gpus) == 8
        out = {
            "gpus": len(result.node.gpus),
            "injected_files": len(result.node.injected),
            "injected_bytes": sum(i.digests.size for i in result.node.injected if i.digests),
            "node_stage_cold_s": _median(lambda: read_node(str(root), NodeInputs()), args.runs),
            "node_stage_cached_s": _median(
                lambda: read_node(str(root), NodeInputs(), result.libraries, digests), args.runs
            ),
            "warm_host_scan_without_node_s": _median(
                lambda: run_scan(str(root), without), args.runs
            ),
            "warm_host_scan_with_node_s": _median(lambda: run_scan(str(root), warm), args.runs),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
