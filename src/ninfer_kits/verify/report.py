"""The verdict, in the seed's shape: each requirement of the kit, what the target has, whether
it is met, and for each that is not, how to fix it. Pure: resolutions and facts in, rows out."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ninfer_kits.errors import EXIT_WILL_NOT_RUN
from ninfer_kits.host import versions
from ninfer_kits.host.runtime_facts import runtime_facts
from ninfer_kits.inspector.floor import KitFloor, SymbolVersion, highest_needed
from ninfer_kits.inspector.inputs import printable
from ninfer_kits.kit.flavours import PORTABLE
from ninfer_kits.loader.resolve import Found, NotFound, Resolution, VersionGap
from ninfer_kits.loader.symbols import UnboundSymbol
from ninfer_kits.platforms.distros import DRIVER_SONAMES
from ninfer_kits.release.reproduction import NOT_REPRODUCED, Reproduction
from ninfer_kits.verify.fixes import Advice, System, another_build, fix_for, kit_lacks, too_old
from ninfer_kits.verify.kit import KitOnDisk

OK, MISSING, TOO_OLD, NOT_CHECKED = "ok", "missing", "too old", "not checked"
# The right name, another build (libcurl.so.4 with CURL_GNUTLS_3, not CURL_OPENSSL_4): newer
# would not help.
ANOTHER_BUILD = "another build"
NOT_INSTALLED = "not installed here (not in ld.so.cache nor in the system folders)"
SHOWN_SEARCHED = 6  # libraries named in a row for an unbound symbol (--json has them all)
CANNOT_RUN = "cannot run"
JSON_SCHEMA_VERSION = 1
GLIBC_FIX = ("a distribution with glibc ≥ {version} (Ubuntu 24.04 has 2.39, Debian 13 has 2.41), "
             "or run the kit in a container FROM nvidia/cuda:<version>-runtime-ubuntu24.04")


@dataclass(frozen=True)
class Places:
    """How rows name a file: the kit's own by its path in the kit (`kit/lib/libk.so.1`), never
    where verify read it; others by their path on the target."""

    kit_root: str = ""  # the folder holding kit/, as the target sees it

    def file(self, path: str) -> str:
        root = self.kit_root.rstrip("/")
        if root and path.startswith(root + "/kit/"):
            return path[len(root) + 1:]
        return path

    def text(self, words: str) -> str:
        """`words` with kit paths shown as `kit/...`."""
        root = self.kit_root.rstrip("/")
        return words.replace(root + "/kit/", "kit/") if root else words

    def folder(self, path: str) -> str:
        return self.file(path).rsplit("/", 1)[0]

    def in_kit(self, path: str) -> bool:
        return self.file(path) != path


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
    # the release's REPRODUCTION.json (checked); None: not independently reproduced
    reproduction: Reproduction | None = None

    @property
    def reproduced(self) -> str:
        if self.reproduction is None:
            return NOT_REPRODUCED
        return self.reproduction.words()

    @property
    def met(self) -> bool:
        return all(row.status in (OK, NOT_CHECKED) for row in self.rows)

    @property
    def exit_code(self) -> int:
        """0 or EXIT_WILL_NOT_RUN: this table judges the target, never the kit's soundness."""
        return 0 if self.met else EXIT_WILL_NOT_RUN


