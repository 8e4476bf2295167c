"""Whiteouts (OCI image spec, layer changesets): every name length, opaque directories, and the
reserved `.wh..wh.` prefix, each checked against what it must and must not hide."""

from __future__ import annotations

from pathlib import Path

from scanner.model import Digests, FileFacts, NodeKind, OciDigest, Sha256
from scanner.source import open_source
from scanner.source.interface import RootView
from scanner.source.squash import Tree
from scanner.source.tarlayer import LayerYield
from tests.fixtures.images import (
    Image,
    Layer,
    Member,
    file,
    hashing_selector,
    opaque,
    whiteout,
    write_oci_layout,
)


def scan(tmp_path: Path, layers: list[Layer]) -> RootView:
    write_oci_layout(tmp_path / "img", Image(layers), "1")
    source = open_source(
        f"oci:{tmp_path / 'img'}:1", cache_dir=None, use_cache=False, all_filesystems=False
    )
    return source.open_view(hashing_selector())


def test_one_character_names_are_whited_out(tmp_path: Path) -> None:
    """`.wh.a` deletes `a`: the shortest whiteout there is."""
    lower = Layer([file("d/a", "a"), file("d/b", "b"), file("c", "c"), file("d/ab", "ab")])
    view = scan(tmp_path, [lower, Layer([whiteout("d/a"), whiteout("c")])])
    assert "/d/a" not in view.nodes and "/c" not in view.nodes
    assert {"/d/b", "/d/ab"} <= set(view.nodes)


def test_whiteout_files_never_appear_and_hide_only_their_name(tmp_path: Path) -> None:
    lower = Layer([file("usr/lib/libx.so", "x"), file("usr/lib/libx.so.1", "x1")])
    view = scan(tmp_path, [lower, Layer([whiteout("usr/lib/libx.so")])])
    assert "/usr/lib/libx.so" not in view.nodes and "/usr/lib/libx.so.1" in view.nodes
    assert not [p for p in view.nodes if ".wh." in p]


def test_an_empty_whiteout_name_hides_nothing(tmp_path: Path) -> None:
    """`.wh.` names no file: it must not delete its directory."""
    lower = Layer([file("d/a", "a")])
    view = scan(tmp_path, [lower, Layer([Member("d/.wh.")])])
    assert "/d/a" in view.nodes and "/d" in view.nodes
    assert "/d/.wh." not in view.nodes


def test_opaque_directory_and_reserved_prefix(tmp_path: Path) -> None:
    lower = Layer([file("d/a", "a"), file("d/sub/b", "b"), file("e/wh", "keep")])
    upper = Layer([opaque("d"), file("d/new", "n"), Member("e/.wh..wh.plnk"), Member("e/.wh..wh.")])
    view = scan(tmp_path, [lower, upper])
    assert "/d/a" not in view.nodes and "/d/sub/b" not in view.nodes and "/d/new" in view.nodes
    assert "/d" in view.nodes  # an opaque whiteout keeps its directory
    # `.wh..wh.` names are reserved for the runtime, never a whiteout of `.wh.plnk` or of `e`.
    assert "/e/wh" in view.nodes and not [p for p in view.nodes if ".wh." in p]


def test_only_plain_names_take_the_regular_file_shortcut(tmp_path: Path) -> None:
    """The reader's shortcut for regular files must leave whiteouts, names that climb out of
    the root and the root itself to the full path, which records or ignores them."""
    layer = Layer([file("../../etc/libcudnn.so.9", "x"), Member("./"), file("usr/lib/ok", "y")])
    view = scan(tmp_path, [layer])
    reasons = {s.path: s.reason for s in view.skipped}
    assert "climbs above the root" in reasons["/etc/libcudnn.so.9"]
    assert "/usr/lib/ok" in view.nodes and "/etc/libcudnn.so.9" in view.nodes
    assert "/" not in view.nodes or view.nodes["/"].kind.value == "dir"


def _yield(digest: str, files: list[str], **parts: list[str]) -> LayerYield:
    entries = [(p, NodeKind.FILE, 1, 0o644, None, None) for p in files]
    return LayerYield(OciDigest(digest), entries, candidates=list(files), **parts)


