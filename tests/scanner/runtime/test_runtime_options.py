"""``--runtime`` and ``--proc`` at the command line and in the agent: where they apply, what
they default to, and that a proc directory without live processes is refused, not passed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuprov.cli import app
from scanner.cli_agent import _runtime_default
from scanner.errors import SourceError
from scanner.pipeline import ScanOptions, run_scan


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr if result.stderr_bytes is not None else result.output


def test_agent_looks_at_processes_on_a_live_root_only(tmp_path: Path) -> None:
    assert _runtime_default("/", None, None) is True
    assert _runtime_default(str(tmp_path), None, None) is False  # a root without /proc
    assert _runtime_default(str(tmp_path), None, Path("/proc")) is True
    assert _runtime_default("/", False, None) is False
    assert _runtime_default(str(tmp_path), True, None) is True  # then the scan refuses it


def test_a_proc_without_processes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    with pytest.raises(SourceError, match="holds no live processes"):
        run_scan(str(tmp_path), ScanOptions(use_cache=False, runtime=True))
    with pytest.raises(SourceError, match="holds no live processes"):
        run_scan(str(tmp_path), ScanOptions(use_cache=False, runtime=True, proc=str(tmp_path)))
    code, err = invoke("scan", str(tmp_path), "--runtime", "--no-cache", "-f", "json")
    assert code == 2 and "--proc DIR" in err


def test_a_proc_without_processes_is_refused_before_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpuprov scan / --runtime --proc /nonexistent` said so only after walking all of /."""
    import scanner.pipeline

    def walked(*_: object) -> None:
        raise AssertionError("the root was walked before --proc was checked")

    monkeypatch.setattr(scanner.pipeline, "_read_root", walked)
    for proc in (tmp_path / "nonexistent", tmp_path):
        with pytest.raises(SourceError, match=f"{proc} holds no live processes"):
            run_scan("/", ScanOptions(use_cache=False, runtime=True, proc=str(proc)))


def test_runtime_options_where_they_do_not_apply(tmp_path: Path) -> None:
    code, err = invoke("scan", f"oci:{tmp_path}", "--runtime")
    assert code == 2 and "--runtime only applies to host directory targets" in err
    code, err = invoke("scan", str(tmp_path), "--proc", "/proc")
    # one message naming the option once, worded as every option the scan would ignore
    assert code == 2 and "gpuprov: error: --proc only applies with --runtime\n" in err
    code, err = invoke("agent", "--root", str(tmp_path), "--no-runtime", "--proc", "/proc")
    assert code == 2 and "gpuprov: error: --proc does not apply with --no-runtime\n" in err
    for kind in ("loaded-unowned", "loaded-deleted", "loaded-differs-from-disk"):
        code, err = invoke("scan", str(tmp_path), "--fail-on", kind)
        assert code == 2 and f"{kind} needs --runtime" in err
    code, err = invoke("agent", "--runtime", "--no-runtime", "--once")
    assert code == 2 and "exclude each other" in err


def test_proc_given_to_a_scan_of_another_root(tmp_path: Path) -> None:
    # a mounted host (here: an empty root) with the live proc given explicitly
    result = run_scan(str(tmp_path), ScanOptions(use_cache=False, runtime=True, proc="/proc"))
    assert result.runtime is not None and result.runtime.proc == "/proc"
    assert result.runtime.processes > 1
