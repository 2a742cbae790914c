"""`ninfer-kits floor KIT`: which known distributions meet the kit's runtime floor, and why
(docs/floor.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ninfer_kits.kit.flavours import PORTABLE
from ninfer_kits.kit.licence_policy import line_for
from ninfer_kits.platforms.distros import DATA_FILE, load_distros, shipped_distros
from ninfer_kits.verify.floor_report import floor_verdicts, render, to_json
from ninfer_kits.verify.kit import open_kit


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", type=Path,
                        help="a kit archive (.tar.gz), an unpacked kit, or a kit folder "
                             "(dist/<tag>/, or a published or downloaded release of it); the "
                             "SHA256SUMS beside it is checked first")
    parser.add_argument("--facts", type=Path, default=None, metavar="FILE",
                        help=f"the distributions file (default: the one ninfer-kits ships, "
                             f"{DATA_FILE.name})")
    parser.add_argument("--json", action="store_true", help="versioned JSON")


def execute(args: argparse.Namespace) -> int:
    known = load_distros(args.facts) if args.facts is not None else shipped_distros()
    with open_kit(args.kit) as kit:
        verdicts, needs = floor_verdicts(kit, known)
    if args.json:
        json.dump(to_json(kit, known, needs, verdicts), sys.stdout,
                  indent=2 if sys.stdout.isatty() else None, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(kit, known, needs, verdicts))
        portable = kit.info is not None and kit.info.flavour == PORTABLE.name
        sys.stdout.write(line_for(args.kit, portable) + "\n")  # information only
    return 0
