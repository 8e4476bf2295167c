"""What one oversized report costs the service, and whether ``/healthz`` stays responsive; prints
JSON.

`gpuprov serve` (one worker, SQLite) receives gzip reports of many small components: one just
under `GPUPROV_MAX_REPORT_COMPONENTS` (ingested) and one far above it (refused with 413), each
while another thread polls ``/healthz``. Reported per case: status, seconds to the answer, the
``/healthz`` latencies meanwhile, and the server's peak resident memory (VmHWM) after the case.

    .venv/bin/python bench/ingest_cost.py [--over 700000] [--under 100000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.domain.tokens import create_token  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.migrate import upgrade  # noqa: E402
from app.storage.session import Database  # noqa: E402
from tests.app import boms  # noqa: E402


def report(components: int) -> bytes:
    """A valid report with `components` small library components (gzip)."""
    bom = boms.gpuprov_bom(owners=[boms.cudnn_wheel()])
    bom["components"] += [
        {"type": "library", "bom-ref": f"r{i}", "name": f"p{i}", "version": "1.0"}
        for i in range(components)
    ]
    return gzip.compress(json.dumps(bom, separators=(",", ":")).encode(), compresslevel=6)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def post_while_polling(base: str, token: str, body: bytes) -> dict[str, Any]:
    latencies: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            while not done.is_set():
                started = time.perf_counter()
                client.get("/healthz")
                latencies.append(time.perf_counter() - started)
                time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/vnd.cyclonedx+json",
        "Content-Encoding": "gzip",
    }
    started = time.perf_counter()
    answer = httpx.post(f"{base}/api/v1/reports", content=body, headers=headers, timeout=300)
    seconds = time.perf_counter() - started
    done.set()
    poller.join()
    return {
        "status": answer.status_code,
        "message": answer.json().get("error", {}).get("message", "")[:120],
        "gzip_bytes": len(body),
        "seconds": round(seconds, 2),
        "healthz_p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        "healthz_max_ms": round(max(latencies) * 1000, 1) if latencies else None,
        "healthz_n": len(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--over", type=int, default=700_000, help="components of the big report")
    parser.add_argument("--under", type=int, default=99_000, help="components of the other")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        upgrade(url)
        db = Database(Settings(database_url=url))
        with db.transaction(write=True) as session:
            token = create_token(session, "bench", ["report:write"], None).secret
        db.dispose()
        port = free_port()
        env = {**os.environ, "GPUPROV_DATABASE_URL": url}
        command = [sys.executable, "-c", "from gpuprov.cli import main; main()", "serve"]
        command += ["--port", str(port), "--workers", "1", "--log-level", "warning"]
        server = subprocess.Popen(command, cwd=ROOT, env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the service did not become ready")
                time.sleep(0.2)
            results: dict[str, Any] = {"idle_rss_mb": peak_rss_mb(server.pid)}
            for name, count in (("under_cap", args.under), ("over_cap", args.over)):
                body = report(count)
                results[name] = {"components": count, **post_while_polling(base, token, body)}
                results[name]["server_peak_rss_mb"] = peak_rss_mb(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
