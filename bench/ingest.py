"""Ingest and query benchmark of the service on PostgreSQL; prints JSON.

1. `gpuprov serve --workers 2` on a fresh PostgreSQL database; 8 concurrent agents push 2,000
   distinct gzip reports of 60 GPU library files each (reports are built before timing).
2. Baseline: the same normalized rows written straight through SQLAlchemy Core into another
   fresh database, one transaction per report, with the same 8-way concurrency.
3. The fleet is grown to 10,000 assets (bulk rows), then where-used by version, where-used by
   digest and the libraries aggregate are timed end to end over HTTP (p50/p95).
4. A promotion policy is stored (`PUT /api/v1/policies/prod`; over more than 1,000 assets it
   answers at once and evaluates every asset after the answer: timed until all are current),
   then fleet compliance (all frameworks, one framework) and a control's
   drill-down are timed over HTTP (p50/p95).
5. The dashboard's pages (`bench/dashboard_pages.py`): logged in through the login form, the
   overview, the asset list, where-used, file search, libraries, drift and compliance pages are
   timed end to end, HTML rendered (p50/p95).

    .venv/bin/python bench/ingest.py [--reports 2000] [--assets 10000] [--keep]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy import create_engine, insert, text, update

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.domain.ingest import artifact_rows, summary_rows  # noqa: E402
from app.domain.report_parser import Report, parse_report  # noqa: E402
from app.domain.tokens import create_token  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.migrate import upgrade  # noqa: E402
from app.storage.repositories import fleet  # noqa: E402
from app.storage.session import Database  # noqa: E402
from app.storage.tables import (  # noqa: E402
    Artifact,
    Asset,
    AssetLabel,
    AssetLibrary,
    Package,
    RawBom,
    Scan,
)
from bench.dashboard_pages import time_pages  # noqa: E402
from tests.app import boms  # noqa: E402

CUDNN_VERSIONS = ["8.9.7.29", "9.1.0.70", "9.3.0.75", "9.5.1.17", "9.7.0.66"]
CUDA_VERSIONS = ["12.1.105", "12.4.127", "12.6.77"]
ENVS = 5  # five Python environments x 12 libraries = 60 files per report


def report_for(i: int, rng: random.Random) -> bytes:
    """Report number i: an image or a host with five environments of NVIDIA wheels."""
    owners: list[boms.Owner] = []
    for env in range(ENVS):
        site = f"/opt/env{env}/lib/python3.11/site-packages/nvidia"
        owners.append(boms.cudnn_wheel(rng.choice(CUDNN_VERSIONS), 12, site))
        owners += boms.cuda_wheels(rng.choice(CUDA_VERSIONS), 12, site)
    # the same wheel gives the same bytes whatever the path: digests follow the version
    for owner in owners:
        owner.libs = [
            boms.Lib(**{**lib.__dict__, "sha256": boms.digest_of(lib.component, lib.version)})
            for lib in owner.libs
        ]
    if i % 2:
        bom = boms.gpuprov_bom(kind="host", name=f"gpu-node-{i:05d}", owners=owners)
    else:
        bom = boms.gpuprov_bom(name=f"registry.example.com/team{i % 17}/app{i}:1", owners=owners)
    return json.dumps(bom, separators=(",", ":")).encode()


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 2),
        "n": len(ordered),
    }


class Databases:
    """Fresh PostgreSQL databases, dropped at exit unless kept."""

    def __init__(self, admin_dsn: str, keep: bool) -> None:
        self.admin_dsn = admin_dsn
        self.keep = keep
        self.names: list[str] = []

    def create(self, label: str) -> str:
        name = f"gpuprov_bench_{label}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.names.append(name)
        url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        upgrade(url)
        return url

    def drop(self) -> None:
        if self.keep:
            return
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            for name in self.names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_server(url: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GPUPROV_DATABASE_URL": url, "GPUPROV_DATABASE_POOL_SIZE": "10"}
    command = [
        sys.executable,
        "-c",
        "from gpuprov.cli import main; main()",
        "serve",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("the service did not become ready")


def run_agents(bodies: list[bytes], server: str, tokens: list[str]) -> dict[str, Any]:
    """One agent per token (a fleet's agents each hold their own: one token may hold only its
    share of a process's ingest slots), posting its share of `bodies` one after another."""
    agents = len(tokens)
    chunks = [bodies[i::agents] for i in range(agents)]
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def agent(mine: list[bytes], token: str) -> None:
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/vnd.cyclonedx+json",
            "Content-Encoding": "gzip",
        }
        with httpx.Client(base_url=server, timeout=120, headers=headers) as client:
            for body in mine:
                code = client.post("/api/v1/reports", content=body).status_code
                with lock:
                    statuses[code] += 1

    started = time.perf_counter()
    with ThreadPoolExecutor(agents) as pool:
        list(pool.map(agent, chunks, tokens))
    seconds = time.perf_counter() - started
    return {
        "reports": len(bodies),
        "agents": agents,
        "seconds": round(seconds, 2),
        "reports_per_s": round(len(bodies) / seconds, 1),
        "statuses": dict(statuses),
    }


