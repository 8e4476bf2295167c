"""Host directory source: walk, symlinks inside the root, include, filesystems, metadata."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scanner.errors import SourceError
from scanner.model import AssetKind, NodeKind
from scanner.source import DirectorySource, open_source
from scanner.source.interface import RootView
from tests.fixtures.images import hashing_selector, tree_files

LIB = b"\x7fELF" + b"\x01" * 5000


def make_root(root: Path) -> Path:
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcudnn.so.9.1.0").write_bytes(LIB)
    (lib / "libcudnn.so.9").symlink_to("libcudnn.so.9.1.0")
    (lib / "libcudnn.so").symlink_to("/usr/lib/x86_64-linux-gnu/libcudnn.so.9")  # absolute
    (lib / "libcudnn_out.so").symlink_to("../../../../../../../etc/shadow")  # climbs out
    (lib / "libcudnn_loop.so").symlink_to("libcudnn_loop2.so")
    (lib / "libcudnn_loop2.so").symlink_to("libcudnn_loop.so")
    (lib / "plain.txt").write_text("x")
    os.mkfifo(lib / "libcudart.so.12")  # named like a candidate: must never be opened
    (root / "lib").symlink_to("usr/lib")
    (root / "loopdir").mkdir()
    (root / "loopdir/self").symlink_to("..")  # a directory loop, never followed
    (root / "etc").mkdir()
    (root / "etc/shadow").write_text("in-root shadow\n")
    (root / "etc/hostname").write_text("gpu-node-7\n")
    (root / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    dpkg = root / "var/lib/dpkg"
    dpkg.mkdir(parents=True)
    (dpkg / "status").write_text("Package: libcudnn9\n")
    (dpkg / "info").mkdir()
    (dpkg / "info/big.list").write_bytes(b"x" * 2000)
    for pseudo in ("proc", "sys", "dev"):
        (root / pseudo).mkdir()
        (root / pseudo / "libcudnn.so.9").write_bytes(LIB)
    (root / "usr/proc").mkdir()
    (root / "usr/proc/libcudnn_ops.so.9").write_bytes(LIB)  # not at the root level: walked
    return root


def scan(root: Path, **kwargs: Any) -> RootView:
    selector = hashing_selector(max_metadata_bytes=1000)
    return DirectorySource(root, **kwargs).open_view(selector)


def test_walk(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    before = tree_files(root)
    view = scan(root)
    lib = "/usr/lib/x86_64-linux-gnu"
    assert view.nodes[f"{lib}/libcudnn.so.9"].link == "libcudnn.so.9.1.0"
    assert view.nodes[f"{lib}/libcudart.so.12"].kind is NodeKind.OTHER
    assert view.nodes["/proc"].kind is NodeKind.DIR
    assert not any(p.startswith(("/proc/", "/sys/", "/dev/")) for p in view.nodes)
    assert "/loopdir/self" in view.nodes and "/loopdir/self/self" not in view.nodes
    paths = [c.ref.path for c in view.candidates]
    assert paths == ["/etc/shadow", f"{lib}/libcudnn.so.9.1.0", "/usr/proc/libcudnn_ops.so.9"]
    cudnn = view.candidates[1]
    assert cudnn.aliases == (f"{lib}/libcudnn.so", f"{lib}/libcudnn.so.9")
    assert cudnn.host_path == str(root) + f"{lib}/libcudnn.so.9.1.0"
    st = os.stat(cudnn.host_path)
    assert cudnn.stat_key == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    assert cudnn.size == len(LIB) and cudnn.facts is None and cudnn.ref.layer is None
    shadow = view.candidates[0]  # reached by the escaping link, resolved inside the root
    assert shadow.host_path == str(root) + "/etc/shadow"
    assert shadow.aliases == (f"{lib}/libcudnn_out.so",)
    assert view.resolve(f"{lib}/libcudnn_loop.so") is None
    assert view.metadata == {"/var/lib/dpkg/status": b"Package: libcudnn9\n"}
    assert [(s.path, "exceeds" in s.reason) for s in view.skipped] == [
        ("/var/lib/dpkg/info/big.list", True)
    ]
    assert view.info.kind is AssetKind.HOST
    assert view.info.name == "gpu-node-7"
    assert view.info.machine_id == "0123456789abcdef0123456789abcdef"
    assert tree_files(root) == before


def test_include(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    view = scan(root, include=["/lib/x86_64-linux-gnu", "/nope", "/proc", "/usr/lib"])
    lib = "/usr/lib/x86_64-linux-gnu"
    assert view.nodes["/lib"].kind is NodeKind.SYMLINK  # recorded on the way
    assert [c.ref.path for c in view.candidates] == ["/etc/shadow", f"{lib}/libcudnn.so.9.1.0"][1:]
    # package databases are read even outside the included subtrees (ownership needs them)
    assert "/var/lib/dpkg/status" in view.metadata
    assert "/etc/hostname" not in view.nodes  # outside every included subtree
    reasons = {s.path: s.reason for s in view.skipped}
    assert "not found" in reasons["/nope"]
    assert "pseudo filesystem" in reasons["/proc"]
    # an include through a symlink loop ends, with a clear record
    looped = scan(root, include=[f"{lib}/libcudnn_loop.so/x"])
    assert looped.candidates == [] and "not found" in looped.skipped[0].reason


def test_include_single_file(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    view = scan(root, include=["/lib/x86_64-linux-gnu/libcudnn.so"])
    assert [c.ref.path for c in view.candidates] == ["/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"]
    lib = "/usr/lib/x86_64-linux-gnu"
    assert view.candidates[0].aliases == (f"{lib}/libcudnn.so", f"{lib}/libcudnn.so.9")


class FakeEntry:
    """A DirEntry whose stat reports another device (a mount point) for one name."""

    def __init__(self, entry: os.DirEntry[str], device: int | None) -> None:
        self._entry, self._device = entry, device
        self.name, self.path = entry.name, entry.path

    def is_dir(self, follow_symlinks: bool = True) -> bool:
        return self._entry.is_dir(follow_symlinks=follow_symlinks)

    def is_file(self, follow_symlinks: bool = True) -> bool:
        return self._entry.is_file(follow_symlinks=follow_symlinks)

    def is_symlink(self) -> bool:
        return self._entry.is_symlink()

    def stat(self, follow_symlinks: bool = True) -> Any:
        st = self._entry.stat(follow_symlinks=follow_symlinks)
        if self._device is None:
            return st
        return SimpleNamespace(
            st_dev=self._device,
            st_ino=st.st_ino,
            st_mode=st.st_mode,
            st_size=st.st_size,
            st_mtime_ns=st.st_mtime_ns,
        )


class FakeScandir:
    def __init__(self, real: Any, mounted: str, denied: str) -> None:
        self.real, self.mounted, self.denied = real, mounted, denied

    def __call__(self, path: str) -> Any:
        if path.endswith(self.denied):
            raise PermissionError(13, "Permission denied", path)
        entries = [
            FakeEntry(e, 999_999 if e.name == self.mounted else None) for e in self.real(path)
        ]

        class It:
            def __init__(self) -> None:
                self.items = iter(entries)

            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def __iter__(self) -> Any:
                return self

            def __next__(self) -> FakeEntry:
                return next(self.items)

        return It()


def test_other_filesystems_and_unreadable_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_root(tmp_path / "root")
    (root / "mnt/data").mkdir(parents=True)
    (root / "mnt/data/libcudnn.so.9").write_bytes(LIB)
    (root / "secret").mkdir()
    (root / "secret/libcudnn.so.8").write_bytes(LIB)
    monkeypatch.setattr(os, "scandir", FakeScandir(os.scandir, "data", "/secret"))
    view = scan(root)
    reasons = {s.path: s.reason for s in view.skipped}
    assert "another filesystem" in reasons["/mnt/data"]
    assert "Permission denied" in reasons["/secret"]
    assert "/mnt/data/libcudnn.so.9" not in view.nodes
    assert "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0" in view.nodes  # the walk went on
    everything = scan(root, all_filesystems=True)
    assert "/mnt/data/libcudnn.so.9" in everything.nodes


def test_host_root_name(tmp_path: Path) -> None:
    view = DirectorySource("/", include=["/nonexistent-gpuprov-test"]).open_view(hashing_selector())
    expected = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").is_file() else ""
    assert view.info.name == (expected or socket.gethostname())
    bare = tmp_path / "bare"
    bare.mkdir()
    assert scan(bare).info.name == str(bare)
    assert scan(bare).info.machine_id is None


def test_open_source_for_directories(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    source = open_source(
        str(root), cache_dir=None, use_cache=True, all_filesystems=False, include=["/usr"]
    )
    view = source.open_view(hashing_selector())
    assert view.info.reference == str(root)
    assert "/etc/hostname" not in view.nodes
    with pytest.raises(SourceError, match="not a directory"):
        DirectorySource(root / "etc/hostname")


def test_listing_cache_reuses_unchanged_directories(tmp_path: Path) -> None:
    """A rescan replays unchanged directories and still sees every change."""
    from scanner.source import DirectorySource

    root = tmp_path / "root"
    lib = root / "usr" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudnn_graph.so.9").write_bytes(b"one")
    for i in range(50):
        (lib / f"plain{i}.txt").write_bytes(b"x")
    os.symlink("libcudnn_graph.so.9", lib / "libcudnn.so.9")
    cache = tmp_path / "cache"

    def scan():  # type: ignore[no-untyped-def]
        return DirectorySource(root, listing_cache=cache).open_view(hashing_selector())

    first = scan()
    assert first.stats["dirs_from_cache"] == 0
    second = scan()
    assert second.stats["dirs_from_cache"] >= 2
    assert set(second.nodes) == set(first.nodes)
    assert [(c.ref.path, c.aliases) for c in second.candidates] == [
        (c.ref.path, c.aliases) for c in first.candidates
    ]
    # A changed candidate gets a new stat key even though its directory is replayed.
    old_key = second.candidates[0].stat_key
    (lib / "libcudnn_graph.so.9").write_bytes(b"two!")
    third = scan()
    assert third.candidates[0].stat_key != old_key
    # A new file changes the directory's mtime: the listing is rebuilt and the file found.
    (lib / "libcudart.so.12").write_bytes(b"rt")
    fourth = scan()
    assert "/usr/lib/libcudart.so.12" in {c.ref.path for c in fourth.candidates}
    # A corrupt cache file is ignored.
    for f in cache.iterdir():
        f.write_text("{broken")
    assert {c.ref.path for c in scan().candidates} == {c.ref.path for c in fourth.candidates}


@pytest.mark.parametrize("include", [(), ("/usr",)])
def test_dotdot_at_the_root_never_climbs_out(tmp_path: Path, include: tuple[str, ...]) -> None:
    """`..` at the root stays at the root (as in a chroot): a link `/etc/hostname ->
    ../../secret` names the root's /secret, never the file beside the root on the host."""
    (tmp_path / "secret").write_text("host secret\n")  # outside the root
    root = make_root(tmp_path / "root")
    (root / "etc/hostname").unlink()
    (root / "etc/hostname").symlink_to("../../secret")
    assert scan(root, include=include).info.name == str(root)  # no /secret inside: no name
    (root / "secret").write_text("inside\n")
    assert scan(root, include=include).info.name == "inside"


