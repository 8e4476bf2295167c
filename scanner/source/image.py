"""Image sources: OCI image layout, OCI archive and docker-archive, read in place.

Nothing is unpacked and no engine is needed: archives are indexed once and every blob is read
through a bounded slice of the outer tar. Each format resolves to an `ImagePlan` (manifest,
config, layer list) that `image_view` squashes through the shared layer pipeline.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import posixpath
import re
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from msgspec import Struct

from scanner.errors import SourceError, UsageError
from scanner.imageref import split_digest
from scanner.model import AssetInfo, AssetKind, Candidate, FileRef, OciDigest, Skipped, Stage
from scanner.source.candidates import collect_candidates
from scanner.source.interface import RootView, Selector, SignatureLayer
from scanner.source.layerstream import LayerSpec, Readable
from scanner.source.limits import Limits
from scanner.source.oci import Descriptor
from scanner.source.platform import (
    ExpandIndex,
    check_config_platform,
    check_platform,
    choose_image,
    config_platform,
    leaves,
)
from scanner.source.squash import YieldCache, read_alias_targets, squash

_JSON_LIMIT = 16 * 1024 * 1024
_MAX_ARCHIVE_MEMBERS = 1_000_000
_INDEX_TYPES = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
}
_FOREIGN_HINTS = ("foreign", "nondistributable")


class _Slice(io.RawIOBase):
    """A bounded region of an open file, read sequentially (an archive member, a blob)."""

    def __init__(self, f: io.BufferedReader, offset: int, size: int) -> None:
        super().__init__()
        self._f = f
        self._remaining = size
        f.seek(offset)

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        n = self._remaining if size is None or size < 0 else min(size, self._remaining)
        data = self._f.read(n) if n > 0 else b""
        self._remaining -= len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(memoryview(buffer)))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._f.close()
        super().close()


class _Store(Protocol):
    """Named files of an image container: an OCI layout directory or an archive's members."""

    label: str

    def has(self, name: str) -> bool: ...

    def size(self, name: str) -> int | None: ...

    def open(self, name: str) -> Readable: ...

    def read(self, name: str, limit: int) -> bytes: ...

    def origin(self, name: str) -> tuple[str, int] | None: ...


class DirStore:
    """An OCI layout directory; names are fixed or built from validated digests."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.label = root

    def _path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def has(self, name: str) -> bool:
        return os.path.exists(self._path(name))  # `open` refuses what is not a regular file

    def size(self, name: str) -> int | None:
        try:
            return os.stat(self._path(name)).st_size
        except OSError:
            return None

    def open(self, name: str) -> Readable:
        # O_NONBLOCK: opening a FIFO planted as a blob must not hang; a device or FIFO would
        # never end, so anything but a regular file is refused.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self._path(name), flags)
        except OSError as e:
            raise SourceError(f"{self.label}: cannot open {name} ({e.strerror or e})") from e
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise SourceError(f"{self.label}: {name} is not a regular file")
        return _Slice(os.fdopen(fd, "rb"), 0, st.st_size)

    def read(self, name: str, limit: int) -> bytes:
        return _read_all(self, name, limit)

    def origin(self, name: str) -> tuple[str, int] | None:
        path = self._path(name)
        return (path, 0) if os.path.isfile(path) and not os.path.islink(path) else None


class _TarStore:
    """An archive indexed once by member name; members are read in place, never extracted."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.label = path
        self._members: dict[str, tuple[int, int]] = {}
        self._links: dict[str, str] = {}
        try:
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError as e:
            raise SourceError(f"{path}: cannot read ({e.strerror or e})") from e
        if head[:2] == b"\x1f\x8b" or head == b"\x28\xb5\x2f\xfd":
            raise SourceError(
                f"{path}: the archive itself is compressed; decompress it first (images are "
                "read in place, which needs an uncompressed tar)"
            )
        try:
            with tarfile.open(path, "r:") as archive:
                for count, member in enumerate(archive):
                    if count > _MAX_ARCHIVE_MEMBERS:
                        raise SourceError(f"{path}: more than {_MAX_ARCHIVE_MEMBERS} members")
                    name = _member_name(member.name)
                    if member.isreg():
                        self._members[name] = (member.offset_data, member.size)
                    elif member.issym():
                        target = posixpath.join(posixpath.dirname(name), member.linkname)
                        self._links[name] = _member_name(posixpath.normpath(target))
                    elif member.islnk():
                        self._links[name] = _member_name(member.linkname)
        except (tarfile.TarError, EOFError) as e:
            raise SourceError(f"{path}: not a readable tar archive ({e})") from e
        except OSError as e:
            raise SourceError(f"{path}: cannot read ({e.strerror or e})") from e

    def names(self) -> set[str]:
        return set(self._members) | set(self._links)

    def _find(self, name: str) -> tuple[int, int] | None:
        for _ in range(8):
            if name in self._members:
                return self._members[name]
            if name not in self._links:
                return None
            name = self._links[name]
        return None

    def has(self, name: str) -> bool:
        return self._find(name) is not None

    def size(self, name: str) -> int | None:
        found = self._find(name)
        return None if found is None else found[1]

    def open(self, name: str) -> Readable:
        found = self._find(name)
        if found is None:
            raise SourceError(f"{self.label}: no member {name}")
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise SourceError(f"{self.label}: cannot read ({e.strerror or e})") from e
        return _Slice(f, *found)

    def read(self, name: str, limit: int) -> bytes:
        return _read_all(self, name, limit)

    def origin(self, name: str) -> tuple[str, int] | None:
        found = self._find(name)
        return None if found is None else (self.path, found[0])


