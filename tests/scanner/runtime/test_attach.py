"""Loaded copies into the scan's libraries, and the findings a gate reads of them
(scanner/runtime/attach.py), on values built here: what each copy becomes, which finding names
it, and what the runtime summary counts. test_loaded_scan.py covers the same through real
processes; this file is the narrow one (mutation/modules.toml, runtime-findings)."""

from __future__ import annotations

import pytest

from scanner.detect.context import DetectContext
from scanner.model import (
    Digests,
    FileFacts,
    FileRef,
    FindingKind,
    GpuLibrary,
    Identification,
    Integrity,
    LoadedBy,
    LoadedVia,
    OwnedFile,
    Package,
    PackageManager,
    Sha256,
)
from scanner.runtime import attach
from scanner.runtime.attach import apply_loaded
from scanner.runtime.cgroup import ContainerRef
from scanner.runtime.loaded import DiskState, LoadedCopy
from scanner.runtime.procfs import ProcessMaps, ProcWalk

A, B, C, D = (Sha256(c * 64) for c in "abcd")
LIB = "/usr/lib/x86_64-linux-gnu"
CUBLAS = f"{LIB}/libcublas.so.12"
CUDART = f"{LIB}/libcudart.so.12"
PKG = Package(
    PackageManager.DPKG,
    "libcudart12",
    "12.4.127-1",
    "pkg:deb/ubuntu/libcudart12@12.4.127-1",
    files=(OwnedFile(CUDART, "sha256", B),),
)
OWNERS = {CUDART: (PKG, PKG.files[0])}
CTX = DetectContext()


def scanned(
    path: str, sha: Sha256, *loaders: LoadedBy, integrity: Integrity = Integrity.UNOWNED
) -> GpuLibrary:
    return GpuLibrary(
        ref=FileRef(path),
        size=10,
        aliases=(),
        ident=Identification("cublas", "cublas", "12.4.5.8", 12, "x86_64"),
        digests=Digests(10, sha),
        owner=None,
        integrity=integrity,
        integrity_reason="no package",
        loaded_by=loaders,
    )


def pid(n: int, sha: Sha256 | None = A, *, deleted: bool = False, container: str | None = None):
    return LoadedBy(n, "/usr/bin/python3", container, None, None, deleted, sha, LoadedVia.MAP_FILES)


def copy(
    path: str,
    sha: Sha256 | None,
    *loaders: LoadedBy,
    same_root: bool = True,
    state: str = DiskState.SAME,
    disk: Sha256 | None = None,
    scanned_path: str | None = None,
    not_elf: bool = False,
) -> LoadedCopy:
    facts = None if sha is None else FileFacts(Digests(20, sha), not_elf=not_elf)
    return LoadedCopy(
        path,
        same_root,
        facts,
        None if sha is not None else "Permission denied",
        state,
        Digests(30, disk) if disk is not None else None,
        loaders,
        scanned_path,
    )


def walk(processes: int = 0, unreadable: list[tuple[int, str]] | None = None) -> ProcWalk:
    maps = [ProcessMaps(n, None, ContainerRef(), True, ()) for n in range(processes)]
    return ProcWalk("/host/proc", maps, 40, unreadable or [])


def kinds(findings: list[object]) -> list[str]:
    return [f.kind.value for f in findings]  # type: ignore[attr-defined]


def test_a_process_mapping_a_scanned_file_is_listed_on_it() -> None:
    first, second = pid(10), pid(11, container="c" * 64)
    lib = scanned(CUBLAS, A, first, integrity=Integrity.VERIFIED)
    other = scanned(CUDART, B)
    libs, findings, runtime = apply_loaded(
        [copy(CUBLAS, A, second, scanned_path=CUBLAS)], walk(2), [lib, other], {}, CTX
    )
    # no library added: the scanned one lists both processes
    assert libs == [scanned(CUBLAS, A, first, second, integrity=Integrity.VERIFIED), other]
    assert findings == []
    assert (runtime.proc, runtime.processes, runtime.loading) == ("/host/proc", 40, 2)
    assert (runtime.unreadable, runtime.unreadable_mappings) == ((), 0)


