"""SPDX's relationship shortcuts read in linear time (issue 21): JSON ``documentDescribes`` and
``hasFiles``, and the CONTAINS of a tag-value file that follows its package, give the model
spdx-tools' own parser gives, without its per-relationship list look-ups (bench/spdx_ingest.py
has the times)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
from spdx_tools.spdx.parser.tagvalue.parser import Parser

from scanner.bom.spdx_reader import SpdxLimits, SpdxRefused, read_json, read_tag_value


def _package(spdx_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "SPDXID": spdx_id,
        "name": spdx_id.lower(),
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        **extra,
    }


def _file(spdx_id: str) -> dict[str, Any]:
    return {
        "SPDXID": spdx_id,
        "fileName": f"./usr/lib/{spdx_id}.so",
        "checksums": [{"algorithm": "SHA1", "checksumValue": "a" * 40}],
    }


def shortcuts() -> dict[str, Any]:
    """Both shortcuts, with duplicates and relationships (and inverses) they repeat."""
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": "shortcuts",
        "documentNamespace": "https://example.invalid/shortcuts",
        "creationInfo": {"created": "2026-01-01T00:00:00Z", "creators": ["Tool: test-1"]},
        "documentDescribes": ["SPDXRef-root", "SPDXRef-root"],
        "packages": [
            _package("SPDXRef-root", primaryPackagePurpose="CONTAINER"),
            _package("SPDXRef-a", hasFiles=["SPDXRef-f1", "SPDXRef-f2", "SPDXRef-f1"]),
            _package("SPDXRef-b", hasFiles=["SPDXRef-f3", "SPDXRef-f4"]),
        ],
        "files": [_file(f"SPDXRef-f{i}") for i in range(1, 5)],
        "relationships": [
            {
                "spdxElementId": "SPDXRef-root",
                "relationshipType": "DESCRIBED_BY",
                "relatedSpdxElement": "SPDXRef-DOCUMENT",
            },
            {
                "spdxElementId": "SPDXRef-f2",
                "relationshipType": "CONTAINED_BY",
                "relatedSpdxElement": "SPDXRef-a",
            },
            {
                "spdxElementId": "SPDXRef-b",
                "relationshipType": "CONTAINS",
                "relatedSpdxElement": "SPDXRef-f3",
                "comment": "the same relationship for spdx-tools: comments are not compared",
            },
        ],
    }


def test_json_shortcuts_give_the_library_s_relationships() -> None:
    doc = shortcuts()
    ours = read_json(doc).relationships
    assert ours == JsonLikeDictParser().parse(shortcuts()).relationships
    # the listed three; f1 once (f2 is listed inverted, f3 with a comment), f4
    assert len(ours) == 3 + 1 + 1
    assert doc == shortcuts()  # the caller's document is not changed


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(documentDescribes=["SPDXRef-root", 7]), "documentDescribes[1]"),
        (lambda d: d.update(documentDescribes="SPDXRef-root"), "documentDescribes"),
        (lambda d: d["packages"][1].update(hasFiles=[None]), "packages[1].hasFiles[0]"),
    ],
)
def test_a_shortcut_that_is_no_list_of_spdxids_is_refused(change: Any, field: str) -> None:
    doc = shortcuts()
    change(doc)
    with pytest.raises(SpdxRefused) as refused:
        read_json(doc)
    assert refused.value.field == field


def test_shortcuts_count_as_relationships_against_the_limit() -> None:
    limits = SpdxLimits(max_elements=7)  # the document's seven elements; 70 relationships
    doc = shortcuts()
    read_json(doc, limits)
    doc["packages"][2]["hasFiles"] = [f"SPDXRef-f{i}" for i in range(70)]
    with pytest.raises(SpdxRefused) as refused:
        read_json(doc, limits)
    assert refused.value.too_large and refused.value.field == "relationships"
    assert "documentDescribes and hasFiles" in refused.value.message


TAG_VALUE = """SPDXVersion: SPDX-2.3
DataLicense: CC0-1.0
SPDXID: SPDXRef-DOCUMENT
DocumentName: files-after-packages
DocumentNamespace: https://example.invalid/tv
Creator: Tool: test-1
Created: 2026-01-01T00:00:00Z
Relationship: SPDXRef-DOCUMENT DESCRIBES SPDXRef-root
Relationship: SPDXRef-a CONTAINS SPDXRef-f1

PackageName: root
SPDXID: SPDXRef-root
PackageDownloadLocation: NOASSERTION
FilesAnalyzed: false
PrimaryPackagePurpose: CONTAINER

PackageName: a
SPDXID: SPDXRef-a
PackageDownloadLocation: NOASSERTION

FileName: ./usr/lib/f1.so
SPDXID: SPDXRef-f1
FileChecksum: SHA1: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa

FileName: ./usr/lib/f2.so
SPDXID: SPDXRef-f2
FileChecksum: SHA1: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
Relationship: SPDXRef-a CONTAINS SPDXRef-f2
"""


def test_tag_value_files_after_a_package_give_the_library_s_relationships() -> None:
    ours = read_tag_value(TAG_VALUE).relationships
    assert ours == Parser().parse(TAG_VALUE).relationships
    # f1's CONTAINS is listed once; f2's is built, then listed again after it (as the library)
    pairs = [(r.spdx_element_id, r.related_spdx_element_id) for r in ours]
    assert pairs.count(("SPDXRef-a", "SPDXRef-f1")) == 1
    assert pairs.count(("SPDXRef-a", "SPDXRef-f2")) == 2


def test_reading_tag_value_writes_no_parser_tables() -> None:
    """PLY writes LALR tables beside the module that defines a parser class unless told not to:
    the package directory stays as installed."""
    import scanner.bom

    package = Path(scanner.bom.__file__).parent
    read_tag_value(TAG_VALUE)
    assert not (package / "parsetab.py").exists() and not (package / "parser.out").exists()