def _member_name(name: str) -> str:
    return posixpath.normpath("/" + name).lstrip("/")


def _read_all(store: _Store, name: str, limit: int) -> bytes:
    size = store.size(name)
    if size is None:
        raise SourceError(f"{store.label}: {name} is missing")
    if size > limit:
        raise SourceError(f"{store.label}: {name} is larger than {limit} bytes")
    stream = store.open(name)
    try:
        return stream.read(limit + 1)
    finally:
        stream.close()


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise SourceError(f"{what} is not valid JSON ({e})") from e


def _blob_name(digest: str) -> str:
    algorithm, hexdigest = split_digest(digest)
    return f"blobs/{algorithm}/{hexdigest}"


def _read_desc(store: _Store, desc: Descriptor, what: str) -> bytes:
    """A small blob (manifest, config), checked against its descriptor's size and digest."""
    name = _blob_name(desc.digest)
    if not store.has(name):
        raise SourceError(f"{store.label}: {what} blob {desc.digest} is missing")
    if desc.size > _JSON_LIMIT:
        raise SourceError(f"{store.label}: {what} blob {desc.digest} is too large")
    data = store.read(name, _JSON_LIMIT)
    algorithm, expected = split_digest(desc.digest)
    if len(data) != desc.size or hashlib.new(algorithm, data).hexdigest() != expected:
        raise SourceError(f"{store.label}: {what} blob {desc.digest} does not match its digest")
    return data


class ImagePlan(Struct, frozen=True):
    """One image resolved from its container format: what to squash and what to report."""

    name: str
    manifest_digest: OciDigest | None
    config_digest: OciDigest
    config: dict[str, Any]
    layers: tuple[LayerSpec, ...]
    layer_digests: tuple[OciDigest, ...]  # every layer, including ones not read (foreign)
    skipped: tuple[Skipped, ...] = ()
    #: the index the tag names, for a multi-platform image (what `cosign sign IMAGE:TAG` signs)
    index_digest: OciDigest | None = None


def _index_entries(store: _Store, label: str) -> ExpandIndex:
    """How a container expands an index entry: read it when it may be an index."""

    def expand(desc: Descriptor) -> list[Descriptor] | None:
        if desc.media_type in _INDEX_TYPES or not desc.media_type:
            doc = _json(_read_desc(store, desc, "manifest"), f"{label}: {desc.digest}")
            if isinstance(doc, dict) and isinstance(doc.get("manifests"), list):
                return [Descriptor.parse(m, label) for m in doc["manifests"]]
        return None

    return expand


def _ref_name(desc: Descriptor) -> str | None:
    return desc.annotations.get("org.opencontainers.image.ref.name")


def _matches_tag(desc: Descriptor, tag: str) -> bool:
    full = desc.annotations.get("io.containerd.image.name", "")
    return _ref_name(desc) == tag or full == tag or full.endswith(":" + tag)


def _image_name(desc: Descriptor, stem: str, tag: str | None) -> str:
    full = desc.annotations.get("io.containerd.image.name")
    if full:
        return full
    ref = _ref_name(desc) or tag
    if ref:
        return ref if ("/" in ref or ":" in ref) else f"{stem}:{ref}"
    return stem


