"""Reading a request body, always in this order: authorize the caller, take an ingest slot
where the body is large (`ingest_slot`: a report, a gate BOM, a catalog), then read with a size
cap. A report's content type and charset, optional gzip, and size limits before and after
decompression (a small gzip body can expand to gigabytes; it is inflated at most one byte past
the limit)."""

from __future__ import annotations

import threading
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from app.domain.tokens import Principal
from app.errors import (
    AppError,
    BadRequest,
    InvalidReport,
    PayloadTooLarge,
    ServiceUnavailable,
    UnsupportedMediaType,
)
from app.http.bodylimit import SMALL_BODY_BYTES
from app.http.errors import validation_failure
from app.http.metrics import Metrics
from app.settings import Settings
from scanner.loaders import DocumentError, load_json

Model = TypeVar("Model", bound=BaseModel)

#: CycloneDX JSON, SPDX 2 JSON and tag-value; the content, not the type, says which it is
ACCEPTED_MEDIA_TYPES = (
    "application/vnd.cyclonedx+json",
    "application/json",
    "application/spdx+json",
    "text/spdx",
)


class IngestGate:
    """Counts the large bodies (reports, gate BOMs, catalogs) a process is taking in and admits
    at most `limit` at once, at most `per_token` of them from one token.

    Refusing beats queueing: each report in flight holds its body and parsed document in memory
    (several times its size), so a burst of large reports answers 503 with Retry-After and the
    agents spool and retry, instead of the process growing until it is killed. The share per
    token keeps one token (a runaway CI job, a stolen secret) from holding every slot while the
    rest of the fleet is refused.
    """

    def __init__(self, limit: int, per_token: int | None = None, metrics: Metrics | None = None):
        self.limit = limit
        self.per_token = min(per_token or limit, limit)
        self._active = 0
        self._by_token: dict[str, int] = {}
        self._lock = threading.Lock()
        self._metrics = metrics

    def enter(self, token: str) -> str | None:
        """Take a slot for `token`; None when taken, else why not: ``busy`` (every slot is
        taken) or ``share`` (the token holds its share)."""
        with self._lock:
            held = self._by_token.get(token, 0)
            refused = "busy" if self._active >= self.limit else None
            refused = "share" if refused is None and held >= self.per_token else refused
            if refused is None:
                self._active += 1
                self._by_token[token] = held + 1
        if self._metrics is not None:
            if refused == "busy":
                self._metrics.ingest_rejected_busy.inc()
            elif refused == "share":
                self._metrics.ingest_rejected_share.inc()
            else:
                self._metrics.ingests_in_flight.inc()
        return refused

    def leave(self, token: str) -> None:
        """Give a slot of `token` back."""
        with self._lock:
            self._active -= 1
            held = self._by_token.pop(token) - 1
            if held:
                self._by_token[token] = held
        if self._metrics is not None:
            self._metrics.ingests_in_flight.dec()

    def held(self, token: str) -> int:
        """The slots `token` holds now."""
        with self._lock:
            return self._by_token.get(token, 0)


@contextmanager
def ingest_slot(request: Request, principal: Principal, settings: Settings) -> Iterator[None]:
    """Hold one of the process's ingest slots for `principal` while the block runs, or raise
    `ServiceUnavailable` (503): take it after authorization and before reading the body, so
    only an authorized caller's body is ever held in memory, and never more of them at once
    than there are slots."""
    gate: IngestGate = request.app.state.ingest_gate
    refused = gate.enter(principal.key)
    if refused == "busy":
        raise ServiceUnavailable(
            f"the service is already taking in {gate.limit} reports, gate BOMs or catalogs "
            "(GPUPROV_MAX_CONCURRENT_INGESTS); retry later",
            settings.retry_after_seconds,
        )
    if refused == "share":
        raise ServiceUnavailable(
            f"this token already has {gate.per_token} reports in flight, its share of the "
            f"{gate.limit} ingest slots (GPUPROV_MAX_CONCURRENT_INGESTS_PER_TOKEN); retry later",
            settings.retry_after_seconds,
        )
    try:
        yield
    finally:
        gate.leave(principal.key)


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


@dataclass(frozen=True, slots=True)
class ReportEncoding:
    """How a report body is sent: its media type and whether it is gzip-compressed."""

    media_type: str
    gzip: bool


