"""Build `ninfer-kits.pyz`: fetch, verify and inspect with nothing but python3 (≥ 3.11).

The command line only (`nox -s pyz`); what it holds is `release.pyz`'s, which publish uses too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ninfer_kits.config import resources
from ninfer_kits.release import pyz

DEFAULT_OUTPUT = Path("dist") / "ninfer-kits.pyz"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ninfer_kits.zipapp",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where to write it (default {DEFAULT_OUTPUT})")
    parser.add_argument("--matrix", type=Path, default=None,
                        help="the matrix to carry, with releases/ beside it (default: the "
                             "checkout's matrix.toml; none outside a checkout)")
    parser.add_argument("--no-matrix", action="store_true",
                        help="carry no matrix and no ledger (fetch then needs a TAG and "
                             "--repository)")
    args = parser.parse_args(argv)
    matrix = args.matrix
    if matrix is None and not args.no_matrix:
        top = resources.checkout_root()
        matrix = top / "matrix.toml" if top is not None else None
    if matrix is not None:
        from ninfer_kits.matrix import load_matrix

        load_matrix(matrix)  # a broken matrix fails here, not on a rented box
    path, build_id = pyz.build(args.output, None if args.no_matrix else matrix)
    size = path.stat().st_size
    print(f"{path} ({size:,} bytes, build {build_id}); run it with: python3 {path.name} "
          f"fetch KIT|TAG")
    return 0


if __name__ == "__main__":
    sys.exit(main())
