"""Host directory source: a root such as ``/`` or a mounted ``/host``, walked in place.

The walk is iterative over ``os.scandir`` and never follows symlinks; it skips ``/proc``,
``/sys`` and ``/dev`` at the root, stays on each starting point's filesystem unless told
otherwise, and only stats candidates and metadata files. Nothing is ever written.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from scanner.errors import SourceError
from scanner.model import AssetInfo, AssetKind, Candidate, FileRef, NodeKind, Skipped
from scanner.source.interface import Node, RootView, Selector, normalize
from scanner.source.layers import collect_candidates

_PSEUDO = frozenset({"proc", "sys", "dev"})
_MAX_HOPS = 40
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
    ) -> None:
        path = os.path.abspath(os.fspath(root))
        if not os.path.isdir(path):
            raise SourceError(f"{root}: not a directory")
        self.root = path
        self.include = tuple(normalize(p) for p in include)
        self.all_filesystems = all_filesystems
        self.reference = reference if reference is not None else os.fspath(root)

    def open_view(self, selector: Selector) -> RootView:
        """Walk the root and return the tree, candidates (with host paths) and metadata."""
        return _Walk(self, selector).run()


class _Walk:
    def __init__(self, source: DirectorySource, selector: Selector) -> None:
        self.root = source.root
        self.prefix = "" if source.root == "/" else source.root
        self.source = source
        self.selector = selector
        self.nodes: dict[str, Node] = {}
        self.metadata: dict[str, bytes] = {}
        self.skipped: list[Skipped] = []
        self.stat_keys: dict[str, tuple[int, int, int, int]] = {}
        self.visited: set[tuple[int, int]] = set()
        self.revisited = 0

    def host(self, path: str) -> str:
        return self.root if path == "/" else self.prefix + path

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append(Skipped(path, reason, "source"))

    def run(self) -> RootView:
        started = time.perf_counter()
        if not self.source.include:
            self.walk("/", os.stat(self.root).st_dev)
        for path in self.source.include:
            self.start(path)
        candidates = self.candidates()
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

    def start(self, path: str) -> None:
        """Walk one ``include`` subtree, resolving symlinks on the way inside the root."""
        real = self.resolve(path, record=True)
        if real is None:
            self.skip(path, "include path not found inside the root")
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
        """Resolve ``path`` on disk, symlinks interpreted inside the root; None if dangling."""
        hops = 0
        todo = [p for p in normalize(path).split("/") if p]
        done: list[str] = []
        while todo:
            part = todo.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            current = "/" + "/".join([*done, part])
            try:
                st = os.lstat(self.host(current))
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode):
                try:
                    link = os.readlink(self.host(current))
                except OSError:
                    return None
                if record:
                    self.nodes[current] = Node(current, NodeKind.SYMLINK, link=link)
                hops += 1
                if hops > _MAX_HOPS:
                    return None
                if link.startswith("/"):
                    done = []
                todo = [p for p in link.split("/") if p and p != "."] + todo
                continue
            if todo and not stat.S_ISDIR(st.st_mode):
                return None
            if record and stat.S_ISDIR(st.st_mode) and current not in self.nodes:
                self.nodes[current] = Node(current, NodeKind.DIR, mode=stat.S_IMODE(st.st_mode))
            done.append(part)
        return "/" + "/".join(done)

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
        file_kind, link_kind = NodeKind.FILE, NodeKind.SYMLINK
        stack = [top]
        while stack:
            directory = stack.pop()
            base = "" if directory == "/" else directory
            at_root = directory == "/"
            try:
                it = os.scandir(self.host(directory))
            except OSError as e:
                self.skip(directory, f"cannot read directory: {e.strerror or e}")
                continue
            with it:
                try:
                    for entry in it:
                        path = base + "/" + entry.name
                        try:
                            # Regular files first: they are most entries, and d_type answers
                            # these tests without a system call.
                            if entry.is_file(follow_symlinks=False):
                                if is_candidate(path) or is_metadata(path):
                                    self.file(path, entry.path, entry.stat(follow_symlinks=False))
                                else:
                                    nodes[path] = Node(path, file_kind)
                            elif entry.is_dir(follow_symlinks=False):
                                self.directory(path, entry, at_root, device, stack)
                            elif entry.is_symlink():
                                nodes[path] = Node(path, link_kind, link=os.readlink(entry.path))
                            else:
                                nodes[path] = Node(path, NodeKind.OTHER)
                        except OSError as e:
                            self.skip(path, f"cannot read: {e.strerror or e}")
                except OSError as e:
                    self.skip(directory, f"directory listing failed: {e.strerror or e}")

    def directory(
        self, path: str, entry: os.DirEntry[str], at_root: bool, device: int, stack: list[str]
    ) -> None:
        """Record a directory and queue it unless it is a pseudo fs, a mount or seen before."""
        if at_root and entry.name in _PSEUDO:
            self.nodes[path] = Node(path, NodeKind.DIR, mode=0o555)
            return
        st = entry.stat(follow_symlinks=False)
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
        stack.append(path)

    def file(self, path: str, host_path: str, st: os.stat_result) -> None:
        """Record a regular file that is a candidate or metadata (its stat is needed)."""
        self.nodes[path] = Node(path, NodeKind.FILE, size=st.st_size, mode=stat.S_IMODE(st.st_mode))
        if self.selector.is_candidate(path):
            self.stat_keys[path] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if self.selector.is_metadata(path):
            limit = self.selector.max_metadata_bytes
            if st.st_size > limit:
                self.skip(path, f"metadata file of {st.st_size} bytes exceeds the {limit} limit")
                return
            data = _read_regular(host_path, limit)
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
                key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
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
            hostname = socket.gethostname() if self.root == "/" else self.root
        return AssetInfo(
            kind=AssetKind.HOST,
            name=hostname,
            reference=self.source.reference,
            machine_id=self.small_file("/etc/machine-id"),
        )


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
