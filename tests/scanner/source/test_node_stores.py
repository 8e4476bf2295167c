"""Images on a node without an engine: a real containerd root written by containerd/ctr, and a
Docker data root laid out as Docker writes it; each scan equals the same image's archive scan."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from scanner.errors import SourceError, UsageError
from scanner.pipeline import ScanOptions, run_scan
from scanner.report import to_dict
from scanner.source import open_source, parse_target
from scanner.source.bbolt import BoltDB
from scanner.source.containerd import META_DB, ContainerdRoot, parse_containerd_target
from scanner.source.dockerroot import DockerRoot, parse_docker_target
from tests.fixtures.images import (
    Image,
    Layer,
    directory,
    file,
    hashing_selector,
    symlink,
    write_docker_archive,
)
from tests.fixtures.nodestores import (
    Containerd,
    DockerContainerSpec,
    containerd_missing,
    overlay_whiteouts_supported,
    running_containerd,
    write_docker_root,
    write_named_oci_archive,
)
from tests.scanner import scenarios as sc
from tests.scanner.source.samples import rich_image

RICH = "docker.io/demo/rich:1"
WORLD = "docker.io/demo/world:12.4"


def comparable(target: str) -> dict[str, Any]:
    """A scan's JSON result without what depends on the source's description or the clock."""
    data = to_dict(run_scan(target, ScanOptions(use_cache=False)))
    data["asset"].pop("reference")
    data.pop("started_at")
    data.pop("stats")
    return data


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> sc.World:
    return sc.world_at(tmp_path_factory.getbasetemp() / "acceptance-world")


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory, world: sc.World) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("archives")
    write_named_oci_archive(base / "rich.tar", rich_image(), RICH)
    write_named_oci_archive(base / "world.tar", world.image, WORLD)
    return {"rich": base / "rich.tar", "world": base / "world.tar"}


@pytest.fixture(scope="module")
def containerd(
    tmp_path_factory: pytest.TempPathFactory, archives: dict[str, Path]
) -> Iterator[Containerd]:
    missing = containerd_missing()
    if missing is not None:
        pytest.fail(
            f"the containerd store tests need containerd (make test installs it): {missing}"
        )
    with running_containerd(tmp_path_factory.mktemp("containerd")) as daemon:
        daemon.import_archive(archives["rich"])
        daemon.import_archive(archives["world"])
        # the same image in a second namespace (as Kubernetes' k8s.io beside ctr's default)
        daemon.import_archive(archives["world"], namespace="k8s.io")
        yield daemon


def test_containerd_scan_equals_the_archive_scan(
    containerd: Containerd, archives: dict[str, Path]
) -> None:
    for name, image in (("world", WORLD), ("rich", RICH)):
        from_store = comparable(f"containerd:{containerd.root}/default:{image}")
        from_archive = comparable(f"oci-archive:{archives[name]}")
        assert from_store == from_archive, name
    assert from_store["asset"]["name"] == RICH
    world = comparable(f"containerd:{containerd.root}/k8s.io")
    assert world["asset"]["name"] == WORLD and len(world["libraries"]) >= 10


def test_containerd_records_read_from_the_real_metadata_database(containerd: Containerd) -> None:
    store = ContainerdRoot(str(containerd.root))
    images = store.images()
    # ctr names an image imported into k8s.io by its config digest too, as the CRI does
    config = store.plan(images[2], None).config_digest
    assert [(i.namespace, i.name) for i in images] == [
        ("default", RICH),
        ("default", WORLD),
        ("k8s.io", WORLD),
        ("k8s.io", config),
    ]
    assert images[1].target.digest == images[2].target.digest == images[3].target.digest
    listed = containerd.ctr("images", "ls")
    for image in images[:2]:
        assert image.target.digest in listed
        assert image.target.media_type in listed
    # several images: the target must name one; unknown names say what there is
    with pytest.raises(UsageError, match="several images"):
        open_source(
            f"containerd:{containerd.root}", cache_dir=None, use_cache=False, all_filesystems=False
        ).open_view(hashing_selector())
    with pytest.raises(UsageError, match="no image 'nope:1'.*demo/rich"):
        open_source(
            f"containerd:{containerd.root}:nope:1",
            cache_dir=None,
            use_cache=False,
            all_filesystems=False,
        ).open_view(hashing_selector())
    # the image named by digest, across namespaces (one digest, so not ambiguous)
    view = open_source(
        f"containerd:{containerd.root}:{images[1].target.digest}",
        cache_dir=None,
        use_cache=False,
        all_filesystems=False,
    ).open_view(hashing_selector())
    assert view.info.digest == images[1].target.digest


def _pause_binary(directory: Path) -> bytes | None:
    source = directory / "pause.c"
    source.write_text("#include <unistd.h>\nint main(void){for(;;)pause();}\n")
    out = subprocess.run(
        ["gcc", "-static", "-Os", "-o", str(directory / "pause"), str(source)],
        capture_output=True,
        check=False,
    )
    return (directory / "pause").read_bytes() if out.returncode == 0 else None


def test_containerd_containers_and_running_tasks(containerd: Containerd, tmp_path: Path) -> None:
    containerd.ctr("containers", "create", RICH, "stopped-one", "/bin/true")
    pause = _pause_binary(tmp_path)
    started = False
    if pause is not None:
        write_named_oci_archive(
            tmp_path / "pause.tar",
            Image([Layer([file("pause", pause, mode=0o755)])]),
            "docker.io/demo/pause:1",
        )
        containerd.import_archive(tmp_path / "pause.tar")
        try:
            containerd.ctr("run", "-d", "docker.io/demo/pause:1", "runner", "/pause")
            started = True
        except RuntimeError as e:
            reason = str(e)
    store = ContainerdRoot(str(containerd.root), str(containerd.state), "/proc")
    found = {c.id: c for c in store.containers()}
    assert found["stopped-one"].image == RICH and not found["stopped-one"].running
    if not started:
        pytest.fail(f"runc cannot start a container here: {reason if pause else 'no gcc -static'}")
    assert found["runner"].running and found["runner"].image == "docker.io/demo/pause:1"
    containerd.ctr("tasks", "kill", "-s", "KILL", "runner")
    subprocess.run(["sleep", "0.5"], check=True)
    # the task stopped but not deleted keeps its bundle; its init process is gone
    assert not {c.id: c for c in store.containers()}["runner"].running


def test_containerd_target_forms(containerd: Containerd) -> None:
    root = str(containerd.root)
    assert parse_target(f"containerd:{root}/k8s.io:{WORLD}") == (
        "containerd",
        f"{root}/k8s.io:{WORLD}",
        None,
    )
    assert parse_containerd_target(f"{root}/k8s.io:{WORLD}") == (root, "k8s.io", WORLD)
    assert parse_containerd_target(root) == (root, None, None)
    assert parse_containerd_target(f"{root}:sha256:ab") == (root, None, "sha256:ab")
    # an image name with a registry port: the namespace is still found
    assert parse_containerd_target(f"{root}/k8s.io:reg.example:5000/ml/x:1") == (
        root,
        "k8s.io",
        "reg.example:5000/ml/x:1",
    )
    assert parse_containerd_target(f"{root}:reg.example:5000/ml/x:1") == (
        root,
        None,
        "reg.example:5000/ml/x:1",
    )
    with pytest.raises(SourceError, match="no containerd root"):
        parse_containerd_target("/nonexistent/x")
    with pytest.raises(UsageError, match="not a namespace"):
        parse_containerd_target(f"{root}/..:x")


def test_damaged_metadata_databases_are_refused(containerd: Containerd, tmp_path: Path) -> None:
    real = (containerd.root / META_DB).read_bytes()
    cases = {
        "empty": b"",
        "garbage": os.urandom(8192),
        "truncated": real[: len(real) // 3],
    }
    # every page id beyond the high-water mark; a branch page naming itself
    page_size = struct.unpack_from("<I", real, 24)[0]
    looped = bytearray(real)
    for page in range(2, len(real) // page_size):
        at = page * page_size
        if struct.unpack_from("<H", looped, at + 8)[0] == 0x01:
            struct.pack_into("<Q", looped, at + 16 + 8, page)
    cases["looped"] = bytes(looped)
    for name, data in cases.items():
        root = tmp_path / name
        (root / META_DB).parent.mkdir(parents=True)
        (root / META_DB).write_bytes(data)
        try:
            ContainerdRoot(str(root)).images()
        except SourceError:
            continue
        # a damaged copy may still hold a readable tree; it never raises anything else
    with BoltDB(str(containerd.root / META_DB)) as db:
        assert db.root().bucket(b"v1") is not None


def test_content_store_without_metadata(containerd: Containerd, tmp_path: Path) -> None:
    copy = tmp_path / "root"
    shutil.copytree(
        containerd.root / "io.containerd.content.v1.content",
        copy / "io.containerd.content.v1.content",
    )
    images = ContainerdRoot(str(copy)).images()
    real = {i.target.digest for i in ContainerdRoot(str(containerd.root)).images()}
    found = {i.target.digest for i in images}
    # an index `ctr import` wrote and discarded may wait for containerd's garbage collector:
    # then it is found, and the manifest it names is reached through it
    blobs = copy / "io.containerd.content.v1.content/blobs/sha256"
    through = {
        m["digest"]
        for d in found
        for m in json.loads((blobs / d[7:]).read_bytes()).get("manifests", [])
    }
    assert real <= found | through and found - real <= {
        d for d in found if "manifests" in json.loads((blobs / d[7:]).read_bytes())
    }
    assert all(i.name == i.target.digest for i in images)


def test_content_blob_links_are_not_followed(containerd: Containerd, tmp_path: Path) -> None:
    copy = tmp_path / "root"
    for part in ("io.containerd.content.v1.content", "io.containerd.metadata.v1.bolt"):
        shutil.copytree(containerd.root / part, copy / part, symlinks=True)
    store = ContainerdRoot(str(copy))
    plan = store.plan(store.pick("default", RICH), None)
    layer = copy / "io.containerd.content.v1.content/blobs/sha256" / plan.layers[0].digest[7:]
    layer.chmod(0o644)
    layer.unlink()
    layer.symlink_to("/etc/passwd")
    with pytest.raises(SourceError, match="not a regular file|missing"):
        open_source(
            f"containerd:{copy}/default:{RICH}",
            cache_dir=None,
            use_cache=False,
            all_filesystems=False,
        ).open_view(hashing_selector())


# -- Docker data root ---------------------------------------------------------------------


@pytest.fixture(scope="module", params=["files", "overlay", "overlay-hidden"])
def docker_root(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, world: sc.World
) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp(f"docker-{request.param}")
    if request.param != "files" and not overlay_whiteouts_supported(base):
        pytest.fail("overlay whiteouts (mknod 0/0, trusted.* xattrs) need root")
    root = base / "docker"
    write_docker_root(
        root,
        {"demo/world:12.4": world.image, "demo/rich:1": rich_image()},
        (
            DockerContainerSpec("a" * 64, "demo/world:12.4", running=True),
            DockerContainerSpec("b" * 64, "demo/rich:1", running=False),
        ),
        whiteouts=request.param,
    )
    world_archive = base / "world.tar"
    write_docker_archive(world_archive, world.image, "demo/world:12.4")
    rich_archive = base / "rich.tar"
    write_docker_archive(rich_archive, rich_image(), "demo/rich:1")
    return root, world_archive, rich_archive


def test_docker_root_scan_equals_the_docker_archive_scan(
    docker_root: tuple[Path, Path, Path],
) -> None:
    root, world_archive, rich_archive = docker_root
    for archive, name in ((world_archive, "demo/world:12.4"), (rich_archive, "demo/rich:1")):
        from_root = comparable(f"docker-root:{root}:{name}")
        assert from_root == comparable(f"docker-archive:{archive}"), name
    assert from_root["asset"]["name"] == "demo/rich:1"
    world = comparable(f"docker-root:{root}:demo/world:12.4")
    assert len(world["libraries"]) >= 10
    by_id = comparable(f"docker-root:{root}:{world['asset']['config_digest'][7:19]}")
    assert by_id == world


def test_docker_root_views_match_archive_views(docker_root: tuple[Path, Path, Path]) -> None:
    root, _world, rich_archive = docker_root

    def view(target: str) -> Any:
        v = open_source(target, cache_dir=None, use_cache=False, all_filesystems=False).open_view(
            hashing_selector()
        )
        nodes = {p: (n.kind, n.size, n.link, n.mode) for p, n in v.nodes.items()}
        cands = [(c.ref, c.size, c.aliases, c.facts) for c in v.candidates]
        return nodes, cands, v.metadata, replace(v.info, reference="")

    assert view(f"docker-root:{root}:demo/rich:1") == view(f"docker-archive:{rich_archive}")


def test_docker_root_records(docker_root: tuple[Path, Path, Path]) -> None:
    root = DockerRoot(str(docker_root[0]))
    assert sorted(n for i in root.images() for n in i.names) == ["demo/rich:1", "demo/world:12.4"]
    containers = {c.id[0]: c for c in root.containers()}
    images = {i.names[0]: i.id for i in root.images()}
    assert containers["a"].running and containers["a"].image == images["demo/world:12.4"]
    assert not containers["b"].running and containers["b"].image_name == "demo/rich:1"
    with pytest.raises(UsageError, match="holds 2 images"):
        open_source(
            f"docker-root:{docker_root[0]}", cache_dir=None, use_cache=False, all_filesystems=False
        ).open_view(hashing_selector())
    assert parse_docker_target(f"{docker_root[0]}:demo/rich:1") == (
        str(docker_root[0]),
        "demo/rich:1",
    )


def _layer_dirs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "overlay2").iterdir() if p.name != "l")


def test_docker_root_containment(tmp_path: Path) -> None:
    image = Image(
        [
            Layer(
                [
                    directory("usr/lib"),
                    file("usr/lib/libcudart.so.12", b"\x7fELF cudart"),
                    symlink("usr/lib/libcudnn.so.9", "../../../../../etc/passwd"),
                    file("etc/passwd", "root:x:0:0\n"),
                ]
            )
        ]
    )
    root = tmp_path / "docker"
    write_docker_root(root, {"x/y:1": image})
    diff = _layer_dirs(root)[0] / "diff"
    # a link planted in the layer directory is recorded, never followed out of the root
    (diff / "usr/lib/libnccl.so.2").symlink_to("/etc/shadow")
    view = open_source(
        f"docker-root:{root}", cache_dir=None, use_cache=False, all_filesystems=False
    ).open_view(hashing_selector())
    assert view.resolve("/usr/lib/libcudnn.so.9") == "/etc/passwd"
    assert view.resolve("/usr/lib/libnccl.so.2") is None
    assert view.metadata.get("/etc/passwd") in (None, b"root:x:0:0\n")
    # a cache-id that climbs out, a layer directory that is a link: refused
    layerdb = next((root / "image/overlay2/layerdb/sha256").iterdir())
    cache_id = (layerdb / "cache-id").read_text()
    (layerdb / "cache-id").write_text("../../../etc")
    with pytest.raises(SourceError, match="not a layer id"):
        open_source(
            f"docker-root:{root}", cache_dir=None, use_cache=False, all_filesystems=False
        ).open_view(hashing_selector())
    (layerdb / "cache-id").write_text(cache_id)
    moved = tmp_path / "elsewhere"
    shutil.move(str(diff), moved)
    diff.symlink_to(moved)
    with pytest.raises(SourceError, match="not a directory"):
        open_source(
            f"docker-root:{root}", cache_dir=None, use_cache=False, all_filesystems=False
        ).open_view(hashing_selector())


def test_docker_root_hostile_records(tmp_path: Path) -> None:
    root = tmp_path / "docker"
    write_docker_root(root, {"x/y:1": Image([Layer([file("a", "a")])])})
    config = next((root / "image/overlay2/imagedb/content/sha256").iterdir())
    config.write_bytes(config.read_bytes() + b" ")
    with pytest.raises(SourceError, match="does not match its digest"):
        open_source(
            f"docker-root:{root}", cache_dir=None, use_cache=False, all_filesystems=False
        ).open_view(hashing_selector())
    (root / "image/overlay2/repositories.json").write_text("{not json")
    with pytest.raises(SourceError, match="not valid JSON"):
        DockerRoot(str(root)).images()
    (root / "containers" / ("c" * 64)).mkdir(parents=True)
    (root / "containers" / ("c" * 64) / "config.v2.json").write_text(
        json.dumps({"Image": "../../etc", "State": "x"})
    )
    (root / "image/overlay2/repositories.json").write_text("{}")
    assert [(c.image, c.running) for c in DockerRoot(str(root)).containers()] == [(None, False)]


def test_docker_root_limits(tmp_path: Path) -> None:
    from scanner.errors import UnsafeArchiveError
    from scanner.source.limits import Limits

    root = tmp_path / "docker"
    write_docker_root(root, {"x/y:1": Image([Layer([file("big", b"x" * 4096)])])})
    source = open_source(
        f"docker-root:{root}",
        cache_dir=None,
        use_cache=False,
        all_filesystems=False,
        limits=Limits(max_file_bytes=1024),
    )
    with pytest.raises(UnsafeArchiveError, match="max_file_bytes"):
        source.open_view(hashing_selector())


def test_layers_discarded_after_unpacking_are_read_from_snapshots(
    containerd: Containerd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As with containerd's ``discard_unpacked_layers``: the layer blobs are gone (removed by
    containerd itself), the overlayfs snapshots it unpacked them into remain."""
    # every layer unique to this image (with the rich image's whiteouts, opaque directories,
    # hard links and symlinks), so each is read from the snapshot containerd wrote
    rich = rich_image()
    layers = [
        Layer([*layer.members, file(f"srv/discard-{i}", "only here")], layer.compression)
        for i, layer in enumerate(rich.layers)
    ]
    image = Image(layers, env=rich.env, labels=rich.labels)
    archive = tmp_path / "discard.tar"
    built = write_named_oci_archive(archive, image, "docker.io/demo/discard:1")
    containerd.import_archive(archive, namespace="discard")
    containerd.ctr("content", "rm", *built.layer_digests, namespace="discard")
    blobs = containerd.root / "io.containerd.content.v1.content/blobs/sha256"
    for _ in range(100):
        if not (blobs / built.layer_digests[-1][7:]).exists():
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert not (blobs / built.layer_digests[-1][7:]).exists()
    from_store = comparable(f"containerd:{containerd.root}/discard:docker.io/demo/discard:1")
    from_archive = comparable(f"oci-archive:{archive}")
    notes = [s for s in from_store.pop("skipped") if "discarded by containerd" in s["reason"]]
    from_archive.pop("skipped")
    assert from_store == from_archive
    assert sorted(n["path"] for n in notes) == sorted(built.layer_digests)
    assert not any("CAP_SYS_ADMIN" in n["reason"] for n in notes)
    # a reader the kernel hides trusted.* xattrs from is told what it may miss
    import scanner.source.containerd as ctd

    monkeypatch.setattr(ctd, "_may_read_trusted_xattrs", lambda: False)
    blind = comparable(f"containerd:{containerd.root}/discard:docker.io/demo/discard:1")
    assert all(
        "CAP_SYS_ADMIN" in s["reason"]
        for s in blind["skipped"]
        if "discarded by containerd" in s["reason"]
    )


