"""Squashing an image's layers into one tree: the last stage of reading an image.

Each layer is read once (`scanner.source.tarlayer`) or taken from the yield cache, checked
against the scan's limits either way, and applied in order onto a `Tree`: whiteouts hide lower
content, then the layer's entries land. Squashing lives only here, so catalogers never know
whether the root was an image.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from typing import Protocol

from msgspec import Struct
from msgspec.structs import replace

from scanner.model import FileFacts, NodeKind, OciDigest, Progress, ProgressStage, Skipped, Stage
from scanner.source.interface import Node, Selector
from scanner.source.layerstream import Budget, LayerSpec
from scanner.source.limits import Limits
from scanner.source.tarlayer import LayerYield, check_cached, read_layer
from scanner.wording import counted, plural


class YieldCache(Protocol):
    """Storage of layer yields by digest (see `scanner.source.layercache.LayerCache`)."""

    def get(self, digest: OciDigest, selector: Selector) -> LayerYield | None: ...

    def put(self, layer: LayerYield, selector: Selector) -> bool: ...


class Tree:
    """The squashed filesystem being built; a child index makes whiteouts of subtrees cheap."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.children: dict[str, set[str]] = {"/": set()}
        self.facts: dict[str, FileFacts] = {}
        self.metadata: dict[str, bytes] = {}
        self.candidates: set[str] = set()  # files whose own path is a candidate
        self.skipped: list[Skipped] = []

    def remove(self, path: str) -> None:
        """Delete ``path`` and everything under it."""
        if self.nodes.get(path) is None:
            return
        parent = path.rpartition("/")[0] or "/"
        siblings = self.children.get(parent)
        if siblings is not None:
            siblings.discard(path)
        self._drop(path)

    def clear(self, directory: str) -> None:
        """Delete everything under ``directory`` (an opaque whiteout), keeping it."""
        for child in list(self.children.get(directory, ())):
            self._drop(child)
        if directory in self.children:
            self.children[directory] = set()

    def _drop(self, path: str) -> None:
        stack = [path]
        while stack:
            p = stack.pop()
            node = self.nodes.pop(p, None)
            if node is None:
                continue
            if node.kind is NodeKind.DIR:
                stack.extend(self.children.pop(p, ()))
            else:
                self.facts.pop(p, None)
                self.metadata.pop(p, None)
                self.candidates.discard(p)

    def _dirs(self, directory: str, layer: OciDigest | None) -> None:
        """Create missing parent directories; a non-directory in the way is replaced."""
        todo: list[str] = []
        p = directory
        while p != "/":
            node = self.nodes.get(p)
            if node is not None and node.kind is NodeKind.DIR:
                break
            todo.append(p)
            p = p.rpartition("/")[0] or "/"
        for p in reversed(todo):
            self.remove(p)
            self._link(Node(p, NodeKind.DIR, layer=layer, mode=0o755))

    def _link(self, node: Node) -> None:
        p = node.path
        self.nodes[p] = node
        self.children.setdefault(p.rpartition("/")[0] or "/", set()).add(p)
        if node.kind is NodeKind.DIR:
            self.children.setdefault(p, set())

    def put(self, node: Node) -> None:
        """Add or replace one node; a directory over a directory keeps its content."""
        p = node.path
        parent = p.rpartition("/")[0] or "/"
        if parent != "/":
            pnode = self.nodes.get(parent)
            if pnode is None or pnode.kind is not NodeKind.DIR:
                self._dirs(parent, node.layer)
        old = self.nodes.get(p)
        if old is not None:
            if old.kind is NodeKind.DIR and node.kind is NodeKind.DIR:
                self.nodes[p] = node
                return
            self.remove(p)
        self._link(node)

    def apply(self, layer: LayerYield) -> None:
        """Apply one layer: its whiteouts hide lower content, then its entries in tar order."""
        digest = layer.digest
        for path in layer.whiteouts:
            self.remove(path)
        for directory in layer.opaque:
            self.clear(directory)
        nodes, children = self.nodes, self.children
        candidates = set(layer.candidates)
        file_kind, dir_kind = NodeKind.FILE, NodeKind.DIR
        for path, kind, size, mode, link, hard in layer.entries:
            if hard is not None:
                self._hardlink(path, hard, mode, digest)
            else:
                node = Node(path, kind, size, link, digest, mode)
                parent = path[: path.rfind("/")] or "/"
                pnode = nodes.get(parent)
                if path not in nodes and (
                    parent == "/" or (pnode is not None and pnode.kind is dir_kind)
                ):
                    # The common case of a new entry in an existing directory, kept inline.
                    nodes[path] = node
                    children[parent].add(path)
                    if kind is dir_kind:
                        children[path] = set()
                else:
                    self.put(node)
                if kind is file_kind:
                    facts = layer.facts.get(path)
                    if facts is not None:
                        self.facts[path] = facts
                    data = layer.metadata.get(path)
                    if data is not None:
                        self.metadata[path] = data
            if path in candidates:
                self.candidates.add(path)

    def _hardlink(self, path: str, target: str, mode: int, layer: OciDigest) -> None:
        src = self.nodes.get(target)
        if src is None or src.kind is NodeKind.DIR:
            self.skipped.append(
                Skipped(path, f"hard link to {target} in layer {layer}: no such file", Stage.SOURCE)
            )
            return
        facts = self.facts.get(target)
        data = self.metadata.get(target)
        self.put(Node(path, src.kind, src.size, src.link, layer, mode))
        if facts is not None:
            self.facts[path] = facts
        if data is not None:
            self.metadata[path] = data


