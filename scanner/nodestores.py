"""The image stores of a node: which images its containerd and Docker roots hold (one scan target
per image digest) and which containers run, each linked to its image. Used by `gpuprov agent`.

Roots are looked for under the node's root as the engines place them: containerd at
``var/lib/containerd`` (state ``run/containerd``) and, for k3s, ``var/lib/rancher/k3s/agent/
containerd`` (state ``run/k3s/containerd``); Docker at ``var/lib/docker``. A task runs while its
init process does, read from the node's ``proc`` when the root has one.
"""

from __future__ import annotations

import os
import stat

from msgspec import Struct, field

from scanner.errors import ScannerError
from scanner.model import ContainerLink, NodeKind, OciDigest
from scanner.source.containerd import ContainerdRoot, image_digest, is_containerd_root
from scanner.source.containment import resolve
from scanner.source.dockerroot import DockerRoot, is_docker_root

#: (containerd root, its state directory), relative to the node's root
CONTAINERD_ROOTS = (
    ("var/lib/containerd", "run/containerd"),
    ("var/lib/rancher/k3s/agent/containerd", "run/k3s/containerd"),
)
DOCKER_ROOTS = ("var/lib/docker",)
_INDEX_TYPES = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
}


class NodeImage(Struct, frozen=True):
    """One image to scan: its target and the digest its report is keyed by."""

    target: str
    name: str
    key: OciDigest  # manifest digest; the config digest for a Docker data root
    platform: str | None = None  # the index entry scanned, for a multi-platform image


class NodeInventory(Struct):
    """The images (one per key) and running containers of a node, and what could not be read."""

    images: list[NodeImage] = field(default_factory=list)
    containers: list[ContainerLink] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _is_digest_name(name: str) -> bool:
    return name.startswith("sha256:")


def _containerd(
    root: str,
    state: str,
    proc: str | None,
    platform: str | None,
    out: NodeInventory,
    seen: set[str],
) -> None:
    store = ContainerdRoot(root, state, proc)
    records = store.images()
    # per namespace and name: (manifest digest, config digest) of what the name points at
    resolved: dict[tuple[str, str], tuple[OciDigest, OciDigest]] = {}
    # the record each digest is scanned through: a real name rather than a digest alias
    chosen: dict[OciDigest, tuple[str, str, str | None]] = {}
    for record in records:
        # a platform picks an index's entry; a single manifest is scanned whatever its platform
        wanted = platform if record.target.media_type in _INDEX_TYPES else None
        try:
            plan = store.plan(record, wanted)
        except ScannerError as e:
            out.errors.append(f"containerd:{root}/{record.namespace}:{record.name}: {e}")
            continue
        key = image_digest(plan)
        resolved[(record.namespace, record.name)] = (key, plan.config_digest)
        best = chosen.get(key)
        if best is None or (_is_digest_name(best[1]) and not _is_digest_name(record.name)):
            chosen[key] = (record.namespace, record.name, wanted)
    for key, (namespace, name, wanted) in sorted(chosen.items()):
        if key in seen:
            continue
        seen.add(key)
        where = f"{root}/{namespace}" if namespace else root
        out.images.append(NodeImage(f"containerd:{where}:{name}", name, key, wanted))
    containers = store.containers()
    out.errors.extend(f"containerd:{root}: {p}" for p in store.problems)
    for container in containers:
        if not container.running:
            continue
        digest, config = resolved.get((container.namespace, container.image), (None, None))
        out.containers.append(
            ContainerLink(
                engine="containerd",
                namespace=container.namespace,
                id=container.id,
                image_name=container.image,
                image_digest=digest,
                image_config=config,
            )
        )


def _docker(root: str, out: NodeInventory, seen: set[str]) -> None:
    store = DockerRoot(root)
    names: dict[str, str] = {}
    for image in store.images():
        names[image.id] = image.names[0] if image.names else image.id
        if image.id in seen:
            continue
        try:
            store.plan(image)
        except ScannerError as e:
            out.errors.append(f"docker-root:{root}:{image.id}: {e}")
            continue
        seen.add(image.id)
        out.images.append(NodeImage(f"docker-root:{root}:{image.id}", names[image.id], image.id))
    containers = store.containers()
    out.errors.extend(f"docker-root:{root}: {p}" for p in store.problems)
    for container in containers:
        if not container.running:
            continue
        image_name = container.image_name or names.get(container.image or "", "")
        out.containers.append(
            ContainerLink(
                engine="docker",
                namespace="",
                id=container.id,
                image_name=image_name,
                image_digest=None,
                image_config=container.image,
            )
        )


_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def node_platform() -> str | None:
    """The platform of the machine the agent runs on (its node), for multi-platform images."""
    arch = _ARCH.get(os.uname().machine)
    return f"linux/{arch}" if arch else None


class _Entry(Struct, frozen=True):
    kind: NodeKind
    link: str | None


def in_root(node_root: str, path: str) -> str | None:
    """The host path of ``path`` inside ``node_root``, its symlinks resolved inside the root
    (``/var/lib/docker -> /data/docker`` is the node's /data/docker, not the agent's); None
    when it does not resolve."""
    base = node_root.rstrip("/")

    def lookup(p: str) -> _Entry | None:
        try:
            st = os.lstat(base + p)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            try:
                return _Entry(NodeKind.SYMLINK, os.readlink(base + p))
            except OSError:
                return None
        return _Entry(NodeKind.DIR if stat.S_ISDIR(st.st_mode) else NodeKind.FILE, None)

    found = resolve("/" + path, lookup).path
    return None if found is None else base + found


def discover(node_root: str, platform: str | None = None, proc: str | None = None) -> NodeInventory:
    """The images and running containers of the engine stores under ``node_root``; ``proc``
    is the node's proc directory (default ``node_root/proc``)."""
    out = NodeInventory()
    seen: set[str] = set()
    proc = proc or in_root(node_root, "proc")
    has_proc = proc is not None and os.path.isdir(os.path.join(proc, "self"))
    for relative, state in CONTAINERD_ROOTS:
        root = in_root(node_root, relative)
        if root is None or not is_containerd_root(root):
            continue
        try:
            _containerd(
                root,
                in_root(node_root, state) or os.path.join(node_root, state),
                proc if has_proc else None,
                platform,
                out,
                seen,
            )
        except ScannerError as e:
            out.errors.append(f"containerd:{root}: {e}")
    for relative in DOCKER_ROOTS:
        root = in_root(node_root, relative)
        if root is None or not is_docker_root(root):
            continue
        try:
            _docker(root, out, seen)
        except ScannerError as e:
            out.errors.append(f"docker-root:{root}: {e}")
    return out
