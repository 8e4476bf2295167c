"""Every rule with allow, deny, warn and not-applicable cases on scanned real-format fixtures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace

from scanner.model import AssetKind
from scanner.policy.document import PromotionPolicy, validate_policy
from scanner.policy.evaluate import Decision, decision_json, evaluate
from scanner.policy.facts import AssetFacts, ImageTrustFacts
from scanner.policy.rules import FleetBaseline, Status, baseline_of


def policy(**rules: Any) -> PromotionPolicy:
    return validate_policy(
        {"apiVersion": "gpuprov.dev/v1", "kind": "PromotionPolicy", "name": "t", "rules": rules}
    )


def only(facts: AssetFacts, rule: str, settings: dict[str, Any], **kw: Any) -> Any:
    evaluation = evaluate(facts, policy(**{rule: settings}), **kw)
    (result,) = evaluation.results
    return evaluation, result


def assert_deny_and_warn(facts: AssetFacts, rule: str, settings: dict[str, Any], **kw: Any) -> Any:
    """The failing case denies by default and only warns with action: warn."""
    denied, result = only(facts, rule, settings, **kw)
    assert denied.decision is Decision.DENY, result.message
    assert result.status is Status.FAIL and result.action == "deny"
    assert all(c in denied.controls and denied.controls[c] is Status.FAIL for c in result.controls)
    warned, again = only(facts, rule, {**settings, "action": "warn"}, **kw)
    assert warned.decision is Decision.WARN and again.status is Status.FAIL
    assert warned.reasons == (again,)
    return result


def assert_allow(facts: AssetFacts, rule: str, settings: dict[str, Any], **kw: Any) -> Any:
    evaluation, result = only(facts, rule, settings, **kw)
    assert evaluation.decision is Decision.ALLOW, result.message
    assert result.status is Status.PASS and evaluation.reasons == ()
    assert set(evaluation.controls.values()) == {Status.PASS}
    return result


def assert_not_applicable(facts: AssetFacts, rule: str, settings: dict[str, Any], why: str) -> None:
    evaluation, result = only(facts, rule, settings)
    assert evaluation.decision is Decision.ALLOW
    assert result.status is Status.NOT_APPLICABLE and why in result.message
    assert set(evaluation.controls.values()) == {Status.NOT_APPLICABLE}


def _no_verdicts(facts: AssetFacts) -> AssetFacts:
    files = tuple(replace(f, integrity=None, provenance=None) for f in facts.files)
    return replace(facts, files=files, producer="syft 1.4.1")


# -- integrity ---------------------------------------------------------------------------------


def test_integrity_denies_the_tampered_deb_file_and_wheel_file(world_facts: AssetFacts) -> None:
    result = assert_deny_and_warn(world_facts, "integrity", {})
    paths = {f["path"] for f in result.files}
    assert "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0" in paths
    assert any(p.endswith("nvidia/cublas/lib/libcublasLt.so.12") for p in paths)
    assert "recorded by pip package nvidia-cublas-cu12" in result.message
    assert all(f["sha256"] and f["family"] and f["version"] for f in result.files)
    assert set(result.controls) == {"ID.RA-09", "PR.DS-01", "DE.CM-09", "CIS-2.5", "CIS-2.6"}


def test_integrity_allows_untampered_files_and_fails_without_verdicts(
    clean_facts: AssetFacts, old_driver_facts: AssetFacts, world_facts: AssetFacts
) -> None:
    assert_allow(clean_facts, "integrity", {"forbid": ["modified"]})
    result = assert_deny_and_warn(_no_verdicts(clean_facts), "integrity", {})
    assert result.missing_input and "no integrity verdict" in result.message
    assert "syft" in result.message
    partial = replace(
        world_facts,
        files=tuple(
            replace(f, integrity=None) if f.integrity == "verified" else f
            for f in world_facts.files
        ),
    )
    both = assert_deny_and_warn(partial, "integrity", {})
    assert not both.missing_input and "forbidden integrity verdict (modified)" in both.message
    assert "more have no verdict" in both.message
    empty = replace(old_driver_facts, files=())
    assert_not_applicable(empty, "integrity", {}, "no GPU library file")


# -- ownership ---------------------------------------------------------------------------------


def test_ownership_denies_unowned_copies_unless_a_glob_allows_them(
    world_facts: AssetFacts, clean_facts: AssetFacts
) -> None:
    result = assert_deny_and_warn(world_facts, "ownership", {"allow_unowned": ["/opt/vendor/**"]})
    assert "/opt/app/lib/libcudnn_graph.so.9" in {f["path"] for f in result.files}
    assert_allow(clean_facts, "ownership", {"allow_unowned": ["/opt/vendor/**"]})
    # "*" stays within one directory: /opt/* does not allow /opt/vendor/lib/...
    assert_deny_and_warn(clean_facts, "ownership", {"allow_unowned": ["/opt/*"]})
    assert_not_applicable(replace(clean_facts, files=()), "ownership", {}, "no GPU")


# -- provenance --------------------------------------------------------------------------------


def test_provenance_conflict_always_fails_and_missing_catalog_is_said(
    clean_facts: AssetFacts,
) -> None:
    result = assert_deny_and_warn(clean_facts, "provenance", {})
    assert result.missing_input and "--catalog" in result.message
    verified = replace(
        clean_facts,
        files=tuple(
            replace(f, provenance="verified", provenance_signer="nvidia-catalog")
            for f in clean_facts.files
        ),
    )
    assert_allow(verified, "provenance", {"require": "verified", "signers": ["nvidia-catalog"]})
    assert_deny_and_warn(verified, "provenance", {"signers": ["someone-else"]})
    one_conflict = replace(
        verified,
        files=(
            replace(verified.files[0], provenance="conflict", provenance_reason="catalog says abc"),
            *verified.files[1:],
        ),
    )
    result = assert_deny_and_warn(one_conflict, "provenance", {})
    assert "catalog says abc" in result.message and not result.missing_input
    unknown = replace(
        verified,
        files=tuple(replace(f, provenance="unknown") for f in verified.files),
    )
    assert_allow(unknown, "provenance", {})
    assert_deny_and_warn(unknown, "provenance", {"require": "verified"})
    assert_not_applicable(replace(clean_facts, files=()), "provenance", {}, "no GPU")


@pytest.mark.parametrize(
    "signer", ["release-eu (ecdsa P-256)", "releas (ecdsa P-256)", "Release (ecdsa P-256)"]
)
def test_signers_are_names_not_prefixes(
    signer: str, clean_facts: AssetFacts, image_facts: AssetFacts
) -> None:
    # `signers: [release]` names one signer of the trust policy: release-eu is another
    rule = {"signers": ["release"]}
    files = tuple(
        replace(f, provenance="verified", provenance_signer=signer) for f in clean_facts.files
    )
    result = assert_deny_and_warn(replace(clean_facts, files=files), "provenance", rule)
    assert "outside release" in result.message and signer in result.message
    result = assert_deny_and_warn(_trusted(image_facts, signer, 2), "image_signature", rule)
    assert f"signed by {signer}, not by release" in result.message
    exact = tuple(replace(f, provenance_signer="release (ecdsa P-256)") for f in files)
    assert_allow(replace(clean_facts, files=exact), "provenance", rule)
    assert_allow(_trusted(image_facts, "release (ecdsa P-256)", 2), "image_signature", rule)


# -- versions ----------------------------------------------------------------------------------


def test_versions_allow_deny_minimum(clean_facts: AssetFacts, pairing_facts: AssetFacts) -> None:
    rule = {"allow": {"cudnn": ">=9.1,<10"}, "deny": {"cudnn": ["9.0.*"]}}
    assert_allow(clean_facts, "versions", {**rule, "minimum": {"cudart": "12.2"}})
    result = assert_deny_and_warn(pairing_facts, "versions", {"minimum": {"cudart": "12.2"}})
    assert "cudart 11.8.89 is below minimum 12.2" in result.message
    result = assert_deny_and_warn(clean_facts, "versions", {"deny": {"cudnn": ["9.1.*"]}})
    assert "matches deny 9.1.*" in result.message
    assert_deny_and_warn(clean_facts, "versions", {"allow": {"cudnn": "9.2.0"}})
    assert_not_applicable(clean_facts, "versions", {"minimum": {"nccl": "2.18"}}, "none of")


def test_versions_pass_names_the_families_the_asset_holds(clean_facts: AssetFacts) -> None:
    # The rule names nccl too, but the asset holds none: the message must not claim it does.
    families = {f.family for f in clean_facts.files if f.family in ("cudnn", "nccl")}
    assert families == {"cudnn"}
    result = assert_allow(
        clean_facts, "versions", {"allow": {"cudnn": ">=9.1,<10"}, "minimum": {"nccl": "2.18"}}
    )
    assert result.message.endswith(" of cudnn within the allowed versions"), result.message


# -- cuda_pairing ------------------------------------------------------------------------------


def test_cuda_pairing_denies_cudnn_cu12_with_cudart_11(
    pairing_facts: AssetFacts, clean_facts: AssetFacts, old_driver_facts: AssetFacts
) -> None:
    result = assert_deny_and_warn(pairing_facts, "cuda_pairing", {})
    assert "built for CUDA 12 but the asset's cudart is CUDA 11" in result.message
    assert_allow(clean_facts, "cuda_pairing", {})
    no_cudart = replace(
        clean_facts, files=tuple(f for f in clean_facts.files if f.family != "cudart")
    )
    assert_not_applicable(no_cudart, "cuda_pairing", {}, "no cudart in the asset")
    only_cudart = replace(
        old_driver_facts, files=tuple(f for f in old_driver_facts.files if f.family == "cudart")
    )
    assert_not_applicable(only_cudart, "cuda_pairing", {}, "no library built for a CUDA major")


# -- mixed_cudnn and duplicates ----------------------------------------------------------------


def test_mixed_cudnn_denies_mixed_sub_library_versions(
    world_facts: AssetFacts, clean_facts: AssetFacts, old_driver_facts: AssetFacts
) -> None:
    result = assert_deny_and_warn(world_facts, "mixed_cudnn", {})
    assert "/opt/mixed/lib" in result.message and "9.1.0, 9.3.0" in result.message
    assert_allow(clean_facts, "mixed_cudnn", {})
    assert_not_applicable(old_driver_facts, "mixed_cudnn", {}, "no cuDNN")


def test_duplicates_denies_two_releases_on_one_loader_path(
    duplicate_facts: AssetFacts, clean_facts: AssetFacts
) -> None:
    result = assert_deny_and_warn(duplicate_facts, "duplicates", {})
    assert "12.2.140, 12.4.127" in result.message
    assert_allow(clean_facts, "duplicates", {})
    assert_not_applicable(replace(clean_facts, files=()), "duplicates", {}, "no GPU")


# -- driver ------------------------------------------------------------------------------------


def test_driver_minimum_from_the_sourced_table(
    old_driver_facts: AssetFacts, clean_facts: AssetFacts, pairing_facts: AssetFacts
) -> None:
    result = assert_deny_and_warn(old_driver_facts, "driver", {})
    assert "470.256.02 is older than 525.60.13" in result.message
    assert "docs.nvidia.com" in dict(result.evidence)["source"]
    assert_allow(clean_facts, "driver", {})
    unknown = assert_deny_and_warn(pairing_facts, "driver", {})  # no libcuda / NVML
    assert unknown.missing_input and "driver version is unknown" in unknown.message
    image = replace(clean_facts, kind=AssetKind.IMAGE)
    assert_not_applicable(image, "driver", {}, "an image carries no driver")


# -- image_signature and slsa ------------------------------------------------------------------


def _trusted(facts: AssetFacts, signer: str | None, level: int | None) -> AssetFacts:
    rejected = () if signer else ("no signature or attestation found for the image",)
    return replace(
        facts, image_trust=ImageTrustFacts(signer, level, "https://ci.example/builder", rejected)
    )


def test_image_signature(image_facts: AssetFacts, world_facts: AssetFacts) -> None:
    assert image_facts.kind is AssetKind.IMAGE and image_facts.digest
    missing = assert_deny_and_warn(image_facts, "image_signature", {})
    assert missing.missing_input and "--trust" in missing.message
    unsigned = assert_deny_and_warn(_trusted(image_facts, None, None), "image_signature", {})
    assert "no signature or attestation found" in unsigned.message
    rule = {"signers": ["release-ci"]}
    assert_allow(_trusted(image_facts, "release-ci", 2), "image_signature", rule)
    assert_deny_and_warn(_trusted(image_facts, "someone", 2), "image_signature", rule)
    assert_not_applicable(world_facts, "image_signature", rule, "a host has no image signature")


def test_slsa_level(image_facts: AssetFacts, world_facts: AssetFacts) -> None:
    result = assert_deny_and_warn(_trusted(image_facts, "release-ci", 1), "slsa", {"min_level": 2})
    assert "level 1 is below the required 2" in result.message
    assert set(result.controls) == {
        "ID.RA-09",
        "GV.SC-09",
        "SLSA_BUILD_LEVEL_1",
        "SLSA_BUILD_LEVEL_2",
    }
    assert_deny_and_warn(_trusted(image_facts, None, None), "slsa", {"min_level": 1})
    assert assert_deny_and_warn(image_facts, "slsa", {}).missing_input
    assert_allow(_trusted(image_facts, "release-ci", 3), "slsa", {"min_level": 2})
    assert_not_applicable(world_facts, "slsa", {}, "a host is not one")


# -- scan_age ----------------------------------------------------------------------------------


def test_scan_age(clean_facts: AssetFacts) -> None:
    assert clean_facts.scanned_at is not None
    later = clean_facts.scanned_at + timedelta(hours=30)
    result = assert_deny_and_warn(clean_facts, "scan_age", {"max_hours": 24}, now=later)
    assert "30.0 h old" in result.message
    assert_allow(clean_facts, "scan_age", {"max_hours": 24}, now=clean_facts.scanned_at)
    unknown = replace(clean_facts, scanned_at=None)
    assert assert_deny_and_warn(unknown, "scan_age", {"max_hours": 1}).missing_input


# -- parity ------------------------------------------------------------------------------------

PARITY = {"label": "env", "baseline": "staging", "target": "prod"}


def test_parity_flags_prod_only_versions(clean_facts: AssetFacts, world_facts: AssetFacts) -> None:
    staging = baseline_of("env", "staging", [clean_facts])
    candidate = replace(world_facts, labels=(("env", "prod"),))
    result = assert_deny_and_warn(candidate, "parity", PARITY, baseline=staging)
    assert "never ran in env=staging" in result.message and "cudnn 9.3.0" in result.message
    assert_allow(clean_facts, "parity", PARITY, baseline=staging)
    missing = assert_deny_and_warn(clean_facts, "parity", PARITY)
    assert missing.missing_input and "no fleet baseline" in missing.message
    other = FleetBaseline("env", "dev", {}, 3)
    assert assert_deny_and_warn(clean_facts, "parity", PARITY, baseline=other).missing_input
    dev = replace(clean_facts, labels=(("env", "dev"),))
    assert_not_applicable(dev, "parity", PARITY, "applies to env=prod")


# -- the whole decision ------------------------------------------------------------------------


def test_full_policy_decision_json(world_facts: AssetFacts) -> None:
    doc = policy(
        integrity={},
        ownership={"allow_unowned": ["/opt/app/**", "/opt/mixed/**"]},
        mixed_cudnn={"action": "warn"},
        image_signature={},
        scan_age={"max_hours": 24},
    )
    now = datetime.now(UTC)
    evaluation = evaluate(world_facts, doc, now=now)
    out = decision_json(evaluation, {"name": "t", "version": None, "sha256": "x"}, {})
    assert out["decision"] == "deny"
    assert [r["rule"] for r in out["reasons"]] == ["integrity", "ownership", "mixed_cudnn"]
    assert {r["rule"]: r["status"] for r in out["rules"]}["image_signature"] == "not_applicable"
    assert out["controls"]["ID.AM-02"] == "pass"
    assert out["controls"]["CIS-2.6"] == "fail"
    assert "PR.DS-10" not in out["controls"] and "PR.PS-03" not in out["controls"]
    # ownership fails on the unowned NVML driver library, which no glob allows
    assert "libnvidia-ml" in out["reasons"][1]["message"]


def test_evaluation_is_pure(world_facts: AssetFacts) -> None:
    doc = policy(integrity={}, scan_age={"max_hours": 1})
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert evaluate(world_facts, doc, now=now) == evaluate(world_facts, doc, now=now)


@pytest.mark.parametrize("rule", ["cuda_pairing", "mixed_cudnn", "duplicates", "driver"])
def test_every_rule_cites_controls(rule: str, clean_facts: AssetFacts) -> None:
    _, result = only(clean_facts, rule, {})
    assert result.controls


def test_every_mixed_directory_and_duplicate_is_named(
    world_facts: AssetFacts, duplicate_facts: AssetFacts
) -> None:
    mixed = [f for f in world_facts.files if f.path.startswith("/opt/mixed/")]
    copies = tuple(replace(f, path=f.path.replace("/opt/mixed/", "/srv/m/")) for f in mixed)
    two = replace(world_facts, files=world_facts.files + copies)
    result = assert_deny_and_warn(two, "mixed_cudnn", {})
    assert "/opt/mixed/lib" in result.message and "/srv/m/lib" in result.message
    assert len(result.files) == 2 * len(mixed)
    moved = tuple(
        replace(f, path="/usr/lib64/" + f.path.rsplit("/", 1)[1]) for f in duplicate_facts.files
    )
    both = replace(duplicate_facts, files=duplicate_facts.files + moved)
    result = assert_deny_and_warn(both, "duplicates", {})
    assert "on /opt/vendor/lib" in result.message and "on the default loader path" in result.message
