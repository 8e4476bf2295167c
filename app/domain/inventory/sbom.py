"""An asset's SBOM: the report exactly as received, or a CycloneDX 1.6 BOM rebuilt from what the
service stored (built with cyclonedx-python-lib, purls with packageurl, like the scanner's).

The library is the encoder of record and costs ~0.4 ms per file of a fresh document (its model
objects, its validation's quadratic dependency look-ups, its serialization: docs/benchmarks.md).
This module hands it components and dependencies in the order its sorted sets keep (each then
costs one comparison, not a share of a sort that compares every field of both objects). A
rebuilt document is a function of the rows it reads, so each
process keeps the last documents it encoded (`KEEP_BYTES`), keyed by every column of those
rows: a request for the same content is answered with the same bytes, and any change of a row
(labels, a re-verified file, a newer scan) is another key.

Each row is one component with a bom-ref of its own: a stored purl (whatever a report said) is
kept apart from the references this module invents (`stored_ref`), and a second row of one purl
takes its row's reference, so no component is dropped and the library never has to invent a
random one (the same rows, the same bytes).
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import pickle
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.dependency import Dependency
from cyclonedx.output import make_outputter
from cyclonedx.schema import OutputFormat, SchemaVersion
from packageurl import PackageURL
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session

from app.domain import stored as stored_documents
from app.domain.inventory.queries import find_asset, find_scan
from app.errors import NotFound
from app.storage.repositories import inventory as repo
from app.storage.repositories import scans as scan_repo
from app.storage.tables import Artifact, Asset, Package, Scan
from scanner import __version__
from scanner import vocabulary as v
from scanner.imageref import oci_purl

#: the media type of both forms
MEDIA_TYPE = "application/vnd.cyclonedx+json"


def raw_sbom(session: Session, asset_id: int, scan_id: int | None) -> tuple[bytes, str]:
    """The asset's latest (or given) report exactly as received, and its media type."""
    scan = find_scan(session, asset_id, scan_id)
    raw = scan_repo.raw_bom(session, scan.id)
    if raw is None:
        raise NotFound(f"scan {scan.id} has no stored report")
    data = gzip.decompress(raw.gzip_data)
    # the report "exactly as received" is the one whose digest was recorded at ingest
    stored_documents.check("report", f"scan:{scan.id}", data, scan.content_sha256)
    return data, raw.media_type


#: Bytes of encoded documents a process keeps (least recently used out first).
KEEP_BYTES = 64 << 20


class _Kept:
    """Encoded documents by content key, bounded by their total size; thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._docs: OrderedDict[str, str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            doc = self._docs.get(key)
            if doc is not None:
                self._docs.move_to_end(key)
            return doc

    def put(self, key: str, doc: str) -> None:
        if len(doc) > self.limit:
            return
        with self._lock:
            if key in self._docs:
                return
            self._docs[key] = doc
            self._size += len(doc)
            while self._size > self.limit:
                _, old = self._docs.popitem(last=False)
                self._size -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._docs.clear()
            self._size = 0


KEPT = _Kept(KEEP_BYTES)


def normalized_sbom(session: Session, asset_id: int, scan_id: int | None) -> str:
    """A CycloneDX 1.6 JSON BOM rebuilt from what the service stored for one scan."""
    asset = find_asset(session, asset_id)
    scan = find_scan(session, asset_id, scan_id)
    packages = repo.scan_packages(session, scan.id)
    artifacts = repo.scan_artifacts(session, [scan.id])
    key = content_key(asset, scan, packages, artifacts)
    doc = KEPT.get(key)
    if doc is None:
        with collector_paused():
            doc = encode_normalized(asset, scan, packages, artifacts)
        KEPT.put(key, doc)
    return doc


_pause_lock = threading.Lock()
_pauses = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block (reference counting goes on).

    The library allocates some 2,000 objects per file and keeps most of them until the document
    is written, so the collector's full passes, each over the whole process (~200,000 objects
    in the service), came again and again during an encoding: about a third of its time. Nested
    and concurrent pauses are counted; the last one out resumes the collector if it ran before
    the first one in.
    """
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


