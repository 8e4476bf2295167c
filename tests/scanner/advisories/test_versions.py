"""NVIDIA's version texts: one real text per shape (original and CPE slug), comparisons,
branch-aware evaluation and the vendor's anomalies sent to review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.advisories.versions import (
    ParsedVersion,
    compare_versions,
    evaluate,
    fix_gap,
    merge_reviews,
    nvidia_slug,
    parse_platform,
    parse_version_text,
    version_key,
)

#: ../shared/fixtures relative to the repository root (CI has it; a fresh clone does not).
PSIRT = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "nvidia-psirt"


def vers(p: ParsedVersion) -> list[str | None]:
    return [r.vers() for r in p.ranges]


# (text, platform, vers of each range, fields that must hold) — real texts from the bulletins
SHAPES: list[tuple[str, str | None, list[str | None], dict[str, Any]]] = [
    # driver branches: original text + platform, CPE slug, CSAF product id, bare branch prefix
    (
        "All driver versions prior to 535.274.02",
        "Linux(R535)",
        ["vers:generic/<535.274.02"],
        {"branch": "R535", "os": "linux", "scheme": "driver", "review": None},
    ),
    ("all_driver_versions_prior_to_580_95_05", None, ["vers:generic/<580.95.05"], {"branch": None}),
    (
        "linuxr535_geforce_all_driver_versions_prior_to_535_274_02",
        None,
        ["vers:generic/<535.274.02"],
        {"branch": "R535", "os": "linux", "product_line": "geforce", "form": "slug"},
    ),
    (
        "xenserver_vmware_vsphere_red_hat_enterprise_linux_kvm_ubuntur535_vgpu_16_virtual_gpu_manager_535_261_04all_versions_prior_to_and_including_vgpu_16_11",
        None,
        ["vers:generic/<=535.261.04"],
        {"branch": "R535", "os": None, "vgpu_release": "16.11", "review": None},
    ),
    (
        "citrix_hypervisor_vmware_vsphere_red_hat_enterprise_linux_kvmr470_vgpu_13_vgpu_software_virtual_gpu_manager_470_141_05all_versions_prior_to_and_including_vgpu_13_6",
        None,
        ["vers:generic/<=470.141.05"],
        {"branch": "R470", "product_line": "vgpu software virtual gpu manager"},
    ),
    (
        "r535_all_versions_prior_to_535_274_02",
        None,
        ["vers:generic/<535.274.02"],
        {"branch": "R535", "os": None},
    ),
    (
        "windowsr470_geforce_472_98",
        None,
        ["vers:generic/472.98"],
        {"branch": "R470", "os": "windows", "review": None},
    ),
    ("All driver versions", None, ["vers:generic/*"], {"scheme": "driver"}),
    ("All driver version prior to 570.172.08", None, ["vers:generic/<570.172.08"], {}),
    ("All drivers versions prior to 510.47.03", None, ["vers:generic/<510.47.03"], {}),
    # GPU architecture condition, also in the garbled word order of 5.2022
    (
        "All drivers versions prior to 472.98 for support of GeForce Kepler desktop",
        "Windows(R470)",
        ["vers:generic/<472.98"],
        {"conditions": [("gpu_architecture", "kepler-desktop", None)], "review": None},
    ),
    (
        "All driver versions prior 475.06 to for support of GeForce Kepler desktop",
        None,
        ["vers:generic/<475.06"],
        {"conditions": [("gpu_architecture", "kepler-desktop", None)]},
    ),
    (
        "all_driver_versions_prior_to_473_81_for_support_of_desktop_keplerseries_gpus",
        None,
        ["vers:generic/<473.81"],
        {"conditions": [("gpu_architecture", "kepler-desktop", None)]},
    ),
    # vGPU: the last affected driver of a vGPU release, inclusive; the fixed driver of one
    (
        "535.261.03(All versions prior to and including vGPU 16.11)",
        "Linux(R535 vGPU 16)",
        ["vers:generic/<=535.261.03"],
        {"vgpu_release": "16.11", "branch_line": "vgpu", "branch": "R535", "review": None},
    ),
    (
        "535_261_03all_versions_prior_to_and_including_vgpu_16_11",
        None,
        ["vers:generic/<=535.261.03"],
        {"vgpu_release": "16.11", "scheme": "driver"},
    ),
    (
        "550_54_15all_versions_up_to_and_including_vgpu17_1",
        None,
        ["vers:generic/<=550.54.15"],
        {"vgpu_release": "17.1"},
    ),
    (
        "570_195_03vgpu_18_5",
        "Linux(R570 vGPU 18)",
        ["vers:generic/570.195.03"],
        {"vgpu_release": "18.5", "review": None},
    ),
    # cloud gaming and dated releases
    (
        "495.50(All versions prior to and including the November 2021 Cloud Gaming Release)",
        None,
        ["vers:generic/<=495.50"],
        {"release": "November 2021 Cloud Gaming"},
    ),
    (
        "580_95_05september_2025_release",
        "Linux(R580 Gaming)",
        ["vers:generic/580.95.05"],
        {"release": "September 2025", "branch_line": "gaming", "review": None},
    ),
    (
        "All versions prior to 515.65.01(All versions prior to the August 2022 release)",
        None,
        ["vers:generic/<515.65.01"],
        {"release": "August 2022", "review": None},
    ),
    (
        "545_37_02all_versions_up_to_and_including_the_january_2024_release",
        None,
        ["vers:generic/<=545.37.02"],
        {"release": "January 2024"},
    ),
    # CUDA Toolkit and its "Update N" (= third component)
    (
        "All versions prior to CUDA Toolkit 12.9 Update 1",
        None,
        ["vers:generic/<12.9.1"],
        {"product_line": "cuda toolkit", "scheme": "cuda_toolkit", "review": None},
    ),
    (
        "all_versions_prior_to_cuda_toolkit_12_9_update_1",
        None,
        ["vers:generic/<12.9.1"],
        {"product_line": "cuda toolkit"},
    ),
    (
        "All versions up to and including CUDA Toolkit 12.5U1",
        None,
        ["vers:generic/<=12.5.1"],
        {"scheme": "cuda_toolkit"},
    ),
    ("cuda_toolkit_v12_4u1", None, ["vers:generic/12.4.1"], {"scheme": "cuda_toolkit"}),
    ("11_6_update_2", None, ["vers:generic/11.6.2"], {}),
    ("All versions prior to 12.0 Update 1", None, ["vers:generic/<12.0.1"], {}),
    # Container Toolkit / GPU Operator conditions
    (
        "All versions up to and including 1.17.7 (CDI mode only for versions prior to 1.17.5)",
        None,
        ["vers:generic/<=1.17.7"],
        {"conditions": [("cdi_mode", None, "1.17.5")], "review": None},
    ),
    (
        "all_versions_up_to_and_including_1_17_7_cdi_mode_only_for_versions_prior_to_1_17_5",
        None,
        ["vers:generic/<=1.17.7"],
        {"conditions": [("cdi_mode", None, "1.17.5")]},
    ),
    (
        "All versions up to and including 0.12.1 (only when CDI is enabled)",
        None,
        ["vers:generic/<=0.12.1"],
        {"conditions": [("cdi_mode", None, None)]},
    ),
    (
        "all_versions_up_to_and_including_0_17_2_only_when_deviceliststrategy_is_cdiannotations_andor_cdicri",
        None,
        ["vers:generic/<=0.17.2"],
        {"conditions": [("device_list_strategy", "cdi-annotations|cdi-cri", None)]},
    ),
    ("All versions up to and including v1.16.2", None, ["vers:generic/<=1.16.2"], {}),
    # series and LTS streams: a series bound is exact in numeric order ([2.5, 2.6))
    ("All 2.5 versions prior to 2.5.4", None, ["vers:generic/>=2.5|<2.5.4"], {}),
    ("All 32.x versions prior to 32.7.1", None, ["vers:generic/>=32|<32.7.1"], {}),
    ("all_2_10_versions", None, ["vers:generic/>=2.10|<2.11"], {}),
    (
        "1.6.x LTS prior to 1.6.6-1 LTS",
        None,
        ["vers:generic/>=1.6|<1.6.6.1"],
        {"conditions": [("release_stream", "lts", None)]},
    ),
    # lists, open-ended bounds, spans
    (
        "1.6.x, 1.7.x, 1.8.x",
        None,
        ["vers:generic/>=1.6|<1.7", "vers:generic/>=1.7|<1.8", "vers:generic/>=1.8|<1.9"],
        {},
    ),
    (
        "1_6_x_1_7_x_1_8_x",
        None,
        ["vers:generic/>=1.6|<1.7", "vers:generic/>=1.7|<1.8", "vers:generic/>=1.8|<1.9"],
        {},
    ),
    ("Versions 35.1 and 34.1.1", None, ["vers:generic/35.1", "vers:generic/34.1.1"], {}),
    ("0_13_1_and_0_12_3", None, ["vers:generic/0.13.1", "vers:generic/0.12.3"], {}),
    ("35.6.2 and earlier", None, ["vers:generic/<=35.6.2"], {}),
    ("0.2 and prior versions", None, ["vers:generic/<=0.2"], {}),
    ("32_7_2_and_prior_releases", None, ["vers:generic/<=32.7.2"], {}),
    ("36_4_6_and_newer", None, ["vers:generic/>=36.4.6"], {}),
    ("12_28_2302_or_later", None, ["vers:generic/>=12.28.2302"], {}),
    (
        "Cumulus Linux 5.12, 5.11, 5.10, 5.9 and older",
        None,
        ["vers:generic/<=5.12"],
        {"product_line": "cumulus linux"},
    ),
    ("20.10 to 24.03", None, ["vers:generic/>=20.10|<=24.03"], {}),
    ("v0_1_x__v0_9_x", None, ["vers:generic/>=0.1|<0.10"], {}),
    ("Bright Cluster Manager 9.0-9.2", None, ["vers:generic/>=9.0|<=9.2"], {}),
    ("All versions after 18.24.1000", None, ["vers:generic/>18.24.1000"], {}),
    ("All versions before release 25.07", None, ["vers:generic/<25.07"], {}),
    # products named inside the text
    (
        "All versions prior to nvJPEG 13.0.0",
        None,
        ["vers:generic/<13.0.0"],
        {"product_line": "nvjpeg"},
    ),
    (
        "All versions prior to JP5.x: 35.6.2",
        None,
        ["vers:generic/<35.6.2"],
        {"product_line": "jp5.x"},
    ),
    (
        "All BMC firmware versions prior to 00.19.07",
        None,
        ["vers:generic/<00.19.07"],
        {"product_line": "bmc firmware"},
    ),
    (
        "Shield Experience prior to SE 9.0",
        None,
        ["vers:generic/<9.0"],
        {"product_line": "shield experience"},
    ),
    (
        "GB300 0.8 dev drop",
        None,
        ["vers:generic/0.8"],
        {"product_line": "gb300", "notes": ["dev drop"]},
    ),
    (
        "All versions prior to 11.0.2.337 (prod2 hotfix)",
        None,
        ["vers:generic/<11.0.2.337"],
        {"notes": ["prod2 hotfix"]},
    ),
    # fixes named by commit
    (
        "All versions that do not include code commit 7f53666",
        None,
        [],
        {"commit": "7f53666", "commit_fixed": False},
    ),
    (
        "any_code_branch_that_includes_commit_5dd11f4",
        None,
        [],
        {"commit": "5dd11f4", "commit_fixed": True},
    ),
]


@pytest.mark.parametrize(("text", "platform", "expected", "fields"), SHAPES)
def test_each_shape_parses(
    text: str, platform: str | None, expected: list[str], fields: dict[str, Any]
) -> None:
    p = parse_version_text(text, platform=platform)
    assert p.parsed, p.reason
    assert vers(p) == expected
    for name, want in fields.items():
        got = getattr(p, name)
        if name == "conditions":
            got = [(c.name, c.value, c.applies_below) for c in got]
        elif name == "notes":
            got = list(got)
        assert got == want, name


REVIEW: list[tuple[str, str | None, str]] = [
    # the vGPU 16 (R535) line fixed by a 575 driver (bulletin 5703)
    ("575_274_02vgpu_16_12", "Linux(R535 vGPU 16)", "575.274.02 is not on branch R535"),
    (
        "linuxr535_vgpu_16_guest_driver_575_274_02vgpu_16_12",
        None,
        "575.274.02 is not on branch R535",
    ),
    # the platform names the wrong branch for its vGPU line
    ("573_55vgpu_18_4", "Azure Stack HCI(R535 vGPU 18)", "573.55 is not on branch R535"),
    ("474_82vgpu_13_10", "Windows(R570 vGPU 13)", "474.82 is not on branch R570"),
    # "prior to" the driver, "prior to and including" the release: which one?
    (
        "All versions prior to 525.89.02"
        "(All versions prior to and including February 2023 release)",
        None,
        "disagree on inclusivity",
    ),
    (
        "539.28(All versions prior to and including vGPU 16.10)"
        "(All versions prior to and including vGPU 18.3)",
        "Windows(R535 vGPU 16)",
        "two vGPU releases named",
    ),
    ("All versions up to CUDA Toolkit 12.8", None, "'up to' without 'and including'"),
    ("All versions prior to 0.13.1 and 0.12.3", None, "several fixed versions"),
    ("All versions prior to OTA0", None, "not a comparable version"),
    ("All versions prior to xx.32.1900", None, "not a comparable version"),
]


@pytest.mark.parametrize(("text", "platform", "reason"), REVIEW)
def test_anomalies_parse_for_review(text: str, platform: str | None, reason: str) -> None:
    p = parse_version_text(text, platform=platform)
    assert p.parsed
    assert p.review is not None and reason in p.review


def test_a_fix_on_its_own_branch_needs_no_review() -> None:
    # the same shape as the 575.274.02 anomaly, on the branch it belongs to
    assert parse_version_text("535_274_02vgpu_16_12", platform="Linux(R535 vGPU 16)").review is None
    # Windows R470 ships 472.98, R418 vGPU 8 ships 427.60: the span, not the leading number
    assert parse_version_text("472_98", platform="Windows(R470)").review is None
    assert (
        parse_version_text(
            "427.60(All versions prior to and including vGPU 8.9)", platform="Windows(R418)"
        ).review
        is None
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("contact_your_nvidia_customer_program_manager", "no rule"),
        ("available_the_week_of_june_29_2023", "a date"),
        ("HGX-22.10-1-rc57 (1.3.0/1.3.1)", "no rule"),
        ("Main branch prior to 0.5.0 release and 0.4.1", "no rule"),
        ("Linux(R580)", "a platform"),
        # slugs that dropped the commas between versions: no boundary left to read
        ("bright_cluster_manager_9_022_9_119_9_217", "the slug lost"),
        ("cumulus_linux_5_12_5_11_5_10_5_9_and_older", "the slug lost"),
        ("hgx22_101rc57_1_3_01_3_1", "no rule"),
        ("", "empty"),
        ("   ", "empty"),
        ("9" * 500, "longer than"),
    ],
)
def test_unparsed_texts_say_why(text: str, reason: str) -> None:
    p = parse_version_text(text)
    assert not p.parsed and p.ranges == ()
    assert p.reason is not None and reason in p.reason


def test_the_cuda_toolkit_gap_goes_to_review() -> None:
    # bulletin 5548: affected "prior to v12.4", fixed in 12.4 Update 1 — 12.4 GA has no status
    affected = parse_version_text("All versions prior to CUDA Toolkit v12.4")
    fixed = parse_version_text("cuda_toolkit_v12_4u1")
    reason = fix_gap(affected, fixed)
    assert reason is not None and "has no status" in reason
    assert merge_reviews(affected, reason).review == reason
    # the normal pairs leave nothing to review
    assert (
        fix_gap(
            parse_version_text("All versions prior to CUDA Toolkit 12.9 Update 1"),
            parse_version_text("cuda_toolkit_12_9_update_1"),
        )
        is None
    )
    assert (
        fix_gap(
            parse_version_text("All versions up to and including CUDA Toolkit 12.6U1"),
            parse_version_text("cuda_toolkit_12_6u2"),
        )
        is None
    )
    # a fix inside its own affected range is the vendor's error too
    assert (
        fix_gap(
            parse_version_text("All versions up to and including 1.17.7"),
            parse_version_text("1_17_4"),
        )
        is not None
    )


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ("12.4 Update 1", "12.4.1", 0),
        ("12.4U1", "12.4.1", 0),
        ("CUDA Toolkit 12.4 Update 1", "12.4", 1),
        ("12.9", "12.9.0", 0),
        ("535.274.02", "535.274.2", 0),
        ("535.261.03", "535.274.02", -1),
        ("1.17.7", "1.17.5", 1),
        ("1.17.10", "1.17.9", 1),
        ("v1.16.2", "1.16.2", 0),
        ("1.6.6-1", "1.6.6", 1),
        ("ota0", "1.0", None),
        ("r2.0.0rc0", "2.0.0", None),
        ("12.4.1 Update 1", "12.4.1", None),
        ("1" * 40, "1", None),
    ],
)
def test_compare_versions(a: str, b: str, want: int | None) -> None:
    assert compare_versions(a, b) == want


def test_version_key_folds_the_update_into_the_third_part() -> None:
    assert version_key("12.9 Update 1") == (12, 9, 1)
    assert version_key("12 Update 1") == (12, 0, 1)
    assert version_key("garbage") is None


def test_evaluation_is_branch_aware() -> None:
    r535 = parse_version_text("All driver versions prior to 535.274.02", platform="Linux(R535)")
    assert evaluate(r535, "535.261.03", branch="R535") == "in_range"
    assert evaluate(r535, "535.274.02", branch="535") == "out_of_range"
    # a fix on R535 says nothing about the R580 driver, even though 580 > 535 numerically
    assert evaluate(r535, "580.95.05", branch="R580") == "other_branch"
    # and nothing at all when the installed branch is unknown: never read from "580."
    assert evaluate(r535, "580.95.05") == "unknown"
    r580 = parse_version_text("all_driver_versions_prior_to_580_95_05", platform="Linux(R580)")
    assert evaluate(r580, "535.261.03", branch="R535") == "other_branch"
    # Windows R470 ships 472.98: the branch comes from the asset, not the leading number
    win = parse_version_text("All driver versions prior to 474.14", platform="Windows(R470)")
    assert evaluate(win, "472.98", branch="R470") == "in_range"
    assert evaluate(win, "474.14", branch="R470") == "out_of_range"


def test_evaluation_of_unscoped_and_opaque_texts() -> None:
    kit = parse_version_text("All versions prior to CUDA Toolkit 12.9 Update 1")
    assert evaluate(kit, "12.9") == "in_range"
    assert evaluate(kit, "12.9.1") == "out_of_range"
    assert evaluate(kit, "12.9 Update 1") == "out_of_range"
    assert evaluate(parse_version_text("All versions prior to OTA0"), "1.0") == "review"
    # a text under review is never decided, even where its range would say "in range"
    anomaly = parse_version_text("575_274_02vgpu_16_12", platform="Linux(R535 vGPU 16)")
    assert evaluate(anomaly, "575.274.02", branch="R535") == "review"
    assert evaluate(parse_version_text("All versions up to CUDA Toolkit 12.8"), "12.7") == "review"
    assert (
        evaluate(parse_version_text("contact_your_nvidia_customer_program_manager"), "1")
        == "unknown"
    )
    commit = parse_version_text("All versions that do not include commit 5dd11f4")
    assert evaluate(commit, "1.0") == "unknown"
    series = parse_version_text("All 2.5 versions prior to 2.5.4")
    assert evaluate(series, "2.5.3") == "in_range"
    assert evaluate(series, "2.4.9") == "out_of_range"


@pytest.mark.parametrize(
    ("text", "os", "branch", "line", "major", "extra"),
    [
        ("Linux(R580)", "linux", "R580", None, None, None),
        ("Windows(R535 vGPU 16)", "windows", "R535", "vgpu", "16", None),
        ("Linux(R580 Gaming)", "linux", "R580", "gaming", None, None),
        ("Windows(Gaming)", "windows", None, "gaming", None, None),
        (
            "XenServer, VMware vSphere, Red Hat Enterprise Linux KVM, Ubuntu(R570 vGPU 18)",
            None,
            "R570",
            "vgpu",
            "18",
            None,
        ),
        ("Linux(DOCA 2.9)", "linux", None, None, None, "DOCA 2.9"),
        ("Windows, Linux", None, None, None, None, None),
        ("Windows 10 and 11(R470)", "windows", "R470", None, None, None),
        ("Linux x86_64", "linux", None, None, None, None),
    ],
)
def test_parse_platform(
    text: str,
    os: str | None,
    branch: str | None,
    line: str | None,
    major: str | None,
    extra: str | None,
) -> None:
    p = parse_platform(text)
    assert (p.os, p.branch, p.branch_line, p.vgpu_major, p.extra) == (
        os,
        branch,
        line,
        major,
        extra,
    )


def test_platform_and_text_disagreeing_on_the_branch_is_reviewed() -> None:
    p = parse_version_text("linuxr535_geforce_535_274_02", platform="Linux(R580)")
    assert p.review is not None and "the text says R535, the platform R580" in p.review


@pytest.mark.parametrize(
    ("original", "slug"),
    [
        (
            "All versions prior to CUDA Toolkit 12.9 Update 1",
            "all_versions_prior_to_cuda_toolkit_12_9_update_1",
        ),
        (
            "418.226.00(All versions prior to and including vGPU 8.9)",
            "418_226_00all_versions_prior_to_and_including_vgpu_8_9",
        ),
        (
            "All versions up to and including 1.17.7 (CDI mode only for versions prior to 1.17.5)",
            "all_versions_up_to_and_including_1_17_7_cdi_mode_only_for_versions_prior_to_1_17_5",
        ),
    ],
)
def test_nvidia_slug_pairs_a_cve_record_text_with_its_csaf_slug(original: str, slug: str) -> None:
    assert nvidia_slug(original) == slug
    # both forms parse to the same ranges
    assert vers(parse_version_text(original)) == vers(parse_version_text(slug))


def test_as_dict_is_json_with_stable_keys() -> None:
    d = parse_version_text(
        "all_versions_up_to_and_including_1_17_7_cdi_mode_only_for_versions_prior_to_1_17_5"
    ).as_dict()
    assert json.loads(json.dumps(d)) == d
    assert sorted(d) == sorted(
        [
            "text", "parsed", "form", "reason", "review", "ranges", "scheme", "product_line",
            "os", "branch", "branch_line", "vgpu_release", "release", "conditions", "commit",
            "notes",
        ]
    )  # fmt: skip
    assert d["ranges"] == [
        {
            "lower": None,
            "upper": {"version": "1.17.7", "key": [1, 17, 7], "inclusive": True},
            "vers": "vers:generic/<=1.17.7",
        }
    ]
    assert d["conditions"] == [{"name": "cdi_mode", "value": None, "applies_below": "1.17.5"}]
    unparsed = parse_version_text("contact_your_nvidia_customer_program_manager").as_dict()
    assert sorted(unparsed) == sorted(d) and unparsed["parsed"] is False


_SLUG_ALPHABET = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", max_size=80)
_WORDS = st.lists(
    st.sampled_from(
        [
            "All", "versions", "driver", "prior", "to", "and", "including", "up", "vGPU",
            "Update", "CUDA", "Toolkit", "(", ")", ",", "-", "x", "LTS", "1.2", "535.274.02",
            "12.4U1", "only", "when", "CDI", "R535", "Linux(R580)", "later", "earlier",
            "through", "commit", "7f53666", "November", "2021", "release", "xx.32.1900",
        ]
    ),
    max_size=14,
).map(" ".join)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    text=st.one_of(st.text(max_size=120), _SLUG_ALPHABET, _WORDS),
    platform=st.none() | st.text(max_size=40),
)
def test_any_text_parses_or_says_why_and_never_raises(text: str, platform: str | None) -> None:
    p = parse_version_text(text, platform=platform)
    assert isinstance(p.parsed, bool)
    assert p.parsed or p.reason
    json.dumps(p.as_dict())
    for r in p.ranges:
        assert r.contains("535.274.02") in (True, False, None)


def test_the_shared_bulletins_parse_at_least_98_percent() -> None:
    if not PSIRT.is_dir():
        # A user's clone has no ../shared; CI always has it, so there its absence is a failure.
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")
    from bench.advisory_versions import collect

    slugs, texts = collect(PSIRT)
    distinct = set(slugs) | set(texts)
    parsed = sum(parse_version_text(t).parsed for t in distinct)
    assert len(distinct) > 1000
    assert parsed / len(distinct) >= 0.98
