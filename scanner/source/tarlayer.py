"""A layer's tar stream parsed into its `LayerYield`: the second stage of reading a layer.

Headers are parsed by hand (pax and GNU long names, base-256 numbers, sparse entries) while
the bytes stream from `scanner.source.layerstream`; entry names are confined to the root, the
whiteouts noted, and candidate and metadata files handed to the selector's probe on the way.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from typing import IO, Any, cast

from msgspec import Struct, field

from scanner.errors import SourceError
from scanner.model import FileFacts, NodeKind, OciDigest, Skipped, Stage
from scanner.source.interface import Selector
from scanner.source.layerstream import Budget, CorruptLayer, LayerSpec, LayerStream
from scanner.source.limits import Limits, MiB

_CHUNK = MiB
_BLOCK = 512
_ZERO_BLOCK = bytes(_BLOCK)

#: One tar entry of a layer: (path, kind, size, mode, symlink target, hard-link target path).
Entry = tuple[str, NodeKind, int, int, str | None, str | None]


class LayerYield(Struct):
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
        except (CorruptLayer, SourceError) as e:
            self.error = e
            raise
        if len(data) < n:
            self.error = CorruptLayer(f"unexpected end of data inside {self._path} (truncated)")
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
            raise CorruptLayer("malformed pax extended header")
        key, eq, value = record[:-1].partition(b"=")
        if not eq:
            raise CorruptLayer("malformed pax extended header record")
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
                raise CorruptLayer("unexpected end of data inside a tar entry (truncated)")
            n -= k

    def _exact(self, buf: io.BufferedReader[Any], n: int, what: str) -> bytes:
        data = buf.read(n)
        if len(data) != n:
            raise CorruptLayer(f"unexpected end of data inside {what} (truncated)")
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
                    raise CorruptLayer("the layer holds no tar data")
                raise CorruptLayer("tar stream ends without an end-of-archive marker (truncated)")
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
                raise CorruptLayer(
                    f"invalid tar header after {len(entries)} entries (bad checksum)"
                )
            kind = header[156:157]
            try:
                try:
                    size = int(header[124:136].rstrip(b" \0") or b"0", 8)
                    mode = int(header[100:108].rstrip(b" \0") or b"0", 8) & 0o7777
                except ValueError:  # base-256 or odd padding: the careful parser
                    size = _octal(header[124:136])
                    mode = _octal(header[100:108]) & 0o7777
            except ValueError as e:
                raise CorruptLayer(
                    f"invalid number in a tar header after {len(entries)} entries"
                ) from e
            if size < 0:
                raise CorruptLayer(f"negative size in a tar header after {len(entries)} entries")
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
                        raise CorruptLayer(f"invalid pax size for {name!r}") from e
                    if size < 0:
                        raise CorruptLayer(f"invalid pax size for {name!r}")
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
                        raise CorruptLayer(f"unexpected end of data inside {path} (truncated)")
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
        except CorruptLayer:
            self._forget(path)
            raise

    def _guarded_skip(self, path: str, n: int, buf: io.BufferedReader[Any]) -> None:
        try:
            self._skip(buf, n)
        except CorruptLayer as e:
            self._forget(path)
            raise CorruptLayer(
                f"unexpected end of data inside {_clean(path)[0]} (truncated)"
            ) from e

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
        too_large = selector.metadata_too_large(size) if metadata else None
        if too_large is not None:
            out.skipped.append(Skipped(path, too_large, Stage.SOURCE))
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
    budget = budget or Budget(limits)
    out = LayerYield(spec.digest)
    with LayerStream(spec, budget) as stream:
        label = stream.label
        out.compression = stream.compression
        parser = _TarParser(out, selector, budget, label, stream.origin)
        try:
            parser.run(stream.reader)
        except CorruptLayer as e:
            out.corrupt = str(e)
        except OSError as e:
            raise SourceError(f"{label}: read error ({e.strerror or e})") from e
        out.corrupt = stream.finish(out.corrupt)
        out.compressed_bytes = stream.compressed
        out.expanded_bytes = stream.expanded
        if not stream.verified:
            out.skipped.append(
                Skipped(
                    str(spec.digest), "diff_id not verified: the layer is damaged", Stage.SOURCE
                )
            )
        for path, resolve in parser.deferred.items():
            if path in out.candidates:  # not dropped as damaged meanwhile
                out.facts[path] = resolve()
    return out


def check_cached(budget: Budget, layer: LayerYield, spec: LayerSpec) -> None:
    """Count a layer taken from the cache against ``budget`` as if it had been read now.

    Each fact a limit is checked against while streaming was kept in the yield, so a warm
    cache gives the answer a cold one would (issue 7: ``--max-size 1K`` passed with a warm
    cache). The caller only uses the cache when the blob size matches ``spec.size``.
    """
    label = f"layer {spec.digest}"
    limits = budget.limits
    if layer.largest_header:
        limits.check_header(label, layer.largest_header)
    path, size = layer.largest_file()
    limits.check_file(label, path, size)
    budget.count_entries(layer.tar_entries, label)
    compressed = layer.compressed_bytes if layer.compression != "tar" else None
    limits.check_layer(label, layer.expanded_bytes, compressed)
    budget.expanded += layer.expanded_bytes
    limits.check_image(label, budget.expanded)