def library_rows(floor: KitFloor, resolutions: Sequence[Resolution],
                 system: System | None = None, kit: KitOnDisk | None = None,
                 places: Places | None = None) -> list[Row]:
    """glibc, the kit's libraries, what is missing further down, unbound symbols, then kit
    files no program can load; `system` and `kit` shape the fixes."""
    advice = Advice(kit.info.kit if kit and kit.info else "",
                    bool(kit and kit.info and kit.info.asset_of(PORTABLE.name) is not None))
    places = places or Places()
    glibc = runtime_facts().glibc_sonames
    found = _found_by_name(resolutions)
    gaps = [gap for res in resolutions for gap in res.gaps]
    missing = {m.name: m for res in resolutions for m in res.missing}
    from_driver = {m.name for res in resolutions for m in res.from_driver}
    machines = _program_machines(kit) or floor.machines
    rows = [*_loader_rows(machines, floor, resolutions), _glibc_row(machines, floor, found, [
        g for g in gaps if g.library in glibc], resolutions)]
    rows += [Row(f"{name} (glibc's own library)", _not_found(item, places), MISSING,
                 "a glibc system has it: this target's glibc is incomplete or not glibc; "
                 + GLIBC_FIX.format(version=_glibc_need(floor)))
             for name, item in missing.items() if name in glibc]
    fix = functools.partial(fix_for, system=system, advice=advice)
    for soname in floor.sonames:
        if soname in glibc or soname in from_driver:
            continue  # glibc's rows above; the driver's rows (verify.check) for the driver's
        rows.append(_library_row(floor, soname, found.get(soname), missing.get(soname),
                                 resolutions, [g for g in gaps if g.library == soname],
                                 system, advice, places))
    direct = set(floor.sonames)
    for res in resolutions:
        for item in res.missing:
            if item.name not in direct and item.name not in glibc:
                rows.append(Row(f"{item.name} (needed by {places.file(item.needed_by)})",
                                _not_found(item, places), MISSING,
                                _kit_fix(item, floor) or _driver_fix(item.name)
                                or fix(item.name)))
    for gap in gaps:
        if gap.library not in direct and gap.library not in glibc:
            rows.append(_gap_row(f"{gap.library} providing {gap.version} (needed by "
                                 f"{places.file(gap.needed_by)})", [gap], system, advice,
                                 places))
    rows += symbol_rows(resolutions, system, advice, places)
    rows += _foreign_rows(kit, floor)
    return _unique(rows)


def symbol_rows(resolutions: Sequence[Resolution], system: System | None, advice: Advice,
                places: Places) -> list[Row]:
    """One row per file and library for the symbols nothing in the scope defines."""
    groups: dict[tuple[str, str, str], list[UnboundSymbol]] = {}
    for res in resolutions:
        provider = {f.name: f.path for f in res.found}
        for item in res.unbound:
            key = (item.needed_by, item.library, provider.get(item.library, ""))
            groups.setdefault(key, []).append(item)
    return [_symbol_row(needed_by, library, path, items, system, advice, places)
            for (needed_by, library, path), items in groups.items()]


def _symbol_row(needed_by: str, library: str, path: str, items: Sequence[UnboundSymbol],
                system: System | None, advice: Advice, places: Places) -> Row:
    """`path`: where the library was found; "" for unversioned symbols (any could define them)."""
    names = list(dict.fromkeys(_symbol_name(item) for item in items))
    them = "it" if len(names) == 1 else "them"
    what = ("symbol " if len(names) == 1 else "symbols ") + _some(names, 5)
    source = f" of {library}" if library else ""
    requirement = f"{what}{source}, needed by {places.file(needed_by)}"
    searched = [places.file(p) for p in items[0].searched]
    looked = f"searched {_some(searched, SHOWN_SEARCHED)}, in load order"
    if not (library and path):
        return Row(requirement, f"no library the program loads defines {them} ({looked})",
                   MISSING, f"the kit was linked against a library that defines {them} and "
                            f"that this target lacks; `ninfer-kits inspect` names the "
                            f"libraries the kit links")
    found = (f"not defined by {library} at {places.folder(path)} nor by any other library the "
             f"program loads ({looked})")
    fix = (kit_lacks(places.file(path), what) if places.in_kit(path)
           else another_build(library, f"defines {what}", system, advice))
    return Row(requirement, found, MISSING, fix)


def _symbol_name(item: UnboundSymbol) -> str:
    return f"{item.name}@{item.version}" if item.version else item.name


