"""Asset facts from a CycloneDX JSON BOM, ours (``gpuprov:`` properties) or another tool's, or
an SPDX 2.2 / 2.3 document (JSON or tag-value), read as another tool's CycloneDX BOM
(`scanner.bom.spdx_mapping`).

Our BOMs carry every verdict (docs/bom-properties.md). Trivy, Syft and cdxgen BOMs carry file
or package components without verdicts: their GPU libraries are read by the one reader the
service's ingest uses too (`scanner.bom.foreign`), and their verdicts stay None, so integrity
and provenance rules report that the BOM cannot show them instead of passing. Each fact follows
the rule the service applies to the same report, so `gate --bom` and the service decide alike.
"""

from __future__ import annotations

from typing import Any

from scanner import vocabulary as V
from scanner.bom.foreign import (
    BadComponent,
    Listed,
    NotAnAsset,
    asset_of,
    first,
    gpu_libraries,
    labels_of,
    lists_operating_system,
    loaded_fields,
    process_of,
    properties,
    sha256_of,
    tool_of,
)
from scanner.bom.spdx_mapping import Mapped, read_spdx
from scanner.bom.spdx_reader import SpdxRefused, generation, tag_value
from scanner.errors import ScannerError
from scanner.loaders import load_json
from scanner.model import AssetKind
from scanner.policy.facts import (
    AssetFacts,
    FileFact,
    driver_of,
    file_fact,
    findings_of,
    parse_time,
    trust_of,
    unreadable_of,
)
from scanner.versions import normalize_version


class BomError(ScannerError):
    """A document that is no CycloneDX or SPDX BOM we can gate."""


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _ours(listed: Listed) -> FileFact:
    """A file in our vocabulary, read as the service's ingest reads it."""
    component, props = listed.component, listed.props
    name = str(component.get("name", ""))
    path = first(props, V.FILE_PATH) or name
    family = first(props, V.LIBRARY_FAMILY) or ""
    processes = []
    for value in props.get(V.RUNTIME_PROCESS, []):
        process = process_of(value)
        if process is None:
            raise BomError(
                f"{path}: {V.RUNTIME_PROCESS} must be a JSON object with an integer pid, not "
                f"{value[:60]!r}"
            )
        processes.append(process)
    return FileFact(
        path=path,
        family=family,
        component=first(props, V.LIBRARY_COMPONENT) or family,
        version=normalize_version(first(props, V.LIBRARY_VERSION)),
        cuda_major=_int(first(props, V.LIBRARY_CUDA_MAJOR)),
        sha256=sha256_of(component),
        layer=first(props, V.LAYER),
        integrity=first(props, V.INTEGRITY),
        integrity_reason=first(props, V.INTEGRITY_REASON) or "",
        provenance=first(props, V.PROVENANCE),
        provenance_signer=first(props, V.PROVENANCE_SIGNER),
        provenance_reason=first(props, V.PROVENANCE_REASON) or "",
        owner=first(props, V.OWNER_PURL),
        **loaded_fields(processes, props),
    )


def _files(doc: dict[str, Any], mapped: Mapped | None) -> tuple[FileFact, ...]:
    try:
        found = gpu_libraries(doc)
    except BadComponent as e:
        where = f"SPDX {mapped.origin(e.pointer)}" if mapped else e.pointer
        raise BomError(f"{where}: {e.message}") from None
    return tuple(
        _ours(entry.listed) if entry.library is None else file_fact(entry.library)
        for entry in found.entries
    )


def _spdx(source: str | dict[str, Any]) -> Mapped:
    try:
        return read_spdx(source)
    except SpdxRefused as e:
        raise BomError(f"SPDX {e.field}: {e.message}") from None


def reading(raw: bytes) -> tuple[dict[str, Any], Mapped | None]:
    """The BOM as CycloneDX JSON reads, and for an SPDX document (told by its content) its
    mapping; raises BomError when it is neither."""
    if tag_value(raw[:4096].decode("utf-8", "replace")):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BomError(f"SPDX tag-value: not UTF-8: {e.reason} at byte {e.start}") from None
        mapped = _spdx(text)
        return mapped.bom, mapped
    try:
        doc = load_json(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BomError(f"not a JSON document: {e}") from None
    if generation(doc) is not None:
        mapped = _spdx(doc)
        return mapped.bom, mapped
    if not isinstance(doc, dict) or doc.get("bomFormat") != "CycloneDX":
        raise BomError(
            'not a CycloneDX JSON BOM (no "bomFormat": "CycloneDX") nor an SPDX 2.2 / 2.3 '
            'document (JSON with "spdxVersion", or tag-value)'
        )
    return doc, None


def facts_from_bom(raw: bytes) -> AssetFacts:
    """Asset facts from CycloneDX JSON or SPDX 2 bytes; raises BomError when it is no BOM."""
    doc, mapped = reading(raw)
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    asset = metadata.get("component") if isinstance(metadata.get("component"), dict) else {}
    assert isinstance(asset, dict)
    aprops = properties(asset)
    mprops = properties(metadata)
    try:
        head = asset_of(metadata, operating_system=lists_operating_system(doc))
    except NotAnAsset as e:
        raise BomError(str(e)) from None
    files = _files(doc, mapped)
    return AssetFacts(
        kind=AssetKind(head.kind),
        name=head.name or "unnamed",
        digest=head.subject_digest,
        scanned_at=parse_time(metadata.get("timestamp")),
        files=files,
        labels=tuple(sorted(labels_of(aprops).items())),
        image_trust=trust_of(
            first(aprops, V.IMAGE_SIGNER),
            _int(first(aprops, V.SLSA_BUILD_LEVEL)),
            first(aprops, V.SLSA_BUILDER),
            aprops.get(V.IMAGE_SIGNATURE_REJECTED, ()),
        ),
        driver_version=driver_of(first(aprops, V.DRIVER_VERSION), V.L4T_RELEASE in aprops, files),
        driver_cuda_max=first(aprops, V.DRIVER_CUDA_MAX),
        findings=findings_of(mprops.get(V.SCAN_FINDING, ())),
        producer=tool_of(metadata)[0],
        runtime=V.RUNTIME_PROC in aprops,
        runtime_unreadable=unreadable_of(
            _int(first(aprops, V.RUNTIME_UNREADABLE)) or 0,
            _int(first(aprops, V.RUNTIME_UNREADABLE_MAPPINGS)) or 0,
        ),
    )
