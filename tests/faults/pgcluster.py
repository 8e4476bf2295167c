"""A private PostgreSQL cluster for fault tests: `initdb` in a temporary directory, `pg_ctl`
on a free loopback port, so tests can stop, restart and kill it without touching the shared
server at 127.0.0.1:5432.

initdb refuses to run as root: as root the cluster belongs to the ``postgres`` account (its
commands run through ``runuser``), otherwise to the current user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

#: where Debian's and PGDG's packages put the server binaries; PATH is tried first
_BIN_GLOBS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin")


class ClusterError(RuntimeError):
    """The private cluster could not be set up or driven."""


def find_bindir() -> Path:
    """The directory holding initdb and pg_ctl (highest version first)."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    for pattern in _BIN_GLOBS:
        for found in sorted(glob.glob(pattern), reverse=True):
            if (Path(found) / "initdb").is_file():
                return Path(found)
    raise ClusterError("no PostgreSQL server binaries (initdb) on PATH or in /usr/lib/postgresql")


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgCluster:
    """One private cluster: `start`, `stop`, `restart`, `kill`, databases, a DSN per database."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.owner = "postgres" if os.geteuid() == 0 else None
        self.root = Path(tempfile.mkdtemp(prefix="gpuprov-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        if self.owner is not None:
            try:
                account = pwd.getpwnam(self.owner)
            except KeyError as e:
                raise ClusterError("running as root, and there is no 'postgres' account") from e
            os.chown(self.root, account.pw_uid, account.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--no-sync", "--no-instructions",
        )  # fmt: skip
        # no durability needed, small and quick; sockets only on loopback TCP and in our dir
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "shared_buffers": "32MB",
            "max_connections": "200",
            "log_min_messages": "warning",
        }
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())

    def _command(self, tool: str, *args: str) -> list[str]:
        command = [str(self.bindir / tool), *args]
        if self.owner is not None:
            return ["runuser", "-u", self.owner, "--", *command]
        return command

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        done = subprocess.run(
            self._command(tool, *args), capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise ClusterError(f"{tool} {' '.join(args)} failed: {done.stderr or done.stdout}")

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname} connect_timeout=3"

    def url(self, dbname: str) -> str:
        """A SQLAlchemy URL."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: sessions are ended; ``immediate``: a crash)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "fast") -> None:
        """Stop, then start."""
        self.stop(mode)
        self.start()

    def create_database(self, name: str) -> str:
        """A new empty database; its SQLAlchemy URL."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, ending its sessions."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def wait_ready(self, timeout: float = 30) -> None:
        """Wait until a connection succeeds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.dsn(), autocommit=True).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def destroy(self) -> None:
        """Stop the server (if it runs) and delete its directory."""
        try:
            self.stop("immediate")
        except (ClusterError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)