def test_unowned_loaded_libraries_are_a_finding_and_idle_ones_are_not() -> None:
    loaded = scanned(CUBLAS, A)
    idle = scanned(f"{LIB}/libcublasLt.so.12", B)
    loaders = (pid(3), pid(1), pid(2), pid(3))
    libs, findings, _ = apply_loaded(
        [copy(CUBLAS, A, *loaders, scanned_path=CUBLAS)], walk(), [loaded, idle], {}, CTX
    )
    (unowned,) = findings
    assert unowned.kind is FindingKind.LOADED_UNOWNED and unowned.paths == (CUBLAS,)
    assert unowned.message == (
        f"1 GPU library loaded by live processes belong to no package: {CUBLAS} (pid 1, 2, 3)"
    )
    assert libs[1] == idle


def test_bytes_no_scanned_file_holds_become_a_library_judged_like_one() -> None:
    # the package's file, deleted on disk and still mapped: its bytes match the record
    deleted = copy(CUDART, B, pid(20, B, deleted=True), state=DiskState.ABSENT)
    # other bytes than the file at the same path now
    replaced = copy(CUBLAS, C, pid(21, C), state=DiskState.OTHER, disk=A)
    libs, findings, _ = apply_loaded([replaced, deleted], walk(), [scanned(CUBLAS, A)], OWNERS, CTX)
    assert [(lib.ref.path, lib.digests.sha256) for lib in libs] == [
        (CUBLAS, A),
        (CUBLAS, C),  # extras sorted by path, then digest
        (CUDART, B),
    ]
    cublas, cudart = libs[1], libs[2]
    assert cudart.owner == PKG and cudart.integrity is Integrity.VERIFIED
    assert "matches the record of dpkg package libcudart12" in cudart.integrity_reason
    assert cudart.loaded_copy and not cudart.on_disk and cudart.disk_sha256 is None
    assert cudart.ident.family == "cudart" and cudart.size == 20
    assert cudart.loaded_by == (pid(20, B, deleted=True),)
    assert cublas.integrity is Integrity.UNOWNED and cublas.disk_sha256 == A
    assert not cublas.on_disk and cublas.loaded_copy
    by_kind = {f.kind: f for f in findings}
    assert list(by_kind) == [
        FindingKind.LOADED_DELETED,
        FindingKind.LOADED_DIFFERS,
        FindingKind.LOADED_UNOWNED,
    ]
    assert by_kind[FindingKind.LOADED_DELETED].paths == (CUDART,)
    assert by_kind[FindingKind.LOADED_DELETED].message == (
        "1 GPU library loaded by live processes deleted or replaced on disk since: "
        f"{CUDART} (pid 20)"
    )
    assert by_kind[FindingKind.LOADED_DIFFERS].paths == (CUBLAS,)
    assert by_kind[FindingKind.LOADED_DIFFERS].message == (
        "1 loaded GPU library differs from the file at its path on disk: "
        f"{CUBLAS}: loaded sha256 {C}, on disk {A} (pid 21)"
    )
    assert by_kind[FindingKind.LOADED_UNOWNED].paths == (CUBLAS,)


def test_a_copy_still_on_disk_is_on_disk() -> None:
    libs, findings, _ = apply_loaded(
        [copy(CUDART, B, pid(5, B), state=DiskState.SAME)], walk(), [], OWNERS, CTX
    )
    (lib,) = libs
    assert lib.on_disk and lib.loaded_copy and lib.disk_sha256 is None
    assert findings == []


def test_bytes_that_are_no_elf_are_no_library() -> None:
    libs, findings, runtime = apply_loaded(
        [copy(CUBLAS, C, pid(5, C), not_elf=True)], walk(), [], {}, CTX
    )
    assert (libs, findings, runtime.unreadable_mappings) == ([], [], 0)


