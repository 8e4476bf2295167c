"""An asset's SBOM as SPDX 2.3 JSON, rebuilt from what the service stored (spdx-tools' model and
writer), with the facts and the ``gpuprov:`` annotations of `gpuprov scan -f spdx-json`.

The same rows as the normalized CycloneDX (`app.domain.inventory.sbom`): the asset is the
described package, each package row a package with its purl, each stored file a package of
purpose FILE with its SHA-256 that its owner ``CONTAINS`` (docs/bom-properties.md, "SPDX").
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import Any

from sqlalchemy.orm import Session

from app.domain.inventory.queries import find_asset, find_scan
from app.domain.inventory.sbom import asset_pairs, file_pairs
from app.storage.repositories import inventory as repo
from app.storage.tables import Artifact, Asset, Package, Scan
from scanner import __version__
from scanner.imageref import oci_purl

MEDIA_TYPE = "application/spdx+json"
ASSET_ID = "SPDXRef-Asset"


def spdx_sbom(session: Session, asset_id: int, scan_id: int | None) -> str:
    """The SPDX 2.3 JSON document of one scan of an asset (its latest by default)."""
    asset = find_asset(session, asset_id)
    scan = find_scan(session, asset_id, scan_id)
    packages = repo.scan_packages(session, scan.id)
    artifacts = repo.scan_artifacts(session, [scan.id])
    return encode(asset, scan, packages, artifacts)


def _annotations(
    spdx_id: str, pairs: Iterable[tuple[str, str | None]], tool: Any, when: Any
) -> list[Any]:
    from spdx_tools.spdx.model import Annotation, AnnotationType

    return [
        Annotation(spdx_id, AnnotationType.OTHER, tool, when, f"{name}={value}")
        for name, value in pairs
        if value
    ]


def _purl_ref(purl: str) -> Any:
    from spdx_tools.spdx.model import ExternalPackageRef, ExternalPackageRefCategory

    return ExternalPackageRef(ExternalPackageRefCategory.PACKAGE_MANAGER, "purl", purl)


def _asset_package(asset: Asset) -> Any:
    from spdx_tools.spdx.model import Checksum, ChecksumAlgorithm, PackagePurpose
    from spdx_tools.spdx.model import Package as SpdxPackage
    from spdx_tools.spdx.model import SpdxNoAssertion as NoAssertion

    if asset.kind != "image":
        return SpdxPackage(
            ASSET_ID,
            asset.name,
            NoAssertion(),
            files_analyzed=False,
            primary_package_purpose=PackagePurpose.OPERATING_SYSTEM,
        )
    digest = asset.details.get("digest") or None
    purl = str(oci_purl(asset.name, digest, asset.details.get("platform"))) if digest else None
    return SpdxPackage(
        ASSET_ID,
        asset.name,
        NoAssertion(),
        version=digest,
        files_analyzed=False,
        checksums=[Checksum(ChecksumAlgorithm.SHA256, digest.removeprefix("sha256:"))]
        if digest
        else [],
        external_references=[_purl_ref(purl)] if purl else [],
        primary_package_purpose=PackagePurpose.CONTAINER,
    )


def encode(asset: Asset, scan: Scan, rows: Sequence[Package], artifacts: Sequence[Artifact]) -> str:
    """The document, written by spdx-tools (validated by its full validator in the tests)."""
    from spdx_tools.spdx.model import (
        Actor,
        ActorType,
        Checksum,
        ChecksumAlgorithm,
        CreationInfo,
        Document,
        PackagePurpose,
        Relationship,
        RelationshipType,
    )
    from spdx_tools.spdx.model import Package as SpdxPackage
    from spdx_tools.spdx.model import SpdxNoAssertion as NoAssertion
    from spdx_tools.spdx.writer.json.json_writer import write_document_to_stream

    when = scan.scanned_at.astimezone(UTC).replace(microsecond=0, tzinfo=None)
    tool = Actor(ActorType.TOOL, f"gpuprov-service-{__version__}")
    # the same scan, the same namespace: a repeated download is the same document
    name = uuid.uuid5(uuid.NAMESPACE_URL, f"gpuprov:spdx:{scan.id}:{scan.content_sha256}")
    info = CreationInfo(
        spdx_version="SPDX-2.3",
        spdx_id="SPDXRef-DOCUMENT",
        name=asset.name,
        document_namespace=f"https://spdx.org/spdxdocs/gpuprov-service-{name}",
        creators=[tool],
        created=when,
    )
    packages = [_asset_package(asset)]
    annotations = _annotations(ASSET_ID, asset_pairs(asset, scan), tool, when)
    annotations += _annotations(info.spdx_id, [("gpuprov:source:tool", scan.tool)], tool, when)
    relationships = [Relationship(info.spdx_id, RelationshipType.DESCRIBES, ASSET_ID)]
    owners: dict[str, str] = {}
    for row in rows:
        spdx_id = f"SPDXRef-Package-{row.id}"
        if row.purl:
            owners.setdefault(row.purl, spdx_id)
        packages.append(
            SpdxPackage(
                spdx_id,
                row.name,
                NoAssertion(),
                version=row.version or None,
                files_analyzed=False,
                external_references=[_purl_ref(row.purl)] if row.purl else [],
            )
        )
        relationships.append(Relationship(ASSET_ID, RelationshipType.CONTAINS, spdx_id))
    for artifact in artifacts:
        if artifact.kind != "file" or not artifact.sha256:
            continue
        spdx_id = f"SPDXRef-File-{artifact.id}"
        path = artifact.path or artifact.name
        packages.append(
            SpdxPackage(
                spdx_id,
                path,
                NoAssertion(),
                version=artifact.version or None,
                file_name="./" + path.lstrip("/"),
                files_analyzed=False,
                checksums=[Checksum(ChecksumAlgorithm.SHA256, artifact.sha256)],
                primary_package_purpose=PackagePurpose.FILE,
            )
        )
        annotations += _annotations(spdx_id, file_pairs(artifact), tool, when)
        owner = owners.get(artifact.owner_purl) if artifact.owner_purl else None
        relationships.append(Relationship(owner or ASSET_ID, RelationshipType.CONTAINS, spdx_id))
    document = Document(
        info, packages=packages, relationships=relationships, annotations=annotations
    )
    stream = io.StringIO()
    write_document_to_stream(document, stream, validate=False)
    return stream.getvalue()