def test_include_through_a_link_that_climbs_stays_inside(tmp_path: Path) -> None:
    outside = tmp_path / "outside/lib"
    outside.mkdir(parents=True)
    (outside / "libcudnn.so.9").write_bytes(LIB)
    root = make_root(tmp_path / "root")
    (root / "opt").mkdir()
    (root / "opt/gpu").symlink_to("../../../outside/lib")
    view = scan(root, include=["/opt/gpu"])
    assert "include path not found" in {s.path: s.reason for s in view.skipped}["/opt/gpu"]
    assert all(str(c.host_path).startswith(f"{root}/") for c in view.candidates)
    assert all(not p.startswith("/outside") for p in view.nodes)
    (root / "outside/lib").mkdir(parents=True)
    (root / "outside/lib/libcudnn.so.9").write_bytes(LIB)
    inside = scan(root, include=["/opt/gpu"])
    found = {c.ref.path: c.host_path for c in inside.candidates}
    assert found["/outside/lib/libcudnn.so.9"] == f"{root}/outside/lib/libcudnn.so.9"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("gpu-node-7\n", "gpu-node-7"),
        ("  gpu-node-7  \nsecond line\n", "gpu-node-7"),
        ("\n\n  node-after-blank-lines\n", "node-after-blank-lines"),
        ("", None),
        ("   \n", None),
    ],
)
def test_hostname_first_line(tmp_path: Path, content: str, expected: str | None) -> None:
    root = make_root(tmp_path / "root")
    (root / "etc/hostname").write_text(content)
    assert scan(root, include=["/usr"]).info.name == (expected or str(root))


