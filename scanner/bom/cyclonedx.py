"""CycloneDX encoder: `ScanResult` -> CycloneDX 1.6 (or 1.7) JSON via cyclonedx-python-lib.

The asset is ``metadata.component``; owner packages are ``library`` components; every GPU
library file is a ``file`` component carrying the ``gpuprov:`` properties (scanner/vocabulary.py).
A host's node facts add ``gpuprov:driver:*`` asset properties, a ``device`` component per GPU
and a ``file`` component per host file the container toolkit injects (docs/bom-properties.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scanner import vocabulary as V
from scanner.errors import OutputError
from scanner.model import (
    AssetKind,
    ContainerLink,
    Evidence,
    EvidenceField,
    EvidenceMethod,
    GpuDevice,
    GpuLibrary,
    InjectedFile,
    LoadedBy,
    NodeFacts,
    Package,
    Product,
    ScanResult,
)

if TYPE_CHECKING:
    from datetime import datetime
    from uuid import UUID

SPEC_VERSIONS = ("1.6", "1.7")

#: CycloneDX analysis technique per evidence method; the others are written as OTHER.
_TECHNIQUE = {
    EvidenceMethod.FILENAME: "FILENAME",
    EvidenceMethod.BINARY_ANALYSIS: "BINARY_ANALYSIS",
    EvidenceMethod.MANIFEST_ANALYSIS: "MANIFEST_ANALYSIS",
    EvidenceMethod.HASH_COMPARISON: "HASH_COMPARISON",
}
#: CycloneDX identity field per evidence field; CUDA-major evidence has no identity field.
_IDENTITY_FIELD = {EvidenceField.VERSION: "VERSION", EvidenceField.NAME: "NAME"}


def _schema(spec_version: str) -> Any:
    from cyclonedx.schema import SchemaVersion

    try:
        return {"1.6": SchemaVersion.V1_6, "1.7": SchemaVersion.V1_7}[spec_version]
    except KeyError:
        raise OutputError(
            f"unsupported CycloneDX spec version {spec_version!r}; choose one of "
            + ", ".join(SPEC_VERSIONS)
        ) from None


def _props(pairs: Iterable[tuple[str, str | None]]) -> list[Any]:
    from cyclonedx.model import Property

    return [Property(name=k, value=v) for k, v in pairs if v not in (None, "")]


def _oci_purl(result: ScanResult) -> Any:
    from scanner.imageref import oci_purl

    return oci_purl(result.asset.name, result.asset.digest, result.asset.platform)


def container_value(link: ContainerLink) -> str:
    """The `gpuprov:node:container` value of one running container (docs/bom-properties.md)."""
    fields = (
        link.engine,
        link.namespace,
        link.id,
        link.image_digest,
        link.image_config,
        link.image_name,
    )
    return " ".join(f or "-" for f in fields)


def asset_pairs(result: ScanResult) -> list[tuple[str, str | None]]:
    """The asset's ``gpuprov:`` properties (name, value; an empty value is left out)."""
    asset = result.asset
    extra: list[tuple[str, str | None]] = [
        (f"{V.ASSET_LABEL_PREFIX}{k}", v) for k, v in asset.labels
    ]
    trust = result.image_trust
    if trust is not None:
        extra += [
            (V.IMAGE_SIGNER, trust.signer),
            (V.SLSA_BUILD_LEVEL, str(trust.slsa_level) if trust.slsa_level is not None else None),
            (V.SLSA_BUILDER, trust.builder),
            (V.SLSA_SOURCE_REPO, trust.source_repo),
            *((V.IMAGE_SIGNATURE_REJECTED, r) for r in trust.rejected),
        ]
    runtime = result.runtime
    if runtime is not None:
        extra += [
            (V.RUNTIME_PROC, runtime.proc),
            (V.RUNTIME_SCANNED, str(runtime.processes)),
            (V.RUNTIME_LOADING, str(runtime.loading)),
            (V.RUNTIME_UNREADABLE, str(len(runtime.unreadable))),
            (V.RUNTIME_UNREADABLE_MAPPINGS, str(runtime.unreadable_mappings)),
        ]
    if asset.kind is AssetKind.IMAGE:
        return [
            (V.ASSET_KIND, "image"),
            (V.IMAGE_DIGEST, asset.digest),
            (V.IMAGE_ID, asset.config_digest),
            (V.IMAGE_REFERENCE, asset.reference),
            (V.IMAGE_PLATFORM, asset.platform),
            *extra,
        ]
    return [
        (V.ASSET_KIND, "host"),
        (V.HOST_HOSTNAME, asset.name),
        (V.HOST_MACHINE_ID, asset.machine_id),
        *extra,
        *((V.NODE_CONTAINER, container_value(c)) for c in result.containers),
        *(_node_props(result.node) if result.node is not None else ()),
    ]


