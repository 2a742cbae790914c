"""`ninfer-kits repro KIT`: build a kit twice under different conditions and compare the bytes;
`--against DIST` compares one fresh build with a published or downloaded kit instead."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from ninfer_kits.errors import EXIT_CHECK_FAILED, BadInput
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import add_matrix_argument, load_matrix
from ninfer_kits.pipeline.builders import BUILDERS
from ninfer_kits.repro.diff import compare, render, to_json
from ninfer_kits.repro.rebuild import (
    Built,
    build_under,
    built_revision,
    two_conditions,
)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", help="a kit from matrix.toml")
    add_matrix_argument(parser)
    parser.add_argument("--builder", choices=list(BUILDERS), default="local")
    parser.add_argument("--revision", help="build this revision (default: the pinned one, or "
                                           "the branch head)")
    parser.add_argument("--source", dest="source_url", metavar="URL",
                        help="fetch the upstream from here instead")
    parser.add_argument("--against", type=Path, metavar="DIST",
                        help="compare one fresh build with this kit folder (published or "
                             "downloaded: the independent rebuild check)")
    parser.add_argument("--work", type=Path, default=None,
                        help="keep both builds here (default: a temporary folder, removed)")
    parser.add_argument("--json", action="store_true", help="the comparison as JSON")


def execute(args: argparse.Namespace) -> int:
    reporter = Reporter()
    if args.against is not None and not args.against.exists():
        raise BadInput(f"--against {args.against}: no such kit folder or file")
    common = _common(args)
    with tempfile.TemporaryDirectory(prefix="ninfer-kits-repro-") as scratch:
        base = args.work or Path(scratch)
        first, second = two_conditions(base.resolve(), args.builder)
        if args.against is not None:
            fresh = build_under(second, args.kit, common, reporter.info)
            pairs = [(args.against, fresh.kit.path)]
        else:
            one = build_under(first, args.kit, common, reporter.info)
            pinned = [*common, "--revision", built_revision(one)] if not args.revision else common
            two = build_under(second, args.kit, pinned, reporter.info)
            pairs = _pairs(one, two)
        return _report(pairs, args.json)


def _common(args: argparse.Namespace) -> list[str]:
    """What both builds are given. The matrix is read (and the kit looked up) here, so that a
    bad one is said once, before any build; paths are made absolute, since each build runs in
    a folder of its own."""
    matrix = load_matrix(args.matrix)
    matrix.kit(args.kit)
    common = ["--matrix", str(matrix.path.absolute()), "--builder", args.builder]
    if args.revision:
        common += ["--revision", args.revision]
    if args.source_url:
        local = Path(args.source_url)
        common += ["--source", str(local.resolve()) if local.exists() else args.source_url]
    return common


def _pairs(one: Built, two: Built) -> list[tuple[Path, Path]]:
    """The two kit folders: every file of them, the tarballs member by member."""
    return [(one.kit.path, two.kit.path)]


def _report(pairs: list[tuple[Path, Path]], as_json: bool) -> int:
    comparisons = [compare(a, b) for a, b in pairs]
    identical = all(item.identical for item in comparisons)
    if as_json:
        document: dict[str, Any] = {"schema_version": 1, "identical": identical,
                                    "comparisons": [to_json(item) for item in comparisons]}
        sys.stdout.write(json.dumps(document, sort_keys=True) + "\n")
    else:
        for item in comparisons:
            sys.stdout.write(render(item))
        sys.stdout.write("reproducible: identical bytes\n" if identical else
                         "NOT reproducible: the builds differ (above: what, where, why)\n")
    return 0 if identical else EXIT_CHECK_FAILED
