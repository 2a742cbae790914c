"""Runtime-library facts (data/runtime_facts.toml), validated every time they load."""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

from ninfer_kits import versions
from ninfer_kits.resources import load_data

VERSION_KEY = re.compile(r"^\d+(\.\d+)*$")
GCC_RELEASE = re.compile(r"^GCC (?P<release>\d+\.\d+(\.\d+)?)$")  # "GCC 13.2", "GCC 4.8.3"


class GlibcAbiMarker(NamedTuple):
    """A symbol version that names a loader feature, not an interface (GLIBC_ABI_DT_RELR): the
    linker adds the need when the feature is used, and only glibc from `glibc` on defines it."""

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
        """Which GCC's libstdc++ provides PREFIX_version, as advice for the floor table."""
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
    return _validate(load_data(FACTS_FILE))


def _validate(raw: dict[str, Any]) -> RuntimeFacts:
    if raw.get("schema") != 1:
        raise ValueError("runtime_facts.toml: unsupported schema")
    return RuntimeFacts(
        glibcxx=_version_table(raw, "glibcxx"),
        cxxabi=_version_table(raw, "cxxabi"),
        families=tuple((name, tuple(members)) for name, members in raw["families"].items()),
        glibc_sonames=frozenset(raw["glibc_sonames"]),
        glibc_abi=_glibc_abi(raw.get("glibc_abi", {})),
    )


def _glibc_abi(table: dict[str, Any]) -> tuple[GlibcAbiMarker, ...]:
    markers = []
    for name, row in table.items():
        fields = row if isinstance(row, dict) else {}
        glibc, meaning, source = (fields.get(key) for key in ("glibc", "meaning", "source"))
        if not (name.startswith("GLIBC_ABI_") and isinstance(glibc, str)
                and VERSION_KEY.match(glibc) and isinstance(meaning, str) and meaning
                and isinstance(source, str) and source):
            raise ValueError(f"runtime_facts.toml: [glibc_abi.{name}] needs a GLIBC_ABI_ name "
                             f"and glibc (a dotted version), meaning and source (texts)")
        markers.append(GlibcAbiMarker(name, versions.parse(glibc), meaning, source))
    return tuple(markers)


def _version_table(raw: dict[str, Any], name: str) -> tuple[tuple[tuple[int, ...], str], ...]:
    table = raw[name]
    bad = [key for key, value in table.items() if not VERSION_KEY.match(key)
           or not isinstance(value, str) or not GCC_RELEASE.match(value)]
    if bad:
        raise ValueError(f"runtime_facts.toml: [{name}] has invalid entries {bad}")
    rows = tuple(sorted((versions.parse(key), value) for key, value in table.items()))
    releases = [_gcc_release(value) for _, value in rows]
    backwards = [rows[i + 1][1] for i in range(len(rows) - 1) if releases[i + 1] < releases[i]]
    if backwards:  # a newer symbol version cannot first appear in an older GCC release
        raise ValueError(f"runtime_facts.toml: [{name}] goes back in GCC releases at {backwards}")
    return rows


def _gcc_release(value: str) -> tuple[int, ...]:
    match = GCC_RELEASE.match(value)
    return versions.parse(match["release"]) if match else ()

