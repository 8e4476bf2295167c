"""rpm cataloger against real RPMs built with rpmbuild and installed with the sqlite backend."""

from __future__ import annotations

import hashlib
import random
import shutil
import sqlite3
import struct
from pathlib import Path

import pytest

from scanner.catalog import catalog_view, rpm
from scanner.catalog.interface import Distro
from scanner.model import Package
from tests.fixtures.packages import (
    EXAMPLE_CUDNN_RPM,
    install_rpm,
    rpm_query,
    rpmdb_pending_wal,
    sha256_of,
    view_from_dir,
    write_os_release,
)


def _only(packages: tuple[Package, ...], name: str) -> Package:
    found = [p for p in packages if p.name == name]
    assert len(found) == 1, [p.purl for p in packages]
    return found[0]


def _tree_digest(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def rpm_root(tmp_path: Path, built: dict[str, Path]) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    write_os_release(root, "rhel", "9.4")
    install_rpm(root, [built["cudnn_rpm"], built["cublas_rpm"]])
    return root


def test_real_rpm_packages_and_sha256(rpm_root: Path, built: dict[str, Path]) -> None:
    db_dir = rpm_root / "var/lib/rpm"
    before = _tree_digest(db_dir)
    result = catalog_view(view_from_dir(rpm_root))
    assert result.skipped == ()
    assert _tree_digest(db_dir) == before, "the scanned root's database must not change"

    arch = rpm_query(built["cudnn_rpm"], "%{ARCH}")
    pkg = _only(result.packages, "libcudnn9-cuda-12")
    assert (pkg.manager, pkg.version, pkg.arch) == ("rpm", "9.5.1.17-1", arch)
    assert pkg.source == "/var/lib/rpm/rpmdb.sqlite"
    assert pkg.purl == (
        f"pkg:rpm/rhel/libcudnn9-cuda-12@9.5.1.17-1?arch={arch}&distro=rhel-9.4&epoch=2"
    )
    assert ("vendor", "NVIDIA Corporation") in pkg.extra
    files = {f.path: f for f in pkg.files}
    # %dir and %ghost entries are not owned files; regular files and the symlink are.
    assert set(files) == set(EXAMPLE_CUDNN_RPM.files) | set(EXAMPLE_CUDNN_RPM.symlinks)
    for path in EXAMPLE_CUDNN_RPM.files:
        assert files[path].algorithm == "sha256"
        assert files[path].digest == sha256_of(rpm_root / path.lstrip("/")), path
    link = files["/usr/lib64/libcudnn.so.9"]
    assert (link.algorithm, link.digest) == (None, None)

    cublas = _only(result.packages, "libcublas-12-6")
    assert cublas.purl == f"pkg:rpm/rhel/libcublas-12-6@12.6.4.1-1?arch={arch}&distro=rhel-9.4"
    lib = "/usr/local/cuda-12.6/lib64/libcublas.so.12.6.4.1"
    owner, owned = result.owners[lib]
    assert owner is cublas and owned.digest == sha256_of(rpm_root / lib.lstrip("/"))


def test_header_fields_agree_with_rpm_itself(rpm_root: Path, built: dict[str, Path]) -> None:
    listing = rpm_query(built["cudnn_rpm"], "[%{FILENAMES} %{FILEDIGESTS}\\n]")
    expected = {
        path: digest for path, _, digest in (line.partition(" ") for line in listing.splitlines())
    }
    pkg = _only(catalog_view(view_from_dir(rpm_root)).packages, "libcudnn9-cuda-12")
    for owned in pkg.files:
        assert (owned.digest or "") == expected[owned.path]


def test_changes_still_in_the_wal_are_read(tmp_path: Path, built: dict[str, Path]) -> None:
    root = tmp_path / "root"
    donor = tmp_path / "donor"
    db = install_rpm(root, [built["cudnn_rpm"]])
    donor_db = install_rpm(donor, [built["cublas_rpm"]])
    assert rpmdb_pending_wal(db, donor_db) == 1
    wal = Path(f"{db}-wal")
    assert wal.stat().st_size > 0
    # Precondition: the main file alone does not hold the donor's package.
    alone = tmp_path / "alone.sqlite"
    shutil.copyfile(db, alone)
    with sqlite3.connect(alone) as connection:
        assert connection.execute("SELECT count(*) FROM Packages").fetchone()[0] == 1
    before = (db.read_bytes(), wal.read_bytes())

    result = catalog_view(view_from_dir(root))
    assert sorted(p.name for p in result.packages) == ["libcublas-12-6", "libcudnn9-cuda-12"]
    assert (db.read_bytes(), wal.read_bytes()) == before


def test_sysimage_location_and_fedora_vendor(tmp_path: Path, built: dict[str, Path]) -> None:
    staging = tmp_path / "staging"
    install_rpm(staging, [built["cublas_rpm"]])
    root = tmp_path / "root"
    (root / "usr/lib/sysimage/rpm").mkdir(parents=True)
    shutil.copyfile(
        staging / "var/lib/rpm/rpmdb.sqlite", root / "usr/lib/sysimage/rpm/rpmdb.sqlite"
    )
    write_os_release(root, "fedora", "40")
    pkg = _only(catalog_view(view_from_dir(root)).packages, "libcublas-12-6")
    assert pkg.source == "/usr/lib/sysimage/rpm/rpmdb.sqlite"
    assert pkg.purl.startswith("pkg:rpm/fedora/libcublas-12-6@12.6.4.1-1?arch=")
    assert pkg.purl.endswith("&distro=fedora-40")


def test_corrupt_header_blob_skips_only_that_package(rpm_root: Path) -> None:
    db = rpm_root / "var/lib/rpm/rpmdb.sqlite"
    with sqlite3.connect(db) as connection:
        hnum = connection.execute(
            "SELECT hnum FROM Name WHERE key = 'libcudnn9-cuda-12'"
        ).fetchone()[0]
        connection.execute(
            "UPDATE Packages SET blob = substr(blob, 1, 300) WHERE hnum = ?", (hnum,)
        )
    connection.close()
    result = catalog_view(view_from_dir(rpm_root))
    assert [p.name for p in result.packages] == ["libcublas-12-6"]
    assert len(result.skipped) == 1
    skip = result.skipped[0]
    assert skip.path == "/var/lib/rpm/rpmdb.sqlite" and skip.stage == "catalog"
    assert skip.reason.startswith(f"package #{hnum}: corrupt rpm header:")


def test_mangled_headers_never_escape_as_other_errors(rpm_root: Path) -> None:
    with sqlite3.connect(rpm_root / "var/lib/rpm/rpmdb.sqlite") as connection:
        blob = connection.execute("SELECT blob FROM Packages ORDER BY hnum").fetchone()[0]
    connection.close()
    rng = random.Random(42)
    variants = [blob[:n] for n in range(0, len(blob), max(1, len(blob) // 97))]
    for _ in range(300):
        mutated = bytearray(blob)
        for _ in range(rng.randint(1, 8)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        variants.append(bytes(mutated))
    survived = 0
    for variant in variants:
        try:
            rpm.package_from_header(rpm.parse_header(variant), "/db", Distro())
            survived += 1
        except rpm.HeaderError:
            pass
    assert survived < len(variants)  # truncations at least are all detected


def test_not_an_sqlite_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "var/lib/rpm").mkdir(parents=True)
    (root / "var/lib/rpm/rpmdb.sqlite").write_bytes(b"this is not a database\n" * 40)
    result = catalog_view(view_from_dir(root))
    assert result.packages == ()
    assert [(s.path, s.stage) for s in result.skipped] == [("/var/lib/rpm/rpmdb.sqlite", "catalog")]
    assert "not an SQLite database" in result.skipped[0].reason


def test_sqlite_without_packages_table_and_truncated_db(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "var/lib/rpm").mkdir(parents=True)
    db = root / "var/lib/rpm/rpmdb.sqlite"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE Other (x)")
    connection.close()
    result = catalog_view(view_from_dir(root))
    assert "no such table: Packages" in result.skipped[0].reason

    db.write_bytes(db.read_bytes()[:150])  # magic intact, pages missing
    result = catalog_view(view_from_dir(root))
    assert result.packages == ()
    assert result.skipped[0].reason.startswith("unreadable rpm sqlite database")


@pytest.mark.parametrize(("name", "kind"), [("Packages", "BerkeleyDB"), ("Packages.db", "ndb")])
def test_legacy_databases_are_reported_unsupported(tmp_path: Path, name: str, kind: str) -> None:
    root = tmp_path / "root"
    (root / "var/lib/rpm").mkdir(parents=True)
    (root / "var/lib/rpm" / name).write_bytes(b"\x00\x06\x15\x61" + bytes(4092))
    result = catalog_view(view_from_dir(root))
    assert result.packages == ()
    assert len(result.skipped) == 1
    assert result.skipped[0].path == f"/var/lib/rpm/{name}"
    assert f"rpm database format {kind} is not supported" in result.skipped[0].reason


# Hand-built headers for cases rpmbuild cannot produce.

_TYPES = {"i32": (4, ">I", 4), "str": (6, None, 1), "strs": (8, None, 1)}


def _header(entries: dict[int, tuple[str, object]]) -> bytes:
    index = b""
    data = b""
    for tag, (kind, value) in entries.items():
        type_id, fmt, align = _TYPES[kind]
        data += b"\x00" * (-len(data) % align)
        offset = len(data)
        if kind == "i32":
            assert isinstance(value, list)
            data += struct.pack(f">{len(value)}I", *value)
            count = len(value)
        elif kind == "str":
            data += str(value).encode() + b"\x00"
            count = 1
        else:
            assert isinstance(value, list)
            data += b"".join(str(v).encode() + b"\x00" for v in value)
            count = len(value)
        index += struct.pack(">IIII", tag, type_id, offset, count)
    return struct.pack(">II", len(entries), len(data)) + index + data


def test_hand_built_headers_legacy_names_and_unknown_algorithm() -> None:
    legacy = _header(
        {
            rpm.TAG_NAME: ("str", "old"),
            rpm.TAG_VERSION: ("str", "1.0"),
            rpm.TAG_RELEASE: ("str", "3"),
            rpm.TAG_ARCH: ("str", "x86_64"),
            rpm.TAG_OLDFILENAMES: ("strs", ["/usr/lib/libold.so.1"]),
            rpm.TAG_FILEDIGESTS: ("strs", ["0123456789abcdef0123456789abcdef"]),
        }
    )
    pkg = rpm.package_from_header(rpm.parse_header(legacy), "/db", Distro("centos", "7"))
    assert pkg is not None
    # No FILEDIGESTALGO tag: rpm < 4.6 recorded MD5.
    assert [(f.path, f.algorithm) for f in pkg.files] == [("/usr/lib/libold.so.1", "md5")]
    assert pkg.purl == "pkg:rpm/centos/old@1.0-3?arch=x86_64&distro=centos-7"

    odd = _header(
        {
            rpm.TAG_NAME: ("str", "odd"),
            rpm.TAG_VERSION: ("str", "1"),
            rpm.TAG_BASENAMES: ("strs", ["x"]),
            rpm.TAG_DIRNAMES: ("strs", ["/opt/"]),
            rpm.TAG_DIRINDEXES: ("i32", [0]),
            rpm.TAG_FILEDIGESTS: ("strs", ["ab" * 20]),
            rpm.TAG_FILEDIGESTALGO: ("i32", [7]),
        }
    )
    pkg = rpm.package_from_header(rpm.parse_header(odd), "/db", Distro())
    assert pkg is not None
    assert [(f.path, f.algorithm, f.digest) for f in pkg.files] == [("/opt/x", None, None)]
    assert ("file-digest-algorithm", "unsupported (7)") in pkg.extra
    assert pkg.purl == "pkg:rpm/odd@1"

    key = _header({rpm.TAG_NAME: ("str", "gpg-pubkey"), rpm.TAG_VERSION: ("str", "fd431d51")})
    assert rpm.package_from_header(rpm.parse_header(key), "/db", Distro()) is None

    bad_index = _header(
        {
            rpm.TAG_NAME: ("str", "bad"),
            rpm.TAG_VERSION: ("str", "1"),
            rpm.TAG_BASENAMES: ("strs", ["x"]),
            rpm.TAG_DIRNAMES: ("strs", ["/opt/"]),
            rpm.TAG_DIRINDEXES: ("i32", [5]),
        }
    )
    with pytest.raises(rpm.HeaderError, match="dir index"):
        rpm.package_from_header(rpm.parse_header(bad_index), "/db", Distro())
