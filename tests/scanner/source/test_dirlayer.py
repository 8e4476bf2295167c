"""An extracted layer directory (overlay2's ``diff/``) read into the yield its tar would give:
whiteouts both ways (a 0/0 character device, a ``.wh.`` file), opaque directories both ways
(the overlay xattr, trusted or rootless, and ``.wh..wh..opq``), hard links, devices, and
entries that change under the walk."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from scanner.errors import SourceError, UnsafeArchiveError
from scanner.model import NodeKind, OciDigest
from scanner.source.dirlayer import read_dir_layer
from scanner.source.layerstream import Budget, LayerSpec
from scanner.source.limits import MAX_LAYER_DIR_DEPTH, Limits
from scanner.source.tarlayer import LayerYield, read_layer
from tests.fixtures.images import hashing_selector
from tests.fixtures.nodestores import overlay_whiteouts_supported

CONTENT = b"\x7fELF not really a library"
NO_BLOB = OciDigest("sha256:" + "0" * 64)


def _no_blob() -> io.BytesIO:
    raise AssertionError("a layer directory has no blob to open")


def _read_dir(root: Path, opaque: frozenset[str] | None = None) -> LayerYield:
    spec = LayerSpec(NO_BLOB, None, _no_blob)
    limits = Limits()
    known = None if opaque is None else (lambda: opaque)
    return read_dir_layer(str(root), spec, hashing_selector(), limits, Budget(limits), opaque=known)


def _read_tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> LayerYield:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    blob = buffer.getvalue()
    spec = LayerSpec(
        OciDigest("sha256:" + hashlib.sha256(blob).hexdigest()), len(blob), lambda: io.BytesIO(blob)
    )
    return read_layer(spec, hashing_selector(), Limits())


def _member(name: str, kind: bytes = tarfile.REGTYPE, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def _shape(layer: LayerYield) -> tuple[object, ...]:
    return (
        sorted(layer.entries, key=repr),
        sorted(layer.whiteouts),
        sorted(layer.opaque),
        sorted(layer.candidates),
        {path: facts.digests for path, facts in layer.facts.items()},
        layer.skipped,
    )


def _require_overlay_whiteouts(base: Path) -> None:
    if not overlay_whiteouts_supported(base):
        pytest.fail("overlay whiteouts (mknod 0/0, trusted.* xattrs) need root")


def test_a_layer_directory_yields_what_its_tar_yields(tmp_path: Path) -> None:
    """The same layer as a tar and as the directory overlay2 extracts it to: every kind of
    entry, a hard link of two names (the second one a link to the first, of size 0, as a tar
    writer stores it), a fifo and a device other than 0/0 (size 0), and whiteouts and opaque
    markers in both forms, with the ``.wh.`` names that are none."""
    _require_overlay_whiteouts(tmp_path)
    tar = _read_tar(
        [
            (_member("opt", tarfile.DIRTYPE), None),
            (_member("opt/.wh."), b""),  # names nothing: no whiteout
            (_member("opt/.wh..wh.plnk"), b""),  # reserved for the runtime: no whiteout
            (_member("opt/.wh..hidden"), b""),  # the whiteout of a dot file
            (_member("opt/.wh.a"), b""),  # the shortest whiteout name
            (_member("opt/current", tarfile.SYMTYPE, linkname="libcudnn.so.9", mode=0o777), None),
            (_member("opt/libcudnn.so.9", size=len(CONTENT)), CONTENT),
            (_member("opt/null", tarfile.CHRTYPE, devmajor=1, devminor=3), None),
            (_member("opt/pipe", tarfile.FIFOTYPE), None),
            (_member("opt/zlink", tarfile.LNKTYPE, linkname="opt/libcudnn.so.9"), None),
            (_member(".wh.gone"), b""),
            (_member("hidden", tarfile.DIRTYPE), None),
            (_member("hidden/.wh..wh..opq"), b""),
            (_member("marked", tarfile.DIRTYPE), None),
            (_member("marked/.wh..wh..opq"), b""),
        ]
    )
    root = tmp_path / "diff"
    (root / "opt").mkdir(parents=True)
    (root / "opt/.wh.").write_bytes(b"")
    (root / "opt/.wh..wh.plnk").write_bytes(b"")
    (root / "opt/.wh..hidden").write_bytes(b"")
    (root / "opt/.wh.a").write_bytes(b"")
    (root / "opt/current").symlink_to("libcudnn.so.9")
    (root / "opt/libcudnn.so.9").write_bytes(CONTENT)
    os.mkfifo(root / "opt/pipe")
    os.mknod(root / "opt/null", 0o644 | 0o020000, os.makedev(1, 3))  # a device, no whiteout
    os.link(root / "opt/libcudnn.so.9", root / "opt/zlink")
    os.mknod(root / "gone", 0o600 | 0o020000, os.makedev(0, 0))  # the overlay whiteout
    (root / "hidden").mkdir()
    os.setxattr(root / "hidden", "trusted.overlay.opaque", b"y")  # the overlay opaque marker
    (root / "marked").mkdir()
    (root / "marked/.wh..wh..opq").write_bytes(b"")  # the tar form, kept as a file
    for name in ("opt", "hidden", "marked"):
        (root / name).chmod(0o755)
    for name in ("opt/libcudnn.so.9", "opt/pipe"):
        (root / name).chmod(0o644)
    directory = _read_dir(root)
    assert _shape(directory) == _shape(tar)
    assert sorted(directory.whiteouts) == ["/gone", "/opt/.hidden", "/opt/a"]
    assert sorted(directory.opaque) == ["/hidden", "/marked"]
    entries = {e[0]: e[1:] for e in directory.entries}
    assert entries["/opt/zlink"] == (NodeKind.FILE, 0, 0o644, None, "/opt/libcudnn.so.9")
    assert entries["/opt/pipe"] == (NodeKind.OTHER, 0, 0o644, None, None)
    assert entries["/opt/null"] == (NodeKind.OTHER, 0, 0o644, None, None)
    assert entries["/opt/libcudnn.so.9"] == (NodeKind.FILE, len(CONTENT), 0o644, None, None)


def test_only_the_value_y_makes_a_directory_opaque(tmp_path: Path) -> None:
    """overlayfs hides the lower content of a directory whose opaque xattr is ``y``: the
    trusted one (as root) or the user one (rootless overlay, where reading trusted.* fails);
    another value, or none, hides nothing."""
    _require_overlay_whiteouts(tmp_path)
    root = tmp_path / "diff"
    values = {
        "trusted-y": ("trusted.overlay.opaque", b"y"),
        "trusted-n": ("trusted.overlay.opaque", b"n"),
        "trusted-a": ("trusted.overlay.opaque", b"a"),
        "trusted-yy": ("trusted.overlay.opaque", b"yy"),
        "user-y": ("user.overlay.opaque", b"y"),
        "user-n": ("user.overlay.opaque", b"n"),
    }
    for name, (xattr, value) in values.items():
        (root / name).mkdir(parents=True)
        os.setxattr(root / name, xattr, value)
    (root / "plain").mkdir()
    both = root / "user-y-trusted-n"
    both.mkdir()
    os.setxattr(both, "trusted.overlay.opaque", b"n")
    os.setxattr(both, "user.overlay.opaque", b"y")
    assert sorted(_read_dir(root).opaque) == ["/trusted-y", "/user-y", "/user-y-trusted-n"]
    # without xattrs, the opaque directories known from the layer's tar-split record
    assert sorted(_read_dir(root, frozenset({"/plain"})).opaque) == [
        "/plain",
        "/trusted-y",
        "/user-y",
        "/user-y-trusted-n",
    ]


_READLINK = os.readlink


def _named(path: object, dir_fd: object) -> str:
    """The path a call of ``os`` names: ``path`` itself, a descriptor (through its /proc link),
    or a name relative to ``dir_fd``."""
    if isinstance(path, int):
        return _READLINK(f"/proc/self/fd/{path}")
    if isinstance(dir_fd, int):
        return os.path.join(_READLINK(f"/proc/self/fd/{dir_fd}"), str(path))
    return str(path)


def _racing(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    victim: Path,
    change: Callable[[Path], None],
    *,
    after: bool = False,
) -> None:
    """Change ``victim`` just before (``after``: just after) the walk calls ``os.NAME`` on it
    (a layer directory changing under the walk)."""
    real = getattr(os, name)
    changed: list[Path] = []

    def call(path: str, *args: object, **kwargs: object) -> object:
        hit = not changed and _named(path, kwargs.get("dir_fd")) == str(victim)
        if hit and not after:
            changed.append(victim)
            change(victim)
        result = real(path, *args, **kwargs)
        if hit and after:
            changed.append(victim)
            change(victim)
        return result

    monkeypatch.setattr(os, name, call)


def _watch(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the walk lists and opens, taken from the descriptors once open (so a path
    followed through a link is named by where it led)."""
    seen: list[str] = []
    scandir, open_ = os.scandir, os.open

    def listing(path: object) -> object:
        seen.append(os.path.realpath(path) if isinstance(path, str) else _named(path, None))
        return scandir(path)  # type: ignore[call-overload]

    def opening(path: str, flags: int, *args: object, **kwargs: object) -> int:
        fd = open_(path, flags, *args, **kwargs)  # type: ignore[arg-type]
        seen.append(_named(fd, None))
        return fd

    monkeypatch.setattr(os, "scandir", listing)
    monkeypatch.setattr(os, "open", opening)
    return seen


