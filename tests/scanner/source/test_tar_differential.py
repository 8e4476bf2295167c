"""Differential test of the layer tar reader against Python's `tarfile` (issue 8).

Archives are generated with `tarfile` in the GNU, PAX and ustar formats: long names and long
link targets (GNU ``L``/``K`` records, pax ``path``/``linkpath``, the ustar prefix field),
non-ASCII names, pax ``size`` records and global headers, hard links, symlinks, directories,
FIFOs, and numeric fields rewritten in GNU base-256 form. Read by `read_layer` (plain or
gzip-compressed), every entry must come out as `tarfile` lists it: path, kind, size, mode,
link target, and the bytes of each file.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile

from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.model import NodeKind, OciDigest
from scanner.source.layerstream import LayerSpec
from scanner.source.limits import Limits
from scanner.source.tarlayer import Entry, read_layer
from tests.fixtures.images import hashing_selector

_component = st.text(alphabet="abcxyz_-.é", min_size=1, max_size=8).filter(
    lambda c: c not in (".", "..") and not c.startswith(".wh.")
)
#: Some names are long enough (> 100 bytes) to need a long-name record or the ustar prefix.
_name = st.one_of(
    st.lists(_component, min_size=1, max_size=4).map("/".join),
    st.tuples(st.lists(_component, min_size=1, max_size=3), st.integers(30, 60)).map(
        lambda t: "/".join([*t[0], "n" * t[1], "m" * t[1], "f"])
    ),
)
_member = st.tuples(
    st.sampled_from(("file", "file", "dir", "symlink", "hardlink", "fifo")),
    _name,
    st.binary(max_size=1500),
    st.integers(0, 0o7777),
    st.one_of(_name, st.just("../" * 40 + "x")),  # symlink targets, stored as written
)


def _base256(field: bytes, value: int) -> bytes:
    return b"\x80" + value.to_bytes(len(field) - 1, "big")


def _rewrite_headers(blob: bytearray, members: list[tarfile.TarInfo], base256: int) -> None:
    """Rewrite each member's own header: a size that a pax record gives is zeroed in the
    header (readers must take the record's); ``base256``: the size (1) and the mode (2) are
    stored in GNU base-256 form. The checksum is fixed."""
    for m in members:
        at = m.offset_data - 512  # the member's own header, after any extended headers
        header = blob[at : at + 512]
        if "size" in m.pax_headers:
            header[124:136] = b"%011o\0" % 0
        if base256:
            size = int(header[124:136].split(b"\0")[0] or b"0", 8)
            header[124:136] = _base256(header[124:136], size)
        if base256 == 2:
            header[100:108] = _base256(header[100:108], m.mode)
        header[148:156] = b" " * 8
        header[148:156] = b"%06o\0 " % sum(header)
        blob[at : at + 512] = header


def build_archive(
    members: list[tuple[str, str, bytes, int, str]], fmt: int, base256: int, glob: bool
) -> bytes | None:
    """The archive bytes, or None when the format cannot hold these names (or no entry is
    left)."""
    out = io.BytesIO()
    pax = (
        {"comment": "global header, ignored by readers"}
        if glob and fmt == tarfile.PAX_FORMAT
        else None
    )
    seen: set[str] = set()
    files: list[str] = []
    try:
        with tarfile.open(fileobj=out, mode="w", format=fmt, pax_headers=pax) as tar:
            for kind, name, data, mode, target in members:
                if name in seen or (kind == "hardlink" and not files):
                    continue
                seen.add(name)
                info = tarfile.TarInfo(name)
                info.mode = mode
                if kind == "file":
                    info.size = len(data)
                    if fmt == tarfile.PAX_FORMAT and len(data) % 2:
                        info.pax_headers = {"size": str(len(data))}
                    tar.addfile(info, io.BytesIO(data))
                    files.append(name)
                    continue
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                elif kind == "symlink":
                    info.type, info.linkname = tarfile.SYMTYPE, target
                elif kind == "hardlink":
                    info.type, info.linkname = tarfile.LNKTYPE, files[len(data) % len(files)]
                else:
                    info.type = tarfile.FIFOTYPE
                tar.addfile(info)
    except ValueError:  # a name ustar cannot split, a non-ASCII name in ustar
        return None
    if not seen:
        return None  # tarfile refuses to open an archive without entries
    blob = bytearray(out.getvalue())
    with tarfile.open(fileobj=io.BytesIO(bytes(blob))) as tar:
        _rewrite_headers(blob, tar.getmembers(), base256)
    return bytes(blob)


def expected(blob: bytes) -> tuple[list[Entry], dict[str, bytes]]:
    """What `tarfile` reads from the archive, as layer entries and file contents."""
    entries: list[Entry] = []
    contents: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        for m in tar.getmembers():
            path = "/" + m.name.rstrip("/")
            mode = m.mode & 0o7777
            if m.isreg():
                entries.append((path, NodeKind.FILE, m.size, mode, None, None))
                f = tar.extractfile(m)
                assert f is not None
                contents[path] = f.read()
            elif m.islnk():
                entries.append((path, NodeKind.FILE, 0, mode, None, "/" + m.linkname))
            elif m.issym():
                entries.append((path, NodeKind.SYMLINK, 0, mode, m.linkname, None))
            elif m.isdir():
                entries.append((path, NodeKind.DIR, 0, mode, None, None))
            else:
                entries.append((path, NodeKind.OTHER, 0, mode, None, None))
    return entries, contents


@settings(max_examples=120, deadline=None)
@given(
    st.lists(_member, min_size=1, max_size=8),
    st.sampled_from((tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT)),
    st.sampled_from((0, 1, 2)),
    st.booleans(),
    st.booleans(),
)
def test_reader_agrees_with_tarfile(
    members: list[tuple[str, str, bytes, int, str]],
    fmt: int,
    base256: int,
    glob: bool,
    compress: bool,
) -> None:
    blob = build_archive(members, fmt, base256, glob)
    if blob is None:
        return
    want_entries, want_contents = expected(blob)
    data = gzip.compress(blob, mtime=0) if compress else blob
    spec = LayerSpec(
        OciDigest("sha256:" + hashlib.sha256(data).hexdigest()),
        len(data),
        lambda: io.BytesIO(data),
    )
    selector = hashing_selector(is_candidate=lambda _p: False, is_metadata=lambda _p: True)
    got = read_layer(spec, selector, Limits())
    assert got.corrupt is None
    assert got.skipped == []
    assert got.entries == want_entries
    assert got.metadata == want_contents
    assert got.compression == ("gzip" if compress else "tar")


def test_base256_sizes_past_the_octal_field() -> None:
    """A size of 8 GiB or more only fits in base-256 form: the header says so even for an entry
    whose bytes are cut short, and the reader reports what `tarfile` reports before the cut."""
    info = tarfile.TarInfo("big")
    info.size = 8 << 30  # one more than the 11 octal digits can hold
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    assert header[124] == 0x80  # tarfile wrote base-256
    blob = bytes(header) + b"x" * 512 + bytes(1024)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        member = tar.next()
    assert member is not None and member.size == 8 << 30
    spec = LayerSpec(
        OciDigest("sha256:" + hashlib.sha256(blob).hexdigest()), len(blob), lambda: io.BytesIO(blob)
    )
    got = read_layer(spec, hashing_selector(), Limits())
    assert got.entries == []  # the entry whose data is cut short is dropped
    assert got.corrupt is not None and "truncated" in got.corrupt
