"""The dynamic symbols of an ELF file, read as the dynamic loader reads them (verify's symbol
check, loader.symbols). From the program headers, as inspector.elf, bounded the same way; the
table's length from DT_HASH or DT_GNU_HASH's last chain (as `readelf --use-dynamic`), and names
looked up through the file's own hash table, so that a library's thousands of names are not all
decoded for the few a program uses. Only verify reads it: `inspect` does not pay for it."""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.elf import _Corrupt, _Elf, read_guarded
from ninfer_kits.inspector.inputs import ByteSource, StrPath, open_regular, printable

DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 0, 4, 5, 6, 10, 11
DT_GNU_HASH, DT_VERSYM, DT_VERDEF, DT_VERNEED = 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE
SHN_UNDEF, SHN_ABS = 0, 0xFFF1
STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 1, 2, 10
STT_TLS = 6
# What glibc's loader binds to (dl-lookup.c, ALLOWED_STT): NOTYPE OBJECT FUNC COMMON TLS IFUNC
BINDABLE_TYPES = frozenset({0, 1, 2, 5, 6, 10})
BINDABLE_BINDINGS = frozenset({STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE})
VERSYM_HIDDEN = 0x8000


@dataclass(frozen=True)
class Definition:
    """One definition of a name. An unversioned reference binds to index 2 (the oldest
    version) or a lone other one."""

    version: str | None  # None: the base or none, which any reference not hidden binds to
    hidden: bool  # `name@VER`, not the default `name@@VER`
    index: int


@dataclass(frozen=True)
class Reference:
    """A strong undefined symbol: what the loader must bind, or the program stops."""

    name: str
    version: str  # "" unversioned
    library: str  # where that version is expected from (DT_VERNEED's file); "" unversioned
    hidden: bool = False


class DynamicSymbols:
    """One file's dynamic symbols, looked up through its own hash table (decoding libstdc++'s
    six thousand names would cost more than the rest of verify); what it works out it keeps."""

    def __init__(self, rows: Sequence[tuple[int, int, int, int]] = (),
                 versym: Sequence[int] | None = None,
                 versions: dict[int, tuple[str, str, bool]] | None = None,
                 names: _Names | None = None, table: _HashTable | None = None,
                 label: str = "") -> None:
        self.label = label  # how errors name the file
        self._rows = rows
        self._versym = versym
        self._versions = versions or {}
        self._names = names
        self._table = table
        self._needed: tuple[Reference, ...] | None = None
        self._defined: dict[str, tuple[Definition, ...]] | None = None

    @property
    def versioned(self) -> bool:
        return self._versym is not None

    @property
    def needed(self) -> tuple[Reference, ...]:
        """Every strong undefined symbol (a weak one may stay unbound)."""
        if self._needed is None:
            with self._fence():
                self._needed = tuple(self._references())
        return self._needed

    @property
    def defined(self) -> dict[str, tuple[Definition, ...]]:
        """Every definition, by name (all decoded: for a file without a hash table)."""
        if self._defined is None:
            found: dict[str, list[Definition]] = {}
            with self._fence():
                for index in range(1, len(self._rows)):
                    definition = self._definition(index)
                    if definition is not None and self._names is not None:
                        found.setdefault(self._names(self._rows[index][0]), []).append(
                            definition)
            self._defined = {name: tuple(entries) for name, entries in found.items()}
        return self._defined

    def lookup(self, name: str) -> tuple[Definition, ...]:
        if self._table is None or self._names is None:
            return self.defined.get(name, ())
        raw = name.encode("utf-8", "surrogateescape")
        found = []
        try:  # not `with self._fence()`: a lookup is done hundreds of thousands of times
            for index in self._table.candidates(raw, len(self._rows)):
                definition = self._definition(index)
                if definition is not None and self._names.equals(self._rows[index][0], raw):
                    found.append(definition)
        except _Corrupt as error:
            raise NotAnElf(f"{printable(self.label)}: corrupt or truncated ELF file "
                           f"({error})") from error
        return tuple(found)

    @contextmanager
    def _fence(self) -> Iterator[None]:
        """A later read fails as the first does: one NotAnElf naming the file."""
        try:
            yield
        except _Corrupt as error:
            raise NotAnElf(f"{printable(self.label)}: corrupt or truncated ELF file "
                           f"({error})") from error

    def _definition(self, index: int) -> Definition | None:
        name_at, info, shndx, value = self._rows[index]
        bind, kind = info >> 4, info & 0xF
        if (not name_at or shndx == SHN_UNDEF or bind not in BINDABLE_BINDINGS
                or kind not in BINDABLE_TYPES):
            return None
        if not (value or shndx == SHN_ABS or kind == STT_TLS):
            return None  # no value: nothing to bind to (dl-lookup.c, check_match)
        raw = self._versym[index] if self._versym is not None else 1
        version = self._versions.get(raw & 0x7FFF)
        return Definition(version[0] if version and not version[1] else None,
                          bool(raw & VERSYM_HIDDEN), raw & 0x7FFF)

    def _references(self) -> Iterator[Reference]:
        for index in range(1, len(self._rows)):
            name_at, info, shndx, _value = self._rows[index]
            bind, kind = info >> 4, info & 0xF
            if (shndx != SHN_UNDEF or not name_at or bind not in (STB_GLOBAL, STB_GNU_UNIQUE)
                    or kind not in BINDABLE_TYPES or self._names is None):
                continue
            raw = self._versym[index] if self._versym is not None else 1
            version = self._versions.get(raw & 0x7FFF)
            yield Reference(self._names(name_at), version[0] if version else "",
                            version[1] if version else "", bool(version and version[2]))


