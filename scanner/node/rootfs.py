"""Reading small files of a host root by their in-root paths, links resolved inside the root.

A path named by the node's own data (a CDI spec's hostPath, a link under /etc) is resolved with
the scanner's one containment resolver, so a link to ``/`` or ``../..`` never leaves the root.
"""

from __future__ import annotations

import os
import stat

from msgspec import Struct

from scanner.model import NodeKind
from scanner.source.containment import Outcome, normalize, resolve

#: Small files only: version files, specs, release files (a CDI spec is a few KiB).
MAX_SMALL = 4 << 20


class _Entry(Struct, frozen=True):
    kind: NodeKind
    link: str | None


class Root:
    """A host root directory on this machine (``/`` for the live node)."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)

    @property
    def live(self) -> bool:
        return self.path == "/"

    def host(self, inroot: str) -> str:
        """Where an in-root path (already resolved) lies on this machine."""
        return os.path.join(self.path, normalize(inroot).lstrip("/"))

    def _lookup(self, inroot: str) -> _Entry | None:
        try:
            st = os.lstat(self.host(inroot))
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            try:
                return _Entry(NodeKind.SYMLINK, os.readlink(self.host(inroot)))
            except OSError:
                return None
        if stat.S_ISDIR(st.st_mode):
            return _Entry(NodeKind.DIR, None)
        if stat.S_ISREG(st.st_mode):
            return _Entry(NodeKind.FILE, None)
        return _Entry(NodeKind.OTHER, None)

    def resolve(self, inroot: str) -> str | None:
        """The in-root path ``inroot`` resolves to, or None when it is dangling or loops."""
        res = resolve(inroot, self._lookup)
        return res.path if res.outcome in (Outcome.RESOLVED, Outcome.ESCAPES) else None

    def kind(self, inroot: str) -> NodeKind | None:
        real = self.resolve(inroot)
        entry = self._lookup(real) if real is not None else None
        return entry.kind if entry is not None else None

    def listdir(self, inroot: str) -> list[str]:
        """Names in an in-root directory, sorted; empty when it is none."""
        real = self.resolve(inroot)
        if real is None:
            return []
        try:
            return sorted(os.listdir(self.host(real)))
        except OSError:
            return []

    def read_text(self, inroot: str, limit: int = MAX_SMALL) -> str | None:
        """A small regular file's text (UTF-8, errors replaced); None when absent or no file."""
        real = self.resolve(inroot)
        if real is None:
            return None
        return read_small(self.host(real), limit)


def read_small(path: str, limit: int = MAX_SMALL) -> str | None:
    """Up to ``limit`` bytes of a regular file on this machine as text; None when it is absent,
    unreadable or no regular file (O_NONBLOCK: a FIFO planted in a root never blocks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