class Squashed(Struct):
    """The result of applying an image's layers: the tree, what was skipped, counters."""

    tree: Tree
    skipped: list[Skipped]
    stats: dict[str, float]


def _cached(cache: YieldCache | None, spec: LayerSpec, selector: Selector) -> LayerYield | None:
    """The cached yield of ``spec``, when it describes this very blob.

    The ratio limit and the descriptor size check depend on the compressed blob, which the
    digest alone does not fix for a docker-archive diff_id: a yield read from a blob of
    another size (or of an unknown one) is not used, so the blob is read and checked.
    """
    if cache is None or spec.size is None or spec.reader is not None:
        return None
    layer = cache.get(spec.digest, selector)
    if layer is None or layer.compressed_bytes != spec.size:
        return None
    return layer


def squash(
    layers: Sequence[LayerSpec],
    selector: Selector,
    *,
    cache: YieldCache | None = None,
    limits: Limits | None = None,
) -> Squashed:
    """Read (or fetch from the cache) each layer once and apply them in order."""
    limits = limits or Limits()
    budget = Budget(limits)
    tree = Tree()
    skipped: list[Skipped] = []
    seen: dict[OciDigest, LayerYield] = {}
    stats = dict.fromkeys(
        ("layers_read", "layers_cached", "layers_reused", "bytes_read", "bytes_expanded"), 0.0
    )
    started = time.perf_counter()
    for spec in layers:
        layer = seen.get(spec.digest)
        if layer is not None:
            stats["layers_reused"] += 1
        elif (layer := _cached(cache, spec, selector)) is not None:
            check_cached(budget, layer, spec)
            stats["layers_cached"] += 1
        else:
            read = spec.reader or read_layer
            layer = read(spec, selector, limits, budget)
            stats["layers_read"] += 1
            stats["bytes_read"] += layer.compressed_bytes
            stats["bytes_expanded"] += layer.expanded_bytes
            if cache is not None and layer.corrupt is None and spec.reader is None:
                cache.put(layer, selector)
        if spec.digest not in seen:
            skipped.extend(layer.skipped)
            if layer.corrupt is not None:
                skipped.append(
                    Skipped(
                        str(spec.digest),
                        f"layer is damaged: {layer.corrupt}; the "
                        f"{counted(len(layer.entries), 'entry', 'entries')} read before the "
                        f"damage {plural('was', len(layer.entries), 'were')} kept",
                        Stage.SOURCE,
                    )
                )
        seen[spec.digest] = layer
        tree.apply(layer)
        if selector.on_progress is not None:
            done = int(stats["layers_read"] + stats["layers_cached"] + stats["layers_reused"])
            found = len(tree.candidates)
            selector.on_progress(Progress(ProgressStage.LAYERS, done, len(layers), "layers", found))
    stats["layers_total"] = float(len(layers))
    stats["entries"] = float(len(tree.nodes))
    stats["seconds_layers"] = time.perf_counter() - started
    skipped.extend(tree.skipped)
    return Squashed(tree, skipped, stats)


def read_alias_targets(
    layers: Sequence[LayerSpec],
    tree: Tree,
    targets: Iterable[str],
    selector: Selector,
    *,
    cache: YieldCache | None = None,
    limits: Limits | None = None,
) -> int:
    """Analyze files that are candidates only through a library-named symlink.

    Layers are analyzed by each file's own name during their one read, so the target of
    ``libcudnn_evil.so -> /etc/passwd`` was not read; it must still be reported for what it
    is (issue 7). The layer each such file came from is read once more, analyzing just those
    files, under the same per-layer limits; the yield is cached under a selector version that
    names those files. Returns how many layers were read again (not taken from the cache).
    """
    limits = limits or Limits()
    by_layer: dict[OciDigest, set[str]] = {}
    for path in targets:
        node = tree.nodes.get(path)
        if node is not None and node.layer is not None and path not in tree.facts:
            by_layer.setdefault(node.layer, set()).add(path)
    specs = {spec.digest: spec for spec in reversed(layers)}
    reread = 0
    for digest, paths in sorted(by_layer.items()):
        spec = specs.get(digest)
        if spec is None:
            continue
        wanted = frozenset(paths)
        named = hashlib.sha256("\0".join(sorted(wanted)).encode()).hexdigest()[:16]
        only = replace(
            selector,
            is_candidate=wanted.__contains__,
            is_metadata=lambda _path: False,
            on_candidate=None,
            version=f"{selector.version}/alias-targets:{named}",
        )
        layer = _cached(cache, spec, only)
        if layer is not None:
            check_cached(Budget(limits), layer, spec)
        else:
            layer = (spec.reader or read_layer)(spec, only, limits, Budget(limits))
            reread += 1
            if cache is not None and layer.corrupt is None and spec.reader is None:
                cache.put(layer, only)
        for path in wanted:
            facts = layer.facts.get(path)
            if facts is not None:
                tree.facts[path] = facts
    return reread