def read_dynamic_symbols(path: StrPath, shown: str | None = None) -> DynamicSymbols:
    label = shown or str(path)
    with open_regular(path, label) as file:
        return file.read_with(lambda data: dynamic_symbols_buffer(data, label))


def dynamic_symbols_buffer(data: ByteSource, shown: str) -> DynamicSymbols:
    return read_guarded(data, shown, lambda elf: _SymbolReader(elf, shown).read())


class _SymbolReader:
    def __init__(self, elf: _Elf, label: str) -> None:
        self.elf = elf
        self.label = label
        self.tags: dict[int, int] = {}
        order = "<" if bytes(elf.data[5:6]) == b"\x01" else ">"
        self.order = order
        self.s_sym = struct.Struct(order + ("IBBHQQ" if elf.is64 else "IIIBBH"))
        self.s_sym64 = struct.Struct(order + "IBxHQ8x")  # st_name, st_info, st_shndx, st_value
        self.s_word = struct.Struct(order + "I")

    def read(self) -> DynamicSymbols:
        self._read_tags()
        if DT_SYMTAB not in self.tags:
            return DynamicSymbols()
        strings = self._strings()
        count = self._symbol_count()
        return DynamicSymbols(self._symbols(count), self._versym(count),
                              self._version_names(strings), _Names(self.elf, strings),
                              self._hash_table(count), self.label)

    # --- the dynamic section ---------------------------------------------------------------

    def _read_tags(self) -> None:
        region = self.elf._dynamic_region()
        if region is None or region[1] == 0:
            return
        offset, size = region
        layout = self.elf.s_dyn
        for tag, value in self.elf._table(offset, size // layout.size, layout.size, layout,
                                          "the dynamic section"):
            if tag == DT_NULL:
                break
            self.tags.setdefault(tag, value)

    def _region(self, tag: int, what: str) -> tuple[int, int]:
        return self.elf._file_offset(self.tags[tag], what)

    def _strings(self) -> tuple[int, int]:
        if DT_STRTAB not in self.tags:
            raise _Corrupt("DT_SYMTAB without DT_STRTAB")
        offset, available = self._region(DT_STRTAB, "DT_STRTAB")
        size = min(self.tags.get(DT_STRSZ, available), available)
        return offset, size

    # --- how many symbols -------------------------------------------------------------------

    def _symbol_count(self) -> int:
        if DT_HASH in self.tags:
            at, available = self._region(DT_HASH, "DT_HASH")
            if available < 8:
                raise _Corrupt("DT_HASH shorter than its header")
            return int(self.elf._unpack(self.s_word, at + 4, "DT_HASH's chain count")[0])
        if DT_GNU_HASH in self.tags:
            return self._gnu_hash_count()
        return 0

    def _gnu_hash_count(self) -> int:
        """One past the last symbol a DT_GNU_HASH chain reaches."""
        at, available = self._region(DT_GNU_HASH, "DT_GNU_HASH")
        header = struct.Struct(self.order + "IIII")
        if available < header.size:
            raise _Corrupt("DT_GNU_HASH shorter than its header")
        buckets, symoffset, bloom_size, _shift = self.elf._unpack(header, at, "DT_GNU_HASH")
        word = 8 if self.elf.is64 else 4
        buckets_at = at + header.size + bloom_size * word
        end = at + available
        if buckets_at + 4 * buckets > end:
            raise _Corrupt(f"DT_GNU_HASH's {buckets} buckets run past their segment")
        last = max(self._words(buckets_at, buckets), default=0)
        if last < symoffset:
            return int(symoffset)
        chains_at = buckets_at + 4 * buckets
        index = last
        while True:
            at_chain = chains_at + 4 * (index - symoffset)
            if at_chain + 4 > end:
                raise _Corrupt("a DT_GNU_HASH chain runs past its segment")
            if self.elf._unpack(self.s_word, at_chain, "a DT_GNU_HASH chain")[0] & 1:
                return index + 1
            index += 1

    def _hash_table(self, count: int) -> _HashTable | None:
        """DT_GNU_HASH, else DT_HASH."""
        if DT_GNU_HASH in self.tags:
            at, available = self._region(DT_GNU_HASH, "DT_GNU_HASH")
            buckets, symoffset, bloom_size, _shift = self.elf._unpack(
                struct.Struct(self.order + "IIII"), at, "DT_GNU_HASH")
            buckets_at = at + 16 + bloom_size * (8 if self.elf.is64 else 4)
            chains = max(count - symoffset, 0)
            if buckets_at + 4 * (buckets + chains) > at + available:
                raise _Corrupt("DT_GNU_HASH runs past its segment")
            words = self.elf._unpack(struct.Struct(f"{self.order}{buckets + chains}I"),
                                     buckets_at, "DT_GNU_HASH")
            return _GnuHash(words[:buckets], words[buckets:], symoffset)
        if DT_HASH in self.tags:
            at, available = self._region(DT_HASH, "DT_HASH")
            buckets, chains = self.elf._unpack(struct.Struct(self.order + "II"), at, "DT_HASH")
            if 8 + 4 * (buckets + chains) > available:
                raise _Corrupt("DT_HASH runs past its segment")
            words = self.elf._unpack(struct.Struct(f"{self.order}{buckets + chains}I"),
                                     at + 8, "DT_HASH")
            return _SysvHash(words[:buckets], words[buckets:])
        return None

    def _words(self, at: int, count: int) -> Iterator[int]:
        layout = struct.Struct(f"{self.order}{count}I")
        return iter(self.elf._unpack(layout, at, "DT_GNU_HASH's buckets"))

    # --- the tables -------------------------------------------------------------------------

    def _symbols(self, count: int) -> list[tuple[int, int, int, int]]:
        """(st_name, st_info, st_shndx, st_value) of each symbol."""
        entsize = self.tags.get(DT_SYMENT, self.s_sym.size)
        at, available = self._region(DT_SYMTAB, "DT_SYMTAB")
        if entsize < self.s_sym.size or count * entsize > available:
            raise _Corrupt(f"the dynamic symbol table ({count} entries of {entsize} bytes) runs "
                           f"past its segment ({available} bytes)")
        if self.elf.is64:  # the fields in the order wanted, st_other and st_size skipped
            return self.elf._table(at, count, entsize, self.s_sym64,  # type: ignore[return-value]
                                   "the dynamic symbol table")
        rows = self.elf._table(at, count, entsize, self.s_sym, "the dynamic symbol table")
        return [(name, info, shndx, value) for name, value, _s, info, _o, shndx in rows]

    def _versym(self, count: int) -> tuple[int, ...] | None:
        if DT_VERSYM not in self.tags:
            return None
        at, available = self._region(DT_VERSYM, "DT_VERSYM")
        if 2 * count > available:
            raise _Corrupt(f"the symbol version table ({count} entries) runs past its segment")
        return self.elf._unpack(struct.Struct(f"{self.order}{count}H"), at, "DT_VERSYM")

    def _version_names(self, strings: tuple[int, int]) -> dict[int, tuple[str, str, bool]]:
        """Version index → (version, library needed from or "" if defined here, hidden), as
        glibc fills l_versions (dl-version.c); the base definition is left out, so that its
        index binds as unversioned."""
        names: dict[int, tuple[str, str, bool]] = {}
        table, size = strings
        for index, version, library, hidden in self._needs(table, size):
            names[index] = (version, library, hidden)
        for index, version in self.elf._verdef_entries(self.tags.get(DT_VERDEF), strings):
            names.setdefault(index, (version, "", False))
        return names

    def _needs(self, table: int, size: int) -> Iterator[tuple[int, str, str, bool]]:
        if DT_VERNEED not in self.tags:
            return
        at, _ = self._region(DT_VERNEED, "DT_VERNEED")
        budget = self.elf.size // 16  # each entry takes 16 bytes of its own
        seen: set[int] = set()
        while True:
            if at in seen or len(seen) > budget:
                raise _Corrupt("the version needs (DT_VERNEED) form a loop")
            seen.add(at)
            _v, count, file_name, aux, next_need = self.elf._unpack(
                self.elf.s_verneed, at, "a version need")
            library = self.elf._string(table, size, file_name, "DT_VERNEED")
            aux_at = at + aux
            for _ in range(min(count, budget)):
                _hash, _flags, other, name, next_aux = self.elf._unpack(
                    self.elf.s_vernaux, aux_at, "a version need entry")
                budget -= 1
                if budget < 0:
                    raise _Corrupt("the version needs (DT_VERNEED) have more entries than the "
                                   "file has room for")
                yield (other & 0x7FFF, self.elf._string(table, size, name, "DT_VERNEED"),
                       library, bool(other & VERSYM_HIDDEN))
                if next_aux == 0:
                    break
                aux_at += next_aux
            if next_need == 0:
                return
            at += next_need



