"""pip cataloger against a wheel installed by real pip, and dist-info/egg-info written by hand."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from scanner.catalog import catalog_view, pip
from scanner.model import OwnedFile, Package
from tests.fixtures.packages import (
    EXAMPLE_CUDNN_WHEEL_FILES,
    pip_install,
    sha256_of,
    view_from_dir,
    write_dist_info,
    write_egg_info,
)

SITE = "/usr/local/lib/python3.11/site-packages"


def _only(packages: tuple[Package, ...], name: str) -> Package:
    found = [p for p in packages if p.name == name]
    assert len(found) == 1, [p.purl for p in packages]
    return found[0]


@pytest.fixture
def pip_root(tmp_path: Path, built: dict[str, Path]) -> Path:
    root = tmp_path / "root"
    pip_install(root / SITE.lstrip("/"), [built["cudnn_wheel"]])
    return root


def test_pip_installed_wheel(pip_root: Path) -> None:
    result = catalog_view(view_from_dir(pip_root))
    assert result.skipped == ()
    pkg = _only(result.packages, "nvidia-cudnn-cu12")
    assert (pkg.manager, pkg.version) == ("pip", "9.1.0.70")
    assert pkg.purl == "pkg:pypi/nvidia-cudnn-cu12@9.1.0.70"
    assert pkg.source == f"{SITE}/nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA"
    files = {f.path: f for f in pkg.files}
    for rel in EXAMPLE_CUDNN_WHEEL_FILES:
        owned = files[f"{SITE}/{rel}"]
        assert owned.algorithm == "sha256"
        assert owned.digest == sha256_of(pip_root / SITE.lstrip("/") / rel), rel
    # RECORD lists itself and the .pyc files pip compiled without a hash.
    record = files[f"{SITE}/nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD"]
    assert (record.algorithm, record.digest) == (None, None)
    pycs = [f for f in pkg.files if f.path.endswith(".pyc")]
    assert pycs and all(f.digest is None for f in pycs)
    # Scripts are recorded with '..' paths; they are normalized inside the root.
    assert all(".." not in f.path for f in pkg.files)
    assert any(f.path.endswith("/bin/cudnn-info") for f in pkg.files)
    lib = f"{SITE}/nvidia/cudnn/lib/libcudnn_graph.so.9"
    assert result.owners[lib][0] is pkg


def test_name_normalization_and_local_version(tmp_path: Path) -> None:
    site = tmp_path / "root/opt/venv/lib/python3.12/site-packages"
    write_dist_info(site, "Torch_Vision.Extra", "0.20.1+cu124", {"tv/x.so": b"so"})
    result = catalog_view(view_from_dir(tmp_path / "root"))
    pkg = _only(result.packages, "Torch_Vision.Extra")
    assert pkg.purl == "pkg:pypi/torch-vision-extra@0.20.1%2Bcu124"
    owned = result.owners["/opt/venv/lib/python3.12/site-packages/tv/x.so"][1]
    assert owned.digest == sha256_of(site / "tv/x.so")


def test_same_distribution_in_two_environments_is_one_package(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for env in ("a", "b"):
        write_dist_info(
            root / f"opt/{env}/site-packages", "nvidia-nccl-cu12", "2.21.5", {"nccl.so": b"n"}
        )
    result = catalog_view(view_from_dir(root))
    pkg = _only(result.packages, "nvidia-nccl-cu12")
    assert {f.path for f in pkg.files if f.path.endswith("nccl.so")} == {
        "/opt/a/site-packages/nccl.so",
        "/opt/b/site-packages/nccl.so",
    }
    assert dict(pkg.extra)["also-installed-from"].startswith("/opt/b/site-packages/")


def test_egg_info_directory_and_file(tmp_path: Path) -> None:
    site = tmp_path / "root/usr/lib/python3/dist-packages"
    write_egg_info(site, "six", "1.16.0", {"six.py": b"# six"})
    write_egg_info(site, "distro-info", "1.0", {}, as_file=True)
    result = catalog_view(view_from_dir(tmp_path / "root"))
    six = _only(result.packages, "six")
    assert six.purl == "pkg:pypi/six@1.16.0"
    assert "/usr/lib/python3/dist-packages/six.py" in {f.path for f in six.files}
    assert all(f.algorithm is None for f in six.files)
    distro_info = _only(result.packages, "distro-info")
    assert distro_info.files == ()
    assert distro_info.source == "/usr/lib/python3/dist-packages/distro_info-1.0.egg-info"


def test_malformed_record_rows(tmp_path: Path) -> None:
    site = tmp_path / "root/site"
    dist_info = write_dist_info(site, "demo", "1.0", {"ok.py": b"ok", "bad.py": b"bad"})
    record = dist_info / "RECORD"
    text = record.read_text().replace("bad.py,sha256=", "bad.py,sha256=!!")
    record.write_text(text + "weird.py,md4=abcd,1\n")
    result = catalog_view(view_from_dir(tmp_path / "root"))
    pkg = _only(result.packages, "demo")
    files = {f.path: f for f in pkg.files}
    assert files["/site/ok.py"].digest == sha256_of(site / "ok.py")
    assert files["/site/bad.py"].digest is None
    assert files["/site/weird.py"].digest is None
    assert [s.reason for s in result.skipped] == ["2 malformed RECORD row(s): no digest kept"]
    assert result.skipped[0].path == "/site/demo-1.0.dist-info/RECORD"


def test_record_without_metadata_uses_directory_name(tmp_path: Path) -> None:
    dist_info = write_dist_info(tmp_path / "root/site", "cuda-python", "12.6.0", {"c.py": b"c"})
    (dist_info / "METADATA").unlink()
    pkg = _only(catalog_view(view_from_dir(tmp_path / "root")).packages, "cuda_python")
    assert pkg.purl == "pkg:pypi/cuda-python@12.6.0"


def test_decode_hash() -> None:
    assert pip._decode_hash("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU") == (
        "sha256",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    )
    assert pip._decode_hash("sha256=short") is None
    assert pip._decode_hash("crc32=AAAA") is None
    assert pip.normalize_name("Foo__Bar.baz-Qux") == "foo-bar-baz-qux"


def test_debian_hex_record_digests() -> None:
    """Debian's python3-* packages write hex SHA-256 into RECORD; both encodings are read."""
    from scanner.catalog.pip import parse_record

    hexd = hashlib.sha256(b"x").hexdigest()
    data = f"pkg/a.py,sha256={hexd},1\npkg/b.py,sha256={hexd[:-1]}z,1\n".encode()
    files, bad = parse_record(data, "/usr/lib/python3/dist-packages")
    assert files[0] == OwnedFile("/usr/lib/python3/dist-packages/pkg/a.py", "sha256", hexd)
    assert bad == 1
