"""Which GPU libraries each live process has mapped: a walk of ``/proc/*/maps``.

One read of each process's maps, tested against the classifier table's name prefixes before
any line is parsed (most processes map no GPU library); only the processes that do are asked
for their executable, cgroup and root. Nothing is written; a process that exits mid-walk is
simply gone, a process whose maps cannot be read is counted and named, never passed over.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from msgspec import Struct, field

from scanner.detect.classifiers import CLASSIFIERS
from scanner.runtime.cgroup import ContainerRef, parse_cgroup

_DELETED: Final = " (deleted)"
#: A GPU library's name anywhere in a maps file: the cheap test of every process.
_GPU_NAME: Final = re.compile(
    b"/lib(?:"
    + b"|".join(re.escape(p.encode()) for c in CLASSIFIERS for p in c.prefixes)
    + b")[^/\n]*\\.so"
)


class MappedFile(Struct, frozen=True):
    """One file a process has mapped (its first mapping; the others are the same file)."""

    path: str  # as the process sees it, without the " (deleted)" mark
    deleted: bool  # maps marks the mapped file deleted: it has no name on disk any more
    dev: int  # st_dev of the mapped inode (os.makedev of maps' major:minor)
    inode: int
    range: str  # "7f3c1a200000-7f3c1a201000": its name under /proc/PID/map_files/


class ProcessMaps(Struct, frozen=True):
    """A live process that maps at least one GPU library."""

    pid: int
    exe: str | None  # /proc/PID/exe's target; None when it cannot be read (kernel thread)
    container: ContainerRef
    #: the process's root is the scanned root: its paths are paths in the scanned tree
    same_root: bool
    files: tuple[MappedFile, ...]


class ProcWalk(Struct):
    """What the walk of one proc directory found."""

    proc: str
    processes: list[ProcessMaps] = field(default_factory=list)
    seen: int = 0  # processes whose maps were looked at
    #: (pid, why) of each process whose maps could not be read
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0


def _pids(proc: str) -> list[int]:
    with os.scandir(proc) as entries:
        return sorted(int(e.name) for e in entries if e.name.isdigit())


def parse_maps(data: bytes, is_candidate: Callable[[str], bool]) -> tuple[MappedFile, ...]:
    """The GPU-library files in one maps text, each once, in first-mapping order."""
    found: dict[tuple[int, int, str], MappedFile] = {}
    for raw in data.split(b"\n"):
        if b"/lib" not in raw or _GPU_NAME.search(raw) is None:
            continue
        parts = raw.split(None, 5)
        if len(parts) < 6:
            continue
        line = parts[5].decode("utf-8", "surrogateescape")
        deleted = line.endswith(_DELETED)
        path = line[: -len(_DELETED)] if deleted else line
        if not path.startswith("/") or not is_candidate(path):
            continue
        try:
            major, minor = (int(x, 16) for x in parts[3].split(b":"))
            dev, inode = os.makedev(major, minor), int(parts[4])
        except ValueError:
            continue
        key = (dev, inode, path)
        if key not in found:
            found[key] = MappedFile(path, deleted, dev, inode, parts[0].decode("ascii", "replace"))
    return tuple(found.values())


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _exe(proc: str, pid: int) -> str | None:
    try:
        return os.readlink(f"{proc}/{pid}/exe")
    except OSError:
        return None


def _container(proc: str, pid: int) -> ContainerRef:
    try:
        return parse_cgroup(_read(f"{proc}/{pid}/cgroup").decode("utf-8", "replace"))
    except OSError:
        return ContainerRef()


def _same_root(proc: str, pid: int, root: os.stat_result) -> bool:
    try:
        st = os.stat(f"{proc}/{pid}/root")
    except OSError:
        return False  # unknown: its paths are not claimed to be the scanned root's
    return (st.st_dev, st.st_ino) == (root.st_dev, root.st_ino)


def _maps(proc: str, pid: int) -> bytes | OSError | None:
    """A process's maps; None when it has exited, the error when it cannot be read."""
    try:
        data = _read(f"{proc}/{pid}/maps")
    except (FileNotFoundError, ProcessLookupError):
        return None  # exited while the walk ran
    except OSError as e:
        return e
    # only a maps text naming a GPU library is kept: the others are dropped on the thread
    return data if _GPU_NAME.search(data) is not None else b""


def walk_proc(proc: str, root: str, is_candidate: Callable[[str], bool]) -> ProcWalk:
    """Every live process under ``proc`` that maps a GPU library (by `is_candidate`).

    The maps are read on a few threads: the kernel writes each one out (most of the cost)
    without holding the GIL, so a node's many cores share the work."""
    started = time.perf_counter()
    walk = ProcWalk(proc)
    root_st = os.stat(root)
    pids = _pids(proc)
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        texts = list(pool.map(lambda pid: _maps(proc, pid), pids, chunksize=16))
    for pid, data in zip(pids, texts, strict=True):
        if data is None:
            continue
        walk.seen += 1
        if isinstance(data, OSError):
            walk.unreadable.append((pid, data.strerror or str(data)))
            continue
        if not data:
            continue
        files = parse_maps(data, is_candidate)
        if not files:
            continue
        walk.processes.append(
            ProcessMaps(
                pid=pid,
                exe=_exe(proc, pid),
                container=_container(proc, pid),
                same_root=_same_root(proc, pid, root_st),
                files=files,
            )
        )
    walk.seconds = time.perf_counter() - started
    return walk


def looks_like_proc(proc: str) -> bool:
    """Whether ``proc`` holds live processes (a procfs, not an empty mount point)."""
    try:
        with os.scandir(proc) as entries:
            for e in entries:
                if e.name.isdigit() and os.path.exists(f"{proc}/{e.name}/maps"):
                    return True
    except OSError:
        return False
    return False
