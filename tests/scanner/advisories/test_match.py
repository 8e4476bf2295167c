"""The matcher against NVIDIA's real bulletins (shared/fixtures/nvidia-psirt): exact statuses
for specific CVEs and installed versions, as each bulletin states them.

Versions used: R535 drivers 535.129.03 (vulnerable to the October 2025 bulletin) and
535.274.02 (its R535 fix), R580 580.95.05 (its R580 fix) and 580.82.07, R470 470.256.02 (a
branch the 2025 bulletins no longer list); CUDA 11.8.0 (cuobjdump 11.8.86), 12.4.1; Container
Toolkit 1.17.3, 1.17.4, 1.17.8.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.advisories.feed import complement, read_document
from scanner.advisories.match import (
    AssetFacts,
    Installed,
    StatusEntry,
    match,
    matching_data,
    product_key,
    worst,
)
from tests.scanner.advisories.documents import PSIRT


@pytest.fixture(autouse=True)
def _need_psirt() -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")


@cache
def _statuses(bulletin: str, cve: str) -> tuple[StatusEntry, ...]:
    folder = PSIRT / bulletin
    docs = [read_document(p.read_bytes()) for p in sorted(Path(folder).glob("*.json"))]
    records = [d for d in docs if d.format == "cve_record"]
    (csaf,) = [complement(d, records) for d in docs if d.format == "csaf"]
    (vuln,) = [v for v in csaf.vulnerabilities if v.id == cve]
    return tuple(
        StatusEntry(
            product=s.product,
            status=s.status,
            version_text=s.version_text,
            parsed=s.parsed,
            platform=s.platform,
            justification=s.justification,
        )
        for s in vuln.statuses
    )


def _driver(version: str, branch: str | None = None, **facts: str) -> AssetFacts:
    """A host's driver; the host is bare metal (``vgpu_guest`` false) unless ``facts`` say."""
    b = branch if branch is not None else "R" + version.split(".")[0]
    return AssetFacts(
        products=(
            Installed(
                "driver", version, branch=b, paths=("/usr/lib/x86_64-linux-gnu/libcuda.so.1",)
            ),
        ),
        libraries=(("libcuda", version),),
        facts={"vgpu_guest": "false", **facts},
    )


def _one(bulletin: str, cve: str, asset: AssetFacts):  # type: ignore[no-untyped-def]
    found = match(cve, _statuses(bulletin, cve), asset)
    assert len(found) == 1, found
    return found[0]


# -- the driver: branch-aware (2025/5703, CVE-2025-23280: R580 < 580.95.05, R570 <
# 570.195.03, R535 < 535.274.02) --------------------------------------------------------------


def test_r535_driver_below_its_fix_is_affected() -> None:
    f = _one("2025/5703", "CVE-2025-23280", _driver("535.129.03"))
    assert (f.status, f.product, f.installed) == ("affected", "driver", "535.129.03")
    assert f.affected_text == "All driver versions prior to 535.274.02"
    assert f.fixed_in == "535.274.02"
    assert f.review is None and not f.inferred
    assert f.evidence["range"] == ["vers:generic/<535.274.02"]
    assert f.evidence["paths"] == ["/usr/lib/x86_64-linux-gnu/libcuda.so.1"]


def test_r535_driver_at_its_fix_is_fixed_though_below_the_r580_fix() -> None:
    f = _one("2025/5703", "CVE-2025-23280", _driver("535.274.02"))
    assert (f.status, f.fixed_in) == ("fixed", "535.274.02")


def test_r580_driver_is_judged_on_r580_only() -> None:
    assert _one("2025/5703", "CVE-2025-23280", _driver("580.95.05")).status == "fixed"
    f = _one("2025/5703", "CVE-2025-23280", _driver("580.82.07"))
    assert (f.status, f.fixed_in) == ("affected", "580.95.05")


def test_an_older_branch_not_listed_is_affected_inferred() -> None:
    f = _one("2025/5703", "CVE-2025-23280", _driver("470.256.02"))
    assert (f.status, f.inferred) == ("affected", True)
    assert f.evidence["branches_listed"] == ["R535", "R570", "R580"]


