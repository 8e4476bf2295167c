"""Real processes in real cgroups named the way container engines name them: the scan must
read each one's container id, engine and pod from /proc/PID/cgroup.

The cgroups are created for the test (no controller is enabled on them, nothing is limited)
in the cgroup v2 tree and, on a hybrid host, in the named v1 ``systemd`` hierarchy, and removed
afterwards. Needs root, as the other ``--runtime`` tests do.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scanner.model import LoadedBy
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures import elf
from tests.fixtures.processes import build_loader, loaded_processes

CGROUP = Path("/sys/fs/cgroup")


def _v2_root() -> Path | None:
    """The cgroup v2 tree: /sys/fs/cgroup itself (pure v2) or its ``unified`` mount (hybrid)."""
    for path in (CGROUP, CGROUP / "unified"):
        if (path / "cgroup.procs").exists() and (path / "cgroup.subtree_control").exists():
            return path
    return None


@contextlib.contextmanager
def cgroup(root: Path, relative: str, pid: int) -> Iterator[None]:
    """Put ``pid`` into the cgroup ``root/relative`` (created), removed on exit."""
    made: list[Path] = []
    path = root
    for part in relative.strip("/").split("/"):
        path = path / part
        if not path.exists():
            path.mkdir()
            made.append(path)
    (path / "cgroup.procs").write_text(f"{pid}\n")
    try:
        yield
    finally:
        # the process must leave before its cgroup can go: back to the root, then rmdir
        with contextlib.suppress(OSError):
            (root / "cgroup.procs").write_text(f"{pid}\n")
        for p in reversed(made):
            for _ in range(50):
                try:
                    p.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


def test_container_and_pod_of_live_processes(tmp_path: Path) -> None:
    v2 = _v2_root()
    if v2 is None or os.geteuid() != 0:
        pytest.fail("needs root and a cgroup v2 tree (/sys/fs/cgroup or /sys/fs/cgroup/unified)")
    lib = tmp_path / "lib"
    cudnn = elf.build_cudnn_library(lib, "cudnn_graph", (9, 1, 0))
    cublas = elf.build_cuda_library(lib, "cublas", "12.4.5.8")
    loader = build_loader(tmp_path / "bin")
    tag = secrets.token_hex(4)
    ctr_a, ctr_b = secrets.token_hex(32), secrets.token_hex(32)
    pod = "6ec0e3a2-3f0b-4a4e-9a4e-0d1f4b2c9e11"
    k8s = (
        f"gpuprov-test-{tag}.slice/kubepods-besteffort-pod{pod.replace('-', '_')}.slice/"
        f"cri-containerd-{ctr_a}.scope"
    )
    named_v1 = CGROUP / "systemd"  # hybrid hosts: the name=systemd v1 hierarchy
    with loaded_processes(loader, [cudnn], [cublas]) as (a, b), cgroup(v2, k8s, a.pid):
        with contextlib.ExitStack() as stack:
            expected_b: tuple[str | None, str | None, str | None] = (None, None, None)
            if (named_v1 / "cgroup.procs").exists():
                stack.enter_context(
                    cgroup(named_v1, f"gpuprov-test-{tag}.slice/docker-{ctr_b}.scope", b.pid)
                )
                expected_b = (ctr_b, "docker", None)
            result = run_scan("/", ScanOptions(include=(str(lib),), use_cache=False, runtime=True))
    loaders: dict[int, LoadedBy] = {
        p.pid: p for item in result.libraries for p in item.loaded_by if p.pid in (a.pid, b.pid)
    }
    assert (loaders[a.pid].container_id, loaders[a.pid].engine, loaders[a.pid].pod_uid) == (
        ctr_a,
        "containerd",
        pod,
    )
    got_b = loaders[b.pid]
    assert (got_b.container_id, got_b.engine, got_b.pod_uid) == expected_b
    # the processes share the scanned root: their files are the scanned ones, by inode
    assert {item.ref.path for item in result.libraries if item.loaded_by} >= {
        str(cudnn),
        str(cublas),
    }
