"""rpm cataloger: packages of the sqlite rpm database (RHEL 9, UBI 9, Fedora 33+, ...).

The database bytes the source captured are copied, with their write-ahead log, into a private
temporary directory and opened there, so the scanned root is never written and changes still
in the WAL are seen. Each row of ``Packages`` is an RPM header blob, parsed by hand (rpm's
lib/header.c format): name, epoch, version, release, arch, file names and per-file digests.
"""

from __future__ import annotations

import stat
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path

from scanner.catalog.interface import (
    CatalogParseError,
    Distro,
    Found,
    is_hex_digest,
    purl,
    root_path,
    skipped,
)
from scanner.model import OwnedFile, Package, PackageManager, Skipped
from scanner.source.interface import RootView

#: Where rpm keeps its database: RHEL/UBI use /var/lib/rpm; Fedora 36+ /usr/lib/sysimage/rpm.
DB_DIRS = ("/var/lib/rpm", "/usr/lib/sysimage/rpm")
SQLITE_NAME = "rpmdb.sqlite"
BDB_NAME = "Packages"  # BerkeleyDB hash database (RHEL <= 8, CentOS 7/8, Amazon Linux 2)
NDB_NAME = "Packages.db"  # rpm's own "ndb" format (SUSE)

_SQLITE_MAGIC = b"SQLite format 3\x00"

# Header tags (rpm's rpmtag.h).
TAG_NAME = 1000
TAG_VERSION = 1001
TAG_RELEASE = 1002
TAG_EPOCH = 1003
TAG_VENDOR = 1011
TAG_LICENSE = 1014
TAG_ARCH = 1022
TAG_OLDFILENAMES = 1027
TAG_FILEMODES = 1030
TAG_FILEDIGESTS = 1035
TAG_FILEFLAGS = 1037
TAG_SOURCERPM = 1044
TAG_DIRINDEXES = 1116
TAG_BASENAMES = 1117
TAG_DIRNAMES = 1118
TAG_FILEDIGESTALGO = 5011
_WANTED = frozenset(
    {
        TAG_NAME,
        TAG_VERSION,
        TAG_RELEASE,
        TAG_EPOCH,
        TAG_VENDOR,
        TAG_LICENSE,
        TAG_ARCH,
        TAG_OLDFILENAMES,
        TAG_FILEMODES,
        TAG_FILEDIGESTS,
        TAG_FILEFLAGS,
        TAG_SOURCERPM,
        TAG_DIRINDEXES,
        TAG_BASENAMES,
        TAG_DIRNAMES,
        TAG_FILEDIGESTALGO,
    }
)

# Header data types (rpm's rpmTagType).
_CHAR, _INT8, _INT16, _INT32, _INT64 = 1, 2, 3, 4, 5
_STRING, _BIN, _STRING_ARRAY, _I18NSTRING = 6, 7, 8, 9
_INT_FORMATS = {_CHAR: "B", _INT8: "B", _INT16: "H", _INT32: "I", _INT64: "Q"}

# rpm's own sanity limits (lib/header.c: HEADER_TAGS_MAX, HEADER_DATA_MAX).
_MAX_INDEX = 0xFFFF
_MAX_DATA = 0x0FFFFFFF

#: FILEDIGESTALGO values (OpenPGP hash algorithm ids); absent means MD5 (rpm < 4.6).
DIGEST_ALGORITHMS: Mapping[int, str] = {
    1: "md5",
    2: "sha1",
    8: "sha256",
    9: "sha384",
    10: "sha512",
    11: "sha224",
}
_RPMFILE_GHOST = 1 << 6

Value = str | list[str] | list[int]


class HeaderError(CatalogParseError):
    """An RPM header blob is malformed."""


