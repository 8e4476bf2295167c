"""SPDX encoder: `ScanResult` -> SPDX 2.3 JSON, built with spdx-tools' model and JSON writer.

The same facts as the CycloneDX BOM (`scanner.bom.cyclonedx`, whose property lists it reuses):
the image or host is the described package, each owner package a package with its purl, each
GPU library file a package of purpose FILE with its SHA-256 that its owner ``CONTAINS``, and
every ``gpuprov:`` property (verdicts among them) an annotation ``gpuprov:NAME=VALUE``
(docs/bom-properties.md, "SPDX"). A file is an SPDX package, not an SPDX File, because SPDX 2
requires a SHA-1 of every File and a scan computes none (writing a made-up one is no answer).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from scanner import vocabulary as V
from scanner.bom.cyclonedx import asset_pairs, file_pairs, package_pairs
from scanner.model import AssetKind, GpuLibrary, ScanResult

#: the namespace of the documents gpuprov writes (SPDX 2.3 clause 6.5: a unique URI each)
NAMESPACE = "https://spdx.org/spdxdocs/gpuprov-"
ASSET_ID = "SPDXRef-Asset"


def _annotations(
    spdx_id: str, pairs: Iterable[tuple[str, str | None]], tool: Any, when: datetime
) -> list[Any]:
    from spdx_tools.spdx.model import Annotation, AnnotationType

    return [
        Annotation(spdx_id, AnnotationType.OTHER, tool, when, f"{name}={value}")
        for name, value in pairs
        if value not in (None, "")
    ]


def _purl_ref(purl: str) -> Any:
    from spdx_tools.spdx.model import ExternalPackageRef, ExternalPackageRefCategory

    return ExternalPackageRef(ExternalPackageRefCategory.PACKAGE_MANAGER, "purl", purl)


def _asset_package(result: ScanResult) -> Any:
    from spdx_tools.spdx.model import Checksum, ChecksumAlgorithm, Package, PackagePurpose
    from spdx_tools.spdx.model import SpdxNoAssertion as NoAssertion

    from scanner.imageref import oci_purl

    asset = result.asset
    if asset.kind is AssetKind.IMAGE:
        digest = asset.digest
        return Package(
            ASSET_ID,
            asset.name,
            NoAssertion(),
            version=digest,
            files_analyzed=False,
            checksums=[Checksum(ChecksumAlgorithm.SHA256, digest.removeprefix("sha256:"))]
            if digest
            else [],
            external_references=[_purl_ref(str(oci_purl(asset.name, digest, asset.platform)))]
            if digest
            else [],
            primary_package_purpose=PackagePurpose.CONTAINER,
        )
    return Package(
        ASSET_ID,
        asset.name,
        NoAssertion(),
        files_analyzed=False,
        primary_package_purpose=PackagePurpose.OPERATING_SYSTEM,
    )


def _file_package(lib: GpuLibrary, spdx_id: str) -> Any:
    from spdx_tools.spdx.model import Checksum, ChecksumAlgorithm, Package, PackagePurpose
    from spdx_tools.spdx.model import SpdxNoAssertion as NoAssertion

    checksums = [Checksum(ChecksumAlgorithm.SHA256, lib.digests.sha256)]
    if lib.digests.md5:
        checksums.append(Checksum(ChecksumAlgorithm.MD5, lib.digests.md5))
    return Package(
        spdx_id,
        lib.ref.path,
        NoAssertion(),
        version=lib.ident.version,
        file_name="./" + lib.ref.path.lstrip("/"),
        files_analyzed=False,
        checksums=checksums,
        primary_package_purpose=PackagePurpose.FILE,
    )


def build_document(result: ScanResult, *, namespace: str | None = None) -> Any:
    """spdx-tools' `Document` for a scan result; its namespace is fresh unless given."""
    from spdx_tools.spdx.model import (
        Actor,
        ActorType,
        CreationInfo,
        Document,
        Package,
        Relationship,
        RelationshipType,
    )
    from spdx_tools.spdx.model import SpdxNoAssertion as NoAssertion

    when = datetime.fromisoformat(result.started_at.replace("Z", "+00:00")).astimezone(UTC)
    when = when.replace(microsecond=0)
    tool = Actor(ActorType.TOOL, f"gpuprov-{result.tool_version}")
    info = CreationInfo(
        spdx_version="SPDX-2.3",
        spdx_id="SPDXRef-DOCUMENT",
        name=result.asset.name or "unnamed",
        document_namespace=namespace or f"{NAMESPACE}{uuid.uuid4()}",
        creators=[tool],
        created=when,
    )
    asset = _asset_package(result)
    packages: list[Any] = [asset]
    annotations = _annotations(ASSET_ID, asset_pairs(result), tool, when)
    document_notes: Sequence[tuple[str, str | None]] = [
        *((V.SCAN_FINDING, f"{f.kind}: {f.message}") for f in result.findings),
        *((V.SCAN_SKIPPED, f"{s.stage}: {s.path}: {s.reason}") for s in result.skipped),
    ]
    annotations += _annotations(info.spdx_id, document_notes, tool, when)
    relationships = [Relationship(info.spdx_id, RelationshipType.DESCRIBES, ASSET_ID)]
    owners: dict[str, str] = {}
    for n, pkg in enumerate(result.packages, 1):
        spdx_id = f"SPDXRef-Package-{n}"
        owners.setdefault(pkg.purl, spdx_id)
        packages.append(
            Package(
                spdx_id,
                pkg.name,
                NoAssertion(),
                version=pkg.version or None,
                files_analyzed=False,
                external_references=[_purl_ref(pkg.purl)],
            )
        )
        annotations += _annotations(spdx_id, package_pairs(pkg), tool, when)
        relationships.append(Relationship(ASSET_ID, RelationshipType.CONTAINS, spdx_id))
    for n, lib in enumerate(result.libraries, 1):
        spdx_id = f"SPDXRef-File-{n}"
        packages.append(_file_package(lib, spdx_id))
        annotations += _annotations(spdx_id, file_pairs(lib), tool, when)
        owner = owners.get(lib.owner.purl) if lib.owner is not None else None
        relationships.append(Relationship(owner or ASSET_ID, RelationshipType.CONTAINS, spdx_id))
    return Document(info, packages=packages, relationships=relationships, annotations=annotations)


def to_json(result: ScanResult, *, namespace: str | None = None) -> str:
    """Serialize a scan result as SPDX 2.3 JSON with spdx-tools' writer (namespace: see
    `build_document`). Its validation is left to the tests: spdx-tools' whole-document check
    is quadratic in the elements (`scanner.bom.spdx_reader.check`)."""
    from spdx_tools.spdx.writer.json.json_writer import write_document_to_stream

    stream = io.StringIO()
    write_document_to_stream(build_document(result, namespace=namespace), stream, validate=False)
    return stream.getvalue()