def _asset_component(result: ScanResult) -> Any:
    from cyclonedx.model.component import Component, ComponentType

    asset = result.asset
    props = _props(asset_pairs(result))
    if asset.kind is AssetKind.IMAGE:
        return Component(
            type=ComponentType.CONTAINER,
            name=asset.name,
            version=asset.digest,
            purl=_oci_purl(result) if asset.digest else None,
            bom_ref="asset",
            properties=props,
        )
    return Component(
        type=ComponentType.OPERATING_SYSTEM,
        name=asset.name,
        bom_ref="asset",
        properties=props,
    )


def _node_props(node: NodeFacts) -> list[tuple[str, str | None]]:
    """The host's driver, GPU count, L4T release, injection edits and condition facts as asset
    properties."""
    out: list[tuple[str, str | None]] = []
    d = node.driver
    if d is not None:
        out += [
            (V.DRIVER_VERSION, d.version),
            (V.DRIVER_SOURCE, d.source if d.version else None),
            (V.DRIVER_FLAVOR, d.flavor),
            (V.DRIVER_BUILD, d.build),
            *((V.DRIVER_LIBCUDA_VERSION, v) for v in d.libcuda),
            *((V.DRIVER_NVML_VERSION, v) for v in d.nvml),
            (V.DRIVER_CUDA_MAX, d.cuda_max),
            (V.DRIVER_CUDA_MAX_SOURCE, d.cuda_max_source),
            (V.DRIVER_CUDA_MAX_AT_LEAST, "true" if d.cuda_max_at_least else None),
        ]
    if node.gpus:
        out.append((V.GPU_COUNT, str(len(node.gpus))))
    if node.l4t is not None:
        out += [
            (V.L4T_RELEASE, node.l4t.release),
            (V.L4T_SOURCE, node.l4t.source),
            (V.L4T_BOARD, node.l4t.board),
            (V.JETPACK_RELEASE, node.l4t.jetpack),
            (V.JETPACK_CUDA, node.l4t.cuda),
        ]
    out += [(V.INJECTED_DEVICE_NODE, n) for n in node.device_nodes]
    out += [(V.INJECTED_LINK, f"{link} -> {target}") for link, target in node.container_links]
    out += [(V.NODE_NOTE, n) for n in node.notes]
    for c in node.conditions:
        out += [
            (V.CONDITION_PREFIX + c.name, c.value),
            (V.CONDITION_PREFIX + c.name + V.CONDITION_SOURCE_SUFFIX, c.source),
        ]
    return out


def _gpu_component(gpu: GpuDevice) -> Any:
    from cyclonedx.model.component import Component, ComponentType

    return Component(
        type=ComponentType.DEVICE,
        name=gpu.model or "NVIDIA GPU",
        bom_ref=f"gpu:{gpu.bus_id}",
        properties=_props(
            [
                (V.GPU_BUS_ID, gpu.bus_id),
                (V.GPU_UUID, gpu.uuid),
                (V.GPU_MINOR, str(gpu.minor) if gpu.minor is not None else None),
                (V.GPU_VBIOS, gpu.vbios),
                (V.GPU_ARCHITECTURE, gpu.architecture),
                (V.GPU_COMPUTE_CAPABILITY, gpu.compute_capability),
                (V.GPU_SOURCE, gpu.source),
            ]
        ),
    )


def _injected_component(item: InjectedFile) -> Any:
    from cyclonedx.model import HashAlgorithm, HashType
    from cyclonedx.model.component import Component, ComponentType

    hashes = (
        [HashType(alg=HashAlgorithm.SHA_256, content=item.digests.sha256)] if item.digests else []
    )
    return Component(
        type=ComponentType.FILE,
        name=item.host_path,
        version=item.version,
        bom_ref="injected:" + _ref_path(item.host_path),
        hashes=hashes,
        properties=_props(
            [
                (V.INJECTED_HOST_PATH, item.host_path),
                *((V.INJECTED_CONTAINER_PATH, p) for p in item.container_paths),
                *((V.INJECTED_SOURCE, s) for s in item.sources),
                *((V.INJECTED_DEVICE, d) for d in item.devices),
                (V.INJECTED_FAMILY, item.family),
                (V.INJECTED_VERSION, item.version),
                (V.INJECTED_ERROR, item.error),
            ]
        ),
    )