def load_oci(
    store: _Store, *, tag: str | None, platform: str | None, stem: str, label: str
) -> ImagePlan:
    """Resolve an image in an OCI layout (directory or archive) by tag and platform."""
    if not store.has("oci-layout"):
        raise SourceError(f"{label}: not an OCI image layout (no oci-layout file)")
    layout = _json(store.read("oci-layout", _JSON_LIMIT), f"{label}: oci-layout")
    if not isinstance(layout, dict) or "imageLayoutVersion" not in layout:
        raise SourceError(f"{label}: oci-layout has no imageLayoutVersion")
    if not store.has("index.json"):
        raise SourceError(f"{label}: no index.json")
    index = _json(store.read("index.json", _JSON_LIMIT), f"{label}: index.json")
    if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
        raise SourceError(f"{label}: index.json has no manifests list")
    descs = [Descriptor.parse(m, f"{label}: index.json") for m in index["manifests"]]
    if tag is not None:
        picked = [d for d in descs if _matches_tag(d, tag)]
        if not picked:
            tags = sorted({_ref_name(d) or "" for d in descs} - {""})
            raise UsageError(f"{label}: no image tagged {tag!r} (tags: {', '.join(tags) or '-'})")
        descs = picked
    else:
        names = {_ref_name(d) for d in descs}
        if len(names) > 1:
            raise UsageError(
                f"{label}: holds several images (tags: {', '.join(sorted(map(str, names)))}); "
                "name one with :TAG"
            )
    return resolve_image(
        store, descs, platform=platform, label=label, name=_image_name(descs[0], stem, tag)
    )


#: Stands in for a layer blob the store lacks: (descriptor, index in the manifest, image
#: config) -> the layer read another way (an unpacked snapshot), or None.
MissingLayer = Callable[[Descriptor, int, dict[str, Any]], LayerSpec | None]


def resolve_image(
    store: _Store,
    descs: list[Descriptor],
    *,
    platform: str | None,
    label: str,
    name: str,
    missing_layer: MissingLayer | None = None,
) -> ImagePlan:
    """The image ``descs`` (one tag's descriptors, an index or manifests) name for
    ``platform``, with its blobs in ``store`` (an OCI layout or a containerd content store)."""
    top = descs[0]
    desc = choose_image(leaves(descs, _index_entries(store, label), label), platform, label)
    manifest = _json(_read_desc(store, desc, "manifest"), f"{label}: manifest {desc.digest}")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("layers"), list):
        raise SourceError(f"{label}: manifest {desc.digest} is not an image manifest")
    config_desc = Descriptor.parse(manifest.get("config"), f"{label}: manifest config")
    config = _json(_read_desc(store, config_desc, "config"), f"{label}: image config")
    if not isinstance(config, dict):
        raise SourceError(f"{label}: image config is not an object")
    check_config_platform(config, platform, label)
    layers: list[LayerSpec] = []
    skipped: list[Skipped] = []
    digests: list[OciDigest] = []
    for index, obj in enumerate(manifest["layers"]):
        layer = Descriptor.parse(obj, f"{label}: layer")
        digests.append(layer.digest)
        blob = _blob_name(layer.digest)
        if not store.has(blob):
            instead = missing_layer(layer, index, config) if missing_layer else None
            if instead is not None:
                layers.append(instead)
                continue
            if any(h in layer.media_type for h in _FOREIGN_HINTS):
                skipped.append(
                    Skipped(
                        str(layer.digest), "foreign layer not included in the image", Stage.SOURCE
                    )
                )
                continue
            raise SourceError(f"{label}: layer blob {layer.digest} is missing")
        layers.append(
            LayerSpec(
                layer.digest,
                layer.size,
                functools.partial(store.open, blob),
                "blob",
                store.origin(blob),
            )
        )
    return ImagePlan(
        name=name,
        manifest_digest=desc.digest,
        config_digest=config_desc.digest,
        config=config,
        layers=tuple(layers),
        layer_digests=tuple(digests),
        skipped=tuple(skipped),
        index_digest=top.digest if top.digest != desc.digest else None,
    )


_BLOB_PATH = re.compile(r"blobs/(sha256|sha512)/([0-9a-f]+)")
_CONFIG_NAME = re.compile(r"(?:^|/)([0-9a-f]{64})(?:\.json)?\Z")


