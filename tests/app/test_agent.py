"""`gpuprov agent --once` scans a host root with the real pipeline and delivers the report to a
running service, with the agent's labels."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from scanner import cli_agent
from tests.app.conftest import LiveServer, Service, auth, free_port

pytest.importorskip("scanner.pipeline")


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
    from scanner.cli import app as scan_app

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
