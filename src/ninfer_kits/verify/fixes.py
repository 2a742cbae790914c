"""What to install for a missing soname (data/soname_packages.toml, validated on load)."""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.{}-]+$")


@dataclass(frozen=True)
class PackageRule:
    soname: re.Pattern[str]
    apt: str
    older: str
    what: str

    def fix(self, soname: str) -> str | None:
        match = self.soname.fullmatch(soname)
        if match is None:
            return None
        groups = match.groups()
        name = self.apt.replace("{1}", groups[0] if groups else "")
        also = f" (or {self.older} on releases before the 64-bit time_t transition)" \
            if self.older else ""
        return f"install {self.what}: apt-get install {name}{also}"


@functools.cache
def package_rules() -> tuple[PackageRule, ...]:
    path = Path(__file__).resolve().parent.parent / "data" / "soname_packages.toml"
    return _validate(tomllib.loads(path.read_text(encoding="utf-8")), path.name)


def _validate(raw: dict[str, Any], name: str) -> tuple[PackageRule, ...]:
    if raw.get("schema") != 1:
        raise ValueError(f"{name}: unsupported schema {raw.get('schema')!r}")
    rules = []
    for index, entry in enumerate(raw.get("package", []), start=1):
        where = f"{name}: [[package]] #{index}"
        try:
            pattern = re.compile(entry["soname"])
        except (KeyError, re.error) as error:
            raise ValueError(f"{where}: soname must be a regular expression ({error})") from None
        for key in ("apt", "older"):
            value = entry.get(key, "")
            if value and not PACKAGE_NAME.match(value):
                raise ValueError(f"{where}: {key} {value!r} is not a package name")
        if not entry.get("apt") or not entry.get("what"):
            raise ValueError(f"{where}: apt and what are required")
        rules.append(PackageRule(pattern, entry["apt"], entry.get("older", ""), entry["what"]))
    return tuple(rules)


def fix_for(soname: str) -> str:
    for rule in package_rules():
        found = rule.fix(soname)
        if found:
            return found
    return f"install the package that provides {soname} (apt-file search {soname})"
