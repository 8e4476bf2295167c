"""The offline gate's feed (`scanner/policy/advisory_feed.py`) piece by piece: which documents
count (the newest revision of each; CVE Records folded into the CSAF bulletin beside them), the
size limit and unreadable files named, the products and packages a BOM states, and which CVEs
reach the matcher. `test_gate_advisories.py` runs the same code through `gpuprov gate`."""

from __future__ import annotations

import errno
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from scanner.advisories.feed import read_document
from scanner.advisories.match import AssetFacts, Installed
from scanner.policy.advisory_feed import (
    FeedError,
    LocalFeed,
    _newest,
    advisory_facts,
    products_of_bom,
    read_feed,
)
from tests.scanner.advisories.documents import PSIRT
from tests.scanner.advisories.test_feed import slug_only

WHEEL = "pkg:pypi/nvidia-cudnn-cu12@9.0.0.312"


def _osv(ident: str, modified: str, cve: str, name: str = "nvidia-cudnn-cu12") -> dict[str, Any]:
    return {
        "schema_version": "1.6.0",
        "id": ident,
        "modified": modified,
        "aliases": [cve],
        "affected": [
            {
                "package": {"ecosystem": "PyPI", "name": name},
                "ranges": [
                    {
                        "type": "ECOSYSTEM",
                        "events": [{"introduced": "9.0.0"}, {"fixed": "9.1.0.70"}],
                    }
                ],
            }
        ],
        "database_specific": {"severity": "HIGH"},
    }


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


# -- revisions -------------------------------------------------------------------------------


def test_the_newest_revision_of_each_document_counts_whatever_the_order() -> None:
    base = read_document(json.dumps(_osv("GHSA-1", "2026-01-01T00:00:00Z", "CVE-2026-1")).encode())
    old = replace(base, updated="2026-01-01", version="1")
    new = replace(base, updated="2026-02-01", version="2")
    other = replace(base, tracking_id="GHSA-2")
    for order in ([old, new, other], [new, old, other], [other, new, old]):
        kept = _newest(order)
        assert sorted((a.tracking_id, a.version) for a in kept) == [
            ("GHSA-1", "2"),
            ("GHSA-2", other.version),
        ]
    # the same time: the higher version; an update time counts before the version
    assert _newest([replace(old, version="3"), old])[0].version == "3"
    assert _newest([old, replace(old, version="3")])[0].version == "3"
    later_lower = replace(base, updated="2026-03-01", version="0")
    assert _newest([new, later_lower])[0].version == "0"
    assert _newest([later_lower, new])[0].version == "0"
    # one without an update time is older than one with
    assert _newest([replace(old, updated=None, version="9"), old])[0].version == "1"
    assert _newest([old, replace(old, updated=None, version="9")])[0].version == "1"
    # another publisher's document of the same id is another document
    foreign = replace(new, publisher_namespace="osv:OTHER")
    assert len(_newest([new, foreign])) == 2


def test_two_revisions_on_disk_count_once(tmp_path: Path) -> None:
    _write(tmp_path / "a" / "old.json", _osv("GHSA-1", "2026-01-01T00:00:00Z", "CVE-2026-1"))
    _write(tmp_path / "b" / "new.json", _osv("GHSA-1", "2026-02-01T00:00:00Z", "CVE-2026-2"))
    feed = read_feed([tmp_path])
    assert feed.documents == 1
    assert list(feed.vulnerabilities) == ["CVE-2026-2"]
    with pytest.raises(AttributeError):  # what was read is what the gate judges
        feed.documents = 2  # type: ignore[misc]
    # the same revision twice (a copy edited by hand): the first in name order counts
    _write(tmp_path / "a" / "old.json", _osv("GHSA-1", "2026-02-01T00:00:00Z", "CVE-2026-3"))
    assert list(read_feed([tmp_path]).vulnerabilities) == ["CVE-2026-3"]


# -- bulletins: a CSAF document and the CVE Records beside it -----------------------------


def test_cve_records_beside_a_bulletin_complete_it_and_alone_are_documents(tmp_path: Path) -> None:
    bulletin = tmp_path / "2025" / "5703"
    shutil.copytree(PSIRT / "2025/5703", bulletin)
    records = sorted(bulletin.glob("CVE-*.json"))
    assert records
    # a CVE Record in a folder of its own is a document of its own
    alone = tmp_path / "records"
    alone.mkdir()
    shutil.copy(records[0], alone / records[0].name)
    feed = read_feed([tmp_path])
    assert feed.documents == 2
    with_records = read_feed([bulletin])
    assert with_records.documents == 1
    # the records complete the bulletin: NVIDIA's platform text (Linux(R580)) is theirs
    entries = with_records.vulnerabilities["CVE-2025-23280"][1]
    assert any(e.platform and "R580" in e.platform for e in entries)