def test_one_library_per_loaded_path_and_bytes_whatever_the_roots() -> None:
    # the same bytes mapped from the scanned root (on disk) and from a container's root
    # (another copy of the path, replaced there): one component, every loader, not on disk
    # as soon as one copy is not, and the other file's digest kept from whichever had it
    here = copy(CUBLAS, C, pid(1, C), state=DiskState.SAME)
    there = copy(
        CUBLAS, C, pid(2, C, container="f" * 64), same_root=False, state=DiskState.OTHER, disk=D
    )
    again = copy(CUBLAS, C, pid(3, C), state=DiskState.SAME)
    libs, _, _ = apply_loaded([here, there, again], walk(), [], {}, CTX, {1: (None, "/r")})
    (lib,) = libs
    assert [p.pid for p in lib.loaded_by] == [1, 2, 3]
    assert not lib.on_disk and lib.disk_sha256 == D
    libs, _, _ = apply_loaded([there, here], walk(), [], {}, CTX, {0: (None, "/r")})
    (lib,) = libs
    assert not lib.on_disk and lib.disk_sha256 == D and [p.pid for p in lib.loaded_by] == [2, 1]
    # other bytes at the same path are another component
    libs, _, _ = apply_loaded([here, copy(CUBLAS, D, pid(4, D))], walk(), [], {}, CTX)
    assert [lib.digests.sha256 for lib in libs] == [C, D]


def test_a_copy_from_another_root_is_judged_by_that_roots_packages() -> None:
    inside = pid(30, B, container="0123456789abcdef" * 4)
    foreign = copy(CUDART, B, inside, same_root=False, state=DiskState.OTHER, disk=A)
    # owners of the scanned root never judge a container's file, even at the same path
    libs, _, _ = apply_loaded([foreign], walk(), [], OWNERS, CTX, {0: (OWNERS[CUDART], "/c/r")})
    (lib,) = libs
    assert lib.owner == PKG and lib.integrity is Integrity.VERIFIED
    assert lib.integrity_reason == (
        "loaded from container 0123456789ab (/c/r): sha256 matches the record of dpkg package "
        "libcudart12 12.4.127-1"
    )
    libs, _, _ = apply_loaded([foreign], walk(), [], OWNERS, CTX, {0: (None, "/c/r")})
    assert libs[0].owner is None and libs[0].integrity is Integrity.UNOWNED
    assert libs[0].integrity_reason.startswith("loaded from container 0123456789ab (/c/r): ")
    libs, _, _ = apply_loaded([foreign], walk(), [], OWNERS, CTX)  # its root was unreadable
    assert libs[0].owner is None and libs[0].integrity is Integrity.UNOWNED
    assert libs[0].integrity_reason == (
        "loaded from container 0123456789ab, whose root could not be read for its packages"
    )
    hostless = copy(CUDART, B, pid(31, B), same_root=False)
    libs, _, _ = apply_loaded([hostless], walk(), [], OWNERS, CTX)
    assert libs[0].integrity_reason == (
        "loaded from another root, whose root could not be read for its packages"
    )


def test_unreadable_bytes_are_findings_that_also_match_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(attach.os, "geteuid", lambda: 1000)
    lost = copy(CUBLAS, None, pid(7, None), pid(8, None, deleted=True))
    other = copy(CUDART, None, pid(9, None))
    libs, findings, runtime = apply_loaded([lost, other], walk(), [], {}, CTX)
    assert libs == [] and runtime.unreadable_mappings == 3
    assert kinds(findings) == ["loaded-deleted", "unreadable", "unreadable"]
    deleted = findings[0]
    assert deleted.paths == (CUBLAS,)
    assert deleted.message == (
        "1 GPU library loaded by live processes deleted or replaced on disk since: "
        f"{CUBLAS} (pid 7, 8)"
    )
    first = findings[1]
    assert first.paths == (CUBLAS,) and first.also == (FindingKind.LOADED_DIFFERS,)
    assert first.message == (
        f"the bytes pid 7, 8 loaded from {CUBLAS} could not be read (Permission denied); "
        "whether they are the file on disk is unknown: run as root (CAP_SYS_ADMIN or "
        "CAP_CHECKPOINT_RESTORE, and ptrace access)"
    )
    assert findings[2].paths == (CUDART,)


