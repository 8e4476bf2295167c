"""Disk full on the agent's spool: `gpuprov push` (a real process) says the spool is full and
that this report is not kept, exits 4, and keeps the oldest reports intact; once the service is
back they are delivered, oldest first, before the new one.

The full disk is a real one when the test runs as root: a 64 KiB tmpfs mounted on the spool
directory, filled by the reports themselves. Otherwise the pushes after the first ones run
under RLIMIT_FSIZE smaller than a report (writes fail with EFBIG, as on a quota), which the
agent treats the same way.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from scanner.deliver import Spool
from tests.faults.conftest import ROOT, ApiProcess, make_token
from tests.faults.fleet import report, serial_of, stored_serials
from tests.faults.pgcluster import free_port

EXIT_SPOOLED, EXIT_NOT_KEPT = 3, 4
REPORTS = 4


@contextlib.contextmanager
def small_disk(path: Path) -> Iterator[str]:
    """A 64 KiB tmpfs on `path` when it can be mounted ("tmpfs"), else nothing ("rlimit")."""
    path.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(path)],
            capture_output=True,
        ).returncode
        == 0
    )
    try:
        yield "tmpfs" if mounted else "rlimit"
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=True)


def _limit_file_size() -> None:
    # smaller than a spooled report, larger than its labels file (Python ignores SIGXFSZ)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))


def push(path: Path, server: str, token: Path, spool: Path, limited: bool) -> tuple[int, str]:
    command = [sys.executable, "-m", "gpuprov", "push", str(path), "--server", server]
    command += ["--token-file", str(token), "--spool-dir", str(spool), "--retries", "0"]
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_file_size if limited else None,  # noqa: PLW1509 - no threads here
    )
    return done.returncode, done.stderr


def test_full_spool_says_so_and_keeps_the_oldest(fault_db: str, tmp_path: Path) -> None:
    dsn = fault_db.replace("postgresql+psycopg://", "postgresql://")
    token = tmp_path / "agent.token"
    token.write_text(make_token(fault_db, "report:write"))
    port = free_port()
    server = f"http://127.0.0.1:{port}"  # nobody listens yet
    paths = []
    for i in range(REPORTS):  # ~18 KB each gzip-compressed: the digests do not compress
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_bytes(report(f"node-{i}", minutes=i, files=300))
    spool_dir = tmp_path / "spool"
    with small_disk(spool_dir) as mode:
        codes = []
        for i, path in enumerate(paths[:-1]):
            code, stderr = push(path, server, token, spool_dir, mode == "rlimit" and i >= 2)
            codes.append(code)
            if code == EXIT_NOT_KEPT:
                assert "report not delivered (cannot reach" in stderr, stderr
                assert f"the spool {spool_dir} " in stderr and "this report is NOT kept" in stderr
                assert "is full (" in stderr and "Traceback" not in stderr, stderr
        kept = codes.count(EXIT_SPOOLED)
        assert 2 <= kept < len(codes), (mode, codes)
        assert codes == [EXIT_SPOOLED] * kept + [EXIT_NOT_KEPT] * (len(codes) - kept), codes
        # the oldest reports, whole; nothing half-written left behind
        entries = Spool(spool_dir).entries()
        assert [serial_of(e.read()) for e in entries] == [
            serial_of(p.read_bytes()) for p in paths[:kept]
        ]
        names = sorted(p.name for p in spool_dir.iterdir())
        assert not [n for n in names if ".tmp-" in n], names
        assert sum(n.endswith(".meta.json") for n in names) == kept, names

        # the service is back: the spool drains oldest first, then the new report goes
        with ApiProcess(fault_db, tmp_path / "api.log") as api:
            code, stderr = push(paths[-1], api.url, token, spool_dir, False)
        assert code == 0, stderr
        assert stderr.count("delivered spooled report") == kept
        assert Spool(spool_dir).entries() == []
    expected = [*paths[:kept], paths[-1]]
    assert stored_serials(dsn) == {serial_of(p.read_bytes()): 1 for p in expected}
