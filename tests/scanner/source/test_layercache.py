"""The layer cache: shared base layers are read once, damaged entries are redone."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.model import Digests, ElfFacts, FileFacts, NodeKind, OciDigest, Sha256, Skipped
from scanner.source import open_source
from scanner.source.interface import RootView, Selector
from scanner.source.layercache import LayerCache, decode_value, default_cache_dir, encode_value
from scanner.source.tarlayer import LayerYield
from tests.fixtures.images import (
    Image,
    Layer,
    digest_of,
    file,
    hashing_selector,
    sha256,
    symlink,
    whiteout,
    write_image,
)

CUDNN = b"\x7fELF cudnn" * 5000
BASE = Layer(
    [
        file("usr/lib/libcudnn.so.9.1.0", CUDNN),
        symlink("usr/lib/libcudnn.so.9", "libcudnn.so.9.1.0"),
        file("var/lib/dpkg/status", "Package: libcudnn9\n"),
    ]
)


class Counting:
    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, path, stream, size):  # type: ignore[no-untyped-def]
        self.paths.append(path)
        return digest_of(stream.read())


def view_of(target: str, cache_dir: Path | None, selector: Selector) -> RootView:
    source = open_source(
        target, cache_dir=cache_dir, use_cache=cache_dir is not None, all_filesystems=False
    )
    return source.open_view(selector)


def shape(view: RootView) -> object:
    return (
        {p: (n.kind, n.size, n.link, n.layer) for p, n in view.nodes.items()},
        view.candidates,
        view.metadata,
        view.skipped,
        view.info,
    )


@pytest.mark.parametrize("fmt", ["oci", "docker-archive"])
def test_second_image_reads_only_its_new_layer(tmp_path: Path, fmt: str) -> None:
    cache = tmp_path / "cache"
    first = write_image(tmp_path / "a", Image([BASE, Layer([file("app/a", "a")])]), fmt)
    second_image = Image(
        [BASE, Layer([file("usr/lib/libcudart.so.12", b"cudart"), whiteout("var/lib/dpkg/status")])]
    )
    second = write_image(tmp_path / "b", second_image, fmt)

    probe = Counting()
    view = view_of(first, cache, hashing_selector(probe=probe))
    assert view.stats["layers_read"] == 2 and view.stats["layers_cached"] == 0
    assert probe.paths == ["/usr/lib/libcudnn.so.9.1.0"]

    probe = Counting()
    cached = view_of(second, cache, hashing_selector(probe=probe))
    assert cached.stats["layers_read"] == 1 and cached.stats["layers_cached"] == 1
    assert probe.paths == ["/usr/lib/libcudart.so.12"]  # the base layer was not read again
    fresh = view_of(second, None, hashing_selector())
    assert shape(cached) == shape(fresh)
    assert [c.facts for c in cached.candidates] == [digest_of(b"cudart"), digest_of(CUDNN)]
    assert cached.metadata == {}

    again = view_of(first, cache, hashing_selector(probe=Counting()))
    assert again.stats["layers_read"] == 0 and again.stats["layers_cached"] == 2
    assert again.metadata == {"/var/lib/dpkg/status": b"Package: libcudnn9\n"}


def test_damaged_entry_is_ignored_and_rewritten(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target = write_image(tmp_path / "a", Image([BASE]), "oci")
    reference = view_of(target, cache, hashing_selector())
    entries = sorted(cache.rglob("*.layer"))
    assert len(entries) == 1
    good = entries[0].read_bytes()
    for damaged in (good[:-10], good[:50], good[:-40] + b"x" * 40, b""):
        entries[0].write_bytes(damaged)
        view = view_of(target, cache, hashing_selector())
        assert view.stats["layers_read"] == 1 and view.stats["layers_cached"] == 0
        assert shape(view) == shape(reference)
        assert entries[0].read_bytes() == good  # rewritten
    assert not list(cache.rglob(".tmp-*"))


def test_selector_version_is_part_of_the_key(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target = write_image(tmp_path / "a", Image([BASE]), "oci")
    view_of(target, cache, hashing_selector(version="v1"))
    assert view_of(target, cache, hashing_selector(version="v2")).stats["layers_read"] == 1
    assert view_of(target, cache, hashing_selector(version="v1")).stats["layers_read"] == 0


def test_disabled_cache_writes_nothing(tmp_path: Path) -> None:
    target = write_image(tmp_path / "a", Image([BASE]), "oci")
    source = open_source(
        target, cache_dir=tmp_path / "cache", use_cache=False, all_filesystems=False
    )
    source.open_view(hashing_selector())
    assert not (tmp_path / "cache").exists()


def test_damaged_layers_are_not_cached(tmp_path: Path) -> None:
    import gzip

    from tests.fixtures.images import layer_tar

    broken = gzip.compress(layer_tar([file("a", bytes(range(256)) * 100)]))[:-50]
    target = write_image(tmp_path / "a", Image([Layer(blob=broken)]), "oci")
    view_of(target, tmp_path / "cache", hashing_selector())
    second = view_of(target, tmp_path / "cache", hashing_selector())
    assert second.stats["layers_read"] == 1
    assert any(s.path == sha256(broken) for s in second.skipped)


def test_facts_round_trip() -> None:
    facts = FileFacts(
        Digests(10, Sha256("ab" * 32), md5="cd" * 16),
        ElfFacts(
            machine="aarch64",
            soname="libcudnn_graph.so.9",
            needed=("libc.so.6", "libcublasLt.so.12"),
            version_ints=(("cudnn_graph_version", 0x090100),),
            markers=("cudnn_version_9_1_0_70",),
            version_strings=("9.1.0",),
            cudart_build=12040,
            referenced_cuda_majors=(12,),
        ),
        error=None,
    )
    assert decode_value(FileFacts, encode_value(facts)) == facts
    bare = FileFacts(Digests(0, Sha256("00" * 32)), None, "not an ELF file")
    assert decode_value(FileFacts, encode_value(bare)) == bare
    with pytest.raises(ValueError):
        decode_value(FileFacts, {"digests": {"size": "10", "sha256": "x"}})


def test_cache_put_get_directly(tmp_path: Path) -> None:
    cache = LayerCache(tmp_path)
    sel = hashing_selector()
    digest = OciDigest("sha256:" + "1" * 64)
    layer = LayerYield(
        digest,
        entries=[
            ("/a", NodeKind.FILE, 1, 0o644, None, None),
            ("/l", NodeKind.SYMLINK, 0, 0o777, "a", None),
            ("/h", NodeKind.FILE, 0, 0o600, None, "/a"),
            ("/d", NodeKind.DIR, 0, 0o755, None, None),
        ],
        whiteouts=["/gone"],
        opaque=["/opq"],
        facts={"/usr/lib/libcudnn.so.9": digest_of(b"x")},
        metadata={"/m": b"\x00\xffbinary", "/n": b""},
        skipped=[Skipped("/s", "why", "source")],
        compressed_bytes=5,
        expanded_bytes=7,
    )
    assert cache.get(digest, sel) is None
    assert cache.put(layer, sel)
    assert cache.get(digest, sel) == layer
    assert cache.get(OciDigest("sha256:" + "2" * 64), sel) is None
    # Owner-only, like the cache's directories: entries hold the images' metadata files.
    (entry,) = list(tmp_path.rglob("*.layer"))
    assert entry.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no temporary left


def test_default_directory_is_under_the_cache_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One cache root for the whole scanner (`scanner.fsutil.cache_root`), which honours
    GPUPROV_CACHE_DIR (issue 8: the layer cache used to ignore it)."""
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path / "gp"))
    assert default_cache_dir() == tmp_path / "gp" / "layers"
    monkeypatch.delenv("GPUPROV_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "gpuprov" / "layers"