def package_pairs(pkg: Package) -> list[tuple[str, str | None]]:
    """An owner package's ``gpuprov:`` properties."""
    source = pkg.built_from
    return [
        (V.PACKAGE_MANAGER, pkg.manager),
        (V.PACKAGE_DB, pkg.source),
        (V.PACKAGE_SOURCE_NAME, source[0] if source else None),
        (V.PACKAGE_SOURCE_VERSION, source[1] if source else None),
    ]


def _package_component(pkg: Package) -> Any:
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    return Component(
        type=ComponentType.LIBRARY,
        name=pkg.name,
        version=pkg.version,
        purl=PackageURL.from_string(pkg.purl),
        bom_ref=pkg.purl,
        properties=_props(package_pairs(pkg)),
    )


#: product keys written as ``library`` components (the others are ``application``s)
_LIBRARY_PRODUCTS = frozenset({"nvjpeg", "nvjpeg2000", "nvtiff", "tensorrt", "dcgm"})


def product_ref(p: Product) -> str:
    """The bom-ref of a product component: its key and version (or release line)."""
    return f"product:{p.key}:{p.version or ('line-' + p.line if p.line else 'unknown')}"


def _product_component(p: Product) -> Any:
    from cyclonedx.model import HashAlgorithm, HashType
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.component_evidence import (
        AnalysisTechnique,
        ComponentEvidence,
        Identity,
        IdentityField,
        Method,
        Occurrence,
    )
    from packageurl import PackageURL

    ref = product_ref(p)
    methods = [
        Method(
            technique=getattr(AnalysisTechnique, _TECHNIQUE.get(ev.method, "OTHER")),
            confidence=Decimal(str(ev.confidence.score)),
            value=f"{ev.source}: {ev.value}",
        )
        for ev in p.evidence
    ]
    identity = (
        [
            Identity(
                field=IdentityField.VERSION,
                confidence=max(m.confidence for m in methods),
                concluded_value=p.version or p.line,
                methods=methods,
            )
        ]
        if methods
        else None
    )
    occurrences = [Occurrence(location=x, bom_ref=f"{ref}#{_ref_path(x)}") for x in p.paths]
    kind = ComponentType.LIBRARY if p.key in _LIBRARY_PRODUCTS else ComponentType.APPLICATION
    return Component(
        type=kind,
        name=p.name,
        version=p.version,
        group="nvidia",
        purl=PackageURL.from_string(p.purl) if p.purl else None,
        cpe=p.cpes[0] if p.cpes else None,
        bom_ref=ref,
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=p.sha256)] if p.sha256 else [],
        properties=_props(
            [
                (V.PRODUCT_KEY, p.key),
                *((V.PRODUCT_CPE, c) for c in p.cpes),
                *((V.PRODUCT_PATH, x) for x in p.paths),
                (V.PRODUCT_TOOLKIT, p.toolkit),
                (V.PRODUCT_LINE, p.line),
                (V.DRIVER_BRANCH, p.branch),
                (V.OWNER_PURL, p.owner),
                (V.LAYER, p.layer),
            ]
        ),
        evidence=ComponentEvidence(identity=identity, occurrences=occurrences)
        if identity or occurrences
        else None,
    )


