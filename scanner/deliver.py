"""Delivery of reports to the gpuprov service: gzip, bearer token, spool, exactly once.

A report that cannot be delivered now is written to a spool directory and delivered by a later
push; the service stores a report once however often it arrives (its serial number and content
digest are the idempotency key), so a retry after a lost answer never duplicates it. What an
answer means for the queue (docs/service.md, "Agents"):

- connection errors, 408, 429, 502, 503, 504: transient; retried with backoff, then the whole
  queue waits (a ``Retry-After`` is honoured, also by later pushes);
- 401: the agent's token is missing, unknown or revoked; no report is at fault, nothing is set
  aside, the queue waits until the configuration is fixed;
- any other 5xx (a plain 500): the report may be the cause, or the server may have a passing
  bug; the report is retried by later flushes, spaced out, and set aside after a bounded number
  of failures, while the reports behind it go on;
- any other 4xx: the service refuses this report (its content, or a 403: this token may not
  report for its asset); it is set aside at once and the queue goes on.

Set-aside reports (the dead letters) are kept in ``rejected/`` with their labels and the reason,
listed by every ``gpuprov push --spool`` and put back in the queue by ``--requeue``.
"""

from __future__ import annotations

import contextlib
import email.utils
import errno
import fcntl
import gzip
import hashlib
import json
import os
import random
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx
import msgspec
from msgspec import Struct
from msgspec.structs import replace

from scanner.errors import ScannerError, UsageError
from scanner.fsutil import atomic_write
from scanner.loaders import DocumentError, load_json
from scanner.vocabulary import MAX_ASSET_LABELS

ENV_SERVER = "GPUPROV_SERVER"
ENV_TOKEN = "GPUPROV_TOKEN"
ENV_SPOOL = "GPUPROV_SPOOL"
REPORTS_PATH = "/api/v1/reports"
MEDIA_TYPE = "application/vnd.cyclonedx+json"
_SUFFIX = ".cdx.json.gz"
_META = ".meta.json"
REJECTED_DIR = "rejected"
# Answers that say "not now" about the service, never about the report.
TRANSIENT_STATUSES = frozenset({408, 429, 502, 503, 504})
# The agent's credentials are wrong: no report is at fault. A 403 is not here: it can refuse
# one report (a token bound to other assets) while the next is welcome, so it must not stop
# the queue.
AUTH_STATUSES = frozenset({401})
# A Retry-After longer than this is read as this: a broken or hostile header must not stop
# an agent for days.
MAX_RETRY_AFTER = 3600.0


class DeliveryError(ScannerError):
    """A report could not be delivered."""


class ReportRejected(DeliveryError):
    """The service refused this report (a 4xx other than 401/408/429)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"the service refused the report ({status}): {message}")
        self.status = status
        self.reason = message


class Unauthorized(DeliveryError):
    """The service refused the agent's token (401): a configuration problem."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(
            f"the service refused the agent's token ({status}): {message}; "
            f"check --token-file or ${ENV_TOKEN}"
        )
        self.status = status


class Unavailable(DeliveryError):
    """The service cannot take the report now; try again later."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SpoolError(DeliveryError):
    """The report could not be written to the spool (a full disk, a quota, a read-only or
    unwritable directory): it is neither delivered nor kept."""

    def __init__(self, directory: Path, error: OSError, kept: int) -> None:
        full = error.errno in _FULL
        why = "is full" if full else "cannot be written"
        super().__init__(
            f"the spool {directory} {why} ({error.strerror or error}): this report is NOT kept; "
            f"the {kept} report(s) already spooled are kept and are delivered first"
            + ("; free space or move the spool (--spool-dir, $GPUPROV_SPOOL)" if full else "")
        )
        self.full = full
        self.kept = kept
        #: why the report was not delivered first (set by `push`)
        self.undelivered = ""


#: errors that mean the spool's file system (or the agent's share of it) has no room
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class ServerError(Unavailable):
    """A 5xx other than 502/503/504: a passing server bug, or a report that makes it fail."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after)
        self.status = status