def test_unreadable_process_maps_match_every_loaded_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attach.os, "geteuid", lambda: 0)
    gone = [(n, "Permission denied") for n in range(100, 107)]
    _, findings, runtime = apply_loaded([], walk(unreadable=gone), [], {}, CTX)
    assert runtime.unreadable == tuple(range(100, 107))
    (finding,) = findings
    assert finding.kind is FindingKind.UNREADABLE and finding.paths == ()
    assert finding.also == (
        FindingKind.LOADED_UNOWNED,
        FindingKind.LOADED_DELETED,
        FindingKind.LOADED_DIFFERS,
    )
    assert finding.message.startswith(
        "the memory maps of 7 processes under /host/proc could not be read: "
        "100 (Permission denied), 101 (Permission denied), 102 (Permission denied), "
        "103 (Permission denied), 104 (Permission denied) and 2 more; "
        "the GPU libraries they load are unknown: this scan runs as root, so something else"
    )
    _, findings, _ = apply_loaded([], walk(unreadable=gone[:5]), [], {}, CTX)
    assert "104 (Permission denied); the GPU" in findings[0].message
    _, findings, _ = apply_loaded([], walk(unreadable=gone[:1]), [], {}, CTX)
    assert findings[0].message.startswith("the memory maps of 1 process under")


def test_many_of_each_are_counted_and_their_pids_cut_short() -> None:
    loaders = tuple(pid(n, C, deleted=True) for n in range(50, 57))
    copies = [
        copy(CUBLAS, C, *loaders, state=DiskState.OTHER, disk=A),
        copy(CUDART, D, pid(60, D, deleted=True), state=DiskState.OTHER, disk=B),
    ]
    _, findings, _ = apply_loaded(copies, walk(), [], {}, CTX)
    deleted, differs, unowned = findings
    assert deleted.message.startswith("2 GPU libraries loaded by live processes deleted")
    assert f"{CUBLAS} (pid 50, 51, 52, 53, 54 and 2 more); {CUDART} (pid 60)" in deleted.message
    assert differs.message.startswith("2 loaded GPU libraries differ from the file")
    assert differs.paths == (CUBLAS, CUDART)
    assert unowned.message.startswith("2 GPU libraries loaded by live processes belong")
    five = copy(CUBLAS, C, *loaders[:5], state=DiskState.OTHER, disk=A)
    _, findings, _ = apply_loaded([five], walk(), [], {}, CTX)
    assert "(pid 50, 51, 52, 53, 54)" in findings[0].message


def test_every_copy_is_taken_whatever_came_before_it() -> None:
    # an unreadable copy, one on a scanned file and bytes that are no library do not end the
    # walk over the copies
    on_scanned = copy(CUBLAS, A, pid(1), scanned_path=CUBLAS)
    lost = copy(CUDART, None, pid(2, None))
    extra = copy(f"{LIB}/libnccl.so.2", C, pid(3, C), state=DiskState.ABSENT)
    not_elf = copy(f"{LIB}/libcudnn.so.9", D, pid(4, D), not_elf=True)
    for order in ([on_scanned, extra], [lost, extra], [not_elf, extra], [on_scanned, lost, extra]):
        libs, _, _ = apply_loaded(order, walk(), [scanned(CUBLAS, A)], {}, CTX)
        assert [lib.ref.path for lib in libs] == [CUBLAS, f"{LIB}/libnccl.so.2"], order


@pytest.mark.parametrize(
    "state", [DiskState.OTHER, DiskState.ABSENT, DiskState.UNREADABLE, "".join(["sa", "me"])]
)
def test_only_the_mapped_file_itself_is_on_disk(state: str) -> None:
    (lib,), _, _ = apply_loaded([copy(CUBLAS, C, pid(1, C), state=state)], walk(), [], {}, CTX)
    assert lib.on_disk is (state == "same")


def test_a_loaded_file_its_package_disowns_is_no_unowned_one() -> None:
    # modified or unrecorded bytes of a package are integrity findings, not loaded-unowned
    for integrity in (Integrity.MODIFIED, Integrity.NO_RECORD, Integrity.VERIFIED):
        lib = scanned(CUBLAS, A, pid(1), integrity=integrity)
        _, findings, _ = apply_loaded([], walk(), [lib], {}, CTX)
        assert findings == [], integrity


@pytest.mark.parametrize(
    ("count", "more"), [(4, ""), (5, ""), (6, " and 1 more"), (12, " and 7 more")]
)
def test_unreadable_processes_beyond_five_are_counted(count: int, more: str) -> None:
    gone = [(n, "gone") for n in range(100, 100 + count)]
    _, (finding,), _ = apply_loaded([], walk(unreadable=gone), [], {}, CTX)
    last = 100 + min(count, 5) - 1
    assert f"{last} (gone){more}; the GPU libraries" in finding.message