def _open_fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def test_an_entry_removed_before_its_lstat_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "diff"
    (root / "a/gone").mkdir(parents=True)
    (root / "a/kept").write_bytes(b"k")
    _racing(monkeypatch, "lstat", root / "a/gone", Path.rmdir)
    layer = _read_dir(root)
    assert [(s.path, s.reason) for s in layer.skipped] == [
        ("/a/gone", f"layer {NO_BLOB} ({root}): No such file or directory")
    ]
    assert [e[0] for e in layer.entries] == ["/a", "/a/kept"]


def test_a_link_removed_before_its_readlink_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "diff"
    root.mkdir()
    (root / "link").symlink_to("target")
    (root / "other").symlink_to("elsewhere")
    _racing(monkeypatch, "readlink", root / "link", Path.unlink)
    layer = _read_dir(root)
    assert [(s.path, s.reason) for s in layer.skipped] == [
        ("/link", f"layer {NO_BLOB} ({root}): No such file or directory")
    ]
    assert layer.entries == [("/other", NodeKind.SYMLINK, 0, 0o777, "elsewhere", None)]


def test_the_opaque_xattr_is_never_read_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory swapped for a link between its lstat and the xattr read: the link's own
    xattrs are read (it has none), not those of the directory it points to outside the layer."""
    _require_overlay_whiteouts(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.setxattr(outside, "trusted.overlay.opaque", b"y")
    root = tmp_path / "diff"
    (root / "d").mkdir(parents=True)

    def swap(victim: Path) -> None:
        victim.rmdir()
        victim.symlink_to(outside)

    _racing(monkeypatch, "getxattr", root / "d", swap)
    layer = _read_dir(root)
    assert (root / "d").is_symlink()  # the swap happened
    assert layer.opaque == []


def _swap_for_link(target: Path) -> Callable[[Path], None]:
    def swap(victim: Path) -> None:
        victim.rename(victim.with_name(victim.name + ".moved"))
        victim.symlink_to(target)

    return swap


def _outside(tmp_path: Path) -> Path:
    """A directory outside the layer holding a candidate file and a subdirectory."""
    outside = tmp_path / "outside"
    (outside / "c/deeper").mkdir(parents=True)
    (outside / "libnccl.so.outside1").write_bytes(b"outside the layer")
    (outside / "c/libnccl.so.outside2").write_bytes(b"outside the layer")
    return outside


def test_a_directory_swapped_for_a_link_after_its_lstat_is_not_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory swapped for a symlink to a directory outside the layer between its lstat
    and its listing: the walk does not follow it (it was listed through the link when the
    walk read the layer path by path). The directory is recorded as its lstat found it, a
    `skipped` entry names it, the walk goes on, and no descriptor stays open."""
    outside = _outside(tmp_path)
    root = tmp_path / "diff"
    (root / "a/d").mkdir(parents=True)
    (root / "a/d/libcudart.so.12").write_bytes(CONTENT)
    (root / "a/z").write_bytes(b"z")
    (root / "a/d").chmod(0o755)
    _racing(monkeypatch, "lstat", root / "a/d", _swap_for_link(outside), after=True)
    seen = _watch(monkeypatch)
    before = _open_fds()
    layer = _read_dir(root)
    assert _open_fds() == before
    assert (root / "a/d").is_symlink()  # the swap happened
    assert not [p for p in seen if p.startswith(str(outside))]
    assert [e[:2] for e in layer.entries] == [
        ("/a", NodeKind.DIR),
        ("/a/d", NodeKind.DIR),
        ("/a/z", NodeKind.FILE),
    ]
    assert layer.candidates == [] and layer.facts == {}
    assert [(s.path, s.reason) for s in layer.skipped] == [
        ("/a/d", f"layer {NO_BLOB} ({root}): cannot list (changed while read)")
    ]


