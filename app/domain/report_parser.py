"""Parse and check one CycloneDX JSON report into the normalized values that ingest stores.

Checks run in order and stop at the first failing step, each answering 422 (413 for the size
caps) with JSON pointers: UTF-8, JSON syntax and numbers, keys given twice in one object, nesting
depth (`scanner.loaders.load_json`) and unstorable strings, CycloneDX identity and
``specVersion`` (1.4-1.7), the component and property caps, the schema of that version,
duplicate ``bom-ref``s, then the ``gpuprov:`` property contract (docs/bom-properties.md), the
timestamp's range, and every stored value against its column
(`app.domain.columns`), so the database never sees a value it would refuse. Other tools' BOMs
are recognized by purl and file name (`app.domain.recognize`). An SPDX 2.2 / 2.3 document
(JSON or tag-value, told by its content) is read and checked by spdx-tools within the same
limits, then read as another tool's CycloneDX BOM (`scanner.bom.spdx_mapping`); its refusals
name the SPDX field, rule or element instead of a pointer.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, NoReturn

from app.domain.columns import ColumnLimit, limits_of, max_length, misfit
from app.domain.schema import SCHEMA_VERSIONS, schema_problems
from app.domain.versions import normalize_version
from app.errors import InvalidReport, PayloadTooLarge
from app.storage.base import Base
from app.storage.tables import (
    Artifact,
    Asset,
    AssetLabel,
    AssetProduct,
    NodeContainer,
    NodeGpu,
    NodeInjected,
    Package,
    Scan,
)
from scanner import vocabulary as v
from scanner.advisories.conditions import BadFact, facts_of, names_in
from scanner.bom.foreign import (
    PATH_PROPERTIES,
    BadComponent,
    ForeignLibrary,
    NotAnAsset,
    asset_of,
    first,
    gpu_libraries,
    labels_of,
    lists_operating_system,
    loaded_fields,
    package_manager,
    package_source,
    process_of,
    properties,
    sha256_of,
    tool_of,
    walk,
)
from scanner.bom.spdx_mapping import Mapped, read_spdx
from scanner.bom.spdx_reader import SpdxLimits, SpdxRefused, generation, tag_value
from scanner.detect.packages import purl_qualifier
from scanner.loaders import DocumentError, load_json

SUPPORTED_SPEC_VERSIONS = SCHEMA_VERSIONS
MAX_PROBLEMS = 5
_FAMILY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+\-]{0,63}$")
_MAX_LABEL_KEY = max_length(AssetLabel, "key")
_LABEL_KEY = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._/\-]{{0,{_MAX_LABEL_KEY - 1}}}$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_MAX_IDENTITY = max_length(Asset, "identity")
_MAX_CONTAINER = max_length(NodeContainer, "container_id")
_MAX_IMAGE_NAME = max_length(NodeContainer, "image_name")
_MAX_LABEL_VALUE = max_length(AssetLabel, "value")
#: a label as KEY=VALUE, the rules of `check_label` as one regular expression (the API documents
#: its ``label`` parameters with it); the same in Python's and ECMA-262's dialects
LABEL_PATTERN = (
    rf"^[A-Za-z0-9][A-Za-z0-9._/\-]{{0,{_MAX_LABEL_KEY - 1}}}"
    rf"=[^\u0000-\u001f\u007f]{{0,{_MAX_LABEL_VALUE}}}$"
)
#: the earliest report timestamp accepted: the Unix epoch, where an unset clock starts
EARLIEST_TIMESTAMP = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ReportLimits:
    """What one report may cost: the service's settings, checked before the schema runs."""

    max_depth: int = 64
    max_components: int = 100_000
    max_properties: int = 1_000  # per component (and per metadata object)
    max_clock_skew: timedelta = timedelta(minutes=5)
    max_labels: int = 100  # distinct gpuprov:label: properties of the asset


@dataclass(frozen=True, slots=True)
class ImageTrustFacts:
    """What the image's signatures and attestations established, as the report states it."""

    signer: str | None = None
    slsa_level: int | None = None
    builder: str | None = None
    source_repo: str | None = None
    rejected: tuple[str, ...] = ()

    @property
    def present(self) -> bool:
        """Whether the report said anything about image signatures at all."""
        return bool(
            self.signer or self.slsa_level is not None or self.builder or self.source_repo
        ) or bool(self.rejected)


@dataclass(frozen=True, slots=True)
class ReportContainer:
    """A container a host report says runs there, with the image it runs."""

    engine: str
    namespace: str
    container_id: str
    image_digest: str | None
    image_config: str | None
    image_name: str


@dataclass(frozen=True, slots=True)
class ReportGpu:
    """A GPU a host report lists (a ``device`` component with ``gpuprov:gpu:bus-id``)."""

    bus_id: str
    model: str
    uuid: str | None = None
    minor: int | None = None
    vbios: str | None = None
    architecture: str | None = None
    compute_capability: str | None = None


