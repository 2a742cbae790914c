"""Runtime-library facts (data/runtime_facts.toml), validated every time they load.

The TOML file is the one source. Parsing it needs tomllib, whose import (with typing, datetime
and its regular expressions) costs every command that derives a floor about 5 ms of start-up,
more than a quick `inspect` spends on its work; so runtime_facts_parsed.py holds a copy of the
file's text and what tomllib makes of it, and is used only when the text read is that very
text (else tomllib parses it, as always). `python -m ninfer_kits.runtime_facts` writes the copy
anew; tests/test_floor.py fails while it is out of date.
"""

from __future__ import annotations

import functools
import os
import re

from ninfer_kits import versions
from ninfer_kits.records import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from typing import Any

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


# os.path, not pathlib: `inspect` loads this module, and has no other use for pathlib
FACTS_FILE = os.path.join(os.path.dirname(__file__), "data", "runtime_facts.toml")
PARSED_COPY = os.path.join(os.path.dirname(__file__), "runtime_facts_parsed.py")


@functools.cache
def runtime_facts() -> RuntimeFacts:
    with open(FACTS_FILE, encoding="utf-8") as file:
        text = file.read()
    return _validate(parse_facts(text))


def parse_facts(text: str) -> dict[str, Any]:
    """`tomllib.loads(text)`: the parsed copy's, when it is a copy of this text."""
    from ninfer_kits import runtime_facts_parsed

    if text == runtime_facts_parsed.TEXT:
        return runtime_facts_parsed.parsed()
    import tomllib

    return tomllib.loads(text)


def write_parsed_copy() -> str:
    """Write runtime_facts_parsed.py from the TOML file; its path."""
    import pprint
    import tomllib

    with open(FACTS_FILE, encoding="utf-8") as file:
        text = file.read()
    parsed = pprint.pformat(tomllib.loads(text), width=96, sort_dicts=False)
    copy = "\n".join([
        '"""What tomllib makes of data/runtime_facts.toml, and the text it made it from: written',
        'by `python -m ninfer_kits.runtime_facts` (runtime_facts.py says why); do not edit."""',
        "",
        "# ruff: noqa: E501",
        "from __future__ import annotations",
        "",
        "from ninfer_kits.records import TYPE_CHECKING",
        "",
        "if TYPE_CHECKING:",
        "    from typing import Any",
        "",
        f"TEXT = {text!r}",
        "",
        "",
        "def parsed() -> dict[str, Any]:",
        '    """A new copy each time: the caller may change it."""',
        "    return " + parsed.replace("\n", "\n" + " " * 11),
        "",
    ])
    with open(PARSED_COPY, "w", encoding="utf-8") as file:
        file.write(copy)
    return PARSED_COPY


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


if __name__ == "__main__":
    print(f"wrote {write_parsed_copy()}")
