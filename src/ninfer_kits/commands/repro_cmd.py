"""`ninfer-kits repro KIT`: build a kit twice under different conditions and compare the bytes,
or once `--against DIST`, `--record FILE` writing REPRODUCTION.json (docs/repro.md)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ninfer_kits.config import settings
from ninfer_kits.config.tables import printable
from ninfer_kits.errors import EXIT_CHECK_FAILED, BadInput, NinferKitsError
from ninfer_kits.files import atomic
from ninfer_kits.kit import kitdir
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Matrix, add_matrix_argument, load_matrix
from ninfer_kits.oci.reference import parse_pin
from ninfer_kits.pipeline.builders import BUILDERS
from ninfer_kits.release import reproduction
from ninfer_kits.repro import drift
from ninfer_kits.repro.against import Recorded, check_trusted, read_recorded
from ninfer_kits.repro.diff import compare, render, to_json
from ninfer_kits.repro.drift import Drift
from ninfer_kits.repro.model import EXPECTED, Comparison
from ninfer_kits.repro.rebuild import Conditions, build_under, built_revision, two_conditions


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", help="a kit from matrix.toml")
    add_matrix_argument(parser)
    parser.add_argument("--builder", choices=list(BUILDERS), default="local")
    parser.add_argument("--revision", help="build this revision (default: with --against, the "
                                           "one the kit records; else the pinned one, or the "
                                           "branch head)")
    parser.add_argument("--source", dest="source_url", metavar="URL",
                        help="fetch the upstream from here instead")
    parser.add_argument("--against", type=Path, metavar="DIST",
                        help="compare one fresh build with this kit folder (published or "
                             "downloaded: the independent rebuild check)")
    parser.add_argument("--toolchain-image", metavar="PIN", default=None,
                        help="docker builder: build in exactly this image, NAME[:TAG]@sha256:… "
                             "(default: with --against, the pin the kit records, when it is "
                             "from a registry the matrix names; else the matrix's)")
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
    matrix = _checked(args)
    write = _record_writer(args, reporter) if args.record is not None else None
    common = _common(args, matrix)
    with tempfile.TemporaryDirectory(prefix="ninfer-kits-repro-") as scratch:
        first, second = two_conditions((args.work or Path(scratch)).resolve(), args.builder)
        if args.against is not None:
            return _against(args, matrix, reporter, second, common, write)
        one = build_under(first, args.kit, common, reporter.info)
        pinned = [*common, "--revision", built_revision(one)] if not args.revision else common
        two = build_under(second, args.kit, pinned, reporter.info)
        return _report_compared(compare(one.kit.path, two.kit.path), args.json,
                                drift.name_drift(one.kit.info, two.kit.info))


Writer = Callable[[str, str, list[str]], None]


def _against(args: argparse.Namespace, matrix: Matrix, reporter: Reporter,
             conditions: Conditions, common: list[str], write: Writer | None) -> int:
    """One fresh build compared with the kit folder. With --record, the result is written
    whatever it is: a failed build (or comparison) as `failed`, then raised as without it."""
    recorded = read_recorded(args.against, args.kit)
    try:  # (a recorded pin from elsewhere is refused in here: the record says so)
        options = [*common, *_as_recorded(args, matrix, recorded, reporter)]
        fresh = build_under(conditions, args.kit, options, reporter.info)
        comparison = compare(args.against, fresh.kit.path)
    except NinferKitsError as error:
        if write is not None:
            write(reproduction.FAILED, str(error), [])
        raise
    found = drift.name_drift(recorded.info, fresh.kit.info) if recorded else None
    if write is not None:
        write(*outcome(comparison, found))
    return _report_compared(comparison, args.json, found)


def _as_recorded(args: argparse.Namespace, matrix: Matrix, recorded: Recorded | None,
                 reporter: Reporter) -> list[str]:
    """The rebuild's options that make it the kit's own build: its revision and pinned toolchain
    image, unless the command line names them."""
    if recorded is None:
        reporter.info(f"repro: {args.against} is a tarball alone: no BUILDINFO.txt beside it "
                      f"names its revision and toolchain image; building as the matrix says")
        return []
    options = []
    if not args.revision:
        reporter.info(f"repro: building {recorded.revision}, the revision {recorded.source} "
                      f"records")
        options += ["--revision", recorded.revision]
    if args.toolchain_image or recorded.info.builder != "docker":
        return options  # (a local build's kit ran in no image)
    if recorded.pin is None:
        image = recorded.info.run_value("image") or "an image it does not name"
        reporter.info(f"repro: {recorded.source} records no pinned toolchain image (built in "
                      f"{printable(image)}): "
                      f"the rebuild's image is the matrix's, and where it differs the report "
                      f"says so")
    elif args.builder == "docker":
        check_trusted(recorded.pin, matrix, recorded.source)
        reporter.info(f"repro: building in {recorded.pin}, the toolchain image "
                      f"{recorded.source} records")
        options += ["--toolchain-image", recorded.pin]
    else:
        reporter.warning(f"the kit was built in {recorded.pin} ({recorded.source}); the "
                         f"{args.builder} builder compiles in no image: --builder docker "
                         f"rebuilds it in that image")
    return options


def _record_writer(args: argparse.Namespace, reporter: Reporter) -> Writer:
    """--record's writer of REPRODUCTION.json, naming the kit folder's tarballs by sha256."""
    if args.against is None or not args.against.is_dir():
        raise BadInput("--record needs --against DIST, the kit folder the rebuild is compared "
                       "with (dist/<tag>/)")
    run = args.run or settings.actions_run()
    if not run:
        raise BadInput("--record: say who ran this reproduction with --run (the CI run's URL)")
    against = kitdir.read_kit_dir(args.against)
    compared = {flavour.asset: flavour.sha256 for flavour in against.flavours}

    def write(result: str, summary: str, differences: list[str]) -> None:
        record = reproduction.make(kit=against.kit, tag=against.tag, compared=compared,
                                   result=result, summary=summary, differences=differences,
                                   run=run)
        atomic.write_file(args.record, reproduction.render(record))
        reporter.info(f"{args.record}: {record.words()}")

    return write


def outcome(comparison: Comparison, found: Drift | None) -> tuple[str, str, list[str]]:
    """(result, summary, differences) of a finished comparison for the record; where the kits
    differ, the drift first, then the members."""
    if comparison.identical:
        return reproduction.IDENTICAL, "identical bytes", []
    differences = _differences(comparison)
    summary = f"{len(differences)} file(s) differ: {', '.join(differences[:3])}"
    if found is None:
        return reproduction.DIFFERS, summary, differences
    return (reproduction.DIFFERS, f"{found.headline}; {summary}",
            [*(f"drift: {item.detail}" for item in found.findings), *differences])


def _differences(comparison: Comparison) -> list[str]:
    """One line per member that differs where it must not, with its causes' kinds."""
    lines = []
    for member in comparison.members:
        if member.status == EXPECTED:
            continue
        kinds = sorted({cause.kind for cause in member.causes if not cause.expected})
        lines.append(f"{member.path}: {member.status}" + (f" ({', '.join(kinds)})" if kinds
                                                          else ""))
    return lines


