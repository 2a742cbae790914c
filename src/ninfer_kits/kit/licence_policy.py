"""The licence gate: the policy (data/licence_policy.toml) of which licences may ship together,
and the judge holding each tarball's SBOM components to it (docs/publish.md, "The licence gate").
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, printable, quote, read_data_file
from ninfer_kits.errors import CheckFailed, NinferKitsError
from ninfer_kits.kit import flavours, kitdir, spdx

SCHEMA = 1
DATA_FILE = data_file("licence_policy.toml")
ALLOWED, FORBIDDEN, UNKNOWN = "allowed", "forbidden", "unknown"
_CLASS = re.compile(r"[a-z][a-z0-9-]*")
_LICENCE_ID = re.compile(r"(?:LicenseRef-)?[A-Za-z0-9][A-Za-z0-9.+-]*")
SPDX_LINE = re.compile(r"SPDX-License-Identifier:\s*(?P<expression>[^\n*]+?)\s*(?:\*/)?\s*$",
                       re.MULTILINE)


class LicenceForbidden(CheckFailed):
    """A kit whose components the licence policy forbids shipping together."""


@dataclass(frozen=True)
class LicenceClass:
    name: str
    rank: int  # lower: preferred where an expression offers a choice (OR)
    description: str
    licences: frozenset[str]


@dataclass(frozen=True)
class Rule:
    classes: tuple[str, str]
    why: str
    fix: str


@dataclass(frozen=True)
class Fix:
    components: tuple[str, ...]  # fnmatch patterns on a component's name
    toolchains: tuple[str, ...]
    fix: str  # with {toolchains}

    def says(self) -> str:
        return self.fix.format(toolchains=" or ".join(self.toolchains))


@dataclass(frozen=True)
class TextRule:
    licence: str
    phrases: tuple[str, ...]


@dataclass(frozen=True)
class Policy:
    path: Path
    classes: tuple[LicenceClass, ...]
    exceptions: Mapping[str, str]  # exception id → class name
    forbidden: tuple[Rule, ...]
    fixes: tuple[Fix, ...]
    texts: tuple[TextRule, ...]

    def class_of(self, licence: str) -> LicenceClass | None:
        return next((c for c in self.classes if licence in c.licences), None)

    def named(self, name: str) -> LicenceClass:
        return next(c for c in self.classes if c.name == name)


@cache
def load_policy(path: Path | None = None) -> Policy:
    """The shipped policy, or the file at `path`; ConfigError names file, line, table, key."""
    root = read_data_file(path or DATA_FILE, "the licence policy file")
    root.check_keys(("schema", "classes", "forbidden"), ("exceptions", "fixes", "texts"))
    if root.integer("schema") != SCHEMA:
        raise root.error("schema", f"unsupported schema {root.integer('schema')} (this "
                                   f"ninfer-kits reads schema {SCHEMA})")
    classes = _classes(root.table("classes"))
    names = tuple(c.name for c in classes)
    exceptions = root.table("exceptions", optional=True)
    for exception, name in exceptions.data.items():
        _known_class(exceptions, exception, name, names)
    forbidden = tuple(_rule(table, names) for table in root.tables("forbidden"))
    if not forbidden:
        raise root.error("forbidden", "no [[forbidden]] pair of classes")
    return Policy(path=root.source.path, classes=classes,
                  exceptions={key: str(value) for key, value in exceptions.data.items()},
                  forbidden=forbidden, fixes=tuple(_fix(t) for t in root.tables("fixes")),
                  texts=tuple(_text_rule(t) for t in root.tables("texts")))


def _classes(table: Table) -> tuple[LicenceClass, ...]:
    classes: list[LicenceClass] = []
    seen: dict[str, str] = {}
    for name in table.data:
        if not _CLASS.fullmatch(name):
            raise table.error(name, f"{quote(name)} is not a class name (lowercase, digits, -)")
        row = table.table(name)
        row.check_keys(("rank", "description", "licences"))
        for licence in row.strings("licences", _LICENCE_ID):
            if licence in seen:
                raise row.error("licences", f"{licence} is in class {seen[licence]} already")
            seen[licence] = name
        classes.append(LicenceClass(name, row.integer("rank"), row.text("description"),
                                    frozenset(row.strings("licences"))))
    if not classes:
        raise table.error("", "no licence classes")
    return tuple(classes)


def _known_class(table: Table, key: str, name: object, names: Sequence[str]) -> str:
    if not isinstance(name, str) or name not in names:
        raise table.error(key, f"{name!r} is not a class of [classes] ({', '.join(names)})")
    return name


def _rule(table: Table, names: Sequence[str]) -> Rule:
    table.check_keys(("classes", "why", "fix"))
    pair = table.strings("classes")
    if len(pair) != 2:
        raise table.error("classes", "must name two classes")
    first, second = (_known_class(table, "classes", name, names) for name in pair)
    return Rule((first, second), " ".join(table.text("why").split()),
                " ".join(table.text("fix").split()))


def _fix(table: Table) -> Fix:
    table.check_keys(("components", "toolchains", "fix"))
    fix = Fix(table.texts("components"), table.texts("toolchains"),
              " ".join(table.text("fix").split()))
    try:
        fix.says()
    except (KeyError, IndexError, ValueError) as error:
        raise table.error("fix", f"may use only {{toolchains}} ({error})") from None
    return fix


def _text_rule(table: Table) -> TextRule:
    table.check_keys(("licence", "phrases"))
    licence = table.text("licence")
    if not spdx.is_expression(licence):
        raise table.error("licence", f"{licence!r} is not an SPDX licence expression")
    return TextRule(licence, tuple(" ".join(p.split()) for p in table.texts("phrases")))


def identify_text(text: bytes, policy: Policy | None = None) -> str | None:
    """The SPDX expression a licence text is under: its own SPDX-License-Identifier line, else
    the first [[texts]] of the policy whose phrases all occur in it; None for neither."""
    words = text.decode("utf-8", errors="replace")
    tagged = SPDX_LINE.search(words)
    if tagged is not None and spdx.is_expression(tagged["expression"]):
        return spdx.normalise(tagged["expression"])
    flat = " ".join(words.split())
    for rule in (policy or load_policy()).texts:
        if all(phrase in flat for phrase in rule.phrases):
            return rule.licence
    return None


@dataclass(frozen=True)
class Component:

    ref: str  # its bom-ref: kit/bin/ninfer, kit/lib/libavcodec.so.61, upstream, a purl…
    name: str  # the package (a bundled library's), the program's file name, the upstream
    version: str
    licence: str | None  # an SPDX expression; None where the SBOM names it in words only
    words: str = ""  # the licence as the SBOM names it, where it is no expression
    compiled_in: bool = False  # toolchain code compiled into the programs

    def shown(self) -> str:
        what = self.ref if self.ref.startswith("kit/") else f"{self.name} {self.version}".strip()
        # from an SBOM in a downloaded folder: escaped
        return printable(f"{what} ({self.licence or self.words or 'no licence named'})")


@dataclass(frozen=True)
class Conflict:
    rule: Rule
    sides: tuple[tuple[Component, ...], tuple[Component, ...]]
    fixes: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    tarball: str
    status: str  # ALLOWED, FORBIDDEN, UNKNOWN
    conflicts: tuple[Conflict, ...] = ()
    unknown: tuple[Component, ...] = ()  # licences the policy cannot classify
    not_judged: tuple[Component, ...] = ()  # compiled-in header code named in words
    no_sbom: bool = False

    def line(self) -> str:
        """One line: floor's and verify's information, publish's summary."""
        if self.no_sbom:
            return f"licences of {self.tarball}: unknown (no SBOM beside it: a kit built " \
                   "before SBOMs; the licence policy cannot judge it)"
        if self.status == FORBIDDEN:
            parts = "; ".join(_conflict_line(c) for c in self.conflicts)
            return f"licences of {self.tarball}: must NOT be distributed: {parts}"
        if not self.unknown:
            return f"licences of {self.tarball}: allowed by the licence policy"
        more = f" and {len(self.unknown) - 5} more" if len(self.unknown) > 5 else ""
        return (f"licences of {self.tarball}: none forbidden, but the licence policy cannot "
                f"classify {', '.join(c.shown() for c in self.unknown[:5])}{more}")

    def details(self) -> str:
        """The whole verdict: each conflict's components, why, and the fix."""
        if self.status != FORBIDDEN:
            return self.line()
        lines = [f"{self.tarball} must not be distributed: the licence policy forbids its "
                 f"components together"]
        for conflict in self.conflicts:
            for name, side in zip(conflict.rule.classes, conflict.sides, strict=True):
                lines.append(f"  {name}: " + ", ".join(c.shown() for c in side))
            lines.append(f"  why: {conflict.rule.why}")
            lines.extend(f"  fix: {fix}" for fix in conflict.fixes)
        return "\n".join(lines)