def _evidence(lib: GpuLibrary) -> Any:
    from cyclonedx.model.component_evidence import (
        AnalysisTechnique,
        ComponentEvidence,
        Identity,
        IdentityField,
        Method,
        Occurrence,
    )

    by_field: dict[str, list[Evidence]] = {}
    for ev in lib.ident.evidence:
        if ev.field in _IDENTITY_FIELD:
            by_field.setdefault(_IDENTITY_FIELD[ev.field], []).append(ev)
    identities = []
    for field_name, evs in sorted(by_field.items()):
        methods = [
            Method(
                technique=getattr(AnalysisTechnique, _TECHNIQUE.get(ev.method, "OTHER")),
                confidence=Decimal(str(ev.confidence.score)),
                value=f"{ev.source}: {ev.value}",
            )
            for ev in evs
        ]
        best = max(Decimal(str(ev.confidence.score)) for ev in evs)
        concluded = lib.ident.version if field_name == "VERSION" else lib.ident.family
        identities.append(
            Identity(
                field=getattr(IdentityField, field_name),
                confidence=best,
                concluded_value=concluded,
                methods=methods,
            )
        )
    # An explicit bom-ref per occurrence: cyclonedx-python-lib orders occurrences by bom-ref
    # first, and two absent bom-refs compare neither equal nor less, so without one the order
    # (and the BOM's bytes) changed from run to run.
    ref = _file_ref(lib)
    occurrences = [
        Occurrence(location=p, bom_ref=f"{ref}#occurrence:{_ref_path(p)}")
        for p in (lib.ref.path, *lib.aliases)
    ]
    occurrences += [
        Occurrence(
            location=lib.ref.path,
            bom_ref=f"{ref}#process:{p.pid}",
            additional_context=_loader_text(p),
        )
        for p in lib.loaded_by
    ]
    return ComponentEvidence(identity=identities or None, occurrences=occurrences)


def _loader_text(p: LoadedBy) -> str:
    """One process that maps the file, as a person reads it."""
    text = f"loaded by pid {p.pid}"
    if p.exe:
        text += f" ({p.exe})"
    if p.container_id:
        text += f" in container {p.engine + ':' if p.engine else ''}{p.container_id}"
    if p.pod_uid:
        text += f" of pod {p.pod_uid}"
    if p.deleted:
        text += "; deleted on disk"
    if p.sha256 is None:
        text += "; loaded bytes unreadable"
    return text


def loader_json(p: LoadedBy) -> str:
    """The `V.RUNTIME_PROCESS` value of one process (keys sorted, unknown ones left out)."""
    data: dict[str, object] = {
        "pid": p.pid,
        "exe": p.exe,
        "container": p.container_id,
        "engine": p.engine,
        "pod": p.pod_uid,
        "deleted": p.deleted or None,
        "sha256": p.sha256,
        "via": p.via.value,
    }
    return json.dumps({k: v for k, v in data.items() if v is not None}, sort_keys=True)


def _runtime_props(lib: GpuLibrary) -> list[tuple[str, str | None]]:
    if not lib.loaded_by and not lib.loaded_copy:
        return []
    containers = {p.container_id for p in lib.loaded_by if p.container_id}
    return [
        (V.RUNTIME_PROCESSES, str(len({p.pid for p in lib.loaded_by}))),
        (V.RUNTIME_CONTAINERS, str(len(containers))),
        (V.RUNTIME_ON_DISK, None if lib.on_disk else "false"),
        (V.RUNTIME_DISK_SHA256, lib.disk_sha256),
        (V.RUNTIME_DELETED, "true" if any(p.deleted for p in lib.loaded_by) else None),
        *((V.RUNTIME_PROCESS, loader_json(p)) for p in lib.loaded_by),
    ]


def _ref_path(path: str) -> str:
    """A path in a bom-ref, percent-encoded; a file name's undecodable byte (a surrogate escape
    of os.fsdecode) is that byte, where encoding it as UTF-8 raised."""
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        raw = path.encode("utf-8", "surrogatepass")
    return quote(raw, safe="/._-+")


def _file_ref(lib: GpuLibrary) -> str:
    path = _ref_path(lib.ref.path)
    # a loaded copy may share its path with the file on disk now: its bytes tell them apart
    return f"loaded:{lib.digests.sha256}:{path}" if lib.loaded_copy else f"file:{path}"


def file_pairs(lib: GpuLibrary) -> list[tuple[str, str | None]]:
    """A GPU library file's ``gpuprov:`` properties (its verdicts among them)."""
    ident = lib.ident
    return [
        (V.FILE_PATH, lib.ref.path),
        (V.FILE_ALIASES, ",".join(lib.aliases)),
        (V.LIBRARY_FAMILY, ident.family),
        (V.LIBRARY_COMPONENT, ident.component),
        (V.LIBRARY_VERSION, ident.version),
        (V.LIBRARY_CUDA_MAJOR, str(ident.cuda_major) if ident.cuda_major else None),
        (V.LIBRARY_ARCH, ident.arch),
        (V.LIBRARY_SONAME, ident.soname),
        (V.OWNER_PURL, lib.owner.purl if lib.owner else None),
        (V.INTEGRITY, lib.integrity.value),
        (V.INTEGRITY_REASON, lib.integrity_reason),
        (V.FILE_ERROR, lib.error),
        (V.LAYER, lib.ref.layer),
        (V.PROVENANCE, lib.provenance),
        (V.PROVENANCE_SIGNER, lib.provenance_signer),
        (V.PROVENANCE_CATALOG, lib.provenance_catalog),
        (V.PROVENANCE_REASON, lib.provenance_reason if lib.provenance else None),
        *((V.NOTE, n) for n in lib.notes),
        *_runtime_props(lib),
    ]