def default_spool_dir() -> Path:
    """``$GPUPROV_SPOOL``, else ``$XDG_DATA_HOME/gpuprov/spool`` (``~/.local/share/...``)."""
    explicit = os.environ.get(ENV_SPOOL)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local/share")
    return Path(base) / "gpuprov" / "spool"


class Target(Struct, frozen=True):
    """Where and as whom reports are delivered."""

    server: str
    token: str
    timeout: float = 30.0

    @classmethod
    def resolve(
        cls, server: str | None = None, token_file: Path | None = None, token: str | None = None
    ) -> Target:
        """From options (`token`: a CI job's ID token), else ``GPUPROV_SERVER`` /
        ``GPUPROV_TOKEN``; raises UsageError."""
        server = server or os.environ.get(ENV_SERVER)
        if not server:
            raise UsageError(f"no service address: pass --server URL or set {ENV_SERVER}")
        if not server.startswith(("http://", "https://")):
            raise UsageError(f"the service address must be an http(s) URL, not {server!r}")
        if token is not None:
            pass
        elif token_file is not None:
            try:
                token = token_file.read_text().strip()
            except OSError as e:
                raise UsageError(f"cannot read the token file {token_file}: {e.strerror}") from e
        else:
            token = os.environ.get(ENV_TOKEN, "").strip()
        if not token:
            raise UsageError(f"no API token: pass --token-file FILE or set {ENV_TOKEN}")
        return cls(server.rstrip("/"), token)


class Delivered(Struct, frozen=True):
    """The service's answer to a delivered report."""

    scan_id: int
    asset_id: int
    created: bool  # False: the service already had it
    asset_url: str


def check_report(data: bytes) -> None:
    """Refuse, before sending or spooling, something that is not a CycloneDX JSON report or an
    SPDX 2.2 / 2.3 document (JSON or tag-value) of an image or a host."""
    # imported here: the spool and the agent's loop do not need the BOM readers
    from scanner.bom.spdx_reader import media_type_of

    if media_type_of(data) is not None:
        # the service's reading of SPDX (spdx-tools, then the asset rule), as `gate --bom`'s
        from scanner.policy.bom_facts import BomError, reading

        try:
            reading(data)
        except BomError as e:
            raise UsageError(f"the report is not acceptable SPDX: {e}") from None
        return
    try:
        # the service's own reading (UTF-8 only, each key once, ...): what it would refuse
        # never reaches the spool
        document = load_json(data)
    except DocumentError as e:
        raise UsageError(f"the report is not acceptable JSON: {e}") from e
    if not isinstance(document, dict) or document.get("bomFormat") != "CycloneDX":
        raise UsageError(
            "the report is neither a CycloneDX BOM (bomFormat 'CycloneDX' is missing) nor an "
            "SPDX 2.2 / 2.3 document"
        )
    from scanner.bom.foreign import NotAnAsset, asset_of, lists_operating_system

    metadata = document.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("component"), dict):
        # the service's reading of the asset: an application's SBOM is refused there too (a
        # report without one is the service's to refuse, with its pointers)
        try:
            asset_of(metadata, operating_system=lists_operating_system(document))
        except NotAnAsset as e:
            raise UsageError(str(e)) from None


def _media_type(report: bytes) -> str:
    """The report's media type: SPDX's where its content is SPDX, else CycloneDX JSON."""
    from scanner.bom.spdx_reader import media_type_of

    return media_type_of(report) or MEDIA_TYPE


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
        """Deliver one report; raises `ReportRejected`, `Unauthorized` or `Unavailable`."""
        params: list[tuple[str, str | int | float | bool | None]] = [
            ("label", f"{k}={v}") for k, v in sorted((labels or {}).items())
        ]
        try:
            answer = self._http.post(
                REPORTS_PATH,
                content=gzip.compress(report, compresslevel=6),
                params=params,
                headers={"Content-Type": _media_type(report), "Content-Encoding": "gzip"},
            )
        except httpx.HTTPError as e:
            raise Unavailable(f"cannot reach {self.target.server}: {e}") from e
        status = answer.status_code
        if status in (200, 201):
            try:
                body = answer.json()
                return Delivered(
                    int(body["scan_id"]),
                    int(body["asset_id"]),
                    status == 201,
                    str(body.get("asset_url", "")),
                )
            except (ValueError, KeyError, TypeError) as e:
                # not the service's answer (a proxy's page?): the report may not be stored
                raise Unavailable(f"{self.target.server} answered {status} without a scan") from e
        message = _error_message(answer)
        said = f"the service answered {status}: {message}"
        if status in AUTH_STATUSES:
            raise Unauthorized(status, message)
        if status in TRANSIENT_STATUSES:
            raise Unavailable(said, retry_after(answer.headers.get("Retry-After")))
        if status >= 500:
            raise ServerError(status, said, retry_after(answer.headers.get("Retry-After")))
        raise ReportRejected(status, message)


