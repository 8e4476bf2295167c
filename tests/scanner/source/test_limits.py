"""Layer limits (issue 7, section 1): the same verdict whatever the layer cache holds, and a
decompression bomb refused after a bounded amount of inflating."""

from __future__ import annotations

import io
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from scanner.errors import SourceError, UnsafeArchiveError
from scanner.model import OciDigest
from scanner.pipeline import ScanOptions, run_scan
from scanner.source import Limits, open_source
from scanner.source.interface import RootView
from scanner.source.layercache import LayerCache
from scanner.source.layerstream import Budget, LayerSpec
from scanner.source.limits import MAX_LAYER_DIR_DEPTH
from scanner.source.squash import squash
from scanner.source.tarlayer import read_layer
from tests.fixtures.images import (
    Image,
    Layer,
    file,
    hashing_selector,
    sha256,
    write_docker_archive,
    write_image,
)

MiB = 1 << 20
#: One gzip layer that every limit below can be made to trip: 2 MiB of zeros (ratio ~1000),
#: a 700-character name (a pax header), 40 entries.
BOMBISH = Layer(
    [
        file("usr/lib/libcudnn.so.9", bytes(2 * MiB)),
        file("opt/" + "n" * 700, "long name"),
        *(file(f"etc/f{i}", str(i)) for i in range(38)),
    ]
)


def target_of(tmp_path: Path, image: Image, fmt: str) -> str:
    """``fmt``: "oci", "docker-archive" (layers stored uncompressed, as docker does) or
    "docker-gzip" (compressed layers checked by their diff_id, which ``docker load`` takes)."""
    if fmt != "docker-gzip":
        return write_image(tmp_path / "img", image, fmt)
    write_docker_archive(tmp_path / "docker.tar", image, keep_compression=True)
    return f"docker-archive:{tmp_path / 'docker.tar'}"


def view(target: str, cache: Path | None, limits: Limits | None = None) -> RootView:
    source = open_source(
        target,
        cache_dir=cache,
        use_cache=cache is not None,
        all_filesystems=False,
        limits=limits,
    )
    return source.open_view(hashing_selector())


# Each limit tight enough to refuse BOMBISH, with the message naming it.
TIGHT = {
    "max_image_bytes": (Limits(max_image_bytes=MiB), "limit max_image_bytes"),
    "max_layer_bytes": (Limits(max_layer_bytes=MiB), "limit max_layer_bytes"),
    "max_ratio": (Limits(max_ratio=10, ratio_allowance_bytes=0), "limit max_ratio"),
    "max_file_bytes": (Limits(max_file_bytes=MiB), "limit max_file_bytes"),
    "max_entries": (Limits(max_entries=20), "limit max_entries"),
    "max_header_bytes": (Limits(max_header_bytes=512), "limit max_header_bytes"),
}


@pytest.mark.parametrize(
    ("fmt", "limit"),
    [
        (fmt, limit)
        for fmt in ("oci", "docker-archive", "docker-gzip")
        for limit in sorted(TIGHT)
        # an uncompressed layer has no compression ratio
        if (fmt, limit) != ("docker-archive", "max_ratio")
    ],
)
def test_every_limit_gives_the_same_verdict_cold_and_warm(
    tmp_path: Path, fmt: str, limit: str
) -> None:
    target = target_of(tmp_path, Image([BOMBISH]), fmt)
    cache = tmp_path / "cache"
    warm = view(target, cache)  # the defaults accept the layer, which is now cached
    assert warm.stats["layers_read"] == 1
    assert view(target, cache).stats["layers_cached"] == 1
    limits, message = TIGHT[limit]
    with pytest.raises(UnsafeArchiveError, match=message):
        view(target, None, limits)  # cold
    with pytest.raises(UnsafeArchiveError, match=message):
        view(target, cache, limits)  # warm: was accepted from the cache before issue 7


def test_image_total_counts_cached_layers(tmp_path: Path) -> None:
    """Two layers, each under the image cap alone: refused whether read or cached."""
    second = Layer([file("usr/lib/libcudart.so.12", bytes(2 * MiB))])
    target = write_image(tmp_path / "img", Image([BOMBISH, second]), "oci")
    cache = tmp_path / "cache"
    view(target, cache)
    limits = Limits(max_image_bytes=3 * MiB)
    for where in (None, cache):
        with pytest.raises(UnsafeArchiveError, match="limit max_image_bytes"):
            view(target, where, limits)
    assert view(target, cache, Limits(max_image_bytes=6 * MiB)).stats["layers_cached"] == 2


def test_max_size_cli_option_is_cache_independent(tmp_path: Path) -> None:
    """The reported case: ``--max-size 1K`` passed with a warm cache, failed with --no-cache."""
    target = write_image(tmp_path / "img", Image([BOMBISH]), "oci")
    options = ScanOptions(cache_dir=tmp_path / "cache", workers=1)
    run_scan(target, options)  # warms the cache
    for use_cache in (False, True):
        tight = ScanOptions(
            cache_dir=tmp_path / "cache", use_cache=use_cache, max_total_bytes=1024, workers=1
        )
        with pytest.raises(UnsafeArchiveError, match="--max-size"):
            run_scan(target, tight)