def _checked(args: argparse.Namespace) -> Matrix:
    """The matrix, the kit looked up and --toolchain-image read, before any build."""
    matrix = load_matrix(args.matrix)
    matrix.kit(args.kit)
    if args.toolchain_image is not None:
        if args.builder != "docker":
            raise BadInput("--toolchain-image needs --builder docker (the local builder "
                           "compiles on this machine, in no image)")
        try:
            parse_pin(args.toolchain_image)
        except ValueError as error:
            raise BadInput(f"--toolchain-image {args.toolchain_image[:200]!r}: {error}") from None
    return matrix


def _common(args: argparse.Namespace, matrix: Matrix) -> list[str]:
    """What every build is given; paths absolute, since each build runs in its own folder."""
    common = ["--matrix", str(matrix.path.absolute()), "--builder", args.builder]
    if args.revision:
        common += ["--revision", args.revision]
    if args.toolchain_image:
        common += ["--toolchain-image", args.toolchain_image]
    if args.source_url:
        local = Path(args.source_url)
        common += ["--source", str(local.resolve()) if local.exists() else args.source_url]
    return common


def _report_compared(comparison: Comparison, as_json: bool, found: Drift | None) -> int:
    """The comparison and, where the kits differ, the drift (None: the kit records nothing)."""
    identical = comparison.identical
    named = None if identical or found is None else found
    if as_json:
        document: dict[str, Any] = {"schema_version": 1, "identical": identical,
                                    "comparisons": [to_json(comparison)],
                                    "drift": drift.to_json(named) if named else None}
        sys.stdout.write(json.dumps(document, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(comparison))
        if named:
            sys.stdout.write(drift.render(named))
        sys.stdout.write("reproducible: the tarballs are identical bytes\n" if identical else
                         "NOT reproducible: the builds differ (above: what, where, why)\n")
    return 0 if identical else EXIT_CHECK_FAILED
