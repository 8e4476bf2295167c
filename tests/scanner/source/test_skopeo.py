"""Cross-check against skopeo: archives it writes from our layout read identically."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from scanner.source import open_source
from scanner.source.interface import RootView
from tests.fixtures.images import hashing_selector, write_oci_layout
from tests.scanner.source.samples import rich_image

SKOPEO = shutil.which("skopeo") or "/usr/bin/skopeo"


def skopeo_copy(src: str, dest: str, *extra: str) -> None:
    subprocess.run(
        [SKOPEO, "copy", "-q", "--insecure-policy", *extra, src, dest],
        check=True,
        capture_output=True,
        timeout=120,
    )


def view(target: str) -> RootView:
    source = open_source(target, cache_dir=None, use_cache=False, all_filesystems=False)
    return source.open_view(hashing_selector())


def shape(v: RootView) -> object:
    nodes = {p: (n.kind, n.size, n.link) for p, n in v.nodes.items()}
    candidates = [(c.ref.path, c.size, c.aliases, c.facts) for c in v.candidates]
    return nodes, candidates, v.metadata, v.info.env, v.info.labels, v.info.platform


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("skopeo")
    # skopeo cannot write zstd layers into a docker-archive, so the source layout uses gzip
    write_oci_layout(base / "src", rich_image(middle_compression="gzip"), "1")
    src = f"oci:{base / 'src'}:1"
    skopeo_copy(src, f"docker-archive:{base / 'docker.tar'}:demo/cuda:1")
    skopeo_copy(src, f"oci-archive:{base / 'oci.tar'}:1")
    skopeo_copy(src, f"oci:{base / 'zstd'}:1", "--dest-compress", "--dest-compress-format", "zstd")
    return {
        "src": src,
        "docker-archive": f"docker-archive:{base / 'docker.tar'}",
        "oci-archive": f"oci-archive:{base / 'oci.tar'}:1",
        "zstd": f"oci:{base / 'zstd'}:1",
        "sniffed": str(base / "docker.tar"),
    }


@pytest.mark.parametrize("kind", ["docker-archive", "oci-archive", "zstd", "sniffed"])
def test_skopeo_copies_read_identically(copies: dict[str, str], kind: str) -> None:
    ours = view(copies["src"])
    theirs = view(copies[kind])
    assert shape(theirs) == shape(ours)
    assert len(theirs.info.layers) == 3
    assert not theirs.skipped


def test_skopeo_docker_archive_identity(copies: dict[str, str]) -> None:
    ours = view(copies["src"])
    theirs = view(copies["docker-archive"])
    assert theirs.info.name == "docker.io/demo/cuda:1"
    assert theirs.info.config_digest == ours.info.config_digest
    assert theirs.info.digest is None
    assert theirs.stats["layers_read"] == 3
    zstd = view(copies["zstd"])
    assert zstd.info.layers != ours.info.layers  # recompressed blobs, same content
