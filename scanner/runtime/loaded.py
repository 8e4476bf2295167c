"""The bytes each process has loaded, hashed as loaded, and what lies at their path on disk.

A mapped file is read through ``/proc/PID/map_files/<range>``, which opens the very inode the
process mapped, even when it was deleted or replaced on disk since (this needs CAP_SYS_ADMIN or
CAP_CHECKPOINT_RESTORE). When the mapped inode is the file the scan already hashed at that path
(same device and inode, not deleted), its facts are reused instead. Bytes that can be read
neither way stay unknown, with the reason: never taken to be the disk's.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable

from msgspec import Struct, field

from scanner.errors import HashError
from scanner.hash import HostFactsCache, facts_of, hash_file, may_be_dpkg_owned
from scanner.model import (
    Digests,
    ElfFacts,
    FileFacts,
    LoadedBy,
    LoadedVia,
    StatKey,
    stat_key,
)
from scanner.runtime.procfs import MappedFile, ProcessMaps, ProcWalk

#: The facts the scan already has of a path in the scanned root, with the file's `StatKey`.
DiskLookup = Callable[[str], tuple[StatKey, FileFacts] | None]
#: ELF analysis of a file on this machine: (path to open, path it is reported as).
Analyze = Callable[[str, str], ElfFacts]


class DiskState:
    """What lies at a loaded file's path now (`LoadedCopy.disk_state`)."""

    SAME = "same"  # the mapped inode itself
    OTHER = "other"  # another file, with `LoadedCopy.disk` its digests
    ABSENT = "absent"  # nothing
    UNREADABLE = "unreadable"  # something that could not be read


class LoadedCopy(Struct, frozen=True):
    """The bytes some processes have mapped from one path, with what is at that path now."""

    path: str
    #: the processes' root is the scanned root: ``path`` is a path of the scanned tree
    same_root: bool
    facts: FileFacts | None  # of the loaded bytes; None when they could not be read
    error: str | None  # why they could not
    disk_state: str
    disk: Digests | None  # the file at ``path`` now, when `DiskState.OTHER`
    loaders: tuple[LoadedBy, ...]
    #: the scanned tree's path of the very inode mapped (a host file bind-mounted into a
    #: container, or the file the host's processes loaded); None when it is no scanned file
    scanned_path: str | None = None

    @property
    def deleted(self) -> bool:
        return any(p.deleted for p in self.loaders)


class _Loaded(Struct):
    facts: FileFacts | None
    via: LoadedVia
    error: str | None
    scanned_path: str | None = None


class _Group(Struct):
    path: str
    same_root: bool
    loaded: _Loaded
    disk_state: str
    disk: Digests | None
    loaders: list[LoadedBy] = field(default_factory=list)


def _same_bytes(loaded: _Loaded, disk: Digests) -> bool:
    return loaded.facts is not None and loaded.facts.digests.sha256 == disk.sha256


