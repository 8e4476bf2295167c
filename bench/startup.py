"""Start-up benchmark: how long `gpuprov` takes before it does any work; prints JSON.

Start-up is part of every scan (a warm host rescan is mostly start-up), so the entry module
loads each command group only when it is invoked. Targets (issue 8): ``gpuprov --version``
<= 0.15 s, ``gpuprov scan --help`` <= 0.2 s. Wall times are the best of ``--repeat`` runs of
the installed console script, next to a bare ``python -c pass`` for scale. Because wall time
moves with machine load, the best CPU time (user + system) of each command and the cumulative
import time of the entry and of each command module (``python -X importtime``, best of the
runs) are reported too.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
COMMANDS = {
    "version": ["--version"],
    "scan_help": ["scan", "--help"],
    "help": ["--help"],
}
#: Modules whose cumulative import time is reported: the entry, then each command module.
MODULES = (
    "gpuprov.cli",
    "scanner.cli",
    "scanner.cli_agent",
    "scanner.cli_provenance",
    "scanner.cli_gate",
    "app.cli",
)
TARGETS = {"version": 0.15, "scan_help": 0.2}


def best_of(cmd: list[str], repeat: int) -> dict[str, float]:
    """Best wall time and best CPU time (user + system, which load moves less) of ``cmd``."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        wall = min(wall, time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        cpu = min(cpu, used)
    return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4)}


def import_seconds(module: str, repeat: int) -> float:
    """Cumulative import time of ``module`` alone, as ``-X importtime`` reports it."""
    best = float("inf")
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            check=True,
            capture_output=True,
            text=True,
        )
        for line in done.stderr.splitlines():
            match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s*(\S+)$", line)
            if match and match.group(2) == module:
                best = min(best, int(match.group(1)) / 1e6)
    return round(best, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=10, help="runs per figure (best kept)")
    args = parser.parse_args()
    script = BIN / "gpuprov"
    if not script.exists():
        sys.exit(f"{script} is missing: install gpuprov (pip install -e .) first")
    runs = {name: best_of([str(script), *argv], args.repeat) for name, argv in COMMANDS.items()}
    report = {
        "python": sys.version.split()[0],
        "repeat": args.repeat,
        "bare_python": best_of([sys.executable, "-c", "pass"], args.repeat),
        "commands": runs,
        "targets_s": TARGETS,
        "within_target": {n: runs[n]["wall_s"] <= limit for n, limit in TARGETS.items()},
        "import_cumulative_s": {m: import_seconds(m, max(3, args.repeat // 2)) for m in MODULES},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