def _error_message(answer: httpx.Response) -> str:
    try:
        error = answer.json()["error"]
        details = "; ".join(f"{d['pointer']}: {d['message']}" for d in error.get("details", []))
        return str(error["message"]) + (f" ({details})" if details else "")
    except (ValueError, KeyError, TypeError):
        return answer.text[:300] or answer.reason_phrase


def retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP-date (RFC 9110
    §10.2.3); None when absent or unreadable, at most `MAX_RETRY_AFTER`."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return min(max(when.timestamp() - now(), 0.0), MAX_RETRY_AFTER)


class SpoolEntry(Struct, frozen=True):
    """One spooled report: the gzip file, its labels and its history of server errors."""

    path: Path
    labels: Mapping[str, str]
    failures: int = 0  # server errors (plain 5xx) so far
    retry_at: float = 0.0  # not before this time (epoch seconds) after a server error
    reason: str = ""  # the last server error; for a set-aside report, why

    @property
    def meta_path(self) -> Path:
        return self.path.with_name(self.path.name.removesuffix(_SUFFIX) + _META)

    def read(self) -> bytes:
        """The report's bytes; raises OSError or ValueError when its file cannot be read."""
        data = self.path.read_bytes()
        try:
            return gzip.decompress(data)
        except (EOFError, zlib.error) as e:  # a truncated or garbled file: no report to send
            raise ValueError(f"{self.path.name} is no complete gzip file: {e}") from None

    def _meta(self) -> bytes:
        meta: dict[str, Any] = {"labels": dict(self.labels)}
        if self.failures:
            meta.update(failures=self.failures, retry_at=self.retry_at)
        if self.reason:
            meta["reason"] = self.reason
        return json.dumps(meta).encode()

    @classmethod
    def _load(cls, path: Path) -> SpoolEntry:
        entry = cls(path, {})
        try:
            meta = load_json(entry.meta_path.read_bytes())
            return cls(
                path,
                {str(k): str(v) for k, v in dict(meta.get("labels", {})).items()},
                int(meta.get("failures", 0)),
                float(meta.get("retry_at", 0.0)),
                str(meta.get("reason", "")),
            )
        except (OSError, ValueError, TypeError, AttributeError):
            return entry


