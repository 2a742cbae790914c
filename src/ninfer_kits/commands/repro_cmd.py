"""`ninfer-kits repro KIT`: build a kit twice under different conditions and compare the bytes;
`--against DIST` compares one fresh build with a published or downloaded kit instead, and
`--record FILE` writes what it found as REPRODUCTION.json (ninfer_kits.reproduction) for
`publish --reproduction`: identical, what differs, or that the rebuild failed."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ninfer_kits import atomic, kitdir, reproduction
from ninfer_kits.errors import EXIT_CHECK_FAILED, BadInput, NinferKitsError
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import add_matrix_argument, load_matrix
from ninfer_kits.pipeline.builders import BUILDERS
from ninfer_kits.repro.diff import compare, render, to_json
from ninfer_kits.repro.model import EXPECTED, Comparison
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
    parser.add_argument("--record", type=Path, metavar="FILE",
                        help="with --against: write the result as REPRODUCTION.json (for "
                             "`publish --reproduction`), also when the rebuild fails")
    parser.add_argument("--run", metavar="WHO", default=None,
                        help="who ran this reproduction, for --record (the CI run's URL; "
                             "default: $GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/"
                             "$GITHUB_RUN_ID on GitHub Actions)")


def execute(args: argparse.Namespace) -> int:
    reporter = Reporter()
    if args.against is not None and not args.against.exists():
        raise BadInput(f"--against {args.against}: no such kit folder or file")
    if args.record is not None:
        return _recorded(args, reporter)
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


def _recorded(args: argparse.Namespace, reporter: Reporter) -> int:
    """`--against` with `--record`: one fresh build compared with the kit folder, and the
    result written to the record whatever it is. A failed build (or a failure of the
    comparison) is recorded as `failed`, then raised as it would be without --record: the
    release says so rather than saying nothing."""
    if args.against is None or not args.against.is_dir():
        raise BadInput("--record needs --against DIST, the kit folder the rebuild is compared "
                       "with (dist/<tag>/)")
    run = args.run or _actions_run()
    if not run:
        raise BadInput("--record: say who ran this reproduction with --run (the CI run's URL)")
    against = kitdir.read_kit_dir(args.against)  # what the record names: its tarballs' sha256
    compared = {flavour.asset: flavour.sha256 for flavour in against.flavours}
    common = _common(args)

    def write(result: str, summary: str, differences: list[str]) -> None:
        record = reproduction.make(kit=against.kit, tag=against.tag, compared=compared,
                                   result=result, summary=summary, differences=differences,
                                   run=run)
        atomic.write_file(args.record, reproduction.render(record))
        reporter.info(f"{args.record}: {record.words()}")

    with tempfile.TemporaryDirectory(prefix="ninfer-kits-repro-") as scratch:
        base = args.work or Path(scratch)
        _first, second = two_conditions(base.resolve(), args.builder)
        try:
            fresh = build_under(second, args.kit, common, reporter.info)
            comparison = compare(args.against, fresh.kit.path)
        except NinferKitsError as error:
            write(reproduction.FAILED, str(error), [])
            raise
        differences = _differences(comparison)
        write(reproduction.IDENTICAL if comparison.identical else reproduction.DIFFERS,
              "identical bytes" if comparison.identical else
              f"{len(differences)} file(s) differ: {', '.join(differences[:3])}", differences)
        return _report_compared([comparison], args.json)


def _differences(comparison: Comparison) -> list[str]:
    """One line per member that differs where it must not: path, status, the causes' kinds."""
    lines = []
    for member in comparison.members:
        if member.status == EXPECTED:
            continue
        kinds = sorted({cause.kind for cause in member.causes if not cause.expected})
        lines.append(f"{member.path}: {member.status}" + (f" ({', '.join(kinds)})" if kinds
                                                          else ""))
    return lines


def _actions_run() -> str | None:
    """The GitHub Actions run's page, from the variables every job has (None elsewhere)."""
    parts = [os.environ.get(name, "") for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY",
                                                   "GITHUB_RUN_ID")]
    if not all(parts):
        return None
    attempt = os.environ.get("GITHUB_RUN_ATTEMPT", "")
    url = f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}"
    return f"{url}/attempts/{attempt}" if attempt and attempt != "1" else url


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
    return _report_compared([compare(a, b) for a, b in pairs], as_json)


def _report_compared(comparisons: list[Comparison], as_json: bool) -> int:
    identical = all(item.identical for item in comparisons)
    if as_json:
        document: dict[str, Any] = {"schema_version": 1, "identical": identical,
                                    "comparisons": [to_json(item) for item in comparisons]}
        sys.stdout.write(json.dumps(document, sort_keys=True) + "\n")
    else:
        for item in comparisons:
            sys.stdout.write(render(item))
        sys.stdout.write("reproducible: the tarballs are identical bytes\n" if identical else
                         "NOT reproducible: the builds differ (above: what, where, why)\n")
    return 0 if identical else EXIT_CHECK_FAILED
