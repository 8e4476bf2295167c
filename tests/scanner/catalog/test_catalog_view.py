"""catalog_view across managers: distro, owner choice when several claim a path, resilience."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.catalog import CATALOGERS, CatalogParseError, catalog_view, index_owners, read_distro
from scanner.catalog.interface import Distro, Found, purl
from scanner.model import AssetInfo, AssetKind, NodeKind, OwnedFile, Package
from scanner.source.interface import Node, RootView
from tests.fixtures.packages import (
    install_deb,
    install_rpm,
    make_usrmerge,
    pip_install,
    sha256_of,
    view_from_dir,
    write_conda_package,
    write_dist_info,
)


def _view(
    nodes: dict[str, Node] | None = None, metadata: dict[str, bytes] | None = None
) -> RootView:
    return RootView(
        info=AssetInfo(AssetKind.HOST, "h", "/"),
        nodes=nodes or {},
        metadata=metadata or {},
        candidates=[],
    )


def test_all_managers_in_one_root(tmp_path: Path, built: dict[str, Path]) -> None:
    root = tmp_path / "root"
    root.mkdir()
    install_deb(root, built["cudart_deb"])
    install_rpm(root, [built["cudnn_rpm"]])
    pip_install(root / "opt/venv/lib/python3.11/site-packages", [built["cudnn_wheel"]])
    write_conda_package(root / "opt/conda", "nccl", "2.23.4.1", files={"lib/libnccl.so.2": b"n"})
    result = catalog_view(view_from_dir(root))
    assert result.skipped == ()
    assert [p.manager for p in result.packages] == ["dpkg", "rpm", "conda", "pip"]
    assert result.distro == Distro()
    for path, (package, owned) in result.owners.items():
        assert owned in package.files
        host = root / path.lstrip("/")
        if owned.algorithm == "sha256" and host.is_file() and not host.is_symlink():
            assert owned.digest == sha256_of(host), path


def test_distro_from_a_regular_etc_os_release(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text(
        '# comment\nNAME="Red Hat Enterprise Linux"\nID="rhel"\nVERSION_ID="9.4"\n'
        'PRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"\n'
    )
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/os-release").write_text("ID=fedora\nVERSION_ID=40\n")
    distro = read_distro(view_from_dir(tmp_path))
    assert distro == Distro("rhel", "9.4", "Red Hat Enterprise Linux 9.4 (Plow)")
    assert distro.qualifier == "rhel-9.4"


def test_distro_with_escapes_and_without_version() -> None:
    distro = Distro.from_os_release(b'ID=Debian\nPRETTY_NAME="Debian \\"sid\\""\n')
    assert distro == Distro("debian", "", 'Debian "sid"')
    assert distro.qualifier is None


def _pkg(manager: str, name: str, *files: OwnedFile) -> Package:
    return Package(manager, name, "1", purl("generic", None, name, "1"), files=files)


def test_owner_with_a_digest_wins_whatever_the_order() -> None:
    path = "/opt/conda/lib/python3.11/site-packages/x.so"
    conda_pkg = _pkg("conda", "x", OwnedFile(path, "sha256", "a" * 64))
    pip_pkg = _pkg("pip", "x-py", OwnedFile(path, None, None))
    dpkg_pkg = _pkg("dpkg", "x-deb", OwnedFile(path, "md5", "b" * 32))
    for order in ([conda_pkg, pip_pkg, dpkg_pkg], [dpkg_pkg, pip_pkg, conda_pkg]):
        owner, owned = index_owners(_view(), order)[path]
        assert owner is conda_pkg and owned.algorithm == "sha256"
    owner, _ = index_owners(_view(), [pip_pkg, dpkg_pkg])[path]
    assert owner is dpkg_pkg


def test_direct_record_beats_one_through_a_directory_symlink() -> None:
    nodes = {
        "/lib": Node("/lib", NodeKind.SYMLINK, link="usr/lib"),
        "/usr": Node("/usr", NodeKind.DIR),
        "/usr/lib": Node("/usr/lib", NodeKind.DIR),
        "/usr/lib/libx.so.1": Node("/usr/lib/libx.so.1", NodeKind.FILE, 3),
    }
    via_link = _pkg("dpkg", "a", OwnedFile("/lib/libx.so.1", "md5", "c" * 32))
    direct = _pkg("dpkg", "b", OwnedFile("/usr/lib/libx.so.1", "md5", "d" * 32))
    owners = index_owners(_view(nodes), [via_link, direct])
    assert owners["/usr/lib/libx.so.1"][0] is direct
    assert owners["/lib/libx.so.1"][0] is via_link


def test_a_failing_cataloger_costs_only_its_own_packages(tmp_path: Path) -> None:
    write_dist_info(tmp_path / "site", "ok", "1.0", {"ok.py": b"ok"})

    def broken(view: RootView, distro: Distro) -> Found:
        raise OSError(28, "No space left on device")

    result = catalog_view(view_from_dir(tmp_path), [("broken", broken), *CATALOGERS])
    assert [p.name for p in result.packages] == ["ok"]
    assert [(s.path, s.reason) for s in result.skipped] == [
        ("broken", "broken cataloger failed: OSError: [Errno 28] No space left on device")
    ]


def test_a_malformed_database_error_is_a_skipped_entry_with_its_reason(tmp_path: Path) -> None:
    def strict(view: RootView, distro: Distro) -> Found:
        raise CatalogParseError("status file is not deb822")

    result = catalog_view(view_from_dir(tmp_path), [("strict", strict)])
    assert [(s.path, s.reason, s.stage) for s in result.skipped] == [
        ("strict", "status file is not deb822", "catalog")
    ]


@pytest.mark.parametrize("defect", [TypeError("bad operand"), KeyError("x"), RuntimeError("?")])
def test_a_cataloger_defect_fails_instead_of_hiding_as_skipped(
    tmp_path: Path, defect: Exception
) -> None:
    # Only malformed input is expected: a bug in a cataloger must fail the tests that hit it.
    def buggy(view: RootView, distro: Distro) -> Found:
        raise defect

    with pytest.raises(type(defect)):
        catalog_view(view_from_dir(tmp_path), [("buggy", buggy), *CATALOGERS])


_MALFORMED: dict[str, tuple[str, bytes, str]] = {
    "dpkg status": ("var/lib/dpkg/status", b"Package foo\n", "corrupt dpkg stanza at line 1"),
    "dpkg status.d": (
        "var/lib/dpkg/status.d/foo",
        b"Package: foo\n continued\n\x00\n",
        "corrupt dpkg stanza",
    ),
    "rpm not sqlite": ("var/lib/rpm/rpmdb.sqlite", b"\x00" * 64, "not an SQLite database"),
    "rpm damaged sqlite": (
        "var/lib/rpm/rpmdb.sqlite",
        b"SQLite format 3\x00" + b"\xff" * 200,
        "unreadable rpm sqlite database",
    ),
    "pip record": (
        "site/x-1.0.dist-info/RECORD",
        b"x.py,sha256=!!notbase64,3\n",
        "1 malformed RECORD row(s)",
    ),
    "pip record too large a field": (
        "site/x-1.0.dist-info/RECORD",
        b'"' + b"a" * 200_000,
        "1 malformed RECORD row(s)",
    ),
    "conda json": ("opt/conda/conda-meta/x-1-0.json", b"{not json", "corrupt conda prefix"),
    "conda nested json": (
        "opt/conda/conda-meta/x-1-0.json",
        b"[" * 100_000,
        "corrupt conda prefix record",
    ),
    "conda not object": ("opt/conda/conda-meta/x-1-0.json", b"[1]", "not a JSON object"),
    "conda no name": ("opt/conda/conda-meta/x-1-0.json", b'{"version": "1"}', "without name"),
    "conda channel url": (
        "opt/conda/conda-meta/x-1-0.json",
        b'{"name": "x", "version": "1", "channel": "https://[::1/pkgs"}',
        "malformed channel URL",
    ),
}


@pytest.mark.parametrize("case", sorted(_MALFORMED))
def test_each_malformed_database_gives_a_skipped_entry_with_a_reason(
    tmp_path: Path, case: str
) -> None:
    rel, data, reason = _MALFORMED[case]
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    write_dist_info(tmp_path / "other-site", "ok", "1.0", {"ok.py": b"ok"})
    result = catalog_view(view_from_dir(tmp_path))
    assert "ok" in [p.name for p in result.packages]  # the other databases still count
    assert [s.path for s in result.skipped] == ["/" + rel]
    assert reason in result.skipped[0].reason
    assert result.skipped[0].stage == "catalog"


def test_a_conda_file_list_of_another_type_is_ignored_not_a_crash(tmp_path: Path) -> None:
    meta = tmp_path / "opt/conda/conda-meta"
    meta.mkdir(parents=True)
    (meta / "x-1-0.json").write_bytes(b'{"name": "x", "version": "1", "files": 5}')
    result = catalog_view(view_from_dir(tmp_path))
    assert [(p.name, p.files) for p in result.packages] == [("x", ())]
    assert result.skipped == ()


def test_usrmerge_with_rpm_lib64(tmp_path: Path, built: dict[str, Path]) -> None:
    root = tmp_path / "root"
    make_usrmerge(root)
    install_rpm(root, [built["cudnn_rpm"]])
    result = catalog_view(view_from_dir(root))
    # rpm recorded /usr/lib64/...; the tree has /lib64 -> usr/lib64, which is not a recorded
    # path, so only the recorded (real) path is owned.
    assert "/usr/lib64/libcudnn.so.9.5.1" in result.owners
    assert "/lib64/libcudnn.so.9.5.1" not in result.owners
