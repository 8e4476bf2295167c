"""`gpuprov agent --once` scans a host root with the real pipeline and delivers the report to a
running service, with the agent's labels."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from msgspec.structs import replace
from typer.testing import CliRunner

from scanner import cli_agent
from scanner.deliver import Spool
from tests.app import boms
from tests.app.conftest import LiveServer, Service, auth, free_port
from tests.scanner.test_deliver import ProgrammedService


@pytest.fixture(scope="module")
def host_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A host root holding one real cuDNN-9-like shared library built with gcc."""
    if shutil.which("gcc") is None:
        pytest.fail("gcc is required to build the test library")
    root = tmp_path_factory.mktemp("host")
    lib_dir = root / "usr/lib/x86_64-linux-gnu"
    lib_dir.mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc/machine-id").write_text("4f1e2d3c4b5a69788796a5b4c3d2e1f0\n")
    source = root.parent / "cudnn_graph.c"
    source.write_text(
        "const unsigned int cudnn_graph_version = 0x090100;\n"
        'const char marker[] = "cudnn_version_9_1_0_70_c34102860_e0";\n'
    )
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcudnn_graph.so.9",
            "-o",
            str(lib_dir / "libcudnn_graph.so.9.1.0"),
            str(source),
        ],
        check=True,
    )
    return root


def test_agent_once_scans_and_pushes(service: Service, host_root: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "agent.token"
    token_file.write_text(service.token("report:write"))
    app = typer.Typer()
    cli_agent.register(app)
    port = free_port()
    with LiveServer(service.settings, port):
        result = CliRunner().invoke(
            app,
            [
                "agent",
                "--once",
                "--root",
                str(host_root),
                "--label",
                "env=prod",
                "--server",
                f"http://127.0.0.1:{port}",
                "--token-file",
                str(token_file),
                "--spool-dir",
                str(tmp_path / "spool"),
                "--retries",
                "0",
            ],
            env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
        )
    assert result.exit_code == 0, result.output
    reader = service.token("inventory:read")
    used = service.client.get(
        "/api/v1/where-used", params={"family": "cudnn", "version": "9.1.0"}, headers=auth(reader)
    ).json()
    assert used["total"] == 1
    item = used["items"][0]
    assert item["asset"]["kind"] == "host"
    assert item["asset"]["identity"] == "4f1e2d3c4b5a69788796a5b4c3d2e1f0"
    assert item["asset"]["labels"] == {"env": "prod"}
    assert [lib["path"] for lib in item["libraries"]] == [
        "/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.1.0"
    ]


def test_scan_push_spools_while_down_then_delivers_once(
    service: Service, host_root: Path, tmp_path: Path
) -> None:
    """`gpuprov scan --push`: spooled (exit 3) while the service is down, delivered later."""
    from gpuprov.cli import app as scan_app

    token_file = tmp_path / "agent.token"
    token_file.write_text(service.token("report:write"))
    port = free_port()
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "GPUPROV_SPOOL": str(tmp_path / "spool")}
    args = [
        "scan",
        str(host_root),
        "-q",
        "-f",
        "json",
        "-o",
        str(tmp_path / "r.json"),
        "--push",
        "--server",
        f"http://127.0.0.1:{port}",
        "--token-file",
        str(token_file),
        "--label",
        "env=ci",
    ]
    down = CliRunner().invoke(scan_app, args, env=env)
    assert down.exit_code == 3, down.output
    assert "spool" in down.output
    assert len(list((tmp_path / "spool").glob("*.meta.json"))) == 1  # one report spooled
    app = typer.Typer()
    cli_agent.register(app)
    with LiveServer(service.settings, port):
        up = CliRunner().invoke(
            app,
            [
                "push",
                "--spool",
                "--server",
                f"http://127.0.0.1:{port}",
                "--token-file",
                str(token_file),
                "--retries",
                "0",
            ],
            env=env,
        )
        assert up.exit_code == 0, up.output
        again = CliRunner().invoke(scan_app, args, env=env)
        assert again.exit_code == 0, again.output
    reader = service.token("inventory:read")
    assets = service.client.get("/api/v1/assets", headers=auth(reader)).json()
    assert assets["total"] == 1
    assert assets["items"][0]["labels"] == {"env": "ci"}


