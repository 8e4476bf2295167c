"""The cache location rule and the atomic replace that every cache and report writer uses."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from scanner.fsutil import atomic_write, cache_root


def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUPROV_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_root() == tmp_path / "home" / ".cache" / "gpuprov"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "gpuprov"
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"


def test_atomic_write_replaces_and_sets_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old")
    atomic_write(target, b"new", mode=0o600, durable=True)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    umask = os.umask(0o022)
    try:
        atomic_write(target, b"newer")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_atomic_write_leaves_nothing_behind_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "dir-in-the-way"
    target.mkdir()
    (target / "x").write_text("keeps the directory non-empty")
    with pytest.raises(OSError):
        atomic_write(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir-in-the-way"]
