"""Read what an ELF file needs from its dynamic loader and what device code it carries.

Read as the loader reads it, from the program headers, so a file without section headers (which
still runs) gives the same answer and section headers that disagree cannot mislead it
(docs/inspect.md). Every offset is checked before it is read: a hostile file ends in one
NotAnElf. Not pyelftools (the tests' oracle): it trusts section headers and stated counts."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.fatbin import (
    FATBIN_SECTIONS,
    WRAPPER_SECTION,
    FatbinEntry,
    Region,
    read_fatbin,
    search_containers,
)
from ninfer_kits.inspector.inputs import ByteSource, StrPath, open_regular, printable

ELF_MAGIC = b"\x7fELF"

MACHINES = {
    0: "none", 2: "sparc", 3: "i386", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390", 40: "arm",
    43: "sparcv9", 50: "ia64", 62: "x86-64", 183: "aarch64", 190: "cuda", 243: "riscv",
    258: "loongarch",
}
TYPES = {0: "NONE", 1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}

PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
SHT_PROGBITS, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS = 1, 6, 7, 8
SHT_GNU_VERDEF, SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE
# A relocatable cubin's `.nv.shared.<kernel>`: like NOBITS, no bytes in the file (its size is
# the kernel's shared memory, its offset a placeholder; nvcc 13.0).
SHT_CUDA_SHARED = 0x7000000A
FILELESS = frozenset({SHT_NOBITS, SHT_CUDA_SHARED})  # section types with no bytes in the file
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
DT_VERSYM, DT_VERDEF, DT_VERNEED = 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE
NT_GNU_BUILD_ID = 3
VER_FLG_BASE, VER_FLG_WEAK = 0x1, 0x2
PN_XNUM = SHN_XINDEX = 0xFFFF

T = TypeVar("T")


class VersionNeed(NamedTuple):
    """The symbol versions one file needs from one library (DT_VERNEED)."""

    library: str
    versions: tuple[str, ...]
    # VER_FLG_WEAK: glibc's loader does not require them (it says so in verbose mode only).
    weak: tuple[str, ...] = ()


class ElfInfo(NamedTuple):
    """Everything the floor is derived from, for one ELF file."""

    path: str
    elf_class: int
    machine: str
    type: str
    interpreter: str | None
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    build_id: str | None
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[str, ...]
    device_code: tuple[FatbinEntry, ...]
    # what was read differently, or not at all (no section headers, disagreeing ones, ...)
    remarks: tuple[str, ...] = ()
    # DT_VERSYM: a library without version definitions satisfies a versioned need (with a
    # warning) only when it has this table; glibc's loader asserts when it binds to one without.
    versym: bool = False


def is_elf(path: StrPath) -> bool:
    try:
        with open_regular(path) as file:
            return file.head(4) == ELF_MAGIC
    except Exception:
        return False


def read_elf(path: StrPath, name: str | None = None, shown: str | None = None) -> ElfInfo:
    """Inspect one regular file; `name` is its path in the report, `shown` its name in errors."""
    label = shown or str(path)
    with open_regular(path, label) as file:
        return file.read_with(lambda data: read_elf_buffer(data, name or str(path), label))


def read_elf_buffer(data: ByteSource, name: str, shown: str | None = None) -> ElfInfo:
    return read_guarded(data, shown or name, lambda elf: elf.info(name))


def read_guarded(data: ByteSource, shown: str, read: Callable[[_Elf], T]) -> T:
    """`read` of the ELF file in `data`, every failure one NotAnElf naming it, never a
    traceback."""
    label = printable(shown)
    if data[:4] != ELF_MAGIC:
        raise NotAnElf(f"{label}: not an ELF file")
    try:
        return read(_Elf(data))
    except _Corrupt as error:
        raise NotAnElf(f"{label}: corrupt or truncated ELF file ({error})") from error
    except NotAnElf as error:
        raise NotAnElf(f"{label}: {error}") from error
    except RecursionError as error:
        raise NotAnElf(f"{label}: corrupt ELF file (unreadable structure)") from error
    except Exception as error:  # a bug here must still name the file, in one line
        raise NotAnElf(f"{label}: corrupt or truncated ELF file ({_describe(error)})") from error


def _describe(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:120]}" if text else type(error).__name__


class _Corrupt(Exception):
    """What is wrong, in words; the caller adds the file's name."""


