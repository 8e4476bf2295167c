"""`make run` (scripts/run.sh, scripts/run_port.py): it never talks to a server it did not start,
and what it prints works as printed.

A stranger is a real HTTP server on a loopback port that records every request it gets.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.app.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
RUN_PORT = ROOT / "scripts" / "run_port.py"


class Stranger:
    """Another process's HTTP server: answers 200 to anything and records what it got."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        stranger = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                stranger.requests.append(f"{self.command} {self.path}")
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = _any  # noqa: N815 (http.server's naming)

            def log_message(self, *_: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def stranger() -> Iterator[Stranger]:
    server = Stranger()
    yield server
    server.close()


def _env(run_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPROV_")}
    env.update(GPUPROV_RUN_DIR=str(run_dir), XDG_CACHE_HOME=str(run_dir / "cache"), **extra)
    return env


def _stop(run_dir: Path) -> None:
    """Stop the service a run left, if any (only that pid, only if it is that service)."""
    pid_file = run_dir / "server.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists() and b"serve" in cmdline.read_bytes():
        os.kill(pid, signal.SIGTERM)


def test_a_taken_port_fails_clearly_and_sends_nothing(stranger: Stranger, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "run.sh")],
        env=_env(run_dir, GPUPROV_PORT=str(stranger.port)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert f"port {stranger.port} (GPUPROV_PORT) is taken by another process" in done.stderr
    assert stranger.requests == []
    assert not (run_dir / "server.pid").exists() and not (run_dir / "admin.token").exists()


def test_a_taken_default_port_is_replaced_by_a_free_one(stranger: Stranger) -> None:
    done = subprocess.run(
        [sys.executable, str(RUN_PORT), "choose", "--preferred", str(stranger.port)],
        capture_output=True,
        text=True,
        check=True,
    )
    port = int(done.stdout)
    assert port != stranger.port
    assert f"port {stranger.port} is taken by another process; this run uses port {port}" in (
        done.stderr
    )
    assert stranger.requests == []


def test_a_port_the_previous_service_holds_is_usable(stranger: Stranger) -> None:
    """--ours PID: the port counts as free when PID alone listens on it (the stranger here is
    this test's own process); held by anyone else, it is taken."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for mode in ("--required", "--preferred"):
            for ours, usable in ((os.getpid(), True), (other.pid, False)):
                done = subprocess.run(
                    [sys.executable, str(RUN_PORT), "choose", mode, str(stranger.port)]
                    + ["--ours", str(ours)],
                    capture_output=True,
                    text=True,
                )
                if usable:
                    assert done.returncode == 0 and done.stdout == f"{stranger.port}\n"
                elif mode == "--required":
                    assert done.returncode == 1 and "is taken" in done.stderr
                else:
                    assert done.returncode == 0 and int(done.stdout) != stranger.port
    finally:
        other.kill()
        other.wait()
    assert stranger.requests == []


@pytest.mark.parametrize("value", ["http", "0", "70000"])
def test_a_bad_port_setting_is_refused(value: str) -> None:
    done = subprocess.run(
        [sys.executable, str(RUN_PORT), "choose", "--required", value],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "is not a TCP port" in done.stderr


def test_wait_never_talks_to_a_port_another_process_holds(
    stranger: Stranger, tmp_path: Path
) -> None:
    """The race `choose` cannot close: the port is taken after it was found free. The started
    service is alive but does not hold the port; nothing may be sent there."""
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        done = subprocess.run(
            [sys.executable, str(RUN_PORT), "wait", str(ours.pid), str(stranger.port)]
            + [str(tmp_path / "log"), "--timeout", "2"],
            capture_output=True,
            text=True,
        )
    finally:
        ours.kill()
        ours.wait()
    assert done.returncode == 1
    assert f"port {stranger.port} is held by another process" in done.stderr
    assert stranger.requests == []


def test_wait_reports_a_service_that_exited(stranger: Stranger, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("ERROR: [Errno 98] address already in use\n")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    done = subprocess.run(
        [sys.executable, str(RUN_PORT), "wait", str(gone.pid), str(stranger.port), str(log)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "exited" in done.stderr
    assert "address already in use" in done.stderr and stranger.requests == []


def test_make_run_on_a_free_port_and_its_printed_commands(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (tmp_path / "libs").mkdir()
    port = free_port()
    try:
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "run.sh")],
            env=_env(run_dir, GPUPROV_PORT=str(port), GPUPROV_RUN_INCLUDE=str(tmp_path / "libs")),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        message = done.stderr
        assert f"Service:      http://127.0.0.1:{port}/api/v1" in message
        for name in ("host.cdx.json", "demo-image.cdx.json"):
            bom = json.loads((run_dir / "reports" / name).read_text())
            assert bom["bomFormat"] == "CycloneDX"
        assert message.count("delivered: scan") == 2  # one scan and one push per target
        # the demo image is gated: its unowned CUDA runtime copy denies it, with the controls
        assert "decision: DENY" in done.stdout, done.stdout
        assert "FAIL  ownership (deny)" in done.stdout and "CIS-2.3" in done.stdout
        _dashboard_shows_the_run(message, port)
        # The printed commands, run as printed, from another directory, in a clean shell.
        block = message[message.index("To use this run's service") :]
        commands = [line[2:] for line in block.splitlines() if line.startswith("  ")]
        assert commands[0].startswith(". ") and "activate" in commands[0]
        assert "GPUPROV_DATABASE_URL=" in commands[1]
        script = " && ".join(commands[:-1])
        shell = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shell.returncode == 0, shell.stdout + shell.stderr
        assert shell.stdout.startswith('{"items":[')
        assert re.search(r"\d+\trun-admin-\d+\tgpv_", shell.stdout), shell.stdout
        assert "already stored" in shell.stderr
        pid = int((run_dir / "server.pid").read_text())
        # a plain `make stop` would look in the default run directory, not this one
        assert f"`GPUPROV_RUN_DIR={run_dir} make stop` in {ROOT} does the same" in message
        stop = subprocess.run(["bash", "-c", commands[-1]], cwd=tmp_path, timeout=30)
        assert stop.returncode == 0
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists() or b"Z" in _state(pid):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the printed stop command did not stop the service")
    finally:
        _stop(run_dir)


def _make_run(run_dir: Path, libs: Path, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "run.sh")],
        env=_env(run_dir, GPUPROV_PORT=str(port), GPUPROV_RUN_INCLUDE=str(libs)),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _tokens(run_dir: Path) -> dict[int, tuple[str, str]]:
    """id -> (name, state) of the run's database, as `gpuprov token list` prints them."""
    listed = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "gpuprov"), "token", "list"],
        env=_env(run_dir, GPUPROV_DATABASE_URL=f"sqlite:///{run_dir / 'gpuprov.db'}"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split("\t") for line in listed.splitlines()[1:]]  # after the header
    return {int(r[0]): (r[1], r[4]) for r in rows}


