"""`make run`'s guard against talking to a stranger: choose a port nobody holds, and make sure the
server answering on it is the one this run started before anything is sent to it.

    run_port.py choose --required PORT     PORT if free, else exit 1 saying who cannot have it
    run_port.py choose --preferred PORT    PORT if free, else a free port (saying so on stderr)
        [--ours PID]                       a port that PID alone listens on counts as free: the
                                           previous run's service, which make run stops only
                                           once the port is known to be usable
    run_port.py wait PID PORT LOG          until process PID listens on 127.0.0.1:PORT (read from
                                           /proc: no request goes to anyone else) and answers
                                           /readyz; exit 1 if it exits, or another process holds
                                           the port, or it takes too long

Standard library only; Linux (/proc).
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
import time
import urllib.error
import urllib.request

HOST = "127.0.0.1"


def _fail(message: str) -> int:
    print(f"make run: {message}", file=sys.stderr)
    return 1


def port_is_free(port: int) -> bool:
    """Whether this process could listen on HOST:PORT now (nothing is sent to a holder)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP PORT (IPv4 and IPv6, any address), from /proc/net."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                next(fh)  # header
                for line in fh:
                    fields = line.split()
                    local, state, inode = fields[1], fields[3], fields[9]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        inodes.add(inode)
        except FileNotFoundError:
            continue
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"  # a zombie has exited
    except (FileNotFoundError, IndexError):
        return False


def _log_tail(log: str) -> str:
    try:
        with open(log, errors="replace") as fh:
            return "".join(fh.readlines()[-5:])
    except OSError:
        return ""


def held_by(pid: int, port: int) -> bool:
    """Whether every socket listening on PORT is PID's (read from /proc: nothing is sent)."""
    listening = _listening_inodes(port)
    try:
        return bool(listening) and listening <= _socket_inodes(pid)
    except OSError:  # gone meanwhile, or not ours to read
        return False


def choose(required: str | None, preferred: int | None, ours: int | None = None) -> int:
    def usable(port: int) -> bool:
        return port_is_free(port) or (ours is not None and held_by(ours, port))

    if required is not None:
        if not required.isdigit() or not 1 <= int(required) <= 65535:
            return _fail(f"GPUPROV_PORT={required!r} is not a TCP port (1-65535)")
        if not usable(int(required)):
            return _fail(
                f"port {required} (GPUPROV_PORT) is taken by another process; nothing was sent "
                "to it and nothing changed. Stop that process or set GPUPROV_PORT to a free port."
            )
        print(int(required))
        return 0
    assert preferred is not None
    if usable(preferred):
        print(preferred)
        return 0
    port = free_port()
    print(
        f"make run: port {preferred} is taken by another process; this run uses port {port} "
        "(set GPUPROV_PORT to choose)",
        file=sys.stderr,
    )
    print(port)
    return 0


def wait(pid: int, port: int, log: str, timeout: float) -> int:
    if not os.path.isdir("/proc/net"):
        return _fail("cannot tell who listens on the port without /proc (Linux only)")
    deadline = time.monotonic() + timeout
    ours = False
    while time.monotonic() < deadline:
        if not _alive(pid):
            return _fail(
                f"the service this run started (pid {pid}) exited; its log {log} ends with:\n"
                + _log_tail(log)
            )
        listening = _listening_inodes(port)
        if listening:
            ours = bool(listening & _socket_inodes(pid))
            if not ours:
                time.sleep(0.2)  # the holder is someone else; ours will fail to bind and exit
                continue
            try:  # only now: the port is this run's service
                with urllib.request.urlopen(f"http://{HOST}:{port}/readyz", timeout=5) as answer:
                    if answer.status == 200:
                        return 0
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.2)
    if not ours and _listening_inodes(port):
        return _fail(
            f"port {port} is held by another process, not the service this run started "
            f"(pid {pid}); nothing was sent to it"
        )
    return _fail(f"the service (pid {pid}) was not ready within {timeout:.0f} s; see {log}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pick = sub.add_parser("choose")
    group = pick.add_mutually_exclusive_group(required=True)
    group.add_argument("--required")
    group.add_argument("--preferred", type=int)
    pick.add_argument("--ours", type=int)
    ready = sub.add_parser("wait")
    ready.add_argument("pid", type=int)
    ready.add_argument("port", type=int)
    ready.add_argument("log")
    ready.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if args.command == "choose":
        return choose(args.required, args.preferred, args.ours)
    return wait(args.pid, args.port, args.log, args.timeout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
