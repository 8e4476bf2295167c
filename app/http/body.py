"""Reading a report body: a slot among the reports ingested at once, content type and charset,
optional gzip, and size limits before and after decompression (a small gzip body can expand to
gigabytes; it is inflated at most one byte past the limit)."""

from __future__ import annotations

import threading
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.errors import (
    BadRequest,
    InvalidReport,
    PayloadTooLarge,
    ServiceUnavailable,
    UnsupportedMediaType,
)
from app.http.deps import SettingsDep
from app.http.metrics import Metrics

ACCEPTED_MEDIA_TYPES = ("application/vnd.cyclonedx+json", "application/json")


class IngestGate:
    """Counts the reports a process is ingesting and admits at most `limit` at once.

    Refusing beats queueing: each report in flight holds its body and parsed document in memory
    (several times its size), so a burst of large reports answers 503 with Retry-After and the
    agents spool and retry, instead of the process growing until it is killed.
    """

    def __init__(self, limit: int, metrics: Metrics | None = None) -> None:
        self.limit = limit
        self._active = 0
        self._lock = threading.Lock()
        self._metrics = metrics

    def enter(self) -> bool:
        """Take a slot; False when all are taken."""
        with self._lock:
            if self._active >= self.limit:
                if self._metrics is not None:
                    self._metrics.ingest_rejected_busy.inc()
                return False
            self._active += 1
        if self._metrics is not None:
            self._metrics.ingests_in_flight.inc()
        return True

    def leave(self) -> None:
        """Give a slot back."""
        with self._lock:
            self._active -= 1
        if self._metrics is not None:
            self._metrics.ingests_in_flight.dec()


async def ingest_slot(request: Request, settings: SettingsDep) -> AsyncIterator[None]:
    """Hold one of the process's ingest slots for the request, or answer 503."""
    gate: IngestGate = request.app.state.ingest_gate
    if not gate.enter():
        raise ServiceUnavailable(
            f"the service is already ingesting {gate.limit} reports "
            "(GPUPROV_MAX_CONCURRENT_INGESTS); retry later",
            settings.retry_after_seconds,
        )
    try:
        yield
    finally:
        gate.leave()


IngestSlot = Annotated[None, Depends(ingest_slot, scope="function")]


@dataclass(frozen=True, slots=True)
class ReceivedReport:
    """The body as received, the media type it was sent as, and whether it is a gzip stream
    (then kept as the stored copy: it decompresses to exactly the report)."""

    body: bytes
    media_type: str
    gzip: bool = False
    limit: int = 0

    @property
    def gzip_data(self) -> bytes | None:
        """The gzip stream the report came in, if it came in one."""
        return self.body if self.gzip else None

    def decompressed(self) -> bytes:
        """The report's bytes (blocking for a gzip body: call it off the event loop)."""
        data = gunzip(self.body, self.limit) if self.gzip else self.body
        if not data:
            raise InvalidReport("the request body is empty; expected a CycloneDX JSON document")
        return data


def gunzip(data: bytes, limit: int) -> bytes:
    """Decompress a gzip body, refusing output larger than ``limit`` bytes."""
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = decompressor.decompress(data, limit + 1)
    except zlib.error as e:
        raise BadRequest(f"Content-Encoding is gzip but the body is not valid gzip: {e}") from e
    if len(out) > limit:
        raise PayloadTooLarge(f"the decompressed report is larger than the limit of {limit} bytes")
    if not decompressor.eof:
        raise BadRequest("the gzip body is truncated")
    if decompressor.unused_data:
        raise BadRequest("the body holds data after the end of the gzip stream")
    return out


async def read_report(request: Request, settings: SettingsDep) -> ReceivedReport:
    """Check the headers and stream the body with a size cap (`ReceivedReport.decompressed`
    then checks the decompressed size)."""
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in ACCEPTED_MEDIA_TYPES:
        raise UnsupportedMediaType(
            f"Content-Type {media_type or '(none)'!r} is not accepted; send CycloneDX JSON as "
            + " or ".join(ACCEPTED_MEDIA_TYPES)
        )
    charset = _charset(content_type)
    if charset not in (None, "utf-8", "utf8"):
        raise UnsupportedMediaType(
            f"charset {charset!r} is not accepted; send the report as UTF-8 JSON (RFC 8259)"
        )
    encoding = request.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding not in ("identity", "gzip"):
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding!r} is not supported; use gzip or none"
        )
    limit = settings.max_report_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the report is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the report is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    # decompressed by the endpoint, in the worker thread it runs in anyway
    return ReceivedReport(b"".join(chunks), media_type, encoding == "gzip", limit)


ReportBody = Annotated[ReceivedReport, Depends(read_report)]


def _charset(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


async def read_limited(request: Request, limit: int, accepted: tuple[str, ...], what: str) -> bytes:
    """A small uncompressed body of one of the `accepted` media types (a suffix such as
    ``+json`` accepts every type ending in it), at most `limit` bytes."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if not any(media_type == a or (a.startswith("+") and media_type.endswith(a)) for a in accepted):
        raise UnsupportedMediaType(
            f"Content-Type {media_type or '(none)'!r} is not accepted for {what}; send "
            + " or ".join(a if not a.startswith("+") else f"application/*{a}" for a in accepted)
        )
    encoding = request.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding != "identity":
        raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported for {what}")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"{what} is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"{what} is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
