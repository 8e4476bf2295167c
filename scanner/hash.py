"""Hash stage: streaming SHA-256 (plus MD5 where an owner recorded it) in one read per file.

Files are hashed in parallel threads: hashlib releases the GIL on large buffers, so two
threads keep two cores busy. Memory stays bounded by the chunk size whatever the file size.
Host scans keep a digest cache keyed by (device, inode, size, mtime_ns, ctime_ns). What a file
*is* (its ELF facts) is computed by a function the pipeline passes in, in the same job.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from scanner.errors import DetectError, HashError, NotElfError
from scanner.fsutil import atomic_write
from scanner.model import (
    Candidate,
    Digests,
    ElfFacts,
    FileFacts,
    Progress,
    ProgressFn,
    ProgressStage,
    Sha256,
    Skipped,
    Stage,
    StatKey,
)

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

CHUNK = 4 * 1024 * 1024
#: Bumped when what the cache stores changes meaning (2: ctime joined the key).
CACHE_SCHEMA = "3"  # 3: ElfFacts.toolkit_line


#: ELF analysis of a file on this machine: (path on the host, path in the scanned root).
AnalyzeHostFile = Callable[[str, str], ElfFacts]


def may_be_dpkg_owned(path: str) -> bool:
    """Whether a file may need MD5 before its owner is known (dpkg records only MD5).

    In an image, a layer is read once and the package database may come in a later layer,
    so MD5 is computed up front unless the path belongs to a manager that records SHA-256
    (pip site-packages); this keeps MD5 off the large wheel-installed libraries.
    """
    return "/site-packages/" not in path and "/dist-packages/" not in path


def facts_of(digests: Digests, analyze: Callable[[], ElfFacts]) -> FileFacts:
    """A candidate's facts: its digests and ELF facts, or why it is no (readable) library."""
    try:
        return FileFacts(digests=digests, elf=analyze())
    except NotElfError as e:
        return FileFacts(digests=digests, error=str(e), not_elf=True)
    except DetectError as e:
        return FileFacts(digests=digests, error=str(e))


def hash_file(path: str, *, md5: bool = False, follow: bool = False) -> Digests:
    """Hash a regular file on this machine in one sequential read; a final symlink is refused
    unless ``follow`` (``/proc/PID/map_files/...`` links must be followed)."""
    sha = hashlib.sha256()
    m = hashlib.md5(usedforsecurity=False) if md5 else None
    size = 0
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        # O_NONBLOCK: a file swapped for a FIFO after the walk must not block the scan.
        fd = os.open(path, flags)
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
            "toolkit_line": e.toolkit_line,
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
            toolkit_line=e["toolkit_line"],
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
        """Write the cache atomically when it changed (OSError propagates)."""
        if self._path is None or not self._dirty:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"schema": CACHE_SCHEMA, "entries": self._entries}).encode()
        atomic_write(self._path, data)
        self._dirty = False


