"""The smoke test's oracle: the loader traces every binary of a kit as `ldd` does (trace mode with
LD_WARN and LD_VERBOSE names every missing library and symbol version, not the first); nothing
of the kit runs. This writes the command and reads its output; where it runs is the caller's."""

from __future__ import annotations

import re
from dataclasses import dataclass

MARK = "== "
TRACE_ENV = "LD_TRACE_LOADED_OBJECTS=1 LD_WARN=yes LD_BIND_NOW=yes LD_VERBOSE=yes"
MISSING_LIBRARY = re.compile(r"^\s*(?P<library>\S+) => not found\s*$")
MISSING_VERSION = re.compile(r"^\s*(?P<library>\S+) \((?P<version>[^)]+)\) => not found\s*$")
VERSION_ERROR = re.compile(r"(?P<path>\S+): version `(?P<version>[^']+)' not found \(required by")


@dataclass(frozen=True)
class Missing:
    binary: str  # kit/bin/ninfer
    library: str  # libavformat.so.61
    version: str = ""  # GLIBCXX_3.4.32 when the library is there but too old

    def __str__(self) -> str:
        if self.version:
            return f"{self.binary}: {self.library} has no {self.version}"
        return f"{self.binary}: {self.library} not found"


@dataclass(frozen=True)
class SmokeVerdict:
    where: str  # the image or root the loader ran in
    binaries: tuple[str, ...]
    missing: tuple[Missing, ...]

    @property
    def passed(self) -> bool:
        return bool(self.binaries) and not self.missing

    def summary(self) -> str:
        if self.passed:
            return (f"passed in {self.where}: every library and symbol version of "
                    f"{len(self.binaries)} binaries resolved")
        if not self.binaries:
            return f"failed in {self.where}: no binary was traced"
        return f"failed in {self.where}: " + "; ".join(map(str, self.missing))


def trace_script(interpreter: str, folder: str) -> str:
    """A POSIX shell script that traces every file in `folder` and marks where each begins."""
    return (f'for b in {folder}/*; do echo "{MARK}$b"; {TRACE_ENV} {interpreter} "$b" 2>&1; '
            f'done')


def read_trace(output: str, where: str, strip: str = "/") -> SmokeVerdict:
    """Every binary traced and what it lacks, from the script's combined output."""
    binaries: list[str] = []
    missing: dict[Missing, None] = {}
    for line in output.splitlines():
        if line.startswith(MARK):
            binaries.append(line[len(MARK):].strip().removeprefix(strip))
            continue
        if not binaries:
            continue
        found = _missing_in(line, binaries[-1])
        if found is not None:
            missing[found] = None
    # A library that is not there lacks all its versions too: name it once.
    absent = {(item.binary, item.library) for item in missing if not item.version}
    named = tuple(item for item in missing
                  if not item.version or (item.binary, item.library) not in absent)
    return SmokeVerdict(where=where, binaries=tuple(binaries), missing=named)


def _missing_in(line: str, binary: str) -> Missing | None:
    version = MISSING_VERSION.match(line)
    if version:
        return Missing(binary, version["library"], version["version"])
    library = MISSING_LIBRARY.match(line)
    if library:
        return Missing(binary, library["library"])
    error = VERSION_ERROR.search(line)
    if error:
        return Missing(binary, error["path"].rsplit("/", 1)[-1], error["version"])
    return None
