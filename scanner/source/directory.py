"""Host directory source: a root such as ``/`` or a mounted ``/host``, walked in place.

The walk is iterative over ``os.scandir`` and never follows symlinks; it skips ``/proc``,
``/sys`` and ``/dev`` at the root, stays on each starting point's filesystem unless told
otherwise, and only stats candidates and metadata files. Nothing is ever written.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from scanner.errors import SourceError
from scanner.fsutil import atomic_write
from scanner.model import (
    AssetInfo,
    AssetKind,
    Candidate,
    FileRef,
    NodeKind,
    Progress,
    ProgressStage,
    Skipped,
    Stage,
    StatKey,
    stat_key,
)
from scanner.source.candidates import collect_candidates
from scanner.source.containment import normalize, resolve
from scanner.source.interface import Node, RootView, Selector, SignatureLayer

_PSEUDO = frozenset({"proc", "sys", "dev"})
#: The skipped reason of an ``include`` path that the root does not have.
INCLUDE_NOT_FOUND = "include path not found inside the root"
#: One shared node for the many regular files that are neither candidates nor metadata: the
#: tree only needs to know they exist (for symlink resolution); it saves an object per file.
_PLAIN = Node("", NodeKind.FILE)
#: A progress event every this many entries walked: often enough for a display, cheap enough
#: for a walk of millions of files (one comparison per directory).
_PROGRESS_EVERY = 2000
_LISTING_SCHEMA = "1"
_SMALL_FILE = 4096


class DirectorySource:
    """A host root filesystem; ``include`` limits the walk to subtrees (paths inside the root)."""

    def __init__(
        self,
        root: str | Path,
        *,
        include: Sequence[str] = (),
        all_filesystems: bool = False,
        reference: str | None = None,
        listing_cache: Path | None = None,
    ) -> None:
        path = os.path.abspath(os.fspath(root))
        if not os.path.isdir(path):
            raise SourceError(f"{root}: not a directory")
        self.root = path
        self.include = tuple(normalize(p) for p in include)
        self.all_filesystems = all_filesystems
        self.reference = reference if reference is not None else os.fspath(root)
        self.listing_cache = listing_cache

    #: A host root is no image: no digest for a signature to name, no signatures beside it.
    digests: tuple[str, ...] = ()

    def signature_material(self) -> list[SignatureLayer]:
        return []

    def open_view(self, selector: Selector) -> RootView:
        """Walk the root and return the tree, candidates (with host paths) and metadata."""
        listings = _Listings.load(self.listing_cache, self.root, selector.version)
        view = _Walk(self, selector, listings).run()
        listings.save()
        view.stats["dirs_from_cache"] = float(listings.hits)
        return view


class _Walk:
    def __init__(self, source: DirectorySource, selector: Selector, listings: _Listings) -> None:
        self.listings = listings
        self.root = source.root
        self.prefix = "" if source.root == "/" else source.root
        self.source = source
        self.selector = selector
        self.nodes: dict[str, Node] = {}
        self.metadata: dict[str, bytes] = {}
        self.skipped: list[Skipped] = []
        self.stat_keys: dict[str, StatKey] = {}
        self.visited: set[tuple[int, int]] = set()
        self.revisited = 0
        self.reported = 0  # len(nodes) at the last progress event

    def host(self, path: str) -> str:
        return self.root if path == "/" else self.prefix + path

    def progress(self, candidates: int | None = None) -> None:
        self.reported = len(self.nodes)
        if self.selector.on_progress is not None:
            found = len(self.stat_keys) if candidates is None else candidates
            self.selector.on_progress(
                Progress(ProgressStage.WALK, self.reported, None, "files", found)
            )

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append(Skipped(path, reason, Stage.SOURCE))

    def run(self) -> RootView:
        started = time.perf_counter()
        if not self.source.include:
            self.walk("/", os.stat(self.root).st_dev)
        for path in self.source.include:
            self.start(path)
        if self.source.include:
            # Ownership comes from the package databases: a walk limited to a library
            # subtree must still read them, or every packaged library would look unowned.
            for path in self.selector.databases:
                self.start(path, required=False)
            # Versions come from the install tree too (issue 7): the toolkit's version.json,
            # the wheels' dist-info kept beside a toolkit, cuDNN headers; read those of every
            # directory above an included subtree, as a full walk would.
            for path in _tree_metadata(self.source.include):
                self.start(path, required=False)
        candidates = self.candidates()
        self.progress(len(candidates))
        stats = {
            "nodes": float(len(self.nodes)),
            "dirs_revisited": float(self.revisited),
            "seconds_walk": time.perf_counter() - started,
        }
        return RootView(
            info=self.info(),
            nodes=self.nodes,
            metadata=self.metadata,
            candidates=candidates,
            skipped=self.skipped,
            stats=stats,
        )

    def start(self, path: str, *, required: bool = True) -> None:
        """Walk one ``include`` subtree, resolving symlinks on the way inside the root."""
        real = self.resolve(path, record=True)
        if real is None:
            if required:
                self.skip(path, INCLUDE_NOT_FOUND)
            return
        parts = real.split("/")
        if len(parts) > 1 and parts[1] in _PSEUDO:
            self.skip(real, "pseudo filesystem (/proc, /sys, /dev) is never scanned")
            return
        try:
            st = os.lstat(self.host(real))
        except OSError as e:
            self.skip(real, f"cannot read: {e.strerror or e}")
            return
        if stat.S_ISDIR(st.st_mode):
            if real != "/":
                self.nodes[real] = Node(real, NodeKind.DIR, mode=stat.S_IMODE(st.st_mode))
            self.walk(real, st.st_dev)
        elif stat.S_ISREG(st.st_mode):
            self.file(real, self.host(real), st)
        else:
            self.nodes[real] = Node(real, NodeKind.OTHER, mode=stat.S_IMODE(st.st_mode))

    def resolve(self, path: str, *, record: bool) -> str | None:
        """Resolve ``path`` on disk, symlinks interpreted inside the root; None if dangling.

        ``record``: the directories and symlinks passed on the way join the tree."""
        return resolve(path, self.record if record else self.lookup).path

    def lookup(self, path: str) -> Node | None:
        """The entry at ``path`` on disk as `containment.resolve` needs it; None if unreadable."""
        host = self.host(path)
        try:
            st = os.lstat(host)
            if stat.S_ISLNK(st.st_mode):
                return Node(path, NodeKind.SYMLINK, link=os.readlink(host))
        except OSError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return Node(path, NodeKind.DIR, mode=stat.S_IMODE(st.st_mode))
        return _PLAIN  # any other kind ends a resolution as a regular file does

    def record(self, path: str) -> Node | None:
        """`lookup`, adding the directories and symlinks it finds to the tree."""
        node = self.lookup(path)
        if node is not None and (
            node.kind is NodeKind.SYMLINK or (node.kind is NodeKind.DIR and path not in self.nodes)
        ):
            self.nodes[path] = node
        return node

    def walk(self, top: str, device: int) -> None:
        """Iterative walk below ``top`` (a real directory path inside the root)."""
        try:
            # The root itself may be a symlink (a mount path given by the user): follow it.
            st = os.stat(self.root) if top == "/" else os.lstat(self.host(top))
        except OSError as e:
            self.skip(top, f"cannot read directory: {e.strerror or e}")
            return
        key = (st.st_dev, st.st_ino)
        if key in self.visited:
            self.revisited += 1
            return
        self.visited.add(key)
        nodes = self.nodes
        is_candidate = self.selector.is_candidate
        is_metadata = self.selector.is_metadata
        listings = self.listings
        stack: list[tuple[str, os.stat_result]] = [(top, st)]
        while stack:
            directory, dst = stack.pop()
            base = "" if directory == "/" else directory
            at_root = directory == "/"
            mark = len(stack)
            cached = listings.lookup(directory, dst)
            if cached is not None:
                self.replay(base, cached, at_root, device, stack)
                _libraries_first(stack, mark)
                if len(nodes) - self.reported >= _PROGRESS_EVERY:
                    self.progress()
                continue
            plain: list[str] = []
            others: list[tuple[str, str, str | None]] = []
            complete = True
            try:
                it = os.scandir(self.host(directory))
            except OSError as e:
                self.skip(directory, f"cannot read directory: {e.strerror or e}")
                continue
            with it:
                try:
                    for entry in it:
                        name = entry.name
                        path = base + "/" + name
                        try:
                            # Regular files first: they are most entries, and d_type answers
                            # these tests without a system call.
                            if entry.is_file(follow_symlinks=False):
                                if is_candidate(path) or is_metadata(path):
                                    self.file(path, entry.path, entry.stat(follow_symlinks=False))
                                    others.append((name, "f", None))
                                else:
                                    nodes[path] = _PLAIN
                                    plain.append(name)
                            elif entry.is_dir(follow_symlinks=False):
                                est = entry.stat(follow_symlinks=False)
                                self.directory(path, name, est, at_root, device, stack)
                                others.append((name, "d", None))
                            elif entry.is_symlink():
                                link = os.readlink(entry.path)
                                nodes[path] = Node(path, NodeKind.SYMLINK, link=link)
                                others.append((name, "l", link))
                            else:
                                nodes[path] = Node(path, NodeKind.OTHER)
                                others.append((name, "o", None))
                        except OSError as e:
                            complete = False
                            self.skip(path, f"cannot read: {e.strerror or e}")
                except OSError as e:
                    complete = False
                    self.skip(directory, f"directory listing failed: {e.strerror or e}")
            if complete:
                listings.store(directory, dst, plain, others)
            _libraries_first(stack, mark)
            if len(nodes) - self.reported >= _PROGRESS_EVERY:
                self.progress()

    def replay(
        self,
        base: str,
        cached: tuple[list[str], list[tuple[str, str, str | None]]],
        at_root: bool,
        device: int,
        stack: list[tuple[str, os.stat_result]],
    ) -> None:
        """Re-create an unchanged directory's entries from the listing cache.

        Only regular files that are neither candidates nor metadata are taken on trust; every
        other entry is stat'ed again, so candidates get a fresh (dev, inode, size, mtime) key.
        """
        plain, others = cached
        nodes = self.nodes
        for name in plain:
            nodes[base + "/" + name] = _PLAIN
        for name, kind, link in others:
            path = base + "/" + name
            if kind == "l":
                nodes[path] = Node(path, NodeKind.SYMLINK, link=link)
                continue
            if kind == "o":
                nodes[path] = Node(path, NodeKind.OTHER)
                continue
            try:
                st = os.lstat(self.host(path))
            except OSError as e:
                self.skip(path, f"cannot read: {e.strerror or e}")
                continue
            if kind == "d" and stat.S_ISDIR(st.st_mode):
                self.directory(path, name, st, at_root, device, stack)
            elif kind == "f" and stat.S_ISREG(st.st_mode):
                self.file(path, self.host(path), st)
            else:
                self.skip(path, "changed type while being scanned")

    def directory(
        self,
        path: str,
        name: str,
        st: os.stat_result,
        at_root: bool,
        device: int,
        stack: list[tuple[str, os.stat_result]],
    ) -> None:
        """Record a directory and queue it unless it is a pseudo fs, a mount or seen before."""
        if at_root and name in _PSEUDO:
            self.nodes[path] = Node(path, NodeKind.DIR, mode=0o555)
            return
        self.nodes[path] = Node(path, NodeKind.DIR, mode=stat.S_IMODE(st.st_mode))
        if st.st_dev != device and not self.source.all_filesystems:
            self.skip(
                path, "mount point of another filesystem; not scanned without --all-filesystems"
            )
            return
        key = (st.st_dev, st.st_ino)
        if key in self.visited:  # a bind mount loop or an included subtree
            self.revisited += 1
            return
        self.visited.add(key)
        stack.append((path, st))

    def file(self, path: str, host_path: str, st: os.stat_result) -> None:
        """Record a regular file that is a candidate or metadata (its stat is needed)."""
        self.nodes[path] = Node(path, NodeKind.FILE, size=st.st_size, mode=stat.S_IMODE(st.st_mode))
        if self.selector.is_candidate(path):
            key = stat_key(st)
            self.stat_keys[path] = key
            if self.selector.on_candidate is not None:
                self.selector.on_candidate(path, host_path, key)
        if self.selector.is_metadata(path):
            too_large = self.selector.metadata_too_large(st.st_size)
            if too_large is not None:
                self.skip(path, too_large)
                return
            data = _read_regular(host_path, self.selector.max_metadata_bytes)
            if isinstance(data, str):
                self.skip(path, data)
            else:
                self.metadata[path] = data

    def candidates(self) -> list[Candidate]:
        out: list[Candidate] = []
        known = list(self.stat_keys)  # files whose own path matched, stat taken in the walk
        for path, aliases in collect_candidates(self.nodes, self.selector.is_candidate, known):
            host_path = self.host(path)
            key = self.stat_keys.get(path)
            if key is None:
                try:
                    st = os.lstat(host_path)
                except OSError as e:
                    self.skip(path, f"cannot stat: {e.strerror or e}")
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                key = stat_key(st)
            out.append(
                Candidate(
                    ref=FileRef(path),
                    size=key[2],
                    aliases=aliases,
                    host_path=host_path,
                    stat_key=key,
                )
            )
        return out

    def small_file(self, path: str) -> str | None:
        """First line of a small file inside the root (symlinks resolved inside the root)."""
        real = self.resolve(path, record=False)
        if real is None:
            return None
        data = _read_regular(self.host(real), _SMALL_FILE)
        if isinstance(data, str):
            return None
        lines = data.decode("utf-8", "replace").strip().splitlines()
        return lines[0].strip() if lines and lines[0].strip() else None

    def info(self) -> AssetInfo:
        hostname = self.small_file("/etc/hostname")
        if hostname is None:
            import socket  # only for the live root

            hostname = socket.gethostname() if self.root == "/" else self.root
        return AssetInfo(
            kind=AssetKind.HOST,
            name=hostname,
            reference=self.source.reference,
            machine_id=self.small_file("/etc/machine-id"),
        )


#: Tree-level version sources of an install directory (see `_tree_metadata`).
_TREE_METADATA = ("version.json", "version.txt", "dist-info", "include")


def _tree_metadata(include: Sequence[str]) -> list[str]:
    """Where the install trees above ``include`` paths keep their version metadata:
    ``/usr/local/cuda-13.0/lib`` -> ``/usr/local/cuda-13.0/version.json``, ``.../dist-info``,
    ``.../include`` (and the same under ``/usr/local`` and ``/usr``). Only files the selector
    marks as metadata are kept from them."""
    out: dict[str, None] = {}
    for path in include:
        parts = [p for p in path.split("/") if p]
        for i in range(len(parts) - 1, 0, -1):
            base = "/" + "/".join(parts[:i])
            for name in _TREE_METADATA:
                out.setdefault(f"{base}/{name}")
    return list(out)


_LIBRARY_DIRS = frozenset(
    {
        "usr",
        "opt",
        "local",
        "lib",
        "lib64",
        "lib32",
        "site-packages",
        "dist-packages",
        "nvidia",
        "cudnn",
        "targets",
        "x86_64-linux-gnu",
        "aarch64-linux-gnu",
        "sbsa-linux",
    }
)


def _libraries_first(stack: list[tuple[str, os.stat_result]], mark: int) -> None:
    """Order the directories just queued so library directories are walked first.

    The walk is depth-first from the end of the stack; visiting lib/, site-packages/,
    cuda*/ and the like early lets hashing of GPU libraries start while the rest of the
    tree is still being walked.
    """
    if len(stack) - mark > 1:

        def likely(item: tuple[str, os.stat_result]) -> bool:
            name = item[0].rpartition("/")[2]
            return name in _LIBRARY_DIRS or name.startswith(("cuda", "python3", "lib"))

        stack[mark:] = sorted(stack[mark:], key=likely)


class _Listings:
    """Directory listings of earlier host scans, reused while a directory is unchanged.

    A directory's (device, inode, mtime_ns, ctime_ns) changes whenever an entry is added,
    removed or renamed in it, and ctime cannot be set back by a user, so an unchanged key
    means the same names. Candidates and metadata files are still stat'ed and read on every
    scan; only the classification of the other files is reused.
    """

    def __init__(self, path: Path | None, version: str, dirs: dict[str, list[object]]) -> None:
        self.path = path
        self.version = version
        self.old = dirs
        self.new: dict[str, list[object]] = {}
        self.hits = 0

    @classmethod
    def load(cls, directory: Path | None, root: str, version: str) -> _Listings:
        if directory is None:
            return cls(None, version, {})
        key = hashlib.sha256(f"{root}\0{version}".encode()).hexdigest()[:24]
        path = directory / f"{key}.json"
        try:
            raw = json.loads(path.read_bytes())
            if raw.get("schema") == _LISTING_SCHEMA and raw.get("version") == version:
                return cls(path, version, raw["dirs"])
        except (OSError, ValueError, KeyError, AttributeError):
            pass  # missing or corrupt: a full walk rebuilds it
        return cls(path, version, {})

    @staticmethod
    def _stamp(st: os.stat_result) -> list[int]:
        return [st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]

    def lookup(
        self, directory: str, st: os.stat_result
    ) -> tuple[list[str], list[tuple[str, str, str | None]]] | None:
        rec = self.old.get(directory)
        if not isinstance(rec, list) or len(rec) != 3 or rec[0] != self._stamp(st):
            return None
        try:
            plain = str(rec[1]).split("\0") if rec[1] else []
            entries: list[list[str | None]] = rec[2]  # type: ignore[assignment]
            others = [(str(n), str(k), None if ln is None else str(ln)) for n, k, ln in entries]
        except (TypeError, ValueError):
            return None
        self.hits += 1
        self.new[directory] = rec
        return plain, others

    def store(
        self,
        directory: str,
        st: os.stat_result,
        plain: list[str],
        others: list[tuple[str, str, str | None]],
    ) -> None:
        if self.path is not None:
            self.new[directory] = [self._stamp(st), "\0".join(plain), others]

    def save(self) -> None:
        """Write atomically; directories not seen in this scan are dropped."""
        if self.path is None or (self.new == self.old):
            return
        data = {"schema": _LISTING_SCHEMA, "version": self.version, "dirs": self.new}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(data, separators=(",", ":")).encode())
        except OSError:
            pass  # a read-only cache only costs the next scan a full walk


def _read_regular(host_path: str, limit: int) -> bytes | str:
    """The bytes of a regular file (at most ``limit``), or why it could not be read.

    O_NOFOLLOW and O_NONBLOCK plus an fstat check keep a file swapped for a symlink or a FIFO
    after the walk from redirecting or blocking the read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(host_path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return f"cannot open: {e.strerror or e}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                return f"file grew past the {limit} byte limit while being read"
        return b"".join(chunks)
    except OSError as e:
        return f"cannot read: {e.strerror or e}"
    finally:
        os.close(fd)
