"""`ninfer-kits settings`: every environment variable ninfer-kits reads, with the value in
effect here (a secret's never) and what it means; `--markdown`: docs/settings.md's tables."""

from __future__ import annotations

import argparse

from ninfer_kits.config import settings


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true",
                        help="print docs/settings.md's tables (every variable's meaning and "
                             "default, no value) instead")


def execute(args: argparse.Namespace) -> int:
    print(settings.markdown() if args.markdown else settings.listing(), end="")
    return 0