def test_a_slug_only_bulletin_takes_the_text_of_the_records_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "5703"
    slugs = slug_only(json.loads((PSIRT / "2025/5703/5703.json").read_bytes()))
    _write(folder / "5703.json", slugs)
    alone = read_feed([folder]).vulnerabilities["CVE-2025-23280"][1]
    texts = {e.version_text for e in alone}
    assert "All driver versions prior to 535.274.02" not in texts
    for record in sorted((PSIRT / "2025/5703").glob("CVE-*.json")):
        shutil.copy(record, folder / record.name)
    # an OSV record in the bulletin's folder is a document of its own, never a record of it
    _write(folder / "osv.json", _osv("GHSA-1", "2026-01-01T00:00:00Z", "CVE-2026-1"))
    feed = read_feed([folder])
    assert feed.documents == 2 and "CVE-2026-1" in feed.vulnerabilities
    entries = feed.vulnerabilities["CVE-2025-23280"][1]
    texts = {e.version_text for e in entries if e.platform == "Linux(R535)"}
    assert "All driver versions prior to 535.274.02" in texts


def test_the_severity_is_the_highest_stated(tmp_path: Path) -> None:
    feed = read_feed([PSIRT / "2025/5703"])
    assert feed.vulnerabilities["CVE-2025-23280"][0] == "HIGH"
    doc = _osv("GHSA-9", "2026-01-01T00:00:00Z", "CVE-2026-9")
    doc["database_specific"] = {"severity": "moderate"}  # no CVSS rating: none
    assert read_feed([_write(tmp_path / "x.json", doc)]).vulnerabilities["CVE-2026-9"][0] is None


# -- files: size, time written, unreadable ---------------------------------------------------


def test_a_document_of_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    doc = json.dumps(_osv("GHSA-1", "2026-01-01T00:00:00Z", "CVE-2026-1")).encode()
    limit = len(doc) | 1  # odd: a mask of the limit's lowest bit is never the limit
    padded = doc + b" " * (limit - len(doc))
    fits = tmp_path / "fits.json"
    fits.write_bytes(padded)
    assert read_feed([fits], max_bytes=limit).documents == 1
    over = tmp_path / "over.json"
    over.write_bytes(padded + b" " * 5)  # read no further than one byte past the limit
    with pytest.raises(
        FeedError, match=rf"over.json: .*{limit + 1} bytes is more than the {limit}"
    ):
        read_feed([over], max_bytes=limit)


def test_the_feed_is_as_old_as_its_newest_file(tmp_path: Path) -> None:
    one = _write(tmp_path / "one.json", _osv("GHSA-1", "2026-01-01T00:00:00Z", "CVE-2026-1"))
    two = _write(tmp_path / "two.json", _osv("GHSA-2", "2026-01-01T00:00:00Z", "CVE-2026-2"))
    os.utime(one, (0, 0))
    os.utime(two, (0, 0))
    assert read_feed([tmp_path]).written_at == datetime(1970, 1, 1, tzinfo=UTC)
    os.utime(two, (86400, 86400))
    assert read_feed([tmp_path]).written_at == datetime(1970, 1, 2, tzinfo=UTC)
    # a copy dated before the epoch is as old as its newest file, not the epoch
    for path in (one, two):
        os.utime(path, (-86400, -86400))
    assert read_feed([tmp_path]).written_at == datetime(1969, 12, 31, tzinfo=UTC)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert read_feed([empty]).written_at is None and read_feed([empty]).documents == 0


def test_an_unreadable_file_is_named_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "x.json", _osv("GHSA-1", "2026-01-01T00:00:00Z", "CVE-2026-1"))

    def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(FeedError) as raised:
        read_feed([path])
    assert str(raised.value) == f"advisories: cannot read {path}: Permission denied"


