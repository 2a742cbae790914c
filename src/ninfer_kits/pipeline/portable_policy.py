"""Which libraries a portable kit never carries (glibc's, the driver's), and which it carries only
byte for byte (NVIDIA's EULA forbids edited CUDA object code): data/portable_policy.toml, each
group with its why for the repair log and the kit's notices."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, read_data_file
from ninfer_kits.pipeline.image_facts import check_schema

SCHEMA = 1
DATA_FILE = data_file("portable_policy.toml")
_GROUP = re.compile(r"[a-z0-9][a-z0-9-]*")
# A soname pattern: a file name (no slash), fnmatch wildcards allowed.
_PATTERN = re.compile(r"[A-Za-z0-9_.+*?\[\]!-]+")


@dataclass(frozen=True)
class SonameGroup:
    name: str  # "glibc", "nvidia-driver", ...
    why: str
    patterns: tuple[str, ...]

    def matches(self, soname: str) -> bool:
        return any(fnmatch.fnmatchcase(soname, pattern) for pattern in self.patterns)


@dataclass(frozen=True)
class Policy:
    path: Path
    never_bundled: tuple[SonameGroup, ...]
    unmodified: tuple[SonameGroup, ...] = ()

    def excluded(self, soname: str) -> str | None:
        """Why `soname` is not bundled (its group's why), or None when the kit must carry it."""
        return next((group.why for group in self.never_bundled if group.matches(soname)), None)

    def keep_unmodified(self, soname: str) -> str | None:
        """Why a bundled `soname` must ship byte for byte, or None when its RUNPATH may be set."""
        return next((group.why for group in self.unmodified if group.matches(soname)), None)


def load_policy(path: Path | None = None) -> Policy:
    """The shipped policy, or the file at `path`; BadInput names file, line, table and key."""
    return _validate(read_data_file(path or DATA_FILE, "the portable-kit policy file"))


def _validate(root: Table) -> Policy:
    root.check_keys(("schema", "never_bundled"), ("unmodified",))
    check_schema(root, SCHEMA)
    never = _groups(root, "never_bundled")
    unmodified = _groups(root, "unmodified") if "unmodified" in root.data else ()
    return Policy(root.source.path, never, unmodified)


def _groups(root: Table, key: str) -> tuple[SonameGroup, ...]:
    section = root.table(key)
    if not section.data and key == "never_bundled":
        # An empty list would bundle glibc itself: never what anyone means.
        raise root.error(key, "no groups (add a [never_bundled.NAME] table with sonames)")
    groups = []
    for name in section.data:
        if not _GROUP.fullmatch(name):
            raise section.error(name, f"invalid group name {name!r} (lowercase letters, digits, "
                                      "'-')")
        groups.append(_group(section.table(name)))
    return tuple(groups)


def _group(table: Table) -> SonameGroup:
    table.check_keys(("why", "sonames"))
    patterns = table.texts("sonames")
    for pattern in patterns:
        if not _PATTERN.fullmatch(pattern):
            raise table.error("sonames", f"{pattern!r} is not a soname pattern (a file name "
                                         "with fnmatch wildcards, no '/' or spaces)")
    return SonameGroup(table.id, " ".join(table.text("why").split()), patterns)
