"""`ninfer-kits diff A B`: whether two kits are the same, and if not, why (cause by cause)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ninfer_kits.commands.inspect_cmd import member_size
from ninfer_kits.errors import EXIT_CHECK_FAILED
from ninfer_kits.inspector.archive import size_words
from ninfer_kits.repro.diff import Limits, compare, render, to_json


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", type=Path,
                        help="a kit tarball, a kit folder dist/<tag>/, an unpacked folder or a "
                             "file")
    parser.add_argument("b", metavar="B", type=Path,
                        help="the same kind of thing, to compare with A")
    parser.add_argument("--json", action="store_true",
                        help="a versioned JSON document (schema_version 1) instead of words")
    parser.add_argument("--max-member-size", type=member_size, default=Limits.explain,
                        metavar="SIZE",
                        help=f"explain members up to this size section by section (default "
                             f"{size_words(Limits.explain)}); a larger one is reported by its "
                             f"sha256 only")


def execute(args: argparse.Namespace) -> int:
    comparison = compare(args.a, args.b, Limits(explain=args.max_member_size))
    if args.json:
        indent = 2 if sys.stdout.isatty() else None
        sys.stdout.write(json.dumps(to_json(comparison), indent=indent, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(comparison))
    return 0 if comparison.identical else EXIT_CHECK_FAILED
