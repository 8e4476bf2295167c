"""``containerd:ROOT[/NAMESPACE][:IMAGE]``: images in a containerd root, read without containerd.

Blobs lie in ``ROOT/io.containerd.content.v1.content/blobs/<alg>/<hex>``, the layout of an OCI
image layout's ``blobs/``, so they go through the OCI reader, layer pipeline, cache and limits
unchanged. Image names and their target descriptors come from the metadata database
(``ROOT/io.containerd.metadata.v1.bolt/meta.db``, bbolt: ``v1/<namespace>/images/<name>/target/
{digest,mediatype,size}``); containers from ``v1/<namespace>/containers/<id>/image``, running
when the state directory holds their task bundle
(``STATE/io.containerd.runtime.v2.task/<namespace>/<id>``). Without a metadata database, every
index or manifest blob no other index names is an image, known by its digest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from typing import Any

from msgspec import Struct

from scanner.errors import SourceError, UsageError
from scanner.imageref import split_digest
from scanner.model import OciDigest, Skipped, Stage
from scanner.source.bbolt import BoltDB, Bucket, path_get
from scanner.source.dirlayer import read_dir_layer
from scanner.source.image import DirStore, ImagePlan, ImageSourceBase, resolve_image
from scanner.source.interface import Selector
from scanner.source.layerstream import Budget, LayerSpec, Readable
from scanner.source.limits import Limits
from scanner.source.oci import Descriptor
from scanner.source.tarlayer import LayerYield

CONTENT_DIR = "io.containerd.content.v1.content"
SNAPSHOTTER = "io.containerd.snapshotter.v1.overlayfs"
_COMMITTED = b"\x03"  # the snapshotter's kind of a committed (read-only layer) snapshot
META_DB = os.path.join("io.containerd.metadata.v1.bolt", "meta.db")
TASKS_DIR = "io.containerd.runtime.v2.task"
_INDEX_OR_MANIFEST = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
}
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,254}\Z")
_MAX_NAME = 4096
_MAX_SNIFF = 4 * 1024 * 1024  # content blobs larger than this are layers, not manifests


class StoredImage(Struct, frozen=True):
    """An image record of a containerd namespace: its name and target (index or manifest)."""

    namespace: str
    name: str
    target: Descriptor


class StoredContainer(Struct, frozen=True):
    """A container record: the image it was created from, and whether its task runs."""

    namespace: str
    id: str
    image: str
    running: bool


def is_containerd_root(path: str) -> bool:
    """Whether ``path`` looks like a containerd root (content store or metadata database)."""
    return os.path.isdir(os.path.join(path, CONTENT_DIR)) or os.path.isfile(
        os.path.join(path, META_DB)
    )


def parse_containerd_target(rest: str) -> tuple[str, str | None, str | None]:
    """Split ``ROOT[/NAMESPACE][:IMAGE]`` into (root, namespace, image); the image name may hold
    colons (``docker.io/library/x:1``, ``sha256:...``), so the longest prefix that names a
    containerd root (or a namespace under one) is the root."""
    if not rest:
        raise UsageError("containerd: needs a root directory (containerd:/var/lib/containerd)")
    cuts = [i for i, ch in enumerate(rest) if ch == ":"] + [len(rest)]
    bad_namespace = None
    for cut in reversed(cuts):
        head, image = rest[:cut], rest[cut + 1 :] or None
        if not head:
            continue
        if is_containerd_root(head):
            return head, None, image
        parent, namespace = os.path.split(head.rstrip("/"))
        if parent and namespace and is_containerd_root(parent):
            if _SAFE_NAME.match(namespace):
                return parent, namespace, image
            # "ROOT/NS:registry:5000/x:1": a shorter prefix may still be ROOT/NS
            bad_namespace = bad_namespace or namespace
    if bad_namespace is not None:
        raise UsageError(f"containerd:{rest}: {bad_namespace!r} is not a namespace name")
    raise SourceError(
        f"containerd:{rest}: no containerd root there (neither {CONTENT_DIR}/ nor {META_DB})"
    )


def _uvarint(data: bytes) -> int:
    """Go's binary.Uvarint, as the snapshotter stores snapshot ids."""
    value = shift = 0
    for b in data[:10]:
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value
    raise ValueError("bad uvarint")


