"""Facts from a scan and facts from that scan's CycloneDX BOM are the same facts, so gating a
scan and gating its BOM (`gate --bom`, the service) decide alike."""

from __future__ import annotations

import msgspec
import pytest

from scanner.bom.cyclonedx import to_json
from scanner.model import ImageTrust, ScanResult
from scanner.pipeline import ScanOptions, run_scan
from scanner.policy.bom_facts import facts_from_bom
from scanner.policy.facts import AssetFacts, facts_from_scan
from tests.scanner import scenarios as sc


def _comparable(facts: AssetFacts) -> AssetFacts:
    # the BOM's timestamp is when it was written, just after the scan started
    return msgspec.structs.replace(
        facts,
        scanned_at=None,
        files=tuple(sorted(facts.files, key=lambda f: f.path)),
        producer="",
        findings=tuple(sorted(facts.findings)),
    )


@pytest.mark.parametrize("kind", ["host", "oci"])
def test_scan_and_bom_give_the_same_facts(policy_world: sc.World, kind: str) -> None:
    target = str(policy_world.root) if kind == "host" else policy_world.image_target(kind)[0]
    result: ScanResult = run_scan(target, ScanOptions(use_cache=False))
    if kind == "oci":
        # as a scan with a trust policy records it
        trust = ImageTrust(False, None, None, None, None, 0, ("no signature found",))
        result = msgspec.structs.replace(result, image_trust=trust)
    direct = facts_from_scan(result)
    via_bom = facts_from_bom(to_json(result, "1.6").encode())
    assert direct.files and _comparable(direct) == _comparable(via_bom)
    assert direct.scanned_at and via_bom.scanned_at
    assert 0 <= (via_bom.scanned_at - direct.scanned_at).total_seconds() < 60
    assert via_bom.producer.startswith("gpuprov")
