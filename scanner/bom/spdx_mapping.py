"""An SPDX 2 document read as another tool's CycloneDX BOM: the one reading both formats share.

The described package becomes ``metadata.component`` (an image or a host), packages ``library``
components with their purls, files ``file`` components with their SHA-256 and the purl of the
package that ``CONTAINS`` them, and ``gpuprov:NAME=VALUE`` annotations the ``gpuprov:``
properties they stand for (docs/bom-properties.md, "SPDX"). What follows is the CycloneDX
reading itself (`scanner.bom.foreign`): no second set of rules. ``origins`` names the SPDX
element behind each part of the reading, so a refusal names SPDX fields, not CycloneDX ones.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import UTC
from typing import TYPE_CHECKING, Any, Final

from msgspec import Struct

from scanner import vocabulary as v
from scanner.bom import foreign
from scanner.bom.spdx_reader import (
    DEFAULT_LIMITS,
    SPDX3_REFUSED,
    SpdxLimits,
    SpdxRefused,
    described,
    generation,
    read_json,
    read_tag_value,
)

if TYPE_CHECKING:
    from spdx_tools.spdx.model import Document, File, Package

#: the comment of an annotation that states one gpuprov property: ``gpuprov:NAME=VALUE``
ANNOTATION_PREFIX: Final = v.NS + ":"
#: package managers whose packages are installed in an operating system's root filesystem: a
#: document listing one describes a root filesystem (as a CycloneDX BOM listing an OS does)
OS_PURL_TYPES: Final = ("deb", "rpm", "apk", "alpm")
_TOOL: Final = re.compile(r"(?P<name>.+?)-(?P<version>v?\d[\w.+~-]*)")
_IMAGE_PURLS: Final = ("pkg:oci/", "pkg:docker/")
#: Syft's ``sourceInfo`` of a package: "acquired package info from WHAT: PATH, PATH, ...", the
#: locations its CycloneDX lists as ``syft:location:N:path``, in the same order
_SYFT_SOURCE_INFO: Final = re.compile(r"acquired package info from [^:/]*: (/[^,]+)")


class Mapped(Struct, frozen=True):
    """An SPDX document's reading: a CycloneDX-shaped document for `scanner.bom.foreign`."""

    bom: dict[str, Any]
    spec: str  # "SPDX-2.2" | "SPDX-2.3"
    #: a JSON pointer of ``bom`` (``/components/3``) -> the SPDX element it comes from
    origins: dict[str, str]

    def origin(self, pointer: str) -> str:
        """The SPDX element and field behind a pointer of the reading ("" for the whole)."""
        parts = pointer.split("/")
        for cut in range(len(parts), 0, -1):
            head = "/".join(parts[:cut])
            if head in self.origins:
                rest = parts[cut : cut + 1]
                field = _FIELDS.get(rest[0], rest[0]) if rest else ""
                return self.origins[head] + (f" {field}" if field else "")
        return "document"


#: a CycloneDX field of the reading -> the SPDX field it came from
_FIELDS: Final = {
    "properties": "annotations",
    "hashes": "checksums",
    "name": "name",
    "purl": "externalRefs (purl)",
    "version": "versionInfo",
    "bom-ref": "SPDXID",
}


def annotations_of(document: Document) -> dict[str, list[dict[str, str]]]:
    """The ``gpuprov:`` properties that annotations state, by the SPDXID they annotate."""
    out: dict[str, list[dict[str, str]]] = {}
    for annotation in document.annotations:
        comment = annotation.annotation_comment
        if not comment.startswith(ANNOTATION_PREFIX) or "=" not in comment:
            continue
        name, _, value = comment.partition("=")
        out.setdefault(annotation.spdx_id, []).append({"name": name, "value": value})
    return out


def purl_of(package: Package) -> str | None:
    """The package's first purl (an external reference of type ``purl``)."""
    for ref in package.external_references:
        if ref.reference_type == "purl":
            return str(ref.locator)
    return None


def absolute(name: str) -> str:
    """A file name of a root filesystem's document (``./usr/lib/x``, ``usr/lib/x``) as the
    absolute path it is in that root."""
    return "/" + name.removeprefix("./").lstrip("/")


def _tools(document: Document) -> list[dict[str, str]]:
    from spdx_tools.spdx.model import ActorType

    out = []
    for creator in document.creation_info.creators:
        if creator.actor_type is not ActorType.TOOL:
            continue
        found = _TOOL.fullmatch(creator.name.strip())
        if found:
            out.append({"name": found["name"], "version": found["version"]})
        else:
            out.append({"name": creator.name.strip()})
    return out


def _purpose(package: Package) -> str | None:
    purpose = package.primary_package_purpose
    return purpose.name.replace("_", "-") if purpose is not None else None


