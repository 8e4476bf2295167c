"""The one reader of a CycloneDX BOM's GPU library components, ours or another tool's.

Our BOMs describe each GPU library file with ``gpuprov:`` properties (docs/bom-properties.md);
Trivy, Syft and cdxgen list packages and files without verdicts, recognized here by purl, name
and file name (`scanner.detect.packages`, the classifier table). Both places that gate a BOM
read it with this module: `gpuprov gate --bom` (`scanner.policy.bom_facts`) and the service's
ingest (`app.domain.report_parser`), so the same bytes give the same libraries, versions and
CUDA majors wherever they are gated. Pure: JSON values in, records out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final
from urllib.parse import unquote

from msgspec import Struct

from scanner import vocabulary as v
from scanner.detect.packages import OutOfRange, parse_purl, recognize_file, recognize_package
from scanner.detect.products import is_stack_purl
from scanner.loaders import DocumentError, load_json

#: other tools' properties naming where a package or file was found, and in which layer
TRIVY_PATH: Final = "aquasecurity:trivy:FilePath"
SYFT_PATH: Final = "syft:location:0:path"
TRIVY_LAYER: Final = "aquasecurity:trivy:LayerDigest"
SYFT_LAYER: Final = "syft:location:0:layerID"
PATH_PROPERTIES: Final = (TRIVY_PATH, SYFT_PATH)
LAYER_PROPERTIES: Final = (TRIVY_LAYER, SYFT_LAYER)
#: a layer reference longer than this is no digest: it is dropped, not stored cut
MAX_LAYER: Final = 80
_SHA256: Final = re.compile(r"[0-9a-fA-F]{64}")

Pointer = tuple[str | int, ...]


class BadComponent(ValueError):
    """A component whose name, purl or version holds a number out of range (`OutOfRange`):
    the BOM cannot be read as it is. ``bad`` is the offending digits."""

    def __init__(self, message: str, listed: Listed, bad: str) -> None:
        super().__init__(message)
        self.message = message
        self.listed = listed
        self.bad = bad

    @property
    def pointer(self) -> str:
        """The JSON pointer of the component."""
        return "".join(
            "/" + str(p).replace("~", "~0").replace("/", "~1") for p in self.listed.where
        )


class ForeignLibrary(Struct, frozen=True):
    """A GPU library another tool's BOM lists: a file with its digest, or a runtime package.
    Its verdicts are unknown (None): no other tool compares files with their packages."""

    kind: str  # "file" | "package"
    name: str  # the file's base name, or the package's name
    path: str | None  # an absolute file path; for a package, where the tool found it
    family: str
    component: str
    version: str | None
    cuda_major: int | None
    sha256: str | None = None
    layer: str | None = None
    owner_purl: str | None = None  # a package's own purl; a file's owning package's
    integrity: str | None = None
    integrity_reason: str | None = None
    provenance: str | None = None
    provenance_signer: str | None = None
    provenance_reason: str | None = None
    loaded_processes: int = 0
    loaded_containers: int = 0
    loaded_deleted: bool = False
    loaded_copy: bool = False
    disk_sha256: str | None = None


class Listed(Struct, frozen=True):
    """One component of the BOM's component tree, where it is, and its properties."""

    component: dict[str, Any]
    where: Pointer
    props: dict[str, list[str]]


class GpuEntry(Struct, frozen=True):
    """A GPU library of the BOM: ``library`` None for a file in our vocabulary (the caller
    reads its ``gpuprov:`` properties), else what another tool's component says."""

    listed: Listed
    library: ForeignLibrary | None


class Libraries(Struct, frozen=True):
    """The GPU libraries of a BOM in the order they are stored and gated: files in document
    order, then GPU packages whose files are not listed one by one."""

    entries: tuple[GpuEntry, ...]
    #: GPU packages and the owners of the listed files: each purl once, first occurrence
    packages: tuple[Listed, ...]
    #: what was left out, one message each ("ingest: NAME: file component without a SHA-256")
    skipped: tuple[str, ...]


