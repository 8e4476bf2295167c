"""``docker-root:ROOT[:IMAGE]``: images in a Docker data root (overlay2), read without Docker.

Docker (without the containerd image store) keeps an image as its config,
``image/overlay2/imagedb/content/sha256/<id>`` (the image ID is the config's digest), its
layers in ``image/overlay2/layerdb/sha256/<chain id>/{diff,cache-id,parent}``, each layer
extracted in ``overlay2/<cache-id>/diff``, and names in ``image/overlay2/repositories.json``.
Layers are read as directories (`scanner.source.dirlayer`) and reported by their diff_id, so the
report equals that of the image's ``docker save`` archive. Containers: ``containers/<id>/
config.v2.json`` (``Image`` is the image ID, ``State.Running``). Docker with the containerd
image store keeps images in containerd's root instead (``containerd:/var/lib/containerd/moby``).
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import os
import posixpath
import re
import stat
from typing import Any

from msgspec import Struct

from scanner.errors import SourceError, UsageError
from scanner.model import OciDigest
from scanner.source.containment import normalize
from scanner.source.dirlayer import read_dir_layer
from scanner.source.image import ImagePlan, ImageSourceBase
from scanner.source.layerstream import LayerSpec, Readable
from scanner.source.platform import check_config_platform

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_CACHE_ID = re.compile(r"[0-9a-f]{64}\Z")
_JSON_LIMIT = 16 * 1024 * 1024
_DRIVER = "overlay2"
#: decompressed bytes of a tar-split record read (about 150 bytes per layer entry)
_TAR_SPLIT_LIMIT = 1 << 30


class DockerImage(Struct, frozen=True):
    """An image of the data root: its ID (config digest) and the names pointing at it."""

    id: OciDigest
    names: tuple[str, ...]


class DockerContainer(Struct, frozen=True):
    """A container of the data root: the image ID it runs and whether it is running."""

    id: str
    name: str
    image: OciDigest | None
    image_name: str
    running: bool


def is_docker_root(path: str) -> bool:
    """Whether ``path`` looks like a Docker data root with overlay2 images."""
    return os.path.isdir(os.path.join(path, "image", _DRIVER, "imagedb"))


def parse_docker_target(rest: str) -> tuple[str, str | None]:
    """Split ``ROOT[:IMAGE]`` (the image may hold colons) into (root, image)."""
    if not rest:
        raise UsageError("docker-root: needs a directory (docker-root:/var/lib/docker)")
    cuts = [i for i, ch in enumerate(rest) if ch == ":"] + [len(rest)]
    for cut in reversed(cuts):
        head = rest[:cut]
        if head and is_docker_root(head):
            return head, rest[cut + 1 :] or None
    raise SourceError(
        f"docker-root:{rest}: no Docker data root there (no image/{_DRIVER}/imagedb; only the "
        "overlay2 storage driver is read)"
    )


def _read_small(path: str, what: str) -> bytes:
    """A small regular file, never through a symbolic link."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise SourceError(f"{what}: cannot read {path} ({e.strerror or e})") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(f"{what}: {path} is not a regular file")
        if st.st_size > _JSON_LIMIT:
            raise SourceError(f"{what}: {path} is larger than {_JSON_LIMIT} bytes")
        return f.read(_JSON_LIMIT + 1)


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise SourceError(f"{what} is not valid JSON ({e})") from e


def _digest(text: str, what: str) -> OciDigest:
    algorithm, _, hexdigest = text.strip().partition(":")
    if algorithm != "sha256" or not _HEX64.match(hexdigest):
        raise SourceError(f"{what}: {text.strip()[:80]!r} is not a sha256 digest")
    return OciDigest(f"sha256:{hexdigest}")


def _no_blob() -> Readable:
    raise SourceError("an extracted layer directory has no blob to open")


