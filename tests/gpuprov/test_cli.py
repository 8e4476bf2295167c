"""The `gpuprov` entry: one command line composed of the scanner's and the service's commands,
each command module imported only when one of its commands is used (issue 8, start-up)."""

from __future__ import annotations

import ast
import gc
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from gpuprov import cli
from scanner import __version__

ROOT = Path(__file__).resolve().parents[2]
#: Modules no command needs before it is chosen: the command modules, the HTTP client, the
#: trust stack and the service.
HEAVY = (
    "scanner.cli",
    "scanner.cli_agent",
    "scanner.cli_provenance",
    "scanner.cli_gate",
    "scanner.pipeline",
    "app.cli",
    "httpx",
    "cryptography",
    "sigstore",
    "fastapi",
    "sqlalchemy",
)


def _loaded_after(*args: str) -> tuple[str, list[str]]:
    """Run `gpuprov ARGS` in a fresh interpreter: its stdout and which of HEAVY it imported."""
    probe = (
        "import io, json, sys\n"
        "from contextlib import redirect_stdout\n"
        "from gpuprov.cli import main\n"
        f"sys.argv = ['gpuprov', *{list(args)!r}]\n"
        "out = io.StringIO()\n"
        "with redirect_stdout(out):\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        f"print(json.dumps([out.getvalue(), [m for m in {HEAVY!r} if m in sys.modules]]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out, loaded = json.loads(done.stdout.splitlines()[-1])
    return out, loaded


def test_version_imports_no_command() -> None:
    out, loaded = _loaded_after("--version")
    assert out == f"gpuprov {__version__}\n"
    assert loaded == []


def test_scan_help_imports_the_scan_command_alone() -> None:
    out, loaded = _loaded_after("scan", "--help")
    assert "--fail-on" in out
    assert loaded == ["scanner.cli"]


def test_service_command_imports_no_scanner_command() -> None:
    out, loaded = _loaded_after("db", "--help")
    assert "upgrade" in out
    assert loaded == ["app.cli"]


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli.app, ["--help"])
    assert result.exit_code == 0
    section = result.stdout.split("\nCommands:\n", 1)[1]
    assert [line.split()[0] for line in section.splitlines() if line.strip()] == list(cli.COMMANDS)


def test_help_is_plain_and_lists_arguments_once() -> None:
    """Click's help, not Typer's rich panels (0.1 s of imports); click 8.5 and Typer would
    each list a command's arguments."""
    result = CliRunner().invoke(cli.app, ["scan", "--help"])
    assert result.exit_code == 0
    assert result.stdout.count("TARGET  What to scan") == 1
    assert "Positional arguments" not in result.stdout
    assert not any(ch in result.stdout for ch in "╭│╰")


def test_the_table_names_exactly_what_each_module_registers() -> None:
    """A command added to a module but not to COMMANDS would never be reachable."""
    for module in sorted(set(cli.COMMANDS.values())):
        table = sorted(name for name, owner in cli.COMMANDS.items() if owner == module)
        assert sorted(cli.commands_of(module)) == table, module


def test_a_command_runs_through_the_lazy_group(tmp_path: Path) -> None:
    root = typer.main.get_command(cli.app)
    assert isinstance(root, cli.LazyGroup) and root.commands == {}
    ctx = click.Context(root)
    assert root.get_command(ctx, "nope") is None
    scan = root.get_command(ctx, "scan")
    assert scan is not None and set(root.commands) == {"scan"}
    result = CliRunner().invoke(cli.app, ["scan", str(tmp_path), "-f", "json", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["libraries"] == []


@pytest.mark.parametrize("how", ["module", "script"])
def test_python_dash_m_and_the_script_are_the_same_entry(how: str) -> None:
    script = Path(sys.executable).parent / "gpuprov"
    if how == "script" and not script.exists():
        pytest.fail(f"{script} is missing: pip install -e . (the console script)")
    cmd = [sys.executable, "-m", "gpuprov"] if how == "module" else [str(script)]
    done = subprocess.run([*cmd, "--version"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"gpuprov {__version__}\n", done.stderr


def test_the_entry_pauses_the_collector_for_start_up_only(tmp_path: Path) -> None:
    """Start-up makes no garbage, so the console entry runs it without the cyclic collector;
    the command itself (a scan, a server) runs with it, start-up's objects frozen out of it."""
    report = tmp_path / "r.json"
    probe = (
        "import atexit, gc, json, sys\n"
        "from gpuprov import main\n"
        "atexit.register(lambda: print(json.dumps([gc.isenabled(), gc.get_freeze_count()])))\n"
        f"sys.argv = ['gpuprov', 'scan', {str(tmp_path)!r}, '-q', '-f', 'json', '--no-cache', "
        f"'-o', {str(report)!r}]\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    enabled, frozen = json.loads(done.stdout.splitlines()[-1])
    assert enabled and frozen > 10_000  # the modules, classes and functions loaded
    assert json.loads(report.read_text())["libraries"] == []
    # an in-process caller (tests, embedding) runs `cli.app`: its collector is left alone
    result = CliRunner().invoke(cli.app, ["scan", str(tmp_path), "-q", "--no-cache"])
    assert result.exit_code == 0 and gc.isenabled()


def _imports(package: str) -> set[tuple[str, str]]:
    """(module file, imported module) for every import in ``package``, function-local too."""
    found = set()
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {(str(path.relative_to(ROOT)), alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add((str(path.relative_to(ROOT)), node.module))
    return found


def test_only_the_entry_composes_the_two_command_lines() -> None:
    """app/ may share the scanner's CLI conventions (cli_common) but never import a scanner
    command; scanner/ never imports app/ or the entry (issue 8: app/cli.py imported
    scanner.cli to assemble the command line)."""
    app_uses = {
        (where, name)
        for where, name in _imports("app")
        if name.startswith("scanner.cli") and name != "scanner.cli_common"
    }
    assert app_uses == set()
    scanner_uses = {
        (where, name)
        for where, name in _imports("scanner")
        if name.split(".")[0] in ("app", "gpuprov")
    }
    assert scanner_uses == set()
