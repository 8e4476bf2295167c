"""Static ELF analysis of compiled fake GPU libraries."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from scanner.detect import analyze_elf, analyze_elf_bytes
from tests.fixtures.elf import (
    build_cuda_library,
    build_cudnn_library,
    compile_library,
    read_elf64_header,
    strip_section_headers,
)


def test_cudnn9_graph_facts(libs: dict[str, Path]) -> None:
    f = analyze_elf(str(libs["cudnn9/cudnn_graph"]))
    assert f.machine == "x86_64"
    assert f.soname == "libcudnn_graph.so.9"
    assert f.needed == ()
    assert dict(f.version_ints)["cudnn_graph_version"] == 0x090100
    # cudnnGetVersion() returns 90100 (major*10000+minor*100+patch), re-encoded as an int
    assert dict(f.version_ints)["cudnnGetVersion()"] == 0x090100
    assert f.markers == ("cudnn_version_9_1_0_70_c34102860_e0",)
    assert f.cudart_build == 12040
    assert f.referenced_cuda_majors == (12,)


def test_cudnn9_sub_library_without_marker(libs: dict[str, Path]) -> None:
    f = analyze_elf(str(libs["cudnn9/cudnn_ops"]))
    assert f.soname == "libcudnn_ops.so.9"
    assert dict(f.version_ints)["cudnn_ops_version"] == 0x090100
    assert f.markers == ()


def test_cudnn8_facts(libs: dict[str, Path]) -> None:
    f = analyze_elf(str(libs["cudnn8/cudnn_ops_infer"]))
    assert f.soname == "libcudnn_ops_infer.so.8"
    assert f.version_ints == (("cudnn_ops_infer_version", (8 << 16) | (9 << 8) | 2),)
    assert f.markers == ("cudnn_version_8_9_2_26_c34102860_e0",)
    assert f.cudart_build == 11080
    assert f.referenced_cuda_majors == (11,)


def test_future_sub_library(libs: dict[str, Path]) -> None:
    f = analyze_elf(str(libs["future"]))
    assert f.soname == "libcudnn_engines_tensor_ir.so.9"
    assert dict(f.version_ints)["cudnn_engines_tensor_ir_version"] == 0x091C01
    assert f.cudart_build == 13000
    assert f.referenced_cuda_majors == (13,)


def test_aarch64_library(libs: dict[str, Path]) -> None:
    f = analyze_elf(str(libs["aarch64"]))
    assert f.machine == "aarch64"
    assert f.soname == "libcudnn_graph.so.9"
    assert dict(f.version_ints)["cudnn_graph_version"] == 0x090100
    assert f.markers == ("cudnn_version_9_1_0_70_c34102860_e0",)
    assert f.cudart_build == 12040  # movz w0, #12040; ret


def test_cuda_libraries(libs: dict[str, Path]) -> None:
    cublas = analyze_elf(str(libs["cublas"]))
    assert cublas.soname == "libcublas.so.12"
    assert cublas.needed == ("libcublasLt.so.12",)
    assert cublas.referenced_cuda_majors == (12,)
    assert cublas.version_ints == () and cublas.markers == ()
    cudart = analyze_elf(str(libs["cudart11"]))
    assert cudart.soname == "libcudart.so.11.0"
    nccl = analyze_elf(str(libs["nccl"]))
    assert nccl.soname == "libnccl.so.2"


def test_driver_version_strings(libs: dict[str, Path]) -> None:
    for key, soname in (("nvml", "libnvidia-ml.so.1"), ("libcuda", "libcuda.so.1")):
        f = analyze_elf(str(libs[key]))
        assert f.soname == soname
        # "%u.%02u.%02u" and "NVML API version 12.535" are not taken for versions
        assert f.version_strings == ("535.309.01",)


def test_driver_version_without_name_hint(tmp_path: Path, libs: dict[str, Path]) -> None:
    copy = tmp_path / "libnvidia-ml.so.1"
    shutil.copyfile(libs["nvml"], copy)
    assert analyze_elf(str(copy)).version_strings == ("535.309.01",)


def test_name_decides_searches_and_soname_stands_in(tmp_path: Path, libs: dict[str, Path]) -> None:
    # An image probe analyzes a spooled copy with a meaningless name: the SONAME still says cuDNN.
    spooled = tmp_path / "tmp8f3k2"
    shutil.copyfile(libs["cudnn9/cudnn_graph"], spooled)
    f = analyze_elf(str(spooled))
    assert f.markers and f.version_ints
    g = analyze_elf(str(spooled), name="/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.1.0")
    assert g == f


def test_marker_only_in_rodata_of_cudnn_files(tmp_path: Path) -> None:
    marker = "cudnn_version_9_9_9_99_c0_e0"
    # writable data (.data) is not where cuDNN keeps its marker: ignored
    writable = compile_library(
        tmp_path,
        "libcudnn_ops.so.9.1.0",
        f'char scratch[] = "{marker}";\nconst int cudnn_ops_version = 0x090100;\n',
        soname="libcudnn_ops.so.9",
    )
    f = analyze_elf(str(writable))
    assert f.markers == ()
    assert dict(f.version_ints)["cudnn_ops_version"] == 0x090100
    # a non-cuDNN library is not searched for markers at all
    other = build_cuda_library(tmp_path, "cudart", "12.4.127", strings=[marker])
    assert analyze_elf(str(other)).markers == ()


def test_only_defined_four_byte_objects_are_version_ints(tmp_path: Path) -> None:
    src = (
        "const long cudnn_big_version = 1;\n"  # 8 bytes: not a version int
        "int cudnn_fn_version(void) { return 0x090100; }\n"  # a function, not an object
        "extern const int cudnn_imported_version;\n"
        "int use(void) { return cudnn_imported_version; }\n"  # undefined here
        "const int cudnn_adv_version = 0x090100;\n"
    )
    lib = compile_library(tmp_path, "libcudnn_adv.so.9", src, soname="libcudnn_adv.so.9")
    # -nostdlib shared objects may leave the import undefined: only the defined one counts
    assert analyze_elf(str(lib)).version_ints == (("cudnn_adv_version", 0x090100),)


def test_cudart_immediate_needs_the_simple_form(tmp_path: Path) -> None:
    src = (
        "volatile int v = 12040;\n"
        "int cudnnGetCudartVersion(void) { return v; }\n"  # a load, not an immediate
        "const int cudnn_graph_version = 0x090100;\n"
    )
    lib = compile_library(tmp_path, "libcudnn_graph.so.9", src, soname="libcudnn_graph.so.9")
    assert analyze_elf(str(lib)).cudart_build is None


def test_without_section_headers(tmp_path: Path, libs: dict[str, Path]) -> None:
    copy = tmp_path / "libcudnn_graph.so.9"
    shutil.copyfile(libs["cudnn9/cudnn_graph"], copy)
    strip_section_headers(copy)
    f = analyze_elf(str(copy))
    assert f.soname == "libcudnn_graph.so.9"
    assert dict(f.version_ints)["cudnn_graph_version"] == 0x090100
    assert f.markers == ("cudnn_version_9_1_0_70_c34102860_e0",)
    assert f.cudart_build == 12040


def test_a_load_segment_placed_past_any_file_size_is_no_region(
    tmp_path: Path, libs: dict[str, Path]
) -> None:
    # Without section headers the read-only PT_LOAD segments are searched; one whose p_offset
    # lies beyond 2**63 has no bytes in the file, like any offset past its end (it used to
    # overflow the regex bounds and turn the whole library into a "malformed ELF" error).
    copy = tmp_path / "libcudnn_graph.so.9"
    shutil.copyfile(libs["cudnn9/cudnn_graph"], copy)
    strip_section_headers(copy)
    data = bytearray(copy.read_bytes())
    h = read_elf64_header(copy)
    phoff, phentsize = int(h["e_phoff"]), int(h["e_phentsize"])
    read_only = [
        at
        for at in range(phoff, phoff + int(h["e_phnum"]) * phentsize, phentsize)
        # PT_LOAD, neither writable nor executable
        if struct.unpack_from("<II", data, at) in ((1, 4),)
    ]
    assert len(read_only) >= 2  # the dynamic tables' segment, then .rodata's
    struct.pack_into("<Q", data, read_only[-1] + 8, 2**63 + 4096)
    copy.write_bytes(bytes(data))
    f = analyze_elf(str(copy))
    assert f.soname == "libcudnn_graph.so.9"
    assert f.markers == ()  # the marker lay in the segment that now has no bytes


def test_a_huge_number_after_a_cuda_library_name_is_no_reference(tmp_path: Path) -> None:
    src = (
        f'const char huge[] = "libcudart.so.{"1" * 5000}";\n'
        'const char real[] = "libcublasLt.so.12";\n'
        "const int cudnn_graph_version = 0x090100;\n"
    )
    lib = compile_library(tmp_path, "libcudnn_graph.so.9", src, soname="libcudnn_graph.so.9")
    f = analyze_elf(str(lib))  # used to fail as "malformed ELF: ValueError"
    assert f.referenced_cuda_majors == (12,)


def test_without_section_headers_aarch64(tmp_path: Path, libs: dict[str, Path]) -> None:
    copy = tmp_path / "libcudnn_graph.so.9"
    shutil.copyfile(libs["aarch64"], copy)
    strip_section_headers(copy)
    f = analyze_elf(str(copy))
    assert f.machine == "aarch64"
    assert f.markers == ("cudnn_version_9_1_0_70_c34102860_e0",)  # R+X segment searched


def test_bytes_and_file_agree(libs: dict[str, Path]) -> None:
    path = libs["cudnn9/cudnn_graph"]
    assert analyze_elf_bytes(path.read_bytes(), name=path.name) == analyze_elf(str(path))


def test_dlopen_names_of_several_majors(tmp_path: Path) -> None:
    lib = build_cudnn_library(
        tmp_path, "cudnn_graph", refs=("libcublasLt.so.12", "libnvrtc.so.13", "libcudart.so.12")
    )
    assert analyze_elf(str(lib)).referenced_cuda_majors == (12, 13)


def test_cudart_immediate_at_the_end_of_a_tiny_text_segment(tmp_path: Path) -> None:
    # the only function: its 6 bytes end the executable segment
    src = "int cudnnGetCudartVersion(void) { return 12080; }\n"
    for arch in ("x86_64", "aarch64"):
        lib = compile_library(
            tmp_path / arch, "libcudnn_graph.so.9", src, soname="libcudnn_graph.so.9", arch=arch
        )
        assert analyze_elf(str(lib)).cudart_build == 12080


def test_region_inside_a_larger_file_equals_the_file(libs: dict[str, Path], tmp_path: Path) -> None:
    """Libraries inside an uncompressed layer are analyzed in place, at a 512-byte offset."""
    from scanner.detect import analyze_elf_region
    from scanner.errors import DetectError

    for key in ("cudnn9/cudnn_graph", "cudnn8/cudnn_ops_infer"):
        lib = libs[key]
        data = lib.read_bytes()
        blob = tmp_path / "layer.tar"
        blob.write_bytes(b"\xaa" * 1536 + data + b"\xbb" * 700)
        got = analyze_elf_region(str(blob), 1536, len(data), name=str(lib))
        assert got == analyze_elf(str(lib))
    with pytest.raises(DetectError, match="outside the file"):
        analyze_elf_region(str(blob), 1536, len(data) + 10_000, name="x")
