"""What each tarball needs to run and where that is met, read as `inspect` reads it and judged
as `floor` judges it, for the ledger's [[flavours]] and the kit index."""

from __future__ import annotations

from dataclasses import dataclass

from ninfer_kits.inspector.floor import KitFloor
from ninfer_kits.inspector.inspection import inspect_path
from ninfer_kits.kit.kitdir import Flavour, KitDir
from ninfer_kits.platforms.cuda_drivers import driver_minimum
from ninfer_kits.platforms.distro_verdict import UNKNOWN, YES, judge_all
from ninfer_kits.platforms.distros import DistroFacts, shipped_distros
from ninfer_kits.release.ledger import LedgerFlavour, LedgerNeeds

GLIBC = "GLIBC"


@dataclass(frozen=True)
class Judged:
    flavours: tuple[LedgerFlavour, ...]  # in the kit folder's order, the plain kit first
    distributions_as_of: str  # the date of data/distros.toml's facts
    driver_minimum: str | None


def judge(kit: KitDir) -> Judged:
    known = shipped_distros()
    cuda = kit.info.cuda_version
    return Judged(tuple(_flavour(flavour, known, cuda) for flavour in kit.flavours),
                  known.as_of.isoformat(), driver_minimum(cuda))


def _flavour(flavour: Flavour, known: DistroFacts, cuda_version: str) -> LedgerFlavour:
    floor = inspect_path(flavour.path).floor
    verdicts = judge_all(floor, known, cuda_version=cuda_version)
    return LedgerFlavour(
        flavour=flavour.name, asset=flavour.asset, needs=needs_of(floor),
        meets=tuple(v.distro.id for v in verdicts if v.answer == YES),
        not_known=tuple(v.distro.id for v in verdicts if v.answer == UNKNOWN))


def needs_of(floor: KitFloor) -> LedgerNeeds:
    glibc = next((p.version for p in floor.prefix_floors if p.prefix == GLIBC), None)
    carried = set(floor.provided_in_kit)
    return LedgerNeeds(
        glibc=glibc, sonames=floor.sonames, runpath=floor.runpath, sass=floor.sass,
        ptx=floor.ptx, relocatable_sass=_archs(floor, "sass"),
        relocatable_ptx=_archs(floor, "ptx"),
        versions=tuple((library, names) for library, names in floor.versions_by_library
                       if library not in carried))


def _archs(floor: KitFloor, kind: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(code.arch for code in floor.relocatable if code.kind == kind))
