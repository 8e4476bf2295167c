"""SPDX in and out (issue 21): gpuprov's SPDX 2.3 validated by spdx-tools' full validator, read
back to the same facts as its CycloneDX, and hostile SPDX refused naming the SPDX field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

from scanner import vocabulary as V
from scanner.bom import spdx_writer
from scanner.bom.cyclonedx import to_json as cyclonedx_json
from scanner.bom.spdx_mapping import read_spdx
from scanner.bom.spdx_reader import (
    DEFAULT_LIMITS,
    SpdxLimits,
    SpdxRefused,
    generation,
    media_type_of,
    tag_value,
)
from scanner.model import ScanResult
from scanner.pipeline import ScanOptions, run_scan
from scanner.policy.bom_facts import BomError, facts_from_bom
from tests.scanner import scenarios as sc

DIGEST = "sha256:" + "ab" * 32
LIB_SHA = "cd" * 32


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> sc.World:
    return sc.world_at(tmp_path_factory.getbasetemp() / "spdx-world")


@pytest.fixture(scope="module")
def scans(world: sc.World) -> dict[str, ScanResult]:
    target, _ = world.image_target("oci-archive")
    return {
        "host": run_scan(str(world.root), ScanOptions(use_cache=False)),
        "image": run_scan(target, ScanOptions(use_cache=False)),
    }


# --- out: gpuprov's own SPDX ------------------------------------------------------------


@pytest.mark.parametrize("name", ["host", "image"])
def test_written_spdx_is_valid_for_spdx_tools(scans: dict[str, ScanResult], name: str) -> None:
    text = spdx_writer.to_json(scans[name])
    document = JsonLikeDictParser().parse(json.loads(text))
    assert validate_full_spdx_document(document) == []
    assert document.creation_info.spdx_version == "SPDX-2.3"


def _by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["SPDXID"]: p for p in doc["packages"]}


def _notes(doc: dict[str, Any], spdx_id: str) -> dict[str, str]:
    out = {}
    for element in doc["packages"]:
        if element["SPDXID"] != spdx_id:
            continue
        for a in element.get("annotations", []):
            name, _, value = a["comment"].partition("=")
            out[name] = value
    return out


def test_written_spdx_states_the_same_facts_as_cyclonedx(scans: dict[str, ScanResult]) -> None:
    result = scans["image"]
    doc = json.loads(spdx_writer.to_json(result))
    packages = _by_id(doc)
    (root_id,) = [
        r["relatedSpdxElement"]
        for r in doc["relationships"]
        if r["relationshipType"] == "DESCRIBES" and r["spdxElementId"] == "SPDXRef-DOCUMENT"
    ]
    root = packages[root_id]
    assert root["primaryPackagePurpose"] == "CONTAINER"
    assert root["versionInfo"] == result.asset.digest
    assert root["externalRefs"][0]["referenceLocator"].startswith("pkg:oci/")
    contains = {
        (r["spdxElementId"], r["relatedSpdxElement"])
        for r in doc["relationships"]
        if r["relationshipType"] == "CONTAINS"
    }
    purl_of = {
        i: p["externalRefs"][0]["referenceLocator"]
        for i, p in packages.items()
        if p.get("externalRefs") and i != root_id
    }
    files = {p["name"]: p for p in packages.values() if p.get("primaryPackagePurpose") == "FILE"}
    assert sorted(files) == sorted(lib.ref.path for lib in result.libraries)
    for lib in result.libraries:
        package = files[lib.ref.path]
        sums = {c["algorithm"]: c["checksumValue"] for c in package["checksums"]}
        assert sums["SHA256"] == lib.digests.sha256
        assert package.get("versionInfo") == lib.ident.version
        notes = _notes(doc, package["SPDXID"])
        assert notes[V.LIBRARY_FAMILY] == lib.ident.family
        assert notes[V.INTEGRITY] == lib.integrity.value
        owners = {a for a, b in contains if b == package["SPDXID"]}
        if lib.owner is not None:
            assert {purl_of[o] for o in owners} == {lib.owner.purl}
        else:
            assert owners == {root_id}


@pytest.mark.parametrize("name", ["host", "image"])
def test_round_trip_gives_the_facts_of_the_cyclonedx(
    scans: dict[str, ScanResult], name: str
) -> None:
    result = scans[name]
    from_spdx = facts_from_bom(spdx_writer.to_json(result).encode())
    from_cdx = facts_from_bom(cyclonedx_json(result).encode())
    assert from_spdx.files == from_cdx.files
    assert len(from_spdx.files) == len(result.libraries) > 0
    assert (from_spdx.kind, from_spdx.name, from_spdx.digest) == (
        from_cdx.kind,
        from_cdx.name,
        from_cdx.digest,
    )
    assert from_spdx.findings == from_cdx.findings
    assert from_spdx.producer.startswith("gpuprov")


# --- in: other tools' SPDX, and hostile SPDX ---------------------------------------------


def syft_like(files: int = 1) -> dict[str, Any]:
    """An SPDX 2.3 document shaped as Syft writes one of an image (tests/fixtures/spdx has
    Syft's own)."""
    packages: list[dict[str, Any]] = [
        {
            "SPDXID": "SPDXRef-DocumentRoot-Image-app",
            "name": "registry.example/app",
            "versionInfo": DIGEST,
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "primaryPackagePurpose": "CONTAINER",
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": f"pkg:oci/app@{DIGEST.replace(':', '%3A')}",
                }
            ],
        },
        {
            "SPDXID": "SPDXRef-Package-deb-libcudnn9",
            "name": "libcudnn9-cuda-12",
            "versionInfo": "9.1.0.70-1",
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": "pkg:deb/debian/libcudnn9-cuda-12@9.1.0.70-1?arch=amd64",
                }
            ],
        },
    ]
    file_list = [
        {
            "SPDXID": f"SPDXRef-File-{i}",
            "fileName": f"usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.{i}",
            "checksums": [
                {"algorithm": "SHA1", "checksumValue": "ef" * 20},
                {"algorithm": "SHA256", "checksumValue": LIB_SHA},
            ],
        }
        for i in range(files)
    ]
    relationships = [
        {
            "spdxElementId": "SPDXRef-DOCUMENT",
            "relationshipType": "DESCRIBES",
            "relatedSpdxElement": "SPDXRef-DocumentRoot-Image-app",
        },
        {
            "spdxElementId": "SPDXRef-DocumentRoot-Image-app",
            "relationshipType": "CONTAINS",
            "relatedSpdxElement": "SPDXRef-Package-deb-libcudnn9",
        },
        *(
            {
                "spdxElementId": "SPDXRef-Package-deb-libcudnn9",
                "relationshipType": "CONTAINS",
                "relatedSpdxElement": f["SPDXID"],
            }
            for f in file_list
        ),
    ]
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": "registry.example/app",
        "documentNamespace": "https://anchore.com/syft/image/app-1",
        "creationInfo": {"created": "2026-01-02T03:04:05Z", "creators": ["Tool: syft-1.18.1"]},
        "packages": packages,
        "files": file_list,
        "relationships": relationships,
    }


