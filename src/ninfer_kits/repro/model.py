"""What a comparison of two kits finds: the values passed between its steps, and their names.

Every difference carries a cause of a named kind, so that a program (the `repro` command, CI)
can tell a temporary file name from a changed kernel without parsing sentences. The kinds:

    build-id       the GNU build-id note differs (set explicitly, or derived by the linker
                   from the other bytes, in which case it follows from the other causes)
    file-symbol    a `.symtab` STT_FILE symbol differs: the source name the compiler saw
                   (nvcc's temporary `tmpxft_<pid>_…cudafe1.cpp` without -objtemp)
    symbol-name    another symbol's name differs (per-compile internal names)
    symbol-value   same symbols, other values or sizes: code or data moved or changed size
    embedded-path  differing bytes inside a '/'-separated string: a build folder, a source path
    embedded-time  differing bytes inside a __DATE__/__TIME__ style string
    string         a differing string that is neither a path nor a time
    fatbin-entry   one entry of a CUDA fatbin differs: which (kind, arch), which kernel
    bytes          bytes differ in a section, and no cause above was recognised
    section-layout a section only on one side
    text-lines     differing lines of a text member
    run-facts      what records the run, not the kit: BUILDINFO.txt's lines below the run
                   marker, a kit folder's SHA256SUMS lines of files other than the tarballs,
                   an SBOM's or provenance's values beyond its subject: expected to differ
    subject        an SBOM or provenance document describes another tarball (name, sha256)
    build-log      the build log beside a kit: expected to differ
    only-in-a / only-in-b    a member on one side only
    member-type, mode, link-target    what the archive or folder says about a member
    archive-header the tar headers or the compression header differ (time, owner, order)
    not-explained  too large to compare here, or unreadable: only the sha256 says it differs
"""

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

# How a member compares: it differs, it is on one side only, or only in what is expected to
# differ between two runs (BUILDINFO.txt's run facts, the build log).
DIFFERS, EXPECTED = "differs", "expected"


@dataclass(frozen=True)
class Limits:
    """How far a comparison reads, so that a kit of hundreds of MB costs bounded time and
    memory: what is past a limit is said to be, never silently dropped."""

    explain: int = 2 << 30  # the largest member compared section by section (else: sha256 only)
    text: int = 1 << 20  # the largest member compared line by line as text
    # the largest SBOM or provenance compared value by value (its licence texts make an SBOM
    # the largest text beside a kit: ~300 kB for the portable example's 40 libraries)
    document: int = 16 << 20
    ranges: int = 8  # differing byte ranges kept per section
    causes: int = 40  # causes kept per member
    lines: int = 12  # differing hunks of lines shown per text (or PTX)
    strings: int = 50_000  # strings of a string table compared one by one (else: by bytes)
    inflate: int = 256 << 20  # the largest compressed fatbin payload decompressed


@dataclass(frozen=True)
class Cause:
    """One recognised reason why a member differs, and where: `section` is an ELF section name
    (nested as ".nv_fatbin › sass sm_86 › .text._Z1kPf" inside device code), or None for the
    member as a whole. `a` and `b` are the two values, as text, when there are two to show."""

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
    """One ELF section whose bytes (or size, or presence) differ. `ranges` are differing byte
    ranges [start, end) relative to the section's start, the first few only (`more` says that
    more followed); with sizes that differ they are where the aligned bytes differ."""

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
    """One member that differs (or differs only where expected). `kind` is what it is: "elf",
    "text", "data", "archive", "symlink", "hardlink", "folder"."""

    path: str
    kind: str
    status: str  # DIFFERS, EXPECTED, ONLY_IN_A, ONLY_IN_B
    a: Side | None
    b: Side | None
    causes: tuple[Cause, ...] = ()
    sections: tuple[SectionDiff, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """Two kits compared: `members` lists only those that differ (or differ where expected);
    `same` counts the members found identical."""

    a: str
    b: str
    layout: str  # "archive", "kit-folder", "folder", "file"
    members: tuple[MemberDiff, ...]
    same: int
    notes: tuple[str, ...] = field(default=())

    @property
    def identical(self) -> bool:
        """Whether the kits are the same, apart from what differs between runs by design."""
        return all(member.status == EXPECTED for member in self.members)
