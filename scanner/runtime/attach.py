"""Loaded copies into the scan's libraries and findings.

A process that maps the very file the scan found gets listed on that library (``loaded_by``);
bytes no scanned file holds any more (deleted, replaced, a container's own file) become a
library of their own, identified and judged like any other, with ``on_disk`` False. The
findings say what a gate needs: ``loaded-deleted``, ``loaded-differs-from-disk``,
``loaded-unowned``, and ``unreadable`` for whatever could not be read (fail safe: it matches
the loaded-* kinds too).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from msgspec.structs import replace

from scanner.detect.context import DetectContext
from scanner.detect.identify import identify
from scanner.model import (
    FileRef,
    Finding,
    FindingKind,
    GpuLibrary,
    Integrity,
    OwnedFile,
    Package,
    RuntimeScan,
    Sha256,
)
from scanner.runtime.loaded import DiskState, LoadedCopy
from scanner.runtime.procfs import ProcWalk
from scanner.verify.integrity import integrity_verdict

Owners = dict[str, tuple[Package, OwnedFile]]

_LOADED_KINDS = (FindingKind.LOADED_UNOWNED, FindingKind.LOADED_DELETED, FindingKind.LOADED_DIFFERS)
#: what reading another process's mappings takes, for the messages that say it was missing
_NEEDS = "run as root (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, and ptrace access)"
#: ... when the scan already runs as root: something else denies it
_NEEDS_AS_ROOT = (
    "this scan runs as root, so something else denies it: grant CAP_SYS_ADMIN or "
    "CAP_CHECKPOINT_RESTORE and ptrace access (a container's dropped capabilities, seccomp, "
    "AppArmor/SELinux, Yama ptrace_scope 3, or a process of another user namespace)"
)


def _needs() -> str:
    """What to do about mappings that could not be read, said to this scanner's user."""
    return _NEEDS_AS_ROOT if os.geteuid() == 0 else _NEEDS


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _pids(copy: LoadedCopy | GpuLibrary) -> str:
    loaders = copy.loaders if isinstance(copy, LoadedCopy) else copy.loaded_by
    pids = sorted({p.pid for p in loaders})
    more = f" and {len(pids) - 5} more" if len(pids) > 5 else ""
    return "pid " + ", ".join(map(str, pids[:5])) + more


def _copy_library(
    copy: LoadedCopy,
    owners: Owners,
    ctx: DetectContext,
    own_root: tuple[tuple[Package, OwnedFile] | None, str] | None,
) -> GpuLibrary | None:
    """The library a loaded copy is, judged like a scanned file; None when it is no ELF.

    ``own_root``: for a copy mapped from a root of its own, its owner there (read through
    /proc/PID/root) and that root; None when that root could not be read."""
    facts = copy.facts
    assert facts is not None
    if facts.not_elf:
        return None
    hit = owners.get(copy.path) if copy.same_root else (own_root[0] if own_root else None)
    owner, record = (hit[0], hit[1]) if hit else (None, None)
    integrity, reason = integrity_verdict(facts.digests, owner, record)
    if not copy.same_root:
        containers = sorted({p.container_id[:12] for p in copy.loaders if p.container_id})
        where = f"container {', '.join(containers)}" if containers else "another root"
        if own_root is None:
            reason = f"loaded from {where}, whose root could not be read for its packages"
        else:
            reason = f"loaded from {where} ({own_root[1]}): {reason}"
    ident = identify(copy.path, facts, owner, ctx)
    return GpuLibrary(
        ref=FileRef(copy.path),
        size=facts.digests.size,
        aliases=(),
        ident=ident,
        digests=facts.digests,
        owner=owner,
        integrity=integrity,
        integrity_reason=reason,
        error=facts.error,
        loaded_by=copy.loaders,
        on_disk=copy.disk_state == DiskState.SAME,
        disk_sha256=copy.disk.sha256 if copy.disk is not None else None,
        loaded_copy=True,
    )


