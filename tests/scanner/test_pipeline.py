"""End-to-end acceptance of `run_scan` on the world of tests/scanner/scenarios.py.

The same root is scanned as a host tree and as an image in every format (OCI layout, OCI
archive, docker-archive legacy and Docker >= 25); every GPU library must come back with its
exact path, aliases, SHA-256, owner purl, family, component, version, CUDA major, integrity
verdict (and layer for images), and nothing deleted or outside the root may appear.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import msgspec
import pytest

from scanner.model import AssetKind, Integrity, ScanResult
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures import elf
from tests.fixtures import images as im
from tests.fixtures import packages as pk
from tests.scanner import scenarios as sc

FORMATS = im.FORMATS  # oci, oci-archive, docker-archive (legacy), docker25


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> sc.World:
    return sc.world_at(tmp_path_factory.getbasetemp() / "acceptance-world")


@pytest.fixture(scope="session")
def host_result(world: sc.World) -> ScanResult:
    return run_scan(str(world.root), ScanOptions(use_cache=False))


@pytest.fixture(scope="session")
def image_results(world: sc.World) -> dict[str, tuple[ScanResult, im.Built]]:
    out = {}
    for fmt in FORMATS:
        target, built = world.image_target(fmt)
        out[fmt] = (run_scan(target, ScanOptions(use_cache=False)), built)
    return out


def _all_results(
    host_result: ScanResult, image_results: dict[str, tuple[ScanResult, im.Built]]
) -> list[tuple[str, ScanResult]]:
    return [("host", host_result), *((f, r) for f, (r, _) in image_results.items())]


def assert_same_libraries(got: dict[str, sc.Expected], expected: dict[str, sc.Expected]) -> None:
    """Every expected library reported exactly, and nothing else."""
    assert sorted(got) == sorted(expected)
    for path, exp in expected.items():
        assert got[path] == exp, path


# --- every library, exactly -------------------------------------------------------------


def test_host_tree_reports_every_library_exactly(world: sc.World, host_result: ScanResult) -> None:
    assert_same_libraries(sc.by_path(host_result), world.expected)
    asset = host_result.asset
    assert asset.kind is AssetKind.HOST
    assert asset.name == sc.HOSTNAME
    assert asset.machine_id == sc.MACHINE_ID
    assert asset.reference == str(world.root)


@pytest.mark.parametrize("fmt", FORMATS)
def test_image_reports_every_library_exactly(
    world: sc.World, image_results: dict[str, tuple[ScanResult, im.Built]], fmt: str
) -> None:
    result, built = image_results[fmt]
    assert_same_libraries(sc.by_path(result), world.expected_for_image(built))
    asset = result.asset
    assert asset.kind is AssetKind.IMAGE
    assert list(asset.layers) == built.layer_digests
    assert asset.config_digest == built.config_digest
    assert asset.platform == "linux/amd64"
    assert asset.env_dict()["NV_CUDNN_VERSION"] == "9.1.0.70-1"
    assert asset.label_dict()["com.nvidia.cudnn.version"] == "9.1.0.70-1"
    # the legacy docker-archive has no manifest, hence no manifest digest
    assert asset.digest == (None if fmt == "docker-archive" else built.manifest_digest)


def test_every_format_agrees_with_the_host_scan(
    host_result: ScanResult, image_results: dict[str, tuple[ScanResult, im.Built]]
) -> None:
    def strip(result: ScanResult) -> list[tuple[object, ...]]:
        # MD5 differs on purpose: images compute it up front (the dpkg database may come in
        # a later layer), hosts only for dpkg-owned files
        return [
            (
                lib.ref.path,
                lib.aliases,
                lib.digests.sha256 if lib.digests else None,
                # evidence differs on purpose: images add their config's env and labels
                msgspec.structs.replace(lib.ident, evidence=()),
                lib.integrity,
                lib.integrity_reason,
                lib.owner,
                lib.notes,
            )
            for lib in result.libraries
        ]

    for fmt, (result, _) in image_results.items():
        assert strip(result) == strip(host_result), fmt
        assert result.findings == host_result.findings, fmt


def test_owner_digest_algorithms(host_result: ScanResult) -> None:
    """dpkg owners are checked by MD5 (computed in the same read), the others by SHA-256."""
    libs = {lib.ref.path: lib for lib in host_result.libraries}
    for path, lib in libs.items():
        assert lib.digests is not None
        data = (Path(host_result.asset.reference) / path.lstrip("/")).read_bytes()
        assert lib.digests.sha256 == hashlib.sha256(data).hexdigest()
        assert lib.digests.size == len(data)
        if lib.owner is not None and lib.owner.manager == "dpkg":
            assert lib.digests.md5 == hashlib.md5(data).hexdigest()
    ops = libs[f"{sc.MULTIARCH}/libcudnn_ops.so.9.1.0"]
    assert ops.integrity is Integrity.MODIFIED and "md5" in ops.integrity_reason.lower()
    lt = libs[f"{sc.SITE}/nvidia/cublas/lib/libcublasLt.so.12"]
    assert lt.integrity is Integrity.MODIFIED and "sha256" in lt.integrity_reason.lower()


# --- what must never appear -------------------------------------------------------------


def test_nothing_deleted_or_outside_the_root_appears(
    world: sc.World,
    host_result: ScanResult,
    image_results: dict[str, tuple[ScanResult, im.Built]],
) -> None:
    outside_sha = hashlib.sha256(world.outside.read_bytes()).hexdigest()
    escaping = {
        f"{sc.APP}/libcudnn_adv.so.9",  # absolute host path of a file outside the root
        f"{sc.APP}/libcudnn_engines_precompiled.so.9",  # ../../.. climbing out
        f"{sc.APP}/libcudnn_heuristic.so.9",  # climbing to /etc/passwd
        f"{sc.APP}/libcudnn_ops.so.9",  # through /opt/ext, a directory link to the outside
    }
    for name, result in _all_results(host_result, image_results):
        paths = {lib.ref.path for lib in result.libraries}
        aliases = {a for lib in result.libraries for a in lib.aliases}
        digests = {lib.digests.sha256 for lib in result.libraries if lib.digests}
        assert not (paths | aliases) & set(sc.DELETED), name
        assert not any(p.startswith(("/opt/old", "/usr/local/cuda-11.8")) for p in paths), name
        assert not (paths | aliases) & escaping, name
        assert outside_sha not in digests, name
        assert all(str(world.base) not in p for p in paths | aliases), name
        assert all(lib.ident.version != "9.9.9" for lib in result.libraries), name
        assert all(lib.ident.version != "8.9.7" for lib in result.libraries), name


def test_symlink_loops_are_reported_not_followed(
    host_result: ScanResult, image_results: dict[str, tuple[ScanResult, im.Built]]
) -> None:
    loops = [f"{sc.APP}/libcudnn_cnn.so", f"{sc.APP}/libcudnn_cnn.so.9"]
    for name, result in _all_results(host_result, image_results):
        assert [s.path for s in result.skipped] == loops, name
        assert all("symlink loop" in s.reason for s in result.skipped), name


SPECIAL = "not a regular file (a device, FIFO or socket)"


def test_special_files_named_like_libraries_are_reported_never_read(tmp_path: Path) -> None:
    """A FIFO named like a GPU library would block a scan that opened it, a device would never
    end: on a host and in an image they are listed as skipped (the name and any library-named
    link to them), not read and not silently dropped."""
    root = tmp_path / "root"
    lib = root / "usr" / "lib"
    lib.mkdir(parents=True)
    os.mkfifo(lib / "libnccl.so.2")
    os.mkfifo(lib / "pipe")
    (lib / "libcufft.so.11").symlink_to("pipe")
    host = run_scan(str(root), ScanOptions(use_cache=False))
    assert [(s.path, s.reason.endswith("not read")) for s in host.skipped] == [
        ("/usr/lib/libcufft.so.11", True),
        ("/usr/lib/libnccl.so.2", True),
    ]
    assert all(SPECIAL in s.reason for s in host.skipped) and not host.libraries
    assert "/usr/lib/pipe" in host.skipped[0].reason

    image = im.Image(
        [
            im.Layer(
                [
                    im.device("usr/lib/libcudnn.so.9", "fifo"),
                    im.device("usr/lib/libcublas.so.12", "chr"),
                    im.device("usr/lib/zero", "blk"),
                    im.symlink("usr/lib/libcudart.so.12", "zero"),
                    im.device("usr/lib/not-a-library", "fifo"),
                ]
            )
        ]
    )
    im.write_oci_layout(tmp_path / "layout", image, "1")
    result = run_scan(f"oci:{tmp_path / 'layout'}:1", ScanOptions(use_cache=False))
    assert [s.path for s in result.skipped] == [
        "/usr/lib/libcublas.so.12",
        "/usr/lib/libcudart.so.12",
        "/usr/lib/libcudnn.so.9",
    ]
    assert all(SPECIAL in s.reason for s in result.skipped) and not result.libraries


def test_findings(world: sc.World, host_result: ScanResult) -> None:
    by_kind = {f.kind: f for f in host_result.findings}
    assert sorted(by_kind) == ["mixed", "modified", "unowned"]
    assert sorted(by_kind["mixed"].paths) == sorted(world.mixed_paths)
    assert "9.1.0" in by_kind["mixed"].message and "9.3.0" in by_kind["mixed"].message
    for kind in ("modified", "unowned"):
        expected = sorted(p for p, e in world.expected.items() if e.integrity == kind)
        assert sorted(by_kind[kind].paths) == expected
    for lib in host_result.libraries:
        assert ("mixed-cudnn" in lib.notes) == (lib.ref.path in world.mixed_paths)


def test_packages_are_the_owners_of_gpu_libraries(world: sc.World, host_result: ScanResult) -> None:
    owners = sorted({e.owner for e in world.expected.values() if e.owner})
    assert [p.purl for p in host_result.packages] == owners
    managers = {p.manager for p in host_result.packages}
    assert managers == {"dpkg", "rpm", "pip", "conda"}
    cudnn = next(p for p in host_result.packages if p.name == sc.CUDNN_DEB)
    assert cudnn.version == sc.CUDNN_DEB_VERSION and cudnn.arch == "amd64"


def test_evidence_names_its_sources(host_result: ScanResult) -> None:
    libs = {lib.ref.path: lib for lib in host_result.libraries}
    graph = libs[f"{sc.APP}/libcudnn_graph.so.9"]
    sources = " ".join(e.source for e in graph.ident.evidence if e.field == "version")
    assert "cudnn_graph_version" in sources and "cudnn_version_9_1_0_70" in sources
    copy = libs[f"{sc.APP}/libcudart.so.12"]
    assert any(
        e.method == "hash-comparison" and e.value == sc.CUDART_VERSION for e in copy.ident.evidence
    )
    nvml = libs[f"{sc.MULTIARCH}/libnvidia-ml.so.{sc.NVML_VERSION}"]
    assert any(e.value == sc.NVML_VERSION for e in nvml.ident.evidence)


# --- caches --------------------------------------------------------------------------------


def test_host_rescan_with_cache_sees_changes(tmp_path: Path) -> None:
    """The host caches (digests by inode, directory listings) never hide a change."""
    root = tmp_path / "root"
    lib_dir = root / "usr/lib/x86_64-linux-gnu"
    libs = elf.build_cudnn_install(lib_dir, (9, 1, 0), components=("cudnn_graph", "cudnn_ops"))
    pk.write_os_release(root)
    cache = tmp_path / "cache"
    options = ScanOptions(cache_dir=cache)

    def scan() -> dict[str, sc.Expected]:
        return sc.by_path(run_scan(str(root), options))

    first = scan()
    assert first == scan()  # warm rescan: same answer
    assert any(cache.rglob("*")), "the host scan wrote nothing to its cache"

    graph = libs["cudnn_graph"]
    tampered = sc.flip_byte(graph.read_bytes())
    st = graph.stat()
    graph.write_bytes(tampered)  # same size, same directory listing
    os.utime(graph, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    second = scan()
    assert second[f"/usr/lib/x86_64-linux-gnu/{graph.name}"].sha256 == sc.sha256_hex(tampered)

    extra = lib_dir / "libcudnn_cnn.so.9.1.0"
    shutil.copyfile(elf.build_cudnn_library(tmp_path / "extra", "cudnn_cnn", (9, 1, 0)), extra)
    libs["cudnn_ops"].unlink()
    third = scan()
    assert f"/usr/lib/x86_64-linux-gnu/{extra.name}" in third
    assert f"/usr/lib/x86_64-linux-gnu/{libs['cudnn_ops'].name}" not in third


def test_every_cache_lives_under_one_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --cache-dir, the host caches go where every other gpuprov cache goes
    ($GPUPROV_CACHE_DIR first, scanner.fsutil.cache_root): issue 8 found three copies of the
    rule, one of which honoured $GPUPROV_CACHE_DIR."""
    root = tmp_path / "root"
    elf.build_cudnn_install(
        root / "usr/lib/x86_64-linux-gnu", (9, 1, 0), components=("cudnn_graph",)
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path / "mine"))
    assert ScanOptions().resolved_cache_dir() == tmp_path / "mine"
    run_scan(str(root))
    assert (tmp_path / "mine" / "host-files.json").is_file()
    assert not (tmp_path / "xdg").exists()


