"""Prometheus metrics of one service process (prometheus-client), exposed at ``/metrics`` with
the fleet totals read from the database at scrape time.

Each app has its own registry (tests build many apps in one process). With several worker
processes (``gpuprov serve --workers N``) each process counts its own requests: set
``PROMETHEUS_MULTIPROC_DIR`` to an empty directory writable by the workers (emptied before the
service starts) and every scrape, whichever worker answers it, reports the sum over the workers
(prometheus-client's multi-process mode). Without it, a scrape shows the answering worker's
counts only.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

#: seconds: requests are mostly milliseconds; a large report's ingest takes seconds
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_SIZE_BUCKETS = tuple(float(4**n * 1024) for n in range(1, 10))  # 4 KiB .. 256 MiB


def multiprocess_dir() -> str | None:
    """The directory of prometheus-client's multi-process mode, when it is on."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir")


class Metrics:
    """The metrics the service's code updates."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Histogram(
            "gpuprov_http_request_duration_seconds",
            "HTTP requests answered, by method, route template and status, and their latency "
            "(499: the client left before sending its whole body).",
            ["method", "route", "status"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.reports = Counter(
            "gpuprov_reports_received",
            "Reports this process answered, by outcome (created, duplicate, refused).",
            ["outcome"],
            registry=r,
        )
        self.ingest_seconds = Histogram(
            "gpuprov_ingest_duration_seconds",
            "Time to ingest one stored report (parse, store, verdicts), successful ingests.",
            buckets=_BUCKETS,
            registry=r,
        )
        self.report_bytes = Histogram(
            "gpuprov_report_bytes",
            "Decompressed size of ingested reports.",
            buckets=_SIZE_BUCKETS,
            registry=r,
        )
        self.ingests_in_flight = Gauge(
            "gpuprov_ingests_in_flight",
            "Reports, gate BOMs and catalogs being taken in now (at most "
            "GPUPROV_MAX_CONCURRENT_INGESTS per process; one more answers 503).",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.ingest_rejected_busy = Counter(
            "gpuprov_ingests_refused_busy",
            "Ingests answered 503 because every ingest slot of the process was taken.",
            registry=r,
        )
        self.ingest_rejected_share = Counter(
            "gpuprov_ingests_refused_token_share",
            "Ingests answered 503 because their token already held its share of the process's "
            "ingest slots (GPUPROV_MAX_CONCURRENT_INGESTS_PER_TOKEN).",
            registry=r,
        )
        self.gate_decisions = Counter(
            "gpuprov_gate_decisions",
            "Gate decisions this process made, by decision (allow, warn, deny).",
            ["decision"],
            registry=r,
        )
        self.verification_failures = Counter(
            "gpuprov_verification_failures",
            "Verification failures, by kind: catalog (a catalog import whose signature or "
            "signer is not trusted), and in new reports file_integrity (bytes differ from the "
            "package's record), file_provenance (a signed catalog contradicts the file), "
            "image_signature (a rejected image signature).",
            ["kind"],
            registry=r,
        )
        self.stored_document_mismatches = Counter(
            "gpuprov_stored_document_mismatches",
            "Requests refused because a stored document no longer hashes to its recorded "
            "digest (changed behind the service's back), by document (policy, trust_policy, "
            "catalog).",
            ["document"],
            registry=r,
        )
        self.auth_failures = Counter(
            "gpuprov_auth_failures",
            "Requests refused for their bearer token, by reason (invalid, revoked, expired, "
            "scope, asset, rate_limited).",
            ["reason"],
            registry=r,
        )

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered HTTP request."""
        self.requests.labels(method, route, str(status)).observe(seconds)

    def exposition(self) -> bytes:
        """This process's metrics (or every worker's, in multi-process mode) as Prometheus text."""
        directory = multiprocess_dir()
        if directory is None:
            return generate_latest(self.registry)
        combined = CollectorRegistry()
        MultiProcessCollector(combined, path=directory)  # type: ignore[no-untyped-call]
        return generate_latest(combined)
