"""``--runtime`` benchmark: what walking 500 live processes adds to a warm host scan; prints JSON.

Starts 500 sleeping processes (every tenth one a compiled loader that dlopen()s the bench's
stand-in GPU libraries, 32 MiB each; the others map only libc), then times the warm scan of the
~7,000-file root of bench/scan.py (``gpuprov scan / --include ROOT``, so the loaders' mappings
are paths of the scanned tree) without and with ``--runtime``. Target (issue 11): at most
0.3 s more.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan import CACHE, GPROV, build_small_tree  # noqa: E402

LOADER = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!dlopen(argv[i], RTLD_NOW | RTLD_LOCAL)) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
"""


def build_loader(work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    (work / "loader.c").write_text(LOADER)
    exe = work / "gpu-loader"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(work / "loader.c"), "-ldl"], check=True)
    return exe


@contextlib.contextmanager
def processes(loader: Path, libs: list[Path], count: int, loading_every: int) -> Iterator[int]:
    """``count`` sleeping processes; every ``loading_every``-th maps ``libs``."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(count):
            args = [str(loader), *map(str, libs)] if i % loading_every == 0 else [str(loader)]
            procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, start_new_session=True))
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline() != b"ready\n":
                raise SystemExit("a loader process failed to start")
        yield sum(1 for i in range(count) if i % loading_every == 0)
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()
            if p.stdout is not None:
                p.stdout.close()


def scan(root: Path, cache: Path, out: Path, runtime: bool) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one scan, and its JSON report."""
    cmd = [*GPROV, "scan", "/", "--include", str(root), "--cache-dir", str(cache), "-q"]
    cmd += ["-f", "json", "-o", str(out), *(["--runtime"] if runtime else [])]
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    if not out.exists():
        raise SystemExit(f"scan {' '.join(cmd)} wrote no report")
    return wall, json.loads(out.read_text())


def _in_process(root: Path, cache: Path, repeat: int) -> dict[str, float]:
    """The same two warm scans in this process (no interpreter start-up): best of ``repeat``."""
    from scanner.pipeline import ScanOptions, run_scan

    def best(runtime: bool) -> float:
        options = ScanOptions(include=(str(root),), cache_dir=cache, runtime=runtime)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            run_scan("/", options)
            times.append(time.perf_counter() - started)
        return min(times)

    plain, with_runtime = best(False), best(True)
    return {
        "warm_scan_s": round(plain, 3),
        "warm_scan_runtime_s": round(with_runtime, 3),
        "added_s": round(with_runtime - plain, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="take the best of N runs of each")
    parser.add_argument("--processes", type=int, default=500, help="sleeping processes to start")
    parser.add_argument("--loading-every", type=int, default=10, help="every Nth maps stand-ins")
    args = parser.parse_args()
    root = build_small_tree()
    libs = sorted((root / "usr" / "lib" / "x86_64-linux-gnu").glob("lib*.so.*.*"))
    scratch = CACHE / "scratch-runtime"
    shutil.rmtree(scratch, ignore_errors=True)
    loader = build_loader(scratch / "bin")
    cache, out = scratch / "cache", scratch / "out.json"
    with processes(loader, libs, args.processes, args.loading_every) as loading:
        scan(root, cache, out, True)  # warm both caches (files, listings, runtime)
        plain = min(scan(root, cache, out, False)[0] for _ in range(args.repeat))
        runs = [scan(root, cache, out, True) for _ in range(args.repeat)]
        with_runtime = min(wall for wall, _ in runs)
        report = min(runs, key=lambda r: r[0])[1]
        stage = min(r["stats"]["seconds_runtime"] for _, r in runs)
        in_process = _in_process(root, cache, args.repeat)
    rt = report["runtime"]
    mapped = sum(
        1
        for lib in report["libraries"]
        for p in lib["loaded_by"]
        if lib["ref"]["path"].startswith(str(root))
    )
    print(
        json.dumps(
            {
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "processes_started": args.processes,
                "processes_loading_stand_ins": loading,
                "processes_seen": rt["processes"],
                "processes_mapping_gpu_libraries": rt["loading"],
                "mappings_reported_in_tree": mapped,
                "warm_scan_s": round(plain, 3),
                "warm_scan_runtime_s": round(with_runtime, 3),
                "added_s": round(with_runtime - plain, 3),
                "runtime_stage_s": round(stage, 4),
                "in_process": in_process,
                "targets": {"added_s": 0.3},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
