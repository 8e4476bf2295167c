"""Benchmark: import NVIDIA's shared bulletins (all 131, with their CVE Records and .sha256
files) into a fresh database, as `gpuprov advisories import DIR` does (goal: <= 10 s).

Prints JSON: per database (a new SQLite file; a new PostgreSQL database at 127.0.0.1:5432,
dropped afterwards) the first import's wall time (files read, digests checked, documents
parsed and stored one transaction each), the second import's (everything unchanged), and the
counts. ``--skip-postgres`` measures SQLite alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from app.cli_advisories import import_paths
from app.settings import Settings
from app.storage.migrate import upgrade
from app.storage.session import Database

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "nvidia-psirt"
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


def _measure(url: str, root: Path, max_bytes: int) -> dict[str, Any]:
    upgrade(url)
    db = Database(Settings(database_url=url))
    try:
        started = time.perf_counter()
        first = import_paths(db, [root], strict=False, max_bytes=max_bytes)
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        second = import_paths(db, [root], strict=False, max_bytes=max_bytes)
        second_s = time.perf_counter() - started
    finally:
        db.dispose()
    return {
        "first_import_s": round(first_s, 3),
        "reimport_unchanged_s": round(second_s, 3),
        "imported": first.imported,
        "unchanged_on_reimport": second.unchanged,
        "refused": len(first.refused),
        "digest_mismatches": len(first.digest_mismatches),
        "vulnerabilities": len(first.vulnerabilities),
        "unparsed_versions": len(first.unparsed_versions),
        "goal_s": 10,
        "within_goal": first_s <= 10,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=FIXTURES)
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    if not args.root.is_dir():
        sys.exit(f"error: {args.root} is not a directory (the shared nvidia-psirt fixtures)")
    files = sorted(args.root.rglob("*.json"))
    result: dict[str, Any] = {
        "root": str(args.root),
        "json_files": len(files),
        "json_bytes": sum(p.stat().st_size for p in files),
    }
    max_bytes = Settings().max_advisory_bytes
    with tempfile.TemporaryDirectory() as tmp:
        result["sqlite"] = _measure(f"sqlite:///{Path(tmp) / 'bench.db'}", args.root, max_bytes)
    if not args.skip_postgres:
        name = f"gpuprov_bench_adv_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
            try:
                url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
                result["postgresql"] = _measure(url, args.root, max_bytes)
            finally:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