class Spool:
    """A directory of reports waiting for delivery, oldest first, and ``rejected/`` beside
    them for the reports set aside."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def rejected_dir(self) -> Path:
        return self.directory / REJECTED_DIR

    def _ensure(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def add(self, report: bytes, labels: Mapping[str, str] | None = None) -> SpoolEntry:
        """Spool a report (once: the same bytes spooled twice are kept once); raises
        `SpoolError` when it cannot be written, leaving the reports spooled before untouched
        (the oldest are kept: a full spool refuses the newest report, it never evicts)."""
        digest = hashlib.sha256(report).hexdigest()[:32]
        existing = self.entries()
        for entry in existing:
            if entry.path.name.endswith(f"-{digest}{_SUFFIX}"):
                return entry
        stem = f"{time.time_ns():020d}-{digest}"
        entry = SpoolEntry(self.directory / f"{stem}{_SUFFIX}", dict(labels or {}))
        try:
            self._ensure()
            # meta first, report last: a report file exists only once its labels are on disk
            _write_atomic(entry.meta_path, entry._meta())
            _write_atomic(entry.path, gzip.compress(report, compresslevel=6))
        except OSError as e:
            # no half-written entry stays behind to take the room the older ones need
            entry.meta_path.unlink(missing_ok=True)
            raise SpoolError(self.directory, e, len(existing)) from e
        return entry

    def entries(self) -> list[SpoolEntry]:
        """Spooled reports, oldest first."""
        if not self.directory.is_dir():
            return []
        return [SpoolEntry._load(p) for p in sorted(self.directory.glob(f"*{_SUFFIX}"))]

    def rejected(self) -> list[SpoolEntry]:
        """Reports set aside (the dead letters), oldest first, each with its reason."""
        if not self.rejected_dir.is_dir():
            return []
        return [self.rejected_entry(p) for p in sorted(self.rejected_dir.glob(f"*{_SUFFIX}"))]

    def rejected_entry(self, path: Path) -> SpoolEntry:
        """A set-aside report, with its reason."""
        entry = SpoolEntry._load(path)
        if not entry.reason:  # set aside by an older gpuprov: the reason in a text file
            with contextlib.suppress(OSError):
                old = path.with_name(path.name + ".reason.txt").read_text()
                entry = replace(entry, reason=old.strip())
        return entry

    def remove(self, entry: SpoolEntry) -> None:
        """Forget a delivered report."""
        entry.path.unlink(missing_ok=True)
        entry.meta_path.unlink(missing_ok=True)

    def update(self, entry: SpoolEntry) -> None:
        """Record an entry's new failure count and retry time (best effort: on a full disk the
        report is retried sooner, never lost)."""
        with contextlib.suppress(OSError):
            _write_atomic(entry.meta_path, entry._meta())

    def reject(self, entry: SpoolEntry, reason: str) -> Path:
        """Move a report to ``rejected/``, with its labels and the reason, out of the queue."""
        self.rejected_dir.mkdir(exist_ok=True, mode=0o700)
        moved = replace(entry, path=self.rejected_dir / entry.path.name, reason=reason)
        # the move matters more than the reason: on a full disk it is made without it
        with contextlib.suppress(OSError):
            _write_atomic(moved.meta_path, moved._meta())
        os.replace(entry.path, moved.path)
        entry.meta_path.unlink(missing_ok=True)
        return moved.path

    def requeue(self) -> int:
        """Put every set-aside report back in the queue (its failures forgotten); how many."""
        moved = 0
        for entry in self.rejected():
            back = SpoolEntry(self.directory / entry.path.name, entry.labels)
            _write_atomic(back.meta_path, back._meta())
            os.replace(entry.path, back.path)
            entry.meta_path.unlink(missing_ok=True)
            entry.path.with_name(entry.path.name + ".reason.txt").unlink(missing_ok=True)
            moved += 1
        return moved

    def wait_until(self) -> float:
        """The time before which the service asked not to be called (Retry-After), or 0."""
        try:
            return float((self.directory / ".retry-after").read_text())
        except (OSError, ValueError):
            return 0.0

    def set_wait_until(self, when: float) -> None:
        """Remember a Retry-After for later pushes (0 forgets it)."""
        path = self.directory / ".retry-after"
        if when <= 0:
            path.unlink(missing_ok=True)
            return
        # a hint to later pushes: on a full disk they call the service a little sooner
        with contextlib.suppress(OSError):
            self._ensure()
            _write_atomic(path, f"{when:.3f}".encode())

    @contextlib.contextmanager
    def lock(self) -> Iterator[int | None]:
        """Hold the spool for one flush; yields None when held, else the pid of the process
        that holds it (0 when it cannot be told)."""
        self._ensure()
        with open(self.directory / ".lock", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip()
                yield int(holder) if holder.isdigit() else 0
                return
            try:
                with contextlib.suppress(
                    OSError
                ):  # who holds it: a hint, not needed on a full disk
                    handle.seek(0)
                    handle.truncate()
                    handle.write(str(os.getpid()))
                    handle.flush()
                yield None
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomic(path: Path, data: bytes) -> None:
    """Spool files: private to the agent (0600) and fsynced, a report must survive a crash."""
    atomic_write(path, data, mode=0o600, durable=True)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry schedule: ``attempts`` tries, waits doubling from ``initial`` up to ``maximum``
    (a longer Retry-After from the service ends the tries), with jitter so agents do not retry
    in step. A report answered with a plain 5xx is retried by later flushes, not before
    ``server_error_delay`` × 4^(failures-1), and set aside at its ``server_error_limit``-th
    failure."""

    attempts: int = 3
    initial: float = 1.0
    maximum: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    server_error_limit: int = 5
    server_error_delay: float = 60.0
    clock: Callable[[], float] = field(default=time.time, compare=False)

    def delays(self) -> Iterator[float]:
        """The waits between attempts."""
        delay = self.initial
        for _ in range(self.attempts - 1):
            yield min(delay, self.maximum) * random.uniform(0.8, 1.2)
            delay *= 2

    def next_retry(self, failures: int) -> float:
        """When a report that failed ``failures`` times with a server error is tried again."""
        return self.clock() + self.server_error_delay * 4.0 ** (failures - 1)


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
            if delay is None or (e.retry_after is not None and e.retry_after > backoff.maximum):
                raise  # the service asked for more patience than a push has: spool
            if e.retry_after is not None:
                delay = max(delay, e.retry_after)
            backoff.sleep(delay)