def _agent_cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    app = typer.Typer()
    cli_agent.register(app)
    result = CliRunner().invoke(app, args, env=env)
    return result.exit_code, result.output


def test_a_refused_token_keeps_the_spool_until_it_is_fixed(
    service: Service, tmp_path: Path
) -> None:
    """401 from the real service: no report is set aside, the queue waits for a good token."""
    spool = tmp_path / "spool"
    bad_token, good_token = tmp_path / "bad.token", tmp_path / "good.token"
    bad_token.write_text("gpv_not-a-token")
    good_token.write_text(service.token("report:write"))
    for name in ("node-a", "node-b"):
        Spool(spool).add(boms.encode(boms.gpuprov_bom(kind="host", name=name)))
    port = free_port()
    common = ["--server", f"http://127.0.0.1:{port}", "--spool-dir", str(spool), "--retries", "0"]
    with LiveServer(service.settings, port):
        code, output = _agent_cli(["push", "--spool", "--token-file", str(bad_token), *common])
        assert code == cli_agent.EXIT_REJECTED, output
        assert "refused the agent's token (401)" in output and "2 report(s) stay" in output
        assert len(Spool(spool).entries()) == 2 and Spool(spool).rejected() == []
        code, output = _agent_cli(["push", "--spool", "--token-file", str(good_token), *common])
    assert code == cli_agent.EXIT_OK, output
    assert service.count("scan") == 2


def test_push_spool_lists_set_aside_reports_and_goes_on(tmp_path: Path) -> None:
    """A report the service fails on is retried, then set aside and listed by every
    `push --spool`; the reports behind it are delivered at once."""
    spool = Spool(tmp_path / "spool")
    poison, good = (boms.encode(boms.gpuprov_bom(kind="host", name=n)) for n in ("p", "g"))
    spool.add(poison)
    spool.add(good)
    token = tmp_path / "t"
    token.write_text("gpv_token")
    with ProgrammedService(poison=poison) as svc:
        args = ["push", "--spool", "--server", svc.url, "--token-file", str(token)]
        args += ["--spool-dir", str(spool.directory), "--retries", "0"]
        code, output = _agent_cli(args)
        assert code == cli_agent.EXIT_SPOOLED, output
        assert svc.stored == [good] and "retried later" in output
        assert "1 report(s) wait in" in output
        # four more failures, spaced out: pretend the waits have passed
        for _ in range(4):
            [entry] = spool.entries()
            spool.update(replace(entry, retry_at=0))
            code, output = _agent_cli(args)
    assert code == cli_agent.EXIT_REJECTED, output
    assert "set aside in" in output and "500" in output and "5 times" in output
    assert spool.entries() == []
    with ProgrammedService() as svc:
        args[3] = svc.url
        code, output = _agent_cli(args)
    assert code == cli_agent.EXIT_OK, output  # listed again, not an error any more
    assert "1 report(s) set aside in" in output and f"{spool.rejected()[0].path.name}:" in output
    assert svc.received == []


def test_push_spool_says_when_another_process_holds_the_lock(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    spool.add(boms.encode(boms.gpuprov_bom(kind="host", name="n")))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
            "f.seek(0); f.truncate(); f.write(str(os.getpid())); f.flush()\n"
            "print('held', flush=True); time.sleep(120)\n",
            str(spool.directory / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        token = tmp_path / "t"
        token.write_text("gpv_token")
        with ProgrammedService() as svc:
            code, output = _agent_cli(
                ["push", "--spool", "--server", svc.url, "--token-file", str(token)]
                + ["--spool-dir", str(spool.directory)]
            )
    finally:
        holder.kill()
        holder.wait()
    assert code == cli_agent.EXIT_SPOOLED, output
    assert f"another gpuprov process (pid {holder.pid}) is delivering the spool" in output
    assert "1 report(s) wait there" in output and "empty" not in output
    assert svc.received == [] and len(spool.entries()) == 1
