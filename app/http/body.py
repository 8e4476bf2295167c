"""Reading a report body: content type, optional gzip, and size limits before and after
decompression (a small gzip body can expand to gigabytes)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.errors import BadRequest, InvalidReport, PayloadTooLarge, UnsupportedMediaType
from app.http.deps import SettingsDep

ACCEPTED_MEDIA_TYPES = ("application/vnd.cyclonedx+json", "application/json")


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
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type not in ACCEPTED_MEDIA_TYPES:
        raise UnsupportedMediaType(
            f"Content-Type {media_type or '(none)'!r} is not accepted; send CycloneDX JSON as "
            + " or ".join(ACCEPTED_MEDIA_TYPES)
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
