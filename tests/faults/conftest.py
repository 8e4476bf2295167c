"""Fault-test fixtures: a private PostgreSQL cluster (tests/faults/pgcluster.py) for the
session, a fresh migrated database per test (copied from a migrated template), and the API as
a real `gpuprov serve` process that a test can kill.

Without the PostgreSQL server binaries, or when the cluster cannot start, these tests are
skipped, except under CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from app.domain.tokens import create_token
from app.settings import Settings
from app.storage.migrate import upgrade
from app.storage.session import Database
from tests.faults.pgcluster import ClusterError, PgCluster, free_port

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = "gpuprov_template"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The session's private cluster, with a migrated template database."""
    try:
        cluster = PgCluster()
    except (ClusterError, OSError, subprocess.SubprocessError) as e:
        _unavailable(f"cannot create a private PostgreSQL cluster: {e}")
    try:
        cluster.start()
        upgrade(cluster.create_database(TEMPLATE))
    except (ClusterError, OSError, subprocess.SubprocessError, psycopg.Error) as e:
        cluster.destroy()
        _unavailable(f"cannot start the private PostgreSQL cluster: {e}")
    try:
        yield cluster
    finally:
        cluster.destroy()


def _unavailable(reason: str) -> None:
    pytest.fail(reason)  # the fault tests never pass by being skipped


@pytest.fixture
def fault_db(pg_cluster: PgCluster) -> Iterator[str]:
    """A fresh migrated database on the private cluster (its SQLAlchemy URL)."""
    pg_cluster.wait_ready()  # a previous test may have left it restarting
    name = f"gpuprov_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.wait_ready()
        pg_cluster.drop_database(name)


def make_token(url: str, *scopes: str) -> str:
    """A token stored straight in the database; its secret."""
    db = Database(Settings(database_url=url))
    try:
        with db.transaction(write=True) as session:
            return create_token(session, "fault-test", list(scopes), None).secret
    finally:
        db.dispose()


class ApiProcess:
    """`gpuprov serve` in its own process (settings from ``GPUPROV_*`` variables)."""

    def __init__(self, url: str, log: Path, *, workers: int = 1, **settings: object) -> None:
        self.workers = workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "GPUPROV_DATABASE_URL": url,
            **{f"GPUPROV_{k.upper()}": str(v) for k, v in settings.items()},
        }
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180) -> ApiProcess:
        """Start the process and wait until it answers /healthz (a generous bound: each worker
        imports the whole service, slow on a loaded 2-core machine)."""
        command = [sys.executable, "-m", "gpuprov", "serve", "--port", str(self.port)]
        command += ["--log-level", "warning", "--workers", str(self.workers)]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gpuprov serve exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"gpuprov serve did not start: {self.log.read_text()[-2000:]}")

    def worker_pids(self) -> list[int]:
        """With ``workers`` > 1: the worker processes uvicorn's supervisor started."""
        assert self.process is not None
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == self.process.pid and b"resource_tracker" not in cmdline:
                pids.append(int(entry.name))
        return pids

    def kill(self) -> None:
        """SIGKILL: no shutdown, no rollback by the process, sockets cut."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ApiProcess:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
