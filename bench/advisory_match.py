"""Benchmark: advisory matching at fleet scale on PostgreSQL; prints JSON.

1. A fresh database grown to ``--assets`` assets of 60 GPU library files each with
   `bench/ingest.py`'s bulk loader; NVIDIA's 131 shared bulletins imported.
2. Products given to the assets as a fleet holds them: hosts with a driver of one of several
   R535/R550/R570/R580 releases (and a Container Toolkit), images with a CUDA 11.8 or 12.4
   toolkit with or without cuobjdump/nvdisasm, the rest (cuDNN/cudart-only images) none.
3. A full re-match of every asset (`app.domain.vulnerabilities.rematch`, as an import runs it),
   timed ``--rounds`` times; the number of distinct stacks it evaluated.
4. ``GET /api/v1/assets/{id}/vulnerabilities`` and ``GET /api/v1/advisories`` (as it is, and
   with the §4 filters and orders: ``affected=true``, ``sort=affected``, ``severity=high&
   sort=severity``, ``cve=``) ``--queries`` times each in process (starlette's TestClient: no
   network), p50/p95.
5. Ingest overhead: ``--ingest`` reports of `bench/ingest.py` (60 NVIDIA wheel files each)
   posted one after another in process into fresh databases holding the feed, with matching
   at ingest switched off and on, alternated three times; reports per second, the medians'
   change.

    .venv/bin/python bench/advisory_match.py [--assets 2000] [--rounds 3] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.cli_advisories import import_paths  # noqa: E402
from app.clock import utcnow  # noqa: E402
from app.domain.tokens import create_token  # noqa: E402
from app.domain.vulnerabilities import rematch  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.session import Database  # noqa: E402
from app.storage.tables import Asset, AssetProduct  # noqa: E402
from bench.ingest import Databases, grow_fleet, percentiles  # noqa: E402
from scanner.advisories.document import DEFAULT_MAX_BYTES  # noqa: E402

PSIRT = ROOT.parent / "shared" / "fixtures" / "nvidia-psirt"
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"
DRIVERS = ("535.129.03", "535.216.01", "535.274.02", "550.127.05", "570.195.03", "580.82.07")


def _products(asset_id: int, kind: str, rng: random.Random) -> list[dict[str, Any]]:
    def row(key: str, version: str, **extra: Any) -> dict[str, Any]:
        return {"asset_id": asset_id, "key": key, "version": version, "paths": [], **extra}

    if kind == "host":
        driver = rng.choice(DRIVERS)
        return [
            row("driver", driver, branch="R" + driver.split(".")[0]),
            row("container-toolkit", rng.choice(("1.16.1", "1.17.3", "1.17.8"))),
        ]
    pick = rng.random()
    if pick < 0.3:
        release, tools = rng.choice((("11.8.0", "11.8.86"), ("12.4.1", "12.4.127")))
        out = [row("cuda-toolkit", release)]
        for tool in rng.sample(("cuobjdump", "nvdisasm"), rng.randint(0, 2)):
            out.append(row(tool, tools, toolkit=release))
        return out
    return []


def _measure(url: str, assets: int, rounds: int, queries: int) -> dict[str, Any]:
    rng = random.Random(19)
    grown = grow_fleet(url, 0, assets, rng)
    db = Database(Settings(database_url=url))
    try:
        started = time.perf_counter()
        summary = import_paths(db, [PSIRT], strict=False, max_bytes=DEFAULT_MAX_BYTES)
        import_s = time.perf_counter() - started
        with db.transaction(write=True) as session:
            rows = []
            for asset_id, kind in session.execute(select(Asset.id, Asset.kind)).all():
                rows += _products(asset_id, kind, rng)
            for i in range(0, len(rows), 5000):
                session.execute(insert(AssetProduct), rows[i : i + 5000])
            token = create_token(session, "bench", ["inventory:read"]).secret
        timings, last = [], None
        for _ in range(rounds):
            with db.transaction(write=True) as session:
                started = time.perf_counter()
                last = rematch(session, utcnow())
                timings.append(time.perf_counter() - started)
    finally:
        db.dispose()
    from fastapi.testclient import TestClient

    from app.main import create_app

    headers = {"Authorization": f"Bearer {token}"}
    answers: dict[str, Any] = {}
    with TestClient(create_app(Settings(database_url=url))) as client:
        for name, path in (
            ("asset_vulnerabilities", "/api/v1/assets/{id}/vulnerabilities"),
            ("advisory_list", "/api/v1/advisories"),
            ("advisory_list_affected", "/api/v1/advisories?affected=true"),
            ("advisory_list_most_affected", "/api/v1/advisories?sort=affected"),
            ("advisory_list_high", "/api/v1/advisories?severity=high&sort=severity"),
            ("advisory_list_one_cve", "/api/v1/advisories?cve=CVE-2025-23280"),
            ("advisory_affected", "/api/v1/advisories/CVE-2025-23280/affected"),
        ):
            samples = []
            for _ in range(queries):
                target = path.replace("{id}", str(rng.randint(1, assets)))
                started = time.perf_counter()
                response = client.get(target, headers=headers)
                samples.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
            answers[name] = percentiles(samples[2:])
    assert last is not None
    return {
        "assets": assets,
        "files_per_asset": 60,
        "grow_s": grown.get("seconds"),
        "import_131_bulletins_s": round(import_s, 3),
        "imported": summary.imported,
        "rematch_s": [round(t, 3) for t in timings],
        "distinct_stacks": last.distinct,
        "findings": last.findings,
        "endpoints": answers,
    }


def _ingest_rate(url: str, count: int, matching: bool) -> float:
    from fastapi.testclient import TestClient

    import app.domain.ingest as ingest_module
    from app.main import create_app
    from bench.ingest import report_for

    db = Database(Settings(database_url=url))
    try:
        import_paths(db, [PSIRT], strict=False, max_bytes=DEFAULT_MAX_BYTES)
        with db.transaction(write=True) as session:
            token = create_token(session, "agent", ["report:write"]).secret
    finally:
        db.dispose()
    rng = random.Random(7)
    bodies = [report_for(i, rng) for i in range(count)]
    saved = ingest_module.vulnerabilities
    if not matching:

        class _Off:
            @staticmethod
            def store_products(*_: Any, **__: Any) -> None:
                return None

            @staticmethod
            def store_conditions(*_: Any, **__: Any) -> None:
                return None

            @staticmethod
            def rematch(*_: Any, **__: Any) -> None:
                return None

            @staticmethod
            def facts_of_report(*_: Any, **__: Any) -> None:
                return None

        ingest_module.vulnerabilities = _Off  # type: ignore[assignment]
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/vnd.cyclonedx+json",
    }
    try:
        with TestClient(create_app(Settings(database_url=url))) as client:
            started = time.perf_counter()
            for body in bodies:
                response = client.post("/api/v1/reports", content=body, headers=headers)
                assert response.status_code == 201, response.text
            return count / (time.perf_counter() - started)
    finally:
        ingest_module.vulnerabilities = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--ingest", type=int, default=200, help="reports for the overhead (0: skip)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()
    dbs = Databases(PG_ADMIN, args.keep)
    try:
        url = dbs.create("advmatch")
        result: dict[str, Any] = {
            "postgresql": _measure(url, args.assets, args.rounds, args.queries)
        }
        if args.ingest:
            # alternated, three databases each: a shared machine's load moves single runs
            rates: dict[str, list[float]] = {"without_matching": [], "with_matching": []}
            for i in range(3):
                for on in (False, True):
                    rate = _ingest_rate(dbs.create(f"ingest{i}{int(on)}"), args.ingest, on)
                    rates["with_matching" if on else "without_matching"].append(round(rate, 1))
            off = statistics.median(rates["without_matching"])
            on_ = statistics.median(rates["with_matching"])
            result["postgresql"]["ingest_reports_per_s"] = {
                **rates,
                "median_change_percent": round((on_ - off) / off * 100, 1),
            }
    finally:
        dbs.drop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