def _conflict_line(conflict: Conflict) -> str:
    sides = " with ".join(", ".join(c.shown() for c in side[:3]) +
                          (f" and {len(side) - 3} more" if len(side) > 3 else "")
                          for side in conflict.sides)
    return f"{sides} ({' and '.join(conflict.rule.classes)}); fix: {conflict.fixes[0]}"


def classes_of(expression: str, policy: Policy) -> frozenset[str] | None:
    """The classes an expression puts its component in; None where a licence it needs has
    none (an OR takes the judgeable alternative of the lowest worst rank)."""
    return _classes_of(spdx.parse(expression), policy)


def _classes_of(expression: spdx.Expression, policy: Policy) -> frozenset[str] | None:
    if isinstance(expression, spdx.Licence):
        own = policy.class_of(expression.id)
        if own is None:
            return None
        return frozenset({policy.exceptions.get(expression.exception, own.name)})
    judged = [_classes_of(term, policy) for term in expression.terms]
    if expression.operator == "AND":
        if any(classes is None for classes in judged):
            return None
        return frozenset().union(*(c for c in judged if c is not None))
    known = [classes for classes in judged if classes is not None]
    if not known:
        return None
    return min(known, key=lambda classes: max(policy.named(n).rank for n in classes))


def judge(tarball: str, components: Iterable[Component], policy: Policy | None = None
          ) -> Verdict:
    policy = policy or load_policy()
    judged: list[tuple[Component, frozenset[str]]] = []
    unknown, not_judged = [], []
    for component in components:
        if component.licence is None and component.compiled_in:
            not_judged.append(component)
            continue
        classes = None if component.licence is None else classes_of(component.licence, policy)
        if classes is None:
            unknown.append(component)
        else:
            judged.append((component, classes))
    conflicts = []
    for rule in policy.forbidden:
        sides = tuple(tuple(c for c, classes in judged if name in classes)
                      for name in rule.classes)
        if all(sides):
            first, second = sides
            conflicts.append(Conflict(rule, (first, second),
                                      _fixes(policy, rule, (*first, *second))))
    status = FORBIDDEN if conflicts else UNKNOWN if unknown else ALLOWED
    return Verdict(tarball, status, tuple(conflicts), tuple(unknown), tuple(not_judged))


