"""Runtime-library facts (data/runtime_facts.toml), validated every time they load."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, NamedTuple

from ninfer_kits.config.resources import data_file
from ninfer_kits.host import versions

if TYPE_CHECKING:
    from ninfer_kits.config.tables import Table

VERSION_KEY = re.compile(r"^\d+(\.\d+)*$")
GCC_RELEASE = re.compile(r"^GCC (?P<release>\d+\.\d+(\.\d+)?)$")  # "GCC 13.2", "GCC 4.8.3"


class GlibcAbiMarker(NamedTuple):
    """A version naming a loader feature (GLIBC_ABI_DT_RELR), defined from glibc `glibc` on."""

    name: str
    glibc: tuple[int, ...]
    meaning: str
    source: str


class RuntimeFacts(NamedTuple):
    glibcxx: tuple[tuple[tuple[int, ...], str], ...]  # sorted by version
    cxxabi: tuple[tuple[tuple[int, ...], str], ...]
    families: tuple[tuple[str, tuple[str, ...]], ...]
    glibc_sonames: frozenset[str]
    glibc_abi: tuple[GlibcAbiMarker, ...] = ()

    def glibc_abi_marker(self, name: str) -> GlibcAbiMarker | None:
        return next((marker for marker in self.glibc_abi if marker.name == name), None)

    def gcc_advice(self, prefix: str, version: tuple[int, ...]) -> str:
        table = {"GLIBCXX": self.glibcxx, "CXXABI": self.cxxabi}.get(prefix, ())
        if not table:
            return "a libstdc++ that provides it"
        if version < table[0][0]:
            return "any GCC of the last decade"
        gcc = next((gcc for known, gcc in table if known >= version), None)
        return f"{gcc} or newer" if gcc else "a libstdc++ newer than any this tool knows"

    def family_of(self, soname: str) -> str | None:
        return next((name for name, members in self.families if soname in members), None)


FACTS_FILE = "runtime_facts.toml"


@functools.cache
def runtime_facts() -> RuntimeFacts:
    # Imported here: `inspect` loads this module at start-up, but reads the file rarely.
    from ninfer_kits.config.tables import read_data_file

    return _validate(read_data_file(data_file(FACTS_FILE), "the runtime facts file"))


def _validate(root: Table) -> RuntimeFacts:
    root.check_keys(("schema", "glibcxx", "cxxabi", "families", "glibc_sonames"), ("glibc_abi",))
    if root.integer("schema") != 1:
        raise root.error("schema", "unsupported schema")
    families = root.table("families")
    return RuntimeFacts(
        glibcxx=_version_table(root.table("glibcxx")),
        cxxabi=_version_table(root.table("cxxabi")),
        families=tuple((name, families.strings(name)) for name in families.data),
        glibc_sonames=frozenset(root.strings("glibc_sonames")),
        glibc_abi=_glibc_abi(root.table("glibc_abi", optional=True)),
    )


def _glibc_abi(table: Table) -> tuple[GlibcAbiMarker, ...]:
    markers = []
    for name in table.data:
        if not name.startswith("GLIBC_ABI_"):
            raise table.error(name, "needs a GLIBC_ABI_ name (a loader feature's marker)")
        row = table.table(name)
        row.check_keys(("glibc", "meaning", "source"))
        markers.append(GlibcAbiMarker(name, versions.parse(row.text("glibc", VERSION_KEY)),
                                      row.text("meaning"), row.text("source")))
    return tuple(markers)


def _version_table(table: Table) -> tuple[tuple[tuple[int, ...], str], ...]:
    for key in table.data:
        if not VERSION_KEY.match(key):
            raise table.error(key, f"{key!r} is not a dotted version")
    rows = tuple(sorted((versions.parse(key), table.text(key, GCC_RELEASE)) for key in table.data))
    releases = [_gcc_release(value) for _, value in rows]
    backwards = [rows[i + 1][1] for i in range(len(rows) - 1) if releases[i + 1] < releases[i]]
    if backwards:  # a newer symbol version cannot first appear in an older GCC release
        raise table.error("", f"goes back in GCC releases at {backwards}")
    return rows


def _gcc_release(value: str) -> tuple[int, ...]:
    match = GCC_RELEASE.match(value)
    return versions.parse(match["release"]) if match else ()
