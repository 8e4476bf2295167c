"""The model's closed sets: each is a StrEnum that still compares equal to its string value."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from scanner import vocabulary as V
from scanner.cli import FAIL_ON_KINDS, FAIL_ON_NEEDS
from scanner.model import (
    Finding,
    FindingKind,
    Integrity,
    PackageManager,
    Progress,
    ProgressStage,
    Provenance,
    Skipped,
    Stage,
)
from scanner.pipeline import ScanOptions, run_scan


def test_every_finding_kind_is_a_fail_on_kind_in_the_documented_order() -> None:
    assert FAIL_ON_KINDS == (
        "modified",
        "unowned",
        "mixed",
        "no-record",
        "conflict",
        "unsigned",
        "not-elf",
        "unreadable",
        "loaded-unowned",
        "loaded-deleted",
        "loaded-differs-from-disk",
    )
    assert tuple(FAIL_ON_NEEDS) == FAIL_ON_KINDS == tuple(FindingKind)


def test_enum_values_compare_and_serialise_as_their_strings() -> None:
    finding = Finding(FindingKind.NOT_ELF, "m", ("/a",), (FindingKind.MODIFIED,))
    assert finding.kind == "not-elf" and f"{finding.kind}: x" == "not-elf: x"
    assert json.loads(json.dumps(msgspec.to_builtins(finding))) == {
        "kind": "not-elf",
        "message": "m",
        "paths": ["/a"],
        "also": ["modified"],
    }
    assert Skipped("/p", "r", Stage.HASH).stage == "hash"
    assert PackageManager("dpkg") is PackageManager.DPKG


def test_the_vocabulary_verdicts_are_the_model_enums() -> None:
    assert V.INTEGRITY_VALUES == ("verified", "modified", "no-record", "unowned")
    assert V.PROVENANCE_VALUES == ("verified", "conflict", "unknown")
    assert set(V.INTEGRITY_VALUES) == set(Integrity)
    assert set(V.PROVENANCE_VALUES) == set(Provenance)


def test_progress_events_name_their_stage_with_the_enum(tmp_path: Path) -> None:
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/libcudart.so.12").write_bytes(b"not an ELF library")
    events: list[Progress] = []
    run_scan(str(tmp_path), ScanOptions(use_cache=False, progress=events.append))
    assert {e.stage for e in events} >= {ProgressStage.CATALOG, ProgressStage.HASH}
    assert all(type(e.stage) is ProgressStage for e in events)


def test_a_dpkg_package_names_the_source_it_was_built_from() -> None:
    from scanner.model import Package

    def pkg(source: str | None, version: str = "535.261.03-1+b1") -> Package:
        extra = (("source-package", source),) if source is not None else ()
        return Package(
            PackageManager.DPKG, "libcuda1", version, "pkg:deb/debian/libcuda1", extra=extra
        )

    assert pkg("nvidia-graphics-drivers (535.261.03-1)").built_from == (
        "nvidia-graphics-drivers",
        "535.261.03-1",
    )
    # without a version: the source's version is the binary's (dpkg-deb's rule)
    assert pkg("nvidia-graphics-drivers", "535.261.03-1").built_from == (
        "nvidia-graphics-drivers",
        "535.261.03-1",
    )
    assert pkg(None).built_from is None
    assert pkg("  ").built_from is None
