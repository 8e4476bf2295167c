"""Images on a node: `gpuprov agent` reports each image of the node's containerd and Docker
stores once per digest, and its running containers as links host -> image, which the service
stores and shows on both assets."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from scanner import cli_agent
from scanner import vocabulary as v
from tests.app import boms
from tests.app.conftest import LiveServer, Service, auth, free_port
from tests.fixtures.images import Image, Layer, file
from tests.fixtures.nodestores import (
    Containerd,
    DockerContainerSpec,
    containerd_missing,
    running_containerd,
    write_docker_root,
    write_named_oci_archive,
)
from tests.scanner.source.samples import rich_image

SMALL = Image([Layer([file("usr/lib/x86_64-linux-gnu/libnccl.so.2", b"\x7fELF nccl")])])


@pytest.fixture(scope="module")
def node_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("node")


@pytest.fixture(scope="module")
def containerd(node_base: Path) -> Iterator[Containerd]:
    missing = containerd_missing()
    if missing is not None:
        pytest.fail(f"the node image tests need containerd (make test installs it): {missing}")
    archive = node_base / "rich.tar"
    write_named_oci_archive(archive, rich_image(), "docker.io/demo/rich:1")
    # the daemon's root and state lie inside the node's root, as on a node
    with running_containerd(node_base / "root" / "daemon") as daemon:
        daemon.import_archive(archive)
        daemon.import_archive(archive, namespace="k8s.io")  # one digest, two namespaces
        yield daemon


@pytest.fixture(scope="module")
def node(node_base: Path, containerd: Containerd) -> Path:
    root = node_base / "root"
    (root / "etc").mkdir()
    (root / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    (root / "var/lib").mkdir(parents=True)
    (root / "run").mkdir()
    os.symlink("../../daemon/root", root / "var/lib/containerd")
    os.symlink("../daemon/state", root / "run/containerd")
    # Docker's data root moved elsewhere by an absolute link: followed inside the node's root
    os.symlink("/data/docker", root / "var/lib/docker")
    write_docker_root(
        root / "data/docker",
        {"demo/small:1": SMALL, "demo/rich:1": rich_image()},
        (
            DockerContainerSpec("d" * 64, "demo/small:1", running=True),
            DockerContainerSpec("e" * 64, "demo/rich:1", running=False),
        ),
    )
    return root


def _agent(service: Service, node: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    token_file = tmp_path / "agent.token"
    token_file.write_text(service.token("report:write"))
    app = typer.Typer()
    cli_agent.register(app)
    port = free_port()
    args = ["agent", "--once", "--root", str(node), "--server", f"http://127.0.0.1:{port}"]
    args += ["--token-file", str(token_file), "--spool-dir", str(tmp_path / "spool")]
    args += ["--retries", "0", "--label", "env=prod", *extra]
    with LiveServer(service.settings, port):
        result = CliRunner().invoke(app, args, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    return result.exit_code, result.output


def test_agent_reports_each_image_once_and_links_containers(
    service: Service, node: Path, tmp_path: Path
) -> None:
    code, output = _agent(service, node, tmp_path)
    assert code == 0, output
    reader = auth(service.token("inventory:read"))
    assets = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    # containerd: one digest in two namespaces, one report; Docker: two images by image ID
    assert sorted(a["name"] for a in assets if a["kind"] == "image") == [
        "demo/rich:1",
        "demo/small:1",
        "docker.io/demo/rich:1",
    ]
    assert [a["kind"] for a in assets].count("host") == 1
    assert service.count("scan") == 4
    by_name = {a["name"]: a for a in assets if a["kind"] == "image"}
    assert all(a["labels"]["env"] == "prod" for a in assets)
    host = next(a for a in assets if a["kind"] == "host")
    detail = service.client.get(f"/api/v1/assets/{host['id']}", headers=reader).json()
    [link] = detail["containers"]
    small = by_name["demo/small:1"]
    assert link["engine"] == "docker" and link["container_id"] == "d" * 64
    assert link["image_asset_id"] == small["id"] and link["image_name"] == "demo/small:1"
    image = service.client.get(f"/api/v1/assets/{small['id']}", headers=reader).json()
    assert image["running_on"] == [
        {
            "host_asset_id": host["id"],
            "host_name": host["name"],
            "engine": "docker",
            "namespace": "",
            "container_id": "d" * 64,
        }
    ]
    rich = service.client.get(f"/api/v1/assets/{by_name['demo/rich:1']['id']}", headers=reader)
    assert rich.json()["running_on"] == []  # its container is stopped


def test_agent_without_images_reports_the_host_alone(
    service: Service, node: Path, tmp_path: Path
) -> None:
    code, output = _agent(service, node, tmp_path, "--no-images")
    assert code == 0, output
    reader = auth(service.token("inventory:read"))
    [host] = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    assert host["kind"] == "host" and service.count("node_container") == 0


def test_an_unreadable_image_is_told_and_the_others_delivered(
    service: Service, tmp_path: Path
) -> None:
    """A Docker image whose layer directory is gone: exit 1, the error names it, the host and
    the store's other images are delivered."""
    import shutil

    node = tmp_path / "node"
    (node / "etc").mkdir(parents=True)
    (node / "etc/machine-id").write_text("fedcba9876543210fedcba9876543210\n")
    built = write_docker_root(
        node / "var/lib/docker", {"demo/small:1": SMALL, "demo/rich:1": rich_image()}
    )
    docker = node / "var/lib/docker"
    chain = built["demo/rich:1"].diff_ids[0][7:]
    cache_id = (docker / "image/overlay2/layerdb/sha256" / chain / "cache-id").read_text()
    shutil.rmtree(docker / "overlay2" / cache_id / "diff")
    code, output = _agent(service, node, tmp_path)
    assert code == cli_agent.EXIT_REJECTED, output
    assert built["demo/rich:1"].config_digest in output and "is missing" in output
    reader = auth(service.token("inventory:read"))
    assets = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    assert sorted((a["kind"], a["name"]) for a in assets if a["kind"] == "image") == [
        ("image", "demo/small:1")
    ]
    assert [a["kind"] for a in assets].count("host") == 1


