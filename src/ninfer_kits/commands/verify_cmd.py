"""`ninfer-kits verify KIT`: will this kit run here? As the dynamic loader and the CUDA driver
would answer: every library and symbol version resolved on the target, the driver and the GPU."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ninfer_kits.errors import BadInput
from ninfer_kits.inspector.floor import kit_floor
from ninfer_kits.verify.kit import KitOnDisk, open_kit
from ninfer_kits.verify.report import NOT_CHECKED, Row, VerifyReport, library_rows, render, to_json
from ninfer_kits.verify.resolve import Resolution, Resolver
from ninfer_kits.verify.target import Target, open_target


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", type=Path,
                        help="a kit archive (.tar.gz), a kit folder, or a finished kit folder "
                             "under dist/ (its SHA256SUMS is checked first)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--root", type=Path, help="check a root filesystem instead of this host")
    where.add_argument("--image", help="check a Docker image's filesystem (nothing runs in it)")
    parser.add_argument("--ld-library-path", default=None, metavar="DIRS",
                        help="folders the loader searches first, ':'-separated (default on the "
                             "host: $LD_LIBRARY_PATH; none in a root or an image)")
    parser.add_argument("--json", action="store_true", help="versioned JSON")


def execute(args: argparse.Namespace) -> int:
    ld_path = None if args.ld_library_path is None else tuple(
        folder for folder in args.ld_library_path.split(":") if folder)
    if ld_path and any(not folder.startswith("/") for folder in ld_path):
        raise BadInput(f"--ld-library-path {args.ld_library_path}: give absolute folders")
    with open_kit(args.kit) as kit, open_target(kit.root, root=args.root, image=args.image,
                                                 ld_library_path=ld_path) as target:
        report = verify(kit, target)
    if args.json:
        json.dump(to_json(report), sys.stdout, indent=2 if sys.stdout.isatty() else None)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(report) + "\n")
    return report.exit_code


def verify(kit: KitOnDisk, target: Target) -> VerifyReport:
    resolver = Resolver(target.setup)
    resolutions = tuple(resolve_program(resolver, kit, target, program)
                        for program in kit.programs)
    floor = kit_floor(kit.files)
    rows = [*library_rows(floor, resolutions), *driver_rows(floor, target)]
    return VerifyReport(kit=kit.shown, target=target.description, checked=kit.checked,
                        rows=tuple(rows), resolutions=resolutions)


def resolve_program(resolver: Resolver, kit: KitOnDisk, target: Target,
                    program: Path) -> Resolution:
    relative = program.relative_to(kit.root).as_posix()
    return resolver.resolve(f"{target.kit_root.rstrip('/')}/{relative}", shown=relative)


def driver_rows(floor: object, target: Target) -> list[Row]:
    """The NVIDIA driver and the GPU: only a host has them (see verify.gpu)."""
    from ninfer_kits.inspector.floor import KitFloor

    assert isinstance(floor, KitFloor)
    rows = [row for row in floor.table if "driver" in row.requirement
            or "compute capability" in row.requirement]
    if target.mode != "host":
        return [Row(row.requirement, "supplied by the driver at run time, not by a "
                    f"{target.mode}", NOT_CHECKED) for row in rows]
    return [Row(row.requirement, "not checked yet", NOT_CHECKED) for row in rows]
