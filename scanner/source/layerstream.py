"""A layer blob read once as a stream, under `Limits`: the first stage of reading an image layer.

The blob's bytes are counted (against the declared size) and hashed as they arrive, the
compression is sniffed by magic bytes, and the inflated bytes are counted against the limits
of the layer and of the whole image (a decompression bomb is refused after a bounded amount
of inflating). What the bytes hold (a tar stream) is `scanner.source.tarlayer`'s business.
"""

from __future__ import annotations

import hashlib
import io
import queue
import threading
import zlib
from collections.abc import Callable
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol, cast

from msgspec import Struct

from scanner.errors import SourceError, UnsafeArchiveError
from scanner.imageref import split_digest
from scanner.model import OciDigest
from scanner.source.limits import Limits, MiB

if TYPE_CHECKING:
    from scanner.source.interface import Selector
    from scanner.source.tarlayer import LayerYield

CHUNK = MiB
#: Inflated chunks a read-ahead thread may hold before the consumer takes them.
_AHEAD = 4


class Readable(Protocol):
    """The least a blob stream must offer: sequential reads and close."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


class LayerSpec(Struct, frozen=True):
    """One layer to read: its digest (cache key, reported), declared size and how to open it.

    ``verify="blob"``: the blob's bytes must hash to ``digest`` (OCI descriptors).
    ``verify="diff"``: the uncompressed tar must hash to ``digest`` (docker-archive diff_ids).
    """

    digest: OciDigest
    size: int | None
    open: Callable[[], Readable]
    verify: Literal["blob", "diff"] = "blob"
    #: Where the blob's bytes lie verbatim in a regular file (path, offset), when they do: an
    #: uncompressed layer's members can then be analyzed in place instead of spooled.
    origin: tuple[str, int] | None = None
    #: Reads a layer that is not a blob (an extracted layer directory) in place of the tar
    #: reader; such a yield is never cached (its bytes are not covered by ``digest``).
    reader: LayerReader | None = None


class LayerReader(Protocol):
    """Reads one layer that is not a tar blob into its yield, under the scan's limits."""

    def __call__(
        self, spec: LayerSpec, selector: Selector, limits: Limits, budget: Budget
    ) -> LayerYield: ...


class CorruptLayer(Exception):
    """The layer data is damaged; reading stops and the entries read so far are kept."""


