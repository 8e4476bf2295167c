"""Parse and check one CycloneDX JSON report into the normalized values that ingest stores.

Checks run in order and stop at the first failing step, each answering 422 with JSON pointers:
JSON syntax and encoding, nesting depth and unstorable strings, CycloneDX identity and
``specVersion`` (1.4-1.7), the schema of that version, duplicate ``bom-ref``s, then the
``gpuprov:`` property contract (docs/bom-properties.md). Other tools' BOMs are recognized by
purl and file name (`app.domain.recognize`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NoReturn
from urllib.parse import parse_qs, unquote

from app.domain.recognize import Recognized, parse_purl, recognize_file, recognize_package
from app.domain.schema import SCHEMA_VERSIONS, schema_problems
from app.domain.versions import normalize_version
from app.errors import InvalidReport
from scanner import vocabulary as v

SUPPORTED_SPEC_VERSIONS = SCHEMA_VERSIONS
MAX_PROBLEMS = 5
_FAMILY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+\-]{0,63}$")
_LABEL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/\-]{0,127}$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_NAME = 1024
_MAX_LABEL_VALUE = 256


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
class ReportAsset:
    """The asset a report describes."""

    kind: str  # "image" | "host"
    identity: str  # manifest digest, "config:<digest>", machine id, or "name:<name>"
    name: str
    labels: Mapping[str, str]
    details: Mapping[str, str]
    trust: ImageTrustFacts = field(default_factory=ImageTrustFacts)


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


@dataclass(frozen=True, slots=True)
class ReportPackage:
    """An owner package of a GPU library, or a GPU package."""

    name: str
    purl: str | None
    manager: str | None
    version: str | None
    bom_ref: str | None


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


def parse_report(data: bytes, *, max_depth: int = 64) -> Report:
    """Check a report and normalize it; raises `InvalidReport` (422) with pointers on failure."""
    document = _load_json(data, max_depth)
    if isinstance(document, dict | list):
        _check_depth(document, max_depth)
    _check_strings(document, data)
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
    _check_schema(document, data, spec)
    _check_unique_bom_refs(document)
    return _normalize(document, spec, hashlib.sha256(data).hexdigest())


def _load_json(data: bytes, max_depth: int) -> Any:
    try:
        return json.loads(data)
    except UnicodeDecodeError as e:
        _fail(f"the body is not UTF-8 JSON: {e.reason} at byte {e.start}")
    except json.JSONDecodeError as e:
        _fail(f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except RecursionError:
        _fail(f"JSON nesting deeper than {max_depth} levels")


_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|d[89a-f])", re.IGNORECASE)


_CONTAINERS = (dict, list)


def _check_depth(document: Any, max_depth: int) -> None:
    # breadth-first over containers only: cheap, and the parser has already refused anything
    # deep enough to exhaust the interpreter's recursion limit
    level: list[Any] = [document]
    depth = 0
    while level:
        depth += 1
        if depth > max_depth + 1:  # +1: the top-level object itself
            _fail(f"JSON nesting deeper than {max_depth} levels", [("", "too deep")])
        children: list[Any] = []
        for node in level:
            values = node.values() if type(node) is dict else node
            children += [v for v in values if type(v) in _CONTAINERS]
        level = children


def _check_strings(document: Any, data: bytes) -> None:
    # Strings no database column can hold verbatim (NUL, lone surrogates). JSON carries those
    # only as \u escapes, so the walk runs only when such an escape is present.
    if _SUSPECT_ESCAPE.search(data) is None:
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


def _check_schema(document: Any, data: bytes, spec: str) -> None:
    problems = schema_problems(document, data.decode("utf-8"), spec, MAX_PROBLEMS)
    if problems:
        _fail(f"the BOM does not conform to the CycloneDX {spec} schema", problems)


def _walk_components(
    components: Any, path: tuple[str | int, ...]
) -> Iterator[tuple[dict[str, Any], tuple[str | int, ...]]]:
    if not isinstance(components, list):
        return
    for i, component in enumerate(components):
        if isinstance(component, dict):
            here = (*path, i)
            yield component, here
            yield from _walk_components(component.get("components"), (*here, "components"))


def _check_unique_bom_refs(document: dict[str, Any]) -> None:
    seen: dict[str, tuple[str | int, ...]] = {}
    problems: list[tuple[str, str]] = []
    items: list[tuple[dict[str, Any], tuple[str | int, ...]]] = []
    metadata = document.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("component"), dict):
        root = metadata["component"]
        items.append((root, ("metadata", "component")))
        items += _walk_components(root.get("components"), ("metadata", "component", "components"))
    items += _walk_components(document.get("components"), ("components",))
    items += _walk_components(document.get("services"), ("services",))
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


def _properties(item: Mapping[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for prop in item.get("properties") or ():
        name, value = prop.get("name"), prop.get("value")
        if isinstance(name, str) and isinstance(value, str):
            found.setdefault(name, []).append(value)
    return found


def _first(props: Mapping[str, list[str]], name: str) -> str | None:
    values = props.get(name)
    return values[0] if values else None


def _sha256(component: Mapping[str, Any]) -> str | None:
    for entry in component.get("hashes") or ():
        if entry.get("alg") == "SHA-256" and _SHA256.match(str(entry.get("content", ""))):
            return str(entry["content"]).lower()
    return None


def _tool(metadata: Mapping[str, Any]) -> tuple[str, str]:
    tools = metadata.get("tools")
    entries: list[Mapping[str, Any]] = []
    if isinstance(tools, list):  # CycloneDX 1.4 (deprecated form, still allowed later)
        entries = [t for t in tools if isinstance(t, dict)]
    elif isinstance(tools, dict):
        entries = [t for t in tools.get("components") or () if isinstance(t, dict)]
        entries += [t for t in tools.get("services") or () if isinstance(t, dict)]
    names = [f"{t.get('name', '?')} {t.get('version', '')}".strip() for t in entries]
    lowered = " ".join(names).lower()
    producer = next(
        (p for p in ("gpuprov", "trivy", "syft", "cdxgen") if p in lowered),
        "other",
    )
    return ", ".join(names) or "unknown", producer


def _normalize(document: dict[str, Any], spec: str, content_sha256: str) -> Report:
    metadata = document.get("metadata") or {}
    meta_props = _properties(metadata)
    tool, producer = _tool(metadata)
    timestamp = None
    if isinstance(metadata.get("timestamp"), str):
        try:
            timestamp = datetime.fromisoformat(metadata["timestamp"])
        except ValueError:
            _fail(
                "metadata.timestamp is not an RFC 3339 date-time",
                [("/metadata/timestamp", "unparseable")],
            )
        if timestamp.tzinfo is None:
            _fail(
                "metadata.timestamp needs a time zone offset",
                [("/metadata/timestamp", "no offset")],
            )
    asset = _asset(metadata, meta_props)
    libraries, packages, skipped = _libraries(document)
    if any(lib.family for lib in libraries if lib.kind == "file") and producer == "other":
        producer = "gpuprov" if _uses_vocabulary(document) else producer
    return Report(
        spec_version=spec,
        serial_number=document.get("serialNumber"),
        bom_version=int(document.get("version", 1)),
        content_sha256=content_sha256,
        timestamp=timestamp,
        tool=tool,
        producer=producer,
        asset=asset,
        libraries=libraries,
        packages=packages,
        findings=tuple(meta_props.get(v.SCAN_FINDING, ())),
        skipped=tuple(meta_props.get(v.SCAN_SKIPPED, ())) + skipped,
    )


def _uses_vocabulary(document: Mapping[str, Any]) -> bool:
    return any(
        name.startswith(v.NS + ":")
        for component, _ in _walk_components(document.get("components"), ("components",))
        for name in _properties(component)
    )


def _asset(metadata: Mapping[str, Any], meta_props: Mapping[str, list[str]]) -> ReportAsset:
    component = metadata.get("component")
    if not isinstance(component, dict):
        _fail(
            "metadata.component is required: it names the image or host the BOM describes",
            [("/metadata/component", "missing")],
        )
    props = _properties(component)
    # Another tool's image metadata sits on the component (Trivy) or the BOM metadata (cdxgen).
    every = {**meta_props, **props}
    declared = _first(props, v.ASSET_KIND)
    if declared is not None and declared not in ("image", "host"):
        _fail(
            f"{v.ASSET_KIND} must be 'image' or 'host', not {declared!r}",
            [("/metadata/component/properties", "bad asset kind")],
        )
    kind = declared or ("image" if component.get("type") == "container" else "host")
    name = str(component.get("name") or "")
    if kind == "host":
        name = _first(props, v.HOST_HOSTNAME) or name
    tag = component.get("version")
    if kind == "image" and isinstance(tag, str) and tag and not _DIGEST.fullmatch(tag):
        # cdxgen splits "repo:tag" into name and version
        if ":" not in name.rsplit("/", 1)[-1]:
            name = f"{name}:{tag}"
    if not name:
        _fail("metadata.component has no name", [("/metadata/component/name", "empty")])
    if len(name) > _MAX_NAME:
        _fail(
            f"the asset name is longer than {_MAX_NAME} characters",
            [("/metadata/component/name", "too long")],
        )
    details: dict[str, str] = {}
    purl = component.get("purl") if isinstance(component.get("purl"), str) else None
    if kind == "image":
        digest = _image_digest(component, purl, every)
        image_id = _first(props, v.IMAGE_ID)
        if image_id is not None and not _DIGEST.fullmatch(image_id):
            _fail(
                f"{v.IMAGE_ID} must be a config digest sha256:<64 lowercase hex>",
                [("/metadata/component/properties", f"bad image id {image_id[:80]!r}")],
            )
        config = (
            image_id or _first(every, "aquasecurity:trivy:ImageID") or _first(every, "oci:image:Id")
        )
        identity = digest or (f"config:{config}" if config else f"name:{name}")
        details.update(
            {
                "reference": _first(props, v.IMAGE_REFERENCE) or name,
                "digest": digest or "",
                "config_digest": config or "",
            },
        )
        platform = _first(props, v.IMAGE_PLATFORM) or _purl_qualifier(purl, "arch")
        if platform:
            details["platform"] = platform
    else:
        machine_id = _first(props, v.HOST_MACHINE_ID)
        identity = machine_id or f"name:{name}"
        details.update({"hostname": name, "machine_id": machine_id or ""})
    for key, prop in (
        ("slsa_build_level", v.SLSA_BUILD_LEVEL),
        ("slsa_builder", v.SLSA_BUILDER),
        ("image_signer", v.IMAGE_SIGNER),
    ):
        if value := _first(props, prop):
            details[key] = value
    trust = _image_trust(props)
    labels = {}
    for prop_name, values in props.items():
        if prop_name.startswith(v.ASSET_LABEL_PREFIX):
            key = prop_name[len(v.ASSET_LABEL_PREFIX) :]
            # labels in the BOM (an image's config labels, say) are kept when they fit; the
            # agent's own labels (query parameters) are checked strictly instead
            if _LABEL_KEY.match(key) and len(values[0]) <= _MAX_LABEL_VALUE:
                labels[key] = values[0]
    return ReportAsset(
        kind=kind,
        identity=identity[:255],
        name=name,
        labels=labels,
        details={k: val for k, val in details.items() if val},
        trust=trust,
    )


def _image_trust(props: Mapping[str, list[str]]) -> ImageTrustFacts:
    level_text = _first(props, v.SLSA_BUILD_LEVEL)
    level = None
    if level_text is not None:
        if level_text not in ("0", "1", "2", "3"):
            _fail(
                f"{v.SLSA_BUILD_LEVEL} must be an SLSA Build level 0-3",
                [("/metadata/component/properties", f"bad SLSA level {level_text[:20]!r}")],
            )
        level = int(level_text)
    return ImageTrustFacts(
        signer=_first(props, v.IMAGE_SIGNER),
        slsa_level=level,
        builder=_first(props, v.SLSA_BUILDER),
        source_repo=_first(props, v.SLSA_SOURCE_REPO),
        rejected=tuple(props.get(v.IMAGE_SIGNATURE_REJECTED, ())),
    )


def check_label(key: str, value: str, pointer: str = "") -> None:
    """Refuse label keys and values that cannot be stored or filtered on."""
    if not _LABEL_KEY.match(key):
        _fail(
            f"label key {key!r} must be 1-128 characters of letters, digits, '.', '_', '/', '-'",
            [(pointer, "bad label key")],
        )
    if len(value) > _MAX_LABEL_VALUE:
        _fail(f"label {key!r} is longer than {_MAX_LABEL_VALUE} characters", [(pointer, "long")])


def _image_digest(
    component: Mapping[str, Any], purl: str | None, props: Mapping[str, list[str]]
) -> str | None:
    candidates = [_first(props, v.IMAGE_DIGEST)]
    if purl and purl.startswith("pkg:oci/"):
        candidates.append(unquote(purl.split("?", 1)[0].rpartition("@")[2]))
    for prop in ("aquasecurity:trivy:RepoDigest", "oci:image:RepoDigest"):
        value = _first(props, prop)
        candidates.append(value.rpartition("@")[2] if value else None)
    candidates.append(str(component.get("version") or ""))  # Syft: the manifest digest
    for candidate in candidates:
        if candidate and _DIGEST.fullmatch(candidate):
            return candidate
    return None


def _purl_qualifier(purl: str | None, key: str) -> str | None:
    if not purl or "?" not in purl:
        return None
    values = parse_qs(purl.split("?", 1)[1].split("#", 1)[0]).get(key)
    return values[0] if values else None


def _bounded(value: str | None, limit: int, what: str, path: Sequence[str | int]) -> str | None:
    if value is not None and len(value) > limit:
        _fail(f"{what} is longer than {limit} characters", [(_pointer(path), "too long")])
    return value


def _libraries(
    document: Mapping[str, Any],
) -> tuple[tuple[ReportLibrary, ...], tuple[ReportPackage, ...], tuple[str, ...]]:
    files: list[ReportLibrary] = []
    gpu_packages: list[tuple[ReportPackage, Recognized, Mapping[str, list[str]]]] = []
    packages: dict[str, ReportPackage] = {}
    skipped: list[str] = []
    for component, path in _walk_components(document.get("components"), ("components",)):
        props = _properties(component)
        name = str(component.get("name") or "")
        ctype = component.get("type")
        purl = component.get("purl") if isinstance(component.get("purl"), str) else None
        if v.LIBRARY_FAMILY in props:
            files.append(_vocabulary_file(component, props, path))
            continue
        if ctype == "file":
            found = recognize_file(name)
            if found is None:
                continue
            sha256 = _sha256(component)
            if sha256 is None:
                skipped.append(f"ingest: {name}: file component without a SHA-256 hash")
                continue
            files.append(
                ReportLibrary(
                    kind="file",
                    name=name.rsplit("/", 1)[-1],
                    path=name if name.startswith("/") else None,
                    family=found.family,
                    component=found.component,
                    version=found.version,
                    cuda_major=found.cuda_major,
                    sha256=sha256,
                )
            )
            continue
        version = component.get("version") if isinstance(component.get("version"), str) else None
        package = ReportPackage(
            name=name,
            purl=purl,
            manager=_first(props, v.PACKAGE_MANAGER)
            or ((parse_purl(purl) or (None,))[0] if purl else None),
            version=version,
            bom_ref=component.get("bom-ref"),
        )
        if purl:
            packages.setdefault(purl, package)
        found = recognize_package(purl, name, version)
        if found is not None:
            gpu_packages.append((package, found, props))
    owners = {f.owner_purl for f in files if f.owner_purl}
    libraries = list(files)
    for package, found, package_props in gpu_packages:
        if package.purl in owners:
            continue  # its files are listed one by one
        libraries.append(
            ReportLibrary(
                kind="package",
                name=package.name,
                path=_first(package_props, "aquasecurity:trivy:FilePath")
                or _first(package_props, "syft:location:0:path"),
                family=found.family,
                component=found.component,
                version=found.version,
                cuda_major=found.cuda_major,
                layer=_layer(
                    _first(package_props, "aquasecurity:trivy:LayerDigest")
                    or _first(package_props, "syft:location:0:layerID")
                ),
                owner_purl=package.purl,
            )
        )
    gpu_purls = {package.purl for package, _, _ in gpu_packages}
    kept = tuple(p for purl, p in packages.items() if purl in owners or purl in gpu_purls)
    return tuple(libraries), kept, tuple(skipped)


def _layer(value: str | None) -> str | None:
    return value if value and len(value) <= 80 else None


def _vocabulary_file(
    component: Mapping[str, Any], props: Mapping[str, list[str]], where: tuple[str | int, ...]
) -> ReportLibrary:
    name = str(component.get("name") or "")

    def fail(message: str, field: str, detail: str) -> NoReturn:
        # the pointer is spelled out only for a refused component: this runs for every file
        pointer = _pointer(where)
        _fail(f"{pointer} ({name!r}): {message}", [(f"{pointer}/{field}", detail)])

    family = _first(props, v.LIBRARY_FAMILY) or ""
    if not _FAMILY.match(family):
        fail(
            f"{v.LIBRARY_FAMILY} {family[:80]!r} is not a library family name",
            "properties",
            "bad family",
        )
    sha256 = _sha256(component)
    if sha256 is None:
        fail("a GPU library file component must carry a SHA-256 hash", "hashes", "no SHA-256 hash")
    integrity = _first(props, v.INTEGRITY)
    if integrity is not None and integrity not in v.INTEGRITY_VALUES:
        fail(
            f"{v.INTEGRITY} must be one of {', '.join(v.INTEGRITY_VALUES)}",
            "properties",
            f"bad integrity {integrity[:40]!r}",
        )
    provenance = _first(props, v.PROVENANCE)
    if provenance is not None and provenance not in v.PROVENANCE_VALUES:
        fail(
            f"{v.PROVENANCE} must be one of {', '.join(v.PROVENANCE_VALUES)}",
            "properties",
            f"bad provenance {provenance[:40]!r}",
        )
    cuda_text = _first(props, v.LIBRARY_CUDA_MAJOR)
    cuda_major = None
    if cuda_text is not None:
        if not cuda_text.isdigit() or len(cuda_text) > 3:
            fail(
                f"{v.LIBRARY_CUDA_MAJOR} must be an integer",
                "properties",
                f"bad CUDA major {cuda_text[:20]!r}",
            )
        cuda_major = int(cuda_text)
    path = _first(props, v.FILE_PATH) or name
    props_path = (*where, "properties")
    aliases = _first(props, v.FILE_ALIASES)
    return ReportLibrary(
        kind="file",
        name=path.rsplit("/", 1)[-1] or name,
        path=path,
        family=family,
        component=_bounded(_first(props, v.LIBRARY_COMPONENT), 128, "component", props_path),
        version=normalize_version(
            _bounded(_first(props, v.LIBRARY_VERSION), 128, "version", props_path)
        ),
        cuda_major=cuda_major,
        arch=_bounded(_first(props, v.LIBRARY_ARCH), 32, "arch", props_path),
        sha256=sha256,
        integrity=integrity,
        integrity_reason=_first(props, v.INTEGRITY_REASON),
        provenance=provenance,
        provenance_signer=_first(props, v.PROVENANCE_SIGNER),
        provenance_catalog=_first(props, v.PROVENANCE_CATALOG),
        provenance_reason=_first(props, v.PROVENANCE_REASON),
        layer=_bounded(_first(props, v.LAYER), 80, "layer", props_path),
        owner_purl=_first(props, v.OWNER_PURL),
        soname=_first(props, v.LIBRARY_SONAME),
        aliases=tuple(a for a in (aliases or "").split(",") if a),
        notes=tuple(props.get(v.NOTE, ())),
    )
