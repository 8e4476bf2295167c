"""What large and slow request bodies cost a live service (issue 17 §2); prints JSON.

`gpuprov serve` (one process, a fresh SQLite database) from the source tree given by `--tree`
(this one by default; another checkout measures the code before a change), then:

1. **memory**: `--clients` connections each send a `--mb` MB gate request (a BOM padded to the
   size) at once, with a gate-only token (it may not send a BOM) and with a token holding
   `gate` and `report:write` (it may); the server's resident memory before each round and its
   peak (`VmHWM`, reset before the round) after it, and the answers' statuses;
2. **trickle**: one client declares a 10 MB report and sends a byte every 2 s: seconds until
   the service answers (capped at `--trickle-cap` s) and whether its ingest slot was held all
   along; meanwhile eight such clients of one token, and another token's push: its status.

    .venv/bin/python bench/bodies.py [--tree DIR] [--clients 12] [--mb 40] [--trickle-cap 60]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app import boms  # noqa: E402

#: run with the served tree's own code: its migrations and its token table
_SETUP = """
import json, sys
from app.domain.tokens import create_token
from app.settings import Settings
from app.storage.migrate import upgrade
from app.storage.session import Database
upgrade(sys.argv[1])
db = Database(Settings(database_url=sys.argv[1]))
with db.transaction(write=True) as session:
    print(json.dumps({
        "gate_only": create_token(session, "gate", ["gate"]).secret,
        "writer": create_token(session, "ci", ["gate", "report:write"]).secret,
        "agent": create_token(session, "agent", ["report:write"]).secret,
    }))
db.dispose()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(tree: Path, url: str, port: int) -> subprocess.Popen[bytes]:
    """`gpuprov serve` from `tree`, ready; /metrics readable without a token."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "GPUPROV_DATABASE_URL": url,
        "GPUPROV_METRICS_AUTH": "none",
    }
    command = [sys.executable, "-c", "from gpuprov.cli import main; main()", "serve"]
    command += ["--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=tree, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("the service did not start")


def memory(pid: int) -> dict[str, float]:
    """Resident and peak resident memory of a process, MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mb": fields["VmRSS"], "peak_mb": fields["VmHWM"]}


def send_body(port: int, head: bytes, body: bytes) -> int:
    """Send a request whole (or until the server stops reading) and return its status."""
    with socket.create_connection(("127.0.0.1", port), timeout=300) as sock:
        sock.sendall(head)
        try:
            sock.sendall(body)
        except OSError:  # answered and closed before the body was all sent
            pass
        reply = sock.makefile("rb").readline()
        return int(reply.split()[1]) if reply else 0


def memory_round(port: int, pid: int, token: str, clients: int, size: int) -> dict[str, Any]:
    """`clients` gate requests of `size` bytes at once; memory before and after, statuses."""
    prefix = b'{"policy": "prod", "bom": {"pad": "'
    body = prefix + b"x" * (size - len(prefix) - 3) + b'"}}'
    head = (
        "POST /api/v1/gate HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
    before = memory(pid)
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def client() -> None:
        status = send_body(port, head, body)
        with lock:
            statuses[status] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "before": before,
        "after": memory(pid),
        "seconds": round(time.perf_counter() - started, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }


def slots_in_flight(server: str) -> float:
    text = httpx.get(f"{server}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith("gpuprov_ingests_in_flight "):
            return float(line.split()[1])
    return -1.0


class Trickler:
    """A report of 10 MB declared, a byte sent every 2 s, until answered or stopped."""

    def __init__(self, port: int, token: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(
            (
                "POST /api/v1/reports HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json"
                f"\r\nAuthorization: Bearer {token}\r\nContent-Length: 10000000\r\n\r\n"
            ).encode()
        )
        self.started = time.monotonic()
        self.answered: float | None = None
        self.status = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.sock.settimeout(2)
        while not self.stop.is_set():
            try:
                reply = self.sock.recv(64)
                if reply:
                    self.status = int(reply.split()[1])
                self.answered = time.monotonic() - self.started
                return
            except TimeoutError:
                pass
            except OSError:
                self.answered = time.monotonic() - self.started
                return
            try:
                self.sock.sendall(b" ")
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def trickle(port: int, server: str, tokens: dict[str, str], cap: float) -> dict[str, Any]:
    one = Trickler(port, tokens["writer"])
    held = []
    while one.answered is None and time.monotonic() - one.started < cap:
        held.append(slots_in_flight(server))
        time.sleep(1)
    one.close()
    result: dict[str, Any] = {
        "answered_after_s": round(one.answered, 1) if one.answered is not None else None,
        "status": one.status or None,
        "cap_s": cap,
        "slot_held_while_trickling": bool(held) and min(held[:-1] or held) >= 1,
    }
    eight = [Trickler(port, tokens["writer"]) for _ in range(8)]
    time.sleep(3)
    result["eight_tricklers_slots_in_flight"] = slots_in_flight(server)
    other = httpx.post(
        f"{server}/api/v1/reports",
        content=boms.encode(boms.gpuprov_bom()),
        headers={"Authorization": f"Bearer {tokens['agent']}", "Content-Type": "application/json"},
        timeout=60,
    )
    result["other_token_push_meanwhile"] = other.status_code
    for t in eight:
        t.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="source tree to serve")
    parser.add_argument("--clients", type=int, default=12, help="concurrent large bodies")
    parser.add_argument("--mb", type=int, default=40, help="size of each body, MB")
    parser.add_argument("--trickle-cap", type=float, default=60, help="seconds to wait")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        tree = args.tree.resolve()
        setup = subprocess.run(
            [sys.executable, "-c", _SETUP, url],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
            check=True,
        )
        tokens = json.loads(setup.stdout.splitlines()[-1])
        port = free_port()
        process = serve(tree, url, port)
        server = f"http://127.0.0.1:{port}"
        try:
            size = args.mb * 1_000_000
            out: dict[str, Any] = {
                "tree": str(args.tree.resolve()),
                "clients": args.clients,
                "body_mb": args.mb,
                "idle": memory(process.pid),
                "gate_only_token": memory_round(
                    port, process.pid, tokens["gate_only"], args.clients, size
                ),
                "gate_and_report_write_token": memory_round(
                    port, process.pid, tokens["writer"], args.clients, size
                ),
                "trickle": trickle(port, server, tokens, args.trickle_cap),
            }
        finally:
            process.terminate()
            process.wait(timeout=30)
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