def core_writer(url: str, token_id: int) -> tuple[Callable[[Report, bytes], None], Any]:
    """Write one report's normalized rows with Core, one transaction per report."""
    engine = create_engine(url, pool_size=10, max_overflow=0)

    def write(report: Report, raw: bytes) -> None:
        now = report.timestamp
        spec = report.asset
        with engine.begin() as conn:
            asset_id = conn.execute(
                insert(Asset)
                .values(
                    kind=spec.kind,
                    identity=spec.identity,
                    name=spec.name,
                    labels=dict(spec.labels),
                    details=dict(spec.details),
                    first_seen=now,
                    last_seen=now,
                )
                .returning(Asset.id)
            ).scalar_one()
            scan_id = conn.execute(
                insert(Scan)
                .values(
                    asset_id=asset_id,
                    dedup_key=report.dedup_key,
                    serial_number=report.serial_number,
                    bom_version=report.bom_version,
                    content_sha256=report.content_sha256,
                    spec_version=report.spec_version,
                    producer=report.producer,
                    tool=report.tool,
                    scanned_at=now,
                    received_at=now,
                    library_count=len(report.libraries),
                    findings=[],
                    skipped=[],
                    token_id=token_id,
                )
                .returning(Scan.id)
            ).scalar_one()
            conn.execute(
                insert(RawBom),
                [
                    {
                        "scan_id": scan_id,
                        "media_type": "application/json",
                        "size": len(raw),
                        "gzip_data": gzip.compress(raw, 6),
                    }
                ],
            )
            conn.execute(
                insert(Package),
                [
                    {
                        "scan_id": scan_id,
                        "purl": p.purl,
                        "manager": p.manager,
                        "name": p.name,
                        "version": p.version,
                        "bom_ref": p.bom_ref,
                    }
                    for p in report.packages
                ],
            )
            conn.execute(
                insert(Artifact), artifact_rows(report, scan_id, asset_id, latest=True, active=None)
            )
            conn.execute(insert(AssetLibrary), summary_rows(asset_id, spec.kind, report))
            conn.execute(update(Asset).where(Asset.id == asset_id).values(latest_scan_id=scan_id))

    return write, engine


def run_baseline(url: str, bodies: list[bytes], agents: int) -> dict[str, Any]:
    db = Database(Settings(database_url=url))
    with db.transaction(write=True) as session:
        token_id = create_token(session, "bench", ["report:write"]).token.id
    db.dispose()
    parsed = [(parse_report(raw), raw) for raw in bodies]  # not timed: the same rows as ingest
    write, engine = core_writer(url, token_id)
    started = time.perf_counter()
    with ThreadPoolExecutor(agents) as pool:
        list(pool.map(lambda item: write(*item), parsed))
    seconds = time.perf_counter() - started
    engine.dispose()
    return {
        "reports": len(bodies),
        "threads": agents,
        "seconds": round(seconds, 2),
        "reports_per_s": round(len(bodies) / seconds, 1),
    }


