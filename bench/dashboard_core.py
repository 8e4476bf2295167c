"""The dashboard's overview and asset pages at fleet scale on PostgreSQL; prints JSON.

1. A fresh database grown to ``--assets`` assets of 60 GPU library files each with
   `bench/ingest.py`'s bulk loader (or ``--database-url``: one already grown, migrated first),
   about 2.6 % of the current files marked modified, unowned or in conflict with a catalog and
   half verified by provenance, then VACUUM ANALYZE.
2. The overview's figures computed in process (``--computations`` times; what a request pays
   when the figures are not cached).
3. ``gpuprov serve --workers 2``; a session from the login form; each page fetched
   ``--queries`` times over HTTP (p50/p95), with the overview's figures computed on every
   request (``GPUPROV_DASHBOARD_CACHE_SECONDS=0``) and reused for 30 s (the default).

    .venv/bin/python bench/dashboard_core.py [--assets 10000] [--queries 100] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.clock import utcnow  # noqa: E402
from app.domain.dashboard import overview  # noqa: E402
from app.domain.tokens import create_token  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.migrate import upgrade  # noqa: E402
from app.storage.session import Database  # noqa: E402
from bench.dashboard_pages import login  # noqa: E402
from bench.ingest import Databases, grow_fleet, percentiles, start_server  # noqa: E402

PAGES = {
    "overview": "/",
    "asset_list": "/assets",
    "asset_list_family_version": "/assets?family=cudnn&version=9.1.*",
    "asset_list_verdict_modified": "/assets?verdict=modified",
    "asset_list_label_page_50": "/assets?kind=host&label=env%3Dprod&page=50",
    "asset_list_unsigned_images": "/assets?kind=image&signed=false",
    # issue 18: the status column, its filter and order, the latest gate decision filter
    "asset_list_sort_status": "/assets?sort=status",
    "asset_list_status_conflict": "/assets?status=conflict",
    "asset_list_gate_deny": "/assets?gate=deny",
    "asset_detail": "/assets/5000",
}
#: findings spread over the fleet: every 97th current file modified, every 89th unowned,
#: every 193rd in conflict with a catalog, every other one verified by provenance
FINDINGS = (
    "UPDATE artifact SET provenance = 'verified' WHERE is_current AND id % 2 = 0",
    "UPDATE artifact SET integrity = 'modified' WHERE is_current AND id % 97 = 0",
    "UPDATE artifact SET integrity = 'unowned' WHERE is_current AND id % 89 = 0",
    "UPDATE artifact SET provenance = 'conflict' WHERE is_current AND id % 193 = 0",
)


def prepare(url: str, grow: int | None, rng: random.Random) -> dict[str, Any]:
    """Grow the fleet (when asked) and mark its findings; VACUUM ANALYZE."""
    out: dict[str, Any] = {}
    if grow is not None:
        out["fleet"] = grow_fleet(url, 0, grow, rng)
        db = Database(Settings(database_url=url))
        with db.transaction(write=True) as session:
            for statement in FINDINGS:
                session.execute(text(statement))
        db.dispose()
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as c:
        c.execute("VACUUM ANALYZE")
    return out


def time_overview(url: str, computations: int) -> dict[str, Any]:
    """The overview's figures computed in process, uncached."""
    db = Database(Settings(database_url=url))
    samples = []
    try:
        for _ in range(computations + 2):
            with db.session() as session:
                t0 = time.perf_counter()
                overview(session, utcnow())
                samples.append(time.perf_counter() - t0)
    finally:
        db.dispose()
    return percentiles(samples[2:])


def time_pages(url: str, token: str, queries: int, cache_seconds: int) -> dict[str, Any]:
    """p50/p95 of each page over HTTP with the overview cache set to ``cache_seconds``."""
    os.environ["GPUPROV_DASHBOARD_CACHE_SECONDS"] = str(cache_seconds)
    port = 18000 + random.randrange(1000)
    server = start_server(url, port, 2)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                if httpx.get(base + "/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the service did not start")
            time.sleep(1)
        client = login(base, token)
        results: dict[str, Any] = {}
        try:
            for name, path in PAGES.items():
                for _ in range(3):  # warm-up
                    client.get(path).raise_for_status()
                samples = []
                for _ in range(queries):
                    t0 = time.perf_counter()
                    answer = client.get(path)
                    samples.append(time.perf_counter() - t0)
                    answer.raise_for_status()
                results[name] = percentiles(samples)
        finally:
            client.close()
        return results
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=10_000)
    parser.add_argument("--database-url", help="a fleet already grown (migrated, not grown)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--computations", type=int, default=10)
    parser.add_argument(
        "--pg-admin", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()
    rng = random.Random(7)
    databases = Databases(args.pg_admin, args.keep)
    try:
        if args.database_url:
            url = args.database_url
            upgrade(url)
            out = prepare(url, None, rng)
        else:
            url = databases.create("dashboard")
            out = prepare(url, args.assets, rng)
        with os.popen("uptime") as uptime:
            out["load_before"] = uptime.read().strip()
        out["overview_computed_in_process"] = time_overview(url, args.computations)
        db = Database(Settings(database_url=url))
        with db.transaction(write=True) as session:
            token = create_token(session, "bench", ["inventory:read"]).secret
        db.dispose()
        out["pages_uncached"] = time_pages(url, token, args.queries, 0)
        out["pages_cached_30s"] = time_pages(url, token, args.queries, 30)
        with os.popen("uptime") as uptime:
            out["load_after"] = uptime.read().strip()
        print(json.dumps(out, indent=2))
    finally:
        databases.drop()


if __name__ == "__main__":
    main()