def test_a_directory_swapped_for_another_after_its_lstat_is_not_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another directory moved into the place of one between its lstat and its opening: the
    directory opened is not the one the lstat recorded (device and inode differ), so it is
    not listed."""
    outside = _outside(tmp_path)
    root = tmp_path / "diff"
    (root / "d").mkdir(parents=True)
    (root / "d/libcudart.so.12").write_bytes(CONTENT)

    def swap(victim: Path) -> None:
        victim.rename(victim.with_name("d.moved"))
        outside.rename(victim)

    _racing(monkeypatch, "lstat", root / "d", swap, after=True)
    layer = _read_dir(root)
    assert (root / "d/libnccl.so.outside1").exists()  # the swap happened
    assert [e[0] for e in layer.entries] == ["/d"]
    assert layer.facts == {}
    assert [(s.path, s.reason) for s in layer.skipped] == [
        ("/d", f"layer {NO_BLOB} ({root}): cannot list (changed while read)")
    ]


def test_an_intermediate_directory_swapped_for_a_link_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/a`` swapped for a link to a directory outside the layer while the walk is in
    ``/a/b`` with entries pending there and in ``/a``: the rest of the walk reads the
    directories it holds open, never a path through the link, so it yields the layer as it
    was before the swap."""
    outside = _outside(tmp_path)
    (outside / "b/c").mkdir(parents=True)
    (outside / "b/c/libnccl.so.outside3").write_bytes(b"outside the layer")
    root = tmp_path / "diff"
    (root / "a/b/c").mkdir(parents=True)
    (root / "a/b/d").mkdir()
    (root / "a/b/c/libcudart.so.12").write_bytes(CONTENT)
    (root / "a/b/d/libcudnn.so.9").write_bytes(CONTENT)
    (root / "a/e").write_bytes(b"e")
    untouched = _read_dir(root)
    swap = _swap_for_link(outside)
    _racing(monkeypatch, "lstat", root / "a/b/c", lambda _victim: swap(root / "a"))
    seen = _watch(monkeypatch)
    before = _open_fds()
    layer = _read_dir(root)
    assert _open_fds() == before
    assert (root / "a").is_symlink()  # the swap happened
    assert not [p for p in seen if p.startswith(str(outside))]
    assert layer.entries == untouched.entries
    assert [e[0] for e in layer.entries] == [
        "/a",
        "/a/b",
        "/a/b/c",
        "/a/b/c/libcudart.so.12",
        "/a/b/d",
        "/a/b/d/libcudnn.so.9",
        "/a/e",
    ]
    assert sorted(layer.facts) == ["/a/b/c/libcudart.so.12", "/a/b/d/libcudnn.so.9"]
    assert _shape(layer) == _shape(untouched)


