"""`ninfer-kits index`: the kit index made again from the ledger, for a ledger mended by hand, or
`--check`ed in CI (docs/index.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ninfer_kits.errors import CheckFailed
from ninfer_kits.log import Reporter
from ninfer_kits.release import kitindex, ledger


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ledger-dir", metavar="DIR", type=Path, default=Path("releases"),
                        help="the ledger folder, where the index is written beside the "
                             "ledger files (default: releases)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the index there is not the one the "
                             "ledger makes")


def execute(args: argparse.Namespace) -> int:
    reporter = Reporter()
    folder: Path = args.ledger_dir
    entries = ledger.read_all(folder)
    index = kitindex.document(entries)
    if args.check:
        stale = kitindex.stale(folder, index)
        if stale:
            raise CheckFailed(f"{', '.join(str(path) for path in stale)}: not the index the "
                              f"{len(entries)} ledger files of {folder} make; run "
                              f"`ninfer-kits index --ledger-dir {folder}` and commit it")
        reporter.info(f"{folder}: the index is the one its {len(entries)} ledger files make")
        return 0
    paths = kitindex.write(folder, index)
    reporter.info(f"{', '.join(str(path) for path in paths)}: {len(entries)} releases")
    return 0