def load_docker(store: _TarStore, *, ref: str | None, label: str) -> ImagePlan:
    """Resolve an image in a docker-archive, legacy or Docker >= 25 (OCI layout inside)."""
    if not store.has("manifest.json"):
        raise SourceError(f"{label}: not a docker-archive (no manifest.json)")
    manifest = _json(store.read("manifest.json", _JSON_LIMIT), f"{label}: manifest.json")
    if (
        not isinstance(manifest, list)
        or not manifest
        or not all(isinstance(m, dict) for m in manifest)
    ):
        raise SourceError(f"{label}: manifest.json lists no image")
    entries: list[dict[str, Any]] = manifest
    if ref is not None:
        picked = [
            m
            for m in entries
            if ref in (m.get("RepoTags") or []) or f"{ref}:latest" in (m.get("RepoTags") or [])
        ]
        if not picked:
            raise UsageError(f"{label}: no image tagged {ref!r}")
        entry = picked[0]
    elif len(entries) > 1:
        tags = sorted(t for m in entries for t in (m.get("RepoTags") or []))
        raise UsageError(
            f"{label}: holds several images ({', '.join(tags) or 'untagged'}); name one with :REF"
        )
    else:
        entry = entries[0]
    config_name, layer_names = entry.get("Config"), entry.get("Layers")
    if not isinstance(config_name, str) or not isinstance(layer_names, list):
        raise SourceError(f"{label}: manifest.json entry without Config and Layers")
    config_name = _member_name(config_name)
    config_bytes = store.read(config_name, _JSON_LIMIT)
    config_hex = hashlib.sha256(config_bytes).hexdigest()
    named = _CONFIG_NAME.search(config_name)
    if named and named.group(1) != config_hex:
        raise SourceError(f"{label}: image config {config_name} does not match its digest")
    config = _json(config_bytes, f"{label}: image config")
    rootfs = config.get("rootfs") if isinstance(config, dict) else None
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(diff_ids, list) or len(diff_ids) != len(layer_names):
        raise SourceError(f"{label}: image config diff_ids do not match the layer list")
    assert isinstance(config, dict)
    layers: list[LayerSpec] = []
    for layer_name, diff_id in zip(layer_names, diff_ids, strict=True):
        name = _member_name(str(layer_name))
        if not store.has(name):
            raise SourceError(f"{label}: layer {layer_name} is missing")
        blob = _BLOB_PATH.fullmatch(name)
        if blob:  # Docker >= 25: content-addressed blobs, possibly compressed
            digest = f"{blob.group(1)}:{blob.group(2)}"
            split_digest(digest)
            layers.append(
                LayerSpec(
                    OciDigest(digest),
                    store.size(name),
                    functools.partial(store.open, name),
                    origin=store.origin(name),
                )
            )
        else:  # legacy: the layer tar's own digest is its diff_id
            split_digest(str(diff_id))
            layers.append(
                LayerSpec(
                    OciDigest(str(diff_id)),
                    store.size(name),
                    functools.partial(store.open, name),
                    "diff",
                    store.origin(name),
                )
            )
    config_digest = OciDigest(f"sha256:{config_hex}")
    tags = entry.get("RepoTags") or []
    name = ref if ref is not None else (str(tags[0]) if tags else str(config_digest))
    return ImagePlan(
        name=name,
        manifest_digest=_docker_manifest_digest(store, config_digest, label),
        config_digest=config_digest,
        config=config,
        layers=tuple(layers),
        layer_digests=tuple(spec.digest for spec in layers),
    )


def _docker_manifest_digest(store: _Store, config: OciDigest, label: str) -> OciDigest | None:
    """The manifest digest of a Docker >= 25 archive (its index.json); None for legacy ones."""
    if not store.has("index.json"):
        return None
    try:
        index = _json(store.read("index.json", _JSON_LIMIT), f"{label}: index.json")
        descs = [Descriptor.parse(m, label) for m in (index.get("manifests") or [])]
        for desc in leaves(descs, _index_entries(store, label), label):
            manifest = _json(_read_desc(store, desc, "manifest"), label)
            if (
                isinstance(manifest, dict)
                and (manifest.get("config") or {}).get("digest") == config
            ):
                return desc.digest
    except (SourceError, AttributeError):
        return None
    return None


