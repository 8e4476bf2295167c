"""Big compressed layers are inflated on a read-ahead thread while the tar is parsed: the
yield is the same, damage and digest errors still surface, and no thread outlives the read."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import threading
from typing import IO

import pytest

from scanner.errors import SourceError
from scanner.model import FileFacts, OciDigest
from scanner.source import Limits
from scanner.source.layerstream import LayerSpec
from scanner.source.tarlayer import read_layer
from tests.fixtures.images import digest_of, hash_probe, hashing_selector

LIB = os.urandom(6 << 20)  # incompressible: the gzip blob is past the read-ahead threshold


def _layer() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(500):
            data = b"x" * (i % 700)
            info = tarfile.TarInfo(f"srv/f{i:03d}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("usr/lib/libcudnn.so.9")
        info.size = len(LIB)
        tar.addfile(info, io.BytesIO(LIB))
    return gzip.compress(buf.getvalue(), compresslevel=1, mtime=0)


BLOB = _layer()


def _spec(blob: bytes, digest: str | None = None) -> LayerSpec:
    dg = OciDigest(digest or "sha256:" + hashlib.sha256(blob).hexdigest())
    return LayerSpec(dg, len(blob), lambda: io.BytesIO(blob))


def _inflaters() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "gpuprov-inflate"]


def test_big_layer_is_inflated_ahead_and_yields_the_same() -> None:
    seen: list[list[str]] = []

    def probe(path: str, stream: IO[bytes], size: int) -> FileFacts:
        seen.append(_inflaters())
        return hash_probe(path, stream, size)

    assert len(BLOB) > 4 << 20
    out = read_layer(_spec(BLOB), hashing_selector(probe=probe), Limits())
    assert seen == [["gpuprov-inflate"]]  # the probe ran while the helper inflated
    assert out.corrupt is None
    assert out.facts == {"/usr/lib/libcudnn.so.9": digest_of(LIB)}
    assert len(out.entries) == 501
    assert out.expanded_bytes > len(LIB)
    assert _inflaters() == []


def test_truncated_big_layer_is_damage_and_the_thread_ends() -> None:
    cut = BLOB[: len(BLOB) * 3 // 4]
    with pytest.raises(SourceError, match="declares|descriptor|digest"):
        read_layer(
            _spec(cut, "sha256:" + hashlib.sha256(BLOB).hexdigest()), hashing_selector(), Limits()
        )
    out = read_layer(_spec(cut), hashing_selector(), Limits())
    assert out.corrupt is not None and "truncated" in out.corrupt
    assert "/usr/lib/libcudnn.so.9" not in out.facts
    assert _inflaters() == []


def test_digest_mismatch_on_a_big_layer_is_an_error() -> None:
    with pytest.raises(SourceError, match="digest mismatch"):
        read_layer(_spec(BLOB, "sha256:" + "0" * 64), hashing_selector(), Limits())
    assert _inflaters() == []