def grow_fleet(url: str, start: int, total: int, rng: random.Random) -> dict[str, Any]:
    """Bulk-load assets (each with one current scan) until the fleet has `total` assets."""
    engine = create_engine(url)
    started = time.perf_counter()
    batch = 250
    for first in range(start, total, batch):
        reports = [
            parse_report(report_for(i, rng)) for i in range(first, min(first + batch, total))
        ]
        with engine.begin() as conn:
            asset_ids = (
                conn.execute(
                    insert(Asset).returning(Asset.id, sort_by_parameter_order=True),
                    [
                        {
                            "kind": r.asset.kind,
                            "identity": r.asset.identity,
                            "name": r.asset.name,
                            "labels": {"env": "prod" if j % 3 else "dev"},
                            "details": dict(r.asset.details),
                            "first_seen": r.timestamp,
                            "last_seen": r.timestamp,
                        }
                        for j, r in enumerate(reports)
                    ],
                )
                .scalars()
                .all()
            )
            scan_ids = (
                conn.execute(
                    insert(Scan).returning(Scan.id, sort_by_parameter_order=True),
                    [
                        {
                            "asset_id": a,
                            "dedup_key": r.dedup_key,
                            "serial_number": r.serial_number,
                            "bom_version": 1,
                            "content_sha256": r.content_sha256,
                            "spec_version": "1.6",
                            "producer": r.producer,
                            "tool": r.tool,
                            "scanned_at": r.timestamp,
                            "received_at": r.timestamp,
                            "library_count": len(r.libraries),
                            "findings": [],
                            "skipped": [],
                            "token_id": None,
                        }
                        for a, r in zip(asset_ids, reports, strict=True)
                    ],
                )
                .scalars()
                .all()
            )
            conn.execute(
                insert(Artifact),
                [
                    row
                    for a, s, r in zip(asset_ids, scan_ids, reports, strict=True)
                    for row in artifact_rows(r, s, a, latest=True, active=None)
                ],
            )
            conn.execute(
                insert(AssetLabel),
                [
                    {"asset_id": a, "key": "env", "value": "prod" if j % 3 else "dev"}
                    for j, a in enumerate(asset_ids)
                ],
            )

            conn.execute(
                insert(AssetLibrary),
                [
                    row
                    for a, r in zip(asset_ids, reports, strict=True)
                    for row in summary_rows(a, r.asset.kind, r)
                ],
            )
            for a, s in zip(asset_ids, scan_ids, strict=True):
                conn.execute(update(Asset).where(Asset.id == a).values(latest_scan_id=s))
    # the fleet-wide counts ingest keeps, from what the bulk load wrote
    with engine.begin() as conn:
        fleet.rebuild(conn)
    # what autovacuum does in a running system: statistics, and the visibility map that lets
    # the digest and summary indexes answer without reading the table
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
        counts = {
            t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
            for t in ("asset", "artifact", "asset_library")
        }
    engine.dispose()
    return {"seconds": round(time.perf_counter() - started, 1), **counts}