def test_tree_index_stays_exact_through_whiteouts() -> None:
    """The child index that makes subtree whiteouts cheap must stay exactly the tree's: a
    stale entry would be dropped again (or kept alive) by a later opaque whiteout."""
    tree = Tree()
    tree.apply(_yield("sha256:" + "1" * 64, ["/d/a", "/d/b", "/d/sub/c", "/e/f"]))
    tree.facts["/d/a"] = tree.facts["/d/sub/c"] = FileFacts(Digests(1, Sha256("0" * 64)))
    tree.metadata["/d/sub/c"] = b"x"
    tree.apply(LayerYield(OciDigest("sha256:" + "2" * 64), whiteouts=["/d/a", "/d/sub"]))
    assert set(tree.nodes) == {"/d", "/d/b", "/e", "/e/f"}
    assert tree.children["/d"] == {"/d/b"} and "/d/sub" not in tree.children
    assert tree.candidates == {"/d/b", "/e/f"}  # whited-out files are no candidates
    assert not tree.facts and not tree.metadata
    tree.apply(LayerYield(OciDigest("sha256:" + "3" * 64), opaque=["/d", "/nowhere"]))
    assert set(tree.nodes) == {"/d", "/e", "/e/f"} and tree.children["/d"] == set()
    assert "/nowhere" not in tree.children
    tree.apply(_yield("sha256:" + "4" * 64, ["/top"], whiteouts=["/e/f", "/missing"]))
    assert tree.children["/"] == {"/d", "/e", "/top"} and tree.children["/e"] == set()


def test_a_later_entry_replaces_what_lay_at_its_path() -> None:
    """An upper layer's entry takes its path whatever a lower layer held there: a file over a
    directory hides everything under it (its files' facts and bytes too), and an entry under
    a lower file or symlink turns that path into a directory (a link is never followed);
    directories listed before their content get their child index at once."""
    dir_, file_, link_ = NodeKind.DIR, NodeKind.FILE, NodeKind.SYMLINK
    lower_facts = FileFacts(Digests(1, Sha256("1" * 64)))
    upper_facts = FileFacts(Digests(2, Sha256("2" * 64)))
    tree = Tree()
    tree.apply(
        LayerYield(
            OciDigest("sha256:" + "1" * 64),
            [
                ("/d", dir_, 0, 0o755, None, None),
                ("/d/x", file_, 1, 0o644, None, None),
                ("/d/sub", dir_, 0, 0o755, None, None),
                ("/d/sub/y", file_, 1, 0o644, None, None),
                ("/f", file_, 1, 0o644, None, None),
                ("/s", link_, 0, 0o777, "/d", None),
            ],
            candidates=["/d/x"],
            facts={"/d/x": lower_facts},
            metadata={"/d/sub/y": b"m"},
        )
    )
    assert tree.children == {
        "/": {"/d", "/f", "/s"},
        "/d": {"/d/x", "/d/sub"},
        "/d/sub": {"/d/sub/y"},
    }
    assert tree.facts == {"/d/x": lower_facts} and tree.metadata == {"/d/sub/y": b"m"}
    assert tree.candidates == {"/d/x"}
    tree.apply(
        LayerYield(
            OciDigest("sha256:" + "2" * 64),
            [
                ("/d", file_, 2, 0o644, None, None),
                ("/f/g", file_, 2, 0o644, None, None),
                ("/s/z", file_, 2, 0o644, None, None),
                ("/new", dir_, 0, 0o755, None, None),
                ("/new/n", file_, 2, 0o644, None, None),
            ],
            candidates=["/new/n"],
            facts={"/new/n": upper_facts},
            metadata={"/new/n": b"n"},
        )
    )
    assert {p: n.kind for p, n in tree.nodes.items()} == {
        "/d": file_,
        "/f": dir_,
        "/f/g": file_,
        "/s": dir_,
        "/s/z": file_,
        "/new": dir_,
        "/new/n": file_,
    }
    assert tree.children == {
        "/": {"/d", "/f", "/s", "/new"},
        "/f": {"/f/g"},
        "/s": {"/s/z"},
        "/new": {"/new/n"},
    }
    assert tree.facts == {"/new/n": upper_facts} and tree.metadata == {"/new/n": b"n"}
    assert tree.candidates == {"/new/n"}