def test_metadata_database_byte_flips_give_clear_errors(
    containerd: Containerd, tmp_path: Path
) -> None:
    """Random damage to a real meta.db: the reader answers or raises SourceError, never
    anything else and never loops (page loops and overlong spans are bounded)."""
    import random

    real = (containerd.root / META_DB).read_bytes()
    rng = random.Random(11)
    root = tmp_path / "root"
    (root / META_DB).parent.mkdir(parents=True)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(300):
        damaged = bytearray(real)
        for _ in range(rng.randint(1, 16)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        (root / META_DB).write_bytes(bytes(damaged))
        store = ContainerdRoot(str(root))
        try:
            store.images()
            store.containers()
            outcomes["read"] += 1
        except SourceError:
            outcomes["refused"] += 1
    assert outcomes["read"] and outcomes["refused"], outcomes


def test_node_discovery_goes_on_past_bad_records(tmp_path: Path) -> None:
    from scanner.nodestores import discover, in_root

    node = tmp_path / "node"
    (node / "var/lib").mkdir(parents=True)
    # the data root moved by an absolute link: resolved inside the node's root
    (node / "var/lib/docker").symlink_to("/srv/docker")
    docker = node / "srv/docker"
    built = write_docker_root(
        docker,
        {
            "a/ok:1": Image([Layer([file("ok", "1")])]),
            "a/broken:1": Image([Layer([file("b", "")])]),
        },
        (DockerContainerSpec("f" * 64, "a/ok:1"), DockerContainerSpec("0" * 64, "a/broken:1")),
    )
    assert in_root(str(node), "var/lib/docker") == str(docker)
    assert in_root(str(node), "var/lib/nothing") is None
    broken = built["a/broken:1"]
    layerdb = docker / "image/overlay2/layerdb/sha256" / broken.diff_ids[0][7:]
    shutil.rmtree(docker / "overlay2" / (layerdb / "cache-id").read_text() / "diff")
    (docker / "containers" / ("1" * 64)).mkdir()
    (docker / "containers" / ("1" * 64) / "config.v2.json").write_text("{not json")
    inventory = discover(str(node))
    assert [i.name for i in inventory.images] == ["a/ok:1"]
    assert inventory.images[0].target == f"docker-root:{docker}:{built['a/ok:1'].config_digest}"
    assert {c.id[0]: c.image_config for c in inventory.containers} == {
        "f": built["a/ok:1"].config_digest,
        "0": broken.config_digest,
    }
    assert len(inventory.errors) == 2
    assert any("is missing" in e for e in inventory.errors)
    assert any("not valid JSON" in e for e in inventory.errors)


def test_docker_root_hard_links_keep_the_archive_order(tmp_path: Path) -> None:
    """A tar writer stores the first path of an inode in its depth-first byte order as the
    file, the later ones as links to it; the directory walk must name the same first path,
    or a library reached first through a non-library name would lose its facts."""
    from tests.fixtures.images import hardlink
    from tests.scanner.source.samples import CUDNN

    image = Image(
        [
            Layer(
                [
                    directory("opt"),
                    directory("opt/a"),
                    file("opt/a/libcudnn.so.9", CUDNN),
                    hardlink("opt/zdata", "opt/a/libcudnn.so.9"),
                ]
            )
        ]
    )
    root = tmp_path / "docker"
    write_docker_root(root, {"x/y:1": image})
    write_docker_archive(tmp_path / "x.tar", image, "x/y:1")
    selector = hashing_selector()
    store = open_source(
        f"docker-root:{root}", cache_dir=None, use_cache=False, all_filesystems=False
    ).open_view(selector)
    archive = open_source(
        f"docker-archive:{tmp_path / 'x.tar'}",
        cache_dir=None,
        use_cache=False,
        all_filesystems=False,
    ).open_view(selector)
    facts = {c.ref.path: c.facts for c in store.candidates}
    assert facts == {c.ref.path: c.facts for c in archive.candidates}
    assert facts["/opt/a/libcudnn.so.9"] is not None
