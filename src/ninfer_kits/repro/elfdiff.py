"""Why two ELF files differ: the sections, and each one's cause by what the section is (the
build-id, a symbol or string table, a fatbin, else the text around each differing range).
A cubin inside a fatbin goes through the same comparison, one level down."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import zip_longest

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.elfread import (
    SHF_EXECINSTR,
    SHT_DYNSYM,
    SHT_NOTE,
    SHT_SYMTAB,
    STT_FILE,
    ElfLayout,
    Section,
    Symbol,
    build_id,
    is_string_table,
    read_layout,
    section_text,
    symbols,
)
from ninfer_kits.inspector.fatbin import FATBIN_SECTIONS
from ninfer_kits.inspector.inputs import ByteSource
from ninfer_kits.inspector.linetable import file_entries
from ninfer_kits.repro import device, model
from ninfer_kits.repro.bytesdiff import (
    differing,
    first_difference,
    read_as,
    text_around,
)
from ninfer_kits.repro.model import Cause, Extent, Limits, SectionDiff
from ninfer_kits.repro.textdiff import differing_runs

BUILD_ID_SECTION = ".note.gnu.build-id"
LINE_TABLE = ".debug_line"
# Causes are listed with what explains most first; those that follow from others last.
ORDER = {model.BUILD_ID: 1, model.SYMBOL_VALUE: 1, model.BYTES: 2, model.NOT_EXPLAINED: 3}
SHOWN_SYMBOLS = 8
MAX_DEPTH = 1  # an ELF inside a fatbin inside an ELF, and no deeper
MIN_STRING = 8  # printable bytes around a difference read as a string (in data, not code)


@dataclass(frozen=True)
class ElfDiff:
    sections: tuple[SectionDiff, ...]
    causes: tuple[Cause, ...]


@dataclass
class _Pair:
    """Both files while they are compared: their bytes, layouts and (read once) symbols."""

    a: ByteSource
    b: ByteSource
    la: ElfLayout
    lb: ElfLayout
    limits: Limits
    prefix: str
    depth: int
    symbols_a: list[Symbol] | None = None
    explained: set[str] = field(default_factory=set)  # string tables their symbols explained

    def name(self, section: str) -> str:
        return f"{self.prefix}{section}"


def diff_elf(a: ByteSource, b: ByteSource, shown: str, limits: Limits, *, prefix: str = "",
             depth: int = 0) -> ElfDiff:
    """Compare two ELF files; NotAnElf (naming `shown`) if either does not parse."""
    pair = _Pair(a, b, read_layout(a, f"{shown} (a)"), read_layout(b, f"{shown} (b)"), limits,
                 prefix, depth)
    causes: list[Cause] = []
    paired = list(_paired(pair.la, pair.lb))
    diffs: dict[int, SectionDiff] = {}  # by index into `paired`: names repeat (.group)
    for index, (left, right) in enumerate(paired):
        if left is None or right is None:
            diffs[index] = _extent_only(pair, left, right)
            continue
        ranges = differing(a, left.offset, _stored(left), b, right.offset, _stored(right),
                           limits.ranges)
        if ranges or left.size != right.size:
            diffs[index] = SectionDiff(pair.name(left.name), Extent(left.offset, left.size),
                                       Extent(right.offset, right.size), ranges.ranges,
                                       ranges.more)
    differing_names = {section.name for index in diffs
                       if (section := paired[index][0]) is not None}
    causes.extend(_layout_causes(pair, paired))
    for index in sorted(range(len(paired)), key=lambda i: _symbol_tables_first(paired[i])):
        left, right = paired[index]
        if left is None or right is None:
            continue
        diff = diffs.get(index)
        if diff is not None:
            causes.extend(_explain(pair, left, right, diff))
        elif _names_differ(pair, left, differing_names):
            # Same entries, other names (only the string table's bytes differ): the symbols'.
            causes.extend(_symbols(pair, left, right))
        if len(causes) >= limits.causes:
            causes.append(_limit_reached(limits))
            break
    sections = [diffs[index] for index in sorted(diffs)]
    if not sections:
        causes.extend(_outside_sections(pair))
    causes = _with_followers(causes, _resized_strings(paired, diffs))
    ordered = sorted(_with_build_id_words(_unique(causes)), key=lambda c: ORDER.get(c.kind, 0))
    return ElfDiff(tuple(sections), tuple(ordered))


def _resized_strings(paired: list[tuple[Section | None, Section | None]],
                     diffs: dict[int, SectionDiff]) -> list[str]:
    """String tables whose size differs: every offset into them after the change moved."""
    return [left.name for left, right in (paired[index] for index in diffs)
            if left and right and is_string_table(left) and left.size != right.size]


def _with_followers(causes: list[Cause], resized: list[str]) -> list[Cause]:
    if not resized:
        return causes
    words = (f" (likely a consequence: {', '.join(resized)} changed size, so offsets into it "
             f"moved)")
    return [replace(cause, detail=cause.detail + words) if cause.kind == model.BYTES else cause
            for cause in causes]


def _limit_reached(limits: Limits) -> Cause:
    return Cause(model.NOT_EXPLAINED, f"more differences follow, not explained: the limit of "
                                      f"{limits.causes} causes per member was reached")


def _symbol_tables_first(pair: tuple[Section | None, Section | None]) -> int:
    """Symbol tables are explained before string tables, which their names then explain."""
    section = pair[0] or pair[1]
    return 0 if section is not None and section.type in (SHT_SYMTAB, SHT_DYNSYM) else 1


def _names_differ(pair: _Pair, section: Section, differing_names: set[str]) -> bool:
    """Whether `section` is a symbol table whose string table differs."""
    if section.type not in (SHT_SYMTAB, SHT_DYNSYM) or not 0 < section.link < len(
            pair.la.sections):
        return False
    return pair.la.sections[section.link].name in differing_names


def _stored(section: Section) -> int:
    return section.size if section.has_bytes else 0


def _paired(la: ElfLayout, lb: ElfLayout) -> Iterator[tuple[Section | None, Section | None]]:
    """Sections of both files by (name, order among that name), in a's order, then b's rest."""
    def keyed(layout: ElfLayout) -> dict[tuple[str, int], Section]:
        seen: dict[str, int] = {}
        table = {}
        for section in layout.sections[1:]:  # [0] is the null section
            number = seen.get(section.name, 0)
            seen[section.name] = number + 1
            table[(section.name, number)] = section
        return table

    left, right = keyed(la), keyed(lb)
    for key, section in left.items():
        yield section, right.get(key)
    for key, section in right.items():
        if key not in left:
            yield None, section


def _extent_only(pair: _Pair, left: Section | None, right: Section | None) -> SectionDiff:
    section = left or right
    assert section is not None
    return SectionDiff(pair.name(section.name),
                       None if left is None else Extent(left.offset, left.size),
                       None if right is None else Extent(right.offset, right.size))


def _layout_causes(pair: _Pair, paired: list[tuple[Section | None, Section | None]]
                   ) -> list[Cause]:
    causes = []
    for left, right in paired:
        if left is None or right is None:
            section = left or right
            assert section is not None
            side = "a" if right is None else "b"
            causes.append(Cause(model.SECTION_LAYOUT, f"section {section.name} only in {side} "
                                                      f"({section.size} bytes)",
                                section=pair.name(section.name)))
    return causes


def _explain(pair: _Pair, left: Section, right: Section, diff: SectionDiff) -> list[Cause]:
    if left.name == BUILD_ID_SECTION or (
            left.type == SHT_NOTE and build_id(pair.a, pair.la, left) is not None):
        return _build_id(pair, left, right)
    if left.type in (SHT_SYMTAB, SHT_DYNSYM):
        return _symbols(pair, left, right) or [_bytes(pair, left, diff)]
    if left.name in FATBIN_SECTIONS:
        return _fatbin(pair, left, right)
    if is_string_table(left):
        if left.name in pair.explained:
            return []
        found = _strings(pair, left, right)
        if found is not None:
            return found or [_bytes(pair, left, diff)]
    if left.name == LINE_TABLE:
        found = _source_times(pair, left, right, diff)
        if found:
            return found
    return _by_ranges(pair, left, right, diff) or [_bytes(pair, left, diff)]


# --- a line table's source file times ----------------------------------------------------------


def _source_times(pair: _Pair, left: Section, right: Section, diff: SectionDiff) -> list[Cause]:
    """The source files whose modification time differs in two line tables (nvcc -lineinfo
    writes them); what else differs there is read as usual."""
    a_files = file_entries(section_text(pair.a, pair.la, left))
    b_files = file_entries(section_text(pair.b, pair.lb, right))
    if a_files is None or b_files is None or len(a_files) != len(b_files):
        return []
    causes = []
    for a_file, b_file in zip(a_files, b_files, strict=True):
        if (a_file.name, a_file.directory) == (b_file.name, b_file.directory) and \
                a_file.mtime != b_file.mtime:
            causes.append(Cause(
                model.EMBEDDED_TIME,
                f"the modification time of source file {a_file.name} in the line table differs: "
                f"the compiler (nvcc -lineinfo) records each file's mtime; build from an export "
                f"whose files all carry one fixed time, as ninfer-kits does",
                section=pair.name(left.name), a=_utc(a_file.mtime), b=_utc(b_file.mtime)))
    if not causes:
        return []
    renamed = any((a.name, a.directory) != (b.name, b.directory)
                  for a, b in zip(a_files, b_files, strict=True))
    return causes + (_by_ranges(pair, left, right, diff) if renamed else [])


def _utc(seconds: int) -> str:
    import time

    try:
        shown = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))
    except (OverflowError, OSError, ValueError):
        return str(seconds)
    return f"{seconds} ({shown})"


# --- build-id ----------------------------------------------------------------------------------


def _build_id(pair: _Pair, left: Section, right: Section) -> list[Cause]:
    a_id, b_id = build_id(pair.a, pair.la, left), build_id(pair.b, pair.lb, right)
    return [Cause(model.BUILD_ID, "the GNU build-id differs", section=pair.name(left.name),
                  a=a_id, b=b_id)]


def _with_build_id_words(causes: list[Cause]) -> list[Cause]:
    """The build-id's words, now that the other causes are known: a computed one follows from
    them; alone, it was set explicitly or computed from something outside the file."""
    others = any(cause.kind != model.BUILD_ID for cause in causes)
    words = ("the GNU build-id differs: the linker derives it from the file's other bytes, so "
             "it follows from the other differences" if others else
             "only the GNU build-id differs: it was given explicitly (--build-id=0x…) or "
             "derived from something outside the file's other bytes")
    return [replace(cause, detail=words) if cause.kind == model.BUILD_ID else cause
            for cause in causes]


# --- symbols -----------------------------------------------------------------------------------


def _symbols(pair: _Pair, left: Section, right: Section) -> list[Cause]:
    a_symbols, b_symbols = symbols(pair.a, pair.la, left), symbols(pair.b, pair.lb, right)
    if left.type == SHT_SYMTAB:
        pair.symbols_a = a_symbols
    where = pair.name(left.name)
    causes = []
    a_files = [s.name for s in a_symbols if s.type == STT_FILE]
    b_files = [s.name for s in b_symbols if s.type == STT_FILE]
    for a_name, b_name in zip_longest(a_files, b_files):
        if a_name != b_name:
            causes.append(Cause(model.FILE_SYMBOL, _file_words(a_name, b_name), section=where,
                                a=a_name, b=b_name))
    a_others = [s for s in a_symbols if s.type != STT_FILE]
    b_others = [s for s in b_symbols if s.type != STT_FILE]
    causes.extend(_names(a_others, b_others, where))
    causes.extend(_values(a_others, b_others, where))
    if causes and 0 < left.link < len(pair.la.sections):
        pair.explained.add(pair.la.sections[left.link].name)
    return causes


def _file_words(a_name: str | None, b_name: str | None) -> str:
    words = "an STT_FILE symbol (the source file name the compiler saw) differs"
    if any(name and "tmpxft_" in name for name in (a_name, b_name)):
        words += (": nvcc's temporary file, named after its process id (nvcc -objtemp names "
                  "it after the object file instead)")
    return words


def _names(a_symbols: list[Symbol], b_symbols: list[Symbol], where: str) -> list[Cause]:
    a_names, b_names = [s.name for s in a_symbols], [s.name for s in b_symbols]
    causes = []
    for i1, i2, j1, j2 in differing_runs(a_names, b_names):
        for a_name, b_name in zip_longest(a_names[i1:i2], b_names[j1:j2]):
            causes.append(Cause(model.SYMBOL_NAME, _symbol_words(a_name, b_name),
                                section=where, a=a_name, b=b_name))
            if len(causes) >= SHOWN_SYMBOLS:
                return causes
    return causes


def _symbol_words(a_name: str | None, b_name: str | None) -> str:
    if a_name is None or b_name is None:
        return f"a symbol only in {'b' if a_name is None else 'a'}"
    if "_INTERNAL_" in a_name or "_INTERNAL_" in b_name:
        return ("a symbol's name differs: cudafe's per-compile name for an internal (anonymous "
                "namespace or static) entity; nvcc -frandom-seed=<per-file seed> fixes it")
    return "a symbol's name differs"


def _values(a_symbols: list[Symbol], b_symbols: list[Symbol], where: str) -> list[Cause]:
    if [s.name for s in a_symbols] != [s.name for s in b_symbols]:
        return []  # names first: values of renamed symbols say nothing more
    moved = [(x, y) for x, y in zip(a_symbols, b_symbols, strict=True)
             if (x.value, x.size) != (y.value, y.size) and x.name]
    if not moved:
        return []
    shown = moved[:SHOWN_SYMBOLS]
    more = f" and {len(moved) - len(shown)} more" if len(moved) > len(shown) else ""
    return [Cause(model.SYMBOL_VALUE,
                  f"{len(moved)} symbol(s) have other values or sizes (code or data moved or "
                  f"changed size): {', '.join(x.name for x, _ in shown)}{more}", section=where,
                  a="; ".join(f"{x.name} value {x.value:#x} size {x.size}" for x, _ in shown),
                  b="; ".join(f"{y.name} value {y.value:#x} size {y.size}" for _, y in shown))]


# --- strings -----------------------------------------------------------------------------------


def _strings(pair: _Pair, left: Section, right: Section) -> list[Cause] | None:
    """The differing strings of two string tables; None when there are too many to compare."""
    a_raw, b_raw = section_text(pair.a, pair.la, left), section_text(pair.b, pair.lb, right)
    if max(a_raw.count(b"\0"), b_raw.count(b"\0")) > pair.limits.strings:
        return None
    a_strings, b_strings = a_raw.split(b"\0"), b_raw.split(b"\0")
    # Strings that moved are not differences: what is left on each side, each distinct string
    # once, is paired in order (a build folder on one side with the other's).
    a_only: dict[bytes, None] = {}
    b_only: dict[bytes, None] = {}
    for i1, i2, j1, j2 in differing_runs(a_strings, b_strings):
        a_only.update(dict.fromkeys(a_strings[i1:i2]))
        b_only.update(dict.fromkeys(b_strings[j1:j2]))
    common = a_only.keys() & b_only.keys()
    causes = []
    for a_raw, b_raw in zip_longest([x for x in a_only if x not in common],
                                    [y for y in b_only if y not in common]):
        causes.append(_string_cause(pair.name(left.name), _decoded(a_raw), _decoded(b_raw)))
        if len(causes) >= pair.limits.causes:
            break
    return causes


def _decoded(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "backslashreplace")


def _string_cause(where: str | None, a_text: str | None, b_text: str | None) -> Cause:
    if a_text is None or b_text is None:
        text = a_text if b_text is None else b_text
        assert text is not None
        reading = read_as(text, 0)
        kind = model.EMBEDDED_PATH if reading.kind == "path" else (
            model.EMBEDDED_TIME if reading.kind == "time" else model.STRING)
        side = "a" if b_text is None else "b"
        return Cause(kind, f"a string only in {side}", section=where, a=a_text, b=b_text)
    at = first_difference(a_text, b_text)
    a_read, b_read = read_as(a_text, at), read_as(b_text, at)
    if "time" in (a_read.kind, b_read.kind):
        return Cause(model.EMBEDDED_TIME, _time_words(a_read.shown, b_read.shown),
                     section=where, a=a_text, b=b_text)
    if "path" in (a_read.kind, b_read.kind):
        return Cause(model.EMBEDDED_PATH, "an embedded path differs", section=where,
                     a=a_read.shown, b=b_read.shown)
    return Cause(model.STRING, "a string differs", section=where, a=a_text, b=b_text)


def _time_words(a_time: str, b_time: str) -> str:
    return (f"an embedded date or time differs ({a_time!r} vs {b_time!r}): __DATE__/__TIME__ "
            f"or a timestamp; SOURCE_DATE_EPOCH fixes it for GCC")


# --- anything else: the text around each differing range -----------------------------------------


def _by_ranges(pair: _Pair, left: Section, right: Section, diff: SectionDiff) -> list[Cause]:
    """Paths and times found where the bytes differ; [] when none is."""
    return _texts_at(pair.a, (left.offset, left.end), pair.b, (right.offset, right.end),
                     diff.ranges, pair.name(left.name),
                     strings=not left.flags & SHF_EXECINSTR)


def _texts_at(a: ByteSource, a_region: tuple[int, int], b: ByteSource,
              b_region: tuple[int, int], ranges: tuple[tuple[int, int], ...],
              where: str | None, *, strings: bool) -> list[Cause]:
    """The paths and times holding differing ranges, each once; with `strings`, other text of
    MIN_STRING characters too (never in code, whose bytes are often printable by chance)."""
    causes: list[Cause] = []
    seen: set[int] = set()
    (a_start, a_end), (b_start, b_end) = a_region, b_region
    for start, _end in ranges:
        if start >= min(a_end - a_start, b_end - b_start):
            break
        a_at, a_text = text_around(a, a_start, a_end, a_start + start)
        _b_at, b_text = text_around(b, b_start, b_end, b_start + start)
        if not a_text or not b_text or a_at in seen:
            continue
        seen.add(a_at)
        cause = _string_cause(where, a_text, b_text)
        if cause.kind in (model.EMBEDDED_PATH, model.EMBEDDED_TIME) or (strings and min(
                len(a_text), len(b_text)) >= MIN_STRING):
            causes.append(cause)
    return causes


def diff_data(a: ByteSource, b: ByteSource, limits: Limits) -> list[Cause]:
    """Paths and times where two files (neither ELF nor text) differ, else where they first do."""
    found = differing(a, 0, len(a), b, 0, len(b), limits.ranges)
    causes = _texts_at(a, (0, len(a)), b, (0, len(b)), found.ranges, None, strings=True)
    if causes or not found:
        return causes
    count = f"{len(found.ranges)}{'+' if found.more else ''}"
    sizes = f"; sizes {len(a)} vs {len(b)} bytes" if len(a) != len(b) else ""
    return [Cause(model.BYTES, f"bytes differ from offset {found.ranges[0][0]:#x}, {count} "
                               f"range(s){sizes}")]


def _bytes(pair: _Pair, left: Section, diff: SectionDiff) -> Cause:
    where = pair.name(left.name)
    if diff.a is not None and diff.b is not None and diff.a.size != diff.b.size:
        sizes = f"; its size differs ({diff.a.size} vs {diff.b.size} bytes)"
    else:
        sizes = ""
    first = diff.first_offset
    if first is None:
        return Cause(model.BYTES, f"bytes differ in {left.name}{sizes}", section=where)
    holder = _holder(pair, left, first)
    held = f" (in {holder})" if holder else ""
    count = len(diff.ranges)
    ranges = f"{count}{'+' if diff.more else ''} range{'s' * (count != 1 or diff.more)}"
    return Cause(model.BYTES, f"bytes differ in {left.name} from offset +{first:#x}{held}, "
                              f"{ranges}{sizes}", section=where)


def _holder(pair: _Pair, section: Section, offset: int) -> str | None:
    """The function or object holding `offset` of `section`, by the symbol table."""
    if pair.symbols_a is None:
        table = next((s for s in pair.la.sections if s.type == SHT_SYMTAB), None)
        pair.symbols_a = symbols(pair.a, pair.la, table) if table else []
    relocatable = pair.la.type == 1
    at = offset if relocatable else section.addr + offset
    for symbol in pair.symbols_a:
        if symbol.size and symbol.value <= at < symbol.value + symbol.size and symbol.name and (
                not relocatable or symbol.section == section.number):
            return symbol.name
    return None


# --- device code -------------------------------------------------------------------------------


def _fatbin(pair: _Pair, left: Section, right: Section) -> list[Cause]:
    where = pair.name(left.name)
    try:
        a_entries = device.entries(pair.a, left.name, left.offset, left.size)
        b_entries = device.entries(pair.b, right.name, right.offset, right.size)
    except NotAnElf as error:
        return [Cause(model.BYTES, f"bytes differ in {left.name}, which does not parse as a "
                                   f"fatbin on one side ({error})", section=where)]
    cubin = _cubin_diff(pair) if pair.depth < MAX_DEPTH else None
    causes = device.compare(pair.a, a_entries, pair.b, b_entries, where, pair.limits, cubin)
    if not causes:
        causes.append(Cause(model.BYTES, f"bytes differ in {left.name} outside its entries' "
                                         f"payloads (container or entry headers)", section=where))
    return causes


def _cubin_diff(pair: _Pair) -> device.CubinDiff:
    def compare(a: bytes, b: bytes, where: str) -> tuple[list[SectionDiff], list[Cause]]:
        found = diff_elf(a, b, where, pair.limits, prefix=f"{where} › ",
                         depth=pair.depth + 1)
        unprefixed = [SectionDiff(d.name.removeprefix(f"{where} › "), d.a, d.b, d.ranges,
                                  d.more) for d in found.sections]
        return unprefixed, list(found.causes)

    return compare


def _outside_sections(pair: _Pair) -> list[Cause]:
    """No section differs, yet the files do: the headers, or bytes no section covers."""
    covered = sorted((s.offset, s.end) for s in pair.la.sections if s.has_bytes)
    regions = [(0, pair.la.header_end, "(ELF header)")]
    regions += [(offset, offset + size, "(program or section headers)")
                for offset, size in pair.la.tables]
    for start, end, name in regions:
        if bytes(pair.a[start:end]) != bytes(pair.b[start:end]):
            return [Cause(model.BYTES, f"bytes differ in {name}", section=pair.name(name))]
    ranges = differing(pair.a, 0, len(pair.a), pair.b, 0, len(pair.b), 1)
    if not ranges:
        return []
    first = ranges.ranges[0][0]
    inside = any(start <= first < end for start, end in covered)
    words = "between sections (padding)" if not inside else "in no section compared"
    return [Cause(model.BYTES, f"bytes differ {words} from file offset {first:#x}",
                  section=pair.name("(outside sections)"))]


def _unique(causes: list[Cause]) -> list[Cause]:
    seen = set()
    kept = []
    for cause in causes:
        key = (cause.kind, cause.section, cause.a, cause.b, cause.entry, cause.kernel)
        if key not in seen:
            seen.add(key)
            kept.append(cause)
    return kept
