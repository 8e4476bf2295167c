"""The ``loaded`` policy rule: facts from a ``--runtime`` scan and from its BOM, and each of
deny, warn, allow, not applicable and missing input."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from scanner.bom.cyclonedx import to_json
from scanner.model import (
    AssetInfo,
    AssetKind,
    Digests,
    FileRef,
    GpuLibrary,
    Identification,
    Integrity,
    LoadedBy,
    LoadedVia,
    RuntimeScan,
    ScanResult,
    Sha256,
)
from scanner.policy.bom_facts import facts_from_bom
from scanner.policy.document import validate_policy
from scanner.policy.evaluate import Decision, evaluate
from scanner.policy.facts import AssetFacts, facts_from_scan
from scanner.policy.rules import Status

A, B, C = (Sha256(c * 64) for c in "abc")


def library(path: str, sha: str, integrity: Integrity, *loaders: LoadedBy, **kw: Any) -> GpuLibrary:
    return GpuLibrary(
        ref=FileRef(path),
        size=10,
        aliases=(),
        ident=Identification("cublas", "cublas", "12.4.5.8", 12, "x86_64"),
        digests=Digests(10, Sha256(sha)),
        owner=None,
        integrity=integrity,
        integrity_reason="",
        loaded_by=loaders,
        **kw,
    )


def result(
    *libraries: GpuLibrary, runtime: RuntimeScan | None, kind: AssetKind = AssetKind.HOST
) -> ScanResult:
    return ScanResult(
        asset=AssetInfo(kind, "node-1", "/", machine_id="m1"),
        libraries=libraries,
        packages=(),
        findings=(),
        skipped=(),
        started_at="2026-12-02T04:00:00Z",
        tool_version="0.test",
        runtime=runtime,
    )


LIVE = RuntimeScan("/proc", 500, 2)
PID_A = LoadedBy(12, "/usr/bin/python3", via=LoadedVia.INODE, sha256=A)
PID_B = LoadedBy(
    13,
    "/usr/bin/python3",
    "f" * 64,
    "containerd",
    "6ec0e3a2-3f0b-4a4e-9a4e-0d1f4b2c9e11",
    deleted=True,
    sha256=B,
    via=LoadedVia.MAP_FILES,
)
CLEAN = result(library("/usr/lib/libcublas.so.12", A, Integrity.VERIFIED, PID_A), runtime=LIVE)
REPLACED = result(
    library("/usr/lib/libcublas.so.12", A, Integrity.VERIFIED),
    library(
        "/usr/lib/libcublas.so.12",
        B,
        Integrity.MODIFIED,
        PID_B,
        on_disk=False,
        disk_sha256=A,
        loaded_copy=True,
    ),
    runtime=LIVE,
)


def judge(facts: AssetFacts, **settings: Any) -> tuple[Decision, Any]:
    policy = validate_policy(
        {
            "apiVersion": "gpuprov.dev/v1",
            "kind": "PromotionPolicy",
            "name": "t",
            "rules": {"loaded": settings},
        }
    )
    evaluation = evaluate(facts, policy, now=datetime(2026, 12, 2, tzinfo=UTC))
    (outcome,) = evaluation.results
    return evaluation.decision, outcome


def test_bom_facts_equal_scan_facts() -> None:
    for scan in (CLEAN, REPLACED):
        from_scan = facts_from_scan(scan)
        from_bom = facts_from_bom(to_json(scan).encode())
        assert from_bom.runtime and from_scan.runtime
        fields = (
            "path",
            "sha256",
            "loaded_processes",
            "loaded_containers",
            "loaded_deleted",
            "loaded_copy",
            "disk_sha256",
        )
        assert [[getattr(f, k) for k in fields] for f in from_bom.files] == [
            [getattr(f, k) for k in fields] for f in from_scan.files
        ]
    copy = facts_from_scan(REPLACED).files[1]
    assert (copy.loaded_processes, copy.loaded_containers, copy.loaded_deleted) == (1, 1, True)
    assert copy.disk_sha256 == A and copy.loaded_copy


def test_deny_warn_allow() -> None:
    decision, outcome = judge(facts_from_scan(REPLACED))
    assert decision is Decision.DENY and outcome.status is Status.FAIL
    assert "deleted or replaced on disk" in outcome.message and B in outcome.message
    assert [f["sha256"] for f in outcome.files] == [B]
    assert "DE.CM-09" in outcome.controls
    decision, _ = judge(facts_from_scan(REPLACED), action="warn")
    assert decision is Decision.WARN
    # only what the rule forbids counts: a modified loaded copy is no "unowned"
    decision, outcome = judge(facts_from_scan(REPLACED), forbid=["loaded-unowned"])
    assert decision is Decision.ALLOW and outcome.status is Status.PASS
    decision, outcome = judge(facts_from_scan(CLEAN))
    assert decision is Decision.ALLOW and "1 loaded GPU library file(s)" in outcome.message


def test_unowned_loaded_library() -> None:
    scan = result(library("/opt/x/libcublas.so.12", A, Integrity.UNOWNED, PID_A), runtime=LIVE)
    decision, outcome = judge(facts_from_scan(scan), forbid=["loaded-unowned"])
    assert decision is Decision.DENY and "belongs to no package" in outcome.message
    # not loaded by anyone: not this rule's business
    idle = result(library("/opt/x/libcublas.so.12", A, Integrity.UNOWNED), runtime=LIVE)
    assert judge(facts_from_scan(idle))[0] is Decision.ALLOW


def test_missing_input_and_not_applicable() -> None:
    no_runtime = msgspec.structs.replace(CLEAN, runtime=None)
    decision, outcome = judge(facts_from_scan(no_runtime))
    assert decision is Decision.DENY and outcome.missing_input and "--runtime" in outcome.message
    unread = msgspec.structs.replace(CLEAN, runtime=RuntimeScan("/proc", 500, 2, (1,), 3))
    for facts in (facts_from_scan(unread), facts_from_bom(to_json(unread).encode())):
        decision, outcome = judge(facts)
        assert decision is Decision.DENY and outcome.missing_input
        assert "memory maps of 1 process" in outcome.message
        assert "loaded bytes of 3 mapping" in outcome.message
    image = result(runtime=None, kind=AssetKind.IMAGE)
    decision, outcome = judge(facts_from_scan(image))
    assert decision is Decision.ALLOW and outcome.status is Status.NOT_APPLICABLE


def test_a_policy_refuses_unknown_kinds() -> None:
    import pytest

    from scanner.policy.document import PolicyError

    with pytest.raises(PolicyError, match="rules.loaded.forbid"):
        judge(facts_from_scan(CLEAN), forbid=["loaded-sideways"])


def test_each_kind_alone_forbids_its_own_case() -> None:
    # a deleted file still mapped (bytes as the package shipped them, nothing on disk to
    # compare), a loaded copy that differs from the disk (not deleted), an unowned loaded file:
    # each kind, forbidden alone, denies its case and only its case
    deleted = LoadedBy(15, "/usr/bin/python3", deleted=True, sha256=A, via=LoadedVia.MAP_FILES)
    differs = LoadedBy(16, "/usr/bin/python3", sha256=B, via=LoadedVia.MAP_FILES)
    cases = {
        "loaded-deleted": result(
            library("/usr/lib/libcublas.so.12", A, Integrity.VERIFIED, deleted, on_disk=False),
            runtime=LIVE,
        ),
        "loaded-differs-from-disk": result(
            library(
                "/usr/lib/libcublas.so.12",
                B,
                Integrity.VERIFIED,
                differs,
                on_disk=False,
                disk_sha256=A,
                loaded_copy=True,
            ),
            runtime=LIVE,
        ),
        "loaded-unowned": result(
            library("/opt/x/libcublas.so.12", A, Integrity.UNOWNED, PID_A), runtime=LIVE
        ),
    }
    whys = {
        "loaded-deleted": "deleted or replaced on disk",
        "loaded-differs-from-disk": "differ from the disk's",
        "loaded-unowned": "belongs to no package",
    }
    for kind, scan in cases.items():
        for forbidden in cases:
            decision, outcome = judge(facts_from_scan(scan), forbid=[forbidden])
            if forbidden == kind:
                assert decision is Decision.DENY, (kind, outcome.message)
                assert whys[kind] in outcome.message
                assert outcome.evidence == (("forbid", forbidden),)
            else:
                assert decision is Decision.ALLOW, (kind, forbidden, outcome.message)
                assert outcome.message == f"1 loaded GPU library file(s) avoid {forbidden}"
