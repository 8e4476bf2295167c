"""Hash stage: streaming SHA-256 (plus MD5 where an owner recorded it) in one read per file.

Files are hashed in parallel threads: hashlib releases the GIL on large buffers, so two
threads keep two cores busy. Memory stays bounded by the chunk size whatever the file size.
Host scans keep a digest cache keyed by (device, inode, size, mtime_ns, ctime_ns).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import stat
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from scanner.errors import HashError
from scanner.model import Digests, ElfFacts, FileFacts, Sha256, StatKey

CHUNK = 4 * 1024 * 1024
#: Bumped when what the cache stores changes meaning (2: ctime joined the key).
CACHE_SCHEMA = "2"


def hash_file(path: str, *, md5: bool = False) -> Digests:
    """Hash a file on this machine in one sequential read."""
    sha = hashlib.sha256()
    m = hashlib.md5(usedforsecurity=False) if md5 else None
    size = 0
    try:
        # O_NONBLOCK: a file swapped for a FIFO after the walk must not block the scan.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise HashError(f"{path}: cannot open for hashing: {e.strerror}") from e
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise HashError(f"{path}: not a regular file (replaced while the scan ran?)")
        with contextlib.suppress(AttributeError, OSError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while True:
            n = os.readv(fd, [buf])
            if n == 0:
                break
            chunk = view[:n]
            sha.update(chunk)
            if m is not None:
                m.update(chunk)
            size += n
    except OSError as e:
        raise HashError(f"{path}: read failed while hashing: {e.strerror}") from e
    finally:
        os.close(fd)
    return Digests(size=size, sha256=Sha256(sha.hexdigest()), md5=m.hexdigest() if m else None)


def hash_region(path: str, offset: int, size: int, *, md5: bool = False) -> Digests:
    """Hash ``size`` bytes at ``offset`` of a regular file (a member inside an archive)."""
    sha = hashlib.sha256()
    m = hashlib.md5(usedforsecurity=False) if md5 else None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise HashError(f"{path}: cannot open for hashing: {e.strerror}") from e
    try:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        pos, end = offset, offset + size
        while pos < end:
            n = os.preadv(fd, [view[: min(CHUNK, end - pos)]], pos)
            if n == 0:
                raise HashError(f"{path}: ends {end - pos} bytes before the member's end")
            sha.update(view[:n])
            if m is not None:
                m.update(view[:n])
            pos += n
    except OSError as e:
        raise HashError(f"{path}: read failed while hashing: {e.strerror}") from e
    finally:
        os.close(fd)
    return Digests(size=size, sha256=Sha256(sha.hexdigest()), md5=m.hexdigest() if m else None)


def hash_stream(stream: IO[bytes], size: int, *, md5: bool = False) -> Digests:
    """Hash exactly ``size`` bytes of a stream (fewer means a truncated entry)."""
    sha = hashlib.sha256()
    m = hashlib.md5(usedforsecurity=False) if md5 else None
    remaining = size
    while remaining > 0:
        chunk = stream.read(min(CHUNK, remaining))
        if not chunk:
            raise HashError(f"stream ended {remaining} bytes early")
        remaining -= len(chunk)
        sha.update(chunk)
        if m is not None:
            m.update(chunk)
    return Digests(size=size, sha256=Sha256(sha.hexdigest()), md5=m.hexdigest() if m else None)


def hash_reader(stream: IO[bytes]) -> Digests:
    """SHA-256 and size of everything left in ``stream``, read to its end in chunks (a vendor
    archive, a wheel member: inputs whose size is not known or not trusted in advance)."""
    sha = hashlib.sha256()
    size = 0
    while chunk := stream.read(CHUNK):
        sha.update(chunk)
        size += len(chunk)
    return Digests(size=size, sha256=Sha256(sha.hexdigest()))


class SpoolingHasher:
    """Hashes a stream while copying it to a private spool file, overlapping the two with the
    producer: the caller's thread keeps decompressing while a worker hashes and writes.

    Used for image layers, where a file's bytes pass by exactly once and ELF analysis needs
    random access afterwards.
    """

    def __init__(self, spool_dir: str | None, *, md5: bool) -> None:
        self._sha = hashlib.sha256()
        self._md5 = hashlib.md5(usedforsecurity=False) if md5 else None
        fd, self.path = tempfile.mkstemp(prefix="gpuprov-spool-", dir=spool_dir)
        self._file = os.fdopen(fd, "wb", buffering=0)
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
        self._error: BaseException | None = None
        self._worker = threading.Thread(target=self._run, name="gpuprov-spool", daemon=True)
        self._worker.start()
        self.size = 0

    def _run(self) -> None:
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            if self._error is not None:
                continue
            try:
                self._sha.update(chunk)
                if self._md5 is not None:
                    self._md5.update(chunk)
                self._file.write(chunk)
            except BaseException as e:  # surfaced to the caller in finish()
                self._error = e

    def feed(self, stream: IO[bytes], size: int) -> None:
        """Read exactly ``size`` bytes from ``stream`` (fewer means a truncated entry)."""
        remaining = size
        while remaining > 0:
            chunk = stream.read(min(CHUNK, remaining))
            if not chunk:
                raise HashError(f"stream ended {remaining} bytes early")
            remaining -= len(chunk)
            self.size += len(chunk)
            self._queue.put(chunk)

    def finish(self) -> Digests:
        """Wait for the worker and return the digests; the spool file stays for analysis."""
        self._queue.put(None)
        self._worker.join()
        self._file.close()
        if self._error is not None:
            raise HashError(f"spooling failed: {self._error}") from self._error
        md5 = self._md5.hexdigest() if self._md5 is not None else None
        return Digests(size=self.size, sha256=Sha256(self._sha.hexdigest()), md5=md5)

    def discard(self) -> None:
        """Stop the worker if still running and remove the spool file."""
        if self._worker.is_alive():
            self._queue.put(None)
            self._worker.join()
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def facts_to_json(facts: FileFacts) -> dict[str, Any]:
    """Serialize facts for the on-disk caches (tuples become lists)."""
    d = facts.digests
    out: dict[str, Any] = {
        "size": d.size,
        "sha256": d.sha256,
        "md5": d.md5,
        "error": facts.error,
        "not_elf": facts.not_elf,
    }
    if facts.elf is not None:
        e = facts.elf
        out["elf"] = {
            "machine": e.machine,
            "soname": e.soname,
            "needed": list(e.needed),
            "version_ints": [list(p) for p in e.version_ints],
            "markers": list(e.markers),
            "version_strings": list(e.version_strings),
            "cudart_build": e.cudart_build,
            "referenced_cuda_majors": list(e.referenced_cuda_majors),
        }
    return out


def facts_from_json(data: dict[str, Any]) -> FileFacts:
    """Inverse of `facts_to_json`; raises KeyError/TypeError/ValueError on a corrupt entry."""
    digests = Digests(size=int(data["size"]), sha256=Sha256(str(data["sha256"])), md5=data["md5"])
    elf = None
    if data.get("elf") is not None:
        e = data["elf"]
        elf = ElfFacts(
            machine=str(e["machine"]),
            soname=e["soname"],
            needed=tuple(e["needed"]),
            version_ints=tuple((str(n), int(v)) for n, v in e["version_ints"]),
            markers=tuple(e["markers"]),
            version_strings=tuple(e["version_strings"]),
            cudart_build=e["cudart_build"],
            referenced_cuda_majors=tuple(int(x) for x in e["referenced_cuda_majors"]),
        )
    return FileFacts(
        digests=digests, elf=elf, error=data.get("error"), not_elf=bool(data["not_elf"])
    )


class HostFactsCache:
    """Facts of host files keyed by `StatKey`, persisted as one JSON file.

    An unchanged file is neither re-read nor re-analyzed on the next scan; any change of the
    key (a rewrite, a replaced inode, a touched mtime) misses the cache. ctime is part of the
    key because mtime is not evidence: a library rewritten in place at the same size with its
    mtime set back would otherwise keep its old digest, and a warm cache would call a
    modified file verified.
    """

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._entries: dict[str, dict[str, Any]] = {}
        self._dirty = False
        self._lock = threading.Lock()
        if path is not None and path.exists():
            try:
                raw = json.loads(path.read_text())
                if raw.get("schema") == CACHE_SCHEMA and isinstance(raw.get("entries"), dict):
                    self._entries = raw["entries"]
            except (OSError, ValueError, AttributeError):
                self._entries = {}  # a corrupt cache is rebuilt, never trusted

    @staticmethod
    def _key(stat_key: StatKey, version: str) -> str:
        return ":".join((version, *map(str, stat_key)))

    def get(self, stat_key: StatKey, version: str, *, need_md5: bool) -> FileFacts | None:
        """Cached facts for this exact file state, or None."""
        raw = self._entries.get(self._key(stat_key, version))
        if raw is None:
            return None
        try:
            facts = facts_from_json(raw)
        except (KeyError, TypeError, ValueError):
            return None
        if need_md5 and facts.digests.md5 is None:
            return None
        return facts

    def put(self, stat_key: StatKey, version: str, facts: FileFacts) -> None:
        with self._lock:
            self._entries[self._key(stat_key, version)] = facts_to_json(facts)
            self._dirty = True

    def save(self) -> None:
        """Write the cache atomically (temp file + rename) when it changed."""
        if self._path is None or not self._dirty:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"schema": CACHE_SCHEMA, "entries": self._entries}))
        os.replace(tmp, self._path)
        self._dirty = False
