"""Delivery of reports to the gpuprov service: gzip, bearer token, spool, exactly once.

A report that cannot be delivered now (service unreachable, 5xx, 429) is written to a spool
directory and delivered by a later push; the service stores a report once however often it
arrives (its serial number and content digest are the idempotency key), so a retry after a lost
answer never duplicates it. A report the service refuses (another 4xx) is moved aside to
``rejected/`` with the reason, so one bad report never blocks the queue.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import json
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from scanner.errors import ScannerError, UsageError

ENV_SERVER = "GPUPROV_SERVER"
ENV_TOKEN = "GPUPROV_TOKEN"
ENV_SPOOL = "GPUPROV_SPOOL"
REPORTS_PATH = "/api/v1/reports"
MEDIA_TYPE = "application/vnd.cyclonedx+json"
_SUFFIX = ".cdx.json.gz"


class DeliveryError(ScannerError):
    """A report could not be delivered."""


class Rejected(DeliveryError):
    """The service refused the report for good (a 4xx other than 429)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"the service refused the report ({status}): {message}")
        self.status = status
        self.reason = message


class Unavailable(DeliveryError):
    """The service cannot take the report now; try again later."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def default_spool_dir() -> Path:
    """``$GPUPROV_SPOOL``, else ``$XDG_DATA_HOME/gpuprov/spool`` (``~/.local/share/...``)."""
    explicit = os.environ.get(ENV_SPOOL)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local/share")
    return Path(base) / "gpuprov" / "spool"


@dataclass(frozen=True, slots=True)
class Target:
    """Where and as whom reports are delivered."""

    server: str
    token: str
    timeout: float = 30.0

    @classmethod
    def resolve(cls, server: str | None = None, token_file: Path | None = None) -> Target:
        """From options, else ``GPUPROV_SERVER`` / ``GPUPROV_TOKEN``; raises UsageError."""
        server = server or os.environ.get(ENV_SERVER)
        if not server:
            raise UsageError(f"no service address: pass --server URL or set {ENV_SERVER}")
        if not server.startswith(("http://", "https://")):
            raise UsageError(f"the service address must be an http(s) URL, not {server!r}")
        if token_file is not None:
            try:
                token = token_file.read_text().strip()
            except OSError as e:
                raise UsageError(f"cannot read the token file {token_file}: {e.strerror}") from e
        else:
            token = os.environ.get(ENV_TOKEN, "").strip()
        if not token:
            raise UsageError(f"no API token: pass --token-file FILE or set {ENV_TOKEN}")
        return cls(server.rstrip("/"), token)


@dataclass(frozen=True, slots=True)
class Delivered:
    """The service's answer to a delivered report."""

    scan_id: int
    asset_id: int
    created: bool  # False: the service already had it
    asset_url: str


