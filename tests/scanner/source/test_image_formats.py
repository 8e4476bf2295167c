"""Image sources in every format: squashing, whiteouts, links, config, platforms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanner.errors import SourceError, UsageError
from scanner.model import AssetKind, NodeKind
from scanner.source import open_source
from scanner.source.interface import RootView, Selector
from tests.fixtures.images import (
    FORMATS,
    Image,
    Layer,
    digest_of,
    file,
    hashing_selector,
    tree_files,
    write_docker_archive,
    write_image,
    write_oci_layout,
    write_oci_layout_tags,
)
from tests.scanner.source.samples import CUDART, CUDNN, STATUS, rich_image


def open_view(target: str, selector: Selector | None = None, **kwargs: object) -> RootView:
    options: dict[str, object] = {"cache_dir": None, "use_cache": False, "all_filesystems": False}
    options.update(kwargs)
    return open_source(target, **options).open_view(selector or hashing_selector())  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RootView]:
    base = tmp_path_factory.mktemp("formats")
    image = rich_image()
    return {fmt: open_view(write_image(base / fmt, image, fmt)) for fmt in FORMATS}


@pytest.mark.parametrize("fmt", FORMATS)
def test_squashed_tree(views: dict[str, RootView], fmt: str) -> None:
    view = views[fmt]
    nodes = view.nodes
    lib = "/usr/lib/x86_64-linux-gnu"
    # whited-out file, symlink and list file are gone; the opaque dir lost its lower files
    assert f"{lib}/libcudnn.so.8.9.7" not in nodes
    assert f"{lib}/libcudnn.so.8" not in nodes
    assert f"{lib}/libcublas.so.12" not in nodes
    assert "/var/lib/dpkg/info/libcudnn8.list" not in nodes
    assert "/opt/old/keep.txt" not in nodes and "/opt/old/libnccl.so.2" not in nodes
    assert "/opt/old/new.txt" not in nodes  # the top layer replaced the directory by a file
    assert nodes["/opt/old"].kind is NodeKind.FILE
    assert nodes[f"{lib}/libcudnn.so.9"].link == "libcudnn.so.9.1.0"
    assert nodes["/usr/local/cuda"].kind is NodeKind.SYMLINK
    assert nodes["/opt/libcudnn_copy.so.9"].size == len(CUDNN)
    assert all(".." not in p and p.startswith("/") for p in nodes)
    assert not [s for s in view.skipped if "layer" in s.reason]


@pytest.mark.parametrize("fmt", FORMATS)
def test_candidates_and_aliases(views: dict[str, RootView], fmt: str) -> None:
    view = views[fmt]
    lib = "/usr/lib/x86_64-linux-gnu"
    found = {c.ref.path: c for c in view.candidates}
    assert sorted(found) == [
        "/etc/passwd",  # reached through libcudnn_out.so, which climbed out and landed inside
        "/opt/libcudnn_copy.so.9",
        f"{lib}/libcudnn.so.9.1.0",
        "/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127",
    ]
    cudnn = found[f"{lib}/libcudnn.so.9.1.0"]
    assert cudnn.aliases == (
        "/usr/lib/libcudnn_abs.so",
        f"{lib}/libcudnn.so",
        f"{lib}/libcudnn.so.9",
    )
    assert cudnn.facts == digest_of(CUDNN)
    assert cudnn.size == len(CUDNN)
    assert cudnn.ref.layer == view.info.layers[1]
    assert found["/opt/libcudnn_copy.so.9"].facts == digest_of(CUDNN)  # hard link reuses facts
    cudart = found["/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127"]
    assert cudart.aliases == ("/usr/lib/libcudart.so", "/usr/local/cuda-12.4/lib64/libcudart.so.12")
    assert cudart.facts == digest_of(CUDART)
    # Its own name is no candidate, so its layer was read again for it (issue 7: a file is
    # reported for what it is, whatever name led to it).
    assert found["/etc/passwd"].facts == digest_of(b"root:x:0:0\n")
    assert found["/etc/passwd"].aliases == ("/usr/lib/libcudnn_out.so",)
    assert view.resolve("/usr/lib/libcudnn_loop_a.so") is None
    assert view.resolve("/usr/lib/libcudnn_dangling.so") is None
    assert view.resolve("/lib/x86_64-linux-gnu/libcudnn.so") == f"{lib}/libcudnn.so.9.1.0"


@pytest.mark.parametrize("fmt", FORMATS)
def test_metadata_and_info(views: dict[str, RootView], fmt: str) -> None:
    view = views[fmt]
    assert view.metadata == {
        "/var/lib/dpkg/status": STATUS,
        "/var/lib/dpkg/info/libcudnn9.list": b"/usr/lib/x86_64-linux-gnu/x\n",
    }
    info = view.info
    assert info.kind is AssetKind.IMAGE
    assert info.platform == "linux/amd64"
    assert info.env == (
        ("PATH", "/usr/local/cuda/bin:/usr/bin"),
        ("CUDA_VERSION", "12.4.1"),
        ("EMPTY", ""),
    )
    assert info.labels == (("com.nvidia.cudnn.version", "9.1.0.70-1"), ("maintainer", "test"))
    assert len(info.layers) == 3
    assert info.config_digest is not None and info.config_digest.startswith("sha256:")
    assert view.stats["layers_read"] == 3


def test_formats_agree(views: dict[str, RootView]) -> None:
    def shape(view: RootView) -> object:
        nodes = {p: (n.kind, n.size, n.link, n.mode) for p, n in view.nodes.items()}
        cands = [(c.ref.path, c.size, c.aliases, c.facts) for c in view.candidates]
        return nodes, cands, view.metadata, view.info.env, view.info.labels

    reference = shape(views["oci"])
    for fmt in FORMATS[1:]:
        assert shape(views[fmt]) == reference, fmt
    # OCI layouts report compressed blob digests, docker-archives the diff_ids
    assert views["oci"].info.layers == views["oci-archive"].info.layers
    assert views["docker-archive"].info.layers == views["docker25"].info.layers
    assert views["oci"].info.layers != views["docker-archive"].info.layers
    assert views["oci"].info.config_digest == views["docker-archive"].info.config_digest


def test_image_names_and_digests(tmp_path: Path) -> None:
    image = Image([Layer([file("a", "a")])])
    built = write_oci_layout(tmp_path / "cuda-demo", image, "12.4")
    view = open_view(f"oci:{tmp_path / 'cuda-demo'}:12.4")
    assert view.info.name == "cuda-demo:12.4"
    assert view.info.digest == built.manifest_digest
    assert view.info.reference == f"oci:{tmp_path / 'cuda-demo'}:12.4"
    assert view.info.layers == tuple(built.layer_digests)
    write_oci_layout(
        tmp_path / "named", image, "1", annotations={"1": {"io.containerd.image.name": "r/x:1"}}
    )
    assert open_view(f"oci:{tmp_path / 'named'}").info.name == "r/x:1"
    legacy = write_docker_archive(tmp_path / "l.tar", image, "nvidia/cuda:12.4.1", form="legacy")
    view = open_view(f"docker-archive:{tmp_path / 'l.tar'}")
    assert view.info.name == "nvidia/cuda:12.4.1"
    assert view.info.digest is None  # a legacy archive has no manifest
    assert view.info.layers == tuple(legacy.diff_ids)
    d25 = write_docker_archive(tmp_path / "d.tar", image, "nvidia/cuda:12.4.1", form="docker25")
    view = open_view(f"docker-archive:{tmp_path / 'd.tar'}:nvidia/cuda:12.4.1")
    assert view.info.digest == d25.manifest_digest
    with pytest.raises(UsageError, match="no image tagged"):
        open_view(f"docker-archive:{tmp_path / 'd.tar'}:other:1")


def test_media_type_is_not_trusted(tmp_path: Path) -> None:
    layer = Layer([file("usr/lib/libcudnn.so.9", CUDNN)], compression="zstd")
    lying = Layer(
        layer.members, compression="zstd", media_type="application/vnd.oci.image.layer.v1.tar+gzip"
    )
    write_oci_layout(tmp_path / "x", Image([lying]), "1")
    view = open_view(f"oci:{tmp_path / 'x'}:1")
    assert [c.facts for c in view.candidates] == [digest_of(CUDNN)]


def test_multi_platform_index(tmp_path: Path) -> None:
    arm = Image([Layer([file("arch", "arm64")])], architecture="arm64", variant="v8")
    amd = Image([Layer([file("arch", "amd64")])])
    built = write_oci_layout_tags(tmp_path / "multi", {"1": [arm, amd]})
    target = f"oci:{tmp_path / 'multi'}:1"

    sel = hashing_selector(is_metadata=lambda p: p == "/arch")
    default = open_view(target, sel)
    assert default.metadata["/arch"] == b"amd64"  # linux/amd64 preferred over the first entry
    assert default.info.platform == "linux/amd64"
    assert default.info.digest == built["1"][1].manifest_digest  # type: ignore[index]
    picked = open_view(target, sel, platform="linux/arm64")
    assert picked.metadata["/arch"] == b"arm64"
    assert picked.info.platform == "linux/arm64/v8"
    with pytest.raises(UsageError, match="no image for platform linux/s390x"):
        open_view(target, sel, platform="linux/s390x")


def test_layout_with_several_tags(tmp_path: Path) -> None:
    one = Image([Layer([file("v", "1")])])
    two = Image([Layer([file("v", "2")])])
    write_oci_layout_tags(tmp_path / "tags", {"a": one, "b": two})
    sel = hashing_selector(is_metadata=lambda p: p == "/v")
    assert open_view(f"oci:{tmp_path / 'tags'}:b", sel).metadata["/v"] == b"2"
    with pytest.raises(UsageError, match="several images"):
        open_view(f"oci:{tmp_path / 'tags'}", sel)
    with pytest.raises(UsageError, match="no image tagged 'c'"):
        open_view(f"oci:{tmp_path / 'tags'}:c", sel)


def test_repeated_layer_read_once(tmp_path: Path) -> None:
    same = Layer([file("usr/lib/libcudnn.so.9", CUDNN)], compression="none")
    image = Image([same, Layer([file("x", "x")]), same])
    calls: list[str] = []

    def probe(path: str, stream, size: int):  # type: ignore[no-untyped-def]
        calls.append(path)
        return digest_of(stream.read())

    target = write_image(tmp_path, image, "docker-archive")  # the repeat is a tar symlink
    view = open_view(target, hashing_selector(probe=probe))
    assert view.stats["layers_read"] == 2 and view.stats["layers_reused"] == 1
    assert calls == ["/usr/lib/libcudnn.so.9"]
    assert [c.facts for c in view.candidates] == [digest_of(CUDNN)]


def test_missing_and_tampered_blobs(tmp_path: Path) -> None:
    image = Image([Layer([file("a", "a")]), Layer([file("b", "b")])])
    built = write_oci_layout(tmp_path / "x", image, "1")
    target = f"oci:{tmp_path / 'x'}:1"
    manifest = tmp_path / "x" / "blobs" / "sha256" / built.manifest_digest.split(":")[1]
    manifest.write_bytes(manifest.read_bytes().replace(b'"schemaVersion"', b'"schemaversion"'))
    with pytest.raises(SourceError, match="manifest blob .* does not match its digest"):
        open_view(target)
    write_oci_layout(tmp_path / "y", image, "1")
    (tmp_path / "y" / "blobs" / "sha256" / built.layer_digests[1].split(":")[1]).unlink()
    with pytest.raises(SourceError, match=f"layer blob {built.layer_digests[1]} is missing"):
        open_view(f"oci:{tmp_path / 'y'}:1")


def test_hostile_descriptor_digest(tmp_path: Path) -> None:
    write_oci_layout(tmp_path / "x", Image([Layer([file("a", "a")])]), "1")
    index = json.loads((tmp_path / "x" / "index.json").read_text())
    index["manifests"][0]["digest"] = "sha256:../../../../etc/passwd"
    (tmp_path / "x" / "index.json").write_text(json.dumps(index))
    with pytest.raises(SourceError, match="invalid or unsupported digest"):
        open_view(f"oci:{tmp_path / 'x'}:1")


def test_nothing_written_into_the_image(tmp_path: Path) -> None:
    target = write_image(tmp_path / "img", rich_image(), "oci")
    before = tree_files(tmp_path / "img")
    open_view(target, cache_dir=tmp_path / "cache", use_cache=True)
    assert tree_files(tmp_path / "img") == before
    assert (tmp_path / "cache").is_dir()


@pytest.mark.parametrize("fmt", ["docker-archive", "oci", "oci-archive"])
def test_uncompressed_members_are_located_in_place(tmp_path: Path, fmt: str) -> None:
    """Members of uncompressed layers are probed where they lie; compressed ones streamed."""
    from msgspec.structs import replace

    plain = Layer([file("x", "x" * 700), file("usr/lib/libcudnn.so.9", CUDNN)], compression="none")
    gz = Layer([file("usr/lib/libcudart.so.12", b"rt" * 900)], compression="gzip")
    located: list[str] = []

    def probe_at(path, stream, size, at):  # type: ignore[no-untyped-def]
        data = stream.read()
        with open(at[0], "rb") as fh:
            fh.seek(at[1])
            assert fh.read(size) == data  # the stated location holds exactly these bytes
        located.append(path)
        return digest_of(data)

    target = write_image(tmp_path, Image([plain, gz]), fmt)
    view = open_view(target, replace(hashing_selector(), probe_at=probe_at))
    # `docker save` stores every layer uncompressed, so there both are found in place
    expected = ["/usr/lib/libcudnn.so.9"]
    if fmt == "docker-archive":
        expected.append("/usr/lib/libcudart.so.12")
    assert located == expected
    facts = {c.ref.path: c.facts for c in view.candidates}
    assert facts["/usr/lib/libcudnn.so.9"] == digest_of(CUDNN)
    assert facts["/usr/lib/libcudart.so.12"] == digest_of(b"rt" * 900)


def test_located_probe_may_answer_after_the_stream_skipped_the_bytes(tmp_path: Path) -> None:
    """A deferred answer is collected at the layer's end; the digest check still covers all."""
    from msgspec.structs import replace

    plain = Layer([file("usr/lib/libcudnn.so.9", CUDNN), file("y", "y" * 900)], compression="none")
    target = write_image(tmp_path, Image([plain]), "docker-archive")

    def probe_at(path, stream, size, at):  # type: ignore[no-untyped-def]
        def later():  # type: ignore[no-untyped-def]
            with open(at[0], "rb") as fh:
                fh.seek(at[1])
                return digest_of(fh.read(size))

        return later

    view = open_view(target, replace(hashing_selector(), probe_at=probe_at))
    assert [c.facts for c in view.candidates] == [digest_of(CUDNN)]