def _owners(document: Document, root: str) -> dict[str, str]:
    """The package owning each file (or package of purpose FILE): ``P CONTAINS F``,
    ``F CONTAINED_BY P``, ``P DEPENDS_ON F`` or ``F DEPENDENCY_OF P``, the first in document
    order; one step only, so a cycle of relationships is read like any other (the described
    package owns nothing: it is the asset)."""
    from spdx_tools.spdx.model import RelationshipType as R

    file_packages = {p.spdx_id for p in document.packages if _purpose(p) == "FILE"}
    files = {f.spdx_id for f in document.files} | file_packages
    packages = {p.spdx_id for p in document.packages} - {root} - file_packages
    out: dict[str, str] = {}
    for r in document.relationships:
        a, b = r.spdx_element_id, r.related_spdx_element_id
        if r.relationship_type in (R.CONTAINS, R.DEPENDS_ON):
            package, file = a, b
        elif r.relationship_type in (R.CONTAINED_BY, R.DEPENDENCY_OF):
            package, file = b, a
        else:
            continue
        if isinstance(file, str) and file in files and package in packages:
            out.setdefault(file, str(package))
    return out


def _root(document: Document) -> Package:
    ids = described(document)
    packages = {p.spdx_id: p for p in document.packages}
    roots = [packages[i] for i in ids if i in packages]
    if len(ids) != 1 or not roots:
        shown = ", ".join(i[:80] for i in ids[:5]) or "nothing"
        raise SpdxRefused(
            f"the document describes {shown}: gpuprov reads a document that describes one "
            "package, the image or host (DESCRIBES)",
            "documentDescribes",
        )
    return roots[0]


def _asset_type(
    root: Package, props: list[dict[str, str]], os_listed: bool, purl: str | None
) -> str:
    declared = next((p["value"] for p in props if p["name"] == v.ASSET_KIND), None)
    purpose = _purpose(root)
    if declared in ("image", "host"):
        return "container" if declared == "image" else "operating-system"
    if purpose == "CONTAINER" or (purl or "").startswith(_IMAGE_PURLS):
        return "container"
    if purpose == "OPERATING-SYSTEM" or os_listed:
        return "operating-system"
    directory = purpose == "FILE" and not root.checksums  # Syft's `dir:` root (a file has sums)
    raise SpdxRefused(
        f"the described package {root.spdx_id[:80]} ({root.name[:80]!r}, primaryPackagePurpose "
        f"{purpose or 'not given'}) is neither an image nor a host; accepted: an image "
        "(primaryPackagePurpose CONTAINER, or a pkg:oci / pkg:docker purl), a host "
        "(OPERATING-SYSTEM, or a root filesystem's document that lists an OPERATING-SYSTEM "
        f"package or {'/'.join(OS_PURL_TYPES)} packages), or either declared by an annotation "
        f"'{v.ASSET_KIND}=image|host'. An application's or a package's own SBOM is no asset: "
        "scan the image or host that runs it" + (_NO_OS_NAMED if directory else ""),
        "primaryPackagePurpose",
    )


#: why a root filesystem's SPDX from Syft can name no operating system, and what to send instead
_NO_OS_NAMED: Final = (
    ". A directory's SPDX names its operating system only through the packages of its OS "
    "package manager: Syft 1.x writes no OPERATING-SYSTEM package (anchore/syft#3012), so a root "
    "without a dpkg, rpm, apk or alpm database reads the same as any directory. Its CycloneDX "
    "(`syft dir:ROOT -o cyclonedx-json`) lists the OS where Syft found one (os-release) and is "
    "then read as a host"
)


def _os_listed(document: Document, root: str) -> bool:
    """Whether the document lists its operating system, as the same tool's CycloneDX does with
    an ``operating-system`` component: an OPERATING-SYSTEM package (Trivy), or a package of an
    OS package manager (Syft writes a deb, rpm or apk purl only when it knows the distro, which
    its CycloneDX then lists; tests/fixtures/spdx/README.md)."""
    for package in document.packages:
        if package.spdx_id == root:
            continue
        if _purpose(package) == "OPERATING-SYSTEM":
            return True
        purl = purl_of(package)
        if purl and purl.split("/", 1)[0].removeprefix("pkg:") in OS_PURL_TYPES:
            return True
    return False


