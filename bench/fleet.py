"""Fleet-scale benchmark on PostgreSQL (issue 12 §5); prints JSON.

1. A private database (uniquely named, dropped at the end) on the PostgreSQL server gets ASSETS
   assets (images and hosts, 60 GPU library files each, bench/ingest.py's reports), seeded in
   bulk: each asset's identity and details as its report gives them, one scan, its raw BOM,
   packages, files and summary rows written with the ingest path's own COPY
   (`app.storage.repositories.scans._bulk_insert`). The library rows come from a pool of
   parsed reports (parsing 20,000 reports alone would take minutes).
2. The compliance policy of bench/ingest.py is stored; timed until every asset is evaluated.
3. For each API process count (`--processes 1,2,4`): `gpuprov serve --workers N` on loopback;
   `--agents` concurrent clients post `--reports` real gzip CycloneDX reports of fleet assets
   (new scans of existing assets: the steady state), then p50/p95 over HTTP of where-used, the
   libraries aggregate, drift, compliance, gate by image digest (`POST /api/v1/gate`) and the
   dashboard (logged in through `/login`): overview, asset list, where-used.
4. Database size per 1,000 scans (bench/retention.py's `sizes`), before and after
   `gpuprov db prune --keep-scans 1` (the real command) and `VACUUM`.

The machine's load average and CPU count are recorded with every phase.

    .venv/bin/python bench/fleet.py [--assets 20000] [--processes 1,2,4] [--reports 400]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import Connection

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.domain.ingest import artifact_rows, summary_rows  # noqa: E402
from app.domain.report_parser import Report, parse_report  # noqa: E402
from app.domain.tokens import create_token  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.migrate import upgrade  # noqa: E402
from app.storage.repositories import fleet  # noqa: E402
from app.storage.repositories.scans import _bulk_insert  # noqa: E402
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
from bench import cpu  # noqa: E402
from bench.dashboard_pages import login  # noqa: E402
from bench.ingest import (  # noqa: E402
    COMPLIANCE_POLICY,
    CUDNN_VERSIONS,
    Databases,
    percentiles,
    report_for,
    run_agents,
)
from bench.retention import sizes  # noqa: E402
from tests.app import boms  # noqa: E402

TEMPLATES = 200  # parsed reports whose library rows the seeded assets share
BATCH = 1000


def machine() -> dict[str, Any]:
    """Load average (1, 5, 15 min) and CPU count, recorded beside each figure."""
    return {"load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}


def asset_name(i: int) -> tuple[str, str]:
    """Kind and name of fleet asset i, as `report_for(i, ...)` names it."""
    if i % 2:
        return "host", f"gpu-node-{i:05d}"
    return "image", f"registry.example.com/team{i % 17}/app{i}:1"


def image_digest(i: int) -> str:
    return "sha256:" + boms.digest_of("manifest", asset_name(i)[1])


def asset_spec(i: int) -> tuple[str, str, str, dict[str, str]]:
    """(kind, identity, name, details) of asset i: what parsing its report gives."""
    kind, name = asset_name(i)
    if kind == "image":
        digest = image_digest(i)
        return kind, digest, name, {"reference": name, "digest": digest, "platform": "linux/amd64"}
    machine_id = boms.digest_of("machine", name)[:32]
    return kind, machine_id, name, {"hostname": name, "machine_id": machine_id}


def new_scan(i: int, rng: random.Random) -> bytes:
    """A new scan of fleet asset i, dated now: it becomes the asset's latest (current state,
    the summary and the fleet counts change), as an agent's next report does. The reports'
    own date is older than the seeded scans (they then only joined the history)."""
    bom = json.loads(report_for(i, rng))
    bom["metadata"]["timestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(bom, separators=(",", ":")).encode()


def _seed_batch(
    conn: Connection,
    first: int,
    last: int,
    templates: list[tuple[Report, bytes, int]],
    now: datetime,
) -> None:
    indices = range(first, last)
    specs = [asset_spec(i) for i in indices]
    envs = ["prod" if i % 3 else "dev" for i in indices]
    asset_ids = (
        conn.execute(
            insert(Asset).returning(Asset.id, sort_by_parameter_order=True),
            [
                {
                    "kind": kind,
                    "identity": identity,
                    "name": name,
                    "labels": {"env": env},
                    "details": details,
                    "first_seen": now,
                    "last_seen": now,
                }
                for (kind, identity, name, details), env in zip(specs, envs, strict=True)
            ],
        )
        .scalars()
        .all()
    )
    picked = [templates[i % len(templates)] for i in indices]
    scan_ids = (
        conn.execute(
            insert(Scan).returning(Scan.id, sort_by_parameter_order=True),
            [
                {
                    "asset_id": a,
                    "dedup_key": f"urn:uuid:{uuid.uuid4()}#v1",
                    "serial_number": f"urn:uuid:{uuid.uuid4()}",
                    "bom_version": 1,
                    "content_sha256": r.content_sha256,
                    "spec_version": r.spec_version,
                    "producer": r.producer,
                    "tool": r.tool,
                    "scanned_at": now,
                    "received_at": now,
                    "library_count": len(r.libraries),
                    "findings": list(r.findings),
                    "skipped": list(r.skipped),
                    "token_id": None,
                }
                for a, (r, _, _) in zip(asset_ids, picked, strict=True)
            ],
        )
        .scalars()
        .all()
    )
    rows = list(zip(asset_ids, scan_ids, picked, strict=True))
    conn.execute(
        insert(RawBom),
        [
            {
                "scan_id": s,
                "media_type": "application/vnd.cyclonedx+json",
                "size": size,
                "gzip_data": gz,
            }
            for _, s, (_, gz, size) in rows
        ],
    )
    _bulk_insert(
        conn,
        insert(Package),
        [
            {
                "scan_id": s,
                "purl": p.purl,
                "manager": p.manager,
                "name": p.name,
                "version": p.version,
                "bom_ref": p.bom_ref,
            }
            for _, s, (r, _, _) in rows
            for p in r.packages
        ],
    )
    _bulk_insert(
        conn,
        insert(Artifact),
        [row for a, s, (r, _, _) in rows for row in artifact_rows(r, s, a, True, None)],
    )
    _bulk_insert(
        conn,
        insert(AssetLibrary),
        [
            row
            for (a, _, (r, _, _)), spec in zip(rows, specs, strict=True)
            for row in summary_rows(a, spec[0], r)
        ],
    )
    conn.execute(
        insert(AssetLabel),
        [
            {"asset_id": a, "key": "env", "value": env}
            for a, env in zip(asset_ids, envs, strict=True)
        ],
    )
    conn.execute(
        text(
            "UPDATE asset SET latest_scan_id = v.s, latest_scanned_at = :now "
            "FROM unnest(CAST(:a AS bigint[]), CAST(:s AS bigint[])) AS v(a, s) "
            "WHERE asset.id = v.a"
        ),
        {"a": list(asset_ids), "s": list(scan_ids), "now": now},
    )


def seed(url: str, assets: int) -> dict[str, Any]:
    """ASSETS assets, each with one current scan, in batches of 1,000."""
    rng = random.Random(3)
    started = time.perf_counter()
    templates = []
    for i in range(min(TEMPLATES, assets)):
        body = report_for(i, rng)
        templates.append((parse_report(body), gzip.compress(body, 6), len(body)))
    now = datetime.now(UTC) - timedelta(hours=1)
    engine = create_engine(url)
    try:
        for first in range(0, assets, BATCH):
            with engine.begin() as conn:
                _seed_batch(conn, first, min(first + BATCH, assets), templates, now)
        # the fleet-wide counts ingest keeps, from what the bulk load wrote
        with engine.begin() as conn:
            fleet.rebuild(conn)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
            counts = {
                t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in ("asset", "scan", "artifact", "asset_library")
            }
    finally:
        engine.dispose()
    return {"seconds": round(time.perf_counter() - started, 1), **counts, **machine()}


def store_policy(server: str, admin: str, reader: str) -> dict[str, Any]:
    """Store the compliance policy; timed until every asset is evaluated under it."""
    started = time.perf_counter()
    with httpx.Client(base_url=server, timeout=3600) as client:
        client.put(
            "/api/v1/policies/prod",
            content=COMPLIANCE_POLICY.encode(),
            headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/yaml"},
        ).raise_for_status()
        while True:
            summary = client.get(
                "/api/v1/compliance",
                params={"policy": "prod"},
                headers={"Authorization": f"Bearer {reader}"},
            )
            assets = summary.raise_for_status().json()["assets"]
            if assets["outdated"] == assets["not_evaluated"] == 0:
                break
            time.sleep(1)
    return {
        "all_current_seconds": round(time.perf_counter() - started, 1),
        "assets_evaluated": assets["evaluated"],
        **machine(),
    }


def _timed(
    client: httpx.Client, queries: int, request: Callable[[], httpx.Response]
) -> dict[str, Any]:
    for _ in range(5):  # warm-up
        request().raise_for_status()
    before = machine()
    samples = []
    for _ in range(queries):
        t0 = time.perf_counter()
        answer = request()
        samples.append(time.perf_counter() - t0)
        answer.raise_for_status()
    # the 1-minute load average when the timing started and ended
    return {**percentiles(samples), "load_1min": [before["load_average"][0], os.getloadavg()[0]]}


def time_reads(
    server: str, tokens: dict[str, str], queries: int, assets: int, rng: random.Random
) -> dict[str, Any]:
    """p50/p95 of the fleet reads over HTTP (API and dashboard)."""
    digests = [boms.digest_of(c, v) for c in ("cudnn_graph", "cudart") for v in CUDNN_VERSIONS]
    images = [image_digest(i) for i in range(0, assets, 2)]

    def version() -> str:
        return rng.choice(CUDNN_VERSIONS[:-1]).rsplit(".", 1)[0]

    results: dict[str, Any] = {}
    api = httpx.Client(
        base_url=server, timeout=60, headers={"Authorization": f"Bearer {tokens['reader']}"}
    )
    gate = httpx.Client(
        base_url=server, timeout=60, headers={"Authorization": f"Bearer {tokens['gate']}"}
    )
    page = login(server, tokens["reader"])
    try:
        cases: dict[str, tuple[httpx.Client, Callable[[], httpx.Response]]] = {
            "where_used_by_version": (
                api,
                lambda: api.get(
                    "/api/v1/where-used", params={"family": "cudnn", "version": version()}
                ),
            ),
            "where_used_by_digest": (
                api,
                lambda: api.get("/api/v1/where-used", params={"sha256": rng.choice(digests)}),
            ),
            "libraries": (api, lambda: api.get("/api/v1/libraries")),
            "drift": (api, lambda: api.get("/api/v1/drift")),
            "drift_cudnn": (api, lambda: api.get("/api/v1/drift", params={"family": "cudnn"})),
            "compliance": (api, lambda: api.get("/api/v1/compliance", params={"policy": "prod"})),
            "gate_by_digest": (
                gate,
                lambda: gate.post(
                    "/api/v1/gate", json={"policy": "prod", "image": rng.choice(images)}
                ),
            ),
            "dashboard_overview": (page, lambda: page.get("/")),
            "dashboard_asset_list": (page, lambda: page.get("/assets")),
            "dashboard_where_used": (
                page,
                lambda: page.get(f"/libraries/where-used?family=cudnn&version={version()}"),
            ),
        }
        for name, (client, request) in cases.items():
            results[name] = _timed(client, queries, request)
    finally:
        for c in (api, gate, page):
            c.close()
    return results


def start_server(url: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    """`gpuprov serve --workers N` on loopback, ready (a loaded machine may take minutes)."""
    env = {
        **os.environ,
        "GPUPROV_DATABASE_URL": url,
        "GPUPROV_DATABASE_POOL_SIZE": "10",
        # one key for every worker: a dashboard session must hold whichever worker answers
        "GPUPROV_SECRET_KEY": uuid.uuid4().hex,
        # the overview's figures are cached per worker; 0 times the computation every viewer
        # after the cache expires waits for (the product's default is 30 s)
        "GPUPROV_DASHBOARD_CACHE_SECONDS": os.environ.get("GPUPROV_DASHBOARD_CACHE_SECONDS", "0"),
    }
    command = [sys.executable, "-c", "from gpuprov.cli import main; main()", "serve"]
    command += ["--port", str(port), "--workers", str(workers), "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    process.kill()
    raise RuntimeError("the service did not become ready")


@contextmanager
def serving(url: str, workers: int, port: int) -> Iterator[str]:
    process = start_server(url, port, workers)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=60)


def history_sizes(url: str, dsn: str) -> dict[str, Any]:
    """Sizes per 1,000 scans before and after `gpuprov db prune --keep-scans 1`."""
    before = sizes(dsn, vacuum="VACUUM ANALYZE")
    started = time.perf_counter()
    pruned = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gpuprov.cli import main; main()",
            "db",
            "prune",
            "--keep-scans",
            "1",
            "--database-url",
            url,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - started
    return {
        "before": before,
        "prune": {
            "seconds": round(seconds, 1),
            "output": (pruned.stdout + pruned.stderr).strip()[-400:],
            **machine(),
        },
        "after_prune_vacuum": sizes(dsn, vacuum="VACUUM ANALYZE"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=20_000, help="fleet size")
    parser.add_argument("--processes", default="1,2,4", help="API process counts, comma-separated")
    parser.add_argument("--reports", type=int, default=400, help="reports posted per process count")
    parser.add_argument("--agents", type=int, default=8, help="concurrent posting clients")
    parser.add_argument("--queries", type=int, default=100, help="timed requests per read")
    parser.add_argument(
        "--pg-admin", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--database",
        help="reuse this database of an earlier --keep run (seeded, policy stored): skip both; "
        "it is migrated to the head and dropped at the end unless --keep",
    )
    args = parser.parse_args()
    processes = [int(p) for p in args.processes.split(",")]
    rng = random.Random(7)
    out: dict[str, Any] = {
        "database": "postgresql",
        "assets": args.assets,
        "files_per_asset": 60,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine_at_start": machine(),
    }
    databases = Databases(args.pg_admin, args.keep)
    try:
        if args.database:
            databases.names.append(args.database)
            url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{args.database}"
            upgrade(url)
        else:
            url = databases.create("fleet")
        out["database_name"] = url.rsplit("/", 1)[1]
        db = Database(Settings(database_url=url))
        with db.transaction(write=True) as session:
            tokens = {
                "reader": create_token(session, "reader", ["inventory:read"]).secret,
                "admin": create_token(session, "admin", ["admin"]).secret,
                "gate": create_token(session, "gate", ["gate"]).secret,
            }
            writers = [
                create_token(session, f"agent-{i}", ["report:write"]).secret
                for i in range(args.agents)
            ]
        db.dispose()
        if not args.database:
            out["seed"] = seed(url, args.assets)
        port = 19000 + random.randrange(1000)
        runs: dict[str, Any] = {}
        offset = 0
        for n, workers in enumerate(processes):
            with serving(url, workers, port + n) as server:
                if n == 0 and not args.database:
                    out["policy_store"] = store_policy(server, tokens["admin"], tokens["reader"])
                # new scans of existing fleet assets, distinct per run
                indices = [(offset + k * 7) % args.assets for k in range(args.reports)]
                offset += 1
                bodies = [gzip.compress(new_scan(i, rng), 6) for i in indices]
                before = machine()
                counters = cpu.snapshot()
                ingest = run_agents(bodies, server, writers)
                ingest["cpu"] = cpu.usage(counters, cpu.snapshot(), ingest["seconds"])
                ingest["load_average_before"] = before["load_average"]
                ingest["load_average_after"] = machine()["load_average"]
                runs[str(workers)] = {
                    "ingest": ingest,
                    "reads": time_reads(server, tokens, args.queries, args.assets, rng),
                }
        out["processes"] = runs
        if len(processes) > 1 and "1" in runs and "2" in runs:
            out["ingest_scaling_1_to_2"] = round(
                runs["2"]["ingest"]["reports_per_s"] / runs["1"]["ingest"]["reports_per_s"], 2
            )
        out["targets"] = targets(runs, args.assets)
        name = url.rsplit("/", 1)[1]
        out["history"] = history_sizes(url, f"host=127.0.0.1 port=5432 user=postgres dbname={name}")
        with psycopg_connect(url) as conn:
            out["assets_after"] = conn.execute(text("SELECT count(*) FROM asset")).scalar_one()
    finally:
        databases.drop()
    out["machine_at_end"] = machine()
    print(json.dumps(out, indent=2))


API_READS = (
    "where_used_by_version",
    "where_used_by_digest",
    "libraries",
    "drift",
    "drift_cudnn",
    "gate_by_digest",
)


def targets(runs: dict[str, Any], assets: int) -> dict[str, Any]:
    """The issues' targets per process count (the compliance and dashboard ones are set at
    10,000 assets, the query one at 20,000)."""
    out: dict[str, Any] = {"at_assets": assets}
    for workers, run in runs.items():
        reads = run["reads"]
        out[f"{workers}p_every_query_p95_at_most_100ms"] = all(
            reads[k]["p95_ms"] <= 100 for k in (*API_READS, "compliance")
        )
        out[f"{workers}p_compliance_p95_at_most_200ms"] = reads["compliance"]["p95_ms"] <= 200
        out[f"{workers}p_overview_p95_at_most_300ms"] = reads["dashboard_overview"]["p95_ms"] <= 300
        out[f"{workers}p_asset_list_and_where_used_pages_p95_at_most_200ms"] = all(
            reads[k]["p95_ms"] <= 200 for k in ("dashboard_asset_list", "dashboard_where_used")
        )
    if "1" in runs and "2" in runs:
        ratio = runs["2"]["ingest"]["reports_per_s"] / runs["1"]["ingest"]["reports_per_s"]
        out["ingest_scales_1_6x_from_1_to_2"] = ratio >= 1.6
    return out


@contextmanager
def psycopg_connect(url: str) -> Iterator[Connection]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
