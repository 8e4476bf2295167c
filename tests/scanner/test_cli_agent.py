"""`gpuprov push` and `gpuprov agent` argument handling (delivery is tested with the service in
tests/app/test_faults.py and tests/app/test_agent.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from scanner import cli_agent


def _run(*args: str) -> tuple[int, str]:
    app = typer.Typer()
    cli_agent.register(app)
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["push"], "either a REPORT file or --spool"),
        (["push", "r.json", "--spool"], "either a REPORT file or --spool"),
        (["push", "missing.json", "--server", "http://x"], "cannot read missing.json"),
        (["push", "--spool", "--label", "novalue", "--server", "http://x"], "KEY=VALUE"),
        (["agent", "--interval", "soon"], "not a duration"),
    ],
)
def test_usage_errors(args: list[str], fragment: str) -> None:
    code, output = _run(*args)
    assert code == cli_agent.EXIT_USAGE
    assert fragment in " ".join(output.split())


def test_missing_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPROV_SERVER", raising=False)
    report = tmp_path / "r.json"
    report.write_text('{"bomFormat": "CycloneDX"}')
    code, output = _run("push", str(report))
    assert code == cli_agent.EXIT_USAGE and "GPUPROV_SERVER" in output


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("30m", 1800), ("6h", 21600), ("1d", 86400)]
)
def test_intervals(text: str, seconds: float) -> None:
    assert cli_agent.parse_interval(text) == seconds


@pytest.mark.parametrize(
    ("text", "why"),
    [("0s", "must be more than 0"), ("0", "must be more than 0"), ("6x", "is not a duration")],
)
def test_bad_intervals_say_what_is_wrong(text: str, why: str) -> None:
    # '0s' is a duration: "not a duration like 30m" sent users looking for a syntax error
    with pytest.raises(typer.BadParameter, match=why):
        cli_agent.parse_interval(text)


def test_push_report_without_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPROV_SERVER", raising=False)
    assert cli_agent.push_report(b"{}") == cli_agent.EXIT_USAGE


def test_requeue_alone_says_it_goes_with_spool() -> None:
    code, output = _run("push", "--requeue")
    assert code == cli_agent.EXIT_USAGE
    assert "--requeue goes with --spool" in output and "REPORT file" not in output
