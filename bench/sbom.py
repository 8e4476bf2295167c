"""What the service's normalized SBOM costs (``GET /api/v1/assets/{id}/sbom?format=normalized``,
app/domain/inventory/sbom.py, built with cyclonedx-python-lib); prints JSON.

One report per size (a gpuprov image report of N GPU library files owned by ten wheels, through
``POST /api/v1/reports``) into a fresh SQLite database, then the normalized SBOM of that asset
through the in-process API, best and median of ``--repeat`` requests: ``fresh`` (each process's
kept documents dropped before every request: the library encodes the document) and ``kept`` (the
same content asked again), next to the original report's request (the same route, no
rebuilding) for scale.

    .venv/bin/python bench/sbom.py [--files 50 --files 500] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from app.domain.inventory import sbom  # noqa: E402
from app.domain.tokens import create_token  # noqa: E402
from app.main import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.migrate import upgrade  # noqa: E402
from tests.app import boms  # noqa: E402


def report(files: int) -> bytes:
    """A gpuprov report of ``files`` library files, owned by ten wheels in turn."""
    owners = [
        boms.Owner(f"pkg:pypi/nvidia-lib{i}-cu12@12.{i}.0", f"nvidia-lib{i}-cu12", f"12.{i}.0")
        for i in range(10)
    ]
    for n in range(files):
        owner = owners[n % len(owners)]
        owner.libs.append(
            boms.Lib(
                path=f"{boms.SITE}/lib{n % 10}/lib/libcublas_{n}.so.12",
                family="cublas",
                component="cublas",
                version=owner.version,
                owner_purl=owner.purl,
                notes=("bench",),
            )
        )
    name = f"registry.example.com/ml/bench-{files}:1"
    serial = uuid.uuid5(uuid.NAMESPACE_URL, name).urn  # the same document on every run
    return boms.encode(boms.gpuprov_bom(name=name, owners=owners, serial=serial))


def timed(call: Any, repeat: int, before: Any = None) -> dict[str, float]:
    seconds = []
    for _ in range(repeat):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return {"best_s": round(min(seconds), 4), "median_s": round(statistics.median(seconds), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, action="append", help="files per report (repeatable)")
    parser.add_argument("--repeat", type=int, default=5, help="requests per figure")
    args = parser.parse_args()
    sizes = args.files or [50, 500]
    results: dict[str, Any] = {"load_average": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        upgrade(url)
        app = create_app(Settings(database_url=url, environment="test"))
        with TestClient(app) as client:
            with app.state.db.transaction(write=True) as session:
                writer = create_token(session, "w", ["report:write"], None).secret
                reader = create_token(session, "r", ["inventory:read"], None).secret
            for files in sizes:
                posted = client.post(
                    "/api/v1/reports",
                    content=report(files),
                    headers={
                        "Authorization": f"Bearer {writer}",
                        "Content-Type": "application/vnd.cyclonedx+json",
                    },
                )
                posted.raise_for_status()
                asset = posted.json()["asset_id"]
                headers = {"Authorization": f"Bearer {reader}"}

                def get(fmt: str, asset: int = asset, headers: dict[str, str] = headers) -> None:
                    answer = client.get(
                        f"/api/v1/assets/{asset}/sbom", params={"format": fmt}, headers=headers
                    )
                    answer.raise_for_status()

                get("normalized")
                results[f"files_{files}"] = {
                    "normalized_fresh": timed(
                        lambda: get("normalized"), args.repeat, before=sbom.KEPT.clear
                    ),
                    "normalized_kept": timed(lambda: get("normalized"), args.repeat),
                    "original": timed(lambda: get("original"), args.repeat),
                }
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    results["target_normalized_500_s"] = 0.2
    results["hand_built_500_s_before_issue_8"] = 0.08
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
