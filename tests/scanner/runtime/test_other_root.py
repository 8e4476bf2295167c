"""A process in a root of its own, as a container runs (a mount namespace, pivot_root, the old
root detached): its maps name paths of its root, its files are read through /proc/PID/root, a
host file it maps is the host's library (same inode), and a file replaced inside its root is
a loaded copy that differs from the disk there, judged against that root's own packages."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scanner.model import GpuLibrary, Integrity, LoadedVia
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures import elf
from tests.fixtures import packages as pk
from tests.fixtures.processes import build_loader

ENTER = """
set -e
mount --make-rprivate /
mount --bind "$1" "$1"
mount --rbind /usr "$1/usr"
cd "$1"
pivot_root . old
mount -t proc proc /proc
umount -l /old
shift
exec "$@"
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _child(pid: int) -> int:
    """The one child of ``pid`` (unshare --fork runs the command as its child)."""
    for _ in range(200):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise AssertionError("unshare started no child")


@contextlib.contextmanager
def in_own_root(root: Path, *argv: str) -> Iterator[int]:
    """Run ``argv`` with ``root`` as its root; yields its pid once it said "ready"."""
    proc = subprocess.Popen(
        ["unshare", "--mount", "--fork", "sh", "-c", ENTER, "sh", str(root), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline() != b"ready\n":
            proc.kill()
            raise AssertionError(proc.communicate()[1].decode(errors="replace"))
        yield _child(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_a_process_in_its_own_root(tmp_path: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.fail("needs root and unshare (util-linux) to give a process a root of its own")
    root = tmp_path / "rootfs"
    lib = root / "opt" / "gpu" / "lib"
    cudnn = elf.build_cudnn_library(lib, "cudnn_graph", (9, 1, 0))
    cublas = elf.build_cuda_library(lib, "cublas", "12.4.5.8")
    build_loader(root / "opt" / "bin")
    (root / "usr").mkdir()
    (root / "old").mkdir()
    (root / "proc").mkdir()
    for name, target in (("lib", "usr/lib"), ("lib64", "usr/lib64"), ("bin", "usr/bin")):
        (root / name).symlink_to(target)
    loaded_cublas = sha256(cublas)
    inner = "/opt/gpu/lib"
    # the root's own package database owns the library it loads (as an image's dpkg does)
    pk.dpkg_install(
        root,
        [
            pk.DebSpec(
                "libcublas12", "12.4.5.8-1", files={f"{inner}/{cublas.name}": cublas.read_bytes()}
            )
        ],
        tmp_path / "debs",
    )
    with in_own_root(
        root, "/opt/bin/gpu-loader", f"{inner}/{cudnn.name}", f"{inner}/{cublas.name}"
    ) as pid:
        fresh = elf.build_cuda_library(tmp_path / "new", "cublas", "12.4.5.8", strings=["v2"])
        os.replace(fresh, cublas)  # replaced inside the process's root after it loaded it
        result = run_scan("/", ScanOptions(include=(str(lib),), use_cache=False, runtime=True))
    mine: list[GpuLibrary] = [x for x in result.libraries if any(p.pid == pid for p in x.loaded_by)]
    by_path = {x.ref.path: x for x in mine}
    # the host's file is the very inode the process mapped under its own path
    host_cudnn = by_path[str(cudnn)]
    assert not host_cudnn.loaded_copy and host_cudnn.digests.sha256 == sha256(cudnn)
    [p] = [p for p in host_cudnn.loaded_by if p.pid == pid]
    assert p.via is LoadedVia.INODE and p.exe == "/opt/bin/gpu-loader"
    # the replaced one: the bytes it runs, under the path it sees, against its root's file now
    copy = by_path[f"{inner}/{cublas.name}"]
    assert copy.loaded_copy and not copy.on_disk
    assert copy.digests.sha256 == loaded_cublas
    assert copy.disk_sha256 == sha256(cublas)
    # judged against its own root's packages (read through /proc/PID/root), not the host's:
    # the bytes it runs are the ones its package installed
    assert copy.owner is not None and copy.owner.name == "libcublas12"
    assert copy.integrity is Integrity.VERIFIED, copy.integrity_reason
    assert "another root" in copy.integrity_reason and "libcublas12" in copy.integrity_reason
    [p] = copy.loaded_by
    assert p.deleted and p.via is LoadedVia.MAP_FILES and p.sha256 == loaded_cublas
    assert set(by_path) == {str(cudnn), f"{inner}/{cublas.name}"}
