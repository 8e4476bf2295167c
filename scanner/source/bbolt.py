"""A read-only reader of bbolt databases (containerd's ``meta.db``), bounds-checked throughout.

The file is read with ``pread``, never locked or written, so a live containerd keeps running; the
newer of the two valid meta pages is used (bbolt writes copy-on-write, so the tree it names is
whole). The layout (go.etcd.io/bbolt, little-endian on every platform containerd ships for):
page header ``id u64, flags u16, count u16, overflow u32``; meta ``magic, version, page_size,
flags, root{pgid, sequence}, freelist, pgid, txid, checksum`` (FNV-1a 64 over the fields before
it); branch elements ``pos u32, ksize u32, pgid u64``; leaf elements ``flags u32, pos u32,
ksize u32, vsize u32`` with ``pos`` relative to the element; a bucket value is ``root u64,
sequence u64`` followed, when ``root`` is 0, by an inline page.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterator

from msgspec import Struct

from scanner.errors import SourceError

_MAGIC = 0xED0CDAED
_BRANCH, _LEAF, _META = 0x01, 0x02, 0x04
_BUCKET_LEAF = 0x01
_HEADER = 16
_ELEMENT = 16
_MAX_DEPTH = 64  # a real tree of 2^32 keys is about 8 levels deep; loops end here
_MAX_PAGE_SPAN = 256 * 1024 * 1024  # one page with its overflow


def _fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class _Meta(Struct, frozen=True):
    page_size: int
    root: int
    high_water: int
    txid: int


class Bucket:
    """One bucket: its keys and values, its sub-buckets."""

    def __init__(self, db: BoltDB, root: int, inline: bytes | None, depth: int) -> None:
        self._db = db
        self._root = root
        self._inline = inline
        self._depth = depth

    def items(self) -> Iterator[tuple[bytes, bytes, bool]]:
        """(key, value, is_bucket) in key order."""
        if self._inline is not None:
            yield from self._db.leaf_items(self._inline, 0, "inline bucket")
        else:
            yield from self._db.walk(self._root, self._depth)

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` (not a sub-bucket), or None."""
        for k, v, is_bucket in self.items():
            if k == key and not is_bucket:
                return v
        return None

    def bucket(self, key: bytes) -> Bucket | None:
        """The sub-bucket ``key``, or None."""
        for k, v, is_bucket in self.items():
            if k == key and is_bucket:
                return self._db.open_bucket(v, self._depth + 1)
        return None

    def buckets(self) -> Iterator[tuple[bytes, Bucket]]:
        """Every sub-bucket with its name."""
        for k, v, is_bucket in self.items():
            if is_bucket:
                yield k, self._db.open_bucket(v, self._depth + 1)


