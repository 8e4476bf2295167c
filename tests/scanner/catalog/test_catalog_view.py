"""catalog_view across managers: distro, owner choice when several claim a path, resilience."""

from __future__ import annotations

from pathlib import Path

from scanner.catalog import CATALOGERS, catalog_view, index_owners, read_distro
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
        raise RuntimeError("parser defect")

    result = catalog_view(view_from_dir(tmp_path), [("broken", broken), *CATALOGERS])
    assert [p.name for p in result.packages] == ["ok"]
    assert [(s.path, s.reason) for s in result.skipped] == [
        ("broken", "broken cataloger failed: RuntimeError: parser defect")
    ]


def test_usrmerge_with_rpm_lib64(tmp_path: Path, built: dict[str, Path]) -> None:
    root = tmp_path / "root"
    make_usrmerge(root)
    install_rpm(root, [built["cudnn_rpm"]])
    result = catalog_view(view_from_dir(root))
    # rpm recorded /usr/lib64/...; the tree has /lib64 -> usr/lib64, which is not a recorded
    # path, so only the recorded (real) path is owned.
    assert "/usr/lib64/libcudnn.so.9.5.1" in result.owners
    assert "/lib64/libcudnn.so.9.5.1" not in result.owners
