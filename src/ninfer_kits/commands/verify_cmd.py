"""`ninfer-kits verify KIT`: will this kit run here? As the dynamic loader and the CUDA driver
would answer: every library and symbol version resolved on the target, the driver and the GPU."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ninfer_kits.errors import BadInput
from ninfer_kits.verify.check import verify
from ninfer_kits.verify.kit import open_kit
from ninfer_kits.verify.report import render, to_json
from ninfer_kits.verify.target import open_target


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", type=Path,
                        help="a kit archive (.tar.gz), an unpacked kit, or a kit folder "
                             "(dist/<tag>/, or a published or downloaded release of it); the "
                             "SHA256SUMS beside it is checked first")
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