def content_key(
    asset: Asset, scan: Scan, packages: Sequence[Package], artifacts: Sequence[Artifact]
) -> str:
    """SHA-256 of every column of every row the document is built from (and of the version
    the document names): equal keys, equal documents."""
    rows = [_columns(asset), _columns(scan), *map(_columns, packages), *map(_columns, artifacts)]
    digest = hashlib.sha256(f"{__version__}\n".encode())
    digest.update(pickle.dumps(rows, protocol=5))
    return digest.hexdigest()


def _columns(row: object) -> tuple[str, tuple[Any, ...]]:
    attrs = sa_inspect(type(row)).column_attrs
    return type(row).__name__, tuple((a.key, getattr(row, a.key)) for a in attrs)


def encode_normalized(
    asset: Asset, scan: Scan, rows: Sequence[Package], artifacts: Sequence[Artifact]
) -> str:
    """The document itself, encoded by the library."""
    bom = normalized_bom(asset, scan, rows, artifacts)
    outputter = make_outputter(bom, OutputFormat.JSON, SchemaVersion.V1_6)
    return str(outputter.output_as_string(indent=2))


def normalized_bom(
    asset: Asset, scan: Scan, rows: Sequence[Package], artifacts: Sequence[Artifact]
) -> Bom:
    """The library's model of the document."""
    bom = Bom(
        serial_number=uuid.uuid5(
            uuid.NAMESPACE_URL, f"gpuprov:normalized:{scan.id}:{scan.content_sha256}"
        ),
        version=1,
    )
    bom.metadata.timestamp = scan.scanned_at
    bom.metadata.tools.components.add(
        Component(type=ComponentType.APPLICATION, name="gpuprov-service", version=__version__)
    )
    described = _asset_component(asset, scan)
    bom.metadata.component = described
    bom.metadata.properties.update(_props([("gpuprov:source:tool", scan.tool)]))

    taken = {str(described.bom_ref)}
    packages: dict[str, Component] = {}  # by bom-ref
    owners: dict[str, str] = {}  # a stored purl: the bom-ref of its package
    for package in rows:
        ref = stored_ref(package.purl) if package.purl else f"package:{package.id}"
        if ref in taken:  # another row of the same purl: this row's own reference
            ref = f"package:{package.id}"
        ref = _unique(ref, taken)
        packages[ref] = _package_component(package, ref)
        if package.purl:
            owners.setdefault(package.purl, ref)  # its files go under the first such row
    owned: dict[str, list[Component]] = {}  # by the owner's bom-ref
    unowned: list[Component] = []
    for artifact in artifacts:
        if artifact.kind != "file":
            continue
        component = _file_component(artifact, taken)
        owner = owners.get(artifact.owner_purl) if artifact.owner_purl else None
        if owner is not None:
            owned.setdefault(owner, []).append(component)
        else:
            unowned.append(component)
    files = [c for group in owned.values() for c in group] + unowned
    _add_in_order(bom.components, [*packages.values(), *files], _component_order)
    _add_in_order(
        bom.dependencies,
        [
            _depends(described, [*packages.values(), *unowned]),
            *(_depends(packages[ref], group) for ref, group in owned.items()),
            *(_depends(c, []) for ref, c in packages.items() if ref not in owned),
            *(_depends(c, []) for c in files),
        ],
        _dependency_order,
    )
    return bom


class _SortedSet(Protocol):
    """What this module uses of the library's sorted sets (sortedcontainers' ``SortedSet``)."""

    def add(self, value: Any) -> None: ...


