"""Root containment of the squashed tree: paths and symlinks resolve inside the root, always.

`normalize` and `resolve_in_tree` are what every image source and the catalogers rely on when
they follow a link: `..` at the root stays at the root, absolute targets restart at the root,
and a dangling link or a loop resolves to nothing.
"""

from __future__ import annotations

import pytest

from scanner.model import AssetInfo, AssetKind, NodeKind
from scanner.source.containment import Outcome, Resolution, normalize, resolve, resolve_in_tree
from scanner.source.interface import Node, RootView


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "/"),
        ("", "/"),
        ("usr/lib", "/usr/lib"),
        ("/usr//lib/./x", "/usr/lib/x"),
        ("/usr/lib/../share", "/usr/share"),
        ("/..", "/"),
        ("/../../etc/passwd", "/etc/passwd"),
        ("a/b/../../../c", "/c"),
        ("/a/..b/c", "/a/..b/c"),  # a name that starts with dots is a name
        ("/a/-/+/!/b", "/a/-/+/!/b"),  # names that sort before "." and ".." are names
        ("/a/.../b", "/a/.../b"),
    ],
)
def test_normalize(path: str, expected: str) -> None:
    assert normalize(path) == expected


def tree(*entries: tuple[str, str | None]) -> dict[str, Node]:
    """Nodes from (path, link target or None for a file); parent directories are added."""
    nodes: dict[str, Node] = {}
    for path, link in entries:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            directory = "/" + "/".join(parts[:i])
            nodes.setdefault(directory, Node(directory, NodeKind.DIR))
        kind = NodeKind.SYMLINK if link is not None else NodeKind.FILE
        nodes[path] = Node(path, kind, link=link)
    return nodes


NODES = tree(
    ("/secret", None),
    ("/etc/passwd", None),
    ("/etc/hostname", "../../secret"),  # climbs past the root: stays at /secret
    ("/etc/abs", "/etc/passwd"),
    ("/usr/lib/libx.so.1", None),
    ("/usr/lib/libx.so", "libx.so.1"),
    ("/usr/lib/up", "../../../../etc/passwd"),
    ("/usr/lib/dot", "./libx.so"),
    ("/lib", "usr/lib"),
    ("/loop/a", "b"),
    ("/loop/b", "a"),
    ("/dangling", "/nowhere"),
    ("/etc/file-as-dir", "passwd/x"),
    ("/etc/through-file", "passwd/../abs"),
    ("/-/x", None),
    ("/-/link", "../-/x"),
    ("/hard/libx.so", None),
)
# A hard-link record: a file that names another path. It is a file, never followed.
NODES["/hard/libx.so"] = Node("/hard/libx.so", NodeKind.FILE, link="/etc/passwd")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/etc/hostname", "/secret"),
        ("usr/lib/libx.so", "/usr/lib/libx.so.1"),  # a relative path is taken from the root
        ("lib/libx.so", "/usr/lib/libx.so.1"),
        ("/etc/abs", "/etc/passwd"),
        ("/usr/lib/libx.so", "/usr/lib/libx.so.1"),
        ("/usr/lib/up", "/etc/passwd"),
        ("/usr/lib/dot", "/usr/lib/libx.so.1"),
        ("/lib/libx.so", "/usr/lib/libx.so.1"),  # a link in the middle of the path
        ("/lib/../etc/passwd", "/etc/passwd"),  # `..` after a link: of the path as written
        ("/lib/./libx.so.1", "/usr/lib/libx.so.1"),
        ("/usr/lib", "/usr/lib"),
        ("/", "/"),
        ("/loop/a", None),
        ("/dangling", None),
        ("/missing", None),
        ("/etc/file-as-dir", None),
        ("/etc/through-file", None),  # ENOTDIR, as on a host: never `passwd/..` = /etc
        ("/etc/passwd/..", "/etc"),  # a path as written is normalized first
        ("/-/x", "/-/x"),
        ("/-/link", "/-/x"),
        ("/hard/libx.so", "/hard/libx.so"),
        ("etc/passwd", "/etc/passwd"),  # relative to the root
        ("//usr//lib//libx.so", "/usr/lib/libx.so.1"),
        ("/etc/passwd/", "/etc/passwd"),  # normalized first: the trailing slash goes
        ("/etc/hostname/.", "/secret"),
    ],
)
def test_resolve_in_tree(path: str, expected: str | None) -> None:
    assert resolve_in_tree(NODES, path) == expected