def properties(item: Mapping[str, Any]) -> dict[str, list[str]]:
    """A component's properties by name, each name's string values in order."""
    found: dict[str, list[str]] = {}
    for prop in item.get("properties") or ():
        if not isinstance(prop, dict):
            continue
        name, value = prop.get("name"), prop.get("value")
        if isinstance(name, str) and isinstance(value, str):
            found.setdefault(name, []).append(value)
    return found


def first(props: Mapping[str, list[str]], *names: str) -> str | None:
    """The first value of the first of ``names`` present."""
    for name in names:
        values = props.get(name)
        if values:
            return values[0]
    return None


def sha256_of(component: Mapping[str, Any]) -> str | None:
    """The component's SHA-256 (lowercase hex), or None."""
    for entry in component.get("hashes") or ():
        if not isinstance(entry, dict) or entry.get("alg") != "SHA-256":
            continue
        content = entry.get("content")
        if isinstance(content, str) and _SHA256.fullmatch(content):
            return content.lower()
    return None


def walk(
    components: Any, where: Pointer = ("components",)
) -> Iterator[tuple[dict[str, Any], Pointer]]:
    """Every component of a components array, nested ones after their parent."""
    if not isinstance(components, list):
        return
    for i, component in enumerate(components):
        if isinstance(component, dict):
            here = (*where, i)
            yield component, here
            yield from walk(component.get("components"), (*here, "components"))


def _layer(value: str | None) -> str | None:
    return value if value and len(value) <= MAX_LAYER else None


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def foreign_file(component: Mapping[str, Any]) -> ForeignLibrary | None:
    """A ``file`` component another tool lists (Syft: its name is the path), when its name is
    a GPU library's; its owner where ``gpuprov:owner:purl`` names it (an SPDX document's
    ``CONTAINS``, `scanner.bom.spdx_mapping`). Raises `scanner.detect.packages.OutOfRange` for
    an absurd number."""
    name = str(component.get("name") or "")
    found = recognize_file(name)
    if found is None:
        return None
    return ForeignLibrary(
        kind="file",
        name=name.rsplit("/", 1)[-1],
        path=name if name.startswith("/") else None,
        family=found.family,
        component=found.component,
        version=found.version,
        cuda_major=found.cuda_major,
        sha256=sha256_of(component),
        owner_purl=first(properties(component), v.OWNER_PURL),
    )


def foreign_package(
    component: Mapping[str, Any], props: Mapping[str, list[str]]
) -> ForeignLibrary | None:
    """A package component that is a GPU runtime (by purl, else name and version). A source
    package (cdxgen tags Trivy's ``cudnn`` source of libcudnn9-cuda-12 ``source``) installs
    nothing. Raises `scanner.detect.packages.OutOfRange` for an absurd number."""
    tags = component.get("tags")
    if isinstance(tags, list) and "source" in tags:
        return None
    name = str(component.get("name") or "")
    purl = _string(component.get("purl"))
    found = recognize_package(purl, name, _string(component.get("version")))
    if found is None:
        return None
    return ForeignLibrary(
        kind="package",
        name=name,
        path=first(props, *PATH_PROPERTIES),
        family=found.family,
        component=found.component,
        version=found.version,
        cuda_major=found.cuda_major,
        layer=_layer(first(props, *LAYER_PROPERTIES)),
        owner_purl=purl,
    )


#: Trivy's source package of an OS package (Debian: the source's name, upstream version,
#: revision and epoch)
TRIVY_SRC_NAME: Final = "aquasecurity:trivy:SrcName"
TRIVY_SRC_VERSION: Final = "aquasecurity:trivy:SrcVersion"
TRIVY_SRC_RELEASE: Final = "aquasecurity:trivy:SrcRelease"
TRIVY_SRC_EPOCH: Final = "aquasecurity:trivy:SrcEpoch"