class BoltDB:
    """An open database file; ``root()`` is the bucket of top-level buckets."""

    def __init__(self, path: str) -> None:
        self.path = path
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            self._fd = os.open(path, flags)
        except OSError as e:
            raise SourceError(f"{path}: cannot open ({e.strerror or e})") from e
        st = os.fstat(self._fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(self._fd)
            raise SourceError(f"{path}: not a regular file")
        self.size = st.st_size
        try:
            self.meta = self._read_meta()
        except SourceError:
            os.close(self._fd)
            raise

    def close(self) -> None:
        """Release the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> BoltDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pread(self, n: int, offset: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise SourceError(f"{self.path}: page outside the file (damaged database)")
        data = os.pread(self._fd, n, offset)
        if len(data) != n:
            raise SourceError(f"{self.path}: short read (the file changed while read)")
        return data

    def _parse_meta(self, page: bytes) -> _Meta | None:
        if len(page) < _HEADER + 64:
            return None
        (flags,) = struct.unpack_from("<H", page, 8)
        magic, version, page_size, _flags, root, _seq, _free, high, txid, checksum = (
            struct.unpack_from("<IIIIQQQQQQ", page, _HEADER)
        )
        if not flags & _META or magic != _MAGIC or version != 2:
            return None
        if checksum != _fnv1a64(page[_HEADER : _HEADER + 56]):
            return None
        if page_size < 512 or page_size > 1 << 20 or page_size & (page_size - 1):
            return None
        return _Meta(page_size, root, high, txid)

    def _read_meta(self) -> _Meta:
        first = self._parse_meta(self._pread(min(self.size, 4096), 0))
        sizes = [first.page_size] if first is not None else [4096, 16384, 65536, 8192]
        candidates = [first] if first is not None else []
        for page_size in sizes:
            if self.size >= 2 * page_size:
                second = self._parse_meta(self._pread(_HEADER + 64, page_size))
                if second is not None and second.page_size == page_size:
                    candidates.append(second)
                    break
        if not candidates:
            raise SourceError(f"{self.path}: not a bbolt database (no valid meta page)")
        return max(candidates, key=lambda m: m.txid)

    def root(self) -> Bucket:
        """The top-level bucket."""
        return Bucket(self, self.meta.root, None, 0)

    def _page(self, pgid: int) -> bytes:
        ps = self.meta.page_size
        if pgid < 2 or pgid >= self.meta.high_water:
            raise SourceError(f"{self.path}: page {pgid} out of range (damaged database)")
        head = self._pread(_HEADER, pgid * ps)
        (overflow,) = struct.unpack_from("<I", head, 12)
        span = (overflow + 1) * ps
        if span > _MAX_PAGE_SPAN:
            raise SourceError(f"{self.path}: page {pgid} too large (damaged database)")
        return self._pread(span, pgid * ps)

    def walk(self, pgid: int, depth: int) -> Iterator[tuple[bytes, bytes, bool]]:
        """Leaf items under page ``pgid`` in key order."""
        stack = [(pgid, depth)]
        while stack:
            pg, d = stack.pop()
            if d > _MAX_DEPTH:
                raise SourceError(f"{self.path}: tree deeper than {_MAX_DEPTH} (a page loop?)")
            page = self._page(pg)
            flags, count = struct.unpack_from("<HH", page, 8)
            if flags & _LEAF:
                yield from self.leaf_items(page, 0, f"page {pg}")
            elif flags & _BRANCH:
                if _HEADER + count * _ELEMENT > len(page):
                    raise SourceError(f"{self.path}: page {pg} overflows (damaged database)")
                children = [
                    struct.unpack_from("<Q", page, _HEADER + i * _ELEMENT + 8)[0]
                    for i in range(count)
                ]
                stack.extend((child, d + 1) for child in reversed(children))
            else:
                raise SourceError(f"{self.path}: page {pg} is neither branch nor leaf")

    def leaf_items(self, page: bytes, base: int, what: str) -> Iterator[tuple[bytes, bytes, bool]]:
        """The elements of a leaf page found at ``page[base:]``."""
        if base + _HEADER > len(page):
            raise SourceError(f"{self.path}: {what} truncated (damaged database)")
        flags, count = struct.unpack_from("<HH", page, base + 8)
        if not flags & _LEAF:
            raise SourceError(f"{self.path}: {what} is not a leaf page")
        if base + _HEADER + count * _ELEMENT > len(page):
            raise SourceError(f"{self.path}: {what} overflows (damaged database)")
        for i in range(count):
            at = base + _HEADER + i * _ELEMENT
            eflags, pos, ksize, vsize = struct.unpack_from("<IIII", page, at)
            start = at + pos
            end = start + ksize + vsize
            if end > len(page):
                raise SourceError(f"{self.path}: {what} element outside the page")
            key = page[start : start + ksize]
            yield key, page[start + ksize : end], bool(eflags & _BUCKET_LEAF)

    def open_bucket(self, value: bytes, depth: int) -> Bucket:
        """The bucket a bucket-flagged leaf value describes."""
        if depth > _MAX_DEPTH:
            raise SourceError(f"{self.path}: buckets nested deeper than {_MAX_DEPTH}")
        if len(value) < 16:
            raise SourceError(f"{self.path}: bucket header truncated (damaged database)")
        (root,) = struct.unpack_from("<Q", value, 0)
        if root == 0:
            return Bucket(self, 0, value[16:], depth)
        return Bucket(self, root, None, depth)


def path_get(bucket: Bucket | None, *names: bytes) -> Bucket | None:
    """The bucket at ``names`` under ``bucket``, or None where one is missing."""
    for name in names:
        if bucket is None:
            return None
        bucket = bucket.bucket(name)
    return bucket
