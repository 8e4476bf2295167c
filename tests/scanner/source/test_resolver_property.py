"""Property test of the one symlink resolver (`scanner.source.containment.resolve`, issue 8).

On random trees of directories, files and symlinks (relative, absolute, climbing with ``..``,
through files, looping), the resolver must agree with a textbook recursive implementation
written independently below, outcome and path. The same trees are also written to disk: the
host walk, resolving on the disk through its own lookup, and the tree it records must give the
same answers as the tree in memory.
"""

from __future__ import annotations

import os
import posixpath
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.model import NodeKind
from scanner.source import DirectorySource
from scanner.source.containment import Outcome, Resolution, resolve, resolve_in_tree
from scanner.source.directory import _Listings, _Walk
from scanner.source.interface import Node
from tests.fixtures.images import hashing_selector

_NAMES = ("a", "b", "c")
_name = st.sampled_from(_NAMES)
#: Link targets: names, `.`, `..` and empty parts (doubled or trailing slashes), maybe absolute.
_target = st.builds(
    lambda absolute, parts: ("/" if absolute else "") + "/".join(parts),
    st.booleans(),
    st.lists(st.sampled_from((*_NAMES, ".", "..", "")), min_size=1, max_size=4),
).filter(lambda t: t != "")  # an empty target cannot be created on disk
_entry = st.tuples(
    st.lists(_name, min_size=1, max_size=3),
    st.sampled_from((NodeKind.DIR, NodeKind.FILE, NodeKind.SYMLINK)),
    _target,
)
_query = st.builds(
    lambda absolute, parts: ("/" if absolute else "") + "/".join(parts),
    st.booleans(),
    st.lists(st.sampled_from((*_NAMES, ".", "..")), min_size=0, max_size=4),
)


def build(entries: list[tuple[list[str], NodeKind, str]]) -> dict[str, Node]:
    """A consistent tree: parents are directories; an entry under a non-directory is dropped."""
    nodes: dict[str, Node] = {}
    for parts, kind, link in entries:
        path = "/" + "/".join(parts)
        parents = ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
        if path in nodes or any(p in nodes and nodes[p].kind is not NodeKind.DIR for p in parents):
            continue
        for p in parents:
            nodes.setdefault(p, Node(p, NodeKind.DIR))
        nodes[path] = Node(path, kind, link=link if kind is NodeKind.SYMLINK else None)
    return nodes


class _Stop(Exception):
    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome


def reference(nodes: dict[str, Node], path: str, max_hops: int = 40) -> Resolution:
    """Recursive resolution, the way the rule reads: the path as written is normalized; a
    link's target continues from the link's directory (from the root when absolute); ``..``
    never climbs above the root (noted as an escape); every component with something after it
    must be a directory; more than ``max_hops`` links is a loop."""
    hops = 0
    escaped = False

    def walk(at: tuple[str, ...], target: str, more_after: bool) -> tuple[str, ...]:
        nonlocal hops, escaped
        if target.startswith("/"):
            at = ()
        names = [n for n in target.split("/") if n]
        for i, name in enumerate(names):
            more = i + 1 < len(names) or more_after
            if name == ".":
                continue
            if name == "..":
                if at:
                    at = at[:-1]
                else:
                    escaped = True
                continue
            node = nodes.get("/" + "/".join((*at, name)))
            if node is None:
                raise _Stop(Outcome.DANGLING)
            if node.kind is NodeKind.SYMLINK and node.link is not None:
                hops += 1
                if hops > max_hops:
                    raise _Stop(Outcome.LOOP)
                at = walk(at, node.link, more)
                continue
            if more and node.kind is not NodeKind.DIR:
                raise _Stop(Outcome.DANGLING)
            at = (*at, name)
        return at

    written = "/" + posixpath.normpath("/" + path).lstrip("/")
    try:
        parts = walk((), written, False)
    except _Stop as stop:
        return Resolution(stop.outcome)
    return Resolution(Outcome.ESCAPES if escaped else Outcome.RESOLVED, "/" + "/".join(parts))


@settings(max_examples=400, deadline=None)
@given(st.lists(_entry, max_size=12), st.lists(_query, min_size=1, max_size=6), st.integers(1, 6))
def test_resolver_agrees_with_the_reference(
    entries: list[tuple[list[str], NodeKind, str]], queries: list[str], max_hops: int
) -> None:
    nodes = build(entries)
    for query in [*queries, *nodes]:
        for hops in (max_hops, 40):
            expected = reference(nodes, query, hops)
            assert resolve(query, nodes.get, hops) == expected, (query, hops)
            assert resolve_in_tree(nodes, query, hops) == expected.path


@settings(max_examples=100, deadline=None)
@given(st.lists(_entry, max_size=10), st.lists(_query, min_size=1, max_size=4))
def test_host_walk_resolves_as_the_tree_does(
    entries: list[tuple[list[str], NodeKind, str]], queries: list[str]
) -> None:
    nodes = build(entries)
    with tempfile.TemporaryDirectory() as root:
        for path, node in sorted(nodes.items()):
            host = root + path
            if node.kind is NodeKind.DIR:
                os.mkdir(host)
            elif node.kind is NodeKind.FILE:
                open(host, "wb").close()
            else:
                assert node.link is not None
                os.symlink(node.link, host)
        source = DirectorySource(root)
        selector = hashing_selector()
        walk = _Walk(source, selector, _Listings.load(None, root, selector.version))
        view = source.open_view(selector)
        for query in [*queries, *nodes]:
            expected = resolve_in_tree(nodes, query)
            assert walk.resolve(query, record=False) == expected, query
            assert view.resolve(query) == expected, query
