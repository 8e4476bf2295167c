"""Property test of the ELF reader on damaged real libraries: any byte edits, truncations or
splices of a compiled cuDNN-like library give facts or a `DetectError`, never another
exception (hypothesis shrinks a failure to its smallest damage)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanner.detect import analyze_elf_bytes
from scanner.errors import DetectError
from scanner.model import ElfFacts
from tests.fixtures.elf import read_elf64_header


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_damaged_libraries(libs: dict[str, Path], data: st.DataObject) -> None:
    path = libs[data.draw(st.sampled_from(sorted(libs)), label="library")]
    good = path.read_bytes()
    if good[4] != 2:  # the header offsets below are ELF64's
        return
    h = read_elf64_header(path)
    shoff, phnum = int(h["e_shoff"]), int(h["e_phnum"])
    # where damage matters: the ELF header, the program headers, the section header table
    hot = st.one_of(
        st.integers(0, 63), st.integers(64, 64 + 56 * phnum), st.integers(shoff, len(good) - 1)
    )
    buf = bytearray(good)
    for _ in range(data.draw(st.integers(1, 6), label="edits")):
        at = min(data.draw(hot, label="at"), len(buf) - 1)
        how = data.draw(st.sampled_from(["byte", "word", "truncate"]), label="how")
        if how == "byte":
            buf[at] = data.draw(st.integers(0, 255))
        elif how == "word":
            buf[at : at + 8] = data.draw(st.sampled_from([b"\xff" * 8, bytes(8), b"\x7f" * 8]))
        else:
            del buf[max(at, 1) :]
    try:
        facts = analyze_elf_bytes(bytes(buf), name=path.name)
    except DetectError as e:
        assert str(e)
    else:
        assert isinstance(facts, ElfFacts)
