"""Where a benchmark's CPU time went, read from ``/proc``: the whole machine (busy share of
all cores), this process (the benchmark's clients run as its threads), its descendants (the
service it started) and PostgreSQL's processes, as cores used over the measured interval.

A scaling figure means little without it: two API processes cannot go faster than one when
the machine's cores were already busy with one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Snapshot:
    """CPU counters at one instant: the machine's (busy, total) jiffies and, per process,
    (parent pid, command name, CPU seconds of user and system time)."""

    busy: int
    total: int
    processes: dict[int, tuple[int, str, float]]


def _machine() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user and nice
    return total - idle, total


def _process(pid: int) -> tuple[int, str, float] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone since the listing
        return None
    # comm may hold spaces and parentheses: it ends at the last ')'
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    rest = raw[raw.rindex(")") + 2 :].split()
    ppid, utime, stime = int(rest[1]), int(rest[11]), int(rest[12])
    return ppid, comm, (utime + stime) / _TICK


def snapshot() -> Snapshot:
    """The machine's and every process's CPU counters now."""
    busy, total = _machine()
    processes = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (facts := _process(int(entry))) is not None:
            processes[int(entry)] = facts
    return Snapshot(busy, total, processes)


def _descendants(root: int, processes: dict[int, tuple[int, str, float]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in processes.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    return found


def usage(before: Snapshot, after: Snapshot, seconds: float) -> dict[str, Any]:
    """Cores used between two snapshots ``seconds`` apart, by group, and the machine's busy
    share (1.0: every core busy the whole time). A process that ended in between is not
    counted; one that started counts from zero."""
    me = os.getpid()

    def spent(pids: set[int]) -> float:
        total = 0.0
        for pid in pids:
            now = after.processes.get(pid)
            if now is None:
                continue
            then = before.processes.get(pid)
            total += now[2] - (then[2] if then is not None and then[1] == now[1] else 0.0)
        return total

    service = _descendants(me, after.processes)
    postgres = {p for p, (_, comm, _) in after.processes.items() if comm == "postgres"}
    cpus = os.cpu_count() or 1
    busy_share = (after.busy - before.busy) / max(1, after.total - before.total)
    return {
        "cpus": cpus,
        "machine_busy_share": round(busy_share, 3),
        "cores_used": {
            "machine": round(busy_share * cpus, 2),
            "service": round(spent(service - postgres) / seconds, 2),
            "postgres": round(spent(postgres) / seconds, 2),
            "clients": round(spent({me}) / seconds, 2),
        },
    }
