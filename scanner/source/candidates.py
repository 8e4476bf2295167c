"""GPU-library candidates of a finished tree, whatever source built it (host walk or squashed
image): real files named like libraries or reached through a library-named symlink, and the
library-named symlinks that loop. Symlinks resolve by the one rule of `containment`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scanner.model import NodeKind, Skipped, Stage
from scanner.source.containment import MAX_HOPS, Outcome, resolve
from scanner.source.interface import Node


def collect_candidates(
    nodes: dict[str, Node],
    is_candidate: Callable[[str], bool],
    files: Iterable[str] | None = None,
) -> list[tuple[str, tuple[str, ...]]]:
    """Real candidate files with their sorted symlink aliases, sorted by path.

    A regular file is a candidate when its own path matches (``files``, when the caller
    already knows them), or when a matching symlink resolves to it; every symlink resolving to
    a candidate is listed as an alias.
    """
    real: dict[str, list[str]] = {}
    if files is None:
        files = (p for p, n in nodes.items() if n.kind is NodeKind.FILE and is_candidate(p))
    for path in files:
        node = nodes.get(path)
        if node is not None and node.kind is NodeKind.FILE:
            real[path] = []
    links: list[tuple[str, str]] = []
    lookup = nodes.get
    for path, node in nodes.items():
        if node.kind is not NodeKind.SYMLINK:
            continue
        target = resolve(path, lookup).path
        if target is None:
            continue
        tnode = nodes.get(target)
        if tnode is not None and tnode.kind is NodeKind.FILE:
            links.append((path, target))
    for path, target in links:
        if target not in real and is_candidate(path):
            real[target] = []
    for path, target in links:
        if target in real:
            real[target].append(path)
    return [(p, tuple(sorted(real[p]))) for p in sorted(real)]


def symlink_loops(
    nodes: dict[str, Node], is_candidate: Callable[[str], bool], max_hops: int = MAX_HOPS
) -> list[Skipped]:
    """A `Skipped` record for each name of a GPU library that is never read: a symlink whose
    chain loops (issue 2, section 7: a symlink loop must be reported, not silently dropped),
    and a device, FIFO or socket so named, or reached through such a link (reading a FIFO
    would block the scan, a device never ends). Dangling links (a missing target, a target
    outside the root) stay silent: they are common in real images (development links to
    absent stubs)."""
    out: list[Skipped] = []
    for path, node in nodes.items():
        if node.kind is NodeKind.OTHER and is_candidate(path):
            out.append(Skipped(path, _SPECIAL, Stage.SOURCE))
        if node.kind is not NodeKind.SYMLINK or not is_candidate(path):
            continue
        resolved = resolve(path, nodes.get, max_hops)
        if resolved.outcome is Outcome.LOOP:
            out.append(
                Skipped(
                    path,
                    f"symlink loop: {path} -> {node.link} never reaches a file "
                    f"(more than {max_hops} links); not followed",
                    Stage.SOURCE,
                )
            )
        elif resolved.path is not None:
            target = nodes.get(resolved.path)
            if target is not None and target.kind is NodeKind.OTHER:
                out.append(Skipped(path, f"-> {resolved.path}: {_SPECIAL}", Stage.SOURCE))
    return sorted(out, key=lambda s: s.path)


_SPECIAL = "not a regular file (a device, FIFO or socket): named like a GPU library, not read"