def _pairs(items: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(items, list):
        return ()
    out = []
    for item in items:
        if isinstance(item, str):
            key, _, value = item.partition("=")
            out.append((key, value))
    return tuple(out)


def image_view(
    plan: ImagePlan,
    selector: Selector,
    *,
    reference: str,
    cache: YieldCache | None,
    limits: Limits | None,
) -> RootView:
    """Squash a resolved image into a `RootView` (the step every image format shares)."""
    squashed = squash(plan.layers, selector, cache=cache, limits=limits)
    tree = squashed.tree
    config = plan.config
    inner = config.get("config") if isinstance(config.get("config"), dict) else {}
    assert isinstance(inner, dict)
    labels = inner.get("Labels") if isinstance(inner.get("Labels"), dict) else {}
    assert isinstance(labels, dict)
    platform = config_platform(config)
    info = AssetInfo(
        kind=AssetKind.IMAGE,
        name=plan.name,
        reference=reference,
        digest=plan.manifest_digest,
        config_digest=plan.config_digest,
        platform=platform or None,
        env=_pairs(inner.get("Env")),
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        layers=plan.layer_digests,
    )
    found = collect_candidates(tree.nodes, selector.is_candidate, tree.candidates)
    aliased = [path for path, _ in found if path not in tree.candidates]
    if aliased:
        squashed.stats["layers_reread"] = float(
            read_alias_targets(plan.layers, tree, aliased, selector, cache=cache, limits=limits)
        )
    candidates = []
    for path, aliases in found:
        node = tree.nodes[path]
        candidates.append(
            Candidate(
                ref=FileRef(path, node.layer),
                size=node.size,
                aliases=aliases,
                facts=tree.facts.get(path),
            )
        )
    return RootView(
        info=info,
        nodes=tree.nodes,
        metadata=tree.metadata,
        candidates=candidates,
        skipped=[*plan.skipped, *squashed.skipped],
        stats=squashed.stats,
    )


def _stem(path: str) -> str:
    base = os.path.basename(os.path.abspath(path))
    for suffix in (".tar", ".oci", ".docker"):
        base = base.removesuffix(suffix)
    return base or "image"


class ImageSourceBase:
    """Common constructor arguments of the image sources."""

    def __init__(
        self,
        path: str | Path,
        *,
        platform: str | None = None,
        cache: YieldCache | None = None,
        limits: Limits | None = None,
        reference: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        check_platform(platform)
        self.platform = platform
        self.cache = cache
        self.limits = limits
        self.reference = reference if reference is not None else self.path

    def plan(self) -> ImagePlan:
        raise NotImplementedError

    #: Digests signatures may name, set by `open_view`: the index (multi-platform) and manifest.
    digests: tuple[str, ...] = ()

    def signature_material(self) -> list[SignatureLayer]:
        """None: signatures are read from a registry or from files given to the scan."""
        return []

    def open_view(self, selector: Selector) -> RootView:
        """Resolve the image and squash its layers (each blob read at most once)."""
        plan = self.plan()
        self.digests = tuple(d for d in (plan.index_digest, plan.manifest_digest) if d)
        return image_view(
            plan, selector, reference=self.reference, cache=self.cache, limits=self.limits
        )


class _OciSource(ImageSourceBase):
    """An OCI image layout, in a directory or an archive: `plan` reads its index."""

    tag: str | None
    _store: _Store

    def plan(self) -> ImagePlan:
        return load_oci(
            self._store,
            tag=self.tag,
            platform=self.platform,
            stem=_stem(self.path),
            label=self.path,
        )


class OciLayoutSource(_OciSource):
    """``oci:DIR[:TAG]``: an OCI image layout directory."""

    def __init__(self, path: str | Path, tag: str | None = None, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        if not os.path.isdir(self.path):
            raise SourceError(f"{self.path}: no such directory")
        self.tag = tag
        self._store = DirStore(self.path)
        if not self._store.has("oci-layout"):
            raise SourceError(f"{self.path}: not an OCI image layout (no oci-layout file)")


class OciArchiveSource(_OciSource):
    """``oci-archive:FILE[:TAG]``: an OCI image layout inside a tar file."""

    def __init__(self, path: str | Path, tag: str | None = None, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.tag = tag
        self._store = _TarStore(self.path)
        if not self._store.has("oci-layout") and not self._store.has("index.json"):
            raise SourceError(f"{self.path}: not an OCI archive (no oci-layout or index.json)")


class DockerArchiveSource(ImageSourceBase):
    """``docker-archive:FILE[:REF]``: ``docker save`` output, legacy or Docker >= 25."""

    def __init__(self, path: str | Path, ref: str | None = None, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.ref = ref
        self._store = _TarStore(self.path)
        if not self._store.has("manifest.json"):
            raise SourceError(f"{self.path}: not a docker-archive (no manifest.json)")

    def plan(self) -> ImagePlan:
        plan = load_docker(self._store, ref=self.ref, label=self.path)
        check_config_platform(plan.config, self.platform, self.path)
        return plan


def sniff_archive(path: str) -> str:
    """``"oci-archive"`` or ``"docker-archive"`` for a tar file, by its members."""
    names = _TarStore(path).names()
    # Docker >= 25 archives hold both; read them as docker-archives so the name comes from
    # RepoTags either way.
    if "manifest.json" in names:
        return "docker-archive"
    if "oci-layout" in names or "index.json" in names:
        return "oci-archive"
    raise SourceError(f"{path}: a tar file, but neither an OCI archive nor a docker-archive")