def _no_blob() -> Readable:
    raise SourceError("an unpacked snapshot has no blob to open")


def _read_snapshot(
    directory: str, spec: LayerSpec, selector: Selector, limits: Limits, budget: Budget
) -> LayerYield:
    """A discarded layer read from its snapshot, saying so (its bytes are not verified)."""
    layer = read_dir_layer(directory, spec, selector, limits, budget)
    blind = (
        ""
        if _may_read_trusted_xattrs()
        else (
            "; without CAP_SYS_ADMIN its opaque directories (trusted.overlay.opaque) cannot be "
            "seen, so lower layers' files in them may be listed"
        )
    )
    layer.skipped.append(
        Skipped(
            str(spec.digest),
            "layer blob discarded by containerd after unpacking; read from its overlayfs "
            f"snapshot {directory} (not verified against the digest{blind})",
            Stage.SOURCE,
        )
    )
    return layer


_CAP_SYS_ADMIN = 21


def _may_read_trusted_xattrs() -> bool:
    """Whether this process holds CAP_SYS_ADMIN (else the kernel hides ``trusted.*``)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    return True


def _varint(data: bytes) -> int:
    """Go's binary.Varint (zig-zag), as containerd stores sizes."""
    value = shift = 0
    for b in data[:10]:
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1)
    raise ValueError("bad varint")


def _text(raw: bytes, what: str) -> str:
    if len(raw) > _MAX_NAME:
        raise SourceError(f"{what}: longer than {_MAX_NAME} bytes")
    return raw.decode("utf-8", "replace")


class _ContentStore(DirStore):
    """The content store: blob paths are built from validated digests and never followed
    through a symbolic link (a blob is a regular file containerd wrote)."""

    def __init__(self, root: str) -> None:
        super().__init__(os.path.join(root, CONTENT_DIR))
        self.label = root

    def open(self, name: str) -> Readable:
        path = self._path(name)
        try:
            st = os.lstat(path)
        except OSError as e:
            raise SourceError(f"{self.label}: cannot open {name} ({e.strerror or e})") from e
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(f"{self.label}: {name} is not a regular file")
        return super().open(name)

    def has(self, name: str) -> bool:
        return os.path.isfile(self._path(name)) and not os.path.islink(self._path(name))