def package_source(props: Mapping[str, list[str]]) -> tuple[str | None, str | None]:
    """(name, version) of the source package a package was built from: our properties, else
    Trivy's (epoch:version-release); (None, None) when neither says (Syft's purl ``upstream``
    qualifier is read with the purl, `scanner.advisories.package_match.package_of`)."""
    name = first(props, v.PACKAGE_SOURCE_NAME)
    if name:
        return name, first(props, v.PACKAGE_SOURCE_VERSION)
    name = first(props, TRIVY_SRC_NAME)
    if not name:
        return None, None
    version = first(props, TRIVY_SRC_VERSION)
    if version:
        epoch = first(props, TRIVY_SRC_EPOCH)
        release = first(props, TRIVY_SRC_RELEASE)
        version = (f"{epoch}:" if epoch and epoch != "0" else "") + version
        version += f"-{release}" if release else ""
    return name, version or None


def package_manager(purl: str | None, props: Mapping[str, list[str]]) -> str | None:
    """A package's manager: our property, else its purl's type."""
    parsed = parse_purl(purl) if purl else None
    return first(props, v.PACKAGE_MANAGER) or (parsed[0] if parsed else None)


def _read(
    reader: Callable[..., ForeignLibrary | None], listed: Listed, *args: Any
) -> ForeignLibrary | None:
    try:
        return reader(*args)
    except OutOfRange as e:
        raise BadComponent(str(e.args[0]), listed, str(e.args[1])) from None


def gpu_libraries(document: Mapping[str, Any]) -> Libraries:
    """The GPU libraries a BOM lists (see `Libraries`). A ``device`` component (a GPU) and a
    host file the container toolkit injects are node facts, never libraries. Raises
    `scanner.detect.packages.OutOfRange` for an absurd number in a name or purl."""
    files: list[GpuEntry] = []
    gpu_packages: list[GpuEntry] = []
    packages: dict[str, Listed] = {}
    skipped: list[str] = []
    for component, where in walk(document.get("components")):
        props = properties(component)
        listed = Listed(component, where, props)
        if component.get("type") == "device" or v.INJECTED_HOST_PATH in props:
            continue
        if v.LIBRARY_FAMILY in props:
            files.append(GpuEntry(listed, None))
            continue
        if component.get("type") == "file":
            library = _read(foreign_file, listed, component)
            if library is None:
                continue
            if library.sha256 is None:
                name = str(component.get("name") or "")
                skipped.append(f"ingest: {name[:1024]}: file component without a SHA-256 hash")
                continue
            files.append(GpuEntry(listed, library))
            continue
        purl = _string(component.get("purl"))
        library = _read(foreign_package, listed, component, props)
        if purl:
            packages.setdefault(purl, listed)
        if library is not None:
            gpu_packages.append(GpuEntry(listed, library))
    owners = {
        first(e.listed.props, v.OWNER_PURL) if e.library is None else e.library.owner_purl
        for e in files
    }
    owners.discard(None)
    entries = list(files)
    for entry in gpu_packages:
        assert entry.library is not None
        if entry.library.owner_purl not in owners:  # else its files are listed one by one
            entries.append(entry)
    gpu_purls = {e.library.owner_purl for e in gpu_packages if e.library is not None}
    kept = tuple(
        p
        for purl, p in packages.items()
        # a GPU stack's package that OSV records name (torch, jax, ...): kept with no file
        if purl in owners or purl in gpu_purls or is_stack_purl(purl)
    )
    return Libraries(tuple(entries), kept, tuple(skipped))


#: the tools whose BOMs the service tells apart (the scan's ``producer``), by name
PRODUCERS: Final = ("gpuprov", "trivy", "syft", "cdxgen")


def tool_of(metadata: Mapping[str, Any]) -> tuple[str, str]:
    """(the tools that wrote the BOM, "name version" joined by ", ", or "unknown"; which of
    `PRODUCERS` it is, or "other"). The first is what a gate reason names as the producer."""
    tools = metadata.get("tools")
    entries: list[Mapping[str, Any]] = []
    if isinstance(tools, list):  # CycloneDX 1.4 (deprecated form, still allowed later)
        entries = [t for t in tools if isinstance(t, dict)]
    elif isinstance(tools, dict):
        entries = [t for t in tools.get("components") or () if isinstance(t, dict)]
        entries += [t for t in tools.get("services") or () if isinstance(t, dict)]
    names = [f"{t.get('name', '?')} {t.get('version', '')}".strip() for t in entries]
    lowered = " ".join(names).lower()
    producer = next((p for p in PRODUCERS if p in lowered), "other")
    return ", ".join(names) or "unknown", producer