def test_a_digest_that_does_not_match_is_named_and_the_document_kept(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.json", _osv("GHSA-1", "2026-01-01T00:00:00Z", "CVE-2026-1"))
    (tmp_path / "x.json.sha256").write_text("0" * 64 + "  x.json\n")
    feed = read_feed([path])
    assert feed.digest_mismatches == (str(path),) and feed.documents == 1
    (tmp_path / "x.json.sha256").write_text("not a digest\n")
    assert read_feed([path]).digest_mismatches == (str(path),)


# -- what a BOM states ------------------------------------------------------------------------


def _component(**fields: Any) -> dict[str, Any]:
    props = fields.pop("props", [])
    return {**fields, "properties": [{"name": n, "value": v} for n, v in props]}


def test_a_boms_products_are_read_with_every_field() -> None:
    paths = [("gpuprov:product:path", f"/opt/t/{i}") for i in range(70)]
    doc = {
        "components": [
            _component(type="library", name="libfoo", version="1"),  # no product: skipped
            _component(
                type="application",
                name="cuobjdump",
                version="11.8.86",
                hashes=[{"alg": "SHA-256", "content": "ab" * 32}],
                props=[
                    ("gpuprov:product:key", "cuobjdump"),
                    ("gpuprov:product:toolkit", "11.8.0"),
                    ("gpuprov:product:release-line", "11.8"),
                    ("gpuprov:owner:purl", "pkg:deb/debian/nvidia-cuda-toolkit@11.8.0-5"),
                    *paths,
                ],
            ),
            _component(
                type="application",
                name="driver",
                version="535.129.03",
                props=[("gpuprov:product:key", "driver"), ("gpuprov:driver:branch", "R535")],
            ),
            _component(
                type="application", name="x", version="", props=[("gpuprov:product:key", "dcgm")]
            ),
            _component(
                type="application", name="y", version=12, props=[("gpuprov:product:key", "nvtiff")]
            ),
        ]
    }
    facts = products_of_bom(doc, ["cudart", "cudnn"])
    by_key = {p.key: p for p in facts.products}
    tool = by_key["cuobjdump"]
    assert (tool.version, tool.toolkit, tool.line, tool.sha256, tool.owner) == (
        "11.8.86",
        "11.8.0",
        "11.8",
        "ab" * 32,
        "pkg:deb/debian/nvidia-cuda-toolkit@11.8.0-5",
    )
    assert tool.paths == tuple(f"/opt/t/{i}" for i in range(64))  # at most 64 kept
    assert (by_key["driver"].version, by_key["driver"].branch) == ("535.129.03", "R535")
    assert by_key["dcgm"].version is None and by_key["nvtiff"].version is None
    assert facts.libraries == (("cudart", None),)  # a toolkit family; cuDNN is none


def test_an_image_claiming_host_facts_is_refused_naming_three() -> None:
    names = ("cdi_mode", "vgpu_guest", "vgpu_host", "gpu_architecture")
    props = [{"name": f"gpuprov:condition:{n}", "value": "true"} for n in names]
    doc = {"metadata": {"component": {"type": "container", "properties": props}}}
    with pytest.raises(FeedError) as raised:
        products_of_bom(doc, [])
    message = str(raised.value)
    assert message.count("_") >= 3 and message.endswith(")")
    shown = message[message.index("(") + 1 : -1].split(", ")
    assert len(shown) == 3


def test_a_boms_packages_reach_the_matcher() -> None:
    doc = {
        "components": [
            {"type": "library", "name": "nvidia-cudnn-cu12", "version": "9.0.0.312", "purl": WHEEL},
            {
                "type": "library",
                "name": "torch",
                "version": "2.5.1",
                "purl": "pkg:pypi/torch@2.5.1",
            },
            {"type": "library", "name": "requests", "version": "2", "purl": "pkg:pypi/requests@2"},
            # a purl without its version: the component's version is the package's
            {"type": "library", "name": "jax", "version": "0.4.30", "purl": "pkg:pypi/jax"},
        ]
    }
    facts = products_of_bom(doc, [])
    got = sorted((p.name, p.version) for p in facts.packages)
    assert got == [("jax", "0.4.30"), ("nvidia-cudnn-cu12", "9.0.0.312"), ("torch", "2.5.1")]


# -- which CVEs reach the matcher -------------------------------------------------------------


def test_only_the_cves_naming_what_the_asset_holds_are_matched(tmp_path: Path) -> None:
    _write(tmp_path / "a.json", _osv("GHSA-A", "2026-01-01T00:00:00Z", "CVE-2026-1", "torch"))
    _write(tmp_path / "b.json", _osv("GHSA-B", "2026-01-01T00:00:00Z", "CVE-2026-2"))
    shutil.copytree(PSIRT / "2025/5703", tmp_path / "5703")
    feed = read_feed([tmp_path])
    wheel = AssetFacts(
        packages=products_of_bom(
            {
                "components": [
                    {"type": "library", "name": "n", "version": "9.0.0.312", "purl": WHEEL}
                ]
            },
            [],
        ).packages
    )
    found = advisory_facts(wheel, feed).findings
    assert [(f.cve, f.status, f.fix_available) for f in found] == [("CVE-2026-2", "affected", True)]
    driver = AssetFacts(
        products=(Installed("driver", "535.129.03", branch="R535"),),
        facts={"vgpu_guest": "false", "vgpu_host": "false"},
    )
    found = advisory_facts(driver, feed).findings
    assert "CVE-2025-23280" in {f.cve for f in found}
    assert all(f.product == "driver" for f in found)
    assert next(f for f in found if f.cve == "CVE-2025-23280").fix_available
    summary = advisory_facts(driver, feed)
    # 5703.json is one of NVIDIA's four bulletins whose .sha256 does not match
    assert summary.documents == 3
    assert summary.source == f"files {tmp_path}; 1 not matching their .sha256"


def test_the_source_names_digest_mismatches() -> None:
    feed = LocalFeed(
        source="x", documents=1, written_at=None, vulnerabilities={}, digest_mismatches=("a", "b")
    )
    assert advisory_facts(AssetFacts(), feed).source == "files x; 2 not matching their .sha256"
    clean = replace(feed, digest_mismatches=())
    assert advisory_facts(AssetFacts(), clean).source == "files x"
