"""conda cataloger against conda-meta prefix records in conda's own format."""

from __future__ import annotations

from pathlib import Path

from scanner.catalog import catalog_view, conda
from scanner.model import Package
from tests.fixtures.packages import sha256_of, view_from_dir, write_conda_package


def _only(packages: tuple[Package, ...], name: str) -> Package:
    found = [p for p in packages if p.name == name]
    assert len(found) == 1, [p.purl for p in packages]
    return found[0]


def test_conda_package_files_and_purl(tmp_path: Path) -> None:
    prefix = tmp_path / "root/opt/conda"
    write_conda_package(
        prefix,
        "cudnn",
        "9.3.0.75",
        "h93bb076_0",
        files={"lib/libcudnn_graph.so.9.3.0": b"graph", "include/cudnn_version.h": b"#define"},
        softlinks={"lib/libcudnn_graph.so.9": "libcudnn_graph.so.9.3.0"},
        relocated={"lib/pkgconfig/cudnn.pc": (b"prefix=/opt/anaconda1", b"prefix=/opt/conda")},
    )
    result = catalog_view(view_from_dir(tmp_path / "root"))
    assert result.skipped == ()
    pkg = _only(result.packages, "cudnn")
    assert (pkg.manager, pkg.version, pkg.arch) == ("conda", "9.3.0.75", "linux-64")
    assert (
        pkg.purl == "pkg:conda/cudnn@9.3.0.75?build=h93bb076_0&channel=conda-forge&subdir=linux-64"
    )
    assert pkg.source == "/opt/conda/conda-meta/cudnn-9.3.0.75-h93bb076_0.json"
    files = {f.path: f for f in pkg.files}
    lib = files["/opt/conda/lib/libcudnn_graph.so.9.3.0"]
    assert (lib.algorithm, lib.digest) == (
        "sha256",
        sha256_of(prefix / "lib/libcudnn_graph.so.9.3.0"),
    )
    link = files["/opt/conda/lib/libcudnn_graph.so.9"]
    assert link.digest is None
    # Rewritten at install time and no sha256_in_prefix: the package digest would not match.
    assert files["/opt/conda/lib/pkgconfig/cudnn.pc"].digest is None
    assert result.owners["/opt/conda/lib/libcudnn_graph.so.9.3.0"][0] is pkg


def test_sha256_in_prefix_is_used_for_relocated_files(tmp_path: Path) -> None:
    prefix = tmp_path / "root/envs/ml"
    write_conda_package(
        prefix,
        "cuda-cudart",
        "12.6.77",
        relocated={"lib/libcudart.so.12.6.77": (b"original", b"relocated")},
        record_sha256_in_prefix=True,
    )
    result = catalog_view(view_from_dir(tmp_path / "root"))
    owned = result.owners["/envs/ml/lib/libcudart.so.12.6.77"][1]
    assert owned.digest == sha256_of(prefix / "lib/libcudart.so.12.6.77")


def test_channel_names_never_leak_urls_or_tokens() -> None:
    assert (
        conda.channel_name(
            {"channel": "https://conda.anaconda.org/nvidia/linux-64", "subdir": "linux-64"}
        )
        == "nvidia"
    )
    assert (
        conda.channel_name(
            {"channel": "https://conda.anaconda.org/t/tk-123/private/noarch", "subdir": "linux-64"}
        )
        == "private"
    )
    assert (
        conda.channel_name(
            {"channel": "https://repo.anaconda.com/pkgs/main/linux-64", "subdir": "linux-64"}
        )
        == "pkgs/main"
    )
    assert conda.channel_name({"channel": "defaults"}) == "defaults"
    assert conda.channel_name({"schannel": "pkgs/main", "channel": "https://x/y"}) == "pkgs/main"
    assert conda.channel_name({}) is None


def test_channel_with_slash_is_percent_encoded(tmp_path: Path) -> None:
    write_conda_package(
        tmp_path / "root/opt/conda",
        "python",
        "3.11.9",
        "h955ad1f_0",
        channel="https://repo.anaconda.com/pkgs/main/linux-64",
    )
    pkg = _only(catalog_view(view_from_dir(tmp_path / "root")).packages, "python")
    assert (
        pkg.purl == "pkg:conda/python@3.11.9?build=h955ad1f_0&channel=pkgs%2Fmain&subdir=linux-64"
    )


def test_corrupt_records_are_skipped(tmp_path: Path) -> None:
    meta = tmp_path / "root/opt/conda/conda-meta"
    write_conda_package(tmp_path / "root/opt/conda", "nccl", "2.23.4.1", files={"lib/n.so": b"n"})
    (meta / "broken-1-0.json").write_bytes(b'{"name": "broken", "version": ')
    (meta / "list-1-0.json").write_text("[1, 2]")
    (meta / "nameless-1-0.json").write_text('{"version": "1"}')
    (meta / "binary-1-0.json").write_bytes(b"\xff\xfe\x00garbage")
    result = catalog_view(view_from_dir(tmp_path / "root"))
    assert [p.name for p in result.packages] == ["nccl"]
    reasons = {s.path.rpartition("/")[2]: s.reason for s in result.skipped}
    assert set(reasons) == {
        "broken-1-0.json",
        "list-1-0.json",
        "nameless-1-0.json",
        "binary-1-0.json",
    }
    assert reasons["broken-1-0.json"].startswith("corrupt conda prefix record")
    assert reasons["list-1-0.json"] == "conda prefix record is not a JSON object"
    assert reasons["nameless-1-0.json"] == "conda prefix record without name and version"