def parse_header(blob: bytes) -> dict[int, Value]:
    """Parse an on-disk RPM header blob (no lead, no magic) into {tag: value} for known tags.

    Layout (rpm lib/header.c, headerImport): big-endian int32 ``il`` (index entries) and
    ``dl`` (data bytes), then ``il`` 16-byte entries (tag, type, offset, count), then the data.
    """
    size = len(blob)
    if size < 8:
        raise HeaderError(f"header of {size} bytes is shorter than its 8-byte preamble")
    il, dl = struct.unpack_from(">II", blob, 0)
    if not 1 <= il <= _MAX_INDEX:
        raise HeaderError(f"index entry count {il} out of range")
    if dl > _MAX_DATA:
        raise HeaderError(f"data length {dl} out of range")
    start = 8 + 16 * il
    if start + dl != size:
        raise HeaderError(f"il={il} dl={dl} need {start + dl} bytes, blob has {size}")
    end = start + dl
    values: dict[int, Value] = {}
    for tag, typ, offset, count in struct.iter_unpack(">IIII", blob[8:start]):
        if tag not in _WANTED or tag in values:
            continue
        if offset >= dl or count == 0 or count > dl:
            raise HeaderError(f"tag {tag}: offset {offset} / count {count} outside data ({dl})")
        pos = start + offset
        if typ == _STRING:
            nul = blob.find(b"\x00", pos, end)
            if nul < 0:
                raise HeaderError(f"tag {tag}: unterminated string")
            values[tag] = blob[pos:nul].decode("utf-8", errors="surrogateescape")
        elif typ in (_STRING_ARRAY, _I18NSTRING):
            parts = blob[pos:end].split(b"\x00", count)
            if len(parts) <= count:
                raise HeaderError(f"tag {tag}: {count} strings do not fit the data")
            values[tag] = [p.decode("utf-8", errors="surrogateescape") for p in parts[:count]]
        elif typ in _INT_FORMATS:
            fmt = _INT_FORMATS[typ]
            need = struct.calcsize(fmt) * count
            if pos + need > end:
                raise HeaderError(f"tag {tag}: {count} integers do not fit the data")
            values[tag] = list(struct.unpack_from(f">{count}{fmt}", blob, pos))
        else:
            raise HeaderError(f"tag {tag}: unexpected type {typ}")
    return values


def _text(value: str) -> str:
    # Descriptive fields are shown and serialized: undecodable bytes become U+FFFD there,
    # while file names keep them (surrogateescape) to match the tree's names.
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _string(values: Mapping[int, Value], tag: int) -> str:
    value = values.get(tag)
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list) and value and isinstance(value[0], str):
        return _text(value[0])  # I18NSTRING: the first (default locale) entry
    return ""


def _strings(values: Mapping[int, Value], tag: int) -> list[str]:
    value = values.get(tag)
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    raise HeaderError(f"tag {tag} is not a string array")


def _ints(values: Mapping[int, Value], tag: int) -> list[int]:
    value = values.get(tag)
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return [int(v) for v in value]
    raise HeaderError(f"tag {tag} is not an integer array")


def _file_paths(values: Mapping[int, Value]) -> list[str]:
    basenames = _strings(values, TAG_BASENAMES)
    if basenames:
        dirnames = _strings(values, TAG_DIRNAMES)
        indexes = _ints(values, TAG_DIRINDEXES)
        if len(indexes) != len(basenames):
            raise HeaderError(f"{len(basenames)} basenames but {len(indexes)} dir indexes")
        try:
            return [dirnames[i] + b for i, b in zip(indexes, basenames, strict=True)]
        except IndexError:
            raise HeaderError("a dir index points past the dir names") from None
    return _strings(values, TAG_OLDFILENAMES)


def package_from_header(values: Mapping[int, Value], source: str, distro: Distro) -> Package | None:
    """Build the `Package` of one parsed header; None for rpm's gpg-pubkey pseudo-packages."""
    name = _string(values, TAG_NAME)
    version = _string(values, TAG_VERSION)
    release = _string(values, TAG_RELEASE)
    if not name or not version:
        raise HeaderError("no NAME or VERSION tag")
    if name == "gpg-pubkey":
        return None  # an imported signing key, not software
    arch = _string(values, TAG_ARCH) or None
    epochs = _ints(values, TAG_EPOCH)
    epoch = str(epochs[0]) if epochs else None
    full_version = f"{version}-{release}" if release else version

    paths = _file_paths(values)
    digests = _strings(values, TAG_FILEDIGESTS)
    modes = _ints(values, TAG_FILEMODES)
    flags = _ints(values, TAG_FILEFLAGS)
    for label, seq in (("digests", digests), ("modes", modes), ("flags", flags)):
        if seq and len(seq) != len(paths):
            raise HeaderError(f"{len(paths)} files but {len(seq)} file {label}")
    algo_ids = _ints(values, TAG_FILEDIGESTALGO)
    algo_id = algo_ids[0] if algo_ids else 1
    algorithm = DIGEST_ALGORITHMS.get(algo_id)
    extra: list[tuple[str, str]] = []
    if algorithm is None:
        extra.append(("file-digest-algorithm", f"unsupported ({algo_id})"))

    files: list[OwnedFile] = []
    for i, path in enumerate(paths):
        if modes and stat.S_ISDIR(modes[i]):
            continue
        if flags and flags[i] & _RPMFILE_GHOST:
            continue  # %ghost: listed but not shipped, so there is nothing to verify
        digest = digests[i].lower() if digests else ""
        if digest and algorithm is not None:
            if not is_hex_digest(digest, algorithm):
                raise HeaderError(f"file digest {digest[:16]!r} is not {algorithm} hex")
            files.append(OwnedFile(root_path(path), algorithm, digest))
        else:
            files.append(OwnedFile(root_path(path), None, None))

    described = (("vendor", TAG_VENDOR), ("license", TAG_LICENSE), ("source-rpm", TAG_SOURCERPM))
    for key, tag in described:
        text = _string(values, tag)
        if text:
            extra.append((key, text))
    if epoch is not None:
        extra.append(("epoch", epoch))
    return Package(
        manager=PackageManager.RPM,
        name=name,
        version=full_version,
        purl=purl(
            "rpm",
            distro.id or None,
            name,
            full_version,
            {"arch": arch, "epoch": epoch, "distro": distro.qualifier},
        ),
        arch=arch,
        source=source,
        files=tuple(files),
        extra=tuple(sorted(extra)),
    )