def test_a_driver_of_unknown_branch_goes_to_review() -> None:
    f = _one("2025/5703", "CVE-2025-23280", _driver("535.129.03", branch=""))
    assert f.status == "affected" and f.review is not None


def test_vgpu_lines_do_not_judge_a_datacenter_driver() -> None:
    # the R535 vGPU guest line's fix is 575.274.02 (the vendor's anomaly): not this driver's
    statuses = _statuses("2025/5703", "CVE-2025-23280")
    assert any(
        s.product == "Guest driver" and s.version_text and "575.274.02" in s.version_text
        for s in statuses
    )
    assert product_key("Guest driver") == "vgpu-guest-driver"
    assert (
        match(
            "CVE-2025-23280",
            [s for s in statuses if s.product == "Guest driver"],
            _driver("535.129.03"),
        )
        == []
    )


# -- the CUDA Toolkit: component-aware -------------------------------------------------------


def _toolkit_image(cuobjdump: bool, release: str = "11.8.0") -> AssetFacts:
    products = [Installed("cuda-toolkit", release, paths=("/usr/local/cuda-11.8",))]
    if cuobjdump:
        products.append(
            Installed(
                "cuobjdump",
                "11.8.86",
                toolkit=release,
                paths=("/usr/local/cuda-11.8/bin/cuobjdump",),
            )
        )
    return AssetFacts(products=tuple(products), libraries=(("cudart", "11.8.89"),))


CUDART_ONLY = AssetFacts(libraries=(("cudart", "11.8.89"), ("cublas", "11.11.3.6")))
CUDNN_ONLY = AssetFacts(libraries=(("cudnn", "8.9.7"),))


def test_cuobjdump_cve_affects_a_toolkit_with_cuobjdump() -> None:
    # 2023/5446 CVE-2023-0193: cuobjdump, all versions prior to 12.1
    f = _one("2023/5446", "CVE-2023-0193", _toolkit_image(cuobjdump=True))
    assert (f.status, f.product, f.component) == ("affected", "cuda-toolkit", "cuobjdump")
    assert f.affected_text == "All versions prior to 12.1"
    assert f.fixed_in == "12.1"
    assert f.evidence["paths"] == ["/usr/local/cuda-11.8/bin/cuobjdump"]
    assert f.evidence["compared_as"] == "11.8.0"


def test_cuobjdump_cve_fixed_in_11_8_is_fixed_for_11_8() -> None:
    # 2022/5373 CVE-2022-34667: all versions prior to 11.8, fixed in 11.8
    f = _one("2022/5373", "CVE-2022-34667", _toolkit_image(cuobjdump=True))
    assert (f.status, f.fixed_in) == ("fixed", "11.8")


def test_cuobjdump_cve_on_a_cudart_only_image_is_component_not_present() -> None:
    f = _one("2023/5446", "CVE-2023-0193", CUDART_ONLY)
    assert (f.status, f.justification) == ("not_affected", "component_not_present")
    assert f.component == "cuobjdump"
    assert f.evidence["toolkit_libraries"] == ["cublas 11.11.3.6", "cudart 11.8.89"]


def test_library_families_without_versions_are_named_alone() -> None:
    """The service passes a toolkit library's family alone (its version decides nothing): the
    evidence names it, with no "?" that would read as a version the scan missed."""
    families = AssetFacts(libraries=(("cudart", None), ("nvjpeg", None)))
    f = _one("2023/5446", "CVE-2023-0193", families)
    assert f.evidence["toolkit_libraries"] == ["cudart", "nvjpeg"]


def test_a_toolkit_without_the_component_is_component_not_present() -> None:
    f = _one("2024/5577", "CVE-2024-0123", _toolkit_image(cuobjdump=True))  # nvdisasm
    assert (f.status, f.justification, f.component) == (
        "not_affected",
        "component_not_present",
        "nvdisasm",
    )


def test_a_cudnn_only_image_has_no_finding_at_all() -> None:
    for bulletin, cve in (
        ("2023/5446", "CVE-2023-0193"),
        ("2025/5703", "CVE-2025-23280"),
        ("2025/5659", "CVE-2025-23266"),
        ("2025/5661", "CVE-2025-23272"),
    ):
        assert match(cve, _statuses(bulletin, cve), CUDNN_ONLY) == []