class _Segment(NamedTuple):
    number: int
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    align: int


class _Section(NamedTuple):
    number: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    addralign: int


class _Dynamic:
    def __init__(self) -> None:
        self.needed: list[int] = []
        self.soname: int | None = None
        self.rpath: list[int] | None = None
        self.runpath: list[int] | None = None
        self.strtab: int | None = None
        self.strsz: int | None = None
        self.verneed: int | None = None
        self.verdef: int | None = None
        self.versym: int | None = None


class _Elf:
    def __init__(self, data: ByteSource) -> None:
        self.data = data
        self.size = len(data)
        self.remarks: list[str] = []
        # Many references to one long string must not make a small file allocate without bound.
        self.string_budget = 4 * self.size + (1 << 20)
        ident = bytes(data[:16])
        if len(ident) < 16:
            raise _Corrupt(f"only {self.size} bytes, shorter than an ELF identification")
        if ident[4] not in (1, 2):
            raise _Corrupt(f"unknown ELF class {ident[4]}")
        if ident[5] not in (1, 2):
            raise _Corrupt(f"unknown byte order {ident[5]}")
        self.is64 = ident[4] == 2
        order = "<" if ident[5] == 1 else ">"
        self.elf_class = 64 if self.is64 else 32
        word = "Q" if self.is64 else "I"
        self.s_header = struct.Struct(order + ("HHIQQQIHHHHHH" if self.is64 else "HHIIIIIHHHHHH"))
        self.s_phdr = struct.Struct(order + ("IIQQQQQQ" if self.is64 else "IIIIIIII"))
        self.s_shdr = struct.Struct(order + f"II{word}{word}{word}{word}II{word}{word}")
        self.s_dyn = struct.Struct(order + ("qQ" if self.is64 else "iI"))
        self.s_verneed = struct.Struct(order + "HHIII")
        self.s_vernaux = struct.Struct(order + "IHHII")
        self.s_verdef = struct.Struct(order + "HHHHIII")
        self.s_verdaux = struct.Struct(order + "II")
        self.s_note = struct.Struct(order + "III")
        header = self._unpack(self.s_header, 16, "the ELF header")
        (self.e_type, self.e_machine, _version, _entry, self.phoff, self.shoff, _flags,
         _ehsize, self.phentsize, self.phnum, self.shentsize, self.shnum,
         self.shstrndx) = header
        self.sections = self._sections()
        self.segments = self._segments()
        self._check_loadable()

    # --- reading, bounded -------------------------------------------------------------------

    def _unpack(self, layout: struct.Struct, at: int, what: str) -> tuple[int, ...]:
        if at < 0 or at + layout.size > self.size:
            raise _Corrupt(f"{what} at offset {at:#x} lies past the end of the file "
                           f"({self.size} bytes)")
        return layout.unpack_from(self.data, at)

    def _table(self, offset: int, count: int, entsize: int, layout: struct.Struct,
               what: str) -> list[tuple[int, ...]]:
        if count == 0:
            return []
        if entsize < layout.size:
            raise _Corrupt(f"{what} entries of {entsize} bytes, smaller than {layout.size}")
        end = offset + count * entsize
        if offset < 0 or end > self.size:
            raise _Corrupt(f"{what} ({count} entries of {entsize} bytes at offset {offset:#x}) "
                           f"runs past the end of the file ({self.size} bytes)")
        if entsize == layout.size:
            return list(layout.iter_unpack(self.data[offset:end]))
        return [layout.unpack_from(self.data, offset + i * entsize) for i in range(count)]

    def _string(self, table: int, size: int, index: int, what: str) -> str:
        if index >= size:
            raise _Corrupt(f"{what}: string offset {index:#x} outside its string table "
                           f"({size} bytes)")
        start = table + index
        end = self.data.find(b"\0", start, table + size)
        if end < 0:
            raise _Corrupt(f"{what}: unterminated string at offset {start:#x}")
        self.string_budget -= end - start
        if self.string_budget < 0:
            raise _Corrupt(f"{what}: strings referenced over and over (more bytes of them than "
                           f"four times the file)")
        return bytes(self.data[start:end]).decode("utf-8", "surrogateescape")

    # --- headers --------------------------------------------------------------------------------

    def _sections(self) -> list[_Section]:
        if self.shoff == 0:
            self.remarks.append(
                "no section headers (e_shoff = 0): read what the loader reads, from the "
                "program headers")
            return []
        count, names_index = self.shnum, self.shstrndx
        if count == 0 or names_index == SHN_XINDEX:  # the real values live in section 0
            first = self._table(self.shoff, 1, self.shentsize, self.s_shdr, "section header 0")
            count = count or first[0][5]
            if names_index == SHN_XINDEX:
                names_index = first[0][6]
        rows = self._table(self.shoff, count, self.shentsize, self.s_shdr,
                           "the section header table")
        if self.phnum == PN_XNUM and rows:
            self.phnum = rows[0][7]
        names = self._names(rows, names_index)
        return [
            _Section(number=i, name=names(row[0]), type=row[1], flags=row[2], addr=row[3],
                     offset=row[4], size=row[5], addralign=row[8])
            for i, row in enumerate(rows)
        ]

    def _names(self, rows: list[tuple[int, ...]], index: int) -> _NameReader:
        if not 0 < index < len(rows) or rows[index][1] in FILELESS:
            if index:
                self.remarks.append(f"section names unreadable (e_shstrndx {index})")
            return _NameReader(self, 0, 0)
        offset, size = rows[index][4], rows[index][5]
        if offset + size > self.size:
            self.remarks.append("section names unreadable (their table runs past the end of "
                                "the file)")
            return _NameReader(self, 0, 0)
        return _NameReader(self, offset, size)

    def _segments(self) -> list[_Segment]:
        if self.phoff == 0 or self.phnum == 0:
            return []
        rows = self._table(self.phoff, self.phnum, self.phentsize, self.s_phdr,
                           "the program header table")
        segments = []
        for i, row in enumerate(rows):
            if self.is64:
                p_type, flags, offset, vaddr, _paddr, filesz, _memsz, align = row
            else:
                p_type, offset, vaddr, _paddr, filesz, _memsz, flags, align = row
            segments.append(_Segment(i, p_type, flags, offset, vaddr, filesz, align))
        return segments

    def _check_loadable(self) -> None:
        if self.e_type not in (2, 3):  # EXEC, DYN
            return
        for segment in self.segments:
            if segment.type in (PT_LOAD, PT_DYNAMIC, PT_INTERP) and segment.filesz and (
                    segment.offset + segment.filesz > self.size):
                raise _Corrupt(f"segment {segment.number} ({segment.filesz} bytes at offset "
                               f"{segment.offset:#x}) runs past the end of the file "
                               f"({self.size} bytes)")

    def _file_offset(self, address: int, what: str) -> tuple[int, int]:
        """The file offset of a virtual address, and the bytes left in its segment."""
        for segment in self.segments:
            if segment.type == PT_LOAD and segment.vaddr <= address < (
                    segment.vaddr + segment.filesz):
                delta = address - segment.vaddr
                return segment.offset + delta, segment.filesz - delta
        for section in self.sections:  # files without PT_LOAD (objects) keep them in sections
            if section.type not in FILELESS and section.addr <= address < (
                    section.addr + section.size) and section.flags & SHF_ALLOC:
                delta = address - section.addr
                return section.offset + delta, section.size - delta
        raise _Corrupt(f"{what} address {address:#x} lies in no loadable segment")

    # --- the loader's view --------------------------------------------------------------------

    def _dynamic_region(self) -> tuple[int, int] | None:
        for segment in self.segments:
            if segment.type == PT_DYNAMIC:
                return segment.offset, segment.filesz
        for section in self.sections:  # no PT_DYNAMIC: an object or a debug file, at most
            if section.type == SHT_DYNAMIC:
                return section.offset, section.size
        return None

    def _dynamic(self) -> _Dynamic:
        dynamic = _Dynamic()
        region = self._dynamic_region()
        if region is None:
            return dynamic
        offset, size = region
        if size == 0:
            if self.e_type in (2, 3):
                self.remarks.append("the dynamic segment has no bytes in the file (a separate "
                                    "debug file?): no library needs could be read")
            return dynamic
        if offset + size > self.size:
            raise _Corrupt(f"the dynamic section ({size} bytes at offset {offset:#x}) runs past "
                           f"the end of the file ({self.size} bytes)")
        count = size // self.s_dyn.size
        for tag, value in self._table(offset, count, self.s_dyn.size, self.s_dyn,
                                      "the dynamic section"):
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                dynamic.needed.append(value)
            elif tag == DT_SONAME:
                dynamic.soname = value
            elif tag == DT_RPATH:
                dynamic.rpath = [*(dynamic.rpath or []), value]
            elif tag == DT_RUNPATH:
                dynamic.runpath = [*(dynamic.runpath or []), value]
            elif tag == DT_STRTAB:
                dynamic.strtab = value
            elif tag == DT_STRSZ:
                dynamic.strsz = value
            elif tag == DT_VERNEED:
                dynamic.verneed = value
            elif tag == DT_VERDEF:
                dynamic.verdef = value
            elif tag == DT_VERSYM:
                dynamic.versym = value
        return dynamic

    def _strings(self, dynamic: _Dynamic) -> tuple[int, int]:
        if dynamic.strtab is None:
            return 0, 0
        offset, available = self._file_offset(dynamic.strtab, "DT_STRTAB")
        size = available if dynamic.strsz is None else min(dynamic.strsz, available)
        return offset, size

    def _interpreter(self) -> str | None:
        for segment in self.segments:
            if segment.type == PT_INTERP and segment.filesz:
                if segment.offset + segment.filesz > self.size:
                    raise _Corrupt("PT_INTERP runs past the end of the file")
                raw = bytes(self.data[segment.offset:segment.offset + segment.filesz])
                return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        return None

    def _version_needs(self, dynamic: _Dynamic, strings: tuple[int, int]) -> list[VersionNeed]:
        """DT_VERNEED, walked as ld.so walks it: by `vn_next`/`vna_next` until a zero link."""
        if dynamic.verneed is None:
            return []
        table, size = strings
        at, _ = self._file_offset(dynamic.verneed, "DT_VERNEED")
        needs: list[VersionNeed] = []
        seen: set[int] = set()
        entries = self.size // 16  # each entry of a need takes 16 bytes of its own
        while True:
            if at in seen or len(seen) > self.size // 16:
                raise _Corrupt("the version needs (DT_VERNEED) form a loop")
            seen.add(at)
            _version, count, file_name, aux, next_need = self._unpack(
                self.s_verneed, at, "a version need")
            library = self._string(table, size, file_name, "DT_VERNEED")
            names, weak, aux_at = [], [], at + aux
            for _ in range(min(count, self.size // 16)):
                _hash, flags, _other, name, next_aux = self._unpack(
                    self.s_vernaux, aux_at, "a version need entry")
                names.append(self._string(table, size, name, "DT_VERNEED"))
                if flags & VER_FLG_WEAK:
                    weak.append(names[-1])
                entries -= 1
                if entries < 0:
                    raise _Corrupt("the version needs (DT_VERNEED) have more entries than the "
                                   "file has room for")
                if next_aux == 0:
                    break
                aux_at += next_aux
            needs.append(VersionNeed(library=library, versions=tuple(names), weak=tuple(weak)))
            if next_need == 0:
                return needs
            at += next_need

    def _verdef_entries(self, address: int | None,
                        strings: tuple[int, int]) -> Iterator[tuple[int, str]]:
        """DT_VERDEF's (index, version) pairs, without the base entry (the file's own name)."""
        if address is None:
            return
        table, size = strings
        at, _ = self._file_offset(address, "DT_VERDEF")
        seen: set[int] = set()
        while True:
            if at in seen or len(seen) > self.size // 20:
                raise _Corrupt("the version definitions (DT_VERDEF) form a loop")
            seen.add(at)
            _version, flags, index, count, _hash, aux, next_def = self._unpack(
                self.s_verdef, at, "a version definition")
            if not flags & VER_FLG_BASE and count:
                name, _next = self._unpack(self.s_verdaux, at + aux, "a version name")
                yield index & 0x7FFF, self._string(table, size, name, "DT_VERDEF")
            if next_def == 0:
                return
            at += next_def

    def _disagreements(self, dynamic: _Dynamic) -> None:
        """A remark where section headers disagree with the program headers (read alone)."""
        if not self.sections:
            return
        differ = []
        by_type: dict[int, list[_Section]] = {}
        for section in self.sections:
            by_type.setdefault(section.type, []).append(section)
        region = next(((s.offset, s.filesz) for s in self.segments if s.type == PT_DYNAMIC), None)
        if region is not None and region[1] and not any(s.offset == region[0]
                                           for s in by_type.get(SHT_DYNAMIC, [])):
            differ.append("dynamic section")
        for tag, kind, name in ((dynamic.verneed, SHT_GNU_VERNEED, "version needs"),
                                (dynamic.verdef, SHT_GNU_VERDEF, "version definitions")):
            if tag is not None and not any(s.addr == tag for s in by_type.get(kind, [])):
                differ.append(name)
        if differ:
            self.remarks.append(f"the section headers disagree with the program headers "
                                f"({', '.join(differ)}): read what the loader reads")

    # --- notes and device code ----------------------------------------------------------------

    def _build_id(self) -> str | None:
        """The GNU build-id note: owner "GNU" too (SystemTap's notes also use type 3)."""
        regions = [(s.offset, s.filesz, s.align) for s in self.segments if s.type == PT_NOTE]
        if not regions:
            regions = [(s.offset, s.size, s.addralign) for s in self.sections
                       if s.type == SHT_NOTE]
        for offset, size, align in regions:
            found = self._gnu_build_id(offset, min(offset + size, self.size),
                                       8 if align == 8 else 4)
            if found is not None:
                return found
        return None

    def _gnu_build_id(self, position: int, end: int, align: int) -> str | None:
        pad = align - 1
        while position >= 0 and position + 12 <= end:
            namesz, descsz, note_type = self.s_note.unpack_from(self.data, position)
            name_at = position + 12
            desc_at = name_at + ((namesz + pad) & ~pad)
            if desc_at + descsz > end:
                return None  # a malformed note ends the area, as in readelf
            owner = bytes(self.data[name_at:name_at + namesz]).rstrip(b"\0")
            if owner == b"GNU" and note_type == NT_GNU_BUILD_ID and descsz:
                return bytes(self.data[desc_at:desc_at + descsz]).hex()
            position = desc_at + ((descsz + pad) & ~pad)
        return None

    def _device_code(self) -> list[FatbinEntry]:
        if self.e_type == 4:  # CORE
            return []
        if not self.sections:
            return self._device_code_in_segments()
        entries: list[FatbinEntry] = []
        searched: list[Region] = []  # ranked after the fatbin sections: searched after them
        for rank, section in self._sections_to_read():
            end = section.offset + section.size
            if rank < len(FATBIN_SECTIONS):
                entries.extend(read_fatbin(self.data, section.name, section.offset,
                                           section.size))
                continue
            if end > self.size:
                self.remarks.append(f"section {section.name} runs past the end of the file: "
                                    f"device code searched only in what is there")
            searched.append((section.offset, end, section.name, None))
        for found in search_containers(self.data, searched):
            entries.extend(found)
        return entries

    def _sections_to_read(self) -> list[tuple[int, _Section]]:
        """The fatbin sections, then the data sections to search; a section overlapping bytes
        already claimed is left out (with a remark), so each byte is read once."""
        wanted = []
        for section in self.sections:
            if not section.size or section.type in FILELESS:
                continue
            if section.name in FATBIN_SECTIONS:
                wanted.append((FATBIN_SECTIONS.index(section.name), section))
            elif _holds_data(section):
                wanted.append((len(FATBIN_SECTIONS), section))
        wanted.sort(key=lambda item: (item[1].offset, item[0]))
        chosen, left_out, covered = [], [], 0
        for rank, section in wanted:
            if section.offset < covered:
                left_out.append(section.name)
                continue
            chosen.append((rank, section))
            covered = section.offset + section.size
        if left_out:
            shown = ", ".join(left_out[:5]) + (", ..." if len(left_out) > 5 else "")
            self.remarks.append(f"{len(left_out)} section(s) overlap bytes another one holds "
                                f"({shown}): not read twice")
        return sorted(chosen, key=lambda item: (item[0], item[1].number))

    def _device_code_in_segments(self) -> list[FatbinEntry]:
        loads = sorted((s for s in self.segments if s.type == PT_LOAD), key=lambda s: s.offset)
        if not loads:
            if self.e_type in (2, 3):
                self.remarks.append("no section headers and no loadable segment: device code "
                                    "could not be looked for")
            return []
        searched: list[Region] = []
        covered = 0
        for segment in loads:
            start = max(segment.offset, covered)
            end = min(segment.offset + segment.filesz, self.size)
            if start < end:
                searched.append((start, end, "", segment.number))
            covered = max(covered, end)
        entries = [entry for found in search_containers(self.data, searched) for entry in found]
        self.remarks.append(
            "device code looked for in the loadable segments (no section headers): "
            + ("found containers cannot be told apart as .nv_fatbin (loaded by the CUDA "
               "runtime) or __nv_relfatbin (device-link inputs)" if entries
               else "none found"))
        return entries

    # --- all of it ----------------------------------------------------------------------------

    def info(self, path: str) -> ElfInfo:
        dynamic = self._dynamic()
        strings = self._strings(dynamic)
        table, size = strings

        def text(index: int, what: str) -> str:
            return self._string(table, size, index, what)

        if dynamic.needed and dynamic.strtab is None:
            raise _Corrupt("DT_NEEDED without DT_STRTAB")
        self._disagreements(dynamic)
        interpreter = self._interpreter()
        if self.e_type == 2 and not any(s.type == PT_DYNAMIC for s in self.segments):
            self.remarks.append("no dynamic segment: statically linked, needs no shared "
                                "library")
        return ElfInfo(
            path=path,
            elf_class=self.elf_class,
            machine=MACHINES.get(self.e_machine, f"machine-{self.e_machine}"),
            type=TYPES.get(self.e_type, f"type-{self.e_type:#x}"),
            interpreter=interpreter,
            soname=None if dynamic.soname is None else text(dynamic.soname, "DT_SONAME"),
            needed=tuple(text(index, "DT_NEEDED") for index in dynamic.needed),
            rpath=_split_paths([text(i, "DT_RPATH") for i in dynamic.rpath or []]),
            runpath=_split_paths([text(i, "DT_RUNPATH") for i in dynamic.runpath or []]),
            build_id=self._build_id(),
            version_needs=tuple(self._version_needs(dynamic, strings)),
            version_defs=tuple(name for _index, name in self._verdef_entries(
                dynamic.verdef, strings)),
            device_code=tuple(self._device_code()),
            remarks=tuple(self.remarks),
            versym=dynamic.versym is not None,
        )


class _NameReader:
    """Section names from `.shstrtab`, on demand; an unreadable one is ""."""

    def __init__(self, elf: _Elf, offset: int, size: int) -> None:
        self.elf, self.offset, self.size = elf, offset, size

    def __call__(self, index: int) -> str:
        if index >= self.size:
            return ""
        try:
            return self.elf._string(self.offset, self.size, index, "a section name")
        except _Corrupt:
            return ""


def _holds_data(section: _Section) -> bool:
    """Whether to search it for fatbin containers: allocated data and `.rodata`, never code."""
    if section.type != SHT_PROGBITS or not section.flags & SHF_ALLOC:
        return False
    if section.flags & SHF_EXECINSTR or section.name in (*FATBIN_SECTIONS, WRAPPER_SECTION):
        return False
    return bool(section.flags & SHF_WRITE) or section.name.startswith((".rodata", ".lrodata"))


def _split_paths(values: list[str]) -> tuple[str, ...]:
    # Empty entries stay visible: the loader reads one as the current directory.
    return tuple(part for value in values for part in value.split(":"))