def test_default_hop_limit_is_40() -> None:
    chain = tree(*[(f"/l{i}", f"/l{i + 1}") for i in range(41)], ("/l41", None))
    view = RootView(AssetInfo(AssetKind.IMAGE, "x", "oci:x"), chain, {}, [])
    assert resolve_in_tree(chain, "/l1") == view.resolve("/l1") == "/l41"  # 40 links
    assert resolve_in_tree(chain, "/l0") is None and view.resolve("/l0") is None  # 41


def test_hop_limit() -> None:
    chain = tree(*[(f"/l{i}", f"/l{i + 1}") for i in range(5)], ("/l5", None))
    assert resolve_in_tree(chain, "/l0") == "/l5"
    assert resolve_in_tree(chain, "/l0", max_hops=5) == "/l5"
    assert resolve_in_tree(chain, "/l0", max_hops=4) is None


def test_root_view_resolve_and_listdir() -> None:
    view = RootView(AssetInfo(AssetKind.IMAGE, "x", "oci:x"), NODES, {}, [])
    assert view.resolve("/etc/hostname") == "/secret"
    assert sorted(view.listdir("/usr/lib")) == [
        "/usr/lib/dot",
        "/usr/lib/libx.so",
        "/usr/lib/libx.so.1",
        "/usr/lib/up",
    ]
    assert sorted(view.listdir("/usr/lib/")) == sorted(view.listdir("/usr/lib"))
    assert list(view.listdir("/usr")) == ["/usr/lib"]
    assert list(view.listdir("/nowhere")) == []


def test_resolution_edge_cases() -> None:
    """Where `..` of a link lands, a relative path that climbs, trailing `/` and `/.`."""
    nodes = tree(
        ("/d/f", None),
        ("/d/e/up", "../f"),
        ("/d/abs", "/d/f"),
        ("/d/dot", "f/."),
        ("/d/slash", "f/"),
    )
    assert resolve("/d/e/up", nodes.get) == Resolution(Outcome.RESOLVED, "/d/f")
    assert resolve("/d/abs", nodes.get) == Resolution(Outcome.RESOLVED, "/d/f")
    assert resolve("../d/f", nodes.get) == Resolution(Outcome.RESOLVED, "/d/f")  # lexical
    assert resolve("/d/f/..", nodes.get) == Resolution(Outcome.RESOLVED, "/d")  # lexical
    assert resolve("/d/dot", nodes.get) == Resolution(Outcome.DANGLING)  # ENOTDIR
    assert resolve("/d/slash", nodes.get) == Resolution(Outcome.RESOLVED, "/d/f")


@pytest.mark.parametrize(
    ("path", "outcome", "expected"),
    [
        ("/usr/lib/libx.so", Outcome.RESOLVED, "/usr/lib/libx.so.1"),
        ("/usr/lib/up", Outcome.ESCAPES, "/etc/passwd"),  # its `..` climbed past the root
        ("/etc/hostname", Outcome.ESCAPES, "/secret"),
        ("/../etc/passwd", Outcome.RESOLVED, "/etc/passwd"),  # lexical `..` of the path: no
        ("/dangling", Outcome.DANGLING, None),
        ("/etc/through-file", Outcome.DANGLING, None),
        ("/loop/a", Outcome.LOOP, None),
    ],
)
def test_resolution_outcomes(path: str, outcome: Outcome, expected: str | None) -> None:
    """An escape is reported (the scan records it) but still lands inside the root."""
    found = resolve(path, NODES.get)
    assert (found.outcome, found.path) == (outcome, expected)