def test_the_component_version_maps_to_its_release_through_the_table() -> None:
    # cuobjdump 11.8.86 found without version.json: NVIDIA's redistrib_11.8.0.json ships it
    asset = AssetFacts(products=(Installed("cuobjdump", "11.8.86"),))
    f = _one("2023/5446", "CVE-2023-0193", asset)
    assert (f.status, f.installed) == ("affected", "11.8.86 (toolkit 11.8.0)")
    unknown = AssetFacts(products=(Installed("cuobjdump", "11.7.50"),))
    g = _one("2023/5446", "CVE-2023-0193", unknown)
    assert g.status == "affected" and g.review is not None and "no CUDA Toolkit" in g.review


def test_12_4_ga_has_no_status_in_5517_and_goes_to_review() -> None:
    # CVE-2024-0072: "prior to CUDA Toolkit v12.4", fixed in "v12.4U1": 12.4 GA is neither
    def at(release: str):  # type: ignore[no-untyped-def]
        asset = AssetFacts(products=(Installed("cuobjdump", "x", toolkit=release),))
        return _one("2024/5517", "CVE-2024-0072", asset)

    assert at("11.8.0").status == "affected" and at("11.8.0").review is None
    ga = at("12.4.0")
    assert ga.status == "affected" and ga.review is not None and "review" in ga.review
    assert at("12.4.1").status == "fixed"


def test_update_forms_compare_as_releases() -> None:
    # 2024/5548 CVE-2024-0102 (nvdisasm): up to and including 12.5U1, fixed in 12.6
    def at(release: str) -> str:
        asset = AssetFacts(products=(Installed("nvdisasm", "x", toolkit=release),))
        return _one("2024/5548", "CVE-2024-0102", asset).status

    assert (at("12.5.1"), at("12.5.0"), at("12.6.0")) == ("affected", "affected", "fixed")


def test_nvjpeg_of_a_toolkit_is_judged_by_the_toolkit_statement() -> None:
    # 2025/5661 CVE-2025-23272: toolkit prior to 12.9 Update 1 (and nvJPEG prior to 25.03)
    asset = AssetFacts(
        products=(Installed("nvjpeg", "12.3.1.117", toolkit="12.4.1"),),
        libraries=(("nvjpeg", "12.3.1.117"),),
    )
    f = _one("2025/5661", "CVE-2025-23272", asset)
    assert (f.status, f.component, f.fixed_in) == (
        "affected",
        "nvjpeg",
        "CUDA Toolkit 12.9 Update 1",
    )


def test_nvjpeg_known_by_its_build_line_is_judged_on_the_line() -> None:
    """An unowned libnvjpeg.so.11 whose build paths name toolkit r11.8: every 11.8 update is
    prior to 13.0 (CVE-2025-23273) and to 12.9 Update 1 (CVE-2025-23272): affected, decided."""
    asset = AssetFacts(products=(Installed("nvjpeg", None, line="11.8"),))
    for cve in ("CVE-2025-23273", "CVE-2025-23272"):
        f = _one("2025/5661", cve, asset)
        assert (f.status, f.component, f.installed, f.review) == (
            "affected",
            "nvjpeg",
            "11.8 (update unknown)",
            None,
        )
    # without the line, the same copy goes to review (affected until a person decides)
    f = _one("2025/5661", "CVE-2025-23273", AssetFacts(products=(Installed("nvjpeg", None),)))
    assert f.status == "affected" and f.review is not None


# -- the Container Toolkit: conditions --------------------------------------------------------


def _ctk(version: str, **facts: str) -> AssetFacts:
    return AssetFacts(
        products=(Installed("container-toolkit", version, paths=("/usr/bin/nvidia-ctk",)),),
        facts=facts,
    )