def test_directories_nested_past_the_limit_are_not_entered(tmp_path: Path) -> None:
    """The walk holds a descriptor for each directory above the entry it reads: past
    `MAX_LAYER_DIR_DEPTH` levels a directory is recorded but not entered, a `skipped` entry
    says so, and every descriptor is closed again."""
    root = tmp_path / "diff"
    deepest = root.joinpath(*["d"] * (MAX_LAYER_DIR_DEPTH + 1))
    (deepest / "e").mkdir(parents=True)
    (deepest.parent / "libcudart.so.12").write_bytes(CONTENT)  # at the last level entered
    (deepest / "libcudnn.so.9").write_bytes(CONTENT)  # in the directory not entered
    (root / "z").write_bytes(b"z")  # after the deep branch
    before = _open_fds()
    layer = _read_dir(root)
    assert _open_fds() == before
    paths = [e[0] for e in layer.entries]
    deep = "/d" * (MAX_LAYER_DIR_DEPTH + 1)
    assert paths[MAX_LAYER_DIR_DEPTH - 1 :] == [
        "/d" * MAX_LAYER_DIR_DEPTH,
        deep,
        "/d" * MAX_LAYER_DIR_DEPTH + "/libcudart.so.12",
        "/z",
    ]
    assert sorted(layer.facts) == ["/d" * MAX_LAYER_DIR_DEPTH + "/libcudart.so.12"]
    assert [(s.path, s.reason) for s in layer.skipped] == [
        (
            deep,
            f"layer {NO_BLOB} ({root}): not read: nested deeper than {MAX_LAYER_DIR_DEPTH} "
            "directories (limit)",
        )
    ]