class _Names:
    """Symbol names out of DT_STRTAB, copied once (many per file), within the string budget."""

    def __init__(self, elf: _Elf, strings: tuple[int, int]) -> None:
        table, size = strings
        self.elf = elf
        self.strings = bytes(elf.data[table:table + size])

    def __call__(self, index: int) -> str:
        end = self.strings.find(b"\0", index)
        if index >= len(self.strings) or end < 0:
            raise _Corrupt(f"a symbol name at string offset {index:#x} lies outside its string "
                           f"table or is unterminated ({len(self.strings)} bytes)")
        self.elf.string_budget -= end - index
        if self.elf.string_budget < 0:
            raise _Corrupt("symbol names referenced over and over (more bytes of them than "
                           "four times the file)")
        return self.strings[index:end].decode("utf-8", "surrogateescape")

    def equals(self, index: int, name: bytes) -> bool:
        return self.strings.startswith(name + b"\0", index)


class _HashTable:
    def candidates(self, name: bytes, count: int) -> Iterator[int]:
        raise NotImplementedError


class _GnuHash(_HashTable):
    def __init__(self, buckets: Sequence[int], chains: Sequence[int], symoffset: int) -> None:
        self.buckets, self.chains, self.symoffset = buckets, chains, symoffset

    def candidates(self, name: bytes, count: int) -> Iterator[int]:
        if not self.buckets:
            return
        value = gnu_hash(name)
        index = self.buckets[value % len(self.buckets)]
        if index < self.symoffset:
            return  # an empty bucket
        while True:
            chain = index - self.symoffset
            if chain >= len(self.chains) or index >= count:
                raise _Corrupt("a DT_GNU_HASH chain runs past the symbol table")
            if (self.chains[chain] | 1) == (value | 1):
                yield index
            if self.chains[chain] & 1:
                return
            index += 1