def test_container_toolkit_cdi_condition_only_below_1_17_5() -> None:
    # 2025/5659 CVE-2025-23266: up to and including 1.17.7 (CDI mode only for < 1.17.5), and
    # "does not affect systems where crun is used as the low-level runtime" (no node fact)
    f = _one("2025/5659", "CVE-2025-23266", _ctk("1.17.3"))
    assert (f.status, f.conditions_unevaluated) == ("affected", ("cdi_mode", "crun_runtime"))
    later = _one("2025/5659", "CVE-2025-23266", _ctk("1.17.6"))
    assert later.conditions_unevaluated == ("crun_runtime",)
    assert _one("2025/5659", "CVE-2025-23266", _ctk("1.17.8")).status == "fixed"
    off = _one("2025/5659", "CVE-2025-23266", _ctk("1.17.3", cdi_mode="false"))
    assert (off.status, off.justification) == (
        "not_affected",
        "vulnerable_code_not_in_execute_path",
    )


def test_condition_from_the_description_is_data() -> None:
    # 2024/5582 CVE-2024-0132: "This does not impact use cases where CDI is used."
    f = _one("2024/5582", "CVE-2024-0132", _ctk("1.16.1"))
    assert (f.status, f.conditions_unevaluated) == ("affected", ("cdi_mode",))
    assert _one("2024/5582", "CVE-2024-0132", _ctk("1.16.1", cdi_mode="true")).status == (
        "not_affected"
    )
    assert _one("2024/5582", "CVE-2024-0132", _ctk("1.16.2")).status == "fixed"


def test_cdi_mode_decides_cve_2024_0132_with_the_condition_as_evidence() -> None:
    # a host whose toolkit runs in CDI mode only: "does not impact use cases where CDI is used"
    f = _one("2024/5582", "CVE-2024-0132", _ctk("1.16.1", cdi_mode="true"))
    assert (f.status, f.justification, f.conditions_unevaluated) == (
        "not_affected",
        "vulnerable_code_not_in_execute_path",
        (),
    )
    (cond,) = f.evidence["conditions"]
    assert (cond["name"], cond["value"], cond["asset"]) == ("cdi_mode", "false", "true")
    assert cond["source"] == "This does not impact use cases where CDI is used."
    # undecided: affected, named; never under_investigation
    g = _one("2024/5582", "CVE-2024-0132", _ctk("1.16.1"))
    assert (g.status, g.conditions_unevaluated) == ("affected", ("cdi_mode",))
    assert g.evidence["conditions"][0]["asset"] is None
    # "auto" mode takes either path per container: the legacy one keeps it affected, decided
    h = _one("2024/5582", "CVE-2024-0132", _ctk("1.16.1", cdi_mode="false|true"))
    assert (h.status, h.conditions_unevaluated) == ("affected", ())


# -- the GPU Operator: its own version lines (2024/5582, 5585, 2025/5599) ----------------------


def _operator(version: str) -> AssetFacts:
    return AssetFacts(products=(Installed("gpu-operator", version),))


@pytest.mark.parametrize(
    ("bulletin", "cve", "version", "status"),
    [
        # 5582: up to and including 24.6.1, fixed in v24.6.2
        ("2024/5582", "CVE-2024-0132", "24.6.1", "affected"),
        ("2024/5582", "CVE-2024-0132", "23.9.2", "affected"),
        ("2024/5582", "CVE-2024-0132", "24.6.2", "fixed"),
        # 5585: up to and including 24.6.2, fixed in 24.9.0
        ("2024/5585", "CVE-2024-0134", "24.6.2", "affected"),
        ("2024/5585", "CVE-2024-0134", "24.9.0", "fixed"),
        # 5599: up to and including 24.9.0, fixed in 24.9.1
        ("2025/5599", "CVE-2024-0135", "24.9.0", "affected"),
        ("2025/5599", "CVE-2024-0137", "24.9.1", "fixed"),
        ("2025/5599", "CVE-2024-0137", "25.3.0", "fixed"),
    ],
)
def test_the_gpu_operator_is_judged_on_its_own_versions(
    bulletin: str, cve: str, version: str, status: str
) -> None:
    f = _one(bulletin, cve, _operator(version))
    assert (f.product, f.status) == ("gpu-operator", status), f
    # the toolkit's statements of the same CVEs never judge the operator's version
    assert f.installed == version


def test_an_operator_of_unknown_version_is_affected_for_review() -> None:
    f = _one("2024/5582", "CVE-2024-0132", AssetFacts(products=(Installed("gpu-operator", None),)))
    assert f.status == "affected" and f.review is not None


