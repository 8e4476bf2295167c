"""Target parsing and the `open_source` factory: transports, sniffing, clear errors."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

import pytest

from scanner.errors import SourceError, UsageError
from scanner.source import (
    DirectorySource,
    DockerArchiveSource,
    OciArchiveSource,
    OciLayoutSource,
    open_source,
    parse_target,
)
from tests.fixtures.images import (
    Image,
    Layer,
    file,
    hashing_selector,
    write_docker_archive,
    write_oci_archive,
    write_oci_layout,
)

IMAGE = Image([Layer([file("usr/lib/libcudnn.so.9", b"\x7fELF")])])


def make(target: str, **kwargs: object):  # type: ignore[no-untyped-def]
    options: dict[str, object] = {"cache_dir": None, "use_cache": False, "all_filesystems": False}
    options.update(kwargs)
    return open_source(target, **options)  # type: ignore[arg-type]


def test_parse_target(tmp_path: Path) -> None:
    odd = tmp_path / "with:colon"
    odd.mkdir()
    (odd / "img.tar").write_bytes(b"")
    assert parse_target(str(tmp_path)) == ("dir", str(tmp_path), None)
    assert parse_target(f"oci:{tmp_path}") == ("oci", str(tmp_path), None)
    assert parse_target(f"oci:{tmp_path}:v1") == ("oci", str(tmp_path), "v1")
    assert parse_target(f"oci:{tmp_path}/missing:v1") == ("oci", f"{tmp_path}/missing", "v1")
    assert parse_target(f"oci-archive:{odd}/img.tar:2") == ("oci-archive", f"{odd}/img.tar", "2")
    assert parse_target(f"docker-archive:{odd}/img.tar:nvidia/cuda:12") == (
        "docker-archive",
        f"{odd}/img.tar",
        "nvidia/cuda:12",
    )
    assert parse_target(f"{odd}/img.tar") == ("file", f"{odd}/img.tar", None)
    assert parse_target("registry:example.com/x:1") == (
        "registry",
        "registry:example.com/x:1",
        None,
    )
    assert parse_target("docker://example.com/x") == ("registry", "docker://example.com/x", None)
    with pytest.raises(UsageError, match="unsupported target type 'ftp'"):
        parse_target("ftp:example.com/x:1")
    with pytest.raises(UsageError, match="empty scan target"):
        parse_target("")
    with pytest.raises(UsageError, match="missing path"):
        parse_target("oci:")
    with pytest.raises(SourceError, match="no such file or directory"):
        parse_target(str(tmp_path / "nothing"))


def test_open_source_kinds(tmp_path: Path) -> None:
    write_oci_layout(tmp_path / "layout", IMAGE, "1")
    write_oci_archive(tmp_path / "oci.tar", IMAGE, "1")
    write_docker_archive(tmp_path / "legacy.tar", IMAGE, form="legacy")
    write_docker_archive(tmp_path / "d25.tar", IMAGE, form="docker25")
    assert isinstance(make(str(tmp_path)), DirectorySource)
    assert isinstance(make(f"oci:{tmp_path / 'layout'}:1"), OciLayoutSource)
    # A bare layout directory is the image it holds, not a host root of blob files.
    assert parse_target(str(tmp_path / "layout")) == ("oci", str(tmp_path / "layout"), None)
    assert isinstance(make(str(tmp_path / "layout")), OciLayoutSource)
    assert isinstance(make(f"oci-archive:{tmp_path / 'oci.tar'}"), OciArchiveSource)
    assert isinstance(make(str(tmp_path / "oci.tar")), OciArchiveSource)
    assert isinstance(make(str(tmp_path / "legacy.tar")), DockerArchiveSource)
    assert isinstance(make(str(tmp_path / "d25.tar")), DockerArchiveSource)
    views = [
        make(t).open_view(hashing_selector())
        for t in (
            str(tmp_path / "oci.tar"),
            str(tmp_path / "d25.tar"),
            f"oci:{tmp_path / 'layout'}",
            str(tmp_path / "layout"),
        )
    ]
    assert len({tuple(c.ref.path for c in v.candidates) for v in views}) == 1


def test_every_source_declares_its_signature_capabilities(tmp_path: Path) -> None:
    """The `Source` protocol's `digests` and `signature_material` (issue 8: the pipeline used
    to probe for them with getattr): local sources hold no signatures; an OCI image names the
    digests signatures may be made over once opened; a docker-archive (no manifest digest)
    and a host root name none."""
    write_oci_layout(tmp_path / "layout", IMAGE, "1")
    write_docker_archive(tmp_path / "d.tar", IMAGE)
    (tmp_path / "root").mkdir()
    for target, named in (
        (f"oci:{tmp_path / 'layout'}:1", True),
        (str(tmp_path / "d.tar"), False),
        (str(tmp_path / "root"), False),
    ):
        source = make(target)
        assert source.digests == ()
        view = source.open_view(hashing_selector())
        assert source.signature_material() == []
        assert bool(source.digests) is named, target
        if named:
            assert view.info.digest in source.digests


def test_open_source_errors(tmp_path: Path) -> None:
    write_oci_layout(tmp_path / "layout", IMAGE, "1")
    with pytest.raises(UsageError, match="apply to host directories"):
        make(f"oci:{tmp_path / 'layout'}", include=["/usr"])
    with pytest.raises(UsageError, match="applies to images"):
        make(str(tmp_path), platform="linux/arm64")
    with pytest.raises(UsageError, match="not OS/ARCH"):
        make(f"oci:{tmp_path / 'layout'}", platform="amd64")
    with pytest.raises(SourceError, match="not an OCI image layout"):
        make(f"oci:{tmp_path}")
    with pytest.raises(SourceError, match="no such directory"):
        make(f"oci:{tmp_path / 'none'}:1")
    with pytest.raises(SourceError, match="no such archive file"):
        make(f"docker-archive:{tmp_path / 'none.tar'}")

    plain = tmp_path / "plain.tar"
    with tarfile.open(plain, "w") as tar:
        tar.add(tmp_path / "layout" / "oci-layout", arcname="something")
    with pytest.raises(SourceError, match="neither an OCI archive nor a docker-archive"):
        make(str(plain))
    with pytest.raises(SourceError, match="not a docker-archive"):
        make(f"docker-archive:{plain}")
    squeezed = tmp_path / "image.tar.gz"
    write_oci_archive(tmp_path / "x.tar", IMAGE)
    squeezed.write_bytes(gzip.compress((tmp_path / "x.tar").read_bytes()))
    with pytest.raises(SourceError, match="decompress it first"):
        make(str(squeezed))
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00not a tar" * 100)
    with pytest.raises(SourceError, match="not a readable tar archive"):
        make(str(junk))


def test_a_directory_is_a_layout_only_with_both_marker_files(tmp_path: Path) -> None:
    """`oci-layout` alone (or `index.json` alone) in a host root does not make it an image."""
    (tmp_path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    assert parse_target(str(tmp_path)) == ("dir", str(tmp_path), None)
    (tmp_path / "oci-layout").unlink()
    (tmp_path / "index.json").write_text("{}")
    assert parse_target(str(tmp_path)) == ("dir", str(tmp_path), None)
    (tmp_path / "oci-layout").mkdir()
    assert parse_target(str(tmp_path)) == ("dir", str(tmp_path), None)