def _bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def test_a_foreign_spdx_reads_as_a_foreign_cyclonedx() -> None:
    facts = facts_from_bom(_bytes(syft_like()))
    assert facts.kind.value == "image" and facts.digest == DIGEST
    assert facts.producer == "syft 1.18.1"
    (lib,) = facts.files
    assert lib.path == "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"
    assert lib.sha256 == LIB_SHA and lib.family == "cudnn"
    assert lib.owner == "pkg:deb/debian/libcudnn9-cuda-12@9.1.0.70-1?arch=amd64"
    # no verdicts in SPDX: the gate says missing_input, as for other producers
    assert lib.integrity is None and lib.provenance is None


def test_detection_by_content() -> None:
    doc = syft_like()
    assert generation(doc) == "2"
    assert generation({"bomFormat": "CycloneDX"}) is None
    assert generation({"@context": "https://spdx.org/rdf/3.0.1/spdx-context.jsonld"}) == "3"
    assert media_type_of(_bytes(doc)) == "application/spdx+json"
    assert media_type_of(b'{"bomFormat": "CycloneDX"}') is None
    assert tag_value("## a comment\n\nSPDXVersion: SPDX-2.3\n")
    assert not tag_value('{"SPDXVersion": "x"}')


TAG_VALUE = f"""\
SPDXVersion: SPDX-2.3
DataLicense: CC0-1.0
SPDXID: SPDXRef-DOCUMENT
DocumentName: app
DocumentNamespace: https://example.org/spdx/app-1
Creator: Tool: trivy-0.58.0
Created: 2026-01-02T03:04:05Z
Relationship: SPDXRef-DOCUMENT DESCRIBES SPDXRef-Image

PackageName: registry.example/app
SPDXID: SPDXRef-Image
PackageVersion: {DIGEST}
PackageDownloadLocation: NOASSERTION
FilesAnalyzed: false
PrimaryPackagePurpose: CONTAINER

PackageName: nvidia-cudnn-cu12
SPDXID: SPDXRef-Wheel
PackageVersion: 9.1.0.70
PackageDownloadLocation: NOASSERTION
FilesAnalyzed: false
ExternalRef: PACKAGE-MANAGER purl pkg:pypi/nvidia-cudnn-cu12@9.1.0.70
Relationship: SPDXRef-Image CONTAINS SPDXRef-Wheel
"""


