"""Output a person can read (issue 7, section 3): a table that fits the terminal (or $COLUMNS),
`--wide`, trust columns when trust inputs were given, target data never taken as markup or
terminal control sequences, and a progress display with stage counts on a terminal only.
"""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from gpuprov.cli import app
from scanner.model import Progress
from scanner.pipeline import ScanOptions, run_scan
from scanner.report import render_table
from tests.fixtures.elf import build_cuda_library, build_cudnn_library
from tests.fixtures.keys import generate, write_keypair
from tests.scanner import scenarios as sc

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> sc.World:
    return sc.world_at(tmp_path_factory.getbasetemp() / "acceptance-world")


def invoke(*args: object, columns: int | None = None) -> Result:
    env = {"COLUMNS": str(columns)} if columns else {"COLUMNS": ""}
    result = CliRunner().invoke(app, [str(a) for a in args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def widths(text: str) -> list[int]:
    return [len(line.rstrip()) for line in text.splitlines()]


# --- width ----------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_table_fits_columns(world: sc.World, columns: int) -> None:
    result = invoke("scan", world.root, "-f", "table", "--no-cache", columns=columns)
    assert result.exit_code == 0, result.output
    assert max(widths(result.stdout)) <= columns
    for exp in world.expected.values():
        assert exp.sha256[:12] in result.stdout  # every library is still there


def test_table_without_columns_off_a_terminal_is_80_wide(world: sc.World) -> None:
    result = invoke("scan", world.root, "-f", "table", "--no-cache")
    assert result.exit_code == 0
    assert max(widths(result.stdout)) <= 80


def test_wider_terminals_get_more_columns(world: sc.World) -> None:
    narrow = invoke("scan", world.root, "-f", "table", "--no-cache", columns=80).stdout
    wide = invoke("scan", world.root, "-f", "table", "--no-cache", columns=160).stdout
    header = [line.split() for line in (narrow, wide) for line in [_header(line)]]
    assert "owner" not in header[0] and "owner" in header[1]
    assert f"{sc.CUDNN_DEB}" in wide


def _header(text: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip().startswith(("file", "path")))


def test_wide_shows_full_digests_paths_and_links(world: sc.World) -> None:
    result = invoke("scan", world.root, "-f", "table", "--no-cache", "--wide", columns=80)
    assert result.exit_code == 0
    out = result.stdout
    assert _header(out).split()[:3] == ["path", "family", "library"]
    lines = out.splitlines()
    for exp in world.expected.values():
        # one line per library: its full path, owner with manager, and full digest together
        (line,) = [x for x in lines if x.lstrip().startswith(exp.path + " ")]
        assert exp.sha256 in line
        for alias in exp.aliases:
            assert any(x.strip() == f"<- {alias}" for x in lines), alias
    assert f"dpkg:{sc.CUDNN_DEB}" in out
    assert max(widths(out)) > 80  # --wide takes the width it needs


# --- trust columns --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("golden")
    root = base / "root"
    lib = root / "opt" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    build_cudnn_library(lib, "cudnn_graph", filename="libcudnn_graph.so.9.1.0")
    report, unsigned, signed = base / "r.json", base / "c.json", base / "c.dsse"
    priv, pub = write_keypair(base, "vendor", generate("ecdsa"))
    for args in (
        ["scan", root, "--no-cache", "-f", "cyclonedx", "-o", report],
        ["catalog", "from-scan", report, "-o", unsigned],
        ["catalog", "sign", unsigned, "--key", priv, "-o", signed],
    ):
        assert invoke(*args).exit_code == 0
    return {"root": root, "catalog": signed, "pub": pub}


def test_trust_columns_with_a_catalog(golden: dict[str, Path]) -> None:
    trust = ["--trust-key", golden["pub"], "--catalog", golden["catalog"]]
    for columns in (80, 200):
        result = invoke(
            "scan", golden["root"], "-f", "table", "--no-cache", *trust, columns=columns
        )
        assert result.exit_code == 0, result.output
        header = _header(result.stdout).split()
        assert {"provenance", "signer"} <= set(header)
        assert "slsa" not in header  # an image's SLSA level: a host has none
        assert max(widths(result.stdout)) <= columns
    row = next(x for x in result.stdout.splitlines() if "libcudnn_graph" in x).split()
    assert row[header.index("provenance")] == "verified"
    assert row[header.index("signer")].startswith("vendor")


def test_no_trust_columns_without_trust_inputs(golden: dict[str, Path]) -> None:
    result = invoke("scan", golden["root"], "-f", "table", "--no-cache", columns=200)
    assert not {"provenance", "signer", "slsa"} & set(_header(result.stdout).split())


def test_image_trust_line_and_slsa_column(world: sc.World, golden: dict[str, Path]) -> None:
    target, _ = world.image_target("oci")
    args = ["-f", "table", "--no-cache", "--trust-key", golden["pub"]]
    result = invoke("scan", target, *args, columns=200)
    assert result.exit_code == 0, result.output
    assert "slsa" in _header(result.stdout).split()
    assert "image signature: unsigned (no signature or attestation found" in result.stdout


# --- target data is never markup or a control sequence ------------------------------------------

HOSTILE_DIR = "[bold]red[/bold] :x: \x1b[2J\x1b]0;owned\x07"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "root"
    lib = root / "opt" / HOSTILE_DIR / "lib"
    lib.mkdir(parents=True)
    build_cuda_library(lib, "cudart", "12.4.127", filename="libcudart.so.12")
    (lib / "libcudnn_ops.so.9").write_bytes(b"root:x:0:0:root:/root:/bin/bash\n" * 4)
    (root / "etc").mkdir()
    (root / "etc" / "hostname").write_text("[blink]node:x:\x1b[31m\n")
    return root


ESCAPED_DIR = "[bold]red[/bold] :x: \\x1b[2J\\x1b]0;owned\\x07"


def _harmless(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text
    assert "\u274c" not in text and "\u2716" not in text  # ":x:" never became an emoji


def test_table_shows_target_data_literally(hostile: Path) -> None:
    result = invoke("scan", hostile, "-f", "table", "--no-cache", "--wide")
    assert result.exit_code == 0, result.output
    _harmless(result.stdout)
    assert f"/opt/{ESCAPED_DIR}/lib/libcudart.so.12" in result.stdout
    assert "host [blink]node:x:\\x1b[31m" in result.stdout
    assert "root:x:0" in result.stdout or "libcudnn_ops.so.9" in result.stdout


def test_coloured_table_shows_target_data_literally(hostile: Path) -> None:
    result = run_scan(str(hostile), ScanOptions(use_cache=False))
    out = io.StringIO()
    render_table(result, out, color=True)
    text = out.getvalue()
    # rich's own colour codes are fine; the target's clear-screen and title codes are not
    assert "\x1b[2J" not in text and "\x1b]0;" not in text and "\x07" not in text
    assert "\u274c" not in text
    assert "[bold]red[/bold]" in text.replace("\n", "")


def test_messages_on_stderr_show_target_data_literally(hostile: Path) -> None:
    result = invoke("scan", hostile, "-f", "json", "--no-cache", "--fail-on", "unowned")
    assert result.exit_code == 1
    _harmless(result.stderr)
    assert f"fail-on unowned: /opt/{ESCAPED_DIR}/lib/libcudart.so.12" in result.stderr
    json.loads(result.stdout)  # the report itself is JSON, where escapes are escaped anyway
    result = invoke("scan", f"{hostile}/\x1b[2Jnowhere")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"gpuprov: error: {hostile}/\\x1b[2Jnowhere: no such file")


def test_verification_results_show_names_literally(golden: dict[str, Path], tmp_path: Path) -> None:
    key = tmp_path / "vendor\x1b[2J:x:.pub"  # the signer is described by its key file's name
    key.write_bytes(golden["pub"].read_bytes())
    result = invoke("catalog", "verify", golden["catalog"], "--trust-key", key)
    assert result.exit_code == 0, result.output
    _harmless(result.stdout)
    assert "signed by vendor\\x1b[2J:x:.pub" in result.stdout


# --- progress -------------------------------------------------------------------------------


def test_host_scan_reports_walk_and_hash_progress_with_counts(world: sc.World) -> None:
    events: list[Progress] = []
    result = run_scan(str(world.root), ScanOptions(use_cache=False, progress=events.append))
    stages = [e.stage for e in events]
    assert stages.index("walk") < stages.index("catalog") < stages.index("hash")
    walk = [e for e in events if e.stage == "walk"]
    assert walk[-1].done == result.stats["nodes"] and walk[-1].unit == "files"
    assert walk[-1].candidates == result.stats["candidates"]
    hashed = [e for e in events if e.stage == "hash"]
    assert hashed[0].done == 0 and hashed[-1].unit == "bytes"
    assert hashed[-1].done == hashed[-1].total > 0
    assert [e.done for e in hashed] == sorted(e.done for e in hashed)
    assert "layers" not in stages


def test_image_scan_reports_layers_read(world: sc.World) -> None:
    target, built = world.image_target("oci")
    events: list[Progress] = []
    run_scan(target, ScanOptions(use_cache=False, progress=events.append))
    layers = [(e.done, e.total) for e in events if e.stage == "layers"]
    n = len(built.layer_digests)
    assert layers == [(i, n) for i in range(1, n + 1)]
    assert "walk" not in {e.stage for e in events}


def _scan_on_a_terminal(args: list[str], tmp_path: Path) -> tuple[int, str]:
    """Run ``gpuprov ARGS`` with stderr on a pseudo-terminal; (exit code, what it drew)."""
    master, slave = pty.openpty()
    env = {
        **os.environ,
        "TERM": "xterm-256color",
        "COLUMNS": "120",
        "XDG_CACHE_HOME": str(tmp_path),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuprov", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        cwd=ROOT,
        env=env,
    )
    os.close(slave)
    drawn = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        assert ready, "no output and no exit within 120 s"
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    return process.wait(timeout=120), drawn.decode(errors="replace")


def test_progress_is_drawn_on_a_terminal(world: sc.World, tmp_path: Path) -> None:
    code, drawn = _scan_on_a_terminal(
        ["scan", str(world.root), "-f", "json", "--no-cache"], tmp_path
    )
    assert code == 0
    assert "walking files:" in drawn and " files, " in drawn and "candidates" in drawn
    assert "hashing libraries:" in drawn and " of " in drawn
    target, _ = world.image_target("oci")
    code, drawn = _scan_on_a_terminal(["scan", target, "-f", "json", "--no-cache"], tmp_path)
    assert code == 0
    assert "reading image layers: 3 of 3 layers" in drawn


def test_no_progress_with_quiet_on_a_terminal(world: sc.World, tmp_path: Path) -> None:
    args = ["scan", str(world.root), "-f", "json", "--no-cache", "--quiet"]
    code, drawn = _scan_on_a_terminal(args, tmp_path)
    assert code == 0 and drawn == ""


def test_no_progress_off_a_terminal(world: sc.World) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuprov", "scan", str(world.root), "-f", "json", "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0
    assert "walking files" not in done.stderr and "hashing" not in done.stderr
    assert "\x1b" not in done.stderr
    assert all(line.startswith("skipped: ") for line in done.stderr.splitlines())


def test_wide_without_format_is_a_table_off_a_terminal(world: sc.World) -> None:
    # Not a terminal: without --wide the default is CycloneDX, but --wide asks for a table.
    result = invoke("scan", world.root, "--no-cache", "--wide", "-q")
    assert result.exit_code == 0, result.output
    assert _header(result.stdout).split()[:3] == ["path", "family", "library"]


@pytest.mark.parametrize("fmt", ["json", "cyclonedx"])
def test_wide_with_another_format_is_a_usage_error(world: sc.World, fmt: str) -> None:
    result = invoke("scan", world.root, "--no-cache", "--wide", "-f", fmt)
    assert result.exit_code == 2
    assert f"--wide: only applies to -f table, not -f {fmt}" in result.stderr


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_spec_version_without_a_cyclonedx_report_is_a_usage_error(
    world: sc.World, fmt: str
) -> None:
    result = invoke("scan", world.root, "--no-cache", "-f", fmt, "--spec-version", "1.7")
    assert result.exit_code == 2
    assert "--spec-version: only applies to the CycloneDX report" in result.stderr
    cdx = invoke("scan", world.root, "--no-cache", "-q", "-f", "cyclonedx", "--spec-version", "1.7")
    assert cdx.exit_code == 0 and json.loads(cdx.stdout)["specVersion"] == "1.7"


LONG_DIR = (
    "opt/conda/envs/llm-finetune-pytorch-2.4.1-cuda12.4/lib/python3.11/"
    "site-packages/nvidia/cuda_runtime/lib"
)


@pytest.fixture(scope="module")
def long_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("long-dir")
    build_cuda_library(root / LONG_DIR, "cudart", "12.4.127")
    return root


@pytest.mark.parametrize("columns", [120, 200])
def test_a_directory_takes_one_line_when_the_terminal_holds_it(
    long_dir: Path, columns: int
) -> None:
    # At 120 columns a conda environment's directory took five lines: it had only the file
    # column's width. A directory's line is as wide as the terminal.
    result = invoke("scan", long_dir, "-f", "table", "--no-cache", columns=columns)
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert f"/{LONG_DIR}/" in lines
    assert max(widths(result.stdout)) <= columns


def test_a_directory_too_long_for_the_terminal_breaks_after_a_slash(long_dir: Path) -> None:
    # At 80 columns `/usr/local/cuda-13.0/lib/` came out as `/usr/local/cuda-13.0/lib` and a
    # row holding only `/`: directory lines break after a `/` where one fits.
    result = invoke("scan", long_dir, "-f", "table", "--no-cache", columns=60)
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    at = next(n for n, line in enumerate(lines) if line.startswith("/opt/"))
    parts = []
    for line in lines[at:]:
        parts.append(line)
        if "".join(parts) == f"/{LONG_DIR}/":
            break
    assert "".join(parts) == f"/{LONG_DIR}/", lines
    assert len(parts) > 1 and all(part.endswith("/") for part in parts)
    assert max(widths(result.stdout)) <= 60


# --- errors of several lines ----------------------------------------------------------------


def test_a_yaml_error_names_its_line_and_quotes_it_under_the_error(tmp_path: Path) -> None:
    # It came out as one line holding a literal "\n" and PyYAML's "<unicode string>" twice.
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: p\nrules:\n"
        '  versions: {allow: {cudnn: "\\q"}}\n'
    )
    (tmp_path / "root").mkdir()
    result = invoke("gate", tmp_path / "root", "--policy-file", policy)
    assert result.exit_code == 2, result.output
    first, quoted, caret, *rest = result.stderr.splitlines()
    assert first == (
        "gpuprov: error: policy is not YAML: line 5, column 30: found unknown escape character"
        " (while parsing a quoted scalar at line 5, column 29)"
    )
    assert quoted == '    versions: {allow: {cudnn: "\\q"}}'  # indented by 2 under the error
    assert caret == " " * (2 + 29) + "^" and rest == []  # under the backslash
    assert "\\n" not in result.stderr and "unicode string" not in result.stderr


def test_each_line_of_an_error_is_escaped_and_indented_under_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from scanner.cli_common import error

    error("refused: the server says:\nline two\x1b[2J\ngpuprov: error: not ours")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "gpuprov: error: refused: the server says:",
        "  line two\\x1b[2J",
        "  gpuprov: error: not ours",  # indented: never read as an error of its own
    ]