def test_ldconfig_in_the_container_decides_cve_2024_0136() -> None:
    # 5599's mitigation notes: vulnerable only with ldconfig run from the container's files
    assert (
        _one("2025/5599", "CVE-2024-0136", _ctk("1.17.0", ldconfig_from_container="false")).status
        == "not_affected"
    )
    assert (
        _one("2025/5599", "CVE-2024-0137", _ctk("1.17.0", ldconfig_from_container="true")).status
        == "affected"
    )
    f = _one("2025/5599", "CVE-2024-0136", _ctk("1.17.0"))
    assert (f.status, f.conditions_unevaluated) == ("affected", ("ldconfig_from_container",))
    assert _one("2025/5599", "CVE-2024-0136", _ctk("1.17.1")).status == "fixed"


def test_the_compat_libs_opt_in_switches_the_cve_2025_23359_fix_off() -> None:
    # 5616: fixed in 1.17.4 unless allow-cuda-compat-libs-from-container = true; CDI unaffected
    on = _one(
        "2025/5616",
        "CVE-2025-23359",
        _ctk("1.17.4", cuda_compat_libs_from_container="true", cdi_mode="false"),
    )
    assert (on.status, on.conditions_unevaluated, on.fixed_in) == ("affected", (), "1.17.4")
    assert [c["name"] for c in on.evidence["fix_disabled_by"]] == [
        "cuda_compat_libs_from_container",
        "cdi_mode",
    ]
    off = _ctk("1.17.4", cuda_compat_libs_from_container="false", cdi_mode="false|true")
    assert _one("2025/5616", "CVE-2025-23359", off).status == "fixed"
    cdi_only = _ctk("1.17.4", cuda_compat_libs_from_container="true", cdi_mode="true")
    assert _one("2025/5616", "CVE-2025-23359", cdi_only).status == "fixed"
    unknown = _one("2025/5616", "CVE-2025-23359", _ctk("1.17.4"))
    assert (unknown.status, unknown.conditions_unevaluated) == (
        "affected",
        ("cuda_compat_libs_from_container", "cdi_mode"),
    )
    # below the fix, the bulletin's note alone decides: CDI is not impacted
    below = _one("2025/5616", "CVE-2025-23359", _ctk("1.17.3", cdi_mode="true"))
    assert below.status == "not_affected"


# -- the vGPU Manager: a hypervisor's driver (5703: Virtual GPU Manager rows for XenServer,
# vSphere, RHEL KVM and Ubuntu; R570 vGPU 18: up to 570.172.07, fixed in 570.195.02) ---------


def test_a_vgpu_manager_is_judged_on_the_manager_line_only() -> None:
    f = _one("2025/5703", "CVE-2025-23282", _driver("570.172.07", vgpu_host="true"))
    assert (f.product, f.status, f.installed) == ("vgpu-manager", "affected", "570.172.07")
    assert f.evidence["vgpu_host"] == "true"
    fixed = _one("2025/5703", "CVE-2025-23282", _driver("570.195.02", vgpu_host="true"))
    assert (fixed.product, fixed.status) == ("vgpu-manager", "fixed")
    # never by the datacenter line: 570.195.02 is below its 570.195.03 fix, and that says
    # nothing of a manager
    bare = _one("2025/5703", "CVE-2025-23282", _driver("570.195.02", vgpu_host="false"))
    assert (bare.product, bare.status) == ("driver", "affected")
    # a CVE of the manager alone (CVE-2025-23352) names no bare-metal driver...
    assert (
        match(
            "CVE-2025-23352",
            _statuses("2025/5703", "CVE-2025-23352"),
            _driver("580.82.02", vgpu_host="false"),
        )
        == []
    )
    # ... and a CVE without manager rows (CVE-2025-23280) names no manager
    assert (
        match(
            "CVE-2025-23280",
            _statuses("2025/5703", "CVE-2025-23280"),
            _driver("570.172.07", vgpu_host="true"),
        )
        == []
    )