def test_hostname_that_is_not_a_small_regular_file(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    (root / "etc/hostname").unlink()
    os.mkfifo(root / "etc/hostname")  # never opened: a read would block
    assert scan(root, include=["/usr"]).info.name == str(root)
    (root / "etc/hostname").unlink()
    (root / "etc/hostname").mkdir()
    assert scan(root, include=["/usr"]).info.name == str(root)


def test_include_of_special_files_and_link_chains(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    lib = "/usr/lib/x86_64-linux-gnu"
    view = scan(root, include=[f"{lib}/libcudart.so.12"])  # a FIFO named like a library
    assert view.nodes[f"{lib}/libcudart.so.12"].kind is NodeKind.OTHER and not view.candidates
    chain = root / "chain"
    chain.mkdir()
    for i in range(44):
        (chain / f"l{i}").symlink_to(f"l{i + 1}")
    (chain / "l44").symlink_to("libcudnn_graph.so.9.1.0")
    (chain / "libcudnn_graph.so.9.1.0").write_bytes(LIB)
    (chain / "libcudnn.so.9").symlink_to("l6")  # 40 links to follow: the limit
    (chain / "libcudnn_ops.so.9").symlink_to("l5")  # 41: too many
    found = scan(root, include=["/chain/libcudnn.so.9"]).candidates
    assert [c.ref.path for c in found] == ["/chain/libcudnn_graph.so.9.1.0"]
    far = scan(root, include=["/chain/libcudnn_ops.so.9"])
    assert far.candidates == [] and "not found" in far.skipped[0].reason
    (root / "etc/passwd").write_text("root:x:0:0\n")
    through_file = scan(root, include=["/etc/passwd/x"])  # a file is not a directory
    reasons = {s.path: s.reason for s in through_file.skipped}
    assert through_file.candidates == [] and "not found" in reasons["/etc/passwd/x"]
    # Only directories and links passed on the way join the tree, never the file in the way.
    assert "/etc/passwd" not in through_file.nodes and "/etc" in through_file.nodes
    # As the kernel says ENOTDIR for `passwd/..`, a link through a file resolves to nothing.
    (root / "etc/libcudnn_via.so").symlink_to("passwd/../shadow")
    via = scan(root, include=["/etc/libcudnn_via.so"])
    assert via.candidates == [] and "not found" in via.skipped[0].reason


def test_include_of_the_root_is_the_whole_walk(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    whole, included = scan(root), scan(root, include=["/", "/usr/.."])
    assert set(included.nodes) == set(whole.nodes) and "/" not in included.nodes
    assert [c.ref.path for c in included.candidates] == [c.ref.path for c in whole.candidates]


def test_reading_the_hostname_records_nothing(tmp_path: Path) -> None:
    """The asset name is read through links, but outside the included subtrees nothing the
    reader passes on the way (links, directories) becomes part of the scanned tree."""
    root = make_root(tmp_path / "root")
    (root / "srv/names").mkdir(parents=True)
    (root / "srv/names/host").write_text("node-from-srv\n")
    (root / "etc/hostname").unlink()
    (root / "etc/hostname").symlink_to("../srv/names/host")
    view = scan(root, include=["/usr"])
    assert view.info.name == "node-from-srv"
    assert not {"/etc/hostname", "/srv", "/srv/names"} & set(view.nodes)


def test_names_that_sort_before_dotdot_are_names(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    (root / "opt/-/lib").mkdir(parents=True)
    (root / "opt/-/lib/libcudnn.so.9").write_bytes(LIB)
    (root / "opt/gpu").symlink_to("-/lib")
    for include in ("/opt/-/lib", "/opt/gpu"):
        found = scan(root, include=[include]).candidates
        assert [c.ref.path for c in found] == ["/opt/-/lib/libcudnn.so.9"]


def test_an_include_removed_after_its_resolution_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An included directory removed between its resolution and its reading (a race with the
    host) is skipped with the reason, and the rest of the scan goes on."""
    from scanner.source import directory

    root = make_root(tmp_path / "root")
    (root / "opt/gone").mkdir(parents=True)
    resolve = directory._Walk.resolve

    def resolve_then_remove(walk: Any, path: str, *, record: bool) -> str | None:
        real = resolve(walk, path, record=record)
        if real == "/opt/gone":
            (root / "opt/gone").rmdir()
        return real

    monkeypatch.setattr(directory._Walk, "resolve", resolve_then_remove)
    view = scan(root, include=["/opt/gone", "/usr/lib"])
    reasons = {s.path: s.reason for s in view.skipped}
    assert reasons["/opt/gone"] == "cannot read: No such file or directory"
    assert [c.ref.path for c in view.candidates] == ["/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"]
