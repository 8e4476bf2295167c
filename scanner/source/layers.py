"""Layer reading and squashing shared by every image source (archives, layouts, registry).

Each layer blob is read once, sequentially: its compression is sniffed by magic bytes, it is
decompressed under `Limits`, parsed as a tar stream and turned into a `LayerYield` (entries,
whiteouts, candidate facts, metadata bytes). Yields are applied in order onto a `Tree`.
"""

from __future__ import annotations

import hashlib
import io
import queue
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import IO, Any, Literal, Protocol, cast

from scanner.errors import SourceError, UnsafeArchiveError
from scanner.model import FileFacts, NodeKind, OciDigest, Progress, Skipped, Stage
from scanner.source.interface import Node, Selector, resolve_in_tree

MiB = 1 << 20
GiB = 1 << 30
_CHUNK = MiB
_BLOCK = 512
_ZERO_BLOCK = bytes(_BLOCK)
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")

#: One tar entry of a layer: (path, kind, size, mode, symlink target, hard-link target path).
Entry = tuple[str, NodeKind, int, int, str | None, str | None]


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource caps that stop hostile layers (decompression bombs, entry floods).

    A compressed layer may expand to ``max(max_ratio * compressed size,
    ratio_allowance_bytes)``: real layers inflate 2-10 times, a zlib stream of zeros about
    1000 times, and the allowance keeps tiny layers of empty files legal. Every limit is
    checked while the layer streams (a bomb is refused after a bounded amount of inflating)
    and again on a layer taken from the cache, against the limits of *this* scan, so the
    verdict never depends on what the cache holds (`check_cached`).
    """

    max_ratio: float = 100.0
    ratio_allowance_bytes: int = 64 * MiB
    max_layer_bytes: int = 16 * GiB  # expanded bytes of one layer (cuDNN layers: 1-3 GB)
    max_image_bytes: int = 32 * GiB  # expanded bytes across all layers of one image
    max_file_bytes: int = 16 * GiB  # one tar entry
    max_entries: int = 5_000_000  # tar entries across all layers of one image
    max_header_bytes: int = MiB  # pax / GNU long-name data of one entry

    def __post_init__(self) -> None:
        for name in (
            "max_ratio",
            "max_layer_bytes",
            "max_image_bytes",
            "max_file_bytes",
            "max_entries",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be positive")
        if self.ratio_allowance_bytes < 0 or self.max_header_bytes < _BLOCK:
            raise ValueError("Limits.ratio_allowance_bytes must be >= 0, max_header_bytes >= 512")

    def ratio_cap(self, compressed: int) -> float:
        """Most expanded bytes a compressed layer of ``compressed`` bytes may yield."""
        return max(compressed * self.max_ratio, self.ratio_allowance_bytes)

    def check_layer(self, label: str, expanded: int, compressed: int | None) -> None:
        """Refuse a layer past ``max_layer_bytes`` or (``compressed`` given) the ratio cap."""
        if expanded > self.max_layer_bytes:
            raise UnsafeArchiveError(
                f"{label}: layer expands to more than {self.max_layer_bytes} bytes "
                "(limit max_layer_bytes, --max-layer-size)"
            )
        if compressed is not None and expanded > self.ratio_cap(compressed):
            raise UnsafeArchiveError(
                f"{label}: expands more than {self.max_ratio:g} times its compressed size of "
                f"{compressed} bytes (decompression bomb? limit max_ratio, --max-ratio)"
            )

    def check_image(self, label: str, expanded: int) -> None:
        if expanded > self.max_image_bytes:
            raise UnsafeArchiveError(
                f"{label}: image expands to more than {self.max_image_bytes} bytes "
                "(limit max_image_bytes, --max-size)"
            )

    def check_file(self, label: str, path: str, size: int) -> None:
        if size > self.max_file_bytes:
            raise UnsafeArchiveError(
                f"{label}: entry {path} of {size} bytes exceeds {self.max_file_bytes} "
                "(limit max_file_bytes)"
            )

    def check_header(self, label: str, size: int) -> None:
        if size > self.max_header_bytes:
            raise UnsafeArchiveError(
                f"{label}: a tar extended header of {size} bytes exceeds "
                f"{self.max_header_bytes} (limit max_header_bytes)"
            )


class Readable(Protocol):
    """The least a blob stream must offer: sequential reads and close."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class LayerSpec:
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


