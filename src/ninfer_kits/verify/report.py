"""The verdict, in the seed's shape: each requirement of the kit, what the target has, whether
it is met, and for each that is not, how to fix it. Pure: resolutions and facts in, rows out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ninfer_kits.inspector.floor import KitFloor, SymbolVersion
from ninfer_kits.runtime_facts import parse_version, runtime_facts
from ninfer_kits.verify.fixes import fix_for
from ninfer_kits.verify.resolve import Found, Resolution, VersionGap

OK, MISSING, TOO_OLD, NOT_CHECKED = "ok", "missing", "too old", "not checked"
CANNOT_RUN = "cannot run"
JSON_SCHEMA_VERSION = 1
GLIBC_FIX = ("a distribution with glibc ≥ {version} (Ubuntu 24.04 has 2.39, Debian 13 has 2.41), "
             "or run the kit in a container FROM nvidia/cuda:<version>-runtime-ubuntu24.04")


@dataclass(frozen=True)
class Row:
    requirement: str
    found: str
    status: str
    fix: str = ""


@dataclass(frozen=True)
class VerifyReport:
    kit: str
    target: str
    checked: str
    rows: tuple[Row, ...]
    resolutions: tuple[Resolution, ...]

    @property
    def met(self) -> bool:
        return all(row.status in (OK, NOT_CHECKED) for row in self.rows)

    @property
    def exit_code(self) -> int:
        return 0 if self.met else 1


def library_rows(floor: KitFloor, resolutions: Sequence[Resolution]) -> list[Row]:
    """glibc, then every library the kit links, then anything missing further down."""
    glibc = runtime_facts().glibc_sonames
    found = _found_by_name(resolutions)
    gaps = [gap for res in resolutions for gap in res.gaps]
    rows = [_glibc_row(floor, found, [g for g in gaps if g.library in glibc], resolutions)]
    for soname in floor.sonames:
        if soname in glibc:
            continue
        rows.append(_library_row(floor, soname, found.get(soname), resolutions,
                                 [g for g in gaps if g.library == soname]))
    direct = set(floor.sonames)
    for res in resolutions:
        for missing in res.missing:
            if missing.name not in direct:
                rows.append(Row(f"{missing.name} (needed by {missing.needed_by})", "not found",
                                MISSING, fix_for(missing.name)))
    for gap in gaps:
        if gap.library not in direct and gap.library not in glibc:
            rows.append(Row(f"{gap.library} providing {gap.version} (needed by {gap.needed_by})",
                            _provides(gap), TOO_OLD, fix_for(gap.library)))
    return _unique(rows)


def _found_by_name(resolutions: Sequence[Resolution]) -> dict[str, Found]:
    found: dict[str, Found] = {}
    for res in resolutions:
        for item in res.found:
            found.setdefault(item.name, item)
    return found


def _glibc_row(floor: KitFloor, found: dict[str, Found], gaps: list[VersionGap],
               resolutions: Sequence[Resolution]) -> Row:
    machine = "/".join(floor.machines) or "x86-64"
    need = floor.floor("GLIBC")
    requirement = f"{machine} Linux, glibc ≥ {need.version}" if need else f"{machine} Linux"
    interpreter = next((r.interpreter_missing for r in resolutions if r.interpreter_missing), None)
    if interpreter:
        return Row(requirement, f"no {interpreter}: not a glibc {machine} system", MISSING,
                   GLIBC_FIX.format(version=need.version if need else "2.34"))
    libc = found.get("libc.so.6")
    have = _highest(libc_defs(resolutions), "GLIBC")
    where = f"glibc {have} ({libc.path})" if libc and have else "glibc (version unknown)"
    if gaps:
        return Row(requirement, where, TOO_OLD,
                   GLIBC_FIX.format(version=need.version if need else "?"))
    return Row(requirement, where, OK)


def libc_defs(resolutions: Sequence[Resolution]) -> tuple[str, ...]:
    return next((res.libc_versions for res in resolutions if res.libc_versions), ())


def _library_row(floor: KitFloor, soname: str, found: Found | None,
                 resolutions: Sequence[Resolution], gaps: list[VersionGap]) -> Row:
    versions = _needed_highest(floor, soname)
    requirement = f"{soname} providing {', '.join(versions)}" if versions else soname
    if soname.startswith("libcudart.so."):
        requirement = f"CUDA {soname.rsplit('.', 1)[1]} runtime — {requirement}"
    absent = sorted({f"{s.kind} {s.folder}" for r in resolutions for s in r.stale})
    if found is None:
        searched = f"; the kit's {', '.join(absent)} does not exist here" if absent else ""
        return Row(requirement, f"not found{searched}", MISSING, fix_for(soname))
    where = f"{found.path} ({found.via})"
    if soname.startswith("libcudart.so.") and absent:
        # The kit's RUNPATH names the build machine's toolkit: say where it was found instead.
        where += f"; the kit's {', '.join(absent)} does not exist here"
    if gaps:
        provides = _provides(gaps[0])
        wanted = sorted({g.version for g in gaps}, key=SymbolVersion.parse)
        advice = _gcc_advice(wanted)
        return Row(requirement, provides, TOO_OLD,
                   f"the kit needs {', '.join(wanted)}{advice}: {fix_for(soname)} from a "
                   f"newer release")
    return Row(requirement, where, OK)


def _needed_highest(floor: KitFloor, soname: str) -> list[str]:
    highest: dict[str, SymbolVersion] = {}
    for name in dict(floor.versions_by_library).get(soname, ()):
        version = SymbolVersion.parse(name)
        if version.number and (version.prefix not in highest or version > highest[version.prefix]):
            highest[version.prefix] = version
    return [version.name for version in sorted(highest.values())]


def _provides(gap: VersionGap) -> str:
    prefix = SymbolVersion.parse(gap.version).prefix
    have = _highest(gap.defined, prefix)
    folder = gap.path.rsplit("/", 1)[0]
    if have:
        return f"{gap.library} at {folder} provides up to {prefix}_{have}"
    return f"{gap.library} at {folder} provides no {prefix} version"


def _highest(names: Iterable[str], prefix: str) -> str:
    numbers = [SymbolVersion.parse(n).number for n in names
               if SymbolVersion.parse(n).prefix == prefix and SymbolVersion.parse(n).number]
    return ".".join(map(str, max(numbers))) if numbers else ""


def _gcc_advice(wanted: list[str]) -> str:
    facts = runtime_facts()
    for name in reversed(wanted):
        version = SymbolVersion.parse(name)
        if version.prefix in ("GLIBCXX", "CXXABI") and version.number:
            return f" ({facts.gcc_advice(version.prefix, parse_version(version.version))})"
    return ""


def _unique(rows: list[Row]) -> list[Row]:
    return list(dict.fromkeys(rows))


def render(report: VerifyReport) -> str:
    """The table, then one fix line per unmet requirement, then the verdict."""
    header = ("Requirement", "Found here", "Status")
    cells = [header, *((row.requirement, row.found, row.status) for row in report.rows)]
    widths = [max(len(cell[i]) for cell in cells) for i in range(2)]
    lines = [f"Kit     {report.kit} ({report.checked})", f"Target  {report.target}", ""]
    lines.append(f"| {header[0].ljust(widths[0])} | {header[1].ljust(widths[1])} | Status |")
    lines.append(f"|{'-' * (widths[0] + 2)}|{'-' * (widths[1] + 2)}|--------|")
    lines += [f"| {r.requirement.ljust(widths[0])} | {r.found.ljust(widths[1])} | {r.status} |"
              for r in report.rows]
    fixes = [f"- {row.requirement}: {row.fix}" for row in report.rows if row.fix
             and row.status not in (OK, NOT_CHECKED)]
    if fixes:
        lines += ["", "To fix:", *fixes]
    verdict = ("Every requirement checked here is met: the kit will load"
               + ("." if all(r.status == OK for r in report.rows)
                  else " (what could not be checked here is marked).")
               if report.met else "The kit will not run here as it is.")
    lines += ["", verdict]
    return "\n".join(lines)


def to_json(report: VerifyReport) -> dict[str, object]:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "kit": report.kit,
        "target": report.target,
        "checked": report.checked,
        "met": report.met,
        "rows": [{"requirement": r.requirement, "found": r.found, "status": r.status,
                  "fix": r.fix} for r in report.rows],
        "programs": [{
            "program": res.program,
            "loads": res.loads,
            "interpreter_missing": res.interpreter_missing,
            "found": [{"name": f.name, "path": f.path, "via": f.via, "needed_by": f.needed_by}
                      for f in res.found],
            "missing": [{"name": m.name, "needed_by": m.needed_by, "searched": list(m.searched)}
                        for m in res.missing],
            "version_gaps": [{"library": g.library, "path": g.path, "version": g.version,
                              "needed_by": g.needed_by} for g in res.gaps],
            "stale_search_paths": [{"kind": s.kind, "folder": s.folder, "name": s.name,
                                    "found": s.found} for s in res.stale],
        } for res in report.resolutions],
    }
