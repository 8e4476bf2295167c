"""Sources: turn a scan target (host directory, OCI layout, OCI archive, docker-archive) into a
read-only `RootView`. `open_source` parses the target as the user wrote it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from scanner.errors import SourceError, UsageError
from scanner.fsutil import cache_root
from scanner.imageref import is_registry_target
from scanner.source.candidates import symlink_loops
from scanner.source.directory import DirectorySource
from scanner.source.interface import Node, RootView, Selector, SignatureLayer, Source
from scanner.source.limits import Limits

if TYPE_CHECKING:
    from scanner.source.image import (
        DockerArchiveSource,
        ImagePlan,
        OciArchiveSource,
        OciLayoutSource,
        image_view,
    )
    from scanner.source.layercache import LayerCache, default_cache_dir
    from scanner.source.layerstream import LayerSpec
    from scanner.source.registry import RegistryOptions

# Loaded on first use (PEP 562): a host scan never pays for the image readers and their
# layer cache.
_LAZY = {
    "DockerArchiveSource": "image",
    "ImagePlan": "image",
    "OciArchiveSource": "image",
    "OciLayoutSource": "image",
    "image_view": "image",
    "LayerCache": "layercache",
    "LayerSpec": "layerstream",
    "default_cache_dir": "layercache",
}


def __getattr__(name: str) -> object:
    """Load the submodule that defines ``name`` and cache the name here."""
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "TARGET_FORMS",
    "DirectorySource",
    "DockerArchiveSource",
    "ImagePlan",
    "LayerCache",
    "LayerSpec",
    "Limits",
    "Node",
    "OciArchiveSource",
    "OciLayoutSource",
    "RootView",
    "Selector",
    "SignatureLayer",
    "Source",
    "default_cache_dir",
    "image_view",
    "open_source",
    "parse_target",
    "symlink_loops",
]

_IMAGE_TRANSPORTS = ("oci", "oci-archive", "docker-archive")
#: Every form a scan target takes: the usage errors and the `scan` command's help say this.
TARGET_FORMS = (
    "a directory, a tar file, oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE, "
    "registry:HOST/REPO[:TAG|@DIGEST], containerd:ROOT[/NAMESPACE][:IMAGE], "
    "docker-root:ROOT[:IMAGE]"
)
#: Stores of a node's engines: the path and the image name are split by their own module.
_STORE_TRANSPORTS = ("containerd", "docker-root")


def parse_target(target: str) -> tuple[str, str, str | None]:
    """Split a target into (transport, path, tag): transport is one of "dir", "file", "oci",
    "oci-archive", "docker-archive", "registry" (path = the whole target), "containerd" or
    "docker-root" (path = the rest, split by the store's own parser). Nothing is opened;
    raises UsageError for unknown forms."""
    if not target:
        raise UsageError(f"empty scan target; use {TARGET_FORMS}")
    if is_registry_target(target):
        return "registry", target, None
    transport, sep, rest = target.partition(":")
    if sep and transport in _STORE_TRANSPORTS and not os.path.exists(target):
        if not rest:
            raise UsageError(f"{target!r}: missing path after {transport}:")
        return transport, rest, None
    if sep and transport in _IMAGE_TRANSPORTS and not os.path.exists(target):
        if not rest:
            raise UsageError(f"{target!r}: missing path after {transport}:")
        if os.path.exists(rest):
            return transport, rest, None
        # The path may hold colons and so may the tag (docker-archive:F:repo:tag): take the
        # longest prefix that exists.
        for i in range(len(rest) - 1, 0, -1):
            if rest[i] == ":" and os.path.exists(rest[:i]):
                return transport, rest[:i], rest[i + 1 :] or None
        path, colon, tag = rest.rpartition(":")
        if colon and path and tag:
            return transport, path, tag
        return transport, rest, None
    if os.path.isdir(target):
        # An OCI image layout is a directory too; scanned as a host root it would report the
        # blobs' names and none of the image's files, so it is read as the image it is (as a
        # tar file is sniffed below).
        if _is_oci_layout(target):
            return "oci", target, None
        return "dir", target, None
    if os.path.exists(target):
        return "file", target, None
    if sep and "/" not in transport and len(transport) > 1:
        raise UsageError(f"unsupported target type {transport!r}:; use {TARGET_FORMS}")
    raise SourceError(f"{target}: no such file or directory")


def _is_oci_layout(path: str) -> bool:
    """Whether ``path`` is an OCI image layout: it holds the `oci-layout` marker file and
    `index.json` (image-spec, image-layout.md)."""
    return os.path.isfile(os.path.join(path, "oci-layout")) and os.path.isfile(
        os.path.join(path, "index.json")
    )


def open_source(
    target: str,
    *,
    cache_dir: Path | None,
    use_cache: bool,
    all_filesystems: bool,
    include: Sequence[str] = (),
    limits: Limits | None = None,
    platform: str | None = None,
    registry: RegistryOptions | None = None,
) -> Source:
    """The source for ``target`` (see `parse_target`); errors are UsageError / SourceError.

    ``include`` and ``all_filesystems`` apply to host directories only; ``platform``
    (OS/ARCH[/VARIANT]) picks an image of a multi-platform index (default linux/amd64);
    ``registry`` holds the connection options of ``registry:`` targets.
    """
    transport, path, tag = parse_target(target)
    if transport == "dir":
        if platform is not None:
            raise UsageError("--platform applies to images, not to a host directory")
        # Host scans reuse the listings of unchanged directories (see directory._Listings).
        # (beside the layer cache: the parent of --cache-dir, else the scanner's cache root)
        parent = cache_dir.parent if cache_dir is not None else cache_root()
        listing = parent / "host-dirs" if use_cache else None
        return DirectorySource(
            path,
            include=include,
            all_filesystems=all_filesystems,
            reference=target,
            listing_cache=listing,
        )
    if include or all_filesystems:
        raise UsageError(f"{target}: --include and --all-filesystems apply to host directories")
    # Imported here: host scans never load the image readers.
    from scanner.source.image import (
        DockerArchiveSource,
        OciArchiveSource,
        OciLayoutSource,
        sniff_archive,
    )
    from scanner.source.layercache import LayerCache, default_cache_dir

    cache = LayerCache(cache_dir or default_cache_dir()) if use_cache else None
    if transport == "registry":
        # Imported here: the HTTP client is only paid for by registry scans.
        from scanner.source.registry import RegistrySource

        return RegistrySource(
            target, platform=platform, cache=cache, limits=limits, options=registry
        )
    if transport == "containerd":
        from scanner.source.containerd import ContainerdSource, parse_containerd_target

        root, namespace, image = parse_containerd_target(path)
        return ContainerdSource(
            root, namespace, image, platform=platform, cache=cache, limits=limits, reference=target
        )
    if transport == "docker-root":
        from scanner.source.dockerroot import DockerRootSource, parse_docker_target

        root, image = parse_docker_target(path)
        return DockerRootSource(
            root, image, platform=platform, cache=cache, limits=limits, reference=target
        )
    if transport == "file":
        if not os.path.isfile(path):
            raise SourceError(f"{path}: neither a directory nor a regular file")
        transport = sniff_archive(path)
    if transport != "oci" and not os.path.isfile(path):
        raise SourceError(f"{path}: no such archive file")
    kinds = {"oci": OciLayoutSource, "oci-archive": OciArchiveSource}
    kind = kinds.get(transport, DockerArchiveSource)
    return kind(path, tag, platform=platform, cache=cache, limits=limits, reference=target)
