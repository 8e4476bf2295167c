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
    HostHasher,
    SpoolingHasher,
    facts_from_json,
    facts_to_json,
    hash_file,
)
from scanner.model import (
    Candidate,
    Digests,
    ElfFacts,
    FileFacts,
    FileRef,
    Sha256,
    Skipped,
    stat_key,
)


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
    # a link that must be followed (/proc/PID/map_files/...) is, to a regular file only
    assert hash_file(str(tmp_path / "link"), follow=True).sha256 == hashlib.sha256(b"x").hexdigest()
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "fifo", tmp_path / "to-fifo")
    with pytest.raises(HashError, match="not a regular file"):
        hash_file(str(tmp_path / "to-fifo"), follow=True)


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


# --- HostHasher: host candidates hashed and analyzed on a pool, through the cache ------------


class _Analyze:
    """A stand-in ELF analysis that records what it was asked (the hasher owns no ELF rule)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, host_path: str, path: str) -> ElfFacts:
        self.calls.append((host_path, path))
        return ElfFacts(machine="x86_64", soname=Path(path).name)


def _candidate(root: Path, path: str, data: bytes) -> Candidate:
    host = root / path.lstrip("/")
    host.parent.mkdir(parents=True, exist_ok=True)
    host.write_bytes(data)
    return Candidate(FileRef(path), len(data), host_path=str(host), stat_key=stat_key(host.stat()))


def _hash_all(
    cache: Path | None, cands: list[Candidate], md5_for: set[str], analyze: _Analyze
) -> tuple[dict[str, FileFacts], list[Skipped], dict[str, str]]:
    hasher = HostHasher(cache_path=cache, version="v1", workers=2, analyze=analyze)
    for cand in cands:  # as the walk finds them
        assert cand.host_path is not None and cand.stat_key is not None
        hasher.early(cand.ref.path, cand.host_path, cand.stat_key)
    skipped: list[Skipped] = []
    unread: dict[str, str] = {}
    facts = hasher.finish(cands, lambda c: c.ref.path in md5_for, skipped, unread)
    return facts, skipped, unread


def test_host_hasher_settles_md5_and_a_warm_run_reads_nothing(tmp_path: Path) -> None:
    wheel = "/usr/lib/python3/site-packages/nvidia/libcublas.so.12"  # MD5 not guessed
    deb = "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"  # MD5 guessed (dpkg may own it)
    cands = [_candidate(tmp_path / "root", p, _data(n)) for p, n in ((wheel, 5000), (deb, 70))]
    analyze = _Analyze()
    facts, skipped, unread = _hash_all(tmp_path / "cache.json", cands, {wheel}, analyze)
    assert skipped == [] and unread == {}
    for cand, n in zip(cands, (5000, 70), strict=True):
        got = facts[cand.ref.path]
        assert got.digests.sha256 == hashlib.sha256(_data(n)).hexdigest()
        # the owner of the wheel path recorded MD5: computed although the walk guessed not
        assert got.digests.md5 == hashlib.md5(_data(n)).hexdigest()
        assert got.elf is not None and got.elf.soname == Path(cand.ref.path).name
    warm = _Analyze()
    again, _, _ = _hash_all(tmp_path / "cache.json", cands, {wheel}, warm)
    assert again == facts and warm.calls == []


def test_warm_run_does_not_reread_a_file_for_a_wrong_md5_guess(tmp_path: Path) -> None:
    deb = "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"  # MD5 guessed, but no dpkg owner
    cands = [_candidate(tmp_path / "root", deb, _data(70))]
    cold = HostHasher(
        cache_path=tmp_path / "cache.json", version="v1", workers=2, analyze=_Analyze()
    )
    cold.finish(cands, lambda c: False, [], {})  # cached without MD5
    warm = _Analyze()
    facts, skipped, unread = _hash_all(tmp_path / "cache.json", cands, set(), warm)
    assert warm.calls == [] and skipped == [] and unread == {}
    assert facts[deb].digests.md5 is None
    # an owner that does record MD5 still gets it, from a fresh read
    owned = _Analyze()
    facts, _, _ = _hash_all(tmp_path / "cache.json", cands, {deb}, owned)
    assert facts[deb].digests.md5 == hashlib.md5(_data(70)).hexdigest()


def test_host_hasher_reports_unread_files_and_an_unwritable_cache(tmp_path: Path) -> None:
    cand = _candidate(tmp_path / "root", "/opt/libcudart.so.12", b"x" * 10)
    assert cand.host_path is not None
    os.unlink(cand.host_path)  # gone between the walk and the hash
    cache = tmp_path / "file" / "cache.json"
    (tmp_path / "file").write_bytes(b"")  # the cache's directory is a file
    present = _candidate(tmp_path / "root", "/opt/libnccl.so.2", b"y" * 10)
    facts, skipped, unread = _hash_all(cache, [cand, present], set(), _Analyze())
    assert list(facts) == ["/opt/libnccl.so.2"]
    assert "cannot open for hashing" in unread["/opt/libcudart.so.12"]
    assert [(s.path, s.stage) for s in skipped] == [(str(cache), "hash")]
    assert "cannot write the host cache" in skipped[0].reason