def test_host_cache_is_not_fooled_by_a_restored_mtime(tmp_path: Path) -> None:
    """A library rewritten in place at the same size with its mtime set back (``touch -d``)
    must not keep its cached digest: a warm cache would report a modified file as verified."""
    root = tmp_path / "root"
    lib_dir = root / "usr/lib/x86_64-linux-gnu"
    libs = elf.build_cudnn_install(lib_dir, (9, 1, 0), components=("cudnn_graph",))
    options = ScanOptions(cache_dir=tmp_path / "cache")
    path = f"/usr/lib/x86_64-linux-gnu/{libs['cudnn_graph'].name}"
    graph = libs["cudnn_graph"]
    assert sc.by_path(run_scan(str(root), options))[path].sha256 == sc.sha256_hex(
        graph.read_bytes()
    )
    st = graph.stat()
    tampered = sc.flip_byte(graph.read_bytes())
    with open(graph, "r+b") as f:  # same inode, same size
        f.write(tampered)
    os.utime(graph, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime set back exactly
    after = graph.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
    )
    assert sc.by_path(run_scan(str(root), options))[path].sha256 == sc.sha256_hex(tampered)


def test_image_sharing_layers_reads_only_new_layers(world: sc.World, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target, built = world.image_target("oci")
    first = run_scan(target, ScanOptions(cache_dir=cache))
    assert first.stats["layers_read"] == 3 and first.stats["layers_cached"] == 0

    # a second image: same base and system layers, a different application layer
    layers = list(world.image.layers)
    extra = elf.build_cuda_library(tmp_path / "libs", "cufft", "11.2.1.3")
    app = im.Layer([*layers[2].members, im.file("opt/app/lib/libcufft.so.11", extra.read_bytes())])
    other = im.Image([layers[0], layers[1], app], env=world.image.env, labels=world.image.labels)
    other_target = im.write_image(tmp_path / "other", other, "oci-archive")
    second = run_scan(other_target, ScanOptions(cache_dir=cache))
    assert second.stats["layers_read"] == 1 and second.stats["layers_cached"] == 2
    got = sc.by_path(second)
    cufft = got.pop("/opt/app/lib/libcufft.so.11")
    assert cufft.family == "cufft" and cufft.integrity == "unowned"
    expected = world.expected_for_image(other.build())
    assert_same_libraries(got, expected)

    # the cached first image gives exactly the uncached answer; --no-cache reads everything
    again = run_scan(target, ScanOptions(cache_dir=cache))
    assert again.stats["layers_read"] == 0 and again.stats["layers_cached"] == 3
    assert sc.by_path(again) == sc.by_path(first)
    uncached = run_scan(target, ScanOptions(cache_dir=tmp_path / "unused", use_cache=False))
    assert uncached.stats["layers_read"] == 3
    assert not (tmp_path / "unused").exists()
    assert sc.by_path(uncached) == sc.by_path(first)
    assert built.layer_digests == list(first.asset.layers)


def test_scan_never_writes_into_the_root(world: sc.World) -> None:
    before = im.tree_files(world.root)
    run_scan(str(world.root), ScanOptions(cache_dir=world.base / "cache-rw"))
    assert im.tree_files(world.root) == before
