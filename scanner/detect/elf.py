"""Static ELF analysis of one GPU library: machine, SONAME, DT_NEEDED and version facts.

pyelftools parses the ELF, program and section headers after their bounds are checked
against the file size; the bulk tables (dynamic entries, symbols) and the bounded string
searches read the memory-mapped file directly, so a 0.75 GB library costs a few page reads.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import struct
from collections.abc import Callable, Iterator
from typing import Any, Final

from msgspec import Struct

from scanner.detect.classifiers import ContentSearch, classify_name
from scanner.detect.products import MAX_TOOL_SCAN, tool_markers, tool_of
from scanner.errors import DetectError, NotElfError
from scanner.model import ElfFacts

Buffer = mmap.mmap | bytes | memoryview

#: Most bytes one search reads in one region (.rodata of real cuDNN is a few MB).
MAX_SCAN_BYTES: Final = 256 << 20
#: Most bytes of read-only data searched for driver version strings (a slower regex).
MAX_DRIVER_SCAN_BYTES: Final = 64 << 20
_MAX_SECTIONS: Final = 0xFFFF
_MAX_DYNAMIC_BYTES: Final = 1 << 20
_MAX_SYMBOLS: Final = 1 << 20
_MAX_HITS: Final = 64
_MAX_NAME: Final = 4096
_MAX_FUNCTION_SCAN: Final = 1024

# Only a shared object can be loaded as a library (glibc refuses to dlopen an executable).
_ET_OK: Final = ("ET_DYN",)
# d_tag values (System V ABI, "Dynamic Section")
_DT_NULL, _DT_NEEDED, _DT_HASH, _DT_STRTAB, _DT_SYMTAB = 0, 1, 4, 5, 6
_DT_STRSZ, _DT_SONAME = 10, 14
_STT_OBJECT, _STT_FUNC = 1, 2
_PF_X, _PF_W = 1, 2

_MACHINES: Final = {
    "EM_X86_64": "x86_64",
    "EM_AARCH64": "aarch64",
    "EM_386": "i386",
    "EM_ARM": "arm",
    "EM_PPC64": "ppc64",
    "EM_PPC": "ppc",
    "EM_S390": "s390x",
    "EM_RISCV": "riscv",
    "EM_LOONGARCH": "loongarch64",
}

_MARKER_LITERAL: Final = b"cudnn_version_"
_MARKER_RE: Final = re.compile(rb"cudnn_version_(\d+)_(\d+)_(\d+)_(\d+)[_A-Za-z0-9]*")
_VERSION_SYMBOL_RE: Final = re.compile(r"cudnn[A-Za-z0-9_]*_version")
# at most 18 digits: int() refuses 4300+, and a longer run names no CUDA major anyway
_CUDA_REF_RE: Final = re.compile(rb"lib(?:cublasLt|cublas|cudart|nvrtc)\.so\.(\d{1,18})(?!\d)")
# A whole C string that is a driver version; other digit runs in rodata are not.
_DRIVER_RE: Final = re.compile(rb"\x00([2-9]\d{2}\.\d{2,3}(?:\.\d{2})?)(?=\x00)")
#: NVIDIA's build tree in a source path: ".../sw/rel/gpgpu/toolkit/r11.8/nvJPEG/..."
_TOOLKIT_BUILD_RE: Final = re.compile(rb"/gpgpu/toolkit/r(\d{1,3}\.\d{1,3})/")
_DRIVER_NAME_RE: Final = re.compile(r"\.so\.([2-9]\d{2}\.\d{2,3}(?:\.\d{2})?)$")


class _Segment(Struct, frozen=True):
    ptype: str | int
    flags: int
    offset: int
    vaddr: int
    filesz: int


class _Section(Struct, frozen=True):
    name: str
    stype: str | int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


def _map(path_on_disk: str) -> tuple[mmap.mmap, int]:
    """Map a regular file read-only; DetectError names why it cannot be."""
    try:
        # O_NONBLOCK: a FIFO named like a library must not block the scan
        fd = os.open(path_on_disk, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise DetectError(f"cannot open: {e.strerror or e}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DetectError("not a regular file")
        if st.st_size == 0:
            raise NotElfError("not an ELF file: empty file")
        try:
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ), st.st_size
        except (OSError, ValueError) as e:
            raise DetectError(f"cannot map the file: {e}") from e
    finally:
        os.close(fd)


def analyze_elf(path_on_disk: str, *, name: str | None = None) -> ElfFacts:
    """Analyze a shared library on disk; ``name`` is its path in the scanned root, if different.

    Raises DetectError with the reason when the file is not a readable ELF shared object.
    """
    mm, size = _map(path_on_disk)
    with mm:
        return _analyze(mm, size, name or path_on_disk)


def analyze_elf_region(path_on_disk: str, offset: int, size: int, *, name: str) -> ElfFacts:
    """Analyze a library stored verbatim inside a larger file (a member of an uncompressed
    image layer in an archive), in place: nothing is copied out."""
    if size == 0:
        raise NotElfError("not an ELF file: empty file")
    mm, total = _map(path_on_disk)
    with mm:
        if offset < 0 or offset + size > total:
            raise DetectError(f"region {offset}+{size} lies outside the file")
        window = memoryview(mm)[offset : offset + size]
        try:
            return _analyze(window, size, name, (mm, offset))
        finally:
            window.release()


def analyze_elf_bytes(data: bytes, *, name: str) -> ElfFacts:
    """Analyze a shared library held in memory (small files, tests)."""
    if not data:
        raise NotElfError("not an ELF file: empty file")
    return _analyze(data, len(data), name)


def _analyze(
    buf: Buffer, size: int, name: str, window: tuple[mmap.mmap, int] | None = None
) -> ElfFacts:
    from elftools.common.exceptions import ELFError
    from elftools.construct import ConstructError

    tool = tool_of(os.path.basename(name))
    if tool is not None:
        return _tool_facts(buf, size, tool_markers(tool))
    _check_ident(buf, size)
    try:
        return _Elf(buf, size, window).facts(os.path.basename(name))
    except (ELFError, ConstructError, struct.error) as e:
        # what pyelftools, its construct and struct raise on hostile bytes; any other
        # exception is a defect of this module and fails the tests that reach it
        raise DetectError(f"malformed ELF: {type(e).__name__}: {e}") from e


def _tool_facts(buf: Buffer, size: int, markers: tuple[re.Pattern[bytes], ...]) -> ElfFacts:
    """A tool binary (``nvcc``, ``cuobjdump``, ...): an executable, not a library, so only its
    machine and the version texts it embeds are read (``version_strings``, whole matches). A
    launcher script named like a tool has machine "" and is searched the same way."""
    head = bytes(buf[:20])
    machine = ""
    if head[:4] == b"\x7fELF" and len(head) == 20 and head[5] in (1, 2):
        code = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
        machine = _MACHINE_CODES.get(code, f"em-{code}")
    found: list[str] = []
    window = memoryview(buf)[: min(size, MAX_TOOL_SCAN)]
    try:
        for rx in markers:
            for m in rx.finditer(window):
                text = m.group(0).decode("ascii", "replace")
                if text not in found:
                    found.append(text)
                if len(found) >= _MAX_HITS:
                    break
    finally:
        window.release()
    return ElfFacts(machine=machine, version_strings=tuple(found))


#: e_machine codes of the machines `_MACHINES` names (System V ABI, "ELF Header")
_MACHINE_CODES: Final = {
    62: "x86_64",
    183: "aarch64",
    3: "i386",
    40: "arm",
    21: "ppc64",
    22: "s390x",
    243: "riscv",
}


def _check_ident(buf: Buffer, size: int) -> None:
    head = bytes(buf[:16])
    if head[:4] != b"\x7fELF":
        raise NotElfError(f"not an ELF file: starts with {head[:8]!r}")
    if size < 16:
        raise DetectError(f"truncated ELF header: {size} bytes")
    if head[4] not in (1, 2):
        raise DetectError(f"malformed ELF: invalid class byte {head[4]}")
    if head[5] not in (1, 2):
        raise DetectError(f"malformed ELF: invalid data encoding byte {head[5]}")
    need = 64 if head[4] == 2 else 52
    if size < need:
        raise DetectError(f"truncated ELF header: {size} of {need} bytes")


class _WindowStream:
    """A read-only file object over ``size`` bytes at ``base`` of a mapping (for pyelftools)."""

    def __init__(self, mm: mmap.mmap, base: int, size: int) -> None:
        self._mm, self._base, self._size, self._pos = mm, base, size, 0

    def seek(self, pos: int, whence: int = 0) -> int:
        start = (0, self._pos, self._size)[whence]
        self._pos = max(0, start + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self._size if n < 0 else min(self._size, self._pos + n)
        if end <= self._pos:
            return b""
        data = self._mm[self._base + self._pos : self._base + end]
        self._pos = end
        return data


class _Elf:
    """One parsed file. Construction validates every table the analysis reads."""

    def __init__(self, buf: Buffer, size: int, window: tuple[mmap.mmap, int] | None) -> None:
        from io import BytesIO

        from elftools.elf.elffile import ELFFile

        self.buf = buf
        self.size = size
        self.window = window
        # pyelftools reads through a stream; an mmap is one, bytes need a (zero-copy) BytesIO,
        # a window into a larger mapping a view that shifts offsets.
        stream: Any
        if window is not None:
            stream = _WindowStream(*window, size)
        elif isinstance(buf, mmap.mmap):
            stream = buf
        else:
            stream = BytesIO(buf)
        self.elf = ELFFile(stream)
        self.is64 = self.elf.elfclass == 64
        self.end = "<" if self.elf.little_endian else ">"
        hdr = self.elf.header
        etype = hdr["e_type"]
        if etype not in _ET_OK:
            raise NotElfError(f"not a shared library: ELF type {etype}")
        machine = hdr["e_machine"]
        if isinstance(machine, str):
            self.machine = _MACHINES.get(machine, machine.removeprefix("EM_").lower())
        else:
            self.machine = f"em-{machine}"
        if self.machine == "ppc64" and self.elf.little_endian:
            self.machine = "ppc64le"
        self.segments = self._segments()
        self.sections = self._sections()

    # -- headers -------------------------------------------------------------------------

    def _table(self, what: str, off: int, count: int, entsize: int, minsize: int) -> None:
        if count and entsize < minsize:
            raise DetectError(f"malformed ELF: {what} entry size {entsize} < {minsize}")
        if count and off + count * entsize > self.size:
            raise DetectError(
                f"truncated ELF: {count} {what} at offset {off:#x} extend past the end of "
                f"the file ({self.size} bytes)"
            )

    def _segments(self) -> list[_Segment]:
        hdr = self.elf.header
        count = hdr["e_phnum"]
        if count == 0xFFFF:
            raise DetectError("unsupported ELF: extended program header count")
        entsize = hdr["e_phentsize"]
        self._table("program headers", hdr["e_phoff"], count, entsize, 56 if self.is64 else 32)
        out: list[_Segment] = []
        for i in range(count):
            off = hdr["e_phoff"] + i * entsize
            p = self.elf.structs.Elf_Phdr.parse(bytes(self.buf[off : off + entsize]))
            out.append(
                _Segment(p["p_type"], p["p_flags"], p["p_offset"], p["p_vaddr"], p["p_filesz"])
            )
        return out

    def _sections(self) -> list[_Section]:
        hdr = self.elf.header
        shoff, entsize = hdr["e_shoff"], hdr["e_shentsize"]
        if shoff == 0:
            return []
        minsize = 64 if self.is64 else 40
        count = hdr["e_shnum"]
        strndx = hdr["e_shstrndx"]
        if count == 0 or strndx == 0xFFFF:
            # Extended numbering: the real values live in section header 0.
            self._table("section headers", shoff, 1, entsize, minsize)
            s0 = self.elf.structs.Elf_Shdr.parse(bytes(self.buf[shoff : shoff + entsize]))
            if count == 0:
                count = s0["sh_size"]
            if strndx == 0xFFFF:
                strndx = s0["sh_link"]
        if count > _MAX_SECTIONS:
            raise DetectError(f"malformed ELF: {count} section headers")
        self._table("section headers", shoff, count, entsize, minsize)
        raw = []
        for i in range(count):
            off = shoff + i * entsize
            raw.append(self.elf.structs.Elf_Shdr.parse(bytes(self.buf[off : off + entsize])))
        if not raw:
            return []
        if strndx >= count:
            raise DetectError(
                f"malformed ELF: section name table index {strndx} out of range ({count} sections)"
            )
        names = raw[strndx]
        n_off, n_size = names["sh_offset"], names["sh_size"]
        if names["sh_type"] == "SHT_NOBITS" or n_off + n_size > self.size:
            raise DetectError(
                f"truncated ELF: section name table at {n_off:#x} (+{n_size}) extends past the "
                f"end of the file ({self.size} bytes)"
            )
        out: list[_Section] = []
        for s in raw:
            nm = s["sh_name"]
            name = self._cstr(n_off + nm, n_off + n_size) if nm < n_size else ""
            out.append(
                _Section(
                    name,
                    s["sh_type"],
                    s["sh_flags"],
                    s["sh_addr"],
                    s["sh_offset"],
                    s["sh_size"],
                    s["sh_link"],
                    s["sh_entsize"],
                )
            )
        return out

    # -- helpers ---------------------------------------------------------------------------

    def _find(self, sub: bytes, start: int, end: int) -> int:
        """``bytes.find`` on the file's bytes (a memoryview window has no find of its own)."""
        if self.window is None:
            assert not isinstance(self.buf, memoryview)
            return self.buf.find(sub, start, end)
        mm, base = self.window
        i = mm.find(sub, base + start, base + end)
        return i - base if i >= 0 else -1

    def _cstr(self, off: int, end: int) -> str:
        end = min(end, off + _MAX_NAME, self.size)
        stop = self._find(b"\x00", off, end)
        return bytes(self.buf[off : stop if stop >= 0 else end]).decode("utf-8", "replace")

    def _checked(self, sec: _Section) -> _Section:
        if sec.stype != "SHT_NOBITS" and sec.offset + sec.size > self.size:
            raise DetectError(
                f"truncated ELF: section {sec.name or '?'} at {sec.offset:#x} (+{sec.size}) "
                f"extends past the end of the file ({self.size} bytes)"
            )
        return sec

    def _section(self, stype: str) -> _Section | None:
        for s in self.sections:
            if s.stype == stype:
                return self._checked(s)
        return None

    def _offset_of(self, vaddr: int, length: int) -> int | None:
        """File offset of ``length`` bytes at a virtual address, via the PT_LOAD mapping."""
        for seg in self.segments:
            if (
                seg.ptype == "PT_LOAD"
                and seg.vaddr <= vaddr
                and vaddr + length <= (seg.vaddr + seg.filesz)
            ):
                off = seg.offset + (vaddr - seg.vaddr)
                return off if off + length <= self.size else None
        return None

    def _code_at(self, vaddr: int, length: int) -> bytes:
        """Up to ``length`` bytes at a virtual address, never past its segment's end."""
        for seg in self.segments:
            if seg.ptype == "PT_LOAD" and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                off = seg.offset + (vaddr - seg.vaddr)
                end = min(off + length, seg.offset + seg.filesz, self.size)
                return bytes(self.buf[off:end]) if off < end else b""
        return b""

    def _readonly_regions(self) -> list[tuple[int, int]]:
        """.rodata, or without section headers the non-writable PT_LOAD segments."""
        if self.sections:
            regions = [
                (s.offset, s.offset + s.size)
                for s in self.sections
                if (s.name == ".rodata" or s.name.startswith(".rodata."))
                and s.stype == "SHT_PROGBITS"
            ]
            for _, end in regions:
                if end > self.size:
                    raise DetectError("truncated ELF: .rodata extends past the end of the file")
            return regions
        load = [s for s in self.segments if s.ptype == "PT_LOAD" and not s.flags & _PF_W]
        data = [s for s in load if not s.flags & _PF_X] or load
        # a segment placed past the end of the file has no bytes here (an offset beyond 2**63
        # would otherwise overflow the regex searches' bounds)
        return [(min(s.offset, self.size), min(s.offset + s.filesz, self.size)) for s in data]

    # -- dynamic table -----------------------------------------------------------------------

    def _dynamic(self) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
        """Dynamic entries and the (start, end) of the dynamic string table."""
        dyn = self._section("SHT_DYNAMIC")
        if dyn is not None:
            start, length = dyn.offset, dyn.size
        else:
            seg = next((s for s in self.segments if s.ptype == "PT_DYNAMIC"), None)
            if seg is None:
                return [], None
            start, length = seg.offset, seg.filesz
            if start + length > self.size:
                raise DetectError("truncated ELF: dynamic segment extends past the end of the file")
        fmt = self.end + ("qQ" if self.is64 else "iI")
        entsize = struct.calcsize(fmt)
        length = min(length, _MAX_DYNAMIC_BYTES) // entsize * entsize
        entries: list[tuple[int, int]] = []
        for tag, val in struct.iter_unpack(fmt, bytes(self.buf[start : start + length])):
            if tag == _DT_NULL:
                break
            entries.append((tag, val))
        strtab: tuple[int, int] | None = None
        if dyn is not None and 0 < dyn.link < len(self.sections):
            link = self._checked(self.sections[dyn.link])
            if link.stype == "SHT_STRTAB":
                strtab = (link.offset, link.offset + link.size)
        if strtab is None:
            tags = dict(entries)
            if _DT_STRTAB in tags and _DT_STRSZ in tags:
                off = self._offset_of(tags[_DT_STRTAB], tags[_DT_STRSZ])
                if off is None:
                    raise DetectError("malformed ELF: DT_STRTAB is outside the loaded segments")
                strtab = (off, off + tags[_DT_STRSZ])
        return entries, strtab

    def _dyn_string(self, strtab: tuple[int, int] | None, off: int, what: str) -> str:
        if strtab is None or off >= strtab[1] - strtab[0]:
            raise DetectError(f"malformed ELF: {what} string offset {off} outside .dynstr")
        return self._cstr(strtab[0] + off, strtab[1])

    # -- symbols ---------------------------------------------------------------------------

    def _symbols(
        self, entries: list[tuple[int, int]], strtab: tuple[int, int] | None
    ) -> Iterator[tuple[str, int, int, int, int]]:
        """Defined, exported symbols whose name starts with "cudnn": (name, type, value, size,
        shndx). Names are read only for those, so a large dynsym costs one unpack pass."""
        fmt = self.end + ("IBBHQQ" if self.is64 else "IIIBBH")
        entsize = struct.calcsize(fmt)
        dynsym = self._section("SHT_DYNSYM")
        if dynsym is not None:
            if dynsym.entsize != entsize:
                raise DetectError(f"malformed ELF: .dynsym entry size {dynsym.entsize}")
            start, count = dynsym.offset, dynsym.size // entsize
            if 0 < dynsym.link < len(self.sections):
                link = self._checked(self.sections[dynsym.link])
                strtab = (link.offset, link.offset + link.size)
        else:
            start, count = self._dynsym_from_tags(dict(entries), entsize, strtab)
        if strtab is None or count == 0:
            return
        count = min(count, _MAX_SYMBOLS)
        s_start, s_end = strtab
        blob = bytes(self.buf[start : start + count * entsize])
        for fields in struct.iter_unpack(fmt, blob):
            if self.is64:
                st_name, info, _, shndx, value, sym_size = fields
            else:
                st_name, value, sym_size, info, _, shndx = fields
            if shndx == 0 or info >> 4 not in (1, 2):  # undefined, or not GLOBAL/WEAK
                continue
            off = s_start + st_name
            if off + 5 > s_end or self.buf[off : off + 5] != b"cudnn":
                continue
            yield self._cstr(off, s_end), info & 0xF, value, sym_size, shndx

    def _dynsym_from_tags(
        self, tags: dict[int, int], entsize: int, strtab: tuple[int, int] | None
    ) -> tuple[int, int]:
        """Without section headers: DT_SYMTAB, counted by DT_HASH or up to the string table."""
        if _DT_SYMTAB not in tags:
            return 0, 0
        start = self._offset_of(tags[_DT_SYMTAB], entsize)
        if start is None:
            raise DetectError("malformed ELF: DT_SYMTAB is outside the loaded segments")
        count = 0
        if _DT_HASH in tags:
            hoff = self._offset_of(tags[_DT_HASH], 8)
            if hoff is not None:
                count = struct.unpack_from(self.end + "I", self.buf, hoff + 4)[0]
        elif strtab is not None and strtab[0] > start:
            count = (strtab[0] - start) // entsize
        count = min(count, (self.size - start) // entsize)
        return start, count

    def _read_int(self, value: int, shndx: int) -> int | None:
        off = self._offset_of(value, 4)
        if off is None and 0 < shndx < len(self.sections):
            s = self.sections[shndx]
            if s.stype != "SHT_NOBITS" and s.addr <= value < s.addr + s.size:
                off = s.offset + value - s.addr
                off = off if off + 4 <= self.size else None
        if off is None:
            return None
        return int(struct.unpack_from(self.end + "I", self.buf, off)[0])

    def _returned_immediate(self, value: int) -> int | None:
        """The constant a tiny ``return N;`` function returns (cudnnGetCudartVersion)."""
        code = self._code_at(value & ~1, 16)
        imm: int | None = None
        if self.machine == "x86_64":
            if code.startswith(b"\xf3\x0f\x1e\xfa"):  # endbr64 (-fcf-protection)
                code = code[4:]
            if code[:1] == b"\xb8" and code[5:6] == b"\xc3":  # mov eax, imm32; ret
                imm = int.from_bytes(code[1:5], "little")
        elif self.machine == "aarch64" and self.end == "<":
            words = [*struct.unpack(f"<{len(code) // 4}I", code[: len(code) // 4 * 4]), 0, 0, 0]
            if words[0] in (0xD503245F, 0xD503233F):  # bti c / paciasp
                words = words[1:]
            w0 = words[0]
            if w0 & 0xFFE0001F == 0x52800000:  # movz w0, #imm16
                imm = (w0 >> 5) & 0xFFFF
                w1 = words[1]
                if w1 & 0xFFE0001F == 0x72A00000:  # movk w0, #imm16, lsl #16
                    imm |= ((w1 >> 5) & 0xFFFF) << 16
                    w1 = words[2]
                if w1 != 0xD65F03C0:  # ret
                    imm = None
        # CUDA encodes versions as major*1000 + minor*10 (12040 = 12.4)
        if imm is not None and 7000 <= imm < 100000:
            return imm
        # Real cuDNN 9 wraps the constant in logging code: `mov eax, imm32` sits a few hundred
        # bytes into the function (seen in libcudnn_graph.so.9.28: b8 3a 2f 00 00 = 12090).
        return self._body_immediate(value, lambda v: 9000 <= v < 14000)

    def _body_immediate(self, value: int, plausible: Callable[[int], bool]) -> int | None:
        """First plausible ``mov eax, imm32`` in the first KiB of an x86-64 function."""
        if self.machine != "x86_64":
            return None
        code = self._code_at(value, _MAX_FUNCTION_SCAN)
        pos = code.find(b"\xb8")
        while 0 <= pos <= len(code) - 5:
            imm = int.from_bytes(code[pos + 1 : pos + 5], "little")
            if plausible(imm):
                return imm
            pos = code.find(b"\xb8", pos + 1)
        return None

    def _cudnn_get_version(self, value: int) -> int | None:
        """cudnnGetVersion()'s constant as a version int ((major<<16)|(minor<<8)|patch)."""
        imm = self._body_immediate(value, lambda v: 8000 <= v < 9000 or 90000 <= v < 100000)
        if imm is None:
            return None
        if imm < 9000:  # cuDNN 8: major*1000 + minor*100 + patch
            major, minor, patch = imm // 1000, imm % 1000 // 100, imm % 100
        else:  # cuDNN 9: major*10000 + minor*100 + patch
            major, minor, patch = imm // 10000, imm % 10000 // 100, imm % 100
        return (major << 16) | (minor << 8) | patch

    # -- searches --------------------------------------------------------------------------

    def _markers(self, regions: list[tuple[int, int]]) -> list[str]:
        found: list[str] = []
        for start, end in regions:
            end = min(end, start + MAX_SCAN_BYTES)
            pos, hits = start, 0
            while hits < _MAX_HITS:
                i = self._find(_MARKER_LITERAL, pos, end)
                if i < 0:
                    break
                hits += 1
                m = _MARKER_RE.match(self.buf, i, min(i + 160, end))
                if m is not None:
                    text = m.group(0).decode("ascii")
                    if text not in found:
                        found.append(text)
                pos = i + len(_MARKER_LITERAL)
        return found

    def _cuda_refs(self, regions: list[tuple[int, int]]) -> set[int]:
        majors: set[int] = set()
        for start, end in regions:
            end = min(end, start + MAX_SCAN_BYTES)
            for n, m in enumerate(_CUDA_REF_RE.finditer(self.buf, start, end)):
                if n >= _MAX_HITS:
                    break
                major = int(m.group(1))
                if 0 < major < 100:
                    majors.add(major)
        return majors

    def _toolkit_line(self, regions: list[tuple[int, int]]) -> str | None:
        """The one toolkit release line the build paths name; None when none or several do (a
        library built from two trees says nothing certain)."""
        lines: set[str] = set()
        for start, end in regions:
            end = min(end, start + MAX_SCAN_BYTES)
            for n, m in enumerate(_TOOLKIT_BUILD_RE.finditer(self.buf, start, end)):
                if n >= _MAX_HITS:
                    break
                lines.add(m.group(1).decode("ascii"))
        return lines.pop() if len(lines) == 1 else None

    def _driver_strings(self, regions: list[tuple[int, int]], basename: str) -> list[str]:
        found: list[str] = []
        named = _DRIVER_NAME_RE.search(basename)
        for start, end in regions:
            end = min(end, start + MAX_DRIVER_SCAN_BYTES)
            if named is not None:
                # The version the file name claims, anywhere in read-only data.
                want = named.group(1).encode()
                i = self._find(want, start, end)
                if i >= 0 and want.decode() not in found:
                    found.append(want.decode())
            for n, m in enumerate(_DRIVER_RE.finditer(self.buf, max(start - 1, 0), end)):
                if n >= _MAX_HITS or len(found) >= 8:
                    break
                text = m.group(1).decode("ascii")
                if text not in found:
                    found.append(text)
        return found

    # -- the analysis ------------------------------------------------------------------------

    def facts(self, basename: str) -> ElfFacts:
        entries, strtab = self._dynamic()
        soname: str | None = None
        needed: list[str] = []
        for tag, val in entries:
            if tag == _DT_SONAME:
                soname = self._dyn_string(strtab, val, "DT_SONAME")
            elif tag == _DT_NEEDED:
                needed.append(self._dyn_string(strtab, val, "DT_NEEDED"))

        scans: set[ContentSearch] = set()
        for n in (basename, soname):
            match = classify_name(n) if n else None
            if match is not None:
                scans |= match.classifier.scans

        version_ints: list[tuple[str, int]] = []
        cudart_build: int | None = None
        markers: list[str] = []
        refs: set[int] = set()
        version_strings: list[str] = []
        if ContentSearch.CUDNN in scans:
            for name, stype, value, sym_size, shndx in self._symbols(entries, strtab):
                if stype == _STT_OBJECT and sym_size == 4 and _VERSION_SYMBOL_RE.fullmatch(name):
                    v = self._read_int(value, shndx)
                    if v is not None:
                        version_ints.append((name, v))
                elif stype == _STT_FUNC and name == "cudnnGetCudartVersion":
                    cudart_build = self._returned_immediate(value)
                elif stype == _STT_FUNC and name == "cudnnGetVersion":
                    v = self._cudnn_get_version(value)
                    if v is not None:
                        version_ints.append(("cudnnGetVersion()", v))
        regions: list[tuple[int, int]] | None = None
        if ContentSearch.CUDNN in scans:
            regions = self._readonly_regions()
            markers = self._markers(regions)
        if ContentSearch.CUDA_REFS in scans:
            regions = regions if regions is not None else self._readonly_regions()
            refs |= self._cuda_refs(regions)
        if ContentSearch.DRIVER in scans:
            regions = regions if regions is not None else self._readonly_regions()
            version_strings = self._driver_strings(regions, basename)
        toolkit_line = None
        if ContentSearch.TOOLKIT_BUILD in scans:
            regions = regions if regions is not None else self._readonly_regions()
            toolkit_line = self._toolkit_line(regions)
        if strtab is not None:
            refs |= self._cuda_refs([strtab])
        for lib in needed:
            m = _CUDA_REF_RE.fullmatch(lib.encode())
            if m is not None:
                refs.add(int(m.group(1)))

        return ElfFacts(
            machine=self.machine,
            soname=soname,
            needed=tuple(needed),
            version_ints=tuple(sorted(set(version_ints))),
            markers=tuple(markers),
            version_strings=tuple(version_strings),
            cudart_build=cudart_build,
            referenced_cuda_majors=tuple(sorted(refs)),
            toolkit_line=toolkit_line,
        )