def _some(names: Sequence[str], shown: int) -> str:
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def _foreign_rows(kit: KitOnDisk | None, floor: KitFloor) -> list[Row]:
    """Kit files of another ELF class or machine than its programs, which none can load."""
    if kit is None:
        return []
    programs = {str(p.relative_to(kit.root)) for p in kit.programs}
    kinds = {(f.elf_class, f.machine) for f in kit.files if f.path in programs}
    rows = []
    for info in kit.files:
        if kinds and (info.elf_class, info.machine) not in kinds:
            want = "/".join(sorted({f"{m} ({c}-bit)" for c, m in kinds}))
            rows.append(Row(f"{info.path} loadable by the kit's {want} programs",
                            f"a {info.elf_class}-bit {info.machine} file (ELFCLASS"
                            f"{info.elf_class}): the loader skips it", CANNOT_RUN,
                            f"build it for {want}, or leave it out of the kit"))
    return rows


def _program_machines(kit: KitOnDisk | None) -> tuple[str, ...]:
    """What the target must be: the machines of the kit's programs (not its libraries')."""
    if kit is None:
        return ()
    programs = {str(p.relative_to(kit.root)) for p in kit.programs}
    return tuple(dict.fromkeys(f.machine for f in kit.files if f.path in programs))


def _loader_rows(machines: tuple[str, ...], floor: KitFloor,
                 resolutions: Sequence[Resolution]) -> list[Row]:
    machine = "/".join(machines) or "x86-64"
    return [Row(f"the dynamic loader {path}", f"no {path}: not a glibc {machine} system",
                MISSING, GLIBC_FIX.format(version=_glibc_need(floor)))
            for path in dict.fromkeys(r.interpreter_missing for r in resolutions
                                      if r.interpreter_missing)]


def _glibc_need(floor: KitFloor) -> str:
    need = floor.floor("GLIBC")
    return need.version if need else "2.34"


def _not_found(item: NotFound, places: Places, absent: str = "") -> str:
    text = "not found" + absent
    if item.skipped:
        skipped = ", ".join(places.text(s) for s in item.skipped)
        text += (f"; skipped {skipped}: the loader takes only libraries of the "
                 f"program's ELF class and machine")
    return text


def _kit_fix(item: NotFound, floor: KitFloor) -> str:
    if item.name not in floor.provided_in_kit:
        return ""
    if item.skipped:
        return "the kit's own copy is of another ELF class or machine (see its row): rebuild it"
    return "the kit carries it, but no search path of the program reaches it: check RUNPATH"


def _driver_fix(soname: str) -> str:
    if soname in DRIVER_SONAMES:
        return f"install the NVIDIA driver ({soname} comes with it)"
    return ""


def _found_by_name(resolutions: Sequence[Resolution]) -> dict[str, Found]:
    found: dict[str, Found] = {}
    for res in resolutions:
        for item in res.found:
            found.setdefault(item.name, item)
    return found


def _glibc_row(machines: tuple[str, ...], floor: KitFloor, found: dict[str, Found],
               gaps: list[VersionGap], resolutions: Sequence[Resolution]) -> Row:
    machine = "/".join(machines) or "x86-64"
    need = floor.floor("GLIBC")
    requirement = f"{machine} Linux, glibc ≥ {need.version}" if need else f"{machine} Linux"
    interpreter = next((r.interpreter_missing for r in resolutions if r.interpreter_missing), None)
    if interpreter:
        return Row(requirement, "no glibc loader (see its row)", MISSING,
                   GLIBC_FIX.format(version=_glibc_need(floor)))
    libc = found.get("libc.so.6")
    path = libc.path if libc else next((r.libc_path for r in resolutions if r.libc_path), "")
    have = glibc_release(resolutions)
    if not path:
        return Row(requirement, "no libc.so.6 (see its row)", MISSING,
                   GLIBC_FIX.format(version=_glibc_need(floor)))
    where = f"glibc {have} ({path})" if have else f"glibc (version unknown) ({path})"
    if gaps:
        return Row(requirement, where, TOO_OLD, GLIBC_FIX.format(version=_glibc_need(floor)))
    return Row(requirement, where, OK)


def glibc_release(resolutions: Sequence[Resolution]) -> str:
    """libc.so.6's banner, which names releases that add no GLIBC_ version (docs/verify.md);
    else the highest GLIBC_ version it defines."""
    release = next((r.libc_release for r in resolutions if r.libc_release), "")
    return release or _highest(libc_defs(resolutions), "GLIBC")