def test_a_second_run_keeps_one_set_of_tokens_and_a_taken_port_changes_nothing(
    stranger: Stranger, tmp_path: Path
) -> None:
    """Issue 18 §4: a run revokes the tokens the previous run made (by their secrets: a token
    someone else named run-admin-N stays), and a port it cannot have stops it before anything
    changes (the previous run's service keeps running, its database and tokens as they were);
    the port the previous run's service holds is usable."""
    run_dir, libs = tmp_path / "run", tmp_path / "libs"
    libs.mkdir()
    port = free_port()
    try:
        first = _make_run(run_dir, libs, port)
        assert first.returncode == 0, first.stderr
        assert "previous run's" not in first.stderr  # nothing to revoke on a first run
        pid = (run_dir / "server.pid").read_text()
        secrets = {k: (run_dir / f"{k}.token").read_text() for k in ("admin", "agent")}
        made = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "gpuprov"), "token", "create", "--name"]
            + [f"run-admin-{os.getpid()}", "--scope", "admin"],
            env=_env(run_dir, GPUPROV_DATABASE_URL=f"sqlite:///{run_dir / 'gpuprov.db'}"),
            capture_output=True,
            text=True,
            check=True,
        )
        assert made.stdout.startswith("gpv_")
        before = _tokens(run_dir)
        assert [state for _, state in before.values()] == ["active"] * 3
        database = (run_dir / "gpuprov.db").read_bytes()

        taken = _make_run(run_dir, libs, stranger.port)
        assert taken.returncode == 1, taken.stderr
        assert f"port {stranger.port} (GPUPROV_PORT) is taken by another process" in taken.stderr
        assert "nothing changed" in taken.stderr and "stopped the service" not in taken.stderr
        assert stranger.requests == []
        assert (run_dir / "server.pid").read_text() == pid and _state(int(pid)) != b"Z"
        assert (run_dir / "gpuprov.db").read_bytes() == database
        assert {k: (run_dir / f"{k}.token").read_text() for k in secrets} == secrets
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert client.get("/readyz").status_code == 200  # still the first run's service

        second = _make_run(run_dir, libs, port)  # the port the first run's service holds
        assert second.returncode == 0, second.stderr
        assert f"stopped the service (pid {pid.strip()})" in second.stderr
        assert second.stderr.count("make run: the previous run's") == 2
        after = _tokens(run_dir)
        old_admin, old_agent, someone = sorted(before)
        assert after[old_admin] == (before[old_admin][0], "revoked")
        assert after[old_agent] == (before[old_agent][0], "revoked")
        assert after[someone] == (f"run-admin-{os.getpid()}", "active")
        new = {i: v for i, v in after.items() if i not in before}
        assert sorted(state for _, state in new.values()) == ["active", "active"]
        admin = (run_dir / "admin.token").read_text().strip()
        assert admin != secrets["admin"].strip()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            for secret, status in ((admin, 200), (secrets["admin"].strip(), 401)):
                answer = client.get("/api/v1/tokens", headers={"Authorization": f"Bearer {secret}"})
                assert answer.status_code == status, answer.text
    finally:
        _stop(run_dir)