def test_bad_limit_values_are_usage_errors(tmp_path: Path) -> None:
    from scanner.errors import UsageError

    target = write_image(tmp_path / "img", Image([BOMBISH]), "oci")
    for options in (
        ScanOptions(max_total_bytes=0),
        ScanOptions(max_ratio=-1),
        ScanOptions(max_layer_bytes=0),
    ):
        with pytest.raises(UsageError, match="must be"):
            run_scan(target, options)


def test_cached_yield_of_another_blob_size_is_not_trusted(tmp_path: Path) -> None:
    """A descriptor whose size disagrees with the blob is refused even when the digest's
    yield is cached (the size check, like the ratio, depends on the blob, not the digest)."""
    blob = BOMBISH.stored()
    digest = OciDigest(sha256(blob))
    cache = LayerCache(tmp_path / "cache")
    selector = hashing_selector()

    def spec(size: int) -> LayerSpec:
        return LayerSpec(digest, size, lambda: io.BytesIO(blob))

    squash([spec(len(blob))], selector, cache=cache)
    assert squash([spec(len(blob))], selector, cache=cache).stats["layers_cached"] == 1
    with pytest.raises(SourceError, match="declared size"):
        squash([spec(len(blob) - 1)], selector, cache=cache)


# -- bombs: refused after bounded work ----------------------------------------------------------


class _Bomb(io.RawIOBase):
    """A gzip layer of one ``expanded``-byte file of zeros, generated as it is read.

    Deflate blocks after a full flush do not depend on earlier data, so one compressed MiB of
    zeros is repeated: nothing of the size of the bomb is ever held or written. The trailer
    is never reached (the bomb is refused first), so it is not computed.
    """

    def __init__(self, expanded: int) -> None:
        super().__init__()
        info = tarfile.TarInfo("usr/lib/libcudnn.so.9")
        info.size = expanded
        header = info.tobuf(format=tarfile.PAX_FORMAT)
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        self._head = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
        self._block = c.compress(bytes(MiB)) + c.flush(zlib.Z_FULL_FLUSH)
        self.blocks = expanded // MiB
        self.size = len(self._head) + self.blocks * len(self._block) + 8
        self.read_bytes = 0
        self._chunks = self._gen()
        self._pending = b""

    def _gen(self) -> Iterator[bytes]:
        yield self._head
        for _ in range(self.blocks):
            yield self._block
        yield bytes(8)

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        while not self._pending:
            self._pending = next(self._chunks, b"")
            if not self._pending:
                return b""
        n = len(self._pending) if n is None or n < 0 else n
        out, self._pending = self._pending[:n], self._pending[n:]
        self.read_bytes += len(out)
        return out


def _refuse(bomb: _Bomb, limits: Limits) -> Budget:
    budget = Budget(limits)
    spec = LayerSpec(OciDigest("sha256:" + "0" * 64), bomb.size, lambda: bomb)
    with pytest.raises(UnsafeArchiveError, match="decompression bomb"):
        read_layer(spec, hashing_selector(), limits, budget)
    return budget


def test_default_limits_refuse_a_zero_bomb_after_bounded_inflating() -> None:
    """The issue's bomb shape (gzip of zeros, ~1000x), scaled to 4 GiB: the defaults stop it
    once it passes 100x its compressed size, long before its end."""
    bomb = _Bomb(4 << 30)
    assert bomb.size < 5 * MiB  # about 1000 times smaller than what it expands to
    limits = Limits()
    budget = _refuse(bomb, limits)
    cap = limits.ratio_cap(bomb.size)
    assert cap < 600 * MiB
    # Inflating stops within one chunk of the cap: bytes inflated, not seconds, are asserted.
    assert cap < budget.expanded <= cap + MiB
    assert bomb.read_bytes < bomb.size // 4


def test_ratio_allowance_keeps_small_layers_legal() -> None:
    """A small layer may expand up to the allowance whatever its ratio; past it, refused."""
    limits = Limits(ratio_allowance_bytes=64 * MiB)
    assert limits.ratio_cap(1000) == 64 * MiB
    assert limits.ratio_cap(10 * MiB) == 1000 * MiB
    budget = _refuse(_Bomb(256 * MiB), limits)
    assert 64 * MiB < budget.expanded <= 65 * MiB


def test_defaults_are_documented_values() -> None:
    """docs/cli.md states these; a change must change the docs."""
    limits = Limits()
    assert (limits.max_ratio, limits.ratio_allowance_bytes) == (100, 64 * MiB)
    assert (limits.max_layer_bytes, limits.max_image_bytes) == (16 << 30, 32 << 30)
    assert MAX_LAYER_DIR_DEPTH == 512
    text = (Path(__file__).parents[3] / "docs" / "cli.md").read_text()
    for needle in ("100", "64 MiB", "16 GiB", "32 GiB", "--max-layer-size", "| 512 levels |"):
        assert needle in text
