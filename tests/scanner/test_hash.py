"""Hash stage: digests equal hashlib's, MD5 only on request, spooling, the host cache."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from scanner.errors import HashError
from scanner.hash import (
    HostFactsCache,
    SpoolingHasher,
    facts_from_json,
    facts_to_json,
    hash_file,
)
from scanner.model import Digests, ElfFacts, FileFacts, Sha256


def _data(n: int) -> bytes:
    return bytes((i * 7 + 3) % 251 for i in range(n))


@pytest.mark.parametrize("size", [0, 1, 4 * 1024 * 1024 + 17])
def test_hash_file_matches_hashlib(tmp_path: Path, size: int) -> None:
    data = _data(size)
    p = tmp_path / "f"
    p.write_bytes(data)
    d = hash_file(str(p), md5=True)
    assert d.sha256 == hashlib.sha256(data).hexdigest()
    assert d.md5 == hashlib.md5(data).hexdigest()
    assert d.size == size
    assert hash_file(str(p)).md5 is None


def test_hash_file_refuses_symlink_and_missing(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(HashError, match="cannot open"):
        hash_file(str(tmp_path / "link"))
    with pytest.raises(HashError, match="missing"):
        hash_file(str(tmp_path / "missing"))


def test_spooling_hasher_copies_and_hashes(tmp_path: Path) -> None:
    data = _data(9 * 1024 * 1024 + 5)
    h = SpoolingHasher(str(tmp_path), md5=True)
    h.feed(io.BytesIO(data), len(data))
    d = h.finish()
    assert d.sha256 == hashlib.sha256(data).hexdigest()
    assert d.md5 == hashlib.md5(data).hexdigest()
    assert Path(h.path).read_bytes() == data
    h.discard()
    assert not Path(h.path).exists()


def test_spooling_hasher_truncated_stream(tmp_path: Path) -> None:
    h = SpoolingHasher(str(tmp_path), md5=False)
    with pytest.raises(HashError, match="ended 10 bytes early"):
        h.feed(io.BytesIO(b"abc"), 13)
    h.discard()
    assert list(tmp_path.iterdir()) == []


def test_facts_round_trip() -> None:
    facts = FileFacts(
        digests=Digests(size=3, sha256=Sha256("a" * 64), md5="b" * 32),
        elf=ElfFacts(
            machine="aarch64",
            soname="libcudnn_graph.so.9",
            needed=("libc.so.6",),
            version_ints=(("cudnn_graph_version", 0x090100),),
            markers=("cudnn_version_9_1_0_70_c34102860_e0",),
            cudart_build=12040,
            referenced_cuda_majors=(12,),
        ),
    )
    assert facts_from_json(facts_to_json(facts)) == facts


def test_host_cache_keys_on_file_state(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    facts = FileFacts(digests=Digests(size=1, sha256=Sha256("c" * 64)))
    cache = HostFactsCache(path)
    cache.put((1, 2, 3, 4), "v", facts)
    cache.save()
    again = HostFactsCache(path)
    assert again.get((1, 2, 3, 4), "v", need_md5=False) == facts
    assert again.get((1, 2, 3, 5), "v", need_md5=False) is None  # mtime changed
    assert again.get((1, 2, 3, 4), "v2", need_md5=False) is None  # analyzer changed
    assert again.get((1, 2, 3, 4), "v", need_md5=True) is None  # MD5 not cached
    path.write_text("{not json")
    assert HostFactsCache(path).get((1, 2, 3, 4), "v", need_md5=False) is None