def test_a_walk_stopped_by_a_limit_closes_its_descriptors(tmp_path: Path) -> None:
    """A limit refusing the layer deep in the walk: the descriptors of the directories the
    walk was in are closed as the error leaves it."""
    root = tmp_path / "diff"
    (root / "a/b/c").mkdir(parents=True)
    (root / "a/b/c/big").write_bytes(b"x" * 1024)
    limits = Limits(max_file_bytes=1023)
    spec = LayerSpec(NO_BLOB, None, _no_blob)
    before = _open_fds()
    with pytest.raises(UnsafeArchiveError, match="max_file_bytes"):
        read_dir_layer(str(root), spec, hashing_selector(), limits, Budget(limits))
    assert _open_fds() == before


def test_the_layer_root_itself_must_be_a_directory_read_as_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The layer's own directory: missing, a symlink, swapped for a link or for another
    directory between its lstat and its opening are each a clear error naming the layer."""
    label = f"layer {NO_BLOB}"
    with pytest.raises(SourceError) as missing:
        _read_dir(tmp_path / "none")
    assert (
        str(missing.value)
        == f"{label} ({tmp_path / 'none'}): cannot read (No such file or directory)"
    )
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(SourceError) as linked:
        _read_dir(tmp_path / "link")
    assert str(linked.value) == f"{label} ({tmp_path / 'link'}): not a directory"
    root = tmp_path / "diff"
    root.mkdir()
    _racing(monkeypatch, "lstat", root, _swap_for_link(real), after=True)
    with pytest.raises(SourceError) as swapped:
        _read_dir(root)
    assert str(swapped.value) == (f"{label} ({root}): cannot read (Not a directory)")
    monkeypatch.undo()
    other = tmp_path / "diff2"
    other.mkdir()

    def replace(victim: Path) -> None:
        victim.rename(victim.with_name("diff2.moved"))
        real.rename(victim)

    _racing(monkeypatch, "lstat", other, replace, after=True)
    with pytest.raises(SourceError) as replaced:
        _read_dir(other)
    assert str(replaced.value) == f"{label} ({other}): changed while read"


@pytest.mark.parametrize("opaque", [False, True])
def test_a_directory_not_listed_keeps_its_mode_and_known_opaque_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opaque: bool
) -> None:
    """A directory removed between its lstat and its opening is recorded as the lstat found
    it (mode), opaque when the layer's tar-split record says so, and the reason is the
    system's own words."""
    root = tmp_path / "diff"
    (root / "d").mkdir(parents=True)
    (root / "d").chmod(0o751)
    _racing(monkeypatch, "lstat", root / "d", Path.rmdir, after=True)
    layer = _read_dir(root, frozenset({"/d"}) if opaque else frozenset())
    assert layer.entries == [("/d", NodeKind.DIR, 0, 0o751, None, None)]
    assert layer.opaque == (["/d"] if opaque else [])
    assert [(s.path, s.reason) for s in layer.skipped] == [
        ("/d", f"layer {NO_BLOB} ({root}): cannot list (No such file or directory)")
    ]
    assert layer.tar_entries == (2 if opaque else 1)