class Halt(StrEnum):
    """Why a flush stopped before the end of the queue."""

    UNAVAILABLE = "unavailable"  # transient: every report waits
    UNAUTHORIZED = "unauthorized"  # 401/403: the agent's configuration must be fixed
    SERVER_ERRORS = "server-errors"  # two reports in a row answered a plain 5xx


class FlushResult(Struct):
    """What a flush of the spool did."""

    delivered: list[Delivered] = msgspec.field(default_factory=list)
    #: set aside by this flush
    rejected: list[tuple[Path, str]] = msgspec.field(default_factory=list)
    #: a server error: retry later
    deferred: list[tuple[Path, str]] = msgspec.field(default_factory=list)
    remaining: int = 0  # reports still in the queue
    error: str | None = None  # why delivery stopped, when it did
    halt: Halt | None = None
    busy: int | None = None  # another process is flushing: its pid (0: unknown)


def _remember_retry_after(spool: Spool, error: Unavailable, backoff: Backoff) -> None:
    if error.retry_after is not None:
        spool.set_wait_until(backoff.clock() + error.retry_after)


def flush(spool: Spool, client: Client, backoff: Backoff | None = None) -> FlushResult:
    """Deliver spooled reports oldest first; a report refused for its content is set aside and
    the queue goes on; the flush stops when the service is unavailable or refuses the token."""
    backoff = backoff or Backoff()
    result = FlushResult()
    if not spool.directory.is_dir():  # nothing spooled yet: nothing to create on a full disk
        return result
    with spool.lock() as holder:
        entries = spool.entries()
        if holder is not None:
            result.busy = holder
            result.remaining = len(entries)
            return result
        wait = spool.wait_until() - backoff.clock()
        if wait > 0:
            if entries:
                result.remaining = len(entries)
                result.halt = Halt.UNAVAILABLE
                result.error = f"the service asked to wait {wait:.0f} s more (Retry-After)"
            return result
        spool.set_wait_until(0)
        server_errors_in_a_row = 0
        for entry in entries:
            if entry.retry_at > backoff.clock():
                result.deferred.append((entry.path, entry.reason))
                continue
            try:
                delivered = send_with_backoff(client, entry.read(), entry.labels, backoff)
            except ServerError as e:
                server_errors_in_a_row += 1
                _record_server_error(spool, entry, str(e), backoff, result)
                if server_errors_in_a_row >= 2:  # the service fails for everyone: stop here
                    result.halt, result.error = Halt.SERVER_ERRORS, str(e)
                    _remember_retry_after(spool, e, backoff)
                    break
                continue
            except Unavailable as e:
                result.halt, result.error = Halt.UNAVAILABLE, str(e)
                _remember_retry_after(spool, e, backoff)
                break
            except Unauthorized as e:
                result.halt, result.error = Halt.UNAUTHORIZED, str(e)
                break
            except ReportRejected as e:
                result.rejected.append((spool.reject(entry, str(e)), str(e)))
                continue
            except (OSError, ValueError) as e:  # unreadable spool file: keep it aside
                reason = f"unreadable spool file: {e}"
                result.rejected.append((spool.reject(entry, reason), reason))
                continue
            server_errors_in_a_row = 0
            spool.remove(entry)
            result.delivered.append(delivered)
        result.remaining = len(spool.entries())
    return result


