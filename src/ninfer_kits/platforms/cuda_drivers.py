"""The driver's CUDA facts (data/cuda_drivers.toml, validated on load): the driver each CUDA
release needs, and each major's driver floor (minor version compatibility)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, read_data_file
from ninfer_kits.host import versions
from ninfer_kits.host.versions import CUDA_VERSION, DRIVER_VERSION

RELEASE_NAME: Final = re.compile(r"^(?:GA|Update [1-9]\d*)$")


@dataclass(frozen=True)
class CudaRelease:
    cuda: tuple[int, int]
    release: str  # "GA", "Update 2"
    driver: str  # the minimum Linux x86-64 driver, "580.65.06"

    @property
    def label(self) -> str:
        return f"CUDA {self.cuda[0]}.{self.cuda[1]} {self.release}"


@dataclass(frozen=True)
class CudaDrivers:
    majors: tuple[tuple[int, str], ...]  # (13, "580"): the floor of minor version compatibility
    releases: tuple[CudaRelease, ...]  # newest first

    def major_floor(self, major: int) -> str | None:
        return dict(self.majors).get(major)

    def first_of(self, cuda: tuple[int, int]) -> CudaRelease | None:
        """The first release (GA) of a CUDA minor: the driver it shipped with."""
        found = [release for release in self.releases if release.cuda == cuda]
        return found[-1] if found else None

    def cuda_of(self, driver: str) -> tuple[tuple[int, int] | None, bool]:
        """The newest release whose minimum the driver meets, and whether it may offer more."""
        version = versions.parse(driver)
        newest = self.releases[0]
        for release in self.releases:
            if version >= versions.parse(release.driver):
                return release.cuda, release is newest and version > versions.parse(newest.driver)
        return None, False


@functools.cache
def cuda_drivers() -> CudaDrivers:
    return _validate(read_data_file(data_file("cuda_drivers.toml"), "the CUDA driver facts file"))


def _validate(root: Table) -> CudaDrivers:
    root.check_keys(("schema", "majors"), ("releases",))
    schema = root.integer("schema")
    if schema != 1:
        raise root.error("schema", f"unsupported schema {schema!r}")
    majors_table = root.table("majors")
    if not majors_table.data:
        raise root.error("majors", "[majors.N] tables are required")
    majors: dict[int, str] = {}
    for key in majors_table.data:
        row = majors_table.table(key)
        row.check_keys(("driver",))
        driver = row.text("driver")
        if not key.isdigit() or not DRIVER_VERSION.match(driver):
            raise majors_table.error(key, f"[majors.{key}] needs a numeric major and a driver "
                                          f"version such as \"580\" or \"450.80.02\"")
        majors[int(key)] = driver
    releases: list[CudaRelease] = []
    for entry in root.tables("releases"):
        if set(entry.data) != {"cuda", "release", "driver"}:
            raise entry.error("", "needs exactly cuda, release and driver")
        cuda, release, driver = entry.text("cuda"), entry.text("release"), entry.text("driver")
        match = CUDA_VERSION.match(cuda)
        if match is None or match["minor"] is None or cuda.count(".") != 1:
            raise entry.error("cuda", f"cuda must be MAJOR.MINOR, not {cuda!r}")
        if RELEASE_NAME.match(release) is None:
            raise entry.error("release", f"release must be \"GA\" or \"Update N\", not "
                                         f"{release!r}")
        if DRIVER_VERSION.match(driver) is None:
            raise entry.error("driver", "driver must be a version such as 580.65.06")
        item = CudaRelease((int(match["major"]), int(match["minor"])), release, driver)
        floor = majors.get(item.cuda[0])
        if floor is None:
            raise entry.error("cuda", f"CUDA {cuda} has no [majors.{item.cuda[0]}]")
        if versions.parse(driver) < versions.parse(floor):
            raise entry.error("driver", f"driver {driver} is below CUDA {item.cuda[0]}'s "
                                        f"floor {floor}")
        if releases:
            newer = releases[-1]
            order = (item.cuda, _update(item.release))
            if order >= (newer.cuda, _update(newer.release)):
                raise entry.error("cuda", f"{item.label} must come after {newer.label} "
                                          f"(newest first)")
            if versions.parse(driver) > versions.parse(newer.driver):
                raise entry.error("driver", f"{item.label} needs {driver}, more than the later "
                                            f"{newer.label} ({newer.driver})")
        releases.append(item)
    if not releases:
        raise root.error("releases", "no [[releases]]")
    return CudaDrivers(majors=tuple(sorted(majors.items(), reverse=True)),
                       releases=tuple(releases))


def _update(release: str) -> int:
    return 0 if release == "GA" else int(release.split()[1])


def kit_cuda_version(text: str | int) -> tuple[int, int | None]:
    """"13.0.88" → (13, 0); a soname major ("13", 13) → (13, None)."""
    match = CUDA_VERSION.match(str(text).strip())
    if match is None:
        raise ValueError(f"not a CUDA version: {text!r}")
    minor = match["minor"]
    return int(match["major"]), None if minor is None else int(minor)


def driver_minimum(kit_cuda: str, table: CudaDrivers | None = None) -> str | None:
    """The oldest Linux driver for a kit of CUDA `kit_cuda`: its major's floor ("580")."""
    return (table or cuda_drivers()).major_floor(kit_cuda_version(kit_cuda)[0])
