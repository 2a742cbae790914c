"""`fetch --auto`'s choice: the published kit and flavour that will run on a target, judged before
anything is downloaded from the needs the kit index records, as verify judges a kit on disk (a
dynamic section made of those needs, resolved by loader.resolve). The order: docs/fetch.md,
"Which kit?"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ninfer_kits.inspector.elf import ElfInfo, VersionNeed
from ninfer_kits.kit.flavours import rank
from ninfer_kits.loader.resolve import DEFAULT_LOADERS, Resolution, Resolver
from ninfer_kits.release.ledger import LedgerEntry, LedgerFlavour, LedgerNeeds
from ninfer_kits.verify import gpu
from ninfer_kits.verify.gpu_host import GpuReport
from ninfer_kits.verify.report import OK
from ninfer_kits.verify.target import Target

MACHINE, ELF_CLASS_64 = "x86-64", 64
PROGRAM = "kit/bin/ninfer"  # where a kit's program is, below the folder it is unpacked into
NO_DRIVER = "none here (no kernel module, no libcuda.so.1, no nvidia-smi)"


@dataclass(frozen=True)
class Judged:
    entry: LedgerEntry
    flavour: LedgerFlavour
    unmet: tuple[str, ...]  # why it would not run there; none: it runs
    native: bool = False  # a GPU here runs its SASS (no PTX compiled at start)
    notes: tuple[str, ...] = ()  # what could not be checked there

    @property
    def runs(self) -> bool:
        return not self.unmet

    @property
    def words(self) -> str:
        return f"{self.entry.tag} ({self.flavour.flavour})"


@dataclass(frozen=True)
class Choice:
    chosen: Judged | None
    judged: tuple[Judged, ...]  # every flavour judged, candidates in order

    @property
    def nearest(self) -> Judged | None:
        """Where nothing runs: the first flavour judged with the fewest unmet requirements."""
        if not self.judged:
            return None
        return min(self.judged, key=lambda judged: len(judged.unmet))


def candidates(entries: Sequence[LedgerEntry], kit: str | None = None) -> list[LedgerEntry]:
    newest: dict[str, LedgerEntry] = {}
    for entry in sorted(entries, key=lambda entry: entry.published_at):
        if kit is None or entry.kit == kit:
            newest[entry.kit] = entry
    return sorted(newest.values(), key=lambda entry: entry.published_at, reverse=True)


def choose(entries: Sequence[LedgerEntry], target: Target, host: GpuReport | None,
           kit: str | None = None) -> Choice:
    """`host`: its driver and GPUs; None for a root or an image (the runtime brings them)."""
    resolver = Resolver(target.setup)
    judged: list[Judged] = []
    chosen: list[Judged] = []
    for entry in candidates(entries, kit):
        flavours = [judge(entry, flavour, resolver, target, host)
                    for flavour in sorted(entry.flavour_facts(),
                                          key=lambda facts: rank(facts.flavour))]
        judged += flavours
        running = next((flavour for flavour in flavours if flavour.runs), None)
        if running is not None:
            chosen.append(running)
    best = min(chosen, key=lambda judged: not judged.native) if chosen else None
    return Choice(best, tuple(judged))


def judge(entry: LedgerEntry, flavour: LedgerFlavour, resolver: Resolver, target: Target,
          host: GpuReport | None) -> Judged:
    needs = flavour.needs
    if needs is None:
        return Judged(entry, flavour, ("not judged: published before the index recorded what "
                                       "its tarballs need",))
    unmet = _library_problems(resolver.resolve_info(
        f"{target.kit_root.rstrip('/')}/{PROGRAM}", dynamic_section(needs),
        f"{target.kit_root.rstrip('/')}/kit/bin", shown=entry.tag))
    if host is None:
        return Judged(entry, flavour, tuple(unmet),
                      notes=(f"the driver and the GPU are not checked in a {target.mode}",))
    side = gpu.check_gpu_side(host, entry.cuda_version or "0", needs.sass, needs.ptx,
                              (*needs.relocatable_sass, *needs.relocatable_ptx))
    if host.no_driver:  # the probe's reasons, one per source, say no more than this
        unmet.append(f"{side.driver.requirement}: {NO_DRIVER}")
        return Judged(entry, flavour, tuple(unmet))
    if side.driver.status not in (OK, gpu.UNKNOWN):
        unmet.append(f"{side.driver.requirement}: {side.driver.found or side.driver.status}")
    running = [check for check in side.gpus if check.status == OK]
    if not running:
        unmet.append(_gpu_problem(side, needs))
    return Judged(entry, flavour, tuple(unmet),
                  native=any(check.how == "native" for check in running))


def dynamic_section(needs: LedgerNeeds) -> ElfInfo:
    """One dynamic section standing for all the flavour's programs."""
    return ElfInfo(path=PROGRAM, elf_class=ELF_CLASS_64, machine=MACHINE, type="DYN",
                   interpreter=DEFAULT_LOADERS[MACHINE], soname=None, needed=needs.sonames,
                   rpath=(), runpath=needs.runpath, build_id=None,
                   version_needs=tuple(VersionNeed(library, names)
                                       for library, names in needs.versions),
                   version_defs=(), device_code=(), versym=bool(needs.versions))


def _library_problems(resolution: Resolution) -> list[str]:
    problems = []
    if resolution.interpreter_missing:
        problems.append(f"no {resolution.interpreter_missing} (the x86-64 glibc loader)")
    problems += [f"{missing.name} not found" for missing in resolution.missing]
    problems += [f"{gap.library} ({gap.path}) lacks {gap.version}" for gap in resolution.gaps]
    return problems


def _gpu_problem(side: gpu.GpuSide, needs: LedgerNeeds) -> str:
    requirement = gpu.gpu_requirement(needs.sass, needs.ptx,
                                      (*needs.relocatable_sass, *needs.relocatable_ptx))
    found = "; ".join(f"{check.found}: {check.status}" for check in side.gpus)
    return f"{requirement}: {found or side.missing_gpu or 'no GPU found'}"