def _dashboard_shows_the_run(message: str, port: int) -> None:
    """The printed dashboard URL and token log in; the pages show the run's assets, its gate
    decision and the demo policy's compliance."""
    found = re.search(r"^Dashboard: +(\S+) .*contents of (\S+)\)$", message, re.MULTILINE)
    assert found is not None, message
    assert found.group(1) == f"http://127.0.0.1:{port}/"
    with httpx.Client(base_url=found.group(1)) as browser:
        form = browser.get("/login").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
        assert csrf is not None
        token = Path(found.group(2)).read_text().strip()
        answer = browser.post("/login", data={"token": token, "csrf_token": csrf.group(1)})
        assert answer.status_code == 303, answer.text
        overview = browser.get("/").text
        assert "demo-oci:demo" in overview and "libcudart.so.13" in overview
        decisions = browser.get("/decisions?decision=deny").text
        assert "demo-oci:demo" in decisions and "ownership" in decisions
        assert "PR.PS-05" in browser.get("/compliance?policy=demo").text


def test_stop_ends_the_recorded_service_and_nothing_else(tmp_path: Path) -> None:
    """`make stop` (run.sh stop) ends the pid make run recorded when it is a gpuprov serve, and
    leaves any other process that holds a stale pid alone."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    service = subprocess.Popen([*sleep, "gpuprov", "serve"])
    other = subprocess.Popen(sleep)
    stop = ["bash", str(ROOT / "scripts" / "run.sh"), "stop"]
    try:
        (run_dir / "server.pid").write_text(f"{service.pid}\n")
        done = subprocess.run(stop, env=_env(run_dir), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and f"stopped the service (pid {service.pid})" in done.stderr
        assert service.wait(timeout=10) == -signal.SIGTERM
        assert not (run_dir / "server.pid").exists()
        (run_dir / "server.pid").write_text(f"{other.pid}\n")
        done = subprocess.run(stop, env=_env(run_dir), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and other.poll() is None
        done = subprocess.run(stop, env=_env(run_dir), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "no service of make run is running" in done.stderr
    finally:
        for proc in (service, other):
            proc.kill()
            proc.wait()


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().split(b") ", 1)[1][:1]
    except (OSError, IndexError):
        return b"Z"