def _add_in_order(into: _SortedSet, items: Iterable[Any], order: Callable[[Any], Any]) -> None:
    """Add ``items`` to one of the library's sorted sets one by one, in the set's own order.

    Given a collection, the library's setters build the set through a plain ``set`` and sort
    it: ~n log n comparisons, each of which builds two tuples of every field of both objects.
    Added one at a time in ascending order, each item is compared with the largest so far
    (with a few sublists' largest past 2,000 items) and appended. ``order`` is a cheap key
    that agrees with the library's comparison for what this module builds; where it does not,
    the set still places each item where its own comparison says (the same set, only slower).
    """
    for item in sorted(items, key=order):
        into.add(item)


def _none_last(value: str | None) -> tuple[bool, str]:
    """The library's ordering of an optional field: any value before ``None``."""
    return (value is None, value or "")


def _component_order(c: Component) -> tuple[Any, ...]:
    # The leading fields of the library's comparison; the bom-ref is unique among components.
    return (c.type.value, _none_last(c.group), c.name, _none_last(c.version), str(c.bom_ref))


def _dependency_order(d: Dependency) -> str:
    # Dependencies compare by their ref first; each ref appears once.
    return str(d.ref)


def _depends(target: Component, on: Sequence[Component]) -> Dependency:
    dependency = Dependency(ref=target.bom_ref)
    _add_in_order(
        dependency.dependencies, (Dependency(ref=c.bom_ref) for c in on), _dependency_order
    )
    return dependency


def _props(pairs: Iterable[tuple[str, str | None]]) -> list[Property]:
    return [Property(name=name, value=value) for name, value in pairs if value]


#: The bom-refs this module invents begin with one of these: the asset's ``asset:<id>``, a package
#: row's without a purl (or a second row of one purl) ``package:<row id>``, a file's
#: ``file:<path>`` or a loaded copy's ``loaded:<sha256>:<path>`` (each then with a ``#`` per
#: earlier file of the same reference), and a stored value escaped (`stored_ref`).
ESCAPE = "purl:"
INVENTED = ("asset:", "package:", "file:", "loaded:")


def stored_ref(value: str) -> str:
    """A stored purl (as another tool wrote it, valid or not) as a bom-ref: itself, or, where it
    begins like a reference this module invents or like an escaped one, ``purl:`` and itself.

    No two stored values share a reference and none is ever an invented one, so what a report
    said cannot take the asset's, a file's or another package's reference (the library would
    then give the clashing component a random one: the same rows, other bytes)."""
    return ESCAPE + value if value.startswith((*INVENTED, ESCAPE)) else value


def _unique(ref: str, taken: set[str]) -> str:
    """``ref``, or ``ref`` with as many ``#`` as it takes to be none of ``taken``; now taken."""
    while ref in taken:
        ref += "#"
    taken.add(ref)
    return ref


def asset_pairs(asset: Asset, scan: Scan) -> list[tuple[str, str | None]]:
    """A stored asset's ``gpuprov:`` properties, as the rebuilt documents state them."""
    details = asset.details
    labels = [(v.ASSET_LABEL_PREFIX + k, val) for k, val in sorted(asset.labels.items())]
    if asset.kind != "image":
        return [
            (v.ASSET_KIND, asset.kind),
            (v.HOST_MACHINE_ID, details.get("machine_id")),
            (v.HOST_HOSTNAME, asset.name),
            *labels,
        ]
    return [
        (v.ASSET_KIND, asset.kind),
        (v.IMAGE_DIGEST, details.get("digest")),
        (v.IMAGE_ID, details.get("config_digest")),
        (v.IMAGE_REFERENCE, asset.name),
        (v.IMAGE_SIGNER, scan.image_signer),
        (v.SLSA_BUILD_LEVEL, str(scan.slsa_level) if scan.slsa_level is not None else None),
        (v.SLSA_BUILDER, scan.slsa_builder),
        (v.SLSA_SOURCE_REPO, scan.slsa_source_repo),
        *((v.IMAGE_SIGNATURE_REJECTED, r) for r in scan.signature_rejected or []),
        *labels,
    ]


