"""Parsing /proc/PID/maps text: real line formats (addresses, perms, offset, dev, inode, path
padded with spaces, the " (deleted)" mark), hostile lines, and a proc directory laid out by
hand (the walk reads any directory shaped like /proc, so --proc can point at a copy)."""

# ruff: noqa: E501  (maps lines are recorded as the kernel writes them: one long line each)
from __future__ import annotations

import os
from pathlib import Path

from scanner.detect import is_candidate_path
from scanner.runtime.procfs import MappedFile, looks_like_proc, parse_maps, walk_proc

# the shape of a real maps file: a Python process with a cuDNN wheel and a replaced cuBLAS
MAPS = b"""\
55d0c6a00000-55d0c6a2e000 r--p 00000000 fd:01 1843272                    /usr/bin/python3.11
7f3c1a200000-7f3c1a201000 r--p 00000000 fd:01 2228371                    /opt/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9
7f3c1a201000-7f3c1a9f1000 r-xp 00001000 fd:01 2228371                    /opt/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9
7f3c1b000000-7f3c1b001000 r--p 00000000 103:02 917505                     /usr/lib/x86_64-linux-gnu/libcublas.so.12.4.5.8 (deleted)
7f3c1c000000-7f3c1c001000 r--p 00000000 fd:01 3000001                    /srv/my libs/libnccl.so.2.21.5
7f3c1d000000-7f3c1d021000 rw-p 00000000 00:00 0
7f3c1e000000-7f3c1e001000 r--p 00000000 fd:01 1700002                    /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd5a3e0000-7ffd5a401000 rw-p 00000000 00:00 0                          [stack]
garbage line /libcudnn.so.9
7f3c1f000000-7f3c1f001000 r--p 00000000 zz:01 5                          /x/libcudart.so.12
7f3c1f000000-7f3c1f001000 r--p 00000000 fd:01 6                          relative/libcudart.so.12
"""


def test_gpu_library_mappings_once_each_with_their_first_range() -> None:
    got = parse_maps(MAPS, is_candidate_path)
    assert got == (
        MappedFile(
            "/opt/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9",
            False,
            os.makedev(0xFD, 1),
            2228371,
            "7f3c1a200000-7f3c1a201000",
        ),
        MappedFile(
            "/usr/lib/x86_64-linux-gnu/libcublas.so.12.4.5.8",
            True,
            os.makedev(0x103, 2),
            917505,
            "7f3c1b000000-7f3c1b001000",
        ),
        MappedFile(
            "/srv/my libs/libnccl.so.2.21.5",
            False,
            os.makedev(0xFD, 1),
            3000001,
            "7f3c1c000000-7f3c1c001000",
        ),
    )


def test_nothing_from_empty_or_binary_text() -> None:
    assert parse_maps(b"", is_candidate_path) == ()
    assert parse_maps(b"\x00\xff" * 1000 + b"/libcudnn.so\n", is_candidate_path) == ()


def test_a_proc_directory_laid_out_by_hand(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "maps").write_bytes(MAPS)
    (proc / "42" / "cgroup").write_text("0::/system.slice/docker-" + "a" * 64 + ".scope\n")
    (proc / "43").mkdir()  # exited while listed: no maps
    (proc / "self").mkdir()
    assert looks_like_proc(str(proc))
    assert not looks_like_proc(str(tmp_path / "nothing"))
    walk = walk_proc(str(proc), str(tmp_path), is_candidate_path)
    [process] = walk.processes
    assert process.pid == 42 and process.exe is None and not process.same_root
    assert process.container.container_id == "a" * 64 and process.container.engine == "docker"
    assert len(process.files) == 3 and walk.seen == 1 and not walk.unreadable