def _file_component(
    file: File | Package, name: str, props: list[dict[str, str]], owner: str | None
) -> dict[str, Any]:
    """A file, or a package of purpose FILE (a single file: SPDX 2.3 clause 7.24), as a
    ``file`` component with its SHA-256 and its owner's purl."""
    from spdx_tools.spdx.model import ChecksumAlgorithm

    hashes = [
        {"alg": "SHA-256", "content": c.value.lower()}
        for c in file.checksums
        if c.algorithm is ChecksumAlgorithm.SHA256
    ]
    if owner and not any(p["name"] == v.OWNER_PURL for p in props):
        props = [*props, {"name": v.OWNER_PURL, "value": owner}]
    return {
        "type": "file",
        "bom-ref": file.spdx_id,
        "name": absolute(name),
        "hashes": hashes[:1],
        "properties": props,
    }


def found_at(package: Package) -> str | None:
    """Where the tool found the package: the first path of Syft's ``sourceInfo`` (its CycloneDX
    says the same in ``syft:location:0:path``), or None."""
    found = _SYFT_SOURCE_INFO.match(package.source_info or "")
    return found.group(1).strip() if found else None


def _package_component(package: Package, props: list[dict[str, str]]) -> dict[str, Any]:
    purpose = _purpose(package)
    where = found_at(package)
    if where and not any(p["name"] in foreign.PATH_PROPERTIES for p in props):
        # read by `scanner.bom.foreign` exactly as the same tool's CycloneDX location
        props = [*props, {"name": foreign.SYFT_PATH, "value": where}]
    component: dict[str, Any] = {
        "type": "operating-system" if purpose == "OPERATING-SYSTEM" else "library",
        "bom-ref": package.spdx_id,
        "name": package.name,
        "properties": props,
    }
    if package.version:
        component["version"] = package.version
    purl = purl_of(package)
    if purl:
        component["purl"] = purl
    if purpose == "SOURCE":  # installs nothing (as cdxgen's "source" tag says)
        component["tags"] = ["source"]
    return component


def reading(document: Document) -> Mapped:
    """The document read as a CycloneDX BOM of another tool (see the module docstring); raises
    `SpdxRefused` when it describes no single image or host."""
    notes = annotations_of(document)
    root = _root(document)
    root_props = notes.get(root.spdx_id, [])
    root_purl = purl_of(root)
    asset: dict[str, Any] = {
        "type": _asset_type(root, root_props, _os_listed(document, root.spdx_id), root_purl),
        "bom-ref": root.spdx_id,
        "name": root.name,
        "properties": root_props,
    }
    if root.version:
        asset["version"] = root.version
    if root_purl:
        asset["purl"] = root_purl
    info = document.creation_info
    created = info.created if info.created.tzinfo else info.created.replace(tzinfo=UTC)
    metadata: dict[str, Any] = {
        "timestamp": created.isoformat(),
        "tools": {"components": _tools(document)},
        "component": asset,
        "properties": notes.get(info.spdx_id, []),
    }
    root_where = f"described package {root.spdx_id}"
    origins = {
        "": "document",
        "/serialNumber": "documentNamespace",
        "/metadata": f"document {info.spdx_id} annotations",
        "/metadata/timestamp": "creationInfo.created",
        "/metadata/tools": "creationInfo.creators",
        "/metadata/component": root_where,
    }
    components: list[dict[str, Any]] = []
    purls = {p.spdx_id: purl_of(p) for p in document.packages}
    owners = _owners(document, root.spdx_id)
    for package in document.packages:
        if package.spdx_id == root.spdx_id:
            continue
        origins[f"/components/{len(components)}"] = f"package {package.spdx_id}"
        props = notes.get(package.spdx_id, [])
        if _purpose(package) == "FILE":
            owner = purls.get(owners.get(package.spdx_id, ""))
            name = package.file_name or package.name
            components.append(_file_component(package, name, props, owner))
        else:
            components.append(_package_component(package, props))
    for file in document.files:
        origins[f"/components/{len(components)}"] = f"file {file.spdx_id}"
        owner = purls.get(owners.get(file.spdx_id, ""))
        components.append(_file_component(file, file.name, notes.get(file.spdx_id, []), owner))
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        # the namespace is the document's unique URI (SPDX 2.3 clause 6.5): one per document
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, info.document_namespace)}",
        "version": 1,
        "metadata": metadata,
        "components": components,
    }
    return Mapped(bom, info.spdx_version, origins)


def read_spdx(source: str | Mapping[str, Any], limits: SpdxLimits = DEFAULT_LIMITS) -> Mapped:
    """An SPDX 2 document, tag-value text or parsed JSON, read (`scanner.bom.spdx_reader`) and
    mapped (`reading`); raises `SpdxRefused` naming the SPDX field or rule."""
    if isinstance(source, str):
        return reading(read_tag_value(source, limits))
    if generation(source) == "3":
        raise SpdxRefused(SPDX3_REFUSED, "spdxVersion" if "spdxVersion" in source else "@context")
    return reading(read_json(source, limits))
