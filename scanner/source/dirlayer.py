"""An extracted layer directory read into a `LayerYield`, as the tar reader would yield it.

Docker's overlay2 driver (and containerd's overlayfs snapshotter) keep each image layer as a
directory ``diff/``. Whiteouts are written the overlay way, a character device 0/0 in place of
the deleted path and the xattr ``trusted.overlay.opaque=y`` (``user.overlay.opaque`` when
rootless) on a directory whose lower content is hidden; ``.wh.`` files (the tar form) are read
too. Nothing is followed: the walk holds a descriptor for each directory it is in (opened
``O_NOFOLLOW|O_DIRECTORY`` relative to its parent's and checked against the entry's ``lstat``),
lists it through that descriptor and takes every entry relative to it (``lstat``, ``readlink``,
files opened with ``O_NOFOLLOW``, the opaque xattr read through the directory's own descriptor),
so a directory or an intermediate component swapped for a symlink while the layer is read
never leads outside it; symlink targets are kept as stored (the tree resolves them inside the
root). The scan's limits apply as to a tar layer: entries, file size, expanded bytes of the
layer and of the image; directories nested deeper than `MAX_LAYER_DIR_DEPTH` are not entered.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable
from typing import IO, cast

from scanner.errors import SourceError
from scanner.model import FileFacts, NodeKind, Skipped, Stage
from scanner.source.interface import Selector
from scanner.source.layerstream import Budget, LayerSpec
from scanner.source.limits import MAX_LAYER_DIR_DEPTH, Limits
from scanner.source.tarlayer import LayerYield

_OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")
#: Files analyzed in place whose descriptors stay open until their facts are collected.
_MAX_PENDING = 64
_FD_PATHS = os.path.isdir("/proc/self/fd")


def _fd_path(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_DIR_FLAGS = (
    os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)


def _opaque(fd: int) -> bool:
    """Whether the directory open as ``fd`` carries an overlay opaque xattr of value ``y``."""
    for name in _OPAQUE_XATTRS:
        try:
            if os.getxattr(fd, name) == b"y":
                return True
        except OSError:
            continue
    return False


def _same(fd: int, st: os.stat_result) -> bool:
    """Whether ``fd`` is open on the inode ``st`` was taken of."""
    now = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


class _Walker:
    def __init__(self, directory: str, spec: LayerSpec, selector: Selector, budget: Budget) -> None:
        self.directory = directory
        self.selector = selector
        self.budget = budget
        self.limits: Limits = budget.limits
        self.label = f"layer {spec.digest} ({directory})"
        self.out = LayerYield(spec.digest, compression="dir")
        self.inodes: dict[tuple[int, int], str] = {}
        self.known_opaque: frozenset[str] = frozenset()
        self.pending: list[tuple[str, Callable[[], FileFacts], io.BufferedReader]] = []

    def run(self) -> LayerYield:
        try:
            top = os.lstat(self.directory)
        except OSError as e:
            raise SourceError(f"{self.label}: cannot read ({e.strerror or e})") from e
        if not stat.S_ISDIR(top.st_mode):
            raise SourceError(f"{self.label}: not a directory")
        try:
            fd = os.open(self.directory, _DIR_FLAGS)
        except OSError as e:
            raise SourceError(f"{self.label}: cannot read ({e.strerror or e})") from e
        # Depth first in byte order, a directory's content right after it: the order a tar
        # writer walking the directory (Docker's, containerd's) lists entries, so a hard
        # link's first path is the one the archive stores as the file. Each directory on the
        # stack holds its descriptor until the walk leaves it.
        names: list[str] = []
        stack = [("/", fd, names)]
        try:
            if not _same(fd, top):
                raise SourceError(f"{self.label}: changed while read")
            names.extend(self._names("/", fd))
            while stack:
                directory, dir_fd, names = stack[-1]
                if not names:
                    stack.pop()
                    os.close(dir_fd)
                    continue
                name = names.pop()
                path = directory.rstrip("/") + "/" + name
                sub = self._entry(path, name, dir_fd, len(stack))
                if sub is not None:
                    names = []
                    stack.append((path, sub, names))
                    names.extend(self._names(path, sub))
        finally:
            for _directory, dir_fd, _names in stack:
                os.close(dir_fd)
        out = self.out
        out.tar_entries = len(out.entries) + len(out.whiteouts) + len(out.opaque)
        return out

    def _names(self, directory: str, fd: int) -> list[str]:
        """The names in ``directory`` (open as ``fd``), last first (popped in order); [] when
        unreadable."""
        try:
            with os.scandir(fd) as it:
                names = [entry.name for entry in it]
        except OSError as e:
            self.out.skipped.append(
                Skipped(directory, f"{self.label}: cannot list ({e.strerror})", Stage.SOURCE)
            )
            return []
        names.sort(key=lambda n: n.encode("utf-8", "surrogateescape"), reverse=True)
        return names

    def _count(self) -> None:
        self.budget.count_entries(1, self.label)

    def _entry(self, path: str, name: str, dir_fd: int, depth: int) -> int | None:
        """Record the entry ``name`` of the directory open as ``dir_fd``; for a directory to
        descend into, a descriptor of it (the caller closes it)."""
        out = self.out
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except OSError as e:
            out.skipped.append(Skipped(path, f"{self.label}: {e.strerror}", Stage.SOURCE))
            return None
        self._count()
        parent = path.rpartition("/")[0] or "/"
        mode = st.st_mode & 0o7777
        if name.startswith(".wh."):
            if name == ".wh..wh..opq":
                out.opaque.append(parent)
            elif not name.startswith(".wh..wh.") and len(name) > 4:
                out.whiteouts.append(parent.rstrip("/") + "/" + name[4:])
            return None
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            out.whiteouts.append(path)
            return None
        if stat.S_ISDIR(st.st_mode):
            return self._directory(path, name, dir_fd, depth, st)
        if stat.S_ISLNK(st.st_mode):
            try:
                link = os.readlink(name, dir_fd=dir_fd)
            except OSError as e:
                out.skipped.append(Skipped(path, f"{self.label}: {e.strerror}", Stage.SOURCE))
                return None
            out.entries.append((path, NodeKind.SYMLINK, 0, mode, link, None))
            return None
        if not stat.S_ISREG(st.st_mode):
            out.entries.append((path, NodeKind.OTHER, 0, mode, None, None))
            return None
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1:
            first = self.inodes.get(key)
            if first is not None:  # as a tar writer records a second link to one inode
                out.entries.append((path, NodeKind.FILE, 0, mode, None, first))
                if self.selector.is_candidate(path):
                    out.candidates.append(path)
                return None
            self.inodes[key] = path
        size = st.st_size
        self.limits.check_file(self.label, path, size)
        out.expanded_bytes += size
        self.limits.check_layer(self.label, out.expanded_bytes, None)
        self.budget.expanded += size
        self.limits.check_image(self.label, self.budget.expanded)
        out.entries.append((path, NodeKind.FILE, size, mode, None, None))
        candidate = self.selector.is_candidate(path)
        if candidate:
            out.candidates.append(path)
        if candidate or self.selector.is_metadata(path):
            self._content(path, name, dir_fd, size, candidate)
        return None

    def _directory(
        self, path: str, name: str, dir_fd: int, depth: int, st: os.stat_result
    ) -> int | None:
        """Record the directory ``name`` of ``dir_fd`` (lstat ``st``), ``depth`` levels below
        the layer's root; a descriptor of it when it is to be entered."""
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as e:
            # ELOOP, ENOTDIR: no longer a directory (a symlink, a file) since its lstat
            changed = e.errno in (errno.ELOOP, errno.ENOTDIR)
            self._unlisted(path, st, "changed while read" if changed else e.strerror or str(e))
            return None
        kept = False
        try:
            if not _same(fd, st):  # another directory put in its place
                self._unlisted(path, st, "changed while read")
                return None
            out = self.out
            if path in self.known_opaque or _opaque(fd):
                out.opaque.append(path)
            out.entries.append((path, NodeKind.DIR, 0, st.st_mode & 0o7777, None, None))
            if depth > MAX_LAYER_DIR_DEPTH:
                reason = (
                    f"{self.label}: not read: nested deeper than {MAX_LAYER_DIR_DEPTH} "
                    "directories (limit)"
                )
                out.skipped.append(Skipped(path, reason, Stage.SOURCE))
                return None
            kept = True
            return fd
        finally:
            if not kept:
                os.close(fd)

    def _unlisted(self, path: str, st: os.stat_result, reason: str) -> None:
        """Record the directory of lstat ``st`` whose content cannot be read."""
        out = self.out
        if path in self.known_opaque:
            out.opaque.append(path)
        out.entries.append((path, NodeKind.DIR, 0, st.st_mode & 0o7777, None, None))
        out.skipped.append(Skipped(path, f"{self.label}: cannot list ({reason})", Stage.SOURCE))

    def _content(self, path: str, name: str, dir_fd: int, size: int, candidate: bool) -> None:
        out, selector = self.out, self.selector
        metadata = selector.is_metadata(path)
        too_large = selector.metadata_too_large(size) if metadata else None
        if too_large is not None:
            out.skipped.append(Skipped(path, too_large, Stage.SOURCE))
            metadata = False
        if not metadata and not candidate:
            return
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
        except OSError as e:
            self._unread(path, e)
            return
        f = os.fdopen(fd, "rb")
        kept = False  # the descriptor stays open for a probe reading it later
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                self._unread(path, OSError("changed while read"))
                return
            if metadata:
                data = f.read(size + 1)
                if len(data) != size:
                    self._unread(path, OSError("changed while read"))
                    return
                out.metadata[path] = data
                if candidate:
                    out.facts[path] = selector.probe(path, io.BytesIO(data), size)
                return
            if selector.probe_at is not None and _FD_PATHS:
                # The bytes lie in a regular file: analyzed in place (no copy), on the probe's
                # threads; through this descriptor's /proc link, so the file read is the one
                # checked here even if the path changes meanwhile.
                located = selector.probe_at(path, cast(IO[bytes], f), size, (_fd_path(fd), 0))
                if callable(located):
                    self.pending.append((path, located, f))
                    kept = True
                    if len(self.pending) >= _MAX_PENDING:
                        self.drain()
                else:
                    out.facts[path] = located
                return
            out.facts[path] = selector.probe(path, cast(IO[bytes], f), size)
        finally:
            if not kept:
                f.close()

    def drain(self, quiet: bool = False) -> None:
        """Collect the facts of the files analyzed in place (``quiet``: wait for them only),
        then close their descriptors: never before, or a reused descriptor number could
        point a probe at another file."""
        pending, self.pending = self.pending, []
        error: BaseException | None = None
        for path, resolve, _f in pending:
            try:
                self.out.facts[path] = resolve()
            except Exception as e:  # every probe is waited for before any descriptor closes
                error = error or e
        for _path, _resolve, f in pending:
            f.close()
        if error is not None and not quiet:
            raise error

    def _unread(self, path: str, e: OSError) -> None:
        self.out.skipped.append(
            Skipped(path, f"{self.label}: content not read ({e.strerror or e})", Stage.SOURCE)
        )


def read_dir_layer(
    directory: str,
    spec: LayerSpec,
    selector: Selector,
    limits: Limits,
    budget: Budget,
    *,
    opaque: Callable[[], frozenset[str]] | None = None,
) -> LayerYield:
    """The yield of the extracted layer in ``directory`` (see the module docstring);
    ``opaque`` names opaque directories known from elsewhere (Docker's tar-split record),
    for a reader not allowed to see ``trusted.*`` xattrs (without CAP_SYS_ADMIN)."""
    walker = _Walker(directory, spec, selector, budget)
    if opaque is not None:
        walker.known_opaque = opaque()
    try:
        walker.run()
    except BaseException:
        walker.drain(quiet=True)
        raise
    walker.drain()
    return walker.out
