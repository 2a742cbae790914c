"""Will a kit's CUDA runtime and device code run on this host's driver and GPUs, as the CUDA
driver would decide, from what verify.gpu_host found and platforms.cuda_drivers' facts.

The arch rules are the floor's (inspector.floor); unlike the floor's table, the PTX of
`__nv_relfatbin` counts too: the runtime JIT-links it where the device-linked SASS does not fit
(docs/verify.md, "Verified on")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from ninfer_kits.inspector.floor import (
    GPU_ARCH,
    Reach,
    _describe_arch,
    _describe_reach,
    _reach,
    _union,
)
from ninfer_kits.platforms.cuda_drivers import CudaDrivers, cuda_drivers, kit_cuda_version
from ninfer_kits.verify.gpu_host import Gpu, GpuReport
from ninfer_kits.verify.report import CANNOT_RUN, MISSING, OK, TOO_OLD

UNKNOWN: Final = "unknown"

How = Literal["native", "ptx-jit", "none", "unknown"]


@dataclass(frozen=True)
class DriverCheck:
    requirement: str
    found: str
    status: str  # OK, TOO_OLD, MISSING, CANNOT_RUN (cuInit fails), UNKNOWN
    fix: str = ""


@dataclass(frozen=True)
class GpuCheck:
    gpu: Gpu
    how: How  # "native" (SASS), "ptx-jit" (the driver compiles PTX at start), "none", "unknown"
    code: str | None  # the arch that serves it: "sm_86", "compute_86"
    requirement: str
    found: str
    status: str  # OK (native or PTX JIT), CANNOT_RUN, UNKNOWN
    fix: str = ""


@dataclass(frozen=True)
class GpuSide:
    """The driver row, then one row a GPU; `runs` is None when unknown."""

    driver: DriverCheck
    gpus: tuple[GpuCheck, ...]
    missing_gpu: str = ""  # why there is no GPU row: "no GPU found, because …"

    @property
    def runs(self) -> bool | None:
        if self.driver.status in (TOO_OLD, MISSING, CANNOT_RUN):
            return False
        if any(check.status == OK for check in self.gpus):
            return None if self.driver.status == UNKNOWN else True
        if self.gpus and all(check.status == CANNOT_RUN for check in self.gpus):
            return False
        return False if self.missing_gpu.startswith("no GPU") else None


def check_driver(report: GpuReport, kit_cuda: str | int,
                 table: CudaDrivers | None = None) -> DriverCheck:
    """Minor version compatibility: CUDA 13.x needs a driver offering CUDA 13.0 or later."""
    table = table or cuda_drivers()
    major, _ = kit_cuda_version(kit_cuda)
    floor = table.major_floor(major)
    first = table.first_of((major, 0))
    floor_text = f" (driver ≥ {floor} on Linux x86-64)" if floor else ""
    requirement = f"An NVIDIA driver for CUDA {major}{floor_text}"
    install = (f"install an NVIDIA driver of the {floor.split('.')[0]} branch or newer"
               + (f" ({first.driver} shipped with {first.label})" if first else "")
               if floor else f"install an NVIDIA driver for CUDA {major} or newer")
    found = _driver_found(report, table)
    if report.cuda_error is not None:
        return DriverCheck(requirement, f"{found}; {report.cuda_error}", CANNOT_RUN,
                           "the CUDA runtime fails the same way when the kit starts: check that "
                           "the driver's user-space libraries match its kernel module (reboot "
                           "after a driver update), and that the GPU is visible to this user")
    offered, more = _offered_cuda(report, table)
    if offered is None:
        if report.no_driver:
            return DriverCheck(requirement, "none: " + "; ".join(report.problems), MISSING,
                               install)
        return DriverCheck(requirement, found or "; ".join(report.problems), UNKNOWN)
    if offered[0] >= major:
        return DriverCheck(requirement, found, OK)
    if more:  # a driver newer than the table knows: it may well offer the kit's major
        return DriverCheck(requirement, found, UNKNOWN,
                           f"check the driver's CUDA version: this table ends at "
                           f"{table.releases[0].label}")
    return DriverCheck(requirement, found, TOO_OLD, install)


def _offered_cuda(report: GpuReport,
                  table: CudaDrivers) -> tuple[tuple[int, int] | None, bool]:
    """libcuda's own word first (a forward-compatibility libcuda offers more than its branch),
    else the driver's version looked up."""
    if report.driver_cuda is not None:
        return report.driver_cuda, False
    if report.driver_version is not None:
        return table.cuda_of(report.driver_version)
    return None, False


def _driver_found(report: GpuReport, table: CudaDrivers) -> str:
    parts = []
    if report.driver_version is not None:
        cuda, more = table.cuda_of(report.driver_version)
        if report.driver_cuda is not None:
            cuda, more = report.driver_cuda, False
        offers = f" (CUDA {cuda[0]}.{cuda[1]}{' or newer' if more else ''})" if cuda else ""
        parts.append(f"{report.driver_version}{offers}, from {report.driver_source}")
    elif report.driver_cuda is not None:
        major, minor = report.driver_cuda
        parts.append(f"a driver offering CUDA {major}.{minor} (cuDriverGetVersion)")
    return "; ".join(parts)