def _server_error(spool: Spool, entry: SpoolEntry, error: str, backoff: Backoff) -> Path | None:
    """Count a server error against a spooled report: set it aside at the limit (returns where),
    else schedule its next try."""
    failures = entry.failures + 1
    if failures >= backoff.server_error_limit:
        return spool.reject(entry, f"{error} (a server error {failures} times)")
    spool.update(
        replace(entry, failures=failures, retry_at=backoff.next_retry(failures), reason=error)
    )
    return None


def _record_server_error(
    spool: Spool, entry: SpoolEntry, error: str, backoff: Backoff, result: FlushResult
) -> None:
    moved = _server_error(spool, entry, error, backoff)
    if moved is not None:
        result.rejected.append((moved, spool.rejected_entry(moved).reason))
    else:
        result.deferred.append((entry.path, error))


class PushOutcome(Struct, frozen=True):
    """The fate of one pushed report, and of the spool flushed before it."""

    delivered: Delivered | None
    spooled: SpoolEntry | None
    error: str | None
    flushed: FlushResult
    halt: Halt | None = None
    #: the report could not be delivered and the spool could not take it: it is lost to this
    #: push (its producer still has it), the reports spooled before are kept
    not_kept: SpoolError | None = None


def push(
    report: bytes,
    client: Client,
    spool: Spool,
    labels: Mapping[str, str] | None = None,
    backoff: Backoff | None = None,
) -> PushOutcome:
    """Deliver spooled reports, then this one; spool it when it cannot be delivered now.

    Raises `ReportRejected` when the service refuses this report, and UsageError when it is not a
    CycloneDX JSON report (neither is spooled). A report the spool cannot take (a full disk)
    comes back in `PushOutcome.not_kept`.
    """
    check_report(report)
    labels = dict(labels or {})
    backoff = backoff or Backoff()
    flushed = flush(spool, client, backoff)
    try:
        return _push_after_flush(report, client, spool, labels, backoff, flushed)
    except SpoolError as e:
        return PushOutcome(None, None, e.undelivered, flushed, flushed.halt, not_kept=e)


def _push_after_flush(
    report: bytes,
    client: Client,
    spool: Spool,
    labels: dict[str, str],
    backoff: Backoff,
    flushed: FlushResult,
) -> PushOutcome:
    def keep(why: str, halt: Halt | None) -> PushOutcome:
        try:
            entry = spool.add(report, labels)
        except SpoolError as e:
            e.undelivered = why
            raise
        return PushOutcome(None, entry, why, flushed, halt)

    if flushed.error is not None:
        # the queue is stopped: do not wait for the service a second time, keep the order
        return keep(flushed.error, flushed.halt)
    wait = spool.wait_until() - backoff.clock()
    if wait > 0:  # a Retry-After still runs (another process's flush may have stored it)
        return keep(f"the service asked to wait {wait:.0f} s more (Retry-After)", Halt.UNAVAILABLE)
    try:
        delivered = send_with_backoff(client, report, labels, backoff)
    except ServerError as e:
        kept = keep(str(e), Halt.SERVER_ERRORS)
        assert kept.spooled is not None
        moved = _server_error(spool, kept.spooled, str(e), backoff)
        if moved is not None:
            raise ReportRejected(e.status, spool.rejected_entry(moved).reason) from e
        return kept
    except Unavailable as e:
        _remember_retry_after(spool, e, backoff)
        return keep(str(e), Halt.UNAVAILABLE)
    except Unauthorized as e:
        return keep(str(e), Halt.UNAUTHORIZED)
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
    if len(labels) > MAX_ASSET_LABELS:
        raise UsageError(
            f"{len(labels)} labels; an asset carries at most {MAX_ASSET_LABELS} (the service "
            "refuses more)"
        )
    return labels