def test_an_undecided_vgpu_host_matters_only_where_the_lines_disagree() -> None:
    # no nvidia-smi output: the manager line affected where the datacenter line has no word
    # (CVE-2025-23352) is affected, vgpu_host named, the manager line's answer as evidence
    f = _one("2025/5703", "CVE-2025-23352", _driver("580.82.02"))
    assert (f.status, f.conditions_unevaluated) == ("affected", ("vgpu_host",))
    assert f.product == "vgpu-manager"
    assert f.evidence["vgpu_manager_line"]["status"] == "affected"
    # the datacenter line affected already: its answer stands, nothing more to decide
    g = _one("2025/5703", "CVE-2025-23282", _driver("570.172.08"))
    assert (g.product, g.status, g.conditions_unevaluated) == ("driver", "affected", ())
    # both lines fixed: fixed
    h = _one("2025/5703", "CVE-2025-23282", _driver("570.195.03"))
    assert (h.status, h.conditions_unevaluated) == ("fixed", ())
    # a vGPU guest is no hypervisor: its host fact undecided changes nothing
    guest = _driver("580.82.02", vgpu_guest="true")
    assert match("CVE-2025-23352", _statuses("2025/5703", "CVE-2025-23352"), guest) == []


def test_a_vgpu_guest_driver_is_judged_on_the_vgpu_guest_line() -> None:
    # 5703 CVE-2025-23280, Guest driver Linux(R580 vGPU 19): 580.82.07 affected, 580.95.05 fixed
    f = _one("2025/5703", "CVE-2025-23280", _driver("580.82.07", vgpu_guest="true"))
    assert (f.status, f.product, f.fixed_in) == (
        "affected",
        "vgpu-guest-driver",
        "580.95.05(vGPU 19.2); 580.95.05(September 2025 Release)",
    )
    assert f.evidence["vgpu_guest"] == "true"
    g = _one("2025/5703", "CVE-2025-23280", _driver("580.95.05", vgpu_guest="true"))
    assert (g.status, g.product) == ("fixed", "vgpu-guest-driver")


def test_a_product_reported_as_the_vgpu_guest_driver_is_judged_on_its_line() -> None:
    guest = Installed("vgpu-guest-driver", "580.82.07", branch="R580")
    f = _one("2025/5703", "CVE-2025-23280", AssetFacts(products=(guest,)))
    assert (f.status, f.product, f.conditions_unevaluated) == ("affected", "vgpu-guest-driver", ())


def test_an_undecided_vgpu_guest_matters_only_where_the_lines_disagree() -> None:
    # R535: the datacenter fix is 535.274.02; the vGPU 16 guest line's fix reads "575.274.02"
    # (the vendor's anomaly), so 535.274.02 as a guest driver is affected, for review
    unknown = AssetFacts(products=(Installed("driver", "535.274.02", branch="R535"),))
    f = _one("2025/5703", "CVE-2025-23280", unknown)
    assert (f.status, f.product, f.conditions_unevaluated) == (
        "affected",
        "driver",
        ("vgpu_guest",),
    )
    line = f.evidence["vgpu_guest_line"]
    assert line["status"] == "affected" and line["fixed_in"] == "575.274.02(vGPU 16.12)"
    assert line["review"] is not None
    assert _one("2025/5703", "CVE-2025-23280", _driver("535.274.02")).status == "fixed"
    # where both lines agree the fact decides nothing: no condition named
    old = AssetFacts(products=(Installed("driver", "535.129.03", branch="R535"),))
    h = _one("2025/5703", "CVE-2025-23280", old)
    assert (h.status, h.conditions_unevaluated) == ("affected", ())


def test_worst_of_several() -> None:
    found = match("CVE-2023-0193", _statuses("2023/5446", "CVE-2023-0193"), CUDART_ONLY)
    assert worst(found) == "not_affected"
    assert worst([]) is None


def test_every_cuda_toolkit_cve_of_the_bulletins_has_its_component() -> None:
    data = matching_data()
    assert len(data.components) == 42
    assert set().union(*data.components.values()) == {"cuobjdump", "nvdisasm", "nvjpeg"}


def _status(status: str, text: str | None, **extra: str) -> StatusEntry:
    from scanner.advisories.versions import parse_version_text

    parsed = parse_version_text(text).as_dict() if text else None
    return StatusEntry("NVIDIA Container Toolkit", status, text, parsed, **extra)


