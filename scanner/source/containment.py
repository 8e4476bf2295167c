"""The one rule that keeps a scan inside its root: path normalization and symlink resolution.

Every source resolves paths here, whatever holds the tree: the squashed tree of an image
(`resolve_in_tree`) or the host's disk, looked up on demand by the directory walk. Absolute
link targets restart at the root and ``..`` at the root stays there, as in a chroot, so no
link can lead out of the root.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Protocol

from msgspec import Struct

from scanner.model import NodeKind

#: Links followed before a path counts as a loop: Linux's MAXSYMLINKS (ELOOP past it).
MAX_HOPS = 40


class Linked(Protocol):
    """What the resolver needs of one tree entry (`scanner.source.interface.Node` is one)."""

    @property
    def kind(self) -> NodeKind: ...

    @property
    def link(self) -> str | None: ...


#: The entry at an absolute in-root path, or None when there is none. A tree passes its
#: ``dict.get``; the host walk stats the disk, so the hot path stays a dictionary lookup.
Lookup = Callable[[str], Linked | None]


class Outcome(StrEnum):
    """How a resolution ended."""

    RESOLVED = "resolved"
    #: A component is missing, or a non-directory has components after it (ENOTDIR).
    DANGLING = "dangling"
    #: More than ``max_hops`` links were followed (ELOOP).
    LOOP = "loop"
    #: Reached an entry, but a link's ``..`` tried to climb above the root on the way: the
    #: kernel, following it from the host, would have left the root. The path is where the
    #: link lands inside the root, which is what the scanner reads (as container runtimes do).
    ESCAPES = "escapes"


class Resolution(Struct, frozen=True):
    outcome: Outcome
    #: The resolved in-root path when the entry was reached (RESOLVED, ESCAPES), else None.
    path: str | None = None


_DANGLING = Resolution(Outcome.DANGLING)
_LOOP = Resolution(Outcome.LOOP)


def normalize(path: str) -> str:
    """Normalize a path inside the root: absolute, no ``.``/``..``/empty parts, never above /."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def resolve(path: str, lookup: Lookup, max_hops: int = MAX_HOPS) -> Resolution:
    """Follow the symlinks of ``path`` component by component inside the root.

    ``path`` itself is normalized first (its ``..`` are lexical); the ``..`` of link targets
    apply to the directory the link was found in, as the kernel does.
    """
    if not path.startswith("/") or "/." in path or path.endswith("/"):
        # Tree paths are normal already: skip the work for them (empty parts are skipped
        # below, so `//` needs no normalizing).
        path = normalize(path)
    todo = path.split("/")  # the stack of components to go, the next one last
    todo.reverse()
    prefix = ""  # the resolved directory so far; "" is the root
    hops = 0
    escaped = False
    while todo:
        part = todo.pop()
        if part == "..":
            if prefix:
                prefix = prefix[: prefix.rfind("/")]
            else:
                escaped = True
            continue
        if part == "." or not part:
            continue
        current = prefix + "/" + part
        node = lookup(current)
        if node is None:
            return _DANGLING
        if node.kind is NodeKind.SYMLINK and node.link is not None:
            hops += 1
            if hops > max_hops:
                return _LOOP
            link = node.link
            if link.startswith("/"):
                prefix = ""
            # A trailing slash is dropped (as it always was), so it never makes the last
            # component look like one with more to come.
            parts = link.rstrip("/").split("/")
            parts.reverse()
            todo += parts
            continue
        if todo and node.kind is not NodeKind.DIR:
            # As the kernel answers ENOTDIR: `file/..` is no way back up.
            return _DANGLING
        prefix = current
    return Resolution(Outcome.ESCAPES if escaped else Outcome.RESOLVED, prefix or "/")


def resolve_in_tree(nodes: Mapping[str, Linked], path: str, max_hops: int = MAX_HOPS) -> str | None:
    """The in-root path ``path`` resolves to within ``nodes``; None if dangling or looping."""
    return resolve(path, nodes.get, max_hops).path