@dataclass(slots=True)
class LayerYield:
    """What one layer contributes; independent of lower layers, so it is cached by digest."""

    digest: OciDigest
    entries: list[Entry] = field(default_factory=list)
    whiteouts: list[str] = field(default_factory=list)  # paths deleted from lower layers
    opaque: list[str] = field(default_factory=list)  # dirs whose lower content is hidden
    candidates: list[str] = field(default_factory=list)  # files whose path is a candidate
    facts: dict[str, FileFacts] = field(default_factory=dict)  # probed candidate files
    metadata: dict[str, bytes] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    compressed_bytes: int = 0
    expanded_bytes: int = 0
    corrupt: str | None = None  # why reading stopped early; the entries before it are kept
    # What a cached yield needs to be checked again against the limits of a later scan.
    compression: str = "tar"  # "gzip", "zstd" or "tar" (uncompressed: no ratio)
    tar_entries: int = 0  # tar headers counted against max_entries
    largest_header: int = 0  # largest pax / GNU long-name data, against max_header_bytes

    def largest_file(self) -> tuple[str, int]:
        """The largest regular file entry (path, size), as checked against max_file_bytes."""
        best = ("", 0)
        for path, kind, size, _mode, _link, hard in self.entries:
            if size > best[1] and kind is NodeKind.FILE and hard is None:
                best = (path, size)
        return best


class YieldCache(Protocol):
    """Storage of layer yields by digest (see `scanner.source.layercache.LayerCache`)."""

    def get(self, digest: OciDigest, selector: Selector) -> LayerYield | None: ...

    def put(self, layer: LayerYield, selector: Selector) -> bool: ...


def split_digest(digest: str) -> tuple[str, str]:
    """Validate an OCI digest (sha256/sha512, lowercase hex) and split it; SourceError if bad."""
    if not _DIGEST_RE.fullmatch(digest):
        raise SourceError(f"invalid or unsupported digest {digest!r}")
    algorithm, _, hexdigest = digest.partition(":")
    return algorithm, hexdigest


class _Corrupt(Exception):
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
        return self._raw(_CHUNK if n is None or n < 0 else n)

    def drain(self) -> None:
        """Read to the end so the digest covers the whole blob."""
        self._head = b""
        while self._raw(_CHUNK):
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

    def check_cached(self, layer: LayerYield, spec: LayerSpec) -> None:
        """Count a layer taken from the cache as if it had been read now.

        Each fact a limit is checked against while streaming was kept in the yield, so a warm
        cache gives the answer a cold one would (issue 7: ``--max-size 1K`` passed with a warm
        cache). The caller only uses the cache when the blob size matches ``spec.size``.
        """
        label = f"layer {spec.digest}"
        limits = self.limits
        if layer.largest_header:
            limits.check_header(label, layer.largest_header)
        path, size = layer.largest_file()
        limits.check_file(label, path, size)
        self.count_entries(layer.tar_entries, label)
        compressed = layer.compressed_bytes if layer.compression != "tar" else None
        limits.check_layer(label, layer.expanded_bytes, compressed)
        self.expanded += layer.expanded_bytes
        limits.check_image(label, self.expanded)


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
            if self._done:
                return 0
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


class _Plain(_Expander):
    def _produce(self) -> bytes:
        data = self._blob.read(_CHUNK)
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
                return d.decompress(d.unconsumed_tail, _CHUNK)
            if d.eof:
                rest = d.unused_data
                while len(rest) < 2:
                    more = self._blob.read(_CHUNK)
                    if not more:
                        break
                    rest += more
                if rest[:2] != b"\x1f\x8b":
                    # Padding after the last member is ignored, as gzip(1) does; the blob
                    # digest still covers it.
                    self._done = True
                    return b""
                self._d = d = zlib.decompressobj(31)
                return d.decompress(rest, _CHUNK)
            chunk = self._blob.read(_CHUNK)
            if not chunk:
                raise _Corrupt("gzip data ends before the end of its stream (truncated)")
            return d.decompress(chunk, _CHUNK)
        except zlib.error as e:
            raise _Corrupt(f"gzip data is corrupt ({e})") from e


class _Unzstd(_Expander):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        import zstandard  # imported here: only zstd layers pay for it

        self._error: type[Exception] = zstandard.ZstdError
        # stream_reader bounds the output of each read (a zstd bomb cannot balloon memory);
        # a truncated frame ends the stream early, which the tar parser then reports.
        self._r = zstandard.ZstdDecompressor().stream_reader(
            cast(IO[bytes], self._blob), read_size=_CHUNK, read_across_frames=True, closefd=False
        )

    def _produce(self) -> bytes:
        try:
            data = self._r.read(_CHUNK)
        except self._error as e:
            raise _Corrupt(f"zstd data is corrupt ({e})") from e
        if not data:
            self._done = True
        return data


class _MemberReader(io.RawIOBase):
    """One tar entry's bytes for the probe; remembers damage even if the probe swallows it."""

    def __init__(self, buf: io.BufferedReader[Any], size: int, path: str) -> None:
        super().__init__()
        self._buf = buf
        self._remaining = size
        self._path = path
        self.consumed = 0
        self.error: BaseException | None = None

    def readable(self) -> bool:
        return True

    def _take(self, n: int) -> bytes:
        try:
            data = self._buf.read(n)
        except (_Corrupt, SourceError) as e:
            self.error = e
            raise
        if len(data) < n:
            self.error = _Corrupt(f"unexpected end of data inside {self._path} (truncated)")
            raise self.error
        self._remaining -= n
        self.consumed += n
        return data

    def read(self, size: int | None = -1) -> bytes:
        if self._remaining <= 0:
            return b""
        n = self._remaining if size is None or size < 0 else min(size, self._remaining)
        return self._take(n)

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        data = self.read(len(out))
        out[: len(data)] = data
        return len(data)