class _Resolver:
    def __init__(
        self,
        walk: ProcWalk,
        root: str,
        disk: DiskLookup,
        inodes: dict[tuple[int, int], str],
        cache: HostFactsCache,
        version: str,
        analyze: Analyze,
        need_md5: Callable[[str], bool],
    ) -> None:
        self.proc = walk.proc
        self.inodes = inodes
        self.prefix = "" if root == "/" else root.rstrip("/")
        self.disk = disk
        self.cache = cache
        self.version = version
        self.analyze = analyze
        self.need_md5 = need_md5
        self.loaded: dict[tuple[int, int], _Loaded] = {}

    def facts_at(self, opened: str, name: str, md5: bool) -> tuple[StatKey, FileFacts]:
        """Facts of the file ``opened`` leads to (through the cache); OSError/HashError."""
        key = stat_key(os.stat(opened))
        cached = self.cache.get(key, self.version, need_md5=md5)
        if cached is not None:
            return key, cached
        digests = hash_file(opened, md5=md5, follow=True)
        facts = facts_of(digests, lambda: self.analyze(opened, name))
        if stat_key(os.stat(opened)) == key:  # not cached if it changed while being read
            self.cache.put(key, self.version, facts)
        return key, facts

    def loaded_facts(self, proc: ProcessMaps, f: MappedFile) -> _Loaded:
        known = self.loaded.get((f.dev, f.inode))
        if known is not None and known.facts is not None:
            return known
        # a root of its own may keep dpkg's MD5 records: guess from the path, as images do
        md5 = self.need_md5(f.path) if proc.same_root else may_be_dpkg_owned(f.path)
        scanned = self.inodes.get((f.dev, f.inode))
        if scanned is not None and not f.deleted:
            # the mapped inode is a file the scan hashed (whatever path the process used)
            hit = self.disk(scanned)
            if hit is not None and hit[0][:2] == (f.dev, f.inode):
                found = _Loaded(hit[1], LoadedVia.INODE, None, scanned)
                self.loaded[(f.dev, f.inode)] = found
                return found
        opened = f"{self.proc}/{proc.pid}/map_files/{f.range}"
        try:
            _, facts = self.facts_at(opened, f.path, md5)
        except (OSError, HashError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            found = _Loaded(None, LoadedVia.NONE, f"{opened}: {why}")
        else:
            found = _Loaded(facts, LoadedVia.MAP_FILES, None)
        self.loaded[(f.dev, f.inode)] = found
        return found

    def on_disk(
        self, proc: ProcessMaps, f: MappedFile, loaded: _Loaded
    ) -> tuple[str, Digests | None]:
        """What is at the mapped path now, in the process's own root."""
        if loaded.scanned_path is not None:
            # the mapped inode is a scanned file (a host file bind-mounted into a container
            # is that same file at its path in the container)
            return DiskState.SAME, None
        if proc.same_root:
            hit = self.disk(f.path)
            if hit is not None:
                same_inode = hit[0][:2] == (f.dev, f.inode) and not f.deleted
                if same_inode or _same_bytes(loaded, hit[1].digests):
                    return DiskState.SAME, None
                return DiskState.OTHER, hit[1].digests
            where = (self.prefix + f.path) or "/"
        else:
            where = f"{self.proc}/{proc.pid}/root{f.path}"
        try:
            st = os.stat(where)
        except FileNotFoundError:
            return DiskState.ABSENT, None
        except OSError:
            return DiskState.UNREADABLE, None
        if (st.st_dev, st.st_ino) == (f.dev, f.inode) and not f.deleted:
            return DiskState.SAME, None
        if not stat.S_ISREG(st.st_mode):
            return DiskState.ABSENT, None
        md5 = loaded.facts is not None and loaded.facts.digests.md5 is not None
        try:
            _, facts = self.facts_at(where, f.path, md5)
        except (OSError, HashError):
            return DiskState.UNREADABLE, None
        if _same_bytes(loaded, facts.digests):
            return DiskState.SAME, None
        return DiskState.OTHER, facts.digests


def resolve_loaded(
    walk: ProcWalk,
    root: str,
    disk: DiskLookup,
    inodes: dict[tuple[int, int], str],
    cache: HostFactsCache,
    version: str,
    analyze: Analyze,
    need_md5: Callable[[str], bool],
) -> list[LoadedCopy]:
    """Every distinct loaded copy of a GPU library, with the processes that map it.

    ``disk``: the scan's facts of a path in the scanned tree; ``inodes``: (st_dev, st_ino) of
    each scanned library file -> its path."""
    r = _Resolver(walk, root, disk, inodes, cache, version, analyze, need_md5)
    groups: dict[tuple[object, ...], _Group] = {}
    for proc in walk.processes:
        for f in proc.files:
            loaded = r.loaded_facts(proc, f)
            state, on_disk = r.on_disk(proc, f, loaded)
            sha = loaded.facts.digests.sha256 if loaded.facts is not None else None
            key = (
                loaded.scanned_path,
                proc.same_root,
                f.path,
                sha or (f.dev, f.inode),
                state,
                on_disk.sha256 if on_disk is not None else None,
            )
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(f.path, proc.same_root, loaded, state, on_disk)
            c = proc.container
            group.loaders.append(
                LoadedBy(
                    pid=proc.pid,
                    exe=proc.exe,
                    container_id=c.container_id,
                    engine=c.engine,
                    pod_uid=c.pod_uid,
                    deleted=f.deleted,
                    sha256=sha,
                    via=loaded.via,
                )
            )
    with contextlib.suppress(OSError):
        cache.save()
    return [
        LoadedCopy(
            path=g.path,
            same_root=g.same_root,
            facts=g.loaded.facts,
            error=g.loaded.error,
            disk_state=g.disk_state,
            disk=g.disk,
            loaders=tuple(g.loaders),
            scanned_path=g.loaded.scanned_path,
        )
        for g in sorted(groups.values(), key=lambda g: (g.path, not g.same_root))
    ]