@dataclass(frozen=True, slots=True)
class ReportInjected:
    """A host file the container toolkit injects into the host's containers."""

    host_path: str
    sha256: str | None
    family: str | None
    version: str | None
    container_paths: tuple[str, ...]
    devices: tuple[str, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReportAsset:
    """The asset a report describes."""

    kind: str  # "image" | "host"
    identity: str  # manifest digest, "config:<digest>", machine id, or "name:<name>"
    name: str
    labels: Mapping[str, str]
    details: Mapping[str, str]
    trust: ImageTrustFacts = field(default_factory=ImageTrustFacts)
    #: a host's running containers (`gpuprov:node:container`), each linked to its image
    containers: tuple[ReportContainer, ...] = ()
    #: a host's GPUs (``device`` components), by PCI bus id
    gpus: tuple[ReportGpu, ...] = ()
    #: the host files its container toolkit injects (``gpuprov:injected:host-path``)
    injected: tuple[ReportInjected, ...] = ()
    #: a host's condition facts (``gpuprov:condition:*``): name -> (value, where it was read)
    conditions: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReportLibrary:
    """One GPU library a report lists: a file with a digest, or a package from another tool."""

    kind: str  # "file" | "package"
    name: str
    family: str
    component: str | None = None
    path: str | None = None
    version: str | None = None
    cuda_major: int | None = None
    arch: str | None = None
    sha256: str | None = None
    integrity: str | None = None
    integrity_reason: str | None = None
    provenance: str | None = None
    provenance_signer: str | None = None
    provenance_catalog: str | None = None
    provenance_reason: str | None = None
    layer: str | None = None
    owner_purl: str | None = None
    soname: str | None = None
    aliases: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # --runtime: the live processes that map these bytes (docs/bom-properties.md)
    loaded_processes: int = 0
    loaded_containers: int = 0
    loaded_deleted: bool = False
    loaded_copy: bool = False
    disk_sha256: str | None = None
    loaded_by: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ReportPackage:
    """An owner package of a GPU library, or a GPU package."""

    name: str
    purl: str | None
    manager: str | None
    version: str | None
    bom_ref: str | None
    #: the source package it was built from (dpkg's ``Source:``), where the BOM says
    source_name: str | None = None
    source_version: str | None = None


@dataclass(frozen=True, slots=True)
class ReportProduct:
    """An NVIDIA product a bulletin may name (a ``gpuprov:product:key`` component)."""

    key: str
    version: str | None
    toolkit: str | None = None
    line: str | None = None
    branch: str | None = None
    paths: tuple[str, ...] = ()
    sha256: str | None = None
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class Report:
    """A checked report, ready to store."""

    spec_version: str
    serial_number: str | None
    bom_version: int
    content_sha256: str
    timestamp: datetime | None
    tool: str
    producer: str  # "gpuprov" | "trivy" | "syft" | "cdxgen" | "other"
    asset: ReportAsset
    libraries: tuple[ReportLibrary, ...]
    packages: tuple[ReportPackage, ...]
    findings: tuple[str, ...] = ()
    skipped: tuple[str, ...] = field(default=())
    #: what a --runtime host scan covered; None when it did not look at live processes
    runtime: Mapping[str, Any] | None = None
    #: the products NVIDIA's bulletins name (docs/bom-properties.md), for advisory matching
    products: tuple[ReportProduct, ...] = ()

    @property
    def dedup_key(self) -> str:
        """Serial number and BOM version, or the content digest of a BOM without a serial."""
        if self.serial_number:
            return f"{self.serial_number}#v{self.bom_version}"
        return f"sha256:{self.content_sha256}"


def _pointer(path: Sequence[str | int]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _fail(message: str, problems: Sequence[tuple[str, str]] = ()) -> NoReturn:
    details = [{"pointer": p, "message": m} for p, m in problems]
    raise InvalidReport(message, details=details)


def parse_report(
    data: bytes, limits: ReportLimits = ReportLimits(), *, now: datetime | None = None
) -> Report:
    """Check a report and normalize it; raises `InvalidReport` (422) with pointers on failure,
    or `PayloadTooLarge` (413) over a size cap. With `now`, a timestamp more than the clock
    skew ahead of it is refused."""
    text = _decode(data)
    if tag_value(text):
        return _spdx_report(_read_spdx(text, limits), data, limits, now)
    document = _load_json(text, limits.max_depth)
    _check_strings(document, text)
    if generation(document) is not None:
        return _spdx_report(_read_spdx(document, limits), data, limits, now)
    if not isinstance(document, dict) or document.get("bomFormat") != "CycloneDX":
        _fail(
            "not a CycloneDX BOM: the top level must be an object with bomFormat 'CycloneDX'",
            [("/bomFormat", "expected 'CycloneDX'")],
        )
    spec = document.get("specVersion")
    if not isinstance(spec, str) or spec not in SUPPORTED_SPEC_VERSIONS:
        supported = ", ".join(SUPPORTED_SPEC_VERSIONS)
        _fail(
            f"unsupported CycloneDX specVersion {spec!r}; supported: {supported}",
            [("/specVersion", f"expected one of {supported}")],
        )
    _check_size(document, limits)
    _check_schema(document, text, spec)
    _check_unique_bom_refs(document)
    report = _normalize(document, spec, hashlib.sha256(data).hexdigest())
    _check_timestamp(report.timestamp, now, limits.max_clock_skew)
    return report


def _read_spdx(source: str | dict[str, Any], limits: ReportLimits) -> Mapped:
    spdx_limits = SpdxLimits(
        max_elements=limits.max_components, max_per_element=limits.max_properties
    )
    try:
        return read_spdx(source, spdx_limits)
    except SpdxRefused as e:
        error = PayloadTooLarge if e.too_large else InvalidReport
        raise error(
            f"SPDX {e.field}: {e.message}",
            details=[{"pointer": "", "spdx": e.field, "message": e.message[:500]}],
        ) from None


def _spdx_report(mapped: Mapped, data: bytes, limits: ReportLimits, now: datetime | None) -> Report:
    """The checks that follow the schema, on an SPDX document's reading; a refusal names the
    SPDX element and field its pointer comes from."""
    document = mapped.bom
    try:
        _check_size(document, limits)
        _check_unique_bom_refs(document)
        report = _normalize(document, mapped.spec, hashlib.sha256(data).hexdigest())
        _check_timestamp(report.timestamp, now, limits.max_clock_skew)
    except (InvalidReport, PayloadTooLarge) as e:
        message = _COMPONENT_POINTER.sub(lambda m: mapped.origin(m.group(0)), e.message)
        details = [
            {"pointer": "", "spdx": mapped.origin(str(d.get("pointer", ""))), **_message(d)}
            for d in e.details
        ]
        raise type(e)(f"SPDX: {message}", details=details) from None
    return report


_COMPONENT_POINTER = re.compile(r"/(?:components/\d+|metadata(?:/component)?|serialNumber)[\w/~-]*")


def _message(detail: Mapping[str, Any]) -> dict[str, str]:
    return {"message": str(detail.get("message", ""))}


def _decode(data: bytes) -> str:
    # RFC 8259 section 8.1: JSON exchanged between systems is UTF-8. Python's json would guess
    # UTF-16/32 and let encoded surrogates through ("surrogatepass"); neither can be stored.
    if data.startswith(codecs.BOM_UTF8):  # allowed, and ignored (RFC 8259 section 8.1)
        data = data[len(codecs.BOM_UTF8) :]
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in data[:4]:
        _fail(
            "the body is UTF-16 or UTF-32; send the report as UTF-8 JSON",
            [("", "not UTF-8")],
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        _fail(
            f"the body is not UTF-8 JSON: {e.reason} at byte {e.start} "
            f"({data[e.start : e.start + 3].hex(' ')})",
            [("", "not UTF-8")],
        )


def _load_json(text: str, max_depth: int) -> Any:
    # the one strict JSON reader: numbers, duplicate keys and nesting (scanner.loaders)
    try:
        return load_json(text, max_depth=max_depth)
    except DocumentError as e:
        _fail(str(e), [("", str(e))])


_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|d[89a-f])", re.IGNORECASE)


def _check_strings(document: Any, text: str) -> None:
    # Strings no database column can hold verbatim (NUL, lone surrogates). Valid UTF-8 JSON
    # carries those only as \u escapes, so the walk runs only when such an escape is present.
    if _SUSPECT_ESCAPE.search(text) is None:
        return
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                _check_string(key, path)
                stack.append((value, (*path, key)))
        elif isinstance(node, list):
            stack.extend((value, (*path, i)) for i, value in enumerate(node))
        elif isinstance(node, str):
            _check_string(node, path)


def _check_string(text: str, path: tuple[str | int, ...]) -> None:
    if "\x00" in text:
        _fail("a string contains a NUL character (\\u0000)", [(_pointer(path), "NUL character")])
    if _SURROGATE.search(text):
        _fail(
            "a string contains an unpaired UTF-16 surrogate",
            [(_pointer(path), "unpaired surrogate")],
        )


def _check_size(document: dict[str, Any], limits: ReportLimits) -> None:
    # before the schema: validating and normalizing cost time and memory per component
    roots: list[tuple[Any, tuple[str | int, ...]]] = [(document.get("components"), ("components",))]
    metadata = document.get("metadata")
    if isinstance(metadata, dict):
        _check_property_count(metadata, ("metadata",), limits)
        root = metadata.get("component")
        if isinstance(root, dict):
            _check_property_count(root, ("metadata", "component"), limits)
            _check_label_count(root, limits)
            roots.append((root.get("components"), ("metadata", "component", "components")))
    count = 0
    for components, path in roots:
        for component, where in walk(components, path):
            count += 1
            if count > limits.max_components:
                raise PayloadTooLarge(
                    f"the report lists more than {limits.max_components} components, the "
                    "limit (GPUPROV_MAX_REPORT_COMPONENTS)",
                    details=[{"pointer": _pointer(where), "message": "one too many"}],
                )
            _check_property_count(component, where, limits)


def _check_property_count(
    item: Mapping[str, Any], where: tuple[str | int, ...], limits: ReportLimits
) -> None:
    properties = item.get("properties")
    if isinstance(properties, list) and len(properties) > limits.max_properties:
        raise PayloadTooLarge(
            f"{_pointer(where)} has {len(properties)} properties, more than the limit of "
            f"{limits.max_properties} (GPUPROV_MAX_COMPONENT_PROPERTIES)",
            details=[{"pointer": _pointer((*where, "properties")), "message": "too many"}],
        )


def _check_label_count(component: Mapping[str, Any], limits: ReportLimits) -> None:
    properties = component.get("properties")
    if not isinstance(properties, list):
        return
    keys = {
        p["name"]
        for p in properties
        if isinstance(p, dict)
        and isinstance(p.get("name"), str)
        and p["name"].startswith(v.ASSET_LABEL_PREFIX)
    }
    if len(keys) > limits.max_labels:
        raise PayloadTooLarge(
            f"the asset has {len(keys)} {v.ASSET_LABEL_PREFIX} labels, more than the limit of "
            f"{limits.max_labels} (GPUPROV_MAX_ASSET_LABELS)",
            details=[{"pointer": "/metadata/component/properties", "message": "too many labels"}],
        )


def _check_schema(document: Any, text: str, spec: str) -> None:
    problems = schema_problems(document, text, spec, MAX_PROBLEMS)
    if problems:
        _fail(f"the BOM does not conform to the CycloneDX {spec} schema", problems)


def _check_unique_bom_refs(document: dict[str, Any]) -> None:
    seen: dict[str, tuple[str | int, ...]] = {}
    problems: list[tuple[str, str]] = []
    items: list[tuple[dict[str, Any], tuple[str | int, ...]]] = []
    metadata = document.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("component"), dict):
        root = metadata["component"]
        items.append((root, ("metadata", "component")))
        items += walk(root.get("components"), ("metadata", "component", "components"))
    items += walk(document.get("components"), ("components",))
    items += walk(document.get("services"), ("services",))
    for item, path in items:
        ref = item.get("bom-ref")
        if not isinstance(ref, str):
            continue
        if ref in seen:  # pointers are spelled out only for the duplicates
            first = _pointer((*seen[ref], "bom-ref"))
            here = _pointer((*path, "bom-ref"))
            problems.append((here, f"bom-ref {ref!r} already used at {first}"))
        else:
            seen[ref] = path
    if problems:
        _fail("duplicate bom-ref values", problems[:MAX_PROBLEMS])


def _normalize(document: dict[str, Any], spec: str, content_sha256: str) -> Report:
    metadata = document.get("metadata") or {}
    meta_props = properties(metadata)
    tool, producer = tool_of(metadata)
    timestamp = _timestamp(metadata.get("timestamp"))
    asset = _asset(metadata, lists_operating_system(document))
    if asset.kind == "host":
        injected = _injected(document)
        details = {**asset.details, **({"injected_files": str(len(injected))} if injected else {})}
        asset = replace(asset, gpus=_gpus(document), injected=injected, details=details)
    libraries, packages, skipped = _libraries(document)
    if any(lib.family for lib in libraries if lib.kind == "file") and producer == "other":
        producer = "gpuprov" if _uses_vocabulary(document) else producer
    serial_number = document.get("serialNumber")
    bom_version = int(document.get("version", 1))
    _check_column(Scan, "serial_number", serial_number, lambda _: "/serialNumber")
    _check_column(Scan, "bom_version", bom_version, lambda _: "/version")
    _check_column(Scan, "tool", tool, lambda _: "/metadata/tools")
    findings = tuple(meta_props.get(v.SCAN_FINDING, ()))
    skipped = tuple(meta_props.get(v.SCAN_SKIPPED, ())) + skipped
    for name, values in (("findings", findings), ("skipped", skipped)):
        _check_column(Scan, name, values, lambda bad: _origin(metadata, ("metadata",), bad, ()))
    return Report(
        spec_version=spec,
        serial_number=serial_number,
        bom_version=bom_version,
        content_sha256=content_sha256,
        timestamp=timestamp,
        tool=tool,
        producer=producer,
        asset=asset,
        libraries=libraries,
        packages=packages,
        findings=findings,
        skipped=skipped,
        runtime=_runtime_summary(metadata),
        products=_products(document),
    )


_MAX_PRODUCTS = 1024
_MAX_PRODUCT_PATHS = 64
_PRODUCT_KEY = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")


def _products(document: Mapping[str, Any]) -> tuple[ReportProduct, ...]:
    """The product components (``gpuprov:product:key``), checked against their columns."""
    out: list[ReportProduct] = []
    for component, path in walk(document.get("components"), ("components",)):
        props = properties(component)
        key = first(props, v.PRODUCT_KEY)
        if key is None:
            continue
        where = _pointer((*path, "properties"))
        if not _PRODUCT_KEY.fullmatch(key):
            _fail(
                f"{v.PRODUCT_KEY} must be a product key (cuda-toolkit), not {key[:40]!r}",
                [(where, "bad product key")],
            )
        version = component.get("version")
        product = ReportProduct(
            key=key,
            version=version if isinstance(version, str) and version else None,
            toolkit=first(props, v.PRODUCT_TOOLKIT),
            line=first(props, v.PRODUCT_LINE),
            branch=first(props, v.DRIVER_BRANCH),
            paths=tuple(props.get(v.PRODUCT_PATH, ())[:_MAX_PRODUCT_PATHS]),
            sha256=sha256_of(component),
            owner=first(props, v.OWNER_PURL),
        )
        for column in ("version", "toolkit", "line", "branch", "owner"):
            _check_column(
                AssetProduct,
                column,
                getattr(product, column),
                lambda bad, where=where: where,  # type: ignore[misc]
            )
        out.append(product)
        if len(out) > _MAX_PRODUCTS:
            _fail(f"a report lists more than {_MAX_PRODUCTS} products", [(where, "too many")])
    return tuple(out)


_RUNTIME_COUNTS = {
    "processes": v.RUNTIME_SCANNED,
    "loading": v.RUNTIME_LOADING,
    "unreadable_processes": v.RUNTIME_UNREADABLE,
    "unreadable_mappings": v.RUNTIME_UNREADABLE_MAPPINGS,
}
_MAX_COUNT = 10_000_000


def _count(text: str | None, name: str, pointer: str) -> int | None:
    if text is None:
        return None
    if not text.isdigit() or len(text) > 8 or int(text) > _MAX_COUNT:
        _fail(f"{name} must be a count (an integer)", [(pointer, f"bad {name} {text[:20]!r}")])
    return int(text)


def _runtime_summary(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    component = metadata.get("component")
    props = properties(component) if isinstance(component, Mapping) else {}
    proc = first(props, v.RUNTIME_PROC)
    if proc is None:
        return None
    pointer = "/metadata/component/properties"
    if len(proc) > 1024:
        _fail(f"{v.RUNTIME_PROC} is longer than 1024 characters", [(pointer, "long")])
    summary: dict[str, Any] = {"proc": proc}
    for key, name in _RUNTIME_COUNTS.items():
        summary[key] = _count(first(props, name), name, pointer) or 0
    return summary


def _loaded(
    props: Mapping[str, list[str]], fail: Callable[[str, str, str], NoReturn]
) -> dict[str, Any]:
    """The ReportLibrary fields of a file's ``gpuprov:runtime:`` properties, each checked."""
    processes: list[dict[str, Any]] = []
    for value in props.get(v.RUNTIME_PROCESS, ()):
        process = process_of(value)
        if process is None:
            fail(
                f"{v.RUNTIME_PROCESS} must be a JSON object with an integer pid",
                "properties",
                f"bad process {value[:60]!r}",
            )
        processes.append(process)
    disk = first(props, v.RUNTIME_DISK_SHA256)
    if disk is not None and not _SHA256.fullmatch(disk):
        fail(
            f"{v.RUNTIME_DISK_SHA256} must be 64 hexadecimal digits",
            "properties",
            f"bad digest {disk[:80]!r}",
        )
    for name in (v.RUNTIME_PROCESSES, v.RUNTIME_CONTAINERS):
        declared = first(props, name)
        if declared is not None and (not declared.isdigit() or len(declared) > 8):
            fail(f"{name} must be an integer", "properties", "bad count")
    return {
        **loaded_fields(processes, props),
        "loaded_by": tuple(processes),
    }


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        timestamp = datetime.fromisoformat(value)
    except ValueError:
        _fail(
            "metadata.timestamp is not an RFC 3339 date-time",
            [("/metadata/timestamp", "unparseable")],
        )
    if timestamp.tzinfo is None:
        _fail("metadata.timestamp needs a time zone offset", [("/metadata/timestamp", "no offset")])
    try:  # 0001-01-01T00:00+01:00 and 9999-12-31T23:00-05:00 have no UTC datetime
        utc = timestamp.astimezone(UTC)
    except OverflowError:
        _fail(
            f"metadata.timestamp {value!r} is out of range in UTC",
            [("/metadata/timestamp", "out of range")],
        )
    if utc < EARLIEST_TIMESTAMP:
        _fail(
            f"metadata.timestamp {value!r} is before {EARLIEST_TIMESTAMP:%Y-%m-%d}",
            [("/metadata/timestamp", "too early")],
        )
    return utc


def _check_timestamp(timestamp: datetime | None, now: datetime | None, skew: timedelta) -> None:
    # A report dated in the future would stay its asset's latest until that date, hiding every
    # real report after it; the clocks of agent and service may differ by `skew`.
    if timestamp is None or now is None or timestamp <= now + skew:
        return
    _fail(
        f"metadata.timestamp {timestamp.isoformat()} is ahead of the service's clock "
        f"({now.isoformat(timespec='seconds')}) by more than the accepted clock skew of "
        f"{int(skew.total_seconds())} s (GPUPROV_MAX_CLOCK_SKEW_SECONDS); check the clock of "
        "the host that made the report",
        [("/metadata/timestamp", "in the future")],
    )


def _uses_vocabulary(document: Mapping[str, Any]) -> bool:
    return any(
        name.startswith(v.NS + ":")
        for component, _ in walk(document.get("components"), ("components",))
        for name in properties(component)
    )


def _asset(metadata: Mapping[str, Any], operating_system: bool) -> ReportAsset:
    component = metadata.get("component")
    if not isinstance(component, dict):
        _fail(
            "metadata.component is required: it names the image or host the BOM describes",
            [("/metadata/component", "missing")],
        )
    props = properties(component)
    declared = first(props, v.ASSET_KIND)
    if declared is not None and declared not in ("image", "host"):
        _fail(
            f"{v.ASSET_KIND} must be 'image' or 'host', not {declared!r}",
            [("/metadata/component/properties", "bad asset kind")],
        )
    try:  # the one reading of the asset, as `gate --bom` reads it
        head = asset_of(metadata, operating_system=operating_system)
    except NotAnAsset as e:
        _fail(str(e), [("/metadata/component", "neither an image nor a host")])
    kind, name = head.kind, head.name
    if not name:
        _fail("metadata.component has no name", [("/metadata/component/name", "empty")])
    where = ("metadata", "component")
    _check_column(
        Asset, "name", name, lambda bad: _origin(component, where, bad, ("name", v.HOST_HOSTNAME))
    )
    details: dict[str, str] = {}
    purl = component.get("purl") if isinstance(component.get("purl"), str) else None
    if kind == "image":
        image_id = first(props, v.IMAGE_ID)
        if image_id is not None and not _DIGEST.fullmatch(image_id):
            _fail(
                f"{v.IMAGE_ID} must be a config digest sha256:<64 lowercase hex>",
                [("/metadata/component/properties", f"bad image id {image_id[:80]!r}")],
            )
        digest, config = head.digest, head.config
        identity = digest or (f"config:{config}" if config else f"name:{name}")
        details.update(
            {
                "reference": first(props, v.IMAGE_REFERENCE) or name,
                "digest": digest or "",
                "config_digest": config or "",
            },
        )
        platform = first(props, v.IMAGE_PLATFORM) or purl_qualifier(purl, "arch")
        if platform:
            details["platform"] = platform
    else:
        machine_id = head.machine_id
        identity = machine_id or f"name:{name}"
        details.update({"hostname": name, "machine_id": machine_id or ""})
    for key, prop in (
        ("slsa_build_level", v.SLSA_BUILD_LEVEL),
        ("slsa_builder", v.SLSA_BUILDER),
        ("image_signer", v.IMAGE_SIGNER),
    ):
        if value := first(props, prop):
            details[key] = value
    trust = _image_trust(props)
    # labels in the BOM (an image's config labels, say) are kept when they fit; the agent's own
    # labels (query parameters) are checked strictly instead (`check_label`)
    labels = labels_of(props)
    if len(identity) > _MAX_IDENTITY:
        # never cut: two assets whose identities share a prefix would become one
        source = ("name", v.HOST_MACHINE_ID, "aquasecurity:trivy:ImageID", "oci:image:Id")
        _fail(
            f"the asset's identity is longer than {_MAX_IDENTITY} characters: give the "
            "image a digest or the host a machine id, or a shorter name",
            [(_origin(component, where, identity.split(":", 1)[-1], source), "too long")],
        )
    if kind == "host":
        details.update(_node_details(component, props))
    details = {k: val for k, val in details.items() if val}
    _check_column(Asset, "details", details, lambda bad: _origin(component, where, bad, ()))
    trust_values: tuple[tuple[str, object], ...] = (
        ("image_signer", trust.signer),
        ("slsa_builder", trust.builder),
        ("slsa_source_repo", trust.source_repo),
        ("signature_rejected", trust.rejected),
    )
    for column, fact in trust_values:
        _check_column(Scan, column, fact, lambda bad: _origin(component, where, bad, ()))
    return ReportAsset(
        kind=kind,
        identity=identity,
        name=name,
        labels=labels,
        details=details,
        trust=trust,
        containers=_containers(component, props) if kind == "host" else (),
        conditions=_conditions(component, props, kind),
    )


def _conditions(
    component: Mapping[str, Any], props: Mapping[str, list[str]], kind: str
) -> dict[str, tuple[str, str | None]]:
    """A host's condition facts (docs/advisories.md, "Conditions"), checked. An image's BOM
    claiming one is refused: the facts are a node's own, and an image runs on many."""
    where = ("metadata", "component")
    claimed = names_in(props)
    if claimed and kind != "host":
        _fail(
            f"{claimed[0]}: an image's BOM cannot carry a host's condition facts "
            "(they are the scanned node's own)",
            [(_origin(component, where, "", (claimed[0],)), "host condition on an image")],
        )
    try:
        return facts_of(props)
    except BadFact as e:
        name = str(e).split(":", 1)[0]
        prop = v.CONDITION_PREFIX + name
        _fail(
            f"{prop} {str(e).split(': ', 1)[-1]}",
            [(_origin(component, where, "", (prop,)), "bad condition fact")],
        )


_ENGINES = ("containerd", "docker")
_CONTAINER_FIELD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def _containers(
    component: Mapping[str, Any], props: Mapping[str, list[str]]
) -> tuple[ReportContainer, ...]:
    """The host's `gpuprov:node:container` values: ENGINE NAMESPACE ID DIGEST CONFIG NAME."""
    out: dict[tuple[str, str, str], ReportContainer] = {}
    for value in props.get(v.NODE_CONTAINER, ()):
        parts = value.split(" ", 5)
        where = _origin(component, ("metadata", "component"), value, (v.NODE_CONTAINER,))
        if len(parts) != 6:
            _fail(
                f"{v.NODE_CONTAINER} is 'ENGINE NAMESPACE ID DIGEST CONFIG NAME'",
                [(where, "bad container")],
            )
        engine, namespace, cid, digest, config, name = (None if p == "-" else p for p in parts)
        problem = None
        if engine not in _ENGINES:
            problem = f"engine must be one of {', '.join(_ENGINES)}"
        elif cid is None or not _CONTAINER_FIELD.fullmatch(cid) or len(cid) > _MAX_CONTAINER:
            problem = "the container id is not an id"
        elif namespace is not None and (
            not _CONTAINER_FIELD.fullmatch(namespace) or len(namespace) > _MAX_CONTAINER
        ):
            problem = "the namespace is not a namespace name"
        elif any(d is not None and not _DIGEST.fullmatch(d) for d in (digest, config)):
            problem = "image digests are sha256:<64 lowercase hex> or '-'"
        elif name is not None and (len(name) > _MAX_IMAGE_NAME or _CONTROL.search(name)):
            problem = f"the image name is longer than {_MAX_IMAGE_NAME} or holds control bytes"
        if problem is not None:
            _fail(f"{v.NODE_CONTAINER}: {problem}", [(where, "bad container")])
        assert engine is not None and cid is not None
        out[(engine, namespace or "", cid)] = ReportContainer(
            engine, namespace or "", cid, digest, config, name or ""
        )
    return tuple(out.values())


#: node facts of a host (docs/bom-properties.md) -> asset details key, and the form a value
#: must have (a report that says otherwise is refused, naming the property)
_NODE_DETAILS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("driver_version", v.DRIVER_VERSION, re.compile(r"\d{1,6}(?:\.\d{1,6}){1,3}")),
    ("driver_flavor", v.DRIVER_FLAVOR, re.compile(r"open|proprietary")),
    ("driver_cuda_max", v.DRIVER_CUDA_MAX, re.compile(r"\d{1,3}\.\d{1,3}")),
    ("driver_cuda_max_at_least", v.DRIVER_CUDA_MAX_AT_LEAST, re.compile(r"true")),
    ("gpu_count", v.GPU_COUNT, re.compile(r"\d{1,4}")),
    ("l4t_release", v.L4T_RELEASE, re.compile(r"\d{1,4}(?:\.\d{1,4}){1,2}")),
    ("jetpack_release", v.JETPACK_RELEASE, re.compile(r"[0-9A-Za-z][0-9A-Za-z. ]{0,31}")),
    ("jetpack_cuda", v.JETPACK_CUDA, re.compile(r"\d{1,3}\.\d{1,3}")),
)


def _node_details(component: Mapping[str, Any], props: Mapping[str, list[str]]) -> dict[str, str]:
    """A host's driver, Jetson release and GPU count as asset details."""
    out: dict[str, str] = {}
    for key, prop, form in _NODE_DETAILS:
        value = first(props, prop)
        if value is None:
            continue
        if not form.fullmatch(value):
            where = _origin(component, ("metadata", "component"), value, (prop,))
            _fail(f"{prop} must match {form.pattern}, not {value[:40]!r}", [(where, "bad value")])
        out[key] = value
    return out


_GPU_FIELDS = ("model", "uuid", "vbios", "architecture", "compute_capability")
_BUS_ID = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_MAX_GPUS = 256


def _gpus(document: Mapping[str, Any]) -> tuple[ReportGpu, ...]:
    """The GPU ``device`` components of a host report (``gpuprov:gpu:bus-id``), checked."""
    out: dict[str, ReportGpu] = {}
    for component, path in walk(document.get("components"), ("components",)):
        props = properties(component)
        if component.get("type") != "device" or v.GPU_BUS_ID not in props:
            continue
        bus = first(props, v.GPU_BUS_ID) or ""
        if not _BUS_ID.fullmatch(bus):
            _fail(
                f"{v.GPU_BUS_ID} must be a PCI bus id (0000:17:00.0), not {bus[:40]!r}",
                [(_pointer((*path, "properties")), "bad bus id")],
            )
        minor = first(props, v.GPU_MINOR)
        if minor is not None and not re.fullmatch(r"\d{1,4}", minor):
            _fail(
                f"{v.GPU_MINOR} must be a number, not {minor[:40]!r}",
                [(_pointer((*path, "properties")), "bad minor")],
            )
        gpu = ReportGpu(
            bus_id=bus,
            model=str(component.get("name") or ""),
            uuid=first(props, v.GPU_UUID),
            minor=int(minor) if minor is not None else None,
            vbios=first(props, v.GPU_VBIOS),
            architecture=first(props, v.GPU_ARCHITECTURE),
            compute_capability=first(props, v.GPU_COMPUTE_CAPABILITY),
        )
        for column in _GPU_FIELDS:
            _check_column(
                NodeGpu,
                column,
                getattr(gpu, column),
                lambda bad, path=path: _pointer((*path, "properties")),  # type: ignore[misc]
            )
        out[bus] = gpu
        if len(out) > _MAX_GPUS:
            _fail(f"a host report lists more than {_MAX_GPUS} GPUs", [(_pointer(path), "too many")])
    return tuple(out[b] for b in sorted(out))


_MAX_INJECTED = 4096
_MAX_INJECTED_VALUES = 64  # container paths, devices or sources of one file
_MAX_INJECTED_PATH = max_length(NodeInjected, "host_path")


def _injected(document: Mapping[str, Any]) -> tuple[ReportInjected, ...]:
    """The injected-file components of a host report, checked."""
    out: dict[str, ReportInjected] = {}
    for component, path in walk(document.get("components"), ("components",)):
        props = properties(component)
        host = first(props, v.INJECTED_HOST_PATH)
        if host is None:
            continue
        where = _pointer((*path, "properties"))
        lists = {
            name: tuple(props.get(prop, ()))
            for name, prop in (
                ("container_paths", v.INJECTED_CONTAINER_PATH),
                ("devices", v.INJECTED_DEVICE),
                ("sources", v.INJECTED_SOURCE),
            )
        }
        paths = (host, *lists["container_paths"])
        if not all(p.startswith("/") and len(p) <= _MAX_INJECTED_PATH for p in paths) or any(
            _CONTROL.search(p) for p in paths
        ):
            _fail(
                f"{v.INJECTED_HOST_PATH} and {v.INJECTED_CONTAINER_PATH} are absolute paths of at "
                f"most {_MAX_INJECTED_PATH} characters without control characters",
                [(where, "bad path")],
            )
        if any(len(values) > _MAX_INJECTED_VALUES for values in lists.values()):
            _fail(
                f"an injected file names more than {_MAX_INJECTED_VALUES} container paths, "
                "devices or sources",
                [(where, "too many")],
            )
        item = ReportInjected(
            host_path=host,
            sha256=sha256_of(component),
            family=first(props, v.INJECTED_FAMILY),
            version=first(props, v.INJECTED_VERSION),
            **lists,
        )
        for column in ("family", "version"):
            _check_column(
                NodeInjected,
                column,
                getattr(item, column),
                lambda bad, where=where: where,  # type: ignore[misc]
            )
        for column in ("devices", "sources"):
            _check_column(
                NodeInjected,
                column,
                getattr(item, column),
                lambda bad, where=where: where,  # type: ignore[misc]
            )
        out[host] = item
        if len(out) > _MAX_INJECTED:
            _fail(
                f"a host report lists more than {_MAX_INJECTED} injected files",
                [(_pointer(path), "too many")],
            )
    return tuple(out[h] for h in sorted(out))


def _origin(
    item: Mapping[str, Any], where: tuple[str | int, ...], bad: object, sources: Sequence[str]
) -> str:
    """The JSON pointer of the value `bad` came from: the first of `sources` (a field of
    `item`, or a property name) whose value holds it; with no `sources`, any property. Only
    called for a refused value, so it may search."""
    needle = str(bad)
    properties = item.get("properties")
    for source in sources:
        value = item.get(source)
        if isinstance(value, str) and needle in value:
            return _pointer((*where, source))
    for i, prop in enumerate(properties if isinstance(properties, list) else ()):
        if not isinstance(prop, dict) or (sources and prop.get("name") not in sources):
            continue
        if needle in str(prop.get("value", "")):
            return _pointer((*where, "properties", i, "value"))
    return _pointer(where)


def _check_column(
    model: type[Base], column: str, value: object, pointer: Callable[[object], str]
) -> None:
    """Refuse a value its column cannot hold; `pointer` names where the offending value is."""
    found = misfit(limits_of(model)[column], value)
    if found is not None:
        _refuse_misfit(column, found, pointer(found[0]))


def _refuse_misfit(column: str, found: tuple[object, str], where: str) -> NoReturn:
    bad, why = found
    shown = repr(bad) if len(str(bad)) <= 40 else f"{str(bad)[:40]!r}..."
    _fail(
        f"{where or '/'}: the {column.replace('_', ' ')} {shown} {why}, more than the service "
        "stores",
        [(where, f"{column} {why}")],
    )


def _image_trust(props: Mapping[str, list[str]]) -> ImageTrustFacts:
    level_text = first(props, v.SLSA_BUILD_LEVEL)
    level = None
    if level_text is not None:
        if level_text not in ("0", "1", "2", "3"):
            _fail(
                f"{v.SLSA_BUILD_LEVEL} must be an SLSA Build level 0-3",
                [("/metadata/component/properties", f"bad SLSA level {level_text[:20]!r}")],
            )
        level = int(level_text)
    return ImageTrustFacts(
        signer=first(props, v.IMAGE_SIGNER),
        slsa_level=level,
        builder=first(props, v.SLSA_BUILDER),
        source_repo=first(props, v.SLSA_SOURCE_REPO),
        rejected=tuple(props.get(v.IMAGE_SIGNATURE_REJECTED, ())),
    )


def check_label(key: str, value: str, pointer: str = "") -> None:
    """Refuse label keys and values that cannot be stored or filtered on."""
    if not _LABEL_KEY.fullmatch(key):
        _fail(
            f"label key {key!r} must be 1-128 characters of letters, digits, '.', '_', '/', '-'",
            [(pointer, "bad label key")],
        )
    if len(value) > _MAX_LABEL_VALUE:
        _fail(f"label {key!r} is longer than {_MAX_LABEL_VALUE} characters", [(pointer, "long")])
    if _CONTROL.search(value) or _SURROGATE.search(value):
        _fail(
            f"label {key!r} holds a control character or an unpaired surrogate",
            [(pointer, "bad label value")],
        )


# Where each stored field of a library or package comes from, to point at a refused value: a
# component field or a property name, first match wins (see `_origin`).
_FILE_SOURCES: dict[str, tuple[str, ...]] = {}  # a file recognized by name: all from "name"
_VOCABULARY_SOURCES = {
    "name": (v.FILE_PATH, "name"),
    "path": (v.FILE_PATH, "name"),
    "family": (v.LIBRARY_FAMILY,),
    "component": (v.LIBRARY_COMPONENT,),
    "version": (v.LIBRARY_VERSION,),
    "cuda_major": (v.LIBRARY_CUDA_MAJOR,),
    "arch": (v.LIBRARY_ARCH,),
    "integrity_reason": (v.INTEGRITY_REASON,),
    "provenance_signer": (v.PROVENANCE_SIGNER,),
    "provenance_catalog": (v.PROVENANCE_CATALOG,),
    "provenance_reason": (v.PROVENANCE_REASON,),
    "layer": (v.LAYER,),
    "owner_purl": (v.OWNER_PURL,),
    "soname": (v.LIBRARY_SONAME,),
    "aliases": (v.FILE_ALIASES,),
    "notes": (v.NOTE,),
    "loaded_by": (v.RUNTIME_PROCESS,),
    "disk_sha256": (v.RUNTIME_DISK_SHA256,),
}
_PACKAGE_LIBRARY_SOURCES = {
    "name": ("name", "purl"),
    "path": PATH_PROPERTIES,
    "version": ("purl", "version"),
    "cuda_major": ("purl", "name", "version"),
    "owner_purl": ("purl",),
}
_PACKAGE_SOURCES = {
    "name": ("name", "purl"),
    "purl": ("purl",),
    "manager": (v.PACKAGE_MANAGER, "purl"),
    "version": ("version",),
    "bom_ref": ("bom-ref",),
    "source_name": (v.PACKAGE_SOURCE_NAME,),
    "source_version": (v.PACKAGE_SOURCE_VERSION,),
}


@cache
def _stored_fields(model: type[Base]) -> tuple[tuple[str, ColumnLimit], ...]:
    # the fields of ReportLibrary / ReportPackage are named after their table's columns
    limits = limits_of(model)
    kind = ReportPackage if model is Package else ReportLibrary
    return tuple((f.name, limits[f.name]) for f in fields(kind) if f.name in limits)


def _check_row(
    row: ReportLibrary | ReportPackage,
    model: type[Base],
    component: Mapping[str, Any],
    where: tuple[str | int, ...],
    sources: Mapping[str, tuple[str, ...]],
) -> None:
    """Refuse a library or package with a value its table's column cannot hold."""
    for name, limit in _stored_fields(model):
        found = misfit(limit, getattr(row, name))
        if found is not None:
            pointer = _origin(component, where, found[0], sources.get(name, ("name",)))
            _refuse_misfit(name, found, pointer)


def _libraries(
    document: Mapping[str, Any],
) -> tuple[tuple[ReportLibrary, ...], tuple[ReportPackage, ...], tuple[str, ...]]:
    # the one reader of GPU library components (scanner/bom/foreign.py), as `gate --bom` reads
    try:
        found = gpu_libraries(document)
    except BadComponent as e:  # a number in a name or purl that no column holds
        pointer = _origin(e.listed.component, e.listed.where, e.bad, ("purl", "name", "version"))
        _fail(f"{pointer}: {e.message}", [(pointer, "number out of range")])
    libraries: list[ReportLibrary] = []
    for entry in found.entries:
        listed, foreign = entry.listed, entry.library
        if foreign is None:
            library = _vocabulary_file(listed.component, listed.props, listed.where)
            sources = _VOCABULARY_SOURCES
        else:
            library = _foreign_library(foreign)
            sources = _FILE_SOURCES if foreign.kind == "file" else _PACKAGE_LIBRARY_SOURCES
        _check_row(library, Artifact, listed.component, listed.where, sources)
        libraries.append(library)
    packages = []
    for listed in found.packages:
        component = listed.component
        purl = component.get("purl")
        assert isinstance(purl, str)  # only packages with a purl are listed
        version = component.get("version")
        source_name, source_version = package_source(listed.props)
        package = ReportPackage(
            name=str(component.get("name") or ""),
            purl=purl,
            manager=package_manager(purl, listed.props),
            version=version if isinstance(version, str) else None,
            bom_ref=component.get("bom-ref"),
            source_name=source_name,
            source_version=source_version,
        )
        _check_row(package, Package, component, listed.where, _PACKAGE_SOURCES)
        packages.append(package)
    return tuple(libraries), tuple(packages), found.skipped


def _foreign_library(found: ForeignLibrary) -> ReportLibrary:
    return ReportLibrary(
        kind=found.kind,
        name=found.name,
        path=found.path,
        family=found.family,
        component=found.component,
        version=found.version,
        cuda_major=found.cuda_major,
        sha256=found.sha256,
        layer=found.layer,
        owner_purl=found.owner_purl,
    )


def _vocabulary_file(
    component: Mapping[str, Any], props: Mapping[str, list[str]], where: tuple[str | int, ...]
) -> ReportLibrary:
    name = str(component.get("name") or "")

    def fail(message: str, field: str, detail: str) -> NoReturn:
        # the pointer is spelled out only for a refused component: this runs for every file
        pointer = _pointer(where)
        _fail(f"{pointer} ({name!r}): {message}", [(f"{pointer}/{field}", detail)])

    family = first(props, v.LIBRARY_FAMILY) or ""
    if not _FAMILY.fullmatch(family):
        fail(
            f"{v.LIBRARY_FAMILY} {family[:80]!r} is not a library family name",
            "properties",
            "bad family",
        )
    sha256 = sha256_of(component)
    if sha256 is None:
        fail("a GPU library file component must carry a SHA-256 hash", "hashes", "no SHA-256 hash")
    integrity = first(props, v.INTEGRITY)
    if integrity is not None and integrity not in v.INTEGRITY_VALUES:
        fail(
            f"{v.INTEGRITY} must be one of {', '.join(v.INTEGRITY_VALUES)}",
            "properties",
            f"bad integrity {integrity[:40]!r}",
        )
    provenance = first(props, v.PROVENANCE)
    if provenance is not None and provenance not in v.PROVENANCE_VALUES:
        fail(
            f"{v.PROVENANCE} must be one of {', '.join(v.PROVENANCE_VALUES)}",
            "properties",
            f"bad provenance {provenance[:40]!r}",
        )
    cuda_text = first(props, v.LIBRARY_CUDA_MAJOR)
    cuda_major = None
    if cuda_text is not None:
        if not cuda_text.isdigit() or len(cuda_text) > 3:
            fail(
                f"{v.LIBRARY_CUDA_MAJOR} must be an integer",
                "properties",
                f"bad CUDA major {cuda_text[:20]!r}",
            )
        cuda_major = int(cuda_text)
    path = first(props, v.FILE_PATH) or name
    aliases = first(props, v.FILE_ALIASES)
    return ReportLibrary(
        kind="file",
        name=path.rsplit("/", 1)[-1] or name,
        path=path,
        family=family,
        component=first(props, v.LIBRARY_COMPONENT),
        version=normalize_version(first(props, v.LIBRARY_VERSION)),
        cuda_major=cuda_major,
        arch=first(props, v.LIBRARY_ARCH),
        sha256=sha256,
        integrity=integrity,
        integrity_reason=first(props, v.INTEGRITY_REASON),
        provenance=provenance,
        provenance_signer=first(props, v.PROVENANCE_SIGNER),
        provenance_catalog=first(props, v.PROVENANCE_CATALOG),
        provenance_reason=first(props, v.PROVENANCE_REASON),
        layer=first(props, v.LAYER),
        owner_purl=first(props, v.OWNER_PURL),
        soname=first(props, v.LIBRARY_SONAME),
        aliases=tuple(a for a in (aliases or "").split(",") if a),
        notes=tuple(props.get(v.NOTE, ())),
        **_loaded(props, fail),
    )