def tar_split_opaque(path: str) -> frozenset[str]:
    """Directories the layer's original tar made opaque (``DIR/.wh..wh..opq`` entries), from
    Docker's tar-split record of it (gzip JSON lines; entries of type 1 carry the member name,
    or ``name_raw`` in base64). The extracted layer shows them only as a ``trusted.*`` xattr,
    which a reader without CAP_SYS_ADMIN cannot see. Empty when there is no readable record."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return frozenset()
    found: set[str] = set()
    read = 0
    try:
        with os.fdopen(fd, "rb") as raw:
            if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
                return frozenset()
            with gzip.GzipFile(fileobj=raw) as lines:
                for line in lines:
                    read += len(line)
                    if read > _TAR_SPLIT_LIMIT:
                        return frozenset(found)
                    if b".wh..wh..opq" not in line and b"name_raw" not in line:
                        continue
                    entry = json.loads(line)
                    if not isinstance(entry, dict) or entry.get("type") != 1:
                        continue
                    name = entry.get("name")
                    if not isinstance(name, str) and isinstance(entry.get("name_raw"), str):
                        raw_name = base64.b64decode(entry["name_raw"])
                        name = raw_name.decode("utf-8", "surrogateescape")
                    if isinstance(name, str) and posixpath.basename(name) == ".wh..wh..opq":
                        found.add(normalize(posixpath.dirname(name)))
    except (OSError, EOFError, ValueError, gzip.BadGzipFile):
        return frozenset(found)
    return frozenset(found)


class DockerRoot:
    """A Docker data root (e.g. /var/lib/docker), read-only."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.image_dir = os.path.join(root, "image", _DRIVER)
        self.label = f"docker-root:{root}"
        #: records that could not be read (skipped), for the caller to tell
        self.problems: list[str] = []

    def _repositories(self) -> dict[str, list[str]]:
        """Image ID -> names (``repo:tag``, sorted), from repositories.json."""
        path = os.path.join(self.image_dir, "repositories.json")
        if not os.path.lexists(path):
            return {}
        doc = _json(_read_small(path, self.label), f"{self.label}: repositories.json")
        repos = doc.get("Repositories") if isinstance(doc, dict) else None
        out: dict[str, list[str]] = {}
        if not isinstance(repos, dict):
            return out
        for refs in repos.values():
            if not isinstance(refs, dict):
                continue
            for ref, image_id in refs.items():
                if isinstance(ref, str) and isinstance(image_id, str) and "@" not in ref:
                    out.setdefault(image_id, []).append(ref)
        return {k: sorted(v) for k, v in out.items()}

    def images(self) -> list[DockerImage]:
        """Every image config in the image database, with its names."""
        content = os.path.join(self.image_dir, "imagedb", "content", "sha256")
        names = self._repositories()
        try:
            ids = sorted(os.listdir(content))
        except OSError:
            return []
        return [
            DockerImage(OciDigest(f"sha256:{h}"), tuple(names.get(f"sha256:{h}", ())))
            for h in ids
            if _HEX64.match(h)
        ]

    def pick(self, image: str | None) -> DockerImage:
        """The image ``image`` names (a name, ``sha256:ID`` or an ID prefix of 12+)."""
        images = self.images()
        if image is None:
            if len(images) != 1:
                shown = ", ".join(n for i in images for n in (i.names or (i.id,)))
                raise UsageError(
                    f"{self.label}: holds {len(images)} images ({shown or '-'}); "
                    "name one with :IMAGE"
                )
            return images[0]
        wanted = {image, f"{image}:latest"}
        picked = [
            i
            for i in images
            if wanted & set(i.names)
            or i.id == image
            or (len(image) >= 12 and i.id.removeprefix("sha256:").startswith(image))
        ]
        if len(picked) != 1:
            shown = ", ".join(n for i in images for n in (i.names or (i.id,)))
            why = "no image" if not picked else "several images match"
            raise UsageError(f"{self.label}: {why} {image!r} (images: {shown or '-'})")
        return picked[0]

    def plan(self, image: DockerImage) -> ImagePlan:
        """Config and layer directories of ``image``, each layer reported by its diff_id."""
        hexid = image.id.removeprefix("sha256:")
        config_path = os.path.join(self.image_dir, "imagedb", "content", "sha256", hexid)
        data = _read_small(config_path, self.label)
        if hashlib.sha256(data).hexdigest() != hexid:
            raise SourceError(f"{self.label}: image config {image.id} does not match its digest")
        config = _json(data, f"{self.label}: image config {image.id}")
        rootfs = config.get("rootfs") if isinstance(config, dict) else None
        diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
        if not isinstance(diff_ids, list) or not all(isinstance(d, str) for d in diff_ids):
            raise SourceError(f"{self.label}: image config {image.id} has no rootfs.diff_ids")
        assert isinstance(config, dict)
        layers: list[LayerSpec] = []
        chain = ""
        for raw in diff_ids:
            diff_id = _digest(raw, f"{self.label}: image {image.id}")
            chain = (
                diff_id
                if not chain
                else "sha256:" + hashlib.sha256(f"{chain} {diff_id}".encode()).hexdigest()
            )
            layers.append(self._layer(diff_id, chain, image))
        return ImagePlan(
            name=image.names[0] if image.names else str(image.id),
            manifest_digest=None,
            config_digest=image.id,
            config=config,
            layers=tuple(layers),
            layer_digests=tuple(spec.digest for spec in layers),
        )

    def _layer(self, diff_id: OciDigest, chain: str, image: DockerImage) -> LayerSpec:
        what = f"{self.label}: layer {diff_id} of image {image.id}"
        meta = os.path.join(self.image_dir, "layerdb", "sha256", chain.removeprefix("sha256:"))
        recorded = _read_small(os.path.join(meta, "diff"), what).decode("ascii", "replace")
        if _digest(recorded, what) != diff_id:
            raise SourceError(f"{what}: layerdb records another diff_id ({recorded.strip()})")
        cache_id = _read_small(os.path.join(meta, "cache-id"), what).decode("ascii", "replace")
        if not _CACHE_ID.match(cache_id.strip()):
            raise SourceError(f"{what}: cache-id {cache_id.strip()[:80]!r} is not a layer id")
        diff = os.path.join(self.root, _DRIVER, cache_id.strip(), "diff")
        for path in (os.path.dirname(diff), diff):
            try:
                st = os.lstat(path)
            except OSError as e:
                raise SourceError(f"{what}: {path} is missing ({e.strerror})") from e
            if not stat.S_ISDIR(st.st_mode):
                raise SourceError(f"{what}: {path} is not a directory")
        split = os.path.join(meta, "tar-split.json.gz")
        reader = functools.partial(
            read_dir_layer, diff, opaque=functools.partial(tar_split_opaque, split)
        )
        return LayerSpec(diff_id, None, _no_blob, "diff", None, reader)

    def containers(self) -> list[DockerContainer]:
        """Every container's image ID and running state, from ``containers/*/config.v2.json``."""
        base = os.path.join(self.root, "containers")
        try:
            ids = sorted(os.listdir(base))
        except OSError:
            return []
        out = []
        for cid in ids:
            if not _HEX64.match(cid):
                continue
            path = os.path.join(base, cid, "config.v2.json")
            if not os.path.isfile(path):
                continue
            try:
                doc = _json(_read_small(path, self.label), f"{self.label}: {path}")
            except SourceError as e:  # one bad record does not hide the others
                self.problems.append(str(e))
                continue
            if not isinstance(doc, dict):
                continue
            state = doc.get("State") if isinstance(doc.get("State"), dict) else {}
            config = doc.get("Config") if isinstance(doc.get("Config"), dict) else {}
            assert isinstance(state, dict) and isinstance(config, dict)
            raw_image = doc.get("Image")
            try:
                image = _digest(raw_image, path) if isinstance(raw_image, str) else None
            except SourceError:
                image = None
            out.append(
                DockerContainer(
                    id=cid,
                    name=str(doc.get("Name") or "").lstrip("/"),
                    image=image,
                    image_name=str(config.get("Image") or ""),
                    running=state.get("Running") is True,
                )
            )
        return out


class DockerRootSource(ImageSourceBase):
    """``docker-root:ROOT[:IMAGE]``: one image of a Docker data root."""

    def __init__(self, root: str, image: str | None = None, **kwargs: Any) -> None:
        super().__init__(root, **kwargs)
        if not is_docker_root(self.path):
            raise SourceError(f"{self.path}: not a Docker data root (no image/{_DRIVER}/imagedb)")
        self.store = DockerRoot(self.path)
        self.image = image

    def plan(self) -> ImagePlan:
        plan = self.store.plan(self.store.pick(self.image))
        check_config_platform(plan.config, self.platform, self.path)
        return plan
