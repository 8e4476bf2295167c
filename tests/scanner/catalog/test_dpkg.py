"""dpkg cataloger against real .deb packages unpacked and registered into a temporary root."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from scanner.catalog import catalog_view, dpkg
from scanner.catalog.interface import Distro
from scanner.model import AssetInfo, AssetKind, Package
from scanner.source.interface import RootView
from tests.fixtures.packages import (
    EXAMPLE_CUDART_DEB,
    DebSpec,
    append_dpkg_status,
    build_deb,
    install_deb,
    make_usrmerge,
    md5_of,
    view_from_dir,
    write_os_release,
)


def _only(packages: tuple[Package, ...], name: str, arch: str | None = None) -> Package:
    found = [p for p in packages if p.name == name and (arch is None or p.arch == arch)]
    assert len(found) == 1, [p.purl for p in packages]
    return found[0]


@pytest.fixture
def deb_root(tmp_path: Path, built: dict[str, Path]) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    write_os_release(root, "debian", "12")
    assert install_deb(root, built["cudart_deb"]) == "libcudart11.0:amd64"
    return root


def test_real_deb_package_files_and_md5(deb_root: Path) -> None:
    result = catalog_view(view_from_dir(deb_root))
    assert result.skipped == ()
    pkg = _only(result.packages, "libcudart11.0")
    assert pkg.manager == "dpkg"
    assert pkg.version == EXAMPLE_CUDART_DEB.version
    assert pkg.arch == "amd64"
    assert pkg.source == "/var/lib/dpkg/status"
    assert (
        pkg.purl == "pkg:deb/debian/libcudart11.0@11.8.89~11.8.0-5~deb12u1"
        "?arch=amd64&distro=debian-12"
    )
    assert ("source-package", "nvidia-cuda-toolkit") in pkg.extra
    files = {f.path: f for f in pkg.files}
    # Directories of the .list are not owned files; regular files, the conffile and the
    # symlink are.
    assert set(files) == set(EXAMPLE_CUDART_DEB.files) | set(EXAMPLE_CUDART_DEB.symlinks)
    for path in EXAMPLE_CUDART_DEB.files:
        assert files[path].algorithm == "md5"
        assert files[path].digest == md5_of(deb_root / path.lstrip("/")), path
    link = files["/usr/lib/x86_64-linux-gnu/libcudart.so.11.0"]
    assert (link.algorithm, link.digest) == (None, None)
    owner, owned = result.owners["/usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89"]
    assert owner.purl == pkg.purl and owned.algorithm == "md5"


def test_real_dpkg_agrees_with_the_fixture_database(deb_root: Path) -> None:
    """Cross-check: dpkg itself reads the database the fixture wrote and finds it intact."""
    verify = subprocess.run(
        ["dpkg", f"--root={deb_root}", "--verify"], capture_output=True, text=True
    )
    assert verify.returncode == 0 and verify.stdout == "", verify
    lib = deb_root / "usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89"
    lib.write_bytes(b"tampered")
    verify = subprocess.run(
        ["dpkg", f"--root={deb_root}", "--verify"], capture_output=True, text=True
    )
    assert "libcudart.so.11.8.89" in verify.stdout
    # ... and our record of the package still names the original digest, not the new one.
    owner = catalog_view(view_from_dir(deb_root)).owners[
        "/usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89"
    ]
    assert owner[1].digest != md5_of(lib)


def test_multi_arch_same_package_for_two_architectures(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for arch, triplet in (("amd64", "x86_64-linux-gnu"), ("i386", "i386-linux-gnu")):
        spec = DebSpec(
            name="libnccl2",
            version="2.21.5-1+cuda12.4",
            arch=arch,
            multi_arch="same",
            files={f"/usr/lib/{triplet}/libnccl.so.2.21.5": f"nccl {arch}".encode()},
        )
        assert install_deb(root, build_deb(spec, tmp_path)) == f"libnccl2:{arch}"
    assert (root / "var/lib/dpkg/info/libnccl2:i386.md5sums").is_file()
    result = catalog_view(view_from_dir(root))
    amd64 = _only(result.packages, "libnccl2", "amd64")
    i386 = _only(result.packages, "libnccl2", "i386")
    # No os-release: the vendor defaults to debian and there is no distro qualifier.
    assert amd64.purl == "pkg:deb/debian/libnccl2@2.21.5-1%2Bcuda12.4?arch=amd64"
    assert i386.purl == "pkg:deb/debian/libnccl2@2.21.5-1%2Bcuda12.4?arch=i386"
    assert [f.path for f in i386.files] == ["/usr/lib/i386-linux-gnu/libnccl.so.2.21.5"]
    assert i386.files[0].digest == md5_of(root / "usr/lib/i386-linux-gnu/libnccl.so.2.21.5")
    assert result.owners["/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"][0] is amd64


def test_epoch_and_vendor_in_purl(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write_os_release(root, "ubuntu", "24.04")
    spec = DebSpec(name="attr", version="1:2.4.47-2+b1", files={"/usr/bin/attr": b"attr"})
    install_deb(root, build_deb(spec, tmp_path))
    pkg = _only(catalog_view(view_from_dir(root)).packages, "attr")
    assert pkg.version == "1:2.4.47-2+b1"
    # purl spec: ':' is never percent-encoded, '+' is.
    assert pkg.purl == "pkg:deb/ubuntu/attr@1:2.4.47-2%2Bb1?arch=amd64&distro=ubuntu-24.04"


def test_distroless_status_d(tmp_path: Path, built: dict[str, Path]) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write_os_release(root, "debian", "12")
    install_deb(root, built["cudart_deb"], distroless=True)
    assert not (root / "var/lib/dpkg/status").exists()
    assert (root / "var/lib/dpkg/status.d/libcudart11.0.md5sums").is_file()
    result = catalog_view(view_from_dir(root))
    assert result.skipped == ()
    pkg = _only(result.packages, "libcudart11.0")
    assert pkg.source == "/var/lib/dpkg/status.d/libcudart11.0"
    assert pkg.purl.startswith("pkg:deb/debian/libcudart11.0@11.8.89")
    lib = "/usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89"
    owner, owned = result.owners[lib]
    assert owner is pkg
    assert (owned.algorithm, owned.digest) == ("md5", md5_of(root / lib.lstrip("/")))


def test_usrmerge_recorded_path_maps_to_real_path(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_usrmerge(root)
    spec = DebSpec(
        name="libcudnn8",
        version="8.9.7.29-1+cuda12.2",
        files={"/lib/x86_64-linux-gnu/libcudnn_ops_infer.so.8.9.7": b"ops infer"},
    )
    install_deb(root, build_deb(spec, tmp_path))
    assert (root / "lib").is_symlink()
    real = "/usr/lib/x86_64-linux-gnu/libcudnn_ops_infer.so.8.9.7"
    assert (root / real.lstrip("/")).is_file()
    result = catalog_view(view_from_dir(root))
    recorded = result.owners["/lib/x86_64-linux-gnu/libcudnn_ops_infer.so.8.9.7"]
    via_real = result.owners[real]
    assert recorded == via_real
    assert via_real[0].name == "libcudnn8"
    assert via_real[1].path == "/lib/x86_64-linux-gnu/libcudnn_ops_infer.so.8.9.7"
    assert via_real[1].digest == md5_of(root / real.lstrip("/"))
    # /lib itself (listed by no package here) and directories are never owned files.
    assert "/lib" not in result.owners and "/lib/x86_64-linux-gnu" not in result.owners


def test_binary_garbage_after_valid_stanza(deb_root: Path) -> None:
    garbage = random.Random(7).randbytes(4096)
    append_dpkg_status(deb_root, b"\n" + garbage)
    result = catalog_view(view_from_dir(deb_root))
    assert [p.name for p in result.packages] == ["libcudart11.0"]
    assert result.skipped, "the garbage must be reported"
    assert all(s.path == "/var/lib/dpkg/status" and s.stage == "catalog" for s in result.skipped)
    assert "corrupt dpkg stanza at line" in result.skipped[0].reason


def test_stanza_without_package_field_is_skipped_and_rest_kept(deb_root: Path) -> None:
    append_dpkg_status(
        deb_root,
        b"Status: install ok installed\nVersion: 1.0\nArchitecture: amd64\n\n"
        b"Package: removed-pkg\nStatus: deinstall ok config-files\nVersion: 2\n"
        b"Architecture: amd64\n\n"
        b"Package: noversion\nStatus: install ok installed\nArchitecture: amd64\n",
    )
    result = catalog_view(view_from_dir(deb_root))
    assert [p.name for p in result.packages] == ["libcudart11.0"]
    reasons = sorted(s.reason for s in result.skipped)
    assert len(reasons) == 2, reasons
    assert "no Package field" in reasons[0]
    assert "noversion: no Version field" in reasons[1]


def test_entirely_random_status_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    append_dpkg_status(root, random.Random(1).randbytes(20000))
    result = catalog_view(view_from_dir(root))
    assert result.packages == ()
    assert 1 <= len(result.skipped) <= 21
    assert all(s.path == "/var/lib/dpkg/status" for s in result.skipped)


def test_skips_are_capped_per_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    append_dpkg_status(root, b"".join(b"not a field line %d\n\n" % i for i in range(100)))
    skipped = catalog_view(view_from_dir(root)).skipped
    assert len(skipped) == 21
    assert skipped[-1].reason.startswith("80 more corrupt dpkg stanzas")


def test_malformed_md5sums_line(deb_root: Path) -> None:
    md5sums = deb_root / "var/lib/dpkg/info/libcudart11.0:amd64.md5sums"
    md5sums.write_bytes(md5sums.read_bytes() + b"zz-not-hex  usr/lib/bogus\n")
    result = catalog_view(view_from_dir(deb_root))
    assert [s.path for s in result.skipped] == ["/var/lib/dpkg/info/libcudart11.0:amd64.md5sums"]
    assert "1 malformed md5sums line" in result.skipped[0].reason
    lib = "/usr/lib/x86_64-linux-gnu/libcudart.so.11.8.89"
    assert result.owners[lib][1].digest == md5_of(deb_root / lib.lstrip("/"))


def test_parse_stanzas_continuations_and_crlf() -> None:
    data = b"Package: a\r\nDescription: one\r\n two\r\n .\r\n\r\nPackage: b\n"
    stanzas = list(dpkg.parse_stanzas(data))
    assert [type(s).__name__ for s in stanzas] == ["_Stanza", "_Stanza"]
    first = stanzas[0]
    assert isinstance(first, dpkg._Stanza)
    assert first.fields["Description"] == "one\ntwo\n."


def test_status_word_filter() -> None:
    status = (
        b"Package: half\nStatus: install ok unpacked\nVersion: 1\nArchitecture: all\n\n"
        b"Package: gone\nStatus: purge ok not-installed\nVersion: 1\nArchitecture: all\n"
    )
    view = RootView(
        info=AssetInfo(AssetKind.HOST, "h", "/"),
        nodes={},
        metadata={"/var/lib/dpkg/status": status},
        candidates=[],
    )
    found = dpkg.catalog(view, Distro())
    assert [p.name for p in found.packages] == ["half"]
    assert found.packages[0].purl == "pkg:deb/debian/half@1?arch=all"
