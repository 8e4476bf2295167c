"""What an unreadable /proc/PID/maps tells the user to do depends on whether the scan already
runs as root: "run as root" to a root scan sends nobody anywhere."""

from __future__ import annotations

import pytest

from scanner.runtime import attach
from scanner.runtime.procfs import ProcWalk


def _message(monkeypatch: pytest.MonkeyPatch, euid: int) -> str:
    monkeypatch.setattr("scanner.runtime.attach.os.geteuid", lambda: euid)
    walk = ProcWalk("/proc", unreadable=[(1, "Permission denied")])
    (finding,) = attach._findings([], [], walk)
    return finding.message


def test_not_root_is_told_to_run_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _message(monkeypatch, 1000).endswith(
        ": run as root (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, and ptrace access)"
    )


def test_root_is_told_what_else_denies_it(monkeypatch: pytest.MonkeyPatch) -> None:
    message = _message(monkeypatch, 0)
    assert "run as root" not in message
    assert "this scan runs as root, so something else denies it" in message
    assert "seccomp" in message and "ptrace_scope" in message
