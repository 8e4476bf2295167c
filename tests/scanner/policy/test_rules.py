"""Each policy rule on facts built here (scanner/policy/rules.py): the edges of every decision,
what each message names and counts, and which files each outcome lists. test_evaluate.py runs
the rules on scanned fixtures; this file is the narrow one (mutation/modules.toml, policy-rules).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace

from scanner.model import AssetKind
from scanner.policy import document as D
from scanner.policy.drivers import default_drivers
from scanner.policy.facts import AssetFacts, FileFact, ImageTrustFacts
from scanner.policy.rules import RULES, Context, FleetBaseline, Outcome, Status, baseline_of

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
LIB = "/usr/lib/x86_64-linux-gnu"


def f(path: str, family: str, version: str | None = None, major: int | None = 12, **kw: Any):
    return FileFact(path, family, kw.pop("component", family), version, major, "a" * 64, **kw)


def host(*files: FileFact, **kw: Any) -> AssetFacts:
    return AssetFacts(AssetKind.HOST, "node-1", "m1", kw.pop("scanned_at", NOW), files, **kw)


def image(*files: FileFact, **kw: Any) -> AssetFacts:
    return replace(host(*files, **kw), kind=AssetKind.IMAGE, name="reg/app:1")


def rule(name: str, settings: dict[str, Any], facts: AssetFacts, **kw: Any) -> Outcome:
    doc = {"apiVersion": "gpuprov.dev/v1", "kind": "PromotionPolicy", "name": "t"}
    policy = D.validate_policy({**doc, "rules": {name: settings}})
    ctx = Context(facts, kw.pop("now", NOW), default_drivers(), kw.pop("baseline", None))
    return RULES[name](getattr(policy.rules, name), ctx)


def paths(outcome: Outcome) -> list[str]:
    return [x.path for x in outcome.files]


# -- what messages name and count ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "named"),
    [
        (1, "/o/0"),
        (3, "/o/0, /o/1, /o/2"),
        (4, "/o/0, /o/1, /o/2 and 1 more"),
        (5, "/o/0, /o/1, /o/2 and 2 more"),
        (12, "/o/0, /o/1, /o/2 and 9 more"),
    ],
)
def test_a_message_names_three_files_and_counts_the_rest(count: int, named: str) -> None:
    files = [f(f"/o/{i}", "cudnn", integrity="unowned") for i in range(count)]
    outcome = rule("ownership", {}, host(*files))
    assert outcome.message.endswith(f"matches them: {named}")


@pytest.mark.parametrize(
    ("count", "more"),
    [(1, ""), (2, ""), (3, ""), (4, " and 1 more"), (5, " and 2 more"), (12, " and 9 more")],
)
def test_the_loaded_rule_names_three_reasons_and_counts_the_rest(count: int, more: str) -> None:
    files = [f(f"/o/{i}", "cudnn", integrity="unowned", loaded_processes=1) for i in range(count)]
    outcome = rule("loaded", {"forbid": ["loaded-unowned"]}, host(*files, runtime=True))
    assert outcome.status is Status.FAIL and len(outcome.files) == count
    last = min(count, 3) - 1
    assert outcome.message.endswith(
        f"/o/{last} is loaded by 1 process(es) and belongs to no package" + more
    )


# -- cuda_pairing -------------------------------------------------------------------------------


def test_an_unknown_cudart_major_names_only_the_cudart_files() -> None:
    cudart = f(f"{LIB}/libcudart.so.12", "cudart", major=None)
    other = f(f"{LIB}/libcudnn.so.9", "cudnn", "9.1.0", 12)
    nameless = f(f"{LIB}/libnccl.so.2", "nccl", major=None)
    blas = f(f"{LIB}/libcublas.so.12", "cublas", major=None)
    outcome = rule("cuda_pairing", {}, host(cudart, other, nameless, blas))
    assert outcome.missing_input and paths(outcome) == [cudart.path]
    read = replace(cudart, family=fresh("cudart"))  # a family read from a BOM
    outcome = rule("cuda_pairing", {}, host(read, other))
    assert outcome.missing_input and paths(outcome) == [cudart.path]


# -- mixed_cudnn --------------------------------------------------------------------------------


def test_a_lone_cudnn_library_of_unknown_version_cannot_be_mixed() -> None:
    lone = f("/opt/a/libcudnn.so.9", "cudnn", None)
    assert rule("mixed_cudnn", {}, host(lone)).status is Status.PASS
    pair = (lone, f("/opt/a/libcudnn_ops.so.9", "cudnn", "9.1.0", component="cudnn_ops"))
    outcome = rule("mixed_cudnn", {}, host(*pair))
    assert outcome.missing_input and paths(outcome) == ["/opt/a/libcudnn.so.9"]
    assert "the version of 1 cuDNN sub-library(ies) in /opt/a is unknown" in outcome.message


# -- driver -------------------------------------------------------------------------------------


def test_a_driver_is_judged_against_the_newest_cuda_it_runs() -> None:
    libs = (f(f"{LIB}/libcublas.so.12", "cublas", "12.4.5.8", 12),)
    same_major = host(*libs, driver_version="535.104.05", driver_cuda_max="12.2")
    assert rule("driver", {}, same_major).status is Status.PASS
    newer = host(f(f"{LIB}/libcublas.so.13", "cublas", "13.0.0", 13), driver_cuda_max="12.2")
    outcome = rule("driver", {}, newer)
    assert outcome.status is Status.FAIL and "cannot run CUDA 13" in outcome.message


def test_an_unknown_driver_names_the_newest_cuda_major_it_must_run() -> None:
    libs = (
        f("/a/libcublas.so.11", "cublas", "11.11.3", 11),
        f("/b/libcublas.so.12", "cublas", "12.4.5.8", 12),
        f("/c/libcublas.so.13", "cublas", "13.0.0", 13),
    )
    outcome = rule("driver", {}, host(*libs))
    assert outcome.missing_input
    assert outcome.message.endswith("CUDA 13 needs >= 580.65.06")


def test_only_cudart_is_the_runtime_newer_than_the_driver() -> None:
    # a library whose version string equals the too new runtime's is no runtime
    files = (
        f(f"{LIB}/libcudart.so.12", "cudart", "12.6.77", 12),
        f(f"{LIB}/libcufft.so.12", "cufft", "12.6.77", 12),
    )
    facts = host(*files, driver_version="535.104.05", driver_cuda_max="12.2")
    outcome = rule("driver", {"minor_version_compatibility": False}, facts)
    assert outcome.status is Status.FAIL and paths(outcome) == [files[0].path]


# -- parity -------------------------------------------------------------------------------------

PARITY = {"label": "env", "baseline": "staging", "target": "prod"}


def test_a_baseline_of_one_asset_is_a_baseline_and_of_none_is_missing() -> None:
    lib = f("/a/libcudnn.so.9", "cudnn", "9.1.0")
    one = baseline_of("env", "staging", [host(lib)])
    assert one.assets == 1
    assert rule("parity", PARITY, host(lib), baseline=one).status is Status.PASS
    none = FleetBaseline("env", "staging", {}, 0)
    outcome = rule("parity", PARITY, host(lib), baseline=none)
    assert outcome.missing_input and outcome.message == "the baseline env=staging has no asset"


# -- image_signature ----------------------------------------------------------------------------


def test_image_trust_is_read_for_images_only() -> None:
    trust = ImageTrustFacts("release (ecdsa)", 2, "b")
    assert rule("image_signature", {}, image(image_trust=trust)).status is Status.PASS
    assert rule("image_signature", {}, host(image_trust=trust)).status is Status.NOT_APPLICABLE


def fresh(text: str) -> str:
    """``text`` as a new string object, as JSON parsing makes it (never the interned literal)."""
    return "".join(list(text))


# -- ownership globs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "path", "allowed"),
    [
        ("/opt/lib?.so", "/opt/lib1.so", True),
        ("/opt/lib?.so", "/opt/lib12.so", False),
        ("/opt/lib?.so", "/opt/lib/.so", False),  # "?" stays within a component
        ("/opt/?/lib.so", "/opt/a/lib.so", True),
        ("/opt/*/lib.so", "/opt/a/b/lib.so", False),
        ("/opt/**/lib.so", "/opt/a/b/lib.so", True),
        ("/opt/a.so", "/opt/aXso", False),  # everything else is literal
        ("/opt/**", "/srv/opt/x", False),  # the whole path
    ],
)
def test_allow_unowned_globs(glob: str, path: str, allowed: bool) -> None:
    outcome = rule(
        "ownership", {"allow_unowned": [glob]}, host(f(path, "cudnn", integrity="unowned"))
    )
    assert (outcome.status is Status.PASS) is allowed, outcome.message


# -- provenance ---------------------------------------------------------------------------------


def test_a_conflict_names_three_reasons() -> None:
    files = [
        f(f"/c/{i}", "cudnn", provenance="conflict", provenance_reason=f"r{i}") for i in range(4)
    ]
    outcome = rule("provenance", {}, host(*files))
    assert outcome.message.endswith(": /c/0: r0; /c/1: r1; /c/2: r2")
    assert paths(outcome) == ["/c/0", "/c/1", "/c/2", "/c/3"]


def test_only_verified_is_verified() -> None:
    # a verdict gpuprov does not know (a newer producer's, an altered BOM's) verifies nothing
    for verdict in ("weird", "zzz", "unknown", fresh("conflicted")):
        outcome = rule(
            "provenance", {"require": "verified"}, host(f("/a", "cudnn", provenance=verdict))
        )
        assert outcome.status is Status.FAIL, verdict
    outcome = rule(
        "provenance",
        {},
        host(
            f("/a", "cudnn", provenance=fresh("verified"), provenance_signer="n (x)"),
            f("/b", "cudnn", provenance="unknown"),
        ),
    )
    assert outcome.status is Status.PASS and outcome.message.endswith("; 1/2 verified")


# -- versions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings",
    [
        {"allow": {"cudnn": ">=9"}, "deny": {"cudnn": ["9.1.*"]}},
        {"deny": {"cudnn": ["9.1.*"]}, "minimum": {"cudnn": "9.0"}},
        {"allow": {"cudnn": ">=9"}, "deny": {"cudnn": ["9.1.*"]}, "minimum": {"cudnn": "9.0"}},
    ],
)
def test_a_family_named_by_several_settings_is_judged_by_each(settings: dict[str, Any]) -> None:
    outcome = rule("versions", settings, host(f("/a/libcudnn.so.9", "cudnn", "9.1.0")))
    assert outcome.status is Status.FAIL and "cudnn 9.1.0 matches deny 9.1.*" in outcome.message
    ok = rule("versions", settings, host(f("/a/libcudnn.so.9", "cudnn", "9.2.0")))
    assert ok.status is Status.PASS


# -- cuda_pairing with families read from a BOM -------------------------------------------------


def test_families_are_compared_by_value() -> None:
    cudart = f(f"{LIB}/libcudart.so.11", fresh("cudart"), "11.8.89", 11)
    cudnn = f(f"{LIB}/libcudnn.so.9", fresh("cudnn"), "9.1.0", 12)
    outcome = rule("cuda_pairing", {}, host(cudart, cudnn))
    assert outcome.status is Status.FAIL and "cudart is CUDA 11" in outcome.message


# -- mixed_cudnn --------------------------------------------------------------------------------


def test_releases_compare_normalized_versions() -> None:
    # a package revision or build suffix is the same release of a sub-library
    same = (
        f("/a/libcudnn.so.9", "cudnn", "9.1.0-1"),
        f("/a/libcudnn_ops.so.9", "cudnn", "9.1.0.70", component="cudnn_ops"),
    )
    assert rule("mixed_cudnn", {}, host(*same)).status is Status.PASS
    assert rule("duplicates", {}, host(*same)).status is Status.PASS


# -- driver: which runtime is too new -----------------------------------------------------------


def test_the_runtime_too_new_for_the_driver_is_the_cudart_one() -> None:
    files = (
        f(f"{LIB}/libcudart.so.12", fresh("cudart"), "12.6.77", 12),
        f("/opt/old/libcudart.so.12", fresh("cudart"), "12.1.105", 12),
        f(f"{LIB}/libcublas.so.12", "cublas", "12.1.3.1", 12),
    )
    facts = host(*files, driver_version="535.104.05", driver_cuda_max="12.2")
    outcome = rule("driver", {"minor_version_compatibility": False}, facts)
    assert outcome.status is Status.FAIL and paths(outcome) == [files[0].path]
    assert outcome.message.startswith("CUDA runtime 12.6.77 is newer than the CUDA 12.2 driver")
    allowed = rule("driver", {}, facts)
    assert allowed.status is Status.PASS and "CUDA runtime 12.6.77 runs under" in allowed.message


# -- parity -------------------------------------------------------------------------------------


def test_a_baseline_without_a_count_has_no_asset() -> None:
    assert FleetBaseline("env", "staging").assets == 0
    outcome = rule("parity", PARITY, host(), baseline=FleetBaseline("env", "staging"))
    assert outcome.missing_input and "has no asset" in outcome.message


# -- every rule, each outcome, on hand-built facts ----------------------------------------------

CUDNN = f(f"{LIB}/libcudnn.so.9.1.0", "cudnn", "9.1.0", 12, integrity="verified")
OPS = f(
    f"{LIB}/libcudnn_ops.so.9.1.0",
    "cudnn",
    "9.1.0",
    12,
    component="cudnn_ops",
    integrity="verified",
)
CUDART = f(f"{LIB}/libcudart.so.12.4.127", "cudart", "12.4.127", 12, integrity="verified")
NVML = f(f"{LIB}/libnvidia-ml.so.535.309.01", "nvidia-ml", "535.309.01", None, integrity="unowned")


def test_integrity() -> None:
    assert rule("integrity", {}, host()).status is Status.NOT_APPLICABLE
    ok = rule("integrity", {"forbid": ["modified", "no-record"]}, host(CUDNN, CUDART))
    assert ok.status is Status.PASS
    assert ok.message == "all 2 GPU library files avoid modified, no-record"
    assert ok.evidence == (("forbid", "modified,no-record"),)
    bad = replace(OPS, integrity="modified", integrity_reason="sha256 differs")
    norec = replace(CUDART, integrity="no-record", integrity_reason="")
    blind = replace(CUDNN, integrity=None)
    out = rule("integrity", {"forbid": ["no-record", "modified"]}, host(blind, norec, bad))
    assert out.status is Status.FAIL and not out.missing_input
    assert out.message == (
        "2 GPU library file(s) have a forbidden integrity verdict (modified, no-record): "
        f"{norec.path}, {bad.path}; {bad.path}: sha256 differs; 1 more have no verdict"
    )
    assert paths(out) == [norec.path, bad.path, blind.path]
    assert rule("integrity", {}, host(norec)).status is Status.PASS  # only modified by default
    out = rule("integrity", {}, host(blind, CUDART))
    assert out.missing_input and paths(out) == [blind.path]
    assert (
        "1 GPU library file(s) have no integrity verdict (the facts come from gpuprov"
        in out.message
    )


def test_ownership() -> None:
    assert rule("ownership", {}, host()).status is Status.NOT_APPLICABLE
    assert (
        rule("ownership", {}, host(CUDNN)).message == "every GPU library file is owned by a package"
    )
    allowed = rule("ownership", {"allow_unowned": ["/usr/lib/**"]}, host(CUDNN, NVML))
    assert allowed.status is Status.PASS
    assert allowed.message.endswith("(1 unowned file(s) allowed by allow_unowned)")
    blind = replace(CUDNN, integrity=None)
    out = rule("ownership", {}, host(NVML, blind))
    assert out.status is Status.FAIL and paths(out) == [NVML.path, blind.path]
    assert out.message.endswith(f"matches them: {NVML.path}; 1 more have no owner verdict")
    assert out.evidence == ()
    out = rule("ownership", {"allow_unowned": ["/opt/**"]}, host(NVML))
    assert out.evidence == (("allow_unowned", "/opt/**"),)
    out = rule("ownership", {}, host(blind, CUDART))
    assert out.missing_input and paths(out) == [blind.path]


def test_provenance() -> None:
    assert rule("provenance", {}, host()).status is Status.NOT_APPLICABLE
    out = rule("provenance", {}, host(CUDNN))
    assert out.missing_input and "(scan with --catalog and --trust)" in out.message
    out = rule("provenance", {}, host(CUDNN, producer="syft 1.4"))
    assert out.missing_input and "(the BOM comes from syft 1.4)" in out.message
    signed = replace(CUDNN, provenance="verified", provenance_signer="nvidia (ecdsa)")
    unknown = replace(CUDART, provenance="unknown")
    assert rule("provenance", {}, host(signed, unknown)).status is Status.PASS
    out = rule("provenance", {"require": "verified"}, host(signed, unknown))
    assert out.status is Status.FAIL and paths(out) == [unknown.path]
    out = rule("provenance", {"signers": ["nvidia"]}, host(signed, unknown))
    assert out.status is Status.PASS  # an unknown file has no signer to be wrong
    out = rule("provenance", {"signers": ["other", "third"]}, host(signed, unknown))
    assert out.status is Status.FAIL and paths(out) == [signed.path]
    assert out.message == (
        f"1 GPU library file(s) are vouched for by a signer outside other, third: {signed.path} "
        "(nvidia (ecdsa))"
    )
    assert out.evidence == (("signers", "other,third"),)
    conflict = replace(CUDNN, provenance="conflict", provenance_reason="catalog says b")
    out = rule("provenance", {}, host(conflict, replace(CUDART, provenance=None)))
    assert out.status is Status.FAIL and not out.missing_input and paths(out) == [conflict.path]


def test_versions() -> None:
    na = rule("versions", {"minimum": {"nccl": "2.18", "cudnn": "9"}}, host(CUDART))
    assert na.status is Status.NOT_APPLICABLE
    assert na.message == "the asset holds none of the families the rule names (cudnn, nccl)"
    ok = rule(
        "versions", {"allow": {"cudnn": ">=9.1"}, "minimum": {"nccl": "2"}}, host(CUDNN, CUDART)
    )
    assert (
        ok.status is Status.PASS and ok.message == "1 file(s) of cudnn within the allowed versions"
    )
    out = rule("versions", {"allow": {"cudnn": ">=9.2"}}, host(CUDNN, OPS))
    assert out.message == (f"cudnn 9.1.0 is outside allow >=9.2 ({CUDNN.path}, {OPS.path})")
    out = rule("versions", {"minimum": {"cudart": "12.5"}}, host(CUDART))
    assert out.message.startswith("cudart 12.4.127 is below minimum 12.5")
    assert rule("versions", {"minimum": {"cudart": "12.4.127"}}, host(CUDART)).status is Status.PASS
    nameless = replace(CUDNN, version=None)
    out = rule("versions", {"deny": {"cudnn": ["9.0.*"]}}, host(nameless))
    assert out.missing_input and paths(out) == [nameless.path]
    out = rule("versions", {"deny": {"cudnn": ["9.1.*"]}}, host(nameless, CUDNN))
    assert out.status is Status.FAIL and not out.missing_input and paths(out) == [CUDNN.path]


def test_cuda_pairing() -> None:
    assert rule("cuda_pairing", {}, host(CUDART, NVML)).message.startswith("no library built")
    assert rule("cuda_pairing", {}, host(CUDNN)).message.startswith("no cudart in the asset")
    ok = rule("cuda_pairing", {}, host(CUDNN, OPS, CUDART))
    assert ok.status is Status.PASS and ok.message == "2 file(s) built for CUDA 12, matching cudart"
    old = replace(CUDART, version="11.8.89", cuda_major=11)
    out = rule("cuda_pairing", {}, host(CUDNN, OPS, old))
    assert out.status is Status.FAIL and paths(out) == [CUDNN.path, OPS.path]
    assert out.message == (
        "cudnn 9.1.0 built for CUDA 12 but the asset's cudart is CUDA 11 "
        f"({CUDNN.path}, {OPS.path}): it loads, then fails at the first call"
    )
    assert out.evidence == (("cudart_majors", "11"),)
    both = rule("cuda_pairing", {}, host(CUDNN, old, replace(CUDART, path="/opt/libcudart.so.12")))
    assert both.status is Status.PASS and "CUDA 11, 12" in both.message


def test_mixed_cudnn_and_duplicates() -> None:
    assert rule("mixed_cudnn", {}, host(CUDART)).status is Status.NOT_APPLICABLE
    ok = rule("mixed_cudnn", {}, host(CUDNN, OPS, replace(OPS, path="/opt/x/libcudnn_ops.so.9")))
    assert ok.message == "cuDNN sub-libraries agree in each of 2 directory(ies)"
    newer = replace(OPS, version="9.3.0")
    out = rule("mixed_cudnn", {}, host(CUDNN, newer))
    assert out.status is Status.FAIL and paths(out) == [CUDNN.path, newer.path]
    assert out.message == (
        f"cuDNN sub-libraries in {LIB} are at different versions (9.1.0, 9.3.0): "
        "cudnn 9.1.0, cudnn_ops 9.3.0"
    )
    # duplicates: one loader directory, one component, one major, two releases
    assert rule("duplicates", {}, host(NVML)).status is Status.NOT_APPLICABLE
    assert rule("duplicates", {}, host(CUDNN, CUDART)).status is Status.PASS
    other = replace(CUDART, path="/lib/libcudart.so.12.2.140", version="12.2.140")
    out = rule("duplicates", {}, host(CUDART, other))
    assert out.status is Status.FAIL and paths(out) == [CUDART.path, other.path]
    assert out.message == (
        "cudart is present at 2 versions (12.2.140, 12.4.127) on the default loader path: "
        "which one loads depends on symlinks and search order"
    )
    apart = replace(other, path="/opt/cuda/libcudart.so.12.2.140")
    assert rule("duplicates", {}, host(CUDART, apart)).status is Status.PASS
    major11 = replace(other, version="11.8.89")
    assert rule("duplicates", {}, host(CUDART, major11)).status is Status.PASS
    driver2 = replace(NVML, path="/lib/libnvidia-ml.so.550", version="550.54.15")
    assert rule("duplicates", {}, host(NVML, driver2)).status is Status.NOT_APPLICABLE


def test_driver() -> None:
    assert rule("driver", {}, image(CUDART)).status is Status.NOT_APPLICABLE
    assert rule("driver", {}, host(NVML)).message.startswith("no CUDA library with a known")
    ok = rule("driver", {}, host(CUDART, driver_version="535.309.01"))
    assert ok.status is Status.PASS and ok.message == "driver 535.309.01 runs CUDA 12"
    assert dict(ok.evidence)["driver"] == "535.309.01" and "cuda_max" not in dict(ok.evidence)
    out = rule("driver", {}, host(CUDART, driver_version="470.256.02"))
    assert out.status is Status.FAIL and paths(out) == [CUDART.path]
    assert out.message == (
        f"driver 470.256.02 is older than 525.60.13, the minimum for CUDA 12 ({CUDART.path})"
    )
    assert dict(out.evidence)["minimum"] == "525.60.13"
    # a CUDA major the sourced table does not know cannot be judged
    ten = replace(CUDART, version="10.2.89", cuda_major=10)
    out = rule("driver", {}, host(ten, driver_version="535.309.01"))
    assert out.missing_input and out.message.startswith("no minimum driver is known for CUDA 10")
    # a Jetson states what CUDA its driver runs, not a driver version
    jetson = rule("driver", {}, host(CUDART, driver_cuda_max="12.6"))
    assert jetson.status is Status.PASS
    assert jetson.message == "driver (L4T) (supports CUDA <= 12.6) runs CUDA 12"


def test_loaded() -> None:
    assert rule("loaded", {}, image(CUDART)).status is Status.NOT_APPLICABLE
    out = rule("loaded", {}, host(CUDART, producer="syft 1"))
    assert out.missing_input and "the facts come from syft 1" in out.message
    busy = replace(CUDART, loaded_processes=2)
    ok = rule("loaded", {}, host(busy, CUDNN, runtime=True))
    assert ok.status is Status.PASS
    assert ok.message == (
        "1 loaded GPU library file(s) avoid loaded-unowned, loaded-deleted, "
        "loaded-differs-from-disk"
    )
    # what is not loaded is not this rule's business, however it stands on disk
    idle = replace(NVML, loaded_deleted=True, disk_sha256="b" * 64)
    assert rule("loaded", {}, host(idle, runtime=True)).status is Status.PASS
    out = rule("loaded", {}, host(busy, runtime=True, runtime_unreadable=("a", "b")))
    assert out.missing_input and out.message.endswith(": a; b")


def test_image_signature_and_slsa() -> None:
    assert rule("image_signature", {}, image()).missing_input
    unsigned = image(image_trust=ImageTrustFacts(None, None, None, ("bad key", "expired")))
    out = rule("image_signature", {}, unsigned)
    assert out.status is Status.FAIL
    assert out.message.endswith("trust policy: bad key; expired")
    assert out.evidence == (("rejected", "bad key; expired"),)
    none = rule("image_signature", {}, image(image_trust=ImageTrustFacts(None, None)))
    assert none.message.endswith("trust policy: none found") and none.evidence == ()
    signed = image(image_trust=ImageTrustFacts("ci (ecdsa)", 2, "https://b"))
    assert rule("image_signature", {}, signed).message == "signed by ci (ecdsa)"
    assert rule("slsa", {}, host()).status is Status.NOT_APPLICABLE
    assert rule("slsa", {}, image()).missing_input
    out = rule("slsa", {}, image(image_trust=ImageTrustFacts("ci", None)))
    assert out.message == "SLSA Build level none (no accepted provenance)"
    out = rule("slsa", {"min_level": 3}, signed)
    assert out.message == "SLSA Build level 2 is below the required 3"
    assert dict(out.evidence) == {"level": "2", "required": "3", "builder": "https://b"}
    ok = rule("slsa", {"min_level": 2}, signed)
    assert ok.status is Status.PASS and ok.message == "SLSA Build level 2 (builder https://b)"


def test_scan_age() -> None:
    at = NOW - timedelta(hours=24)
    assert rule("scan_age", {"max_hours": 24}, host(scanned_at=at)).status is Status.PASS
    out = rule("scan_age", {"max_hours": 24}, host(scanned_at=at - timedelta(seconds=10)))
    assert out.status is Status.FAIL
    assert out.message == (
        "the inventory is 24.0 h old (scanned 2026-12-01T11:59:50+00:00), more than 24 h: "
        "scan again"
    )
    ok = rule("scan_age", {"max_hours": 1.5}, host(scanned_at=NOW - timedelta(minutes=30)))
    assert ok.message == "scanned 0.5 h ago"
    assert dict(ok.evidence) == {"scanned_at": "2026-12-02T11:30:00+00:00"}
    assert rule("scan_age", {"max_hours": 1}, host(scanned_at=None)).missing_input


def test_parity() -> None:
    staging = baseline_of("env", "staging", [host(CUDNN), host(CUDART)])
    assert staging.versions == {"cudnn": frozenset({"9.1.0"}), "cudart": frozenset({"12.4.127"})}
    prod = host(CUDNN, CUDART, labels=(("env", "prod"),))
    assert rule("parity", PARITY, prod, baseline=staging).status is Status.PASS
    unlabelled = host(CUDNN)  # no env label: the rule applies
    assert rule("parity", PARITY, unlabelled, baseline=staging).status is Status.PASS
    dev = host(CUDNN, labels=(("env", "dev"),))
    out = rule("parity", PARITY, dev, baseline=staging)
    assert out.status is Status.NOT_APPLICABLE
    assert out.message == "the asset is env=dev; the rule applies to env=prod"
    newer = replace(OPS, version="9.3.0")
    out = rule("parity", PARITY, host(CUDNN, newer, newer), baseline=staging)
    assert out.status is Status.FAIL and paths(out) == [newer.path, newer.path]
    assert out.message == "2 GPU library version(s) never ran in env=staging: cudnn 9.3.0"
    assert out.evidence == (("baseline", "env=staging (2 assets)"),)
    # a baseline of another label or value, sorting before or after the rule's own
    for label, value in (("team", "staging"), ("app", "staging"), ("env", "dev"), ("env", "test")):
        other = FleetBaseline(label, value, {"cudnn": frozenset({"9.1.0"})}, 1)
        assert rule("parity", PARITY, prod, baseline=other).missing_input, (label, value)


def test_outcomes_and_contexts_are_frozen() -> None:
    outcome = rule("integrity", {}, host(CUDNN))
    ctx = Context(host(), NOW, default_drivers())
    for value, attribute in ((outcome, "status"), (ctx, "facts")):
        with pytest.raises(AttributeError):
            setattr(value, attribute, None)


def test_failures_name_three_reasons_or_signers() -> None:
    bad = [
        replace(CUDNN, path=f"/m/{i}", integrity="modified", integrity_reason=f"r{i}")
        for i in range(4)
    ]
    out = rule("integrity", {}, host(*bad))
    assert "; /m/0: r0; /m/1: r1; /m/2: r2" in out.message and "r3" not in out.message
    foreign = [
        replace(CUDNN, path=f"/s/{i}", provenance="verified", provenance_signer=f"k{i} (x)")
        for i in range(4)
    ]
    out = rule("provenance", {"signers": ["nvidia"]}, host(*foreign))
    assert out.message.endswith(": /s/0 (k0 (x)); /s/1 (k1 (x)); /s/2 (k2 (x))")
    assert len(out.files) == 4


def test_a_globstar_spans_directories_but_not_what_follows_it() -> None:
    for path, allowed in (
        ("/opt/a/b/lib.so", True),
        ("/opt/lib.so", False),
        ("/opt/xlib.so", False),
    ):
        outcome = rule(
            "ownership",
            {"allow_unowned": ["/opt/**/lib.so"]},
            host(f(path, "cudnn", integrity="unowned")),
        )
        assert (outcome.status is Status.PASS) is allowed, path


def test_verdicts_and_labels_read_from_a_bom_compare_by_value() -> None:
    conflict = replace(CUDNN, provenance=fresh("conflict"), provenance_reason="b")
    assert rule("provenance", {}, host(conflict)).status is Status.FAIL
    staging = baseline_of("env", "staging", [host(CUDNN)])
    prod = host(OPS, labels=(("env", fresh("prod")),))
    outcome = rule(
        "parity", PARITY, replace(prod, files=(replace(OPS, version="9.3.0"),)), baseline=staging
    )
    assert outcome.status is Status.FAIL  # the rule applies to env=prod however the value was read


def test_only_cudart_is_the_runtime_libraries_pair_with() -> None:
    old = replace(CUDART, version="11.8.89", cuda_major=11)
    cublas = f(f"{LIB}/libcublas.so.12", "cublas", "12.4.5.8", 12)
    out = rule("cuda_pairing", {}, host(CUDNN, cublas, old))
    assert out.status is Status.FAIL and paths(out) == [CUDNN.path, cublas.path]


def test_a_driver_that_cannot_run_a_major_is_named() -> None:
    thirteen = f(f"{LIB}/libcublas.so.13", "cublas", "13.0.0", 13)
    out = rule("driver", {}, host(thirteen, driver_version="535.104.05", driver_cuda_max="12.2"))
    assert out.message == (
        f"driver 535.104.05 (supports CUDA <= 12.2) cannot run CUDA 13 ({thirteen.path})"
    )
    out = rule("driver", {}, host(thirteen, driver_cuda_max="12.6"))
    assert out.message.startswith("driver (L4T) (supports CUDA <= 12.6) cannot run CUDA 13")


def test_a_new_library_is_no_new_runtime() -> None:
    # nvJitLink 12.6 beside a CUDA 12.1 runtime on a 12.2 driver: the runtime is what counts
    files = (
        replace(CUDART, version="12.1.105"),
        f(f"{LIB}/libnvJitLink.so.12", "nvjitlink", "12.6.77", 12),
    )
    facts = host(*files, driver_version="535.104.05", driver_cuda_max="12.2")
    outcome = rule("driver", {"minor_version_compatibility": False}, facts)
    assert outcome.status is Status.PASS and "minor-version" not in outcome.message


def test_signers_judge_verified_files_and_the_count_is_of_verified_ones() -> None:
    signed = replace(CUDNN, provenance="verified", provenance_signer="nvidia (ecdsa (P-256))")
    odd = replace(CUDART, provenance="weird", provenance_signer="evil (x)")
    unknown = replace(OPS, provenance="unknown")
    files = (signed, odd, unknown, replace(unknown, path="/u"))
    out = rule("provenance", {"signers": ["nvidia"]}, host(*files))
    assert out.status is Status.PASS and out.message.endswith("; 1/4 verified")


def test_duplicates_look_past_driver_and_unversioned_files() -> None:
    other = replace(CUDART, path="/lib/libcudart.so.12.2.140", version="12.2.140")
    for first in (NVML, replace(CUDNN, version=None)):
        assert rule("duplicates", {}, host(first, CUDART, other)).status is Status.FAIL


def test_parity_compares_label_values_and_versions_by_value() -> None:
    qa = host(CUDNN, labels=(("env", "qa"),))  # sorts after prod: still another environment
    staging = FleetBaseline(fresh("env"), fresh("staging"), {"cudnn": frozenset({"9.1.0"})}, 1)
    assert rule("parity", PARITY, qa, baseline=staging).status is Status.NOT_APPLICABLE
    revision = host(replace(CUDNN, version="9.1.0-1"), labels=(("env", "prod"),))
    assert rule("parity", PARITY, revision, baseline=staging).status is Status.PASS


def test_a_loaded_file_read_from_a_bom_as_unowned_is_unowned() -> None:
    loaded = replace(CUDNN, integrity=fresh("unowned"), loaded_processes=1)
    outcome = rule("loaded", {"forbid": ["loaded-unowned"]}, host(loaded, runtime=True))
    assert outcome.status is Status.FAIL


@pytest.mark.parametrize(
    ("glob", "path", "allowed"),
    [
        ("/opt/a b/lib.so", "/opt/aXb/lib.so", False),  # characters sorting before '*'
        ("/opt/a$(b)!/lib.so", "/opt/aXXXXX/lib.so", False),
        ("/opt/a$(b)!/lib.so", "/opt/a$(b)!/lib.so", True),
        ("/opt/*.so", "/opt/libXso", False),  # what follows a '*' is kept
        ("/opt/*.so", "/opt/lib.so", True),
        ("/opt/" + "d" * 300 + "/*", "/opt/" + "d" * 300 + "/lib.so", True),  # a long glob
    ],
)
def test_glob_characters_that_are_literal(glob: str, path: str, allowed: bool) -> None:
    unowned = f(path, "cudnn", integrity="unowned")
    outcome = rule("ownership", {"allow_unowned": [glob]}, host(unowned))
    assert (outcome.status is Status.PASS) is allowed


def test_verdicts_read_from_a_bom_are_compared_by_value() -> None:
    unowned = replace(CUDNN, integrity=fresh("unowned"))
    assert rule("ownership", {}, host(unowned)).status is Status.FAIL
    verified = replace(CUDNN, provenance=fresh("verified"), provenance_signer="evil (x)")
    assert rule("provenance", {"signers": ["nvidia"]}, host(verified)).status is Status.FAIL
    good = replace(verified, provenance_signer="nvidia (x)")
    assert rule("provenance", {"require": "verified"}, host(good)).status is Status.PASS
    mixed = (
        replace(CUDNN, family=fresh("cudnn")),
        replace(OPS, family=fresh("cudnn"), version="9.3.0"),
    )
    assert rule("mixed_cudnn", {}, host(*mixed)).status is Status.FAIL


def test_runtimes_at_or_below_what_the_driver_runs() -> None:
    driver: dict[str, Any] = {"driver_version": "535.104.05", "driver_cuda_max": "12.2"}
    off = {"minor_version_compatibility": False}
    # CUDA 11 libraries on a CUDA 12.2 driver; a 12.2 runtime on it: nothing too new
    eleven = f(f"{LIB}/libcublas.so.11", "cublas", "11.11.3", 11)
    assert rule("driver", {}, host(eleven, **driver)).status is Status.PASS
    exact = replace(CUDART, version="12.2.140")
    assert rule("driver", off, host(exact, **driver)).status is Status.PASS
    # a cuBLAS newer than the driver is no runtime; one whose version equals the runtime's
    # is no user of it
    newer_blas = f(f"{LIB}/libcublas.so.12", "cublas", "12.6.4.1", 12)
    older = replace(CUDART, version="12.1.105")
    assert rule("driver", off, host(older, newer_blas, **driver)).status is Status.PASS
    runtime = replace(CUDART, version="12.6.77")
    twin = f(f"{LIB}/libcublas.so.12", "cublas", "12.6.77", 12)
    out = rule("driver", off, host(runtime, twin, **driver))
    assert out.status is Status.FAIL and paths(out) == [runtime.path]
    assert out.message == (
        "CUDA runtime 12.6.77 is newer than the CUDA 12.2 driver 535.104.05 supports "
        f"({runtime.path}); minor_version_compatibility is off"
    )


def test_driver_libraries_bring_no_cuda_major() -> None:
    libcuda = f(f"{LIB}/libcuda.so.1", "libcuda", "535.104.05", 13)
    out = rule("driver", {}, host(CUDART, libcuda, driver_version="535.104.05"))
    assert out.status is Status.PASS and out.message.endswith("runs CUDA 12")


def test_a_baseline_holds_normalized_versions_and_is_frozen() -> None:
    staging = baseline_of("env", "staging", [host(replace(CUDNN, version="9.1.0-1"))])
    assert staging.versions == {"cudnn": frozenset({"9.1.0"})}
    with pytest.raises(AttributeError):
        staging.assets = 3  # type: ignore[misc]