def _asset_component(asset: Asset, scan: Scan) -> Component:
    details = asset.details
    ref = f"asset:{asset.id}"
    pairs = asset_pairs(asset, scan)
    if asset.kind != "image":
        return Component(
            type=ComponentType.OPERATING_SYSTEM,
            name=asset.name,
            bom_ref=ref,
            properties=_props(pairs),
        )
    digest = details.get("digest")
    return Component(
        type=ComponentType.CONTAINER,
        name=asset.name,
        bom_ref=ref,
        purl=oci_purl(asset.name, digest, details.get("platform")) if digest else None,
        properties=_props(pairs),
    )


def _package_component(package: Package, ref: str) -> Component:
    purl: PackageURL | None = None
    if package.purl:
        try:
            purl = PackageURL.from_string(package.purl)
        except ValueError:
            purl = None  # another tool's malformed purl: kept as the bom-ref only (`stored_ref`)
    return Component(
        type=ComponentType.LIBRARY,
        name=package.name,
        version=package.version or None,
        purl=purl,
        bom_ref=ref,
    )


def _runtime_pairs(artifact: Artifact) -> list[tuple[str, str | None]]:
    """The ``gpuprov:runtime:`` properties of a file live processes map (as reported)."""
    if not artifact.loaded_processes and not artifact.loaded_copy:
        return []
    return [
        (v.RUNTIME_PROCESSES, str(artifact.loaded_processes)),
        (v.RUNTIME_CONTAINERS, str(artifact.loaded_containers)),
        (v.RUNTIME_ON_DISK, "false" if artifact.loaded_copy else None),
        (v.RUNTIME_DISK_SHA256, artifact.disk_sha256),
        (v.RUNTIME_DELETED, "true" if artifact.loaded_deleted else None),
        *((v.RUNTIME_PROCESS, json.dumps(p, sort_keys=True)) for p in artifact.loaded_by or []),
    ]


def file_pairs(artifact: Artifact) -> list[tuple[str, str | None]]:
    """A stored file's ``gpuprov:`` properties, as the rebuilt documents state them."""
    return [
        (v.FILE_PATH, artifact.path),
        (v.LIBRARY_FAMILY, artifact.family),
        (v.LIBRARY_COMPONENT, artifact.component),
        (v.LIBRARY_VERSION, artifact.version),
        (v.LIBRARY_CUDA_MAJOR, str(artifact.cuda_major) if artifact.cuda_major else None),
        (v.LIBRARY_ARCH, artifact.arch),
        (v.LIBRARY_SONAME, artifact.soname),
        (v.OWNER_PURL, artifact.owner_purl),
        (v.INTEGRITY, artifact.integrity),
        (v.INTEGRITY_REASON, artifact.integrity_reason),
        (v.PROVENANCE, artifact.provenance),
        (v.PROVENANCE_SIGNER, artifact.provenance_signer),
        (v.PROVENANCE_CATALOG, artifact.provenance_catalog),
        (v.PROVENANCE_REASON, artifact.provenance_reason),
        (v.LAYER, artifact.layer),
        (v.FILE_ALIASES, ",".join(artifact.aliases) if artifact.aliases else None),
        *((v.NOTE, note) for note in artifact.notes),
        *_runtime_pairs(artifact),
    ]


def _file_component(artifact: Artifact, taken: set[str]) -> Component:
    pairs = file_pairs(artifact)
    ref = f"file:{artifact.path or artifact.name}"
    if artifact.loaded_copy:
        ref = f"loaded:{artifact.sha256}:{artifact.path or artifact.name}"
    ref = _unique(ref, taken)
    return Component(
        type=ComponentType.FILE,
        name=artifact.name,
        bom_ref=ref,
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=artifact.sha256)]
        if artifact.sha256
        else None,
        properties=_props(pairs),
    )