class ContainerdRoot:
    """A containerd root directory (e.g. /var/lib/containerd), read-only."""

    def __init__(self, root: str, state: str | None = None, proc: str | None = None) -> None:
        self.root = root
        #: the state directory (/run/containerd beside a /var/lib/containerd root), where a
        #: task's bundle lies while it exists
        self.state = state
        #: the host's /proc: a task runs while its init process does (a stopped task keeps
        #: its bundle until deleted); None trusts the bundle alone
        self.proc = proc
        self.content = _ContentStore(root)
        self.meta_path = os.path.join(root, META_DB)
        #: records that could not be read (skipped), for the caller to tell
        self.problems: list[str] = []

    def _db_namespaces(self, db: BoltDB) -> list[tuple[str, Bucket]]:
        top = db.root().bucket(b"v1")
        if top is None:
            return []
        return [(_text(name, self.meta_path), bucket) for name, bucket in top.buckets()]

    def images(self, namespace: str | None = None) -> list[StoredImage]:
        """Every image record (of ``namespace``, else of all namespaces), by name."""
        if not os.path.isfile(self.meta_path):
            return self._images_by_content(namespace)
        out: list[StoredImage] = []
        with BoltDB(self.meta_path) as db:
            for ns, bucket in self._db_namespaces(db):
                if namespace is not None and ns != namespace:
                    continue
                images = bucket.bucket(b"images")
                if images is None:
                    continue
                for raw_name, image in images.buckets():
                    name = _text(raw_name, self.meta_path)
                    target = path_get(image, b"target")
                    if target is None:
                        continue
                    try:
                        out.append(StoredImage(ns, name, self._target(target, ns, name)))
                    except SourceError as e:  # one bad record does not hide the others
                        self.problems.append(str(e))
        return sorted(out, key=lambda i: (i.namespace, i.name))

    def _target(self, bucket: Bucket, namespace: str, name: str) -> Descriptor:
        digest, media, size = (bucket.get(k) for k in (b"digest", b"mediatype", b"size"))
        what = f"{self.meta_path}: image {namespace}/{name}"
        try:
            size_value = _varint(size or b"")
        except ValueError as e:
            raise SourceError(f"{what}: target without a valid size") from e
        obj = {
            "digest": _text(digest or b"", what),
            "mediaType": _text(media or b"", what),
            "size": size_value,
        }
        return Descriptor.parse(obj, what)

    def _images_by_content(self, namespace: str | None) -> list[StoredImage]:
        """Without a metadata database: each index or manifest blob no index names."""
        if namespace is not None:
            raise SourceError(f"{self.root}: no {META_DB}, so no namespace {namespace!r}")
        tops: dict[str, Descriptor] = {}
        named: set[str] = set()
        base = os.path.join(self.root, CONTENT_DIR, "blobs")
        for algorithm in sorted(os.listdir(base)) if os.path.isdir(base) else ():
            directory = os.path.join(base, algorithm)
            if algorithm not in ("sha256", "sha512") or os.path.islink(directory):
                continue
            for hexdigest in sorted(os.listdir(directory)):
                digest = f"{algorithm}:{hexdigest}"
                doc = self._small_json(f"blobs/{algorithm}/{hexdigest}", digest)
                if not isinstance(doc, dict):
                    continue
                media = doc.get("mediaType")
                is_index = isinstance(doc.get("manifests"), list)
                if not is_index and not isinstance(doc.get("layers"), list):
                    continue
                if media not in _INDEX_OR_MANIFEST:
                    media = (
                        "application/vnd.oci.image.index.v1+json"
                        if is_index
                        else "application/vnd.oci.image.manifest.v1+json"
                    )
                size = self.content.size(f"blobs/{algorithm}/{hexdigest}") or 0
                tops[digest] = Descriptor.parse(
                    {"digest": digest, "mediaType": media, "size": size}, self.root
                )
                for entry in doc.get("manifests") or []:
                    if isinstance(entry, dict) and isinstance(entry.get("digest"), str):
                        named.add(entry["digest"])
        return [StoredImage("", d, desc) for d, desc in sorted(tops.items()) if d not in named]

    def _small_json(self, name: str, digest: str) -> Any:
        try:
            split_digest(digest)
        except SourceError:
            return None
        size = self.content.size(name)
        if size is None or size > _MAX_SNIFF or not self.content.has(name):
            return None
        stream = self.content.open(name)
        try:
            head = stream.read(1)
            if head != b"{":
                return None
            data = head + stream.read(size)
        finally:
            stream.close()
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None

    def containers(self) -> list[StoredContainer]:
        """Every container record; ``running`` when the state directory holds its task."""
        if not os.path.isfile(self.meta_path):
            return []
        out: list[StoredContainer] = []
        with BoltDB(self.meta_path) as db:
            for ns, bucket in self._db_namespaces(db):
                containers = bucket.bucket(b"containers")
                if containers is None:
                    continue
                for raw_id, container in containers.buckets():
                    cid = _text(raw_id, self.meta_path)
                    image = _text(container.get(b"image") or b"", self.meta_path)
                    out.append(StoredContainer(ns, cid, image, self._running(ns, cid)))
        return sorted(out, key=lambda c: (c.namespace, c.id))

    def _running(self, namespace: str, cid: str) -> bool:
        if self.state is None or not (_SAFE_NAME.match(namespace) and _SAFE_NAME.match(cid)):
            return False
        bundle = os.path.join(self.state, TASKS_DIR, namespace, cid)
        if os.path.islink(bundle) or not os.path.isfile(os.path.join(bundle, "config.json")):
            return False
        if self.proc is None:
            return True
        try:
            with open(os.path.join(bundle, "init.pid"), "rb") as f:
                pid = f.read(32).strip()
        except OSError:
            return False
        return pid.isdigit() and os.path.isdir(os.path.join(self.proc, pid.decode()))

    def pick(self, namespace: str | None, image: str | None) -> StoredImage:
        """The one image ``image`` (a name or a digest) names; UsageError when ambiguous."""
        images = self.images(namespace)
        where = f"containerd:{self.root}" + (f"/{namespace}" if namespace else "")
        if image is not None:
            picked = [
                i
                for i in images
                if image in (i.name, i.target.digest) or i.name == f"docker.io/library/{image}"
            ]
            if not picked:
                raise UsageError(f"{where}: no image {image!r} ({_names(images)})")
        else:
            picked = images
        digests = {i.target.digest for i in picked}
        if not digests:
            raise SourceError(f"{where}: holds no image")
        if len(digests) > 1:
            raise UsageError(
                f"{where}: holds several images ({_names(picked)}); name one with :IMAGE"
            )
        return picked[0]

    def plan(self, stored: StoredImage, platform: str | None) -> ImagePlan:
        """The image to squash for ``stored`` (the platform's manifest of an index); a layer
        blob containerd discarded after unpacking is read from its overlayfs snapshot."""
        return resolve_image(
            self.content,
            [stored.target],
            platform=platform,
            label=f"containerd:{self.root}",
            name=stored.name,
            missing_layer=functools.partial(self._snapshot_layer, stored.namespace),
        )

    def _snapshot_layer(
        self, namespace: str, desc: Descriptor, index: int, config: dict[str, Any]
    ) -> LayerSpec | None:
        """The unpacked layer ``index`` (of the overlayfs snapshotter), for a missing blob."""
        rootfs = config.get("rootfs")
        diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
        if not namespace or not isinstance(diff_ids, list) or index >= len(diff_ids):
            return None
        chain = ""
        for diff_id in diff_ids[: index + 1]:
            if not isinstance(diff_id, str):
                return None
            split_digest(diff_id)
            chain = (
                diff_id
                if not chain
                else "sha256:" + hashlib.sha256(f"{chain} {diff_id}".encode()).hexdigest()
            )
        directory = self._snapshot_dir(namespace, chain)
        if directory is None:
            return None
        reader = functools.partial(_read_snapshot, directory)
        return LayerSpec(desc.digest, None, _no_blob, "diff", None, reader)

    def _snapshot_dir(self, namespace: str, chain: str) -> str | None:
        if not os.path.isfile(self.meta_path):
            return None
        with BoltDB(self.meta_path) as db:
            record = path_get(
                db.root(), b"v1", namespace.encode(), b"snapshots", b"overlayfs", chain.encode()
            )
            key = record.get(b"name") if record is not None else None
        snapshots_db = os.path.join(self.root, SNAPSHOTTER, "metadata.db")
        if key is None or not os.path.isfile(snapshots_db):
            return None
        with BoltDB(snapshots_db) as db:
            info = path_get(db.root(), b"v1", b"snapshots", key)
            raw_id = info.get(b"id") if info is not None else None
            kind = info.get(b"kind") if info is not None else None
        if raw_id is None or kind != _COMMITTED:
            return None
        try:
            snapshot_id = _uvarint(raw_id)
        except ValueError:
            return None
        directory = os.path.join(self.root, SNAPSHOTTER, "snapshots", str(snapshot_id), "fs")
        for path in (os.path.dirname(directory), directory):
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    return None
            except OSError:
                return None
        return directory


def _names(images: list[StoredImage]) -> str:
    shown = [f"{i.namespace}/{i.name}" if i.namespace else i.name for i in images[:20]]
    return "images: " + (", ".join(shown) or "-") + (" ..." if len(images) > 20 else "")


class ContainerdSource(ImageSourceBase):
    """``containerd:ROOT[/NAMESPACE][:IMAGE]``: one image of a containerd root."""

    def __init__(
        self,
        root: str,
        namespace: str | None = None,
        image: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(root, **kwargs)
        if not is_containerd_root(self.path):
            raise SourceError(f"{self.path}: not a containerd root (no {CONTENT_DIR}/)")
        self.store = ContainerdRoot(self.path)
        self.namespace = namespace
        self.image = image

    def plan(self) -> ImagePlan:
        return self.store.plan(self.store.pick(self.namespace, self.image), self.platform)


def image_digest(plan: ImagePlan) -> OciDigest:
    """The digest an image's report is keyed by: its manifest's, else its config's."""
    return plan.manifest_digest or plan.config_digest
