"""What a comparison of two kits finds, and the named kind of each cause, so that a program
(`repro`, CI) tells a temporary file name from a changed kernel without parsing sentences.
The kinds: docs/repro.md, "Causes"."""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEMA_VERSION = 1

BUILD_ID = "build-id"
FILE_SYMBOL = "file-symbol"
SYMBOL_NAME = "symbol-name"
SYMBOL_VALUE = "symbol-value"
EMBEDDED_PATH = "embedded-path"
EMBEDDED_TIME = "embedded-time"
STRING = "string"
FATBIN_ENTRY = "fatbin-entry"
BYTES = "bytes"
SECTION_LAYOUT = "section-layout"
TEXT_LINES = "text-lines"
RUN_FACTS = "run-facts"
SUBJECT = "subject"
BUILD_LOG = "build-log"
ONLY_IN_A = "only-in-a"
ONLY_IN_B = "only-in-b"
MEMBER_TYPE = "member-type"
MODE = "mode"
LINK_TARGET = "link-target"
ARCHIVE_HEADER = "archive-header"
NOT_EXPLAINED = "not-explained"

# How a member compares (besides ONLY_IN_A/B): it differs, or only where runs differ by design.
DIFFERS, EXPECTED = "differs", "expected"


@dataclass(frozen=True)
class Limits:
    """How far a comparison reads: bounded time and memory; what is past a limit is said."""

    explain: int = 2 << 30  # the largest member compared section by section (else: sha256 only)
    text: int = 1 << 20  # the largest member compared line by line as text
    # the largest SBOM or provenance compared value by value (the portable example's: ~300 kB)
    document: int = 16 << 20
    ranges: int = 8  # differing byte ranges kept per section
    causes: int = 40  # causes kept per member
    lines: int = 12  # differing hunks of lines shown per text (or PTX)
    strings: int = 50_000  # strings of a string table compared one by one (else: by bytes)
    inflate: int = 256 << 20  # the largest compressed fatbin payload decompressed


@dataclass(frozen=True)
class Cause:
    """One recognised reason why a member differs: `section` is an ELF section (nested as
    ".nv_fatbin › sass sm_86 › .text._Z1kPf" in device code) or None; `a`, `b` the values."""

    kind: str
    detail: str
    section: str | None = None
    a: str | None = None
    b: str | None = None
    expected: bool = False  # differs between any two runs by design: not a reproducibility bug
    entry: str | None = None  # a fatbin entry, "sass sm_86" or "ptx compute_86"
    kernel: str | None = None  # the kernel (its symbol name) inside that entry


@dataclass(frozen=True)
class Extent:
    """Where a section lies in one file."""

    offset: int
    size: int


@dataclass(frozen=True)
class SectionDiff:
    """One ELF section whose bytes, size or presence differ; `ranges`: the first differing
    [start, end) from its start (`more`: more followed)."""

    name: str
    a: Extent | None
    b: Extent | None
    ranges: tuple[tuple[int, int], ...] = ()
    more: bool = False

    @property
    def first_offset(self) -> int | None:
        return self.ranges[0][0] if self.ranges else None


@dataclass(frozen=True)
class Side:
    """One side's view of a member, as its archive or folder says."""

    kind: str  # "file", "symlink", "hardlink", "folder"
    size: int = 0
    mode: int = 0
    link: str | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class MemberDiff:
    """One member that differs (or only where expected); `kind`: "elf", "text", "data", …"""

    path: str
    kind: str
    status: str  # DIFFERS, EXPECTED, ONLY_IN_A, ONLY_IN_B
    a: Side | None
    b: Side | None
    causes: tuple[Cause, ...] = ()
    sections: tuple[SectionDiff, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """Two kits compared: `members` those that differ, `same` the count of the others."""

    a: str
    b: str
    layout: str  # "archive", "kit-folder", "folder", "file"
    members: tuple[MemberDiff, ...]
    same: int
    notes: tuple[str, ...] = field(default=())

    @property
    def identical(self) -> bool:
        """The same, apart from what differs between runs by design."""
        return all(member.status == EXPECTED for member in self.members)
