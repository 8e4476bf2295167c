"""The capabilities the agent is given (deploy/k8s/agent.yaml, docker-compose.yml) are the ones
the kernel asks for, each of them needed: a uid 0 process whose capability set is exactly the
agent's (util-linux `setpriv` lowers the bounding set, so the exec'd shell holds no other) reads
another root process's /proc/PID/maps and its /proc/PID/map_files entry and a mode-0600 file of
another user; with any one of them removed, the matching read is refused. Needs root (CI runs as
root); elsewhere it is skipped."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.deploy.dockerfile import CHECKOUT


@pytest.fixture(autouse=True)
def _root_and_setpriv() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.fail("needs root and util-linux setpriv to lower the capability bounding set")


def _granted() -> list[str]:
    daemonset = yaml.safe_load((CHECKOUT / "deploy" / "k8s" / "agent.yaml").read_text())
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    added: list[str] = container["securityContext"]["capabilities"]["add"]
    compose = yaml.safe_load((CHECKOUT / "docker-compose.yml").read_text())
    assert compose["services"]["agent"]["cap_add"] == added
    return added


@pytest.fixture(scope="module")
def target() -> Iterator[tuple[int, str]]:
    """A root process with every capability (as the node's daemons run) and one mapped range."""
    process = subprocess.Popen(["sleep", "120"])
    try:
        maps = Path(f"/proc/{process.pid}/maps")
        sleep = os.path.realpath(shutil.which("sleep") or "/bin/sleep")
        ranges: list[str] = []
        before = ""
        for _ in range(400):
            # until sleep has been exec'd, its loader has mapped libc and the maps hold still:
            # read while the loader works, a range can be split or moved a moment later, and
            # its map_files entry is then gone (seen under load)
            text = maps.read_text()
            exec_done = os.path.realpath(f"/proc/{process.pid}/exe") == sleep
            if exec_done and "libc" in text and text == before:
                ranges = [line.split()[0] for line in text.splitlines() if ".so" in line]
                break
            before = text
            time.sleep(0.05)
        assert ranges, "sleep maps no shared object"
        yield process.pid, ranges[0]
    finally:
        process.kill()
        process.wait()


def _reads(capabilities: list[str], pid: int, mapped: str, private: Path) -> dict[str, bool]:
    bounding = ",".join(["-all"] + [f"+{c.lower()}" for c in capabilities])
    script = (
        f"head -c 1 /proc/{pid}/maps >/dev/null && echo maps; "
        f"head -c 1 /proc/{pid}/map_files/{mapped} >/dev/null && echo map_files; "
        f"head -c 1 {private} >/dev/null && echo private"
    )
    done = subprocess.run(
        ["setpriv", f"--bounding-set={bounding}", "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "setpriv:" not in done.stderr, done.stderr  # a capability name it does not know
    read = set(done.stdout.split())
    return {what: what in read for what in ("maps", "map_files", "private")}


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file of another user, mode 0600 (a host file root reads by DAC_READ_SEARCH only)."""
    directory = tmp_path_factory.mktemp("private")
    path = directory / "secret"
    path.write_text("x")
    os.chown(path, 4321, 4321)
    path.chmod(0o600)
    return path


def test_the_agent_capabilities_read_what_the_scan_reads(
    target: tuple[int, str], private: Path
) -> None:
    granted = _granted()
    assert granted == ["DAC_READ_SEARCH", "SYS_PTRACE", "CHECKPOINT_RESTORE"]
    pid, mapped = target
    assert _reads(granted, pid, mapped, private) == {
        "maps": True,
        "map_files": True,
        "private": True,
    }
    assert _reads([], pid, mapped, private) == {"maps": False, "map_files": False, "private": False}


@pytest.mark.parametrize(
    ("removed", "refused"),
    [
        ("DAC_READ_SEARCH", {"private"}),
        ("SYS_PTRACE", {"maps", "map_files"}),  # map_files is listed under the ptrace check too
        ("CHECKPOINT_RESTORE", {"map_files"}),
    ],
)
def test_each_capability_is_needed(
    removed: str, refused: set[str], target: tuple[int, str], private: Path
) -> None:
    pid, mapped = target
    fewer = [c for c in _granted() if c != removed]
    reads = _reads(fewer, pid, mapped, private)
    assert {what for what, ok in reads.items() if not ok} == refused