def _clean(name: str) -> tuple[str, str | None]:
    """Absolute in-root path for a tar entry name, and why the name was unsafe (None if not)."""
    n = name[2:] if name.startswith("./") else name
    if (
        n
        and n[0] != "/"
        and ".." not in n
        and "//" not in n
        and "/./" not in n
        and not n.startswith("./")
        and not n.endswith("/.")
        and n != "."
    ):
        return "/" + n.rstrip("/"), None
    reason: str | None = "is absolute" if n.startswith("/") else None
    parts: list[str] = []
    for part in n.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            else:
                reason = "climbs above the root with '..'"
            continue
        parts.append(part)
    return "/" + "/".join(parts), reason


def _nts(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _parse_pax(data: bytes) -> dict[str, str]:
    """Parse pax extended header records ("LEN key=value\\n")."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.find(b" ", pos)
        try:
            length = int(data[pos:space]) if space > pos else 0
        except ValueError:
            length = 0
        record = data[space + 1 : pos + length]
        if length <= 0 or pos + length > len(data) or not record.endswith(b"\n"):
            raise _Corrupt("malformed pax extended header")
        key, eq, value = record[:-1].partition(b"=")
        if not eq:
            raise _Corrupt("malformed pax extended header record")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


_LONGNAME = b"L"
_LONGLINK = b"K"
_PAX = {b"x", b"X"}  # X: the old Solaris spelling
_GLOBAL = b"g"
_REG = {b"0", b"\0", b"7"}  # regular, old regular, contiguous
_SPARSE = b"S"
_HARD, _SYM, _DIR = b"1", b"2", b"5"
_NO_DATA = {b"1", b"2", b"3", b"4", b"5", b"6"}  # links, devices, dirs, fifos carry no data
_POSIX_MAGIC = b"ustar\x0000"


def _octal(field: bytes) -> int:
    """A numeric header field: octal text, or GNU base-256 when the high bit is set."""
    if field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return value - 256 ** (len(field) - 1) if field[0] == 0xFF else value
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _checksum_ok(header: bytes) -> bool:
    try:
        stored = _octal(header[148:156])
    except ValueError:
        return False
    blanked = header[:148] + b"        " + header[156:]
    unsigned = sum(blanked)
    # Some old writers summed signed bytes.
    return stored in (unsigned, unsigned - 256 * sum(1 for b in blanked if b > 127))


class _TarParser:
    """Streams a layer's tar entries into a `LayerYield`, probing candidates on the way.

    Headers are parsed here rather than by `tarfile`, whose per-header cost dominated layers
    of many small files; pax and GNU long names, base-256 sizes and sparse headers are handled.
    """

    def __init__(
        self,
        out: LayerYield,
        selector: Selector,
        budget: Budget,
        label: str,
        origin: tuple[str, int] | None = None,
    ) -> None:
        self.out = out
        self.origin = origin  # set only for uncompressed layers stored in a regular file
        self.deferred: dict[str, Callable[[], FileFacts]] = {}
        self.selector = selector
        self.budget = budget
        self.limits = budget.limits
        self.label = label
        self._scratch = memoryview(bytearray(_CHUNK))

    def _skip(self, buf: io.BufferedReader[Any], n: int) -> None:
        while n > 0:
            k = buf.readinto(self._scratch[: min(n, _CHUNK)])
            if not k:
                raise _Corrupt("unexpected end of data inside a tar entry (truncated)")
            n -= k

    def _exact(self, buf: io.BufferedReader[Any], n: int, what: str) -> bytes:
        data = buf.read(n)
        if len(data) != n:
            raise _Corrupt(f"unexpected end of data inside {what} (truncated)")
        return data

    def run(self, buf: io.BufferedReader[Any]) -> None:
        out = self.out
        entries = out.entries
        is_candidate = self.selector.is_candidate
        is_metadata = self.selector.is_metadata
        max_file = self.limits.max_file_bytes
        room = self.limits.max_entries - self.budget.entries
        read = buf.read
        pax: dict[str, str] = {}
        long_name: str | None = None
        long_link: str | None = None
        blocks = 0
        count = 0
        while True:
            header = read(_BLOCK)
            if len(header) < _BLOCK:
                if not header and blocks == 0:
                    raise _Corrupt("the layer holds no tar data")
                raise _Corrupt("tar stream ends without an end-of-archive marker (truncated)")
            blocks += 1
            if header == _ZERO_BLOCK:
                self.budget.entries += count
                out.tar_entries = count
                return
            try:
                stored = int(header[148:156].rstrip(b" \0") or b"0", 8)
            except ValueError:
                stored = -1
            # adler32's low half is 1 + sum(bytes) mod 65521: the unsigned header sum (with
            # the checksum field counted as spaces) checked at C speed; else the careful test.
            if (zlib.adler32(header[:148] + b"        " + header[156:]) & 0xFFFF) != (
                1 + stored
            ) % 65521 and not _checksum_ok(header):
                raise _Corrupt(f"invalid tar header after {len(entries)} entries (bad checksum)")
            kind = header[156:157]
            try:
                try:
                    size = int(header[124:136].rstrip(b" \0") or b"0", 8)
                    mode = int(header[100:108].rstrip(b" \0") or b"0", 8) & 0o7777
                except ValueError:  # base-256 or odd padding: the careful parser
                    size = _octal(header[124:136])
                    mode = _octal(header[100:108]) & 0o7777
            except ValueError as e:
                raise _Corrupt(
                    f"invalid number in a tar header after {len(entries)} entries"
                ) from e
            if size < 0:
                raise _Corrupt(f"negative size in a tar header after {len(entries)} entries")
            padding = -size % _BLOCK
            if kind in _PAX or kind == _GLOBAL or kind == _LONGNAME or kind == _LONGLINK:
                if size > self.out.largest_header:
                    self.limits.check_header(self.label, size)
                    self.out.largest_header = size
                data = self._exact(buf, size, "a tar extended header")
                self._skip(buf, padding)
                if kind == _LONGNAME:
                    long_name = _nts(data)
                elif kind == _LONGLINK:
                    long_link = _nts(data)
                elif kind != _GLOBAL:  # global headers carry nothing we use
                    pax.update(_parse_pax(data))
                continue
            count += 1
            if count > room:
                self.budget.count_entries(count, self.label)
            sparse = kind == _SPARSE
            if sparse and header[482]:
                # Old GNU sparse: extension blocks follow while their "isextended" byte is set.
                while self._exact(buf, _BLOCK, "a sparse header")[504]:
                    pass
            if long_name is not None:
                name = long_name
            else:
                raw = header[:100].split(b"\0", 1)[0]
                if header[257:265] == _POSIX_MAGIC and header[345] != 0:
                    raw = header[345:500].split(b"\0", 1)[0] + b"/" + raw
                name = raw.decode("utf-8", "surrogateescape")
            if pax:
                name = pax.get("path", name)
                if "size" in pax:
                    try:
                        size = int(pax["size"])
                    except ValueError as e:
                        raise _Corrupt(f"invalid pax size for {name!r}") from e
                    if size < 0:
                        raise _Corrupt(f"invalid pax size for {name!r}")
                    padding = -size % _BLOCK
                sparse = sparse or any(k.startswith("GNU.sparse.") for k in pax)
            if kind == b"\0" and name.endswith("/"):
                kind = _DIR
            if kind in _REG or kind == _SPARSE:
                # The common case, kept inline: a regular file that is not a whiteout.
                path, unsafe = _clean(name)
                base = path[path.rfind("/") + 1 :]
                if base and unsafe is None and not base.startswith(".wh."):
                    pax, long_name, long_link = {}, None, None
                    if size > max_file:
                        self.limits.check_file(self.label, path, size)
                    entries.append((path, NodeKind.FILE, size, mode, None, None))
                    consumed = 0
                    candidate = is_candidate(path)
                    if candidate:
                        out.candidates.append(path)
                    if candidate or is_metadata(path):
                        consumed = self._guarded(path, size, sparse, buf, candidate)
                    remaining = size - consumed + padding
                    if remaining > 65536:
                        self._guarded_skip(path, remaining, buf)
                    elif remaining and len(read(remaining)) != remaining:
                        self._forget(path)
                        raise _Corrupt(f"unexpected end of data inside {path} (truncated)")
                    continue
            if long_link is not None:
                link = long_link
            else:
                link = header[157:257].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            link = pax.get("linkpath", link)
            pax, long_name, long_link = {}, None, None
            has_data = kind not in _NO_DATA
            consumed = self._entry(kind, name, link, size if has_data else 0, mode, sparse, buf)
            if has_data:
                self._guarded_skip(name, size - consumed + padding, buf)

    def _guarded(
        self, path: str, size: int, sparse: bool, buf: io.BufferedReader[Any], candidate: bool
    ) -> int:
        """Read a candidate or metadata file's content; a damaged one is not kept."""
        try:
            return self._content(path, size, sparse, buf, candidate)
        except _Corrupt:
            self._forget(path)
            raise

    def _guarded_skip(self, path: str, n: int, buf: io.BufferedReader[Any]) -> None:
        try:
            self._skip(buf, n)
        except _Corrupt as e:
            self._forget(path)
            raise _Corrupt(f"unexpected end of data inside {_clean(path)[0]} (truncated)") from e

    def _forget(self, name: str) -> None:
        """Drop the entry just recorded: its data was cut short, so its content is unknown."""
        out = self.out
        path = _clean(name)[0]
        if out.entries and out.entries[-1][0] == path:
            out.entries.pop()
        out.facts.pop(path, None)
        self.deferred.pop(path, None)
        out.metadata.pop(path, None)
        if out.candidates and out.candidates[-1] == path:
            out.candidates.pop()

    def _entry(
        self,
        kind: bytes,
        name: str,
        link: str,
        size: int,
        mode: int,
        sparse: bool,
        buf: io.BufferedReader[Any],
    ) -> int:
        out = self.out
        path, unsafe = _clean(name)
        if path == "/":
            return 0
        if unsafe is not None:
            out.skipped.append(
                Skipped(
                    path,
                    f"tar entry {name!r} in {self.label} {unsafe}; placed at {path} inside "
                    "the root, as container runtimes do",
                    Stage.SOURCE,
                )
            )
        parent, _, base = path.rpartition("/")
        parent = parent or "/"
        if base.startswith(".wh."):
            if base == ".wh..wh..opq":
                out.opaque.append(parent)
            elif not base.startswith(".wh..wh.") and len(base) > 4:
                out.whiteouts.append(parent.rstrip("/") + "/" + base[4:])
            return 0
        if kind in _REG or kind == _SPARSE:
            self.limits.check_file(self.label, path, size)
            out.entries.append((path, NodeKind.FILE, size, mode, None, None))
            candidate = self.selector.is_candidate(path)
            if candidate:
                out.candidates.append(path)
            if candidate or self.selector.is_metadata(path):
                return self._guarded(path, size, sparse, buf, candidate)
            return 0
        if kind == _HARD:
            target, _ = _clean(link)
            if target == path or target == "/":
                out.skipped.append(
                    Skipped(path, f"hard link to {link!r} in {self.label} is invalid", Stage.SOURCE)
                )
            else:
                out.entries.append((path, NodeKind.FILE, 0, mode, None, target))
                if self.selector.is_candidate(path):
                    out.candidates.append(path)
        elif kind == _SYM:
            out.entries.append((path, NodeKind.SYMLINK, 0, mode, link, None))
        elif kind == _DIR:
            out.entries.append((path, NodeKind.DIR, 0, mode, None, None))
        else:  # devices, fifos, unknown types: listed, never read
            out.entries.append((path, NodeKind.OTHER, 0, mode, None, None))
        return 0

    def _content(
        self, path: str, size: int, sparse: bool, buf: io.BufferedReader[Any], candidate: bool
    ) -> int:
        selector = self.selector
        out = self.out
        metadata = selector.is_metadata(path)
        if sparse:
            if candidate or metadata:
                out.skipped.append(
                    Skipped(
                        path, f"sparse tar entry in {self.label}: content not read", Stage.SOURCE
                    )
                )
            return 0
        if metadata and size > selector.max_metadata_bytes:
            out.skipped.append(
                Skipped(
                    path,
                    f"metadata file of {size} bytes exceeds the {selector.max_metadata_bytes} "
                    "byte limit",
                    Stage.SOURCE,
                )
            )
            metadata = False
        if metadata:
            data = self._exact(buf, size, path)
            out.metadata[path] = data
            if candidate:
                out.facts[path] = selector.probe(path, io.BytesIO(data), size)
            return size
        if candidate:
            at = None
            if self.origin is not None and selector.probe_at is not None:
                at = (self.origin[0], self.origin[1] + buf.tell())
            reader = _MemberReader(buf, size, path)
            if at is not None and selector.probe_at is not None:
                located = selector.probe_at(path, cast(IO[bytes], reader), size, at)
                if callable(located):
                    # The probe reads the bytes where they lie, on another thread; the
                    # stream skips them (the layer digest still covers them).
                    self.deferred[path] = located
                    return reader.consumed
                facts = located
            else:
                facts = selector.probe(path, cast(IO[bytes], reader), size)
            if reader.error is not None:
                raise reader.error
            out.facts[path] = facts
            return reader.consumed
        return 0


def read_layer(
    spec: LayerSpec, selector: Selector, limits: Limits, budget: Budget | None = None
) -> LayerYield:
    """Read one layer blob once, verifying its digest; damaged data ends the yield early.

    Raises SourceError on a digest or size mismatch and UnsafeArchiveError past a limit.
    """
    label = f"layer {spec.digest}"
    algorithm, expected = split_digest(spec.digest)
    budget = budget or Budget(limits)
    out = LayerYield(spec.digest)
    try:
        stream = spec.open()
    except OSError as e:
        raise SourceError(f"{label}: cannot open the blob ({e.strerror or e})") from e
    threaded = spec.size is None or spec.size > 4 * MiB
    hashers: list[_Hasher] = []
    try:
        blob = _Blob(stream, spec.size, label)
        head = blob.sniff()
        compression = (
            "gzip" if head[:2] == b"\x1f\x8b" else "zstd" if head == b"\x28\xb5\x2f\xfd" else "tar"
        )
        out.compression = compression
        expander_type = {"gzip": _Gunzip, "zstd": _Unzstd, "tar": _Plain}[compression]
        expander = expander_type(blob, budget, spec.size, label, compression != "tar")
        # For a plain tar the blob is the diff, so one digest serves both kinds of check.
        verifier = _Hasher(algorithm, threaded)
        hashers.append(verifier)
        hash_blob = spec.verify == "blob" or compression == "tar"
        if hash_blob:
            blob.hasher = verifier
            verifier.update(head)
        else:
            expander.hasher = verifier
        buf = io.BufferedReader(expander, buffer_size=_CHUNK)
        try:
            origin = spec.origin if compression == "tar" else None
            parser = _TarParser(out, selector, budget, label, origin)
            parser.run(buf)
        except _Corrupt as e:
            out.corrupt = str(e)
        except OSError as e:
            raise SourceError(f"{label}: read error ({e.strerror or e})") from e
        verified = True
        if not hash_blob:
            if out.corrupt is None:
                scratch = memoryview(bytearray(_CHUNK))
                try:
                    while buf.readinto(scratch):
                        pass
                except _Corrupt as e:
                    out.corrupt = str(e)
            verified = out.corrupt is None
        blob.drain()
        out.compressed_bytes = blob.count
        out.expanded_bytes = expander.expanded
        if spec.size is not None and blob.count != spec.size:
            raise SourceError(
                f"{label}: blob has {blob.count} bytes but its descriptor says {spec.size}"
            )
        actual = verifier.hexdigest()
        if verified and actual != expected:
            raise SourceError(
                f"{label}: digest mismatch, the content hashes to {algorithm}:{actual}"
            )
        if not verified:
            out.skipped.append(
                Skipped(
                    str(spec.digest), "diff_id not verified: the layer is damaged", Stage.SOURCE
                )
            )
        for path, resolve in parser.deferred.items():
            if path in out.candidates:  # not dropped as damaged meanwhile
                out.facts[path] = resolve()
    finally:
        for h in hashers:
            h.close()
        stream.close()
    return out


class Tree:
    """The squashed filesystem being built; a child index makes whiteouts of subtrees cheap."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.children: dict[str, set[str]] = {"/": set()}
        self.facts: dict[str, FileFacts] = {}
        self.metadata: dict[str, bytes] = {}
        self.candidates: set[str] = set()  # files whose own path is a candidate
        self.skipped: list[Skipped] = []

    def remove(self, path: str) -> None:
        """Delete ``path`` and everything under it."""
        if self.nodes.get(path) is None:
            return
        parent = path.rpartition("/")[0] or "/"
        siblings = self.children.get(parent)
        if siblings is not None:
            siblings.discard(path)
        self._drop(path)

    def clear(self, directory: str) -> None:
        """Delete everything under ``directory`` (an opaque whiteout), keeping it."""
        for child in list(self.children.get(directory, ())):
            self._drop(child)
        if directory in self.children:
            self.children[directory] = set()

    def _drop(self, path: str) -> None:
        stack = [path]
        while stack:
            p = stack.pop()
            node = self.nodes.pop(p, None)
            if node is None:
                continue
            if node.kind is NodeKind.DIR:
                stack.extend(self.children.pop(p, ()))
            else:
                self.facts.pop(p, None)
                self.metadata.pop(p, None)
                self.candidates.discard(p)

    def _dirs(self, directory: str, layer: OciDigest | None) -> None:
        """Create missing parent directories; a non-directory in the way is replaced."""
        todo: list[str] = []
        p = directory
        while p != "/":
            node = self.nodes.get(p)
            if node is not None and node.kind is NodeKind.DIR:
                break
            todo.append(p)
            p = p.rpartition("/")[0] or "/"
        for p in reversed(todo):
            self.remove(p)
            self._link(Node(p, NodeKind.DIR, layer=layer, mode=0o755))

    def _link(self, node: Node) -> None:
        p = node.path
        self.nodes[p] = node
        self.children.setdefault(p.rpartition("/")[0] or "/", set()).add(p)
        if node.kind is NodeKind.DIR:
            self.children.setdefault(p, set())

    def put(self, node: Node) -> None:
        """Add or replace one node; a directory over a directory keeps its content."""
        p = node.path
        parent = p.rpartition("/")[0] or "/"
        if parent != "/":
            pnode = self.nodes.get(parent)
            if pnode is None or pnode.kind is not NodeKind.DIR:
                self._dirs(parent, node.layer)
        old = self.nodes.get(p)
        if old is not None:
            if old.kind is NodeKind.DIR and node.kind is NodeKind.DIR:
                self.nodes[p] = node
                return
            self.remove(p)
        self._link(node)

    def apply(self, layer: LayerYield) -> None:
        """Apply one layer: its whiteouts hide lower content, then its entries in tar order."""
        digest = layer.digest
        for path in layer.whiteouts:
            self.remove(path)
        for directory in layer.opaque:
            self.clear(directory)
        nodes, children = self.nodes, self.children
        candidates = set(layer.candidates)
        file_kind, dir_kind = NodeKind.FILE, NodeKind.DIR
        for path, kind, size, mode, link, hard in layer.entries:
            if hard is not None:
                self._hardlink(path, hard, mode, digest)
            else:
                node = Node(path, kind, size, link, digest, mode)
                parent = path[: path.rfind("/")] or "/"
                pnode = nodes.get(parent)
                if path not in nodes and (
                    parent == "/" or (pnode is not None and pnode.kind is dir_kind)
                ):
                    # The common case of a new entry in an existing directory, kept inline.
                    nodes[path] = node
                    children[parent].add(path)
                    if kind is dir_kind:
                        children[path] = set()
                else:
                    self.put(node)
                if kind is file_kind:
                    facts = layer.facts.get(path)
                    if facts is not None:
                        self.facts[path] = facts
                    data = layer.metadata.get(path)
                    if data is not None:
                        self.metadata[path] = data
            if path in candidates:
                self.candidates.add(path)

    def _hardlink(self, path: str, target: str, mode: int, layer: OciDigest) -> None:
        src = self.nodes.get(target)
        if src is None or src.kind is NodeKind.DIR:
            self.skipped.append(
                Skipped(path, f"hard link to {target} in layer {layer}: no such file", Stage.SOURCE)
            )
            return
        facts = self.facts.get(target)
        data = self.metadata.get(target)
        self.put(Node(path, src.kind, src.size, src.link, layer, mode))
        if facts is not None:
            self.facts[path] = facts
        if data is not None:
            self.metadata[path] = data


def collect_candidates(
    nodes: dict[str, Node],
    is_candidate: Callable[[str], bool],
    files: Iterable[str] | None = None,
) -> list[tuple[str, tuple[str, ...]]]:
    """Real candidate files with their sorted symlink aliases, sorted by path.

    A regular file is a candidate when its own path matches (``files``, when the caller
    already knows them), or when a matching symlink resolves to it; every symlink resolving to
    a candidate is listed as an alias.
    """
    real: dict[str, list[str]] = {}
    if files is None:
        files = (p for p, n in nodes.items() if n.kind is NodeKind.FILE and is_candidate(p))
    for path in files:
        node = nodes.get(path)
        if node is not None and node.kind is NodeKind.FILE:
            real[path] = []
    links: list[tuple[str, str]] = []
    for path, node in nodes.items():
        if node.kind is not NodeKind.SYMLINK:
            continue
        target = resolve_in_tree(nodes, path)
        if target is None:
            continue
        tnode = nodes.get(target)
        if tnode is not None and tnode.kind is NodeKind.FILE:
            links.append((path, target))
    for path, target in links:
        if target not in real and is_candidate(path):
            real[target] = []
    for path, target in links:
        if target in real:
            real[target].append(path)
    return [(p, tuple(sorted(real[p]))) for p in sorted(real)]


def symlink_loops(
    nodes: dict[str, Node], is_candidate: Callable[[str], bool], max_hops: int = 40
) -> list[Skipped]:
    """A `Skipped` record for each symlink named like a GPU library that never resolves
    because its chain loops (issue 2, section 7: a symlink loop must be reported, not silently
    dropped). Dangling links (a missing target, a target outside the root) stay silent: they
    are common in real images (development links to absent stubs)."""
    out: list[Skipped] = []
    for path, node in nodes.items():
        if node.kind is not NodeKind.SYMLINK or not is_candidate(path):
            continue
        if resolve_in_tree(nodes, path, max_hops) is not None:
            continue
        if _exceeds_hops(nodes, path, max_hops):
            out.append(
                Skipped(
                    path,
                    f"symlink loop: {path} -> {node.link} never reaches a file "
                    f"(more than {max_hops} links); not followed",
                    Stage.SOURCE,
                )
            )
    return sorted(out, key=lambda s: s.path)


def _exceeds_hops(nodes: dict[str, Node], path: str, max_hops: int) -> bool:
    """Whether resolving ``path`` inside the root runs out of hops (a loop) rather than
    reaching a missing component (dangling); mirrors `resolve_in_tree`."""
    hops = 0
    todo = [p for p in path.split("/") if p and p != "."]
    done: list[str] = []
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        node = nodes.get("/" + "/".join([*done, part]))
        if node is None:
            return False
        if node.kind is NodeKind.SYMLINK and node.link is not None:
            hops += 1
            if hops > max_hops:
                return True
            if node.link.startswith("/"):
                done = []
            todo = [p for p in node.link.split("/") if p] + todo
            continue
        done.append(part)
    return False


@dataclass
class Squashed:
    """The result of applying an image's layers: the tree, what was skipped, counters."""

    tree: Tree
    skipped: list[Skipped]
    stats: dict[str, float]


def _cached(cache: YieldCache | None, spec: LayerSpec, selector: Selector) -> LayerYield | None:
    """The cached yield of ``spec``, when it describes this very blob.

    The ratio limit and the descriptor size check depend on the compressed blob, which the
    digest alone does not fix for a docker-archive diff_id: a yield read from a blob of
    another size (or of an unknown one) is not used, so the blob is read and checked.
    """
    if cache is None or spec.size is None:
        return None
    layer = cache.get(spec.digest, selector)
    if layer is None or layer.compressed_bytes != spec.size:
        return None
    return layer


def squash(
    layers: Sequence[LayerSpec],
    selector: Selector,
    *,
    cache: YieldCache | None = None,
    limits: Limits | None = None,
) -> Squashed:
    """Read (or fetch from the cache) each layer once and apply them in order."""
    limits = limits or Limits()
    budget = Budget(limits)
    tree = Tree()
    skipped: list[Skipped] = []
    seen: dict[OciDigest, LayerYield] = {}
    stats = dict.fromkeys(
        ("layers_read", "layers_cached", "layers_reused", "bytes_read", "bytes_expanded"), 0.0
    )
    started = time.perf_counter()
    for spec in layers:
        layer = seen.get(spec.digest)
        if layer is not None:
            stats["layers_reused"] += 1
        elif (layer := _cached(cache, spec, selector)) is not None:
            budget.check_cached(layer, spec)
            stats["layers_cached"] += 1
        else:
            layer = read_layer(spec, selector, limits, budget)
            stats["layers_read"] += 1
            stats["bytes_read"] += layer.compressed_bytes
            stats["bytes_expanded"] += layer.expanded_bytes
            if cache is not None and layer.corrupt is None:
                cache.put(layer, selector)
        if spec.digest not in seen:
            skipped.extend(layer.skipped)
            if layer.corrupt is not None:
                skipped.append(
                    Skipped(
                        str(spec.digest),
                        f"layer is damaged: {layer.corrupt}; the {len(layer.entries)} entries "
                        "read before the damage were kept",
                        Stage.SOURCE,
                    )
                )
        seen[spec.digest] = layer
        tree.apply(layer)
        if selector.on_progress is not None:
            done = int(stats["layers_read"] + stats["layers_cached"] + stats["layers_reused"])
            found = len(tree.candidates)
            selector.on_progress(Progress("layers", done, len(layers), "layers", found))
    stats["layers_total"] = float(len(layers))
    stats["entries"] = float(len(tree.nodes))
    stats["seconds_layers"] = time.perf_counter() - started
    skipped.extend(tree.skipped)
    return Squashed(tree, skipped, stats)


def read_alias_targets(
    layers: Sequence[LayerSpec],
    tree: Tree,
    targets: Iterable[str],
    selector: Selector,
    *,
    cache: YieldCache | None = None,
    limits: Limits | None = None,
) -> int:
    """Analyze files that are candidates only through a library-named symlink.

    Layers are analyzed by each file's own name during their one read, so the target of
    ``libcudnn_evil.so -> /etc/passwd`` was not read; it must still be reported for what it
    is (issue 7). The layer each such file came from is read once more, analyzing just those
    files, under the same per-layer limits; the yield is cached under a selector version that
    names those files. Returns how many layers were read again (not taken from the cache).
    """
    limits = limits or Limits()
    by_layer: dict[OciDigest, set[str]] = {}
    for path in targets:
        node = tree.nodes.get(path)
        if node is not None and node.layer is not None and path not in tree.facts:
            by_layer.setdefault(node.layer, set()).add(path)
    specs = {spec.digest: spec for spec in reversed(layers)}
    reread = 0
    for digest, paths in sorted(by_layer.items()):
        spec = specs.get(digest)
        if spec is None:
            continue
        wanted = frozenset(paths)
        named = hashlib.sha256("\0".join(sorted(wanted)).encode()).hexdigest()[:16]
        only = replace(
            selector,
            is_candidate=wanted.__contains__,
            is_metadata=lambda _path: False,
            on_candidate=None,
            version=f"{selector.version}/alias-targets:{named}",
        )
        layer = _cached(cache, spec, only)
        if layer is not None:
            Budget(limits).check_cached(layer, spec)
        else:
            layer = read_layer(spec, only, limits)
            reread += 1
            if cache is not None and layer.corrupt is None:
                cache.put(layer, only)
        for path in wanted:
            facts = layer.facts.get(path)
            if facts is not None:
                tree.facts[path] = facts
    return reread
