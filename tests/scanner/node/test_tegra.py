"""Jetson L4T release from nv_tegra_release and the nvidia-l4t-core package -> JetPack."""

from __future__ import annotations

from pathlib import Path

from scanner.node.rootfs import Root
from scanner.node.tegra import parse_l4t_package_version, parse_tegra_release, read_l4t
from tests.scanner.node import nodetree as nt


def test_release_file_formats() -> None:
    assert parse_tegra_release(nt.TEGRA_RELEASE_36) == ("36.4.0", "generic")
    assert parse_tegra_release(nt.TEGRA_RELEASE_32) == ("32.7.1", "t210ref")
    assert parse_tegra_release("Ubuntu 22.04\n") is None
    assert parse_l4t_package_version("36.4.0-20240912212859") == "36.4.0"
    assert parse_l4t_package_version("32.7.1-20220219090432") == "32.7.1"
    assert parse_l4t_package_version("garbage") is None


def test_read_l4t_from_the_file(tmp_path: Path) -> None:
    nt.write(tmp_path, "/etc/nv_tegra_release", nt.TEGRA_RELEASE_36)
    nt.write(
        tmp_path,
        "/var/lib/dpkg/status",
        nt.dpkg_status([("nvidia-l4t-core", "36.4.0-20240912212859", "arm64")]),
    )
    l4t, notes = read_l4t(Root(str(tmp_path)))
    assert notes == []
    assert l4t is not None
    assert (l4t.release, l4t.jetpack, l4t.cuda, l4t.board) == ("36.4.0", "6.1", "12.6", "generic")
    assert l4t.source == "/etc/nv_tegra_release"


def test_read_l4t_from_the_package_and_disagreement(tmp_path: Path) -> None:
    nt.write(
        tmp_path,
        "/var/lib/dpkg/status",
        nt.dpkg_status(
            [("libc6", "2.35", "arm64"), ("nvidia-l4t-core", "35.4.1-20230801124926", "arm64")]
        ),
    )
    l4t, notes = read_l4t(Root(str(tmp_path)))
    assert l4t is not None and (l4t.release, l4t.jetpack) == ("35.4.1", "5.1.2")
    assert l4t.source == "dpkg nvidia-l4t-core 35.4.1-20230801124926"
    nt.write(tmp_path, "/etc/nv_tegra_release", nt.TEGRA_RELEASE_36)
    l4t, notes = read_l4t(Root(str(tmp_path)))
    assert l4t is not None and l4t.release == "36.4.0"
    assert notes and "35.4.1" in notes[0]


def test_no_jetson_and_unknown_release(tmp_path: Path) -> None:
    assert read_l4t(Root(str(tmp_path))) == (None, [])
    nt.write(tmp_path, "/etc/nv_tegra_release", "# R99 (release), REVISION: 1.0, BOARD: x\n")
    l4t, _ = read_l4t(Root(str(tmp_path)))
    assert l4t is not None and l4t.release == "99.1.0" and l4t.jetpack is None


def test_release_file_link_stays_in_root(tmp_path: Path) -> None:
    # a link planted in a mounted root must resolve inside it, never to this machine's /etc
    outside = tmp_path / "outside"
    nt.write(outside, "/nv_tegra_release", nt.TEGRA_RELEASE_32)
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "nv_tegra_release").symlink_to("../../outside/nv_tegra_release")
    assert read_l4t(Root(str(root))) == (None, [])
