"""The driver's CUDA facts (data/cuda_drivers.toml, validated as it loads): which driver each
CUDA release needs, and the driver floor of each CUDA major (minor version compatibility)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ninfer_kits import versions
from ninfer_kits.resources import load_data
from ninfer_kits.versions import CUDA_VERSION, DRIVER_VERSION

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
        """The CUDA version a driver offers: the newest release whose minimum it meets, and
        whether it may offer more (it is newer than every release in the table)."""
        version = versions.parse(driver)
        newest = self.releases[0]
        for release in self.releases:
            if version >= versions.parse(release.driver):
                return release.cuda, release is newest and version > versions.parse(newest.driver)
        return None, False


@functools.cache
def cuda_drivers() -> CudaDrivers:
    return _validate(load_data("cuda_drivers.toml"), "cuda_drivers.toml")


def _validate(raw: Mapping[str, Any], name: str) -> CudaDrivers:
    if raw.get("schema") != 1:
        raise ValueError(f"{name}: unsupported schema {raw.get('schema')!r}")
    majors_raw = raw.get("majors")
    if not isinstance(majors_raw, dict) or not majors_raw:
        raise ValueError(f"{name}: [majors.N] tables are required")
    majors: dict[int, str] = {}
    for key, table in majors_raw.items():
        driver = table.get("driver") if isinstance(table, dict) else None
        if not key.isdigit() or not isinstance(driver, str) or not DRIVER_VERSION.match(driver):
            raise ValueError(f"{name}: [majors.{key}] needs a numeric major and a driver "
                             f"version such as \"580\" or \"450.80.02\"")
        majors[int(key)] = driver
    releases: list[CudaRelease] = []
    for index, entry in enumerate(raw.get("releases", []), start=1):
        where = f"{name}: [[releases]] #{index}"
        if not isinstance(entry, dict) or set(entry) != {"cuda", "release", "driver"}:
            raise ValueError(f"{where}: needs exactly cuda, release and driver")
        cuda, release, driver = entry["cuda"], entry["release"], entry["driver"]
        match = CUDA_VERSION.match(cuda) if isinstance(cuda, str) else None
        if match is None or match["minor"] is None or cuda.count(".") != 1:
            raise ValueError(f"{where}: cuda must be MAJOR.MINOR, not {cuda!r}")
        if not isinstance(release, str) or RELEASE_NAME.match(release) is None:
            raise ValueError(f"{where}: release must be \"GA\" or \"Update N\", not {release!r}")
        if not isinstance(driver, str) or DRIVER_VERSION.match(driver) is None:
            raise ValueError(f"{where}: driver must be a version such as 580.65.06")
        item = CudaRelease((int(match["major"]), int(match["minor"])), release, driver)
        floor = majors.get(item.cuda[0])
        if floor is None:
            raise ValueError(f"{where}: CUDA {cuda} has no [majors.{item.cuda[0]}]")
        if versions.parse(driver) < versions.parse(floor):
            raise ValueError(f"{where}: driver {driver} is below CUDA {item.cuda[0]}'s "
                             f"floor {floor}")
        if releases:
            newer = releases[-1]
            order = (item.cuda, _update(item.release))
            if order >= (newer.cuda, _update(newer.release)):
                raise ValueError(f"{where}: {item.label} must come after {newer.label} "
                                 f"(newest first)")
            if versions.parse(driver) > versions.parse(newer.driver):
                raise ValueError(f"{where}: {item.label} needs {driver}, more than the later "
                                 f"{newer.label} ({newer.driver})")
        releases.append(item)
    if not releases:
        raise ValueError(f"{name}: no [[releases]]")
    return CudaDrivers(majors=tuple(sorted(majors.items(), reverse=True)),
                       releases=tuple(releases))


def _update(release: str) -> int:
    return 0 if release == "GA" else int(release.split()[1])
