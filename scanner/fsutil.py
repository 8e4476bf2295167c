"""The scanner's two file-system conventions, kept in one place: where caches live and how a
file is replaced atomically (a reader sees the old bytes or the new ones, never a mix)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """``$GPUPROV_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuprov``, else ``~/.cache/gpuprov``."""
    if env := os.environ.get("GPUPROV_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuprov"


def atomic_write(
    path: Path, data: bytes, *, mode: int | None = None, durable: bool = False
) -> None:
    """Replace ``path`` with ``data`` through a temporary file in the same directory.

    ``mode`` defaults to what ``open()`` would give (0666 less the umask); ``durable`` fsyncs
    before the rename, for files whose loss after a crash matters (the agent's spool). The
    temporary file never survives a failure; OSError propagates.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, _default_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