def _fixes(policy: Policy, rule: Rule, offenders: Sequence[Component]) -> tuple[str, ...]:
    """The fixes that match an offender, each once, then the rule's own."""
    found = [fix.says() for fix in policy.fixes
             if any(fnmatch.fnmatchcase(c.name, pattern) for c in offenders
                    for pattern in fix.components)]
    return tuple(dict.fromkeys([*found, rule.fix]))


def components(sbom: Mapping[str, Any]) -> tuple[Component, ...]:
    """The SBOM's components but the images that made the kit (scope `excluded`)."""
    found = []
    for part in sbom.get("components") or ():
        if not isinstance(part, dict) or part.get("scope") == "excluded":
            continue
        licence, words = _licence(part.get("licenses") or [])
        properties = {p.get("name") for p in part.get("properties") or () if isinstance(p, dict)}
        found.append(Component(ref=str(part.get("bom-ref", "")), name=str(part.get("name", "")),
                               version=str(part.get("version", "")), licence=licence,
                               words=words,
                               compiled_in="ninfer-kits:compiled_in" in properties))
    return tuple(found)


def _licence(entries: Sequence[Any]) -> tuple[str | None, str]:
    """(SPDX expression, words) of `licenses`, every id and expression ANDed; None without."""
    expressions, words = [], []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("expression"), str):
            expressions.append(entry["expression"])
        licence = entry.get("license")
        if isinstance(licence, dict):
            if isinstance(licence.get("id"), str):
                expressions.append(licence["id"])
            elif isinstance(licence.get("name"), str):
                words.append(licence["name"])
    try:
        return (spdx.all_of(expressions) if expressions else None), "; ".join(words)
    except spdx.NotAnExpression:
        return None, "; ".join([*expressions, *words])


def judge_kit(kit: kitdir.KitDir, policy: Policy | None = None) -> tuple[Verdict, ...]:
    """The verdict on each tarball of a kit folder, from the SBOM beside it."""
    return tuple(judge_tarball(kit.path, flavour.asset, policy) for flavour in kit.flavours)


def judge_tarball(folder: Path, asset: str, policy: Policy | None = None) -> Verdict:
    sbom_path = folder / (asset.removesuffix(kitdir.TARBALL_SUFFIX) + kitdir.SBOM_SUFFIX)
    try:
        sbom = json.loads(sbom_path.read_bytes())
    except FileNotFoundError:
        return Verdict(asset, UNKNOWN, no_sbom=True)
    except (OSError, ValueError) as error:
        raise CheckFailed(f"{sbom_path}: cannot read the SBOM ({error})") from None
    if not isinstance(sbom, dict):
        raise CheckFailed(f"{sbom_path}: not a CycloneDX SBOM (not a JSON object)")
    return judge(asset, components(sbom), policy)


def line_for(path: Path, portable: bool) -> str:
    """floor's and verify's one line on a tarball's (or folder's) SBOM; never fails."""
    try:
        if not path.is_dir():
            return judge_tarball(path.parent, path.name).line()
        folder = path.parent if path.name == kitdir.UNPACKED else path
        tail = flavours.PORTABLE.suffix.removesuffix(kitdir.TARBALL_SUFFIX) + kitdir.SBOM_SUFFIX
        sboms = [sbom for sbom in sorted(folder.glob(f"*{kitdir.SBOM_SUFFIX}"))
                 if sbom.name.endswith(tail) == portable]
        if not sboms:
            return "licences: unknown (no SBOM beside the kit: the licence policy cannot judge it)"
        asset = sboms[0].name.removesuffix(kitdir.SBOM_SUFFIX) + kitdir.TARBALL_SUFFIX
        return judge_tarball(folder, asset).line()
    except NinferKitsError as error:
        return printable(f"licences: not judged ({error})")
