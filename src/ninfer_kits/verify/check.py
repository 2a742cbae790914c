"""The verify job, which `verify` and `fetch` run: a kit on disk against a target, as the dynamic
loader (loader.resolve, verify.report) and the CUDA driver (verify.gpu) would answer."""

from __future__ import annotations

from pathlib import Path

from ninfer_kits.inspector.floor import KitFloor, kit_floor
from ninfer_kits.loader.resolve import Resolution, Resolver
from ninfer_kits.verify import gpu, gpu_host
from ninfer_kits.verify.kit import KitOnDisk
from ninfer_kits.verify.report import (
    MISSING,
    NOT_CHECKED,
    Places,
    Row,
    VerifyReport,
    library_rows,
)
from ninfer_kits.verify.target import Target


def verify(kit: KitOnDisk, target: Target) -> VerifyReport:
    inside = target.kit_root.rstrip("/") + "/kit/"
    # Only the kit's files have their symbols checked: the target's are consistent, and many.
    resolver = Resolver(target.setup, check_symbols=lambda path: path.startswith(inside))
    resolutions = tuple(resolve_program(resolver, kit, target, program)
                        for program in kit.programs)
    floor = kit_floor(kit.files)
    rows = [*library_rows(floor, resolutions, target.system, kit, Places(target.kit_root)),
            *driver_rows(kit, floor, target)]
    return VerifyReport(kit=kit.shown, target=target.description, checked=kit.checked,
                        reproduction=kit.reproduction,
                        rows=tuple(rows), resolutions=resolutions)


def resolve_program(resolver: Resolver, kit: KitOnDisk, target: Target,
                    program: Path) -> Resolution:
    relative = program.relative_to(kit.root).as_posix()
    return resolver.resolve(f"{target.kit_root.rstrip('/')}/{relative}", shown=relative)


NO_DRIVER = "no NVIDIA driver here (no kernel module, no libcuda.so.1, no nvidia-smi)"


def driver_rows(kit: KitOnDisk, floor: KitFloor, target: Target) -> list[Row]:
    cuda = _kit_cuda(kit, floor)
    if cuda is None and not floor.sass and not floor.ptx and not set(floor.sonames) & {
            gpu_host.LIBCUDA}:
        return []  # no CUDA in this kit
    relocatable = tuple(entry.arch for entry in floor.relocatable)
    requirement = gpu.gpu_requirement(floor.sass, floor.ptx, relocatable)
    if target.mode != "host":
        supplied = f"supplied by the driver at run time, not by a {target.mode}"
        new_enough = f", new enough for CUDA {cuda}" if cuda else ""
        return [Row(f"A driver providing libcuda.so.1{new_enough}", supplied, NOT_CHECKED),
                *([Row(requirement, supplied, NOT_CHECKED)] if floor.sass or floor.ptx
                  or relocatable else [])]
    host = gpu_host.probe_host()
    side = gpu.check_gpu_side(host, cuda or "0", floor.sass, floor.ptx, relocatable)
    if host.no_driver:  # the probe's reasons, one per source, say no more than this
        return [Row(side.driver.requirement, NO_DRIVER, MISSING, side.driver.fix),
                Row(requirement, "no GPU can be seen without a driver", MISSING,
                    "run it on a host with an NVIDIA GPU and its driver")]
    rows = [Row(side.driver.requirement, side.driver.found, _status(side.driver.status),
                side.driver.fix)]
    rows += [Row(check.requirement, check.found, _status(check.status), check.fix)
             for check in side.gpus]
    if not side.gpus:
        rows.append(Row(requirement, side.missing_gpu or "no GPU found", MISSING,
                        "run it on a host with an NVIDIA GPU the kit's device code supports"))
    return rows


def _kit_cuda(kit: KitOnDisk, floor: KitFloor) -> str | None:
    if kit.info is not None and kit.info.cuda_version:
        return kit.info.cuda_version
    return next((name.rsplit(".", 1)[1] for name in floor.sonames
                 if name.startswith("libcudart.so.")), None)


def _status(status: str) -> str:
    return NOT_CHECKED if status == gpu.UNKNOWN else status