class _SysvHash(_HashTable):
    def __init__(self, buckets: Sequence[int], chains: Sequence[int]) -> None:
        self.buckets, self.chains = buckets, chains

    def candidates(self, name: bytes, count: int) -> Iterator[int]:
        if not self.buckets:
            return
        index = self.buckets[sysv_hash(name) % len(self.buckets)]
        for _ in range(count + 1):  # a chain visits each symbol once at most
            if index == 0:
                return
            if index >= count or index >= len(self.chains):
                raise _Corrupt("a DT_HASH chain runs past the symbol table")
            yield index
            index = self.chains[index]
        raise _Corrupt("a DT_HASH chain forms a loop")


# Every library of a scope is asked for the same names: each hash once, in a bounded cache.
@functools.lru_cache(maxsize=1 << 16)
def gnu_hash(name: bytes) -> int:
    value = 5381
    for byte in name:
        value = (value * 33 + byte) & 0xFFFFFFFF
    return value


@functools.lru_cache(maxsize=1 << 16)
def sysv_hash(name: bytes) -> int:
    value = 0
    for byte in name:
        value = ((value << 4) + byte) & 0xFFFFFFFF
        high = value & 0xF0000000
        if high:
            value ^= high >> 24
        value &= ~high & 0xFFFFFFFF
    return value