def check_gpu(gpu: Gpu, sass: Sequence[str], ptx: Sequence[str],
              relocatable: Sequence[str] = (), *, kit_cuda: str | int | None = None,
              driver_cuda: tuple[int, int] | None = None,
              table: CudaDrivers | None = None) -> GpuCheck:
    """Native when SASS reaches the GPU; else PTX JIT from loaded PTX, or else from
    `relocatable`'s (`__nv_relfatbin`), where the driver is at least `kit_cuda` (a 580 driver
    cannot compile CUDA 13.1's PTX)."""
    relocatable_ptx = [arch for arch in relocatable if arch.startswith("compute_")]
    requirement = gpu_requirement(sass, ptx, relocatable)
    cap = gpu.capability
    if cap is None:
        return GpuCheck(gpu, "unknown", None, requirement, gpu.shown, UNKNOWN)
    capability = f"{cap[0]}.{cap[1]}"
    native = [arch for arch in sass if _runs_on(arch, cap)]
    if native:
        return GpuCheck(gpu, "native", native[-1], requirement,
                        f"{gpu.shown}: runs natively (SASS {native[-1]})", OK)
    no_sass = f"no SASS for {capability}" + _listed(sass)
    loaded = [arch for arch in ptx if _runs_on(arch, cap)]
    linked = [arch for arch in relocatable_ptx if _runs_on(arch, cap)]
    if loaded or linked:
        arch = _newest(loaded or linked)
        how = (f"the driver compiles PTX {arch} for it" if loaded else
               f"the CUDA runtime JIT-compiles and links the relocatable device code (PTX {arch} "
               f"in __nv_relfatbin) for it")
        made_by = kit_cuda_version(kit_cuda) if kit_cuda is not None else None
        if made_by is not None and made_by[1] is not None and driver_cuda is not None \
                and driver_cuda < (made_by[0], made_by[1]):
            first = (table or cuda_drivers()).first_of((made_by[0], made_by[1]))
            need = f" (≥ {first.driver}, as {first.label} shipped)" if first else ""
            return GpuCheck(
                gpu, "none", arch, requirement,
                f"{gpu.shown}: {no_sass}; PTX {arch} comes from CUDA "
                f"{made_by[0]}.{made_by[1]}, and a driver offering CUDA "
                f"{driver_cuda[0]}.{driver_cuda[1]} cannot JIT-compile it "
                f"(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)", CANNOT_RUN,
                f"update the driver to one for CUDA {made_by[0]}.{made_by[1]} or newer{need}, "
                f"or use a kit with SASS for {_sm(cap)}")
        return GpuCheck(gpu, "ptx-jit", arch, requirement,
                        f"{gpu.shown}: runs through PTX JIT ({no_sass}; {how} when the program "
                        f"starts, so the first start is slower; later starts reuse the "
                        f"driver's JIT cache)", OK)
    every_ptx = [*ptx, *relocatable_ptx]
    no_ptx = ("no PTX it can JIT-compile for it" + _listed(every_ptx) if every_ptx else
              "no PTX, so the driver cannot JIT-compile kernels for it")
    # What the first launch says (seen on the H200).
    error = "named symbol not found" if relocatable else \
        "no kernel image is available for execution on the device"
    return GpuCheck(gpu, "none", None, requirement,
                    f"{gpu.shown}: cannot run: {no_sass}; {no_ptx} (the first kernel launch "
                    f"fails with \"{error}\")", CANNOT_RUN,
                    f"use a kit built for {_sm(cap)}, or one carrying PTX for "
                    f"{capability} or lower")


def check_gpus(report: GpuReport, sass: Sequence[str], ptx: Sequence[str],
               relocatable: Sequence[str] = (), *, kit_cuda: str | int | None = None,
               table: CudaDrivers | None = None) -> tuple[GpuCheck, ...]:
    table = table or cuda_drivers()
    driver_cuda, _ = _offered_cuda(report, table)
    return tuple(check_gpu(gpu, sass, ptx, relocatable, kit_cuda=kit_cuda,
                           driver_cuda=driver_cuda, table=table) for gpu in report.gpus)


def check_gpu_side(report: GpuReport, kit_cuda: str | int, sass: Sequence[str],
                   ptx: Sequence[str], relocatable: Sequence[str] = (),
                   table: CudaDrivers | None = None) -> GpuSide:
    """`kit_cuda`: BUILDINFO's cuda_version, or the libcudart.so.N major."""
    table = table or cuda_drivers()
    missing = next((problem for problem in report.problems if "GPU" in problem), "")
    return GpuSide(driver=check_driver(report, kit_cuda, table),
                   gpus=check_gpus(report, sass, ptx, relocatable, kit_cuda=kit_cuda,
                                   table=table),
                   missing_gpu="" if report.gpus else missing or "no GPU found")


def gpu_requirement(sass: Sequence[str], ptx: Sequence[str],
                    relocatable: Sequence[str] = ()) -> str:
    """The floor's wording, relocatable PTX included."""
    linkable = [arch for arch in relocatable if arch.startswith("compute_")]
    reaches = [reach for arch in (*sass, *ptx, *linkable) if (reach := _reach(arch)) is not None]
    label = ", or ".join(_describe_reach(reach) for reach in _union(reaches))
    return f"An NVIDIA GPU of compute capability {label or 'unknown'}"


def _listed(archs: Sequence[str]) -> str:
    return " (" + "; ".join(_describe_arch(arch) for arch in archs) + ")" if archs else ""


def _runs_on(arch: str, capability: tuple[int, int]) -> bool:
    reach: Reach | None = _reach(arch)
    return reach is not None and reach.low <= capability <= reach.high


def _newest(archs: Sequence[str]) -> str:
    """What the CUDA runtime picks to JIT-compile: the newest PTX that fits."""
    def number(arch: str) -> int:
        match = GPU_ARCH.match(arch)
        return int(match["number"]) if match else 0
    return max(archs, key=number)


def _sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"
