"""What the fault tests share: reports, agents that deliver through the real spool
(scanner/deliver.py), and the database invariants that must hold after any fault."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from scanner.deliver import Backoff, Client, Delivered, Spool, Target, flush, push
from tests.app import boms, fleet_counts

BASE_TIME = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)


def report(name: str, *, minutes: int = 0, files: int = 0, kind: str = "host") -> bytes:
    """A report about `name` scanned `minutes` after BASE_TIME, with `files` extra library
    files (bulk: a slower ingest) and a serial number of its own."""
    extra = [
        boms.Lib(
            path=f"/opt/bulk/lib{i}/libcudnn_ops.so.9",
            family="cudnn",
            component="cudnn_ops",
            version="9.1.0.70",
            sha256=boms.digest_of(name, i),
        )
        for i in range(files)
    ]
    when = (BASE_TIME + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    bom = boms.gpuprov_bom(kind=kind, name=name, extra_libs=extra, timestamp=when)
    return json.dumps(bom).encode()


def serial_of(data: bytes) -> str:
    """The report's serial number."""
    return str(json.loads(data)["serialNumber"])


@dataclass
class Agent:
    """One agent: its own spool directory, delivering through `scanner.deliver.push`."""

    server: str
    token: str
    spool_dir: Path
    acknowledged: list[Delivered] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.spool = Spool(self.spool_dir)

    def backoff(self, attempts: int = 1) -> Backoff:
        return Backoff(attempts=attempts, initial=0.2, maximum=2.0, server_error_delay=0.0)

    def push(self, data: bytes, attempts: int = 1) -> None:
        """Deliver one report (spooling it when the service cannot take it)."""
        with Client(Target(self.server, self.token, timeout=60)) as client:
            outcome = push(data, client, self.spool, {}, self.backoff(attempts))
        self.acknowledged += outcome.flushed.delivered
        if outcome.delivered is not None:
            self.acknowledged.append(outcome.delivered)
        if outcome.error:
            self.errors.append(outcome.error)

    def drain(self, timeout: float = 30) -> None:
        """Flush the spool until it is empty (the service is up again)."""
        deadline = time.monotonic() + timeout
        while self.spool.entries():
            self.spool.set_wait_until(0)  # the test does not wait out the Retry-After
            with Client(Target(self.server, self.token, timeout=60)) as client:
                result = flush(self.spool, client, self.backoff(3))
            self.acknowledged += result.delivered
            assert not result.rejected, result.rejected
            if time.monotonic() > deadline:
                raise AssertionError(f"spool {self.spool_dir} not drained: {result.error}")
            if result.error:
                time.sleep(0.3)


def only_unavailable(agents: list[Agent]) -> None:
    """Every failed delivery was the service being unreachable, answering 503 or its
    Retry-After still running; never a 500 or a refusal."""
    odd = [
        e
        for a in agents
        for e in a.errors
        if not e.startswith(
            ("cannot reach", "the service answered 503", "the service asked to wait")
        )
    ]
    assert odd == [], odd


def stored_serials(dsn: str) -> Counter[str]:
    """How many scans each serial number has."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT serial_number FROM scan").fetchall()
    return Counter(str(r[0]) for r in rows)


def check_consistent(dsn: str) -> dict[str, int]:
    """The invariants a fault must never break; raises AssertionError naming the broken one.
    Returns row counts."""
    with psycopg.connect(dsn) as conn:

        def rows(sql: str) -> list[Any]:
            return conn.execute(sql).fetchall()  # type: ignore[arg-type]

        # every scan whole: its raw report and all its library rows
        assert (
            rows(
                "SELECT s.id FROM scan s LEFT JOIN raw_bom r ON r.scan_id = s.id "
                "WHERE r.scan_id IS NULL"
            )
            == []
        ), "a scan without its raw report"
        assert (
            rows(
                "SELECT s.id, s.library_count, count(a.id) FROM scan s "
                "LEFT JOIN artifact a ON a.scan_id = s.id "
                "GROUP BY s.id HAVING count(a.id) <> s.library_count"
            )
            == []
        ), "a scan missing library rows"
        # the latest scan of each asset is its newest (scanned_at, id)
        assert (
            rows(
                "SELECT a.id FROM asset a WHERE a.latest_scan_id IS DISTINCT FROM ("
                "  SELECT s.id FROM scan s WHERE s.asset_id = a.id "
                "  ORDER BY s.scanned_at DESC, s.id DESC LIMIT 1)"
            )
            == []
        ), "an asset whose latest scan is not its newest"
        # current state: exactly the latest scan's artifacts, and its summary
        assert (
            rows(
                "SELECT x.id FROM artifact x JOIN asset a ON a.id = x.asset_id "
                "WHERE x.is_current <> (x.scan_id = a.latest_scan_id)"
            )
            == []
        ), "current-state flags that do not follow the latest scan"
        assert (
            rows(
                "SELECT asset_id, family, version, cuda_major, sum(n) FROM ("
                "  SELECT asset_id, family, version, cuda_major, file_count AS n FROM asset_library"
                "  UNION ALL SELECT asset_id, family, version, cuda_major, -count(*) FROM artifact"
                "  WHERE is_current GROUP BY asset_id, family, version, cuda_major) d "
                "GROUP BY asset_id, family, version, cuda_major HAVING sum(n) <> 0"
            )
            == []
        ), "a library summary that differs from the latest scan"
        # the fleet-wide counts kept at ingest: those of the current state
        assert fleet_counts.differences(rows) == [], "fleet counts that differ from current state"
        counts = {
            t: int(rows(f"SELECT count(*) FROM {t}")[0][0])
            for t in ("asset", "scan", "raw_bom", "artifact", "asset_library")
        }
    return counts


def new_serial() -> str:
    """A fresh CycloneDX serial number."""
    return uuid.uuid4().urn