def _read_blobs(data: bytes, wal: bytes | None) -> list[tuple[int, object]]:
    """Rows of the Packages table, read from a private copy of the database and its WAL."""
    if not data.startswith(_SQLITE_MAGIC):
        raise CatalogParseError("not an SQLite database (bad file header); rpm db ignored")
    import sqlite3  # only for a root with an rpm sqlite database (start-up)

    try:
        return _query_blobs(data, wal)
    except sqlite3.Error as e:
        raise CatalogParseError(f"unreadable rpm sqlite database: {e}") from e


def _query_blobs(data: bytes, wal: bytes | None) -> list[tuple[int, object]]:
    import sqlite3

    with tempfile.TemporaryDirectory(prefix="gpuprov-rpmdb-") as tmp:
        copy = Path(tmp) / SQLITE_NAME
        copy.write_bytes(data)
        if wal:
            # The -shm index is not copied: sqlite rebuilds it from the WAL on open.
            (Path(tmp) / (SQLITE_NAME + "-wal")).write_bytes(wal)
        connection = sqlite3.connect(str(copy))
        try:
            connection.execute("PRAGMA query_only = ON")
            cursor = connection.execute("SELECT hnum, blob FROM Packages ORDER BY hnum")
            return [(int(hnum), blob) for hnum, blob in cursor]
        finally:
            connection.close()


def _read_sqlite(
    db_path: str, data: bytes, wal: bytes | None, distro: Distro
) -> tuple[list[Package], list[Skipped]]:
    try:
        rows = _read_blobs(data, wal)
    except CatalogParseError as e:
        return [], [skipped(db_path, str(e))]
    packages: list[Package] = []
    skips: list[Skipped] = []
    for hnum, blob in rows:
        if not isinstance(blob, bytes):
            skips.append(skipped(db_path, f"package #{hnum}: header is not a blob"))
            continue
        try:
            package = package_from_header(parse_header(blob), db_path, distro)
        except HeaderError as e:
            skips.append(skipped(db_path, f"package #{hnum}: corrupt rpm header: {e}"))
            continue
        if package is not None:
            packages.append(package)
    return packages, skips


def catalog(view: RootView, distro: Distro) -> Found:
    """Packages of each rpm sqlite database in the root; legacy formats are reported skipped."""
    packages: list[Package] = []
    skips: list[Skipped] = []
    seen: set[str] = set()
    metadata = view.metadata
    for directory in DB_DIRS:
        db_path = f"{directory}/{SQLITE_NAME}"
        data = metadata.get(db_path)
        if data is not None:
            found, problems = _read_sqlite(db_path, data, metadata.get(db_path + "-wal"), distro)
            skips.extend(problems)
            for package in found:
                if package.purl not in seen:  # the same db reachable from both directories
                    seen.add(package.purl)
                    packages.append(package)
            continue
        for name, kind in ((BDB_NAME, "BerkeleyDB"), (NDB_NAME, "ndb")):
            if f"{directory}/{name}" in metadata:
                skips.append(
                    skipped(
                        f"{directory}/{name}",
                        f"rpm database format {kind} is not supported; only the sqlite "
                        f"rpmdb.sqlite (RHEL/UBI 9+, Fedora 33+) is read, so files of rpm "
                        f"packages in this root are reported without an owner",
                    )
                )
    return Found(tuple(packages), tuple(skips))