def test_the_entry_count_is_what_the_tar_would_count(tmp_path: Path) -> None:
    """`tar_entries`, the layer's entry count as a tar of it would have: entries, whiteouts
    and opaque markers (here 4, 2 and 1, so a sum no other arithmetic gives)."""
    _require_overlay_whiteouts(tmp_path)
    root = tmp_path / "diff"
    (root / "a").mkdir(parents=True)
    (root / "a/f").write_bytes(b"f")
    (root / "a/g").write_bytes(b"g")
    (root / "o").mkdir()
    os.setxattr(root / "o", "trusted.overlay.opaque", b"y")
    os.mknod(root / "gone", 0o600 | 0o020000, os.makedev(0, 0))
    (root / ".wh.also").write_bytes(b"")
    layer = _read_dir(root)
    assert (len(layer.entries), len(layer.whiteouts), len(layer.opaque)) == (4, 2, 1)
    assert layer.tar_entries == 7


@pytest.mark.parametrize("newer", [False, True])
def test_a_directory_swapped_for_an_older_or_newer_one_is_not_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, newer: bool
) -> None:
    """The inode check is equality: a replacement directory made before the original (a lower
    inode number here) or after it (a higher one) is refused alike."""
    older = tmp_path / "older"
    older.mkdir()
    root = tmp_path / "diff"
    (root / "d").mkdir(parents=True)
    younger = tmp_path / "younger"
    younger.mkdir()
    original = os.lstat(root / "d").st_ino
    replacement = younger if newer else older
    assert (os.lstat(replacement).st_ino > original) is newer  # the case this run is about
    (replacement / "libnccl.so.outside").write_bytes(b"outside the layer")

    def swap(victim: Path) -> None:
        victim.rename(victim.with_name("d.moved"))
        replacement.rename(victim)

    _racing(monkeypatch, "lstat", root / "d", swap, after=True)
    layer = _read_dir(root)
    assert [e[0] for e in layer.entries] == ["/d"] and layer.facts == {}
    assert [(s.path, s.reason) for s in layer.skipped] == [
        ("/d", f"layer {NO_BLOB} ({root}): cannot list (changed while read)")
    ]


def test_an_oversized_metadata_file_is_skipped_alike_by_every_source(tmp_path: Path) -> None:
    """The metadata size limit is one rule: a tar layer, a layer directory and a host root say
    the same of the same file, and keep the file that fits."""
    from scanner.source.directory import DirectorySource

    selector = hashing_selector(is_metadata=lambda p: p.startswith("/meta/"), max_metadata_bytes=8)
    files = {"meta/big": b"123456789", "meta/small": b"12345678"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_member("meta", tarfile.DIRTYPE))
        for name, data in files.items():
            tar.addfile(_member(name, size=len(data)), io.BytesIO(data))
    blob = buffer.getvalue()
    digest = OciDigest("sha256:" + hashlib.sha256(blob).hexdigest())
    from_tar = read_layer(
        LayerSpec(digest, len(blob), lambda: io.BytesIO(blob)), selector, Limits()
    )
    root = tmp_path / "root"
    (root / "meta").mkdir(parents=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    limits = Limits()
    spec = LayerSpec(NO_BLOB, None, _no_blob)
    from_dir = read_dir_layer(str(root), spec, selector, limits, Budget(limits))
    host = DirectorySource(root).open_view(selector)
    said = "metadata file of 9 bytes exceeds the 8 byte limit"
    for skipped in (from_tar.skipped, from_dir.skipped, host.skipped):
        assert [(s.path, s.reason) for s in skipped] == [("/meta/big", said)]
    assert host.metadata == {"/meta/small": b"12345678"}
