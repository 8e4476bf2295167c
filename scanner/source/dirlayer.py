"""An extracted layer directory read into a `LayerYield`, as the tar reader would yield it.

Docker's overlay2 driver (and containerd's overlayfs snapshotter) keep each image layer as a
directory ``diff/``. Whiteouts are written the overlay way, a character device 0/0 in place of
the deleted path and the xattr ``trusted.overlay.opaque=y`` (``user.overlay.opaque`` when
rootless) on a directory whose lower content is hidden; ``.wh.`` files (the tar form) are read
too. Nothing is followed: entries are taken with ``lstat``, files opened with ``O_NOFOLLOW``,
symlink targets kept as stored (the tree resolves them inside the root). The scan's limits apply
as to a tar layer: entries, file size, expanded bytes of the layer and of the image.
"""

from __future__ import annotations

import io
import os
import stat
from typing import IO, cast

from scanner.errors import SourceError
from scanner.model import NodeKind, Skipped, Stage
from scanner.source.interface import Selector
from scanner.source.layerstream import Budget, LayerSpec, Limits
from scanner.source.tarlayer import LayerYield

_OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _opaque(path: str) -> bool:
    for name in _OPAQUE_XATTRS:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


class _Walker:
    def __init__(self, directory: str, spec: LayerSpec, selector: Selector, budget: Budget) -> None:
        self.directory = directory
        self.selector = selector
        self.budget = budget
        self.limits: Limits = budget.limits
        self.label = f"layer {spec.digest} ({directory})"
        self.out = LayerYield(spec.digest, compression="dir")
        self.inodes: dict[tuple[int, int], str] = {}

    def run(self) -> LayerYield:
        try:
            top = os.lstat(self.directory)
        except OSError as e:
            raise SourceError(f"{self.label}: cannot read ({e.strerror or e})") from e
        if not stat.S_ISDIR(top.st_mode):
            raise SourceError(f"{self.label}: not a directory")
        stack = ["/"]
        while stack:
            directory = stack.pop()
            host = self.directory + (directory if directory != "/" else "")
            try:
                with os.scandir(host) as it:
                    names = sorted(entry.name for entry in it)
            except OSError as e:
                self.out.skipped.append(
                    Skipped(directory, f"{self.label}: cannot list ({e.strerror})", Stage.SOURCE)
                )
                continue
            subdirs = []
            for name in names:
                path = (directory.rstrip("/")) + "/" + name
                if self._entry(path, name, host + "/" + name):
                    subdirs.append(path)
            stack.extend(reversed(subdirs))
        out = self.out
        out.tar_entries = len(out.entries) + len(out.whiteouts) + len(out.opaque)
        return out

    def _count(self) -> None:
        self.budget.count_entries(1, self.label)

    def _entry(self, path: str, name: str, host: str) -> bool:
        """Record one entry; True when it is a directory to descend into."""
        out = self.out
        try:
            st = os.lstat(host)
        except OSError as e:
            out.skipped.append(Skipped(path, f"{self.label}: {e.strerror}", Stage.SOURCE))
            return False
        self._count()
        parent = path.rpartition("/")[0] or "/"
        mode = st.st_mode & 0o7777
        if name.startswith(".wh."):
            if name == ".wh..wh..opq":
                out.opaque.append(parent)
            elif not name.startswith(".wh..wh.") and len(name) > 4:
                out.whiteouts.append(parent.rstrip("/") + "/" + name[4:])
            return False
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            out.whiteouts.append(path)
            return False
        if stat.S_ISDIR(st.st_mode):
            if _opaque(host):
                out.opaque.append(path)
            out.entries.append((path, NodeKind.DIR, 0, mode, None, None))
            return True
        if stat.S_ISLNK(st.st_mode):
            try:
                link = os.readlink(host)
            except OSError as e:
                out.skipped.append(Skipped(path, f"{self.label}: {e.strerror}", Stage.SOURCE))
                return False
            out.entries.append((path, NodeKind.SYMLINK, 0, mode, link, None))
            return False
        if not stat.S_ISREG(st.st_mode):
            out.entries.append((path, NodeKind.OTHER, 0, mode, None, None))
            return False
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1:
            first = self.inodes.get(key)
            if first is not None:  # as a tar writer records a second link to one inode
                out.entries.append((path, NodeKind.FILE, 0, mode, None, first))
                if self.selector.is_candidate(path):
                    out.candidates.append(path)
                return False
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
            self._content(path, host, size, candidate)
        return False

    def _content(self, path: str, host: str, size: int, candidate: bool) -> None:
        out, selector = self.out, self.selector
        metadata = selector.is_metadata(path)
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
        if not metadata and not candidate:
            return
        try:
            fd = os.open(host, _OPEN_FLAGS)
        except OSError as e:
            self._unread(path, e)
            return
        with os.fdopen(fd, "rb") as f:
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
            out.facts[path] = selector.probe(path, cast(IO[bytes], f), size)

    def _unread(self, path: str, e: OSError) -> None:
        self.out.skipped.append(
            Skipped(path, f"{self.label}: content not read ({e.strerror or e})", Stage.SOURCE)
        )


def read_dir_layer(
    directory: str, spec: LayerSpec, selector: Selector, limits: Limits, budget: Budget
) -> LayerYield:
    """The yield of the extracted layer in ``directory`` (see the module docstring)."""
    return _Walker(directory, spec, selector, budget).run()