def libc_defs(resolutions: Sequence[Resolution]) -> tuple[str, ...]:
    return next((res.libc_versions for res in resolutions if res.libc_versions), ())


def _library_row(floor: KitFloor, soname: str, found: Found | None, missing: NotFound | None,
                 resolutions: Sequence[Resolution], gaps: list[VersionGap],
                 system: System | None, advice: Advice, places: Places) -> Row:
    needed = [version.name for version in highest_needed(floor, soname) if version.number]
    requirement = f"{soname} providing {', '.join(needed)}" if needed else soname
    cudart = soname.startswith("libcudart.so.")
    if cudart:
        requirement = f"CUDA {soname.rsplit('.', 1)[1]} runtime — {requirement}"
    # The build machine's CUDA RUNPATH is named in the CUDA runtime's row alone.
    absent = sorted({f"{s.kind} {s.folder}" for r in resolutions for s in r.stale}) if cudart \
        else []
    if found is None:
        text = _not_found(missing, places) if missing else "not found"
        if not (missing and missing.skipped):
            text = f"not found: {NOT_INSTALLED}"
        if absent:
            text += f"; the kit's {', '.join(absent)} does not exist here either"
        return Row(requirement, text, MISSING,
                   _driver_fix(soname) or fix_for(soname, system, advice))
    where = f"{places.file(found.path)} ({places.text(found.via)})"
    if absent:
        where += f"; the kit's {', '.join(absent)} does not exist here"
    if gaps:
        return _gap_row(requirement, gaps, system, advice, places)
    unversioned = [u for r in resolutions for u in r.unversioned if u.library == soname]
    if unversioned:
        where += ("; it defines no symbol versions: the loader warns \"no version information "
                  "available\" and goes on")
    return Row(requirement, where, OK)


def _gap_row(requirement: str, gaps: Sequence[VersionGap], system: System | None,
             advice: Advice, places: Places) -> Row:
    """Versions a library does not define: too old where it defines older ones of the same
    kind (GLIBCXX_3.4.30 for 3.4.31), another build where it defines others (CURL_GNUTLS_3
    for CURL_OPENSSL_4) or has no symbol version table at all."""
    gap = gaps[0]
    wanted = sorted({SymbolVersion.parse(g.version) for g in gaps})
    needs = ", ".join(v.name for v in wanted)
    path = places.file(gap.path)
    if places.in_kit(gap.path):
        return Row(requirement, _provides(gap, places), ANOTHER_BUILD,
                   kit_lacks(path, f"the version{'s' if len(wanted) > 1 else ''} {needs}"))
    if not _is_older(gap, wanted):
        return Row(requirement, _provides(gap, places), ANOTHER_BUILD,
                   another_build(gap.library, f"provides {needs}", system, advice))
    return Row(requirement, _provides(gap, places), TOO_OLD,
               f"the kit needs {needs}{_gcc_advice(wanted)}: "
               f"{too_old(gap.library, system, advice)}")


def _is_older(gap: VersionGap, wanted: Sequence[SymbolVersion]) -> bool:
    """Whether the library defines versions of the needed kinds, all of them lower."""
    defined = [SymbolVersion.parse(name) for name in gap.defined]
    for need in wanted:
        same = [v.number for v in defined if v.prefix == need.prefix and v.number]
        if not same or not need.number or max(same) >= need.number:
            return False
    return True


def _provides(gap: VersionGap, places: Places) -> str:
    prefix = SymbolVersion.parse(gap.version).prefix
    have = _highest(gap.defined, prefix)
    where = f"{gap.library} at {places.folder(gap.path)}"
    if not gap.defined:
        return (f"{where} has no symbol version table: the loader cannot bind a versioned "
                f"symbol to it (it stops: \"Inconsistency detected by ld.so\")")
    if have:
        return f"{where} provides up to {prefix}_{have}"
    others = sorted(gap.defined, key=SymbolVersion.parse)
    return (f"another build of {gap.library} at {places.folder(gap.path)}: it provides "
            f"{_some(others, 4)}, not {gap.version}")