class _Hasher:
    """A digest over a byte stream; on a helper thread for big blobs so it overlaps inflate."""

    def __init__(self, algorithm: str, threaded: bool) -> None:
        self._h = hashlib.new(algorithm)
        self._q: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        if threaded:
            self._q = queue.Queue(maxsize=16)
            self._thread = threading.Thread(target=self._run, name="gpuprov-hash", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self._q is not None
        while (chunk := self._q.get()) is not None:
            self._h.update(chunk)

    def update(self, data: bytes) -> None:
        if self._q is None:
            self._h.update(data)
        elif data:
            self._q.put(data)

    def close(self) -> None:
        if self._thread is not None and self._q is not None:
            self._q.put(None)
            self._thread.join()
            self._thread = None

    def hexdigest(self) -> str:
        self.close()
        return self._h.hexdigest()


class _Blob:
    """The compressed blob as read: counts bytes, feeds the verifier, refuses overlong blobs."""

    def __init__(self, f: Readable, declared: int | None, label: str) -> None:
        self._f = f
        self._declared = declared
        self._label = label
        self._head = b""
        self.count = 0
        self.hasher: _Hasher | None = None

    def _raw(self, n: int) -> bytes:
        data = self._f.read(n)
        self.count += len(data)
        if self._declared is not None and self.count > self._declared:
            raise SourceError(
                f"{self._label}: blob is larger than its declared size {self._declared}"
            )
        if self.hasher is not None:
            self.hasher.update(data)
        return data

    def sniff(self) -> bytes:
        """Read the first bytes (magic) without losing them for later reads."""
        head = b""
        while len(head) < 4:
            more = self._raw(4 - len(head))
            if not more:
                break
            head += more
        self._head = head
        return head

    def read(self, n: int = -1) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        return self._raw(CHUNK if n is None or n < 0 else n)

    def drain(self) -> None:
        """Read to the end so the digest covers the whole blob."""
        self._head = b""
        while self._raw(CHUNK):
            pass


class Budget:
    """Expanded bytes and entries counted across one image's layers, against `Limits`."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.expanded = 0
        self.entries = 0

    def count_entries(self, n: int, label: str) -> None:
        self.entries += n
        if self.entries > self.limits.max_entries:
            raise UnsafeArchiveError(
                f"{label}: more than {self.limits.max_entries} tar entries in the image "
                "(limit max_entries)"
            )


class _Expander(io.RawIOBase):
    """Decompressed layer bytes, counted against the limits; subclasses produce chunks."""

    def __init__(
        self, blob: _Blob, budget: Budget, declared: int | None, label: str, ratio: bool
    ) -> None:
        super().__init__()
        self._blob = blob
        self._budget = budget
        self._declared = declared or 0
        self._label = label
        self._ratio = ratio
        self._pending = memoryview(b"")
        self._done = False
        self.expanded = 0
        self.hasher: _Hasher | None = None
        self._ahead: _ReadAhead | None = None

    def read_ahead(self) -> None:
        """From now on, read and inflate on a helper thread, a few chunks ahead of the
        consumer: zlib and zstd release the GIL, so inflating overlaps the tar parsing."""
        self._ahead = _ReadAhead(self._produce, lambda: self._done)

    def stop(self) -> None:
        """Stop reading ahead (idempotent); afterwards the blob may be read directly."""
        if self._ahead is not None:
            self._ahead.stop()
            self._ahead = None

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        """Offset in the expanded stream of the next byte `readinto` returns."""
        return self.expanded - len(self._pending)

    def _produce(self) -> bytes:
        raise NotImplementedError

    def _account(self, n: int) -> None:
        """Count ``n`` more expanded bytes (once per chunk of up to 1 MiB, never per byte)."""
        self.expanded += n
        budget = self._budget
        budget.expanded += n
        limits = budget.limits
        # The compressed size is the declared one (checked against the blob as it is read),
        # so the cap is fixed from the first chunk and a bomb stops after ratio x size bytes.
        base = max(self._blob.count, self._declared) if self._ratio else None
        limits.check_layer(self._label, self.expanded, base)
        limits.check_image(self._label, budget.expanded)

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            if self._ahead is not None:
                got = self._ahead.next()
                if got is None:
                    return 0
                data = got
            elif self._done:
                return 0
            else:
                data = self._produce()
            if data:
                self._account(len(data))
                if self.hasher is not None:
                    self.hasher.update(data)
                self._pending = memoryview(data)
        out = memoryview(buffer).cast("B")
        n = min(len(out), len(self._pending))
        out[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


class _ReadAhead:
    """Runs a chunk producer on a helper thread, at most `_AHEAD` chunks ahead of `next`.

    The consumer still counts every chunk against the limits, so a bomb is refused after at
    most that many more inflated chunks; an error of the producer is raised by `next`.
    """

    def __init__(self, produce: Callable[[], bytes], done: Callable[[], bool]) -> None:
        self._produce = produce
        self._done = done
        self._q: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=_AHEAD)
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="gpuprov-inflate", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping and not self._done():
                data = self._produce()
                if data:
                    self._q.put(data)
            self._q.put(None)
        except BaseException as e:  # raised to the consumer by next()
            self._q.put(e)

    def next(self) -> bytes | None:
        """The next chunk; None at the end of the stream."""
        item = self._q.get()
        if isinstance(item, BaseException):
            self._q.put(item)  # stays the answer to every later call
            raise item
        if item is None:
            self._q.put(None)
        return item

    def stop(self) -> None:
        self._stopping = True
        while self._thread.is_alive():
            try:
                self._q.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()


class _Plain(_Expander):
    def _produce(self) -> bytes:
        data = self._blob.read(CHUNK)
        if not data:
            self._done = True
        return data


class _Gunzip(_Expander):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._d = zlib.decompressobj(31)

    def _produce(self) -> bytes:
        d = self._d
        try:
            if d.unconsumed_tail:
                return d.decompress(d.unconsumed_tail, CHUNK)
            if d.eof:
                rest = d.unused_data
                while len(rest) < 2:
                    more = self._blob.read(CHUNK)
                    if not more:
                        break
                    rest += more
                if rest[:2] != b"\x1f\x8b":
                    # Padding after the last member is ignored, as gzip(1) does; the blob
                    # digest still covers it.
                    self._done = True
                    return b""
                self._d = d = zlib.decompressobj(31)
                return d.decompress(rest, CHUNK)
            chunk = self._blob.read(CHUNK)
            if not chunk:
                raise CorruptLayer("gzip data ends before the end of its stream (truncated)")
            return d.decompress(chunk, CHUNK)
        except zlib.error as e:
            raise CorruptLayer(f"gzip data is corrupt ({e})") from e


class _Unzstd(_Expander):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        import zstandard  # imported here: only zstd layers pay for it

        self._error: type[Exception] = zstandard.ZstdError
        # stream_reader bounds the output of each read (a zstd bomb cannot balloon memory);
        # a truncated frame ends the stream early, which the tar parser then reports.
        self._r = zstandard.ZstdDecompressor().stream_reader(
            cast(IO[bytes], self._blob), read_size=CHUNK, read_across_frames=True, closefd=False
        )

    def _produce(self) -> bytes:
        try:
            data = self._r.read(CHUNK)
        except self._error as e:
            raise CorruptLayer(f"zstd data is corrupt ({e})") from e
        if not data:
            self._done = True
        return data


class LayerStream:
    """One layer blob opened for a single sequential read of its inflated bytes (`reader`).

    Whichever digest the spec names is computed on the way: the blob's (OCI descriptors, and
    any uncompressed layer, whose blob is its diff) or the inflated stream's (docker-archive
    diff_ids). `finish` reads what the consumer left, then checks the size and the digest.
    Use it as a context manager: the blob and the hashing thread are closed on the way out.
    """

    def __init__(self, spec: LayerSpec, budget: Budget) -> None:
        self.label = f"layer {spec.digest}"
        algorithm, self._expected = split_digest(spec.digest)
        self._algorithm = algorithm
        self._size = spec.size
        try:
            self._file = spec.open()
        except OSError as e:
            raise SourceError(f"{self.label}: cannot open the blob ({e.strerror or e})") from e
        self._verifier: _Hasher | None = None
        try:
            self._blob = _Blob(self._file, spec.size, self.label)
            head = self._blob.sniff()
            compression: Literal["gzip", "zstd", "tar"] = (
                "gzip"
                if head[:2] == b"\x1f\x8b"
                else "zstd"
                if head == b"\x28\xb5\x2f\xfd"
                else "tar"
            )
            self.compression = compression
            expander_type = {"gzip": _Gunzip, "zstd": _Unzstd, "tar": _Plain}[compression]
            self._expander = expander_type(
                self._blob, budget, spec.size, self.label, compression != "tar"
            )
            threaded = spec.size is None or spec.size > 4 * MiB
            # For a plain tar the blob is the diff, so one digest serves both kinds of check.
            self._verifier = _Hasher(algorithm, threaded)
            self._hash_blob = spec.verify == "blob" or compression == "tar"
            if self._hash_blob:
                self._blob.hasher = self._verifier
                self._verifier.update(head)
            else:
                self._expander.hasher = self._verifier
            if threaded and compression != "tar":
                self._expander.read_ahead()
            #: The inflated bytes, read sequentially by the consumer.
            self.reader = io.BufferedReader(self._expander, buffer_size=CHUNK)
            #: Where the inflated bytes lie verbatim in a file (uncompressed layers only).
            self.origin = spec.origin if compression == "tar" else None
        except BaseException:
            self.close()
            raise
        #: Whether the digest was checked (a diff digest of a damaged stream cannot be).
        self.verified = False

    def __enter__(self) -> LayerStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def compressed(self) -> int:
        """Blob bytes read so far."""
        return self._blob.count

    @property
    def expanded(self) -> int:
        """Inflated bytes produced so far."""
        return self._expander.expanded

    def finish(self, damage: str | None) -> str | None:
        """Read the rest of the blob, then check its size and digest (SourceError if wrong).

        ``damage``: why the consumer stopped early, if it did. Returns the damage, which may
        also be found while reading the rest of a stream whose diff digest is checked.
        """
        verified = True
        if not self._hash_blob:
            if damage is None:
                scratch = memoryview(bytearray(CHUNK))
                try:
                    while self.reader.readinto(scratch):
                        pass
                except CorruptLayer as e:
                    damage = str(e)
            verified = damage is None
        self._expander.stop()
        self._blob.drain()
        if self._size is not None and self._blob.count != self._size:
            raise SourceError(
                f"{self.label}: blob has {self._blob.count} bytes but its descriptor says "
                f"{self._size}"
            )
        assert self._verifier is not None
        actual = self._verifier.hexdigest()
        if verified and actual != self._expected:
            raise SourceError(
                f"{self.label}: digest mismatch, the content hashes to {self._algorithm}:{actual}"
            )
        self.verified = verified
        return damage

    def close(self) -> None:
        expander = getattr(self, "_expander", None)
        if expander is not None:
            expander.stop()
        if self._verifier is not None:
            self._verifier.close()
        self._file.close()