def report_encoding(request: Request, settings: Settings) -> ReportEncoding:
    """Check a report's headers (media type, charset, encoding, declared size) before anything
    reads its body."""
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in ACCEPTED_MEDIA_TYPES:
        raise UnsupportedMediaType(
            f"Content-Type {media_type or '(none)'!r} is not accepted; send CycloneDX or SPDX as "
            + " or ".join(ACCEPTED_MEDIA_TYPES)
        )
    charset = _charset(content_type)
    if charset not in (None, "utf-8", "utf8"):
        raise UnsupportedMediaType(
            f"charset {charset!r} is not accepted; send the report as UTF-8 (RFC 8259)"
        )
    encoding = request.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding not in ("identity", "gzip"):
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding!r} is not supported; use gzip or none"
        )
    _check_declared(request, settings.max_report_bytes, "the report")
    return ReportEncoding(media_type, encoding == "gzip")


async def read_report(
    request: Request, settings: Settings, encoding: ReportEncoding
) -> ReceivedReport:
    """Stream a report's body with a size cap (`ReceivedReport.decompressed` then checks the
    decompressed size): call it once the caller is authorized and holds an ingest slot."""
    limit = settings.max_report_bytes
    body = await _read(request, limit, "the report")
    # decompressed by the endpoint, in the worker thread it runs in anyway
    return ReceivedReport(body, encoding.media_type, encoding.gzip, limit)


def _charset(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


def check_limited(request: Request, limit: int, accepted: tuple[str, ...], what: str) -> None:
    """Refuse, before reading it, a body that is not one of the `accepted` media types (a
    suffix such as ``+json`` accepts every type ending in it), is compressed, or declares more
    than `limit` bytes."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if not any(media_type == a or (a.startswith("+") and media_type.endswith(a)) for a in accepted):
        raise UnsupportedMediaType(
            f"Content-Type {media_type or '(none)'!r} is not accepted for {what}; send "
            + " or ".join(a if not a.startswith("+") else f"application/*{a}" for a in accepted)
        )
    encoding = request.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding != "identity":
        raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported for {what}")
    _check_declared(request, limit, what)


async def read_limited(request: Request, limit: int, accepted: tuple[str, ...], what: str) -> bytes:
    """A small uncompressed body checked by `check_limited`, at most `limit` bytes: call it
    once the caller is authorized (and holds an ingest slot where one applies)."""
    check_limited(request, limit, accepted, what)
    return await _read(request, limit, what)


@asynccontextmanager
async def uploaded(
    request: Request,
    principal: Principal,
    settings: Settings,
    limit: int,
    accepted: tuple[str, ...],
    what: str,
    send: str,
) -> AsyncIterator[bytes]:
    """A whole uploaded document (megabytes: read once the caller is authorized), its declared
    size checked first, read and used in an ingest slot, never past ``limit``; an empty body is
    a 422 asking for ``send``."""
    check_limited(request, limit, accepted, what)
    with ingest_slot(request, principal, settings):
        raw = await read_limited(request, limit, accepted, what)
        if not raw:
            raise AppError(f"the request body is empty; send {send}", 422)
        yield raw


async def read_model(request: Request, model: type[Model], what: str) -> Model:
    """A small JSON body as `model`: call it from a dependency that comes after the caller's
    authorization (FastAPI reads a model parameter's body before any dependency runs, so anyone
    could make it read the body, and a caller without a token would learn 422 before 401). Read
    by the one strict JSON reader: no key twice, no NaN (json.loads keeps the last of two keys)."""
    raw = await read_limited(request, SMALL_BODY_BYTES, ("application/json",), what)
    try:
        document = load_json(raw)
    except DocumentError as e:
        raise AppError(f"the body is not acceptable JSON: {e}", 422) from None
    try:
        return model.model_validate(document)
    except ValidationError as e:
        raise validation_failure(e.errors(), ("body",)) from None


async def read_body(request: Request, limit: int, what: str) -> bytes:
    """A body of any media type, at most `limit` bytes (declared or streamed): call it once the
    caller is authorized."""
    _check_declared(request, limit, what)
    return await _read(request, limit, what)


def _check_declared(request: Request, limit: int, what: str) -> None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"{what} is larger than the limit of {limit} bytes")


async def _read(request: Request, limit: int, what: str) -> bytes:
    # the middleware (app.http.bodylimit) bounds the time the body may take to arrive
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"{what} is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