def _file_component(lib: GpuLibrary) -> Any:
    from cyclonedx.model import HashAlgorithm, HashType
    from cyclonedx.model.component import Component, ComponentType

    hashes = [HashType(alg=HashAlgorithm.SHA_256, content=lib.digests.sha256)]
    if lib.digests.md5:
        hashes.append(HashType(alg=HashAlgorithm.MD5, content=lib.digests.md5))
    props = _props(file_pairs(lib))
    return Component(
        type=ComponentType.FILE,
        name=lib.ref.path,
        version=lib.ident.version,
        bom_ref=_file_ref(lib),
        hashes=hashes,
        properties=props,
        evidence=_evidence(lib),
    )


def build_bom(
    result: ScanResult, *, serial_number: UUID | None = None, timestamp: datetime | None = None
) -> Any:
    """Build the cyclonedx-python-lib `Bom` for a scan result; the serial number and the
    timestamp are fresh (the library's defaults) unless given."""
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType

    bom = Bom(serial_number=serial_number)
    if timestamp is not None:
        bom.metadata.timestamp = timestamp
    asset = _asset_component(result)
    bom.metadata.component = asset
    bom.metadata.tools.components.add(
        Component(type=ComponentType.APPLICATION, name="gpuprov", version=result.tool_version)
    )
    meta_props = [(V.SCAN_FINDING, f"{f.kind}: {f.message}") for f in result.findings]
    meta_props += [(V.SCAN_SKIPPED, f"{s.stage}: {s.path}: {s.reason}") for s in result.skipped]
    for p in _props(meta_props):
        bom.metadata.properties.add(p)

    pkg_components = {pkg.purl: _package_component(pkg) for pkg in result.packages}
    for comp in pkg_components.values():
        bom.components.add(comp)
    files_by_owner: dict[str, list[Any]] = {}
    unowned = []
    for lib in result.libraries:
        comp = _file_component(lib)
        bom.components.add(comp)
        if lib.owner is not None and lib.owner.purl in pkg_components:
            files_by_owner.setdefault(lib.owner.purl, []).append(comp)
        else:
            unowned.append(comp)
    node: list[Any] = []
    if result.node is not None:
        node = [_gpu_component(g) for g in result.node.gpus]
        node += [_injected_component(i) for i in result.node.injected]
        for comp in node:
            bom.components.add(comp)
    products = []
    for p in result.products:
        comp = _product_component(p)
        bom.components.add(comp)
        if p.owner is not None and p.owner in pkg_components:
            files_by_owner.setdefault(p.owner, []).append(comp)
        else:
            products.append(comp)
    for purl, files in files_by_owner.items():
        bom.register_dependency(pkg_components[purl], files)
    bom.register_dependency(asset, [*pkg_components.values(), *unowned, *node, *products])
    return bom


def to_json(
    result: ScanResult,
    spec_version: str = "1.6",
    *,
    serial_number: UUID | None = None,
    timestamp: datetime | None = None,
) -> str:
    """Serialize a scan result as CycloneDX JSON of the given spec version (serial number and
    timestamp: see `build_bom`)."""
    from cyclonedx.output import make_outputter
    from cyclonedx.schema import OutputFormat

    schema = _schema(spec_version)
    bom = build_bom(result, serial_number=serial_number, timestamp=timestamp)
    outputter = make_outputter(bom, OutputFormat.JSON, schema)
    return str(outputter.output_as_string(indent=2))


def validate_json(document: str, spec_version: str = "1.6") -> str | None:
    """Validate a CycloneDX JSON document against its schema; the first error or None."""
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(_schema(spec_version)).validate_str(document)
    return None if error is None else str(error)