def test_tag_value_is_read() -> None:
    facts = facts_from_bom(TAG_VALUE.encode())
    assert facts.kind.value == "image" and facts.digest == DIGEST
    assert facts.producer == "trivy 0.58.0"
    (lib,) = facts.files
    assert (lib.family, lib.version, lib.owner) == (
        "cudnn",
        "9.1.0.70",
        "pkg:pypi/nvidia-cudnn-cu12@9.1.0.70",
    )


def _refused(doc: dict[str, Any] | str, limits: SpdxLimits = DEFAULT_LIMITS) -> SpdxRefused:
    with pytest.raises(SpdxRefused) as caught:
        read_spdx(doc, limits)
    return caught.value


def test_relationship_cycles_are_read_one_step() -> None:
    doc = syft_like()
    pkg, file = "SPDXRef-Package-deb-libcudnn9", "SPDXRef-File-0"
    doc["relationships"] += [
        {"spdxElementId": file, "relationshipType": "CONTAINS", "relatedSpdxElement": pkg},
        {"spdxElementId": pkg, "relationshipType": "DEPENDS_ON", "relatedSpdxElement": pkg},
        {
            "spdxElementId": pkg,
            "relationshipType": "CONTAINS",
            "relatedSpdxElement": "SPDXRef-DocumentRoot-Image-app",
        },
    ]
    mapped = read_spdx(doc)
    (file_component,) = [c for c in mapped.bom["components"] if c["type"] == "file"]
    owner = [p["value"] for p in file_component["properties"] if p["name"] == V.OWNER_PURL]
    assert owner == ["pkg:deb/debian/libcudnn9-cuda-12@9.1.0.70-1?arch=amd64"]


def test_too_many_packages_is_refused_before_parsing() -> None:
    doc = syft_like(files=0)
    extra = doc["packages"][1]
    doc["packages"] += [dict(extra, SPDXID=f"SPDXRef-P{i}") for i in range(100_000)]
    refused = _refused(doc)
    assert refused.too_large and refused.field == "packages"
    assert "100002" in refused.message and "GPUPROV_MAX_REPORT_COMPONENTS" in refused.message


def test_the_limits_are_the_configured_ones() -> None:
    refused = _refused(syft_like(files=3), SpdxLimits(max_elements=4))
    assert refused.too_large and "5" in refused.message
    assert read_spdx(syft_like(files=2), SpdxLimits(max_elements=4))
    doc = syft_like()
    doc["packages"][1]["externalRefs"] *= 3
    refused = _refused(doc, SpdxLimits(max_per_element=2))
    assert refused.too_large and refused.field == "packages[1].externalRefs"