def test_under_investigation_and_not_affected_without_a_version_name_the_product() -> None:
    # CSAF lists a product id without a version for "every version" (documents.csaf())
    (f,) = match("CVE-X", [_status("under_investigation", None)], _ctk("1.17.3"))
    assert f.status == "under_investigation"
    flagged = _status("known_not_affected", None, justification="component_not_present")
    (g,) = match("CVE-X", [flagged], _ctk("1.17.3"))
    assert (g.status, g.justification) == ("not_affected", "component_not_present")


def test_a_version_between_the_affected_range_and_the_fix_is_for_review() -> None:
    statuses = [
        _status("known_affected", "All versions prior to 1.16.0"),
        _status("fixed", "1.17.0"),
    ]
    (f,) = match("CVE-X", statuses, _ctk("1.16.5"))
    assert f.status == "affected" and f.review is not None
    (g,) = match("CVE-X", statuses, _ctk("1.15.0"))
    assert (g.status, g.review) == ("affected", None)


def test_a_malformed_branch_is_unknown_not_a_crash() -> None:
    f = _one("2025/5703", "CVE-2025-23280", _driver("535.129.03", branch="Rxyz"))
    assert f.status == "affected" and f.review is not None and "branch" in f.review


_TEXTS = st.sampled_from(
    [
        "All driver versions prior to 535.274.02",
        "All versions up to and including 1.17.7 (CDI mode only for versions prior to 1.17.5)",
        "All versions prior to CUDA Toolkit 12.9 Update 1",
        "CUDA Toolkit 12.6U1",
        "Available the week of June 29, 2023",
        "450.203(All versions prior to and including vGPU 11.10)",
        "1.6.x, 1.7.x",
        "S2W_3A13",
    ]
) | st.text(max_size=60)


@given(
    texts=st.lists(
        st.tuples(
            _TEXTS,
            st.sampled_from(
                ["known_affected", "fixed", "known_not_affected", "under_investigation"]
            ),
        ),
        max_size=6,
    ),
    product=st.sampled_from(
        ["Tesla", "NVIDIA CUDA Toolkit", "NVIDIA Container Toolkit", "nvJPEG", "Guest driver"]
    ),
    version=st.text(max_size=20) | st.sampled_from(["535.129.03", "12.4.1", "1.17.3"]),
    branch=st.none() | st.text(max_size=6) | st.just("R535"),
    platform=st.none() | st.sampled_from(["Linux(R535)", "Windows", "All"]),
    facts=st.dictionaries(
        st.sampled_from(
            ["cdi_mode", "vgpu_guest", "cuda_compat_libs_from_container", "ldconfig_from_container"]
        ),
        st.sampled_from(["true", "false", "false|true"]) | st.text(max_size=8),
    ),
)
@settings(max_examples=300, deadline=None)
def test_the_matcher_answers_any_statement_never_raises(
    texts: list[tuple[str, str]],
    product: str,
    version: str,
    branch: str | None,
    platform: str | None,
    facts: dict[str, str],
) -> None:
    from scanner.advisories.versions import parse_version_text

    statuses = [
        StatusEntry(
            product,
            status,
            text,
            parse_version_text(text, platform=platform).as_dict(),
            platform=platform,
        )
        for text, status in texts
    ]
    asset = AssetFacts(
        products=(
            Installed("driver", version, branch=branch),
            Installed("cuobjdump", version, toolkit=version),
            Installed("container-toolkit", version),
            Installed("nvjpeg", version),
        ),
        libraries=(("cudart", None),),
        facts=facts,
    )
    for cve in ("CVE-2023-0193", "CVE-2024-0132", "CVE-2025-23359", "CVE-X"):
        for f in match(cve, statuses, asset):
            assert f.status in ("affected", "not_affected", "fixed", "under_investigation")
            assert f.status != "not_affected" or f.justification
            # an undecided condition is named only on an affected answer, never a pass
            assert not f.conditions_unevaluated or f.status == "affected"
            assert set(f.conditions_unevaluated).isdisjoint(facts)