def time_queries(
    server: str, token: str, queries: int, digests: list[str], rng: random.Random
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    cases: dict[str, Callable[[], dict[str, str]]] = {
        "where_used_by_version": lambda: {
            "family": "cudnn",
            "version": rng.choice(CUDNN_VERSIONS[:-1]).rsplit(".", 1)[0],
        },
        "where_used_by_digest": lambda: {"sha256": rng.choice(digests)},
        "libraries_aggregate": lambda: {},
    }
    paths = {
        "where_used_by_version": "/api/v1/where-used",
        "where_used_by_digest": "/api/v1/where-used",
        "libraries_aggregate": "/api/v1/libraries",
    }
    results: dict[str, Any] = {}
    with httpx.Client(base_url=server, headers=headers, timeout=60) as client:
        for name, params in cases.items():
            for _ in range(10):  # warm-up
                client.get(paths[name], params=params()).raise_for_status()
            samples = []
            totals = []
            for _ in range(queries):
                t0 = time.perf_counter()
                answer = client.get(paths[name], params=params())
                samples.append(time.perf_counter() - t0)
                answer.raise_for_status()
                totals.append(answer.json()["total"])
            results[name] = {
                **percentiles(samples),
                "mean_total_matches": round(statistics.mean(totals)),
            }
    return results


COMPLIANCE_POLICY = """apiVersion: gpuprov.dev/v1
kind: PromotionPolicy
name: prod
rules:
  integrity: {}
  versions: {deny: {cudnn: ["9.0.*"]}, action: warn}
  cuda_pairing: {}
  mixed_cudnn: {}
  duplicates: {}
  scan_age: {max_hours: 24}
"""


def time_compliance(server: str, admin: str, token: str, queries: int) -> dict[str, Any]:
    """Store a policy (timed: it evaluates the whole fleet), then time the compliance reads."""
    with httpx.Client(base_url=server, timeout=3600) as client:
        t0 = time.perf_counter()
        stored = client.put(
            "/api/v1/policies/prod",
            content=COMPLIANCE_POLICY.encode(),
            headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/yaml"},
        )
        stored.raise_for_status()
        answered = time.perf_counter() - t0
        headers = {"Authorization": f"Bearer {token}"}
        # a large fleet is evaluated after the answer: wait until every asset is current
        while True:
            summary = client.get("/api/v1/compliance", params={"policy": "prod"}, headers=headers)
            assets = summary.raise_for_status().json()["assets"]
            if assets["outdated"] == assets["not_evaluated"] == 0:
                break
            time.sleep(0.5)
        results: dict[str, Any] = {
            "policy_store": {
                "answer_seconds": round(answered, 2),
                "pending": stored.json()["compliance_pending"],
                "all_current_seconds": round(time.perf_counter() - t0, 1),
                "assets_evaluated": assets["evaluated"],
            }
        }
        cases = {
            "compliance_all_frameworks": ("/api/v1/compliance", {"policy": "prod"}),
            "compliance_cis_v8": ("/api/v1/compliance", {"policy": "prod", "framework": "cis-v8"}),
            "compliance_drill_down": (
                "/api/v1/compliance/controls/CIS-2.6",
                {"policy": "prod", "limit": "50"},
            ),
        }
        for name, (path, params) in cases.items():
            for _ in range(10):  # warm-up
                client.get(path, params=params, headers=headers).raise_for_status()
            samples = []
            for _ in range(queries):
                t0 = time.perf_counter()
                client.get(path, params=params, headers=headers).raise_for_status()
                samples.append(time.perf_counter() - t0)
            results[name] = percentiles(samples)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--assets", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--pg-admin", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    args = parser.parse_args()
    rng = random.Random(7)

    databases = Databases(args.pg_admin, args.keep)
    process = None
    try:
        bodies = [report_for(i, rng) for i in range(args.reports)]
        gz_bodies = [gzip.compress(b, 6) for b in bodies]
        service_url = databases.create("svc")
        db = Database(Settings(database_url=service_url))
        with db.transaction(write=True) as session:
            writers = [
                create_token(session, f"agent-{i}", ["report:write"]).secret
                for i in range(args.agents)
            ]
            reader = create_token(session, "reader", ["inventory:read"]).secret
            admin = create_token(session, "admin", ["admin"]).secret
        db.dispose()
        port = 18000 + rng.randrange(1000)
        process = start_server(service_url, port, args.workers)
        server = f"http://127.0.0.1:{port}"
        ingest = run_agents(gz_bodies, server, writers)
        baseline = run_baseline(databases.create("core"), bodies, args.agents)
        fleet = grow_fleet(service_url, args.reports, args.assets, rng)
        digests = [
            boms.digest_of(c, v)
            for c in ("cudnn_graph", "cudart")
            for v in CUDNN_VERSIONS + CUDA_VERSIONS
        ]
        queries = time_queries(server, reader, args.queries, digests, rng)
        compliance = time_compliance(server, admin, reader, args.queries)
        dashboard = time_pages(
            server,
            reader,
            args.queries,
            rng,
            cudnn_versions=CUDNN_VERSIONS,
            digests=digests,
            file_names=["libcudnn_graph.so.9", "libcudart.so.12", "libcublasLt.so.12"],
        )
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
        databases.drop()
    ratio = ingest["reports_per_s"] / baseline["reports_per_s"]
    result = {
        "database": "postgresql",
        "workers": args.workers,
        "files_per_report": ENVS * 12,
        "ingest_http": ingest,
        "baseline_core": baseline,
        "ingest_vs_baseline": round(ratio, 2),
        "fleet": fleet,
        "queries": queries,
        "compliance": compliance,
        "dashboard": dashboard,
        "targets": {
            "ingest_at_least_half_of_baseline": ratio >= 0.5,
            "where_used_p95_at_most_50ms": all(
                queries[k]["p95_ms"] <= 50
                for k in ("where_used_by_version", "where_used_by_digest")
            ),
            "libraries_p95_at_most_200ms": queries["libraries_aggregate"]["p95_ms"] <= 200,
            "compliance_p95_at_most_200ms": all(
                compliance[k]["p95_ms"] <= 200
                for k in ("compliance_all_frameworks", "compliance_cis_v8")
            ),
            "dashboard_overview_p95_at_most_300ms": dashboard["overview"]["p95_ms"] <= 300,
            "dashboard_assets_and_where_used_p95_at_most_200ms": all(
                dashboard[k]["p95_ms"] <= 200
                for k in ("asset_list", "where_used_by_version", "where_used_by_digest")
            ),
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
