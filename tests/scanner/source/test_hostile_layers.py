"""Hostile and damaged layers: escaping names, devices, bombs, truncation, digest mismatch."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
import zstandard

from scanner.errors import SourceError, UnsafeArchiveError
from scanner.model import FileFacts, NodeKind
from scanner.source import Limits, open_source
from scanner.source.interface import RootView, Selector
from tests.fixtures.images import (
    Image,
    Layer,
    Member,
    device,
    digest_of,
    file,
    hashing_selector,
    layer_tar,
    sha256,
    write_oci_layout,
)

LIB = b"\x7fELF" + bytes(range(256)) * 300


def scan(
    tmp_path: Path,
    layers: list[Layer],
    selector: Selector | None = None,
    limits: Limits | None = None,
) -> RootView:
    write_oci_layout(tmp_path / "img", Image(layers), "1")
    source = open_source(
        f"oci:{tmp_path / 'img'}:1",
        cache_dir=None,
        use_cache=False,
        all_filesystems=False,
        limits=limits,
    )
    return source.open_view(selector or hashing_selector())


def test_escaping_names_stay_inside_the_root(tmp_path: Path) -> None:
    view = scan(
        tmp_path,
        [
            Layer(
                [
                    file("../../../etc/libcudnn.so.9", LIB),
                    file("/usr/lib/libcudart.so.12", LIB),
                    file("./usr/../../lib/ok", "x"),
                    file("a/./b//c", "c"),
                ]
            )
        ],
    )
    assert "/etc/libcudnn.so.9" in view.nodes
    assert "/usr/lib/libcudart.so.12" in view.nodes
    assert "/lib/ok" in view.nodes and "/a/b/c" in view.nodes
    assert all(".." not in p and "//" not in p for p in view.nodes)
    reasons = {s.path: s.reason for s in view.skipped}
    assert "climbs above the root" in reasons["/etc/libcudnn.so.9"]
    assert "is absolute" in reasons["/usr/lib/libcudart.so.12"]
    assert "climbs above the root" in reasons["/lib/ok"]
    assert "/a/b/c" not in reasons
    assert [c.ref.path for c in view.candidates] == [
        "/etc/libcudnn.so.9",
        "/usr/lib/libcudart.so.12",
    ]


def test_devices_and_fifos_are_never_read(tmp_path: Path) -> None:
    calls: list[str] = []

    def probe(path, stream, size):  # type: ignore[no-untyped-def]
        calls.append(path)
        return digest_of(stream.read())

    view = scan(
        tmp_path,
        [
            Layer(
                [
                    device("usr/lib/libcudnn.so.9", "chr"),
                    device("var/lib/dpkg/status", "fifo"),
                    device("dev/sda", "blk"),
                ]
            )
        ],
        hashing_selector(probe=probe),
    )
    assert view.nodes["/usr/lib/libcudnn.so.9"].kind is NodeKind.OTHER
    assert view.nodes["/var/lib/dpkg/status"].kind is NodeKind.OTHER
    assert view.nodes["/dev/sda"].kind is NodeKind.OTHER
    assert calls == [] and view.candidates == [] and view.metadata == {}


def bomb(compression: str, size: int = 32 << 20) -> Layer:
    return Layer([file("usr/lib/libcudnn.so.9", bytes(size))], compression=compression)


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_decompression_bomb_ratio(tmp_path: Path, compression: str) -> None:
    layer = bomb(compression)
    digest = sha256(layer.stored())
    with pytest.raises(UnsafeArchiveError, match=f"layer {digest}: expands more than 50 times"):
        scan(tmp_path, [layer], limits=Limits(max_ratio=50, ratio_allowance_bytes=0))


def test_limits_on_total_file_and_entries(tmp_path: Path) -> None:
    layer = bomb("gzip", 4 << 20)
    with pytest.raises(UnsafeArchiveError, match="limit max_image_bytes"):
        scan(tmp_path / "a", [layer], limits=Limits(max_image_bytes=1 << 20))
    with pytest.raises(UnsafeArchiveError, match="limit max_file_bytes"):
        scan(tmp_path / "b", [layer], limits=Limits(max_file_bytes=1 << 20))
    many = Layer([file(f"f{i}", "") for i in range(50)])
    with pytest.raises(UnsafeArchiveError, match="limit max_entries"):
        scan(tmp_path / "c", [many], limits=Limits(max_entries=20))
    assert scan(tmp_path / "d", [layer]).candidates[0].size == 4 << 20  # defaults allow it
    with pytest.raises(ValueError):
        Limits(max_ratio=0)


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    tar = layer_tar([file("usr/lib/libcudart.so.12", LIB), file("big", bytes(range(256)) * 4000)])
    broken = gzip.compress(tar)[:-300]  # the digest is taken over the damaged blob
    view = scan(
        tmp_path,
        [
            Layer([file("base", "b")]),
            Layer(blob=broken),
            Layer([file("usr/lib/libcudnn.so.9", LIB)]),
        ],
    )
    damaged = [s for s in view.skipped if s.path == sha256(broken)]
    assert len(damaged) == 1
    assert (
        "truncated" in damaged[0].reason
        and "the 1 entry read before the damage was kept" in damaged[0].reason
    )
    assert "/base" in view.nodes and "/usr/lib/libcudnn.so.9" in view.nodes
    assert "/big" not in view.nodes  # cut short: its content is unknown
    assert [c.ref.path for c in view.candidates] == [
        "/usr/lib/libcudart.so.12",
        "/usr/lib/libcudnn.so.9",
    ]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_truncated_inside_a_candidate(tmp_path: Path, compression: str) -> None:
    swallowed: list[BaseException] = []

    def swallowing_probe(path, stream, size):  # type: ignore[no-untyped-def]
        try:
            return digest_of(stream.read())
        except Exception as e:  # a careless probe must not hide the damage
            swallowed.append(e)
            return FileFacts(digest_of(b"").digests, error="read failed")

    tar = layer_tar([file("a", "a"), file("usr/lib/libcudnn.so.9", LIB)])
    cut = tar[: 1024 + 512 + 1000]
    blob = cut if compression == "none" else zstandard.ZstdCompressor().compress(cut)
    view = scan(tmp_path, [Layer(blob=blob)], hashing_selector(probe=swallowing_probe))
    assert swallowed
    assert any("truncated" in s.reason for s in view.skipped if s.path == sha256(blob))
    assert "/a" in view.nodes and "/usr/lib/libcudnn.so.9" not in view.nodes
    assert view.candidates == []


def test_garbage_and_missing_end_marker(tmp_path: Path) -> None:
    tar = layer_tar([file("a", "a")])
    garbage = tar[:1024] + b"\x01" * 512 + tar[1024:]
    no_end = layer_tar([file("a", "a")], end_marker=False)
    view = scan(
        tmp_path, [Layer(blob=gzip.compress(garbage)), Layer(tar=no_end, compression="none")]
    )
    reasons = [s.reason for s in view.skipped]
    assert any("invalid tar header after 1 entries" in r for r in reasons)
    assert any("without an end-of-archive marker" in r for r in reasons)
    assert "/a" in view.nodes
    empty = scan(tmp_path / "e", [Layer(blob=gzip.compress(b""))])
    assert any("holds no tar data" in s.reason for s in empty.skipped)


def test_corrupt_gzip_data(tmp_path: Path) -> None:
    blob = bytearray(gzip.compress(layer_tar([file("a", bytes(range(256)) * 100)])))
    blob[40:60] = b"\xff" * 20
    view = scan(tmp_path, [Layer(blob=bytes(blob))])
    assert any("gzip data is corrupt" in s.reason for s in view.skipped)


def test_digest_and_size_mismatch(tmp_path: Path) -> None:
    layer = Layer([file("usr/lib/libcudnn.so.9", LIB)])
    built = write_oci_layout(tmp_path / "img", Image([layer]), "1")
    blob = tmp_path / "img" / "blobs" / "sha256" / built.layer_digests[0].split(":")[1]
    target = f"oci:{tmp_path / 'img'}:1"
    data = blob.read_bytes()
    other = gzip.compress(layer_tar([file("usr/lib/libcudnn.so.9", b"evil" * 10)]))
    blob.write_bytes(other[: len(data)].ljust(len(data), b"\0"))
    source = open_source(target, cache_dir=None, use_cache=False, all_filesystems=False)
    with pytest.raises(SourceError, match=f"layer {built.layer_digests[0]}: digest mismatch"):
        source.open_view(hashing_selector())
    blob.write_bytes(data + b"extra")
    with pytest.raises(SourceError, match="larger than its declared size"):
        source.open_view(hashing_selector())
    blob.write_bytes(data[:-5])
    with pytest.raises(SourceError, match="descriptor says"):
        source.open_view(hashing_selector())


def test_long_names_pax_and_gnu(tmp_path: Path) -> None:
    deep = "usr/" + "/".join(["d" * 60] * 4) + "/libcudnn.so.9"
    gnu = io.BytesIO()
    with tarfile.open(fileobj=gnu, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("opt/" + "e" * 120 + "/libcudart.so.12")
        info.size = len(LIB)
        tar.addfile(info, io.BytesIO(LIB))
        link = tarfile.TarInfo("opt/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/" + "t" * 150
        tar.addfile(link)
    view = scan(
        tmp_path,
        [Layer([file(deep, LIB)]), Layer(tar=gnu.getvalue(), compression="gzip")],
    )
    assert {c.ref.path for c in view.candidates} == {
        "/" + deep,
        "/opt/" + "e" * 120 + "/libcudart.so.12",
    }
    assert view.nodes["/opt/link"].link == "/" + "t" * 150
    assert all(c.facts == digest_of(LIB) for c in view.candidates)


def test_metadata_size_limit_and_candidate_metadata(tmp_path: Path) -> None:
    sel = hashing_selector(is_metadata=lambda p: p.startswith("/meta"), max_metadata_bytes=100)
    view = scan(
        tmp_path,
        [
            Layer(
                [
                    file("meta/small", "s"),
                    file("meta/big", b"b" * 101),
                    file("meta/libcudnn.so.9", LIB[:50]),
                ]
            )
        ],
        sel,
    )
    assert view.metadata == {"/meta/small": b"s", "/meta/libcudnn.so.9": LIB[:50]}
    assert [s.path for s in view.skipped] == ["/meta/big"]
    assert view.candidates[0].facts == digest_of(LIB[:50])


def test_hardlink_to_missing_target(tmp_path: Path) -> None:
    tar = layer_tar([Member("x", tarfile.LNKTYPE, linkname="nowhere"), file("y", "y")])
    view = scan(tmp_path, [Layer(tar=tar, compression="none")])
    assert "/x" not in view.nodes and "/y" in view.nodes
    assert any(s.path == "/x" and "no such file" in s.reason for s in view.skipped)


def _header(name: str, kind: bytes, size_field: bytes, extended: bool = False) -> bytes:
    """A raw ustar header with the given type and size field, checksummed."""
    header = bytearray(tarfile.TarInfo(name).tobuf(tarfile.USTAR_FORMAT)[:512])
    header[156:157] = kind
    header[124:136] = size_field
    header[482] = 1 if extended else 0
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def test_gnu_sparse_and_base256_headers(tmp_path: Path) -> None:
    # an old GNU sparse entry with one extension block, then a file whose size is base-256
    sparse = _header("usr/lib/libcudnn_sparse.so.9", b"S", b"%011o\0" % 512, extended=True)
    extension = bytes(504) + b"\0" + bytes(7)  # isextended = 0: the last extension block
    base256 = _header("usr/lib/libcudart.so.12", b"0", b"\x80" + (3).to_bytes(11, "big"))
    tar = sparse + extension + b"s" * 512 + base256 + b"abc".ljust(512, b"\0") + bytes(1024)
    view = scan(tmp_path, [Layer(tar=tar, compression="gzip")])
    assert view.nodes["/usr/lib/libcudart.so.12"].size == 3
    assert view.candidates[0].facts == digest_of(b"abc")
    assert view.nodes["/usr/lib/libcudnn_sparse.so.9"].kind is NodeKind.FILE
    assert any("sparse" in s.reason for s in view.skipped)


def test_signed_checksum_is_accepted(tmp_path: Path) -> None:
    name = "usr/lib/libcudnn_é.so.9".encode().decode("latin-1")  # bytes >= 128 in the name
    header = bytearray(_header(name, b"0", b"%011o\0" % 3))
    header[148:156] = b" " * 8
    signed = sum(b - 256 if b > 127 else b for b in header)
    header[148:156] = b"%06o\0 " % signed
    tar = bytes(header) + b"abc".ljust(512, b"\0") + bytes(1024)
    view = scan(tmp_path, [Layer(tar=tar, compression="none")])
    assert len(view.candidates) == 1 and not view.skipped


def test_legacy_docker_layers_compressed_and_tampered(tmp_path: Path) -> None:
    from tests.fixtures.images import write_docker_archive

    image = Image([Layer([file("usr/lib/libcudnn.so.9", LIB)], compression="gzip")])
    write_docker_archive(tmp_path / "gz.tar", image, keep_compression=True)
    source = open_source(
        f"docker-archive:{tmp_path / 'gz.tar'}",
        cache_dir=None,
        use_cache=False,
        all_filesystems=False,
    )
    view = source.open_view(hashing_selector())
    assert [c.facts for c in view.candidates] == [digest_of(LIB)]  # diff_id checked on the tar

    write_docker_archive(tmp_path / "plain.tar", image)
    data = (tmp_path / "plain.tar").read_bytes()
    tampered = data.replace(LIB[-600:], b"X" * 600)
    assert tampered != data
    (tmp_path / "plain.tar").write_bytes(tampered)
    source = open_source(
        f"docker-archive:{tmp_path / 'plain.tar'}",
        cache_dir=None,
        use_cache=False,
        all_filesystems=False,
    )
    with pytest.raises(SourceError, match="digest mismatch"):
        source.open_view(hashing_selector())


def test_planted_device_and_fifo_blobs(tmp_path: Path) -> None:
    import os

    for i, plant in enumerate(("fifo", "device")):
        layout = tmp_path / f"img{i}"
        built = write_oci_layout(layout, Image([Layer([file("a", "a")])]), "1")
        blob = layout / "blobs" / "sha256" / built.layer_digests[0].split(":")[1]
        blob.unlink()
        if plant == "fifo":
            os.mkfifo(blob)
        else:
            blob.symlink_to("/dev/zero")
        source = open_source(
            f"oci:{layout}:1", cache_dir=None, use_cache=False, all_filesystems=False
        )
        with pytest.raises(SourceError, match="not a regular file"):
            source.open_view(hashing_selector())