def test_tag_value_limits() -> None:
    refused = _refused(TAG_VALUE, SpdxLimits(max_elements=1))
    assert refused.too_large and refused.field == "elements"


@pytest.mark.parametrize(
    "value",
    ["cd" * 31, "zz" * 32, "cd" * 33],
    ids=["short", "not-hex", "long"],
)
def test_wrong_checksums_are_refused(value: str) -> None:
    doc = syft_like()
    doc["files"][0]["checksums"][1]["checksumValue"] = value
    refused = _refused(doc)
    assert refused.field == "SPDXRef-File-0 checksum"
    assert "SHA256" in refused.message, refused.message


def test_duplicated_spdxids_are_refused() -> None:
    doc = syft_like()
    doc["files"][0]["SPDXID"] = "SPDXRef-Package-deb-libcudnn9"
    doc["relationships"] = doc["relationships"][:2]
    refused = _refused(doc)
    assert refused.field == "SPDXID" and "SPDXRef-Package-deb-libcudnn9" in refused.message


def test_a_relationship_to_nothing_is_refused() -> None:
    doc = syft_like()
    doc["relationships"][2]["relatedSpdxElement"] = "SPDXRef-Gone"
    refused = _refused(doc)
    assert refused.field == "relationships.relatedSpdxElement" and "SPDXRef-Gone" in str(refused)


def test_spdx3_is_refused_clearly() -> None:
    doc = {"@context": "https://spdx.org/rdf/3.0.1/spdx-context.jsonld", "@graph": []}
    refused = _refused(doc)
    assert "SPDX 3.0" in refused.message and "SPDX 2.3" in refused.message
    assert "SPDX 3.0" in str(_refused({"spdxVersion": "SPDX-3.0"}))


def _an_application(doc: dict[str, Any]) -> None:
    # an application's own SBOM: no image purl, and no OS package (a deb purl says rootfs)
    doc["packages"][0].update(primaryPackagePurpose="APPLICATION", externalRefs=[])
    doc["packages"][1]["externalRefs"][0]["referenceLocator"] = "pkg:pypi/torch@2.5.0"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(spdxVersion="SPDX-2.1"), "spdxVersion"),
        (lambda d: d.pop("documentNamespace"), "CreationInfo"),
        (lambda d: d.update(packages="none"), "document"),
        (_an_application, None),
        (lambda d: d.update(relationships=d["relationships"][1:]), "documentDescribes"),
    ],
    ids=["old-version", "no-namespace", "packages-not-a-list", "an-application", "no-root"],
)
def test_not_acceptable_spdx_names_the_field(change: Any, field: str | None) -> None:
    doc = copy.deepcopy(syft_like())
    change(doc)
    refused = _refused(doc)
    if field is not None:
        assert refused.field == field or refused.field.startswith(field), refused.field
    else:
        assert refused.field == "primaryPackagePurpose"
        assert "neither an image nor a host" in refused.message


def test_the_cli_reading_names_spdx() -> None:
    doc = syft_like()
    doc["files"][0]["SPDXID"] = "SPDXRef-Package-deb-libcudnn9"
    with pytest.raises(BomError, match=r"^SPDX SPDXID: .*unique"):
        facts_from_bom(_bytes(doc))
    with pytest.raises(BomError, match="nor an SPDX 2.2 / 2.3 document"):
        facts_from_bom(b'{"hello": "world"}')


def test_scan_writes_spdx_json(world: sc.World, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gpuprov.cli import app

    target, built = world.image_target("oci")
    out = tmp_path / "image.spdx.json"
    result = CliRunner().invoke(app, ["scan", target, "-f", "spdx-json", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert validate_full_spdx_document(JsonLikeDictParser().parse(doc)) == []
    root = next(p for p in doc["packages"] if p["SPDXID"] == spdx_writer.ASSET_ID)
    assert root["versionInfo"] == built.manifest_digest