def _count(text: str | None) -> int:
    return int(text) if text and text.isdigit() and len(text) <= 8 else 0


def loaded_fields(
    processes: Sequence[Mapping[str, Any]], props: Mapping[str, list[str]]
) -> dict[str, Any]:
    """The loaded-by fields of a file in our vocabulary (``gpuprov:runtime:*``), from its
    processes (each with an integer ``pid``, parsed by the caller) and the counts it states."""
    containers = {p["container"] for p in processes if isinstance(p.get("container"), str)}
    disk = first(props, v.RUNTIME_DISK_SHA256)
    return {
        "loaded_processes": len({p["pid"] for p in processes})
        or _count(first(props, v.RUNTIME_PROCESSES)),
        "loaded_containers": len(containers) or _count(first(props, v.RUNTIME_CONTAINERS)),
        "loaded_deleted": first(props, v.RUNTIME_DELETED) == "true"
        or any(p.get("deleted") is True for p in processes),
        # bytes only processes hold: the file at its path is other bytes, or none at all
        "loaded_copy": first(props, v.RUNTIME_ON_DISK) == "false" or disk is not None,
        "disk_sha256": disk.lower() if disk else None,
    }


#: the keys of a ``gpuprov:runtime:process`` object kept, and the longest string each may hold
_PROCESS_STRINGS: Final = {"exe": 4096, "container": 255, "engine": 32, "pod": 64, "via": 16}


def process_of(value: str) -> dict[str, Any] | None:
    """One ``gpuprov:runtime:process`` value as kept (pid, the known strings that fit, a SHA-256,
    ``deleted``); None when it is no JSON object with a 32-bit unsigned integer pid."""
    try:
        item = load_json(value)
    except DocumentError:
        return None
    pid = item.get("pid") if isinstance(item, dict) else None
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 <= pid < 1 << 32:
        return None
    kept: dict[str, Any] = {"pid": pid}
    for key, longest in _PROCESS_STRINGS.items():
        text = item.get(key)
        if isinstance(text, str) and len(text) <= longest:
            kept[key] = text
    sha = item.get("sha256")
    if isinstance(sha, str) and _SHA256.fullmatch(sha):
        kept["sha256"] = sha.lower()
    if item.get("deleted") is True:
        kept["deleted"] = True
    return kept


#: the label keys and values a BOM may carry (``gpuprov:label:KEY``) that are kept: what the
#: service stores and filters on (its asset_label columns; a test holds the two together)
MAX_LABEL_KEY: Final = 128
MAX_LABEL_VALUE: Final = 256
LABEL_KEY: Final = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._/\-]{{0,{MAX_LABEL_KEY - 1}}}")


def labels_of(props: Mapping[str, list[str]]) -> dict[str, str]:
    """The asset's labels a BOM states (an image's config labels, say): those that fit."""
    out: dict[str, str] = {}
    for name, values in props.items():
        if name.startswith(v.ASSET_LABEL_PREFIX):
            key = name[len(v.ASSET_LABEL_PREFIX) :]
            if LABEL_KEY.fullmatch(key) and len(values[0]) <= MAX_LABEL_VALUE:
                out[key] = values[0]
    return out


_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
#: other tools' image facts, on the asset component (Trivy) or on the BOM's metadata (cdxgen)
REPO_DIGEST_PROPERTIES: Final = ("aquasecurity:trivy:RepoDigest", "oci:image:RepoDigest")
CONFIG_PROPERTIES: Final = ("aquasecurity:trivy:ImageID", "oci:image:Id")


class AssetHead(Struct, frozen=True):
    """What a BOM's ``metadata.component`` says the asset is (docs/bom-properties.md)."""

    kind: str  # "image" | "host"
    name: str
    digest: str | None = None  # an image's manifest digest
    config: str | None = None  # an image's config digest, as stated
    machine_id: str | None = None  # a host's

    @property
    def subject_digest(self) -> str | None:
        """The digest a gate decision names: an image's manifest digest, else its config
        digest; a host's machine id."""
        return (self.digest or self.config) if self.kind == "image" else self.machine_id


