"""Which paths a source must capture for the catalogers."""

from __future__ import annotations

import pytest

from scanner.catalog import CATALOG_VERSION, is_metadata_path

CAPTURED = [
    "/var/lib/dpkg/status",
    "/var/lib/dpkg/status.d/libc6",
    "/var/lib/dpkg/status.d/libc6.md5sums",
    "/var/lib/dpkg/info/libcudart11.0:amd64.list",
    "/var/lib/dpkg/info/libcudart11.0:amd64.md5sums",
    "/var/lib/dpkg/info/base-files.list",
    "/var/lib/rpm/rpmdb.sqlite",
    "/var/lib/rpm/rpmdb.sqlite-wal",
    "/var/lib/rpm/rpmdb.sqlite-shm",
    "/var/lib/rpm/Packages",
    "/var/lib/rpm/Packages.db",
    "/usr/lib/sysimage/rpm/rpmdb.sqlite",
    "/usr/lib/sysimage/rpm/rpmdb.sqlite-wal",
    "/usr/local/lib/python3.11/site-packages/nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD",
    "/usr/local/lib/python3.11/site-packages/nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA",
    "/usr/lib/python3/dist-packages/six-1.16.0.egg-info/PKG-INFO",
    "/usr/lib/python3/dist-packages/six-1.16.0.egg-info/installed-files.txt",
    "/usr/lib/python3/dist-packages/distro-1.0.egg-info",
    "/opt/conda/conda-meta/cudnn-9.1.0.70-h0_0.json",
    "/conda-meta/python-3.11.json",
    "/etc/os-release",
    "/usr/lib/os-release",
]

NOT_CAPTURED = [
    "/var/lib/dpkg/info/libc6.postinst",
    "/var/lib/dpkg/info/libc6.conffiles",
    "/var/lib/dpkg/status-old",
    "/var/lib/dpkg/available",
    "/var/lib/dpkg/status.d/sub/x",
    "/var/lib/dpkg/info/sub/x.list",
    "/var/lib/rpm/Basenames",
    "/usr/lib/x86_64-linux-gnu/libcudnn.so.9",
    "/usr/local/lib/python3.11/site-packages/nvidia_cudnn_cu12-9.1.0.70.dist-info/WHEEL",
    "/usr/local/lib/python3.11/site-packages/nvidia/cudnn/RECORD",
    "/usr/local/lib/python3.11/site-packages/pkg/METADATA",
    "/opt/conda/conda-meta/history",
    "/opt/conda/pkgs/cudnn/info/index.json",
    "/opt/conda/lib/x.json",
    "/x.json",
    "/a-conda-meta/x.json",
    "/etc/os-release.d/x",
]


@pytest.mark.parametrize("path", CAPTURED)
def test_package_databases_are_metadata(path: str) -> None:
    assert is_metadata_path(path)


@pytest.mark.parametrize("path", NOT_CAPTURED)
def test_other_files_are_not_metadata(path: str) -> None:
    assert not is_metadata_path(path)


def test_catalog_version_is_a_nonempty_string() -> None:
    assert isinstance(CATALOG_VERSION, str) and CATALOG_VERSION
