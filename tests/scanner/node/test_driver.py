"""Driver and GPU facts from recorded /proc, /sys and nvidia-smi formats; the sourced tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.node.driver import (
    NvidiaSmiError,
    parse_information,
    parse_nvidia_smi,
    parse_nvrm,
    read_driver,
    short_bus_id,
)
from scanner.node.tables import (
    default_compute_capability,
    default_cuda_drivers,
    default_jetpack,
)
from tests.scanner.node import nodetree as nt


def test_nvrm_line_of_both_module_flavors() -> None:
    assert parse_nvrm(nt.PROC_VERSION) == (
        "535.129.03",
        "proprietary",
        "Thu Oct 19 18:56:32 UTC 2023",
    )
    version, flavor, build = parse_nvrm(nt.PROC_VERSION_OPEN) or ("", "", None)
    assert (version, flavor) == ("550.54.15", "open")
    assert build is not None and build.startswith("Release Build")
    assert parse_nvrm("GCC version: gcc 12\n") is None


def test_information_file() -> None:
    model, bus, uuid, minor = nt.GPUS[0]
    gpu = parse_information(nt.information(model, bus, uuid, minor, "96.00.74.00.0d"), "x")
    assert gpu is not None
    assert (gpu.bus_id, gpu.model, gpu.uuid, gpu.minor) == (bus, model, uuid, 0)
    assert gpu.vbios == "96.00.74.00.0d"
    assert gpu.compute_capability == "9.0"
    # a GPU the driver cannot read yet says so with question marks: never reported as facts
    unknown = nt.information(model, bus, "GPU-????????-????", 0, "??.??.??.??.??")
    gpu = parse_information(unknown, "x")
    assert gpu is not None and gpu.uuid is None and gpu.vbios is None
    assert parse_information("IRQ: 34\n", "x") is None


def test_nvidia_smi_xml() -> None:
    driver, cuda, gpus = parse_nvidia_smi(nt.NVIDIA_SMI_XML)
    assert (driver, cuda) == ("535.129.03", "12.2")
    assert [g.bus_id for g in gpus] == ["0000:17:00.0", "0000:2a:00.0"]
    assert gpus[0].architecture == "Hopper" and gpus[0].compute_capability == "9.0"
    with pytest.raises(NvidiaSmiError, match="not XML"):
        parse_nvidia_smi("nvidia-smi: command not found")
    with pytest.raises(NvidiaSmiError, match="nvidia_smi_log"):
        parse_nvidia_smi("<html/>")
    assert short_bus_id("00000000:2A:00.0") == "0000:2a:00.0"


def test_read_driver_merges_proc_sys_and_smi(tmp_path: Path) -> None:
    for model, bus, uuid, minor in nt.GPUS:
        nt.write(
            tmp_path,
            f"/proc/driver/nvidia/gpus/{bus}/information",
            nt.information(model, bus, uuid, minor, "96.00.74.00.0d"),
        )
    nt.write(tmp_path, "/proc/driver/nvidia/version", nt.PROC_VERSION)
    nt.write(tmp_path, "/sys/module/nvidia/version", "535.129.03\n")
    facts, gpus, notes = read_driver(
        str(tmp_path / "proc"),
        str(tmp_path / "sys"),
        smi_xml=nt.NVIDIA_SMI_XML,
        libcuda=("535.129.03",),
        nvml=("535.129.03",),
    )
    assert notes == []
    assert facts is not None
    assert (facts.version, facts.source, facts.flavor) == (
        "535.129.03",
        "/proc/driver/nvidia/version",
        "proprietary",
    )
    assert (facts.cuda_max, facts.cuda_max_source) == ("12.2", "nvidia-smi")
    assert len(gpus) == 2 and all(g.architecture == "Hopper" for g in gpus)
    assert gpus[0].source.startswith("/proc/driver/nvidia/gpus/")


def test_read_driver_without_smi_uses_the_table_and_notes_mismatches(tmp_path: Path) -> None:
    nt.write(tmp_path, "/sys/module/nvidia/version", "535.161.07\n")
    facts, gpus, notes = read_driver(
        str(tmp_path / "proc"), str(tmp_path / "sys"), libcuda=("535.129.03",)
    )
    assert facts is not None and gpus == ()
    assert (facts.version, facts.source) == ("535.161.07", "/sys/module/nvidia/version")
    assert facts.cuda_max == "12.2" and not facts.cuda_max_at_least
    assert facts.cuda_max_source is not None and "12.2 Update 2" in facts.cuda_max_source
    assert len(notes) == 1 and notes[0].startswith("driver-mismatch: ")
    # nothing at all: no facts
    assert read_driver(str(tmp_path / "none"), str(tmp_path / "none")) == (None, (), [])


@pytest.mark.parametrize(
    ("driver", "cuda", "at_least"),
    [
        ("535.129.03", "12.2", False),
        ("535.54.03", "12.2", False),
        ("535.54.02", "12.1", False),
        ("525.60.13", "12.0", False),
        ("570.211.01", "12.8", False),
        ("580.65.06", "13.0", False),
        ("590.48.01", "13.1", False),
        ("610.43.02", "13.1", True),
        ("470.256.02", "11.4", False),
    ],
)
def test_newest_cuda_of_a_driver(driver: str, cuda: str, at_least: bool) -> None:
    support = default_cuda_drivers().newest_cuda(driver)
    assert support is not None and (support.cuda, support.at_least) == (cuda, at_least)


def test_tables_refuse_what_they_cannot_answer() -> None:
    assert default_cuda_drivers().newest_cuda("340.108") is None
    assert default_cuda_drivers().newest_cuda("36.4.0") is None  # an L4T libcuda version
    assert default_cuda_drivers().newest_cuda("not-a-version") is None
    assert default_compute_capability().of("Matrox G200eW") is None
    assert default_compute_capability().of("NVIDIA A100-SXM4-80GB") == "8.0"
    assert default_compute_capability().of("NVIDIA A10G") == "8.6"
    assert default_compute_capability().of("Tesla T4") == "7.5"
    assert default_compute_capability().of("NVIDIA L4") == "8.9"
    jp = default_jetpack().by_l4t("36.4")
    assert jp is not None and (jp.jetpack, jp.cuda) == ("6.1", "12.6")
    assert default_jetpack().by_l4t("99.1.0") is None
    for table in (default_cuda_drivers(), default_jetpack(), default_compute_capability()):
        assert table.source.url.startswith("https://")
