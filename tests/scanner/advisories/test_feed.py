"""The feed on disk: NVIDIA's layout found recursively, the .sha256 checks (the four published
mismatches), one reader for any format, the CVE Records' texts for slug-only bulletins, and
fuzzing: no input ever raises anything but DocumentRefused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanner.advisories.document import DocumentRefused
from scanner.advisories.feed import (
    check_digest,
    complement,
    find_documents,
    read_document,
    sniff,
)
from tests.scanner.advisories.documents import MISMATCHES, PSIRT, csaf, encode, osv

needs_psirt = pytest.mark.skipif(not PSIRT.is_dir(), reason="../shared/fixtures absent")


@needs_psirt
def test_layout_found_and_exactly_the_four_published_mismatches() -> None:
    files = find_documents([PSIRT])
    assert len(files) == 131 + 488
    bad = sorted(
        str(p.relative_to(PSIRT)) for p in files if check_digest(p, p.read_bytes()) != "match"
    )
    assert bad == sorted(MISMATCHES)


def test_digest_forms(tmp_path: Path) -> None:
    doc = tmp_path / "a.json"
    doc.write_bytes(b"{}")
    assert check_digest(doc, b"{}") == "absent"
    digest = hashlib.sha256(b"{}").hexdigest()
    (tmp_path / "a.json.sha256").write_text(f"{digest.upper()}  a.json\n")
    assert check_digest(doc, b"{}") == "match"
    assert check_digest(doc, b"{ }") == "mismatch"
    (tmp_path / "a.json.sha256").write_text("not a digest")
    assert check_digest(doc, b"{}") == "unreadable"


def test_any_format_by_its_fields() -> None:
    assert read_document(encode(csaf())).format == "csaf"
    assert read_document(encode(osv())).format == "osv"
    with pytest.raises(DocumentRefused) as info:
        sniff({"hello": 1})
    assert info.value.reason == "unknown_format"


def slug_only(doc: dict[str, Any]) -> dict[str, Any]:
    """What a slug-only CSAF looks like: the product names carry the CPE slugs (in place)."""

    def slugify(branch: dict[str, Any]) -> None:
        product = branch.get("product")
        if branch.get("category") == "product_version" and product:
            product["name"] = product["product_identification_helper"]["cpe"].split(":")[5]
        for child in branch.get("branches") or ():
            slugify(child)

    for top in doc["product_tree"]["branches"]:
        slugify(top)
    return doc


@needs_psirt
def test_slug_only_bulletin_takes_the_records_text() -> None:
    folder = PSIRT / "2025/5703"
    doc = slug_only(json.loads((folder / "5703.json").read_bytes()))
    bulletin = read_document(encode(doc))
    records = [read_document(p.read_bytes()) for p in sorted(folder.glob("CVE-*.json"))]
    whole = complement(bulletin, records)
    vuln = next(v for v in whole.vulnerabilities if v.id == "CVE-2025-23280")
    texts = {s.version_text for s in vuln.statuses if s.platform == "Linux(R535)"}
    assert "All driver versions prior to 535.274.02" in texts


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
keys = st.sampled_from(
    [
        "document",
        "product_tree",
        "vulnerabilities",
        "product_status",
        "branches",
        "product",
        "tracking",
        "affected",
        "versions",
        "id",
        "modified",
        "cveMetadata",
        "containers",
    ]
)


def _mutate(doc: Any, data: st.DataObject) -> Any:
    """Replace one value somewhere in ``doc`` by an arbitrary JSON value."""
    if isinstance(doc, dict) and doc:
        key = data.draw(st.sampled_from(sorted(doc)))
        if data.draw(st.booleans()):
            doc[key] = data.draw(json_values)
        else:
            _mutate(doc[key], data)
    elif isinstance(doc, list) and doc:
        i = data.draw(st.integers(0, len(doc) - 1))
        if data.draw(st.booleans()):
            doc[i] = data.draw(json_values)
        else:
            _mutate(doc[i], data)
    return doc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_documents_read_or_are_refused(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from(["csaf", "osv", "cve"]))
    doc: Any = {
        "csaf": csaf,
        "osv": osv,
        "cve": lambda: {
            "dataType": "CVE_RECORD",
            "dataVersion": "5.1",
            "cveMetadata": {"cveId": "CVE-2026-1"},
            "containers": {
                "cna": {
                    "affected": [
                        {
                            "product": "p",
                            "platforms": ["Linux(R535)"],
                            "versions": [{"status": "affected", "version": "prior to 535.1"}],
                        }
                    ]
                }
            },
        },
    }[base]()
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _mutate(doc, data)
    try:
        read_document(json.dumps(doc).encode())
    except DocumentRefused:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.dictionaries(keys, json_values).map(lambda d: encode(d)))
def test_fuzzed_bytes_read_or_are_refused(data: bytes) -> None:
    try:
        read_document(data)
    except DocumentRefused:
        pass


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": 1, "a": 2}', "the key 'a' appears twice"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": ' + b"1" * 5000 + b"}", "not JSON: "),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
def test_json_that_two_readers_could_read_differently_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(DocumentRefused) as info:
        read_document(data)
    assert info.value.reason == "not_json" and message in info.value.message
