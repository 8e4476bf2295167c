"""Dashboard page timings for `bench/ingest.py`: a browser's session (the login form, its CSRF
token and cookie, as a person logs in), then each page fetched end to end over HTTP, the HTML
rendered by the service, p50/p95 over ``queries`` requests after a warm-up."""

from __future__ import annotations

import random
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def login(server: str, token: str) -> httpx.Client:
    """A client holding a dashboard session for ``token`` (the login form, then its POST)."""
    client = httpx.Client(base_url=server, timeout=60)
    form = client.get("/login")
    form.raise_for_status()
    found = _CSRF.search(form.text)
    assert found, "the login form carries no csrf_token"
    answer = client.post("/login", data={"token": token, "csrf_token": found.group(1)})
    assert answer.status_code == 303, answer.text
    return client


def _percentiles(samples: list[float]) -> dict[str, float]:
    # as bench/ingest.py's percentiles
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 2),
        "n": len(ordered),
    }


def time_pages(
    server: str,
    token: str,
    queries: int,
    rng: random.Random,
    *,
    cudnn_versions: list[str],
    digests: list[str],
    file_names: list[str],
) -> dict[str, Any]:
    """p50/p95 of each dashboard page (the overview, the asset list, where-used, file search,
    libraries, drift, compliance)."""
    cases: dict[str, Callable[[], str]] = {
        "overview": lambda: "/",
        "asset_list": lambda: "/assets",
        "asset_list_filtered": lambda: (
            "/assets?family=cudnn&version=" + rng.choice(cudnn_versions).rsplit(".", 1)[0]
        ),
        "where_used_by_version": lambda: (
            "/libraries/where-used?family=cudnn&version="
            + rng.choice(cudnn_versions).rsplit(".", 1)[0]
        ),
        "where_used_by_digest": lambda: "/libraries/where-used?sha256=" + rng.choice(digests),
        "search_by_file_name": lambda: "/libraries/search?q=" + rng.choice(file_names),
        "libraries": lambda: "/libraries",
        "drift_conflicts": lambda: "/drift",
        "drift_changes": lambda: "/drift/changes",
        "drift_parity": lambda: "/drift/parity?label=env&target=prod&baseline=dev",
        "compliance": lambda: "/compliance?policy=prod",
    }
    results: dict[str, Any] = {}
    client = login(server, token)
    try:
        for name, path in cases.items():
            for _ in range(5):  # warm-up
                client.get(path()).raise_for_status()
            samples = []
            for _ in range(queries):
                t0 = time.perf_counter()
                answer = client.get(path())
                samples.append(time.perf_counter() - t0)
                answer.raise_for_status()
            results[name] = _percentiles(samples)
    finally:
        client.close()
    return results