def apply_loaded(
    copies: Sequence[LoadedCopy],
    walk: ProcWalk,
    libraries: Sequence[GpuLibrary],
    owners: Owners,
    ctx: DetectContext,
    own_roots: dict[int, tuple[tuple[Package, OwnedFile] | None, str]] | None = None,
) -> tuple[list[GpuLibrary], list[Finding], RuntimeScan]:
    """The libraries with their loaders, the loaded copies added, and the runtime findings.

    ``own_roots``: owners of copies mapped from roots of their own, by index in ``copies``
    (`scanner.runtime.owners.owners_in_own_roots`)."""
    index = {lib.ref.path: i for i, lib in enumerate(libraries)}
    out = list(libraries)
    extra: dict[tuple[str, Sha256], GpuLibrary] = {}
    unreadable: list[LoadedCopy] = []
    for i, copy in enumerate(copies):
        if copy.facts is None:
            unreadable.append(copy)
            continue
        at = index.get(copy.scanned_path) if copy.scanned_path is not None else None
        if at is not None:
            lib = out[at]
            out[at] = replace(lib, loaded_by=(*lib.loaded_by, *copy.loaders))
            continue
        lib_or_none = _copy_library(copy, owners, ctx, (own_roots or {}).get(i))
        if lib_or_none is None:
            continue
        # one component per loaded path and bytes, whichever roots and states they come from
        key = (copy.path, lib_or_none.digests.sha256)
        known = extra.get(key)
        if known is not None:
            lib_or_none = replace(
                known,
                loaded_by=(*known.loaded_by, *copy.loaders),
                on_disk=known.on_disk and lib_or_none.on_disk,
                disk_sha256=known.disk_sha256 or lib_or_none.disk_sha256,
            )
        extra[key] = lib_or_none
    out.extend(sorted(extra.values(), key=lambda lib: (lib.ref.path, lib.digests.sha256)))
    findings = _findings(out, unreadable, walk)
    runtime = RuntimeScan(
        proc=walk.proc,
        processes=walk.seen,
        loading=len(walk.processes),
        unreadable=tuple(pid for pid, _ in walk.unreadable),
        unreadable_mappings=sum(len(c.loaders) for c in unreadable),
    )
    return out, findings, runtime


def _findings(
    libraries: Sequence[GpuLibrary], unreadable: Sequence[LoadedCopy], walk: ProcWalk
) -> list[Finding]:
    findings: list[Finding] = []
    deleted = [lib for lib in libraries if any(p.deleted for p in lib.loaded_by)]
    deleted_paths = [*(lib.ref.path for lib in deleted)]
    deleted_paths += [c.path for c in unreadable if c.deleted]
    if deleted_paths:
        what = "; ".join(
            [f"{lib.ref.path} ({_pids(lib)})" for lib in deleted]
            + [f"{c.path} ({_pids(c)})" for c in unreadable if c.deleted]
        )
        findings.append(
            Finding(
                FindingKind.LOADED_DELETED,
                f"{_plural(len(deleted_paths), 'GPU library', 'GPU libraries')} loaded by live "
                f"processes deleted or replaced on disk since: {what}",
                tuple(dict.fromkeys(deleted_paths)),
            )
        )
    differs = [lib for lib in libraries if lib.loaded_by and lib.disk_sha256 is not None]
    if differs:
        what = "; ".join(
            f"{lib.ref.path}: loaded sha256 {lib.digests.sha256}, on disk {lib.disk_sha256} "
            f"({_pids(lib)})"
            for lib in differs
        )
        findings.append(
            Finding(
                FindingKind.LOADED_DIFFERS,
                _plural(len(differs), "loaded GPU library differs", "loaded GPU libraries differ")
                + f" from the file at its path on disk: {what}",
                tuple(dict.fromkeys(lib.ref.path for lib in differs)),
            )
        )
    unowned = [lib for lib in libraries if lib.loaded_by and lib.integrity is Integrity.UNOWNED]
    if unowned:
        findings.append(
            Finding(
                FindingKind.LOADED_UNOWNED,
                f"{_plural(len(unowned), 'GPU library', 'GPU libraries')} loaded by live "
                "processes belong to no package: "
                + "; ".join(f"{lib.ref.path} ({_pids(lib)})" for lib in unowned),
                tuple(dict.fromkeys(lib.ref.path for lib in unowned)),
            )
        )
    for copy in unreadable:
        findings.append(
            Finding(
                FindingKind.UNREADABLE,
                f"the bytes {_pids(copy)} loaded from {copy.path} could not be read "
                f"({copy.error}); whether they are the file on disk is unknown: {_needs()}",
                (copy.path,),
                (FindingKind.LOADED_DIFFERS,),
            )
        )
    if walk.unreadable:
        pids = ", ".join(f"{pid} ({why})" for pid, why in walk.unreadable[:5])
        more = f" and {len(walk.unreadable) - 5} more" if len(walk.unreadable) > 5 else ""
        findings.append(
            Finding(
                FindingKind.UNREADABLE,
                f"the memory maps of {_plural(len(walk.unreadable), 'process', 'processes')} "
                f"under {walk.proc} could not be read: {pids}{more}; the GPU libraries they "
                f"load are unknown: {_needs()}",
                (),
                _LOADED_KINDS,
            )
        )
    return findings