def _highest(names: Iterable[str], prefix: str) -> str:
    numbers = [version.number for version in map(SymbolVersion.parse, names)
               if version.prefix == prefix and version.number]
    return versions.dotted(max(numbers)) if numbers else ""


def _gcc_advice(wanted: Sequence[SymbolVersion]) -> str:
    facts = runtime_facts()
    for version in reversed(wanted):
        if version.prefix in ("GLIBCXX", "CXXABI") and version.number:
            return f" ({facts.gcc_advice(version.prefix, version.number)})"
    return ""


def _unique(rows: list[Row]) -> list[Row]:
    return list(dict.fromkeys(rows))


def render(report: VerifyReport) -> str:
    """The table, then one fix line per unmet requirement, then the verdict. Every text is
    escaped: names in it come from the kit (sonames, paths, BUILDINFO.txt) and the target's
    files, and none may reach the terminal as a control sequence."""
    header = ("Requirement", "Found here", "Status")
    rows = [Row(printable(row.requirement), printable(row.found), row.status,
                printable(row.fix)) for row in report.rows]
    cells = [header, *((row.requirement, row.found, row.status) for row in rows)]
    widths = [max(len(cell[i]) for cell in cells) for i in range(2)]
    lines = [f"Kit     {printable(report.kit)} ({printable(report.checked)})",
             f"Repro   {printable(report.reproduced)}", f"Target  {printable(report.target)}",
             ""]
    lines.append(f"| {header[0].ljust(widths[0])} | {header[1].ljust(widths[1])} | Status |")
    lines.append(f"|{'-' * (widths[0] + 2)}|{'-' * (widths[1] + 2)}|--------|")
    lines += [f"| {r.requirement.ljust(widths[0])} | {r.found.ljust(widths[1])} | {r.status} |"
              for r in rows]
    fixes = [f"- {row.requirement}: {row.fix}" for row in rows if row.fix
             and row.status not in (OK, NOT_CHECKED)]
    if fixes:
        lines += ["", "To fix:", *fixes]
    verdict = ("Every requirement checked here is met: the kit will load"
               + ("." if all(r.status == OK for r in report.rows)
                  else " (what could not be checked here is marked).")
               if report.met else "The kit will not run here as it is.")
    lines += ["", verdict]
    return "\n".join(lines)


def _reproduction_json(report: VerifyReport) -> dict[str, object]:
    record = report.reproduction
    return {"result": "none" if record is None else record.result, "words": report.reproduced,
            "date": None if record is None else record.date,
            "run": None if record is None else record.run,
            "summary": None if record is None else record.summary,
            "differences": [] if record is None else list(record.differences)}


def to_json(report: VerifyReport) -> dict[str, object]:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "kit": report.kit,
        "target": report.target,
        "checked": report.checked,
        "met": report.met,
        "reproduction": _reproduction_json(report),
        "rows": [{"requirement": r.requirement, "found": r.found, "status": r.status,
                  "fix": r.fix} for r in report.rows],
        "programs": [{
            "program": res.program,
            "loads": res.loads,
            "interpreter_missing": res.interpreter_missing,
            "found": [{"name": f.name, "path": f.path, "via": f.via, "needed_by": f.needed_by}
                      for f in res.found],
            "missing": [{"name": m.name, "needed_by": m.needed_by, "searched": list(m.searched),
                         "skipped": list(m.skipped)} for m in res.missing],
            "supplied_by_driver": [m.name for m in res.from_driver],
            "unversioned": [{"library": u.library, "path": u.path, "versions": list(u.versions),
                             "needed_by": u.needed_by} for u in res.unversioned],
            "version_gaps": [{"library": g.library, "path": g.path, "version": g.version,
                              "needed_by": g.needed_by} for g in res.gaps],
            "stale_search_paths": [{"kind": s.kind, "folder": s.folder, "name": s.name,
                                    "found": s.found} for s in res.stale],
            "unbound_symbols": [{"name": u.name, "version": u.version, "library": u.library,
                                 "needed_by": u.needed_by, "searched": list(u.searched)}
                                for u in res.unbound],
        } for res in report.resolutions],
    }