class NotAnAsset(ValueError):
    """A BOM whose subject is neither an image nor a host (an application's, a library's or a
    Python project's own SBOM): nothing the fleet inventory, its counts or compliance hold."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        super().__init__(
            f"the BOM describes neither an image nor a host: its metadata.component is {subject}"
            f"; accepted: {ACCEPTED}. "
            "An application's or a package's own SBOM (such as `make sbom`'s) is no asset: "
            "scan the image or host that runs it (`gpuprov scan`)"
        )


#: what a BOM must describe to be stored or gated (docs/bom-properties.md, "The asset")
ACCEPTED: Final = (
    "an image (metadata.component of type 'container'), a host (metadata.component of type "
    "'operating-system', or a root filesystem's BOM that lists its operating system, as "
    "`gpuprov scan /`, `trivy rootfs` and `syft dir:` write), or either declared by "
    f"{v.ASSET_KIND}"
)


def lists_operating_system(document: Mapping[str, Any]) -> bool:
    """Whether the BOM lists an operating system component (a root filesystem's BOM does)."""
    return any(
        component.get("type") == "operating-system"
        for component, _ in walk(document.get("components"))
    )


def asset_of(metadata: Mapping[str, Any], *, operating_system: bool) -> AssetHead:
    """The asset a BOM describes: a ``container`` (or ``gpuprov:asset:kind`` image) is an image;
    an ``operating-system``, a ``gpuprov:asset:kind`` host, or any other component of a BOM
    that lists an operating system (``operating_system``: a root filesystem read by another
    tool) a host; cdxgen's tag (the component's version) joins an image's name. Raises
    NotAnAsset for anything else (an application, a library): nothing to store or gate."""
    component = metadata.get("component")
    component = component if isinstance(component, dict) else {}
    props = properties(component)
    every = {**properties(metadata), **props}
    declared = first(props, v.ASSET_KIND)
    kind_of = component.get("type")
    if declared in ("image", "host"):
        kind = str(declared)
    elif kind_of == "container":
        kind = "image"
    elif kind_of == "operating-system" or operating_system:
        kind = "host"
    else:
        if not component:
            raise NotAnAsset("missing")
        if isinstance(kind_of, str) and kind_of:
            typed = f"{'an' if kind_of[:1] in 'aeiou' else 'a'} {kind_of[:40]}"
        else:
            typed = "a component without a type"
        named = _string(component.get("name"))
        purl = _string(component.get("purl"))
        raise NotAnAsset(
            typed
            + (f" {named[:120]!r}" if named else "")
            + (f" ({purl[:200]!r})" if purl else "")
            + " and the BOM lists no operating system"
        )
    name = str(component.get("name") or "")
    if kind == "host":
        return AssetHead(
            kind, first(props, v.HOST_HOSTNAME) or name, machine_id=first(props, v.HOST_MACHINE_ID)
        )
    tag = component.get("version")
    if isinstance(tag, str) and tag and not _DIGEST.fullmatch(tag):
        # cdxgen splits "repo:tag" into name and version
        if ":" not in name.rsplit("/", 1)[-1]:
            name = f"{name}:{tag}"
    purl = _string(component.get("purl"))
    candidates = [first(props, v.IMAGE_DIGEST)]
    if purl and purl.startswith("pkg:oci/"):
        candidates.append(unquote(purl.split("?", 1)[0].rpartition("@")[2]))
    for prop in REPO_DIGEST_PROPERTIES:
        value = first(every, prop)
        candidates.append(value.rpartition("@")[2] if value else None)
    candidates.append(str(tag or ""))  # Syft: the manifest digest
    digest = next((c for c in candidates if c and _DIGEST.fullmatch(c)), None)
    config = first(props, v.IMAGE_ID) or first(every, *CONFIG_PROPERTIES)
    return AssetHead(kind, name, digest, config)