def check_report(data: bytes) -> None:
    """Refuse, before sending or spooling, something that is not a CycloneDX JSON report."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise UsageError(f"the report is not JSON: {e}") from e
    if not isinstance(document, dict) or document.get("bomFormat") != "CycloneDX":
        raise UsageError("the report is not a CycloneDX BOM (bomFormat 'CycloneDX' is missing)")


class Client:
    """Sends reports to the service's ingest endpoint."""

    def __init__(self, target: Target, transport: httpx.BaseTransport | None = None) -> None:
        self.target = target
        self._http = httpx.Client(
            base_url=target.server,
            timeout=target.timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {target.token}", "User-Agent": "gpuprov-agent"},
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def send(self, report: bytes, labels: Mapping[str, str] | None = None) -> Delivered:
        """Deliver one report; raises `Rejected` or `Unavailable`."""
        params: list[tuple[str, str | int | float | bool | None]] = [
            ("label", f"{k}={v}") for k, v in sorted((labels or {}).items())
        ]
        try:
            answer = self._http.post(
                REPORTS_PATH,
                content=gzip.compress(report, compresslevel=6),
                params=params,
                headers={"Content-Type": MEDIA_TYPE, "Content-Encoding": "gzip"},
            )
        except httpx.HTTPError as e:
            raise Unavailable(f"cannot reach {self.target.server}: {e}") from e
        if answer.status_code in (200, 201):
            body = answer.json()
            return Delivered(
                int(body["scan_id"]),
                int(body["asset_id"]),
                answer.status_code == 201,
                str(body.get("asset_url", "")),
            )
        message = _error_message(answer)
        if answer.status_code == 429 or answer.status_code >= 500:
            raise Unavailable(
                f"the service answered {answer.status_code}: {message}",
                _retry_after(answer.headers.get("Retry-After")),
            )
        raise Rejected(answer.status_code, message)


def _error_message(answer: httpx.Response) -> str:
    try:
        error = answer.json()["error"]
        details = "; ".join(f"{d['pointer']}: {d['message']}" for d in error.get("details", []))
        return str(error["message"]) + (f" ({details})" if details else "")
    except (ValueError, KeyError, TypeError):
        return answer.text[:300] or answer.reason_phrase


def _retry_after(value: str | None) -> float | None:
    if value and value.strip().isdigit():
        return float(value.strip())
    return None


@dataclass(frozen=True, slots=True)
class SpoolEntry:
    """One spooled report: the gzip file and its labels."""

    path: Path
    labels: Mapping[str, str]

    @property
    def meta_path(self) -> Path:
        return self.path.with_name(self.path.name.removesuffix(_SUFFIX) + ".meta.json")

    def read(self) -> bytes:
        """The report's bytes."""
        return gzip.decompress(self.path.read_bytes())


class Spool:
    """A directory of reports waiting for delivery, oldest first."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _ensure(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def add(self, report: bytes, labels: Mapping[str, str] | None = None) -> SpoolEntry:
        """Spool a report (once: the same bytes spooled twice are kept once)."""
        self._ensure()
        digest = hashlib.sha256(report).hexdigest()[:32]
        for entry in self.entries():
            if entry.path.name.endswith(f"-{digest}{_SUFFIX}"):
                return entry
        stem = f"{time.time_ns():020d}-{digest}"
        entry = SpoolEntry(self.directory / f"{stem}{_SUFFIX}", dict(labels or {}))
        # meta first, report last: a report file exists only once its labels are on disk
        _write_atomic(entry.meta_path, json.dumps({"labels": entry.labels}).encode())
        _write_atomic(entry.path, gzip.compress(report, compresslevel=6))
        return entry

    def entries(self) -> list[SpoolEntry]:
        """Spooled reports, oldest first."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in sorted(self.directory.glob(f"*{_SUFFIX}")):
            meta = path.with_name(path.name.removesuffix(_SUFFIX) + ".meta.json")
            try:
                labels = json.loads(meta.read_text()).get("labels", {})
            except (OSError, ValueError):
                labels = {}
            found.append(SpoolEntry(path, labels))
        return found

    def remove(self, entry: SpoolEntry) -> None:
        """Forget a delivered report."""
        entry.path.unlink(missing_ok=True)
        entry.meta_path.unlink(missing_ok=True)

    def reject(self, entry: SpoolEntry, reason: str) -> Path:
        """Move a refused report to ``rejected/`` with the reason beside it."""
        rejected = self.directory / "rejected"
        rejected.mkdir(exist_ok=True, mode=0o700)
        target = rejected / entry.path.name
        os.replace(entry.path, target)
        entry.meta_path.unlink(missing_ok=True)
        _write_atomic(target.with_name(target.name + ".reason.txt"), reason.encode())
        return target

    @contextlib.contextmanager
    def lock(self) -> Iterator[bool]:
        """Hold the spool for one flush; yields False when another process holds it."""
        self._ensure()
        with open(self.directory / ".lock", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry schedule: ``attempts`` tries, waits doubling from ``initial`` up to ``maximum``
    (a Retry-After from the service wins), with jitter so agents do not retry in step."""

    attempts: int = 3
    initial: float = 1.0
    maximum: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def delays(self) -> Iterator[float]:
        """The waits between attempts."""
        delay = self.initial
        for _ in range(self.attempts - 1):
            yield min(delay, self.maximum) * random.uniform(0.8, 1.2)
            delay *= 2


def send_with_backoff(
    client: Client, report: bytes, labels: Mapping[str, str], backoff: Backoff
) -> Delivered:
    """Send, retrying while the service is unavailable; raises the last `Unavailable`."""
    delays = backoff.delays()
    while True:
        try:
            return client.send(report, labels)
        except Unavailable as e:
            delay = next(delays, None)
            if delay is None:
                raise
            if e.retry_after is not None:
                delay = min(max(delay, e.retry_after), backoff.maximum)
            backoff.sleep(delay)


@dataclass
class FlushResult:
    """What a flush of the spool did."""

    delivered: list[Delivered] = field(default_factory=list)
    rejected: list[tuple[Path, str]] = field(default_factory=list)
    remaining: int = 0
    error: str | None = None  # why delivery stopped, when it did
    busy: bool = False  # another process was flushing


def flush(spool: Spool, client: Client, backoff: Backoff | None = None) -> FlushResult:
    """Deliver spooled reports oldest first; stop at the first that cannot be delivered now."""
    backoff = backoff or Backoff()
    result = FlushResult()
    with spool.lock() as held:
        if not held:
            result.busy = True
            result.remaining = len(spool.entries())
            return result
        entries = spool.entries()
        for i, entry in enumerate(entries):
            try:
                delivered = send_with_backoff(client, entry.read(), entry.labels, backoff)
            except Unavailable as e:
                result.remaining = len(entries) - i
                result.error = str(e)
                return result
            except Rejected as e:
                result.rejected.append((spool.reject(entry, str(e)), str(e)))
                continue
            except (OSError, ValueError) as e:  # unreadable spool file: keep it aside
                result.rejected.append((spool.reject(entry, f"unreadable: {e}"), str(e)))
                continue
            spool.remove(entry)
            result.delivered.append(delivered)
    return result


@dataclass(frozen=True, slots=True)
class PushOutcome:
    """The fate of one pushed report, and of the spool flushed before it."""

    delivered: Delivered | None
    spooled: SpoolEntry | None
    error: str | None
    flushed: FlushResult


def push(
    report: bytes,
    client: Client,
    spool: Spool,
    labels: Mapping[str, str] | None = None,
    backoff: Backoff | None = None,
) -> PushOutcome:
    """Deliver spooled reports, then this one; spool it when the service is unavailable.

    Raises `Rejected` when the service refuses this report, and UsageError when it is not a
    CycloneDX JSON report (neither is spooled).
    """
    check_report(report)
    labels = dict(labels or {})
    backoff = backoff or Backoff()
    flushed = flush(spool, client, backoff)
    if flushed.error is not None:
        # the service is down: do not wait for it a second time
        return PushOutcome(None, spool.add(report, labels), flushed.error, flushed)
    try:
        delivered = send_with_backoff(client, report, labels, backoff)
    except Unavailable as e:
        return PushOutcome(None, spool.add(report, labels), str(e), flushed)
    return PushOutcome(delivered, None, None, flushed)


def describe(delivered: Delivered) -> str:
    """One line about a delivered report."""
    state = "stored" if delivered.created else "already stored"
    return f"scan {delivered.scan_id} of asset {delivered.asset_id} {state} ({delivered.asset_url})"


def labels_from(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` options to a mapping; raises UsageError on a malformed one."""
    labels: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"label {pair!r} must be KEY=VALUE")
        labels[key.strip()] = value.strip()
    return labels
