"""Broken and hostile files named like GPU libraries: a clear DetectError, never a hang."""

from __future__ import annotations

import os
import random
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from scanner.detect import analyze_elf, analyze_elf_bytes
from scanner.errors import DetectError
from scanner.model import ElfFacts
from tests.fixtures.elf import (
    patch_elf64_header,
    patch_section_header,
    read_elf64_header,
    section_index,
    truncated_copy,
)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block runs longer than ``seconds``."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"took longer than {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def graph(tmp_path: Path, libs: dict[str, Path]) -> Path:
    """A private copy of a good cuDNN library to damage."""
    dest = tmp_path / "libcudnn_graph.so.9"
    shutil.copyfile(libs["cudnn9/cudnn_graph"], dest)
    return dest


def reason(path: Path) -> str:
    with deadline(5), pytest.raises(DetectError) as info:
        analyze_elf(str(path))
    message = str(info.value)
    assert "Traceback" not in message and str(path) not in message
    return message


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "libcudnn.so.9"
    empty.touch()
    assert reason(empty) == "not an ELF file: empty file"
    with pytest.raises(DetectError, match="empty"):
        analyze_elf_bytes(b"", name="libcudnn.so.9")


def test_text_file_named_like_a_library(tmp_path: Path) -> None:
    text = tmp_path / "libcudnn.so.9"
    text.write_text("/* GNU ld script */\nINPUT(libcudnn.so.9.1.0)\n")
    assert reason(text).startswith("not an ELF file: starts with b'/* GNU l'")


def test_missing_file_fifo_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DetectError, match="cannot open"):
        analyze_elf(str(tmp_path / "libcudnn.so.9"))
    fifo = tmp_path / "libcudnn_ops.so.9"
    os.mkfifo(fifo)
    assert reason(fifo) == "not a regular file"  # and no blocking open
    (tmp_path / "libcudnn_adv.so.9").mkdir()
    assert reason(tmp_path / "libcudnn_adv.so.9") == "not a regular file"


@pytest.mark.parametrize("size", [4, 10, 40])
def test_truncated_header(tmp_path: Path, graph: Path, size: int) -> None:
    cut = truncated_copy(graph, tmp_path / "cut.so", size)
    assert reason(cut).startswith("truncated ELF header")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_truncated_body(tmp_path: Path, graph: Path, fraction: float) -> None:
    size = int(graph.stat().st_size * fraction)
    cut = truncated_copy(graph, tmp_path / "cut.so", size)
    assert reason(cut).startswith("truncated ELF")


def test_bad_class_and_type(tmp_path: Path, graph: Path) -> None:
    data = bytearray(graph.read_bytes())
    data[4] = 7
    (tmp_path / "a.so").write_bytes(bytes(data))
    assert "invalid class" in reason(tmp_path / "a.so")
    patch_elf64_header(graph, e_type=1)  # ET_REL: an object file, not a library
    assert reason(graph) == "not a shared library: ELF type ET_REL"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"e_shnum": 0xFFFE}, "truncated ELF: 65534 section headers"),
        ({"e_shoff": 2**63}, "truncated ELF: "),
        ({"e_shoff": 2**64 - 64}, "truncated ELF: "),
        ({"e_shentsize": 8}, "malformed ELF: section headers entry size 8"),
        ({"e_shstrndx": 9999}, "malformed ELF: section name table index 9999 out of range"),
        ({"e_phnum": 0xFFFF}, "unsupported ELF: extended program header count"),
        ({"e_phnum": 5000}, "truncated ELF: 5000 program headers"),
        ({"e_phoff": 2**62}, "truncated ELF: "),
        ({"e_phentsize": 1}, "malformed ELF: program headers entry size 1"),
    ],
)
def test_hostile_header_fields(graph: Path, fields: dict[str, int], expected: str) -> None:
    patch_elf64_header(graph, **fields)
    assert reason(graph).startswith(expected)


def test_extended_section_count_is_bounded(graph: Path) -> None:
    # e_shnum == 0 defers to section 0's sh_size: a huge count must not be iterated
    patch_elf64_header(graph, e_shnum=0)
    patch_section_header(graph, 0, field="sh_size", value=2**40)
    assert reason(graph) == f"malformed ELF: {2**40} section headers"


@pytest.mark.parametrize(
    ("section", "field", "value", "expected"),
    [
        (".dynsym", "sh_offset", 2**40, "truncated ELF: section .dynsym"),
        (".dynsym", "sh_size", 2**40, "truncated ELF: section .dynsym"),
        (".dynsym", "sh_entsize", 0, "malformed ELF: .dynsym entry size 0"),
        (".dynstr", "sh_size", 2**50, "truncated ELF: section .dynstr"),
        (".dynamic", "sh_offset", 2**63, "truncated ELF: section .dynamic"),
        (".rodata", "sh_size", 2**62, "truncated ELF: .rodata"),
        (".shstrtab", "sh_offset", 2**41, "truncated ELF: section name table"),
    ],
)
def test_hostile_section_headers(
    graph: Path, section: str, field: str, value: int, expected: str
) -> None:
    patch_section_header(graph, section_index(graph, section), field=field, value=value)
    assert reason(graph).startswith(expected)


def test_soname_offset_outside_dynstr(graph: Path) -> None:
    # shrink .dynstr so DT_SONAME's offset points past its end
    patch_section_header(graph, section_index(graph, ".dynstr"), field="sh_size", value=1)
    assert reason(graph).startswith("malformed ELF: DT_SONAME string offset")


def test_random_damage_never_escapes_or_hangs(libs: dict[str, Path]) -> None:
    """Seeded corruption of headers and tables: each file gives facts or a DetectError."""
    good = libs["cudnn9/cudnn_graph"].read_bytes()
    h = read_elf64_header(libs["cudnn9/cudnn_graph"])
    shoff = int(h["e_shoff"])
    hot = [*range(0, 64), *range(64, 64 + 56 * int(h["e_phnum"])), *range(shoff, len(good))]
    rng = random.Random(20261130)
    outcomes = {"facts": 0, "error": 0}
    with deadline(30):
        for _ in range(400):
            data = bytearray(good)
            for _ in range(rng.randint(1, 6)):
                data[rng.choice(hot)] = rng.randrange(256)
            try:
                result = analyze_elf_bytes(bytes(data), name="libcudnn_graph.so.9")
            except DetectError as e:
                assert str(e)
                outcomes["error"] += 1
            else:
                assert isinstance(result, ElfFacts)
                outcomes["facts"] += 1
    assert outcomes["error"] > 0 and outcomes["facts"] > 0