class HostHasher:
    """Hashes and analyzes host candidates on a thread pool, starting while the walk runs.

    The directory source reports each candidate as soon as it finds it (`early`), so hashing
    overlaps the walk; `finish` then settles the owners' needs (MD5 for dpkg) and waits.
    Results go through the (dev, inode, size, mtime, ctime) cache, so an unchanged host is not
    read.
    """

    def __init__(
        self,
        *,
        cache_path: Path | None,
        version: str,
        workers: int,
        analyze: AnalyzeHostFile,
        progress: ProgressFn | None = None,
    ) -> None:
        self.cache_path = cache_path
        self.cache = HostFactsCache(cache_path)
        self.version = version
        self.analyze = analyze
        self.progress = progress
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self.jobs: dict[str, tuple[StatKey, bool, Future[FileFacts | Skipped]]] = {}

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The hashing threads, started on first use (a warm rescan reads no file)."""
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(
                max_workers=self.workers or os.cpu_count() or 2, thread_name_prefix="gpuprov-hash"
            )
        return self._pool

    def shutdown(self) -> None:
        """Stop the threads (queued jobs cancelled), if they were started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def early(self, path: str, host_path: str, stat_key: StatKey) -> None:
        """Start on a candidate found by the walk (MD5 guessed from the path, as for images)."""
        md5 = may_be_dpkg_owned(path)
        # Facts cached without MD5 are left to `finish`: the guess may be wrong (no dpkg owner),
        # and a warm rescan must not re-read the file only to learn so.
        if self.cache.get(stat_key, self.version, need_md5=False) is None:
            job = self.pool.submit(self._work, path, host_path, md5)
            self.jobs[path] = (stat_key, md5, job)

    def _work(self, path: str, host_path: str, md5: bool) -> FileFacts | Skipped:
        try:
            digests = hash_file(host_path, md5=md5)
        except HashError as e:
            return Skipped(path, str(e), Stage.HASH)
        return facts_of(digests, lambda: self.analyze(host_path, path))

    def finish(
        self,
        candidates: Sequence[Candidate],
        need_md5: Callable[[Candidate], bool],
        skipped: list[Skipped],
        unread: dict[str, str],
    ) -> dict[str, FileFacts]:
        """Facts of every host candidate (``need_md5``: its owner recorded MD5); why a
        candidate could not be read goes to ``unread`` (path -> reason). The pool is shut down
        and the cache saved."""
        out: dict[str, FileFacts] = {}
        try:
            pending = self._settle(candidates, need_md5, out)
            self._wait(pending, len(candidates), out, unread)
        finally:
            self.shutdown()
        try:
            self.cache.save()
        except OSError as e:
            reason = f"cannot write the host cache: {e}"
            skipped.append(Skipped(str(self.cache_path), reason, Stage.HASH))
        return out

    def _settle(
        self,
        candidates: Sequence[Candidate],
        need_md5: Callable[[Candidate], bool],
        out: dict[str, FileFacts],
    ) -> list[tuple[Candidate, Future[FileFacts | Skipped]]]:
        """Cached facts into ``out``; the jobs still to wait for, largest file first."""
        pending: list[tuple[Candidate, Future[FileFacts | Skipped]]] = []
        for cand in sorted(candidates, key=lambda c: c.size, reverse=True):
            if cand.host_path is None or cand.stat_key is None:
                continue
            md5 = need_md5(cand)
            cached = self.cache.get(cand.stat_key, self.version, need_md5=md5)
            if cached is not None:
                out[cand.ref.path] = cached
                continue
            job = self.jobs.pop(cand.ref.path, None)
            # A job still queued is cancelled and submitted again here, in largest-first
            # order, so the two threads finish together whatever order the walk took.
            if (
                job is not None
                and job[0] == cand.stat_key
                and (job[1] or not md5)
                and not job[2].cancel()
            ):
                pending.append((cand, job[2]))
            else:
                work = self.pool.submit(self._work, cand.ref.path, cand.host_path, md5)
                pending.append((cand, work))
        return pending

    def _wait(
        self,
        pending: list[tuple[Candidate, Future[FileFacts | Skipped]]],
        candidates: int,
        out: dict[str, FileFacts],
        unread: dict[str, str],
    ) -> None:
        progress = self.progress
        total = sum(cand.size for cand, _ in pending)
        hashed = 0
        if progress is not None and pending:
            progress(Progress(ProgressStage.HASH, 0, total, "bytes", candidates))
        for cand, future in pending:
            res = future.result()
            hashed += cand.size
            if progress is not None:
                progress(Progress(ProgressStage.HASH, hashed, total, "bytes", candidates))
            if isinstance(res, Skipped):
                unread[cand.ref.path] = res.reason
                continue
            out[cand.ref.path] = res
            assert cand.stat_key is not None
            self.cache.put(cand.stat_key, self.version, res)