def _host_bom(*containers: str) -> bytes:
    bom = boms.gpuprov_bom(kind="host", name="gpu-node-1")
    props: list[dict[str, Any]] = bom["metadata"]["component"].setdefault("properties", [])
    props += [{"name": v.NODE_CONTAINER, "value": c} for c in containers]
    return boms.encode(bom)


DIGEST = "sha256:" + "a" * 64
CONFIG = "sha256:" + "b" * 64


def test_links_follow_the_latest_host_report_and_the_image_asset(
    service: Service, post_report: Callable[..., Any]
) -> None:
    first = _host_bom(f"containerd k8s.io abc123 {DIGEST} {CONFIG} docker.io/x/y:1")
    assert post_report(first).status_code in (200, 201)
    reader = auth(service.token("inventory:read"))
    [host] = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    [link] = service.client.get(f"/api/v1/assets/{host['id']}", headers=reader).json()["containers"]
    assert link["image_asset_id"] is None and link["namespace"] == "k8s.io"
    # the image's report arrives later: the link now names its asset
    image_bom = boms.gpuprov_bom(kind="image", name="docker.io/x/y:1", digest=DIGEST)
    assert post_report(boms.encode(image_bom)).status_code in (200, 201)
    image = next(
        a
        for a in service.client.get("/api/v1/assets", headers=reader).json()["items"]
        if a["kind"] == "image"
    )
    detail = service.client.get(f"/api/v1/assets/{host['id']}", headers=reader).json()
    assert detail["containers"][0]["image_asset_id"] == image["id"]
    ran = service.client.get(f"/api/v1/assets/{image['id']}", headers=reader).json()
    assert [r["container_id"] for r in ran["running_on"]] == ["abc123"]
    # a later host report without containers: no link is left
    assert post_report(_host_bom()).status_code in (200, 201)
    assert service.count("node_container") == 0


@pytest.mark.parametrize(
    "value",
    [
        "containerd k8s.io abc",
        f"podman k8s.io abc {DIGEST} - x",
        f"containerd k8s.io ../etc {DIGEST} - x",
        "containerd k8s.io abc sha256:short - x",
        f"docker - abc - {CONFIG} name\x07bell",
    ],
)
def test_malformed_container_links_are_refused(
    service: Service, post_report: Callable[..., Any], value: str
) -> None:
    response = post_report(_host_bom(value))
    assert 400 <= response.status_code < 500, response.text
    assert v.NODE_CONTAINER in json.dumps(response.json())
    assert service.count("node_container") == 0
