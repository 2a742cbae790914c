"""`ninfer-kits summary DIR`: the rebuild run's summary from each kit's result file, which
`--write-result` writes, so that no workflow step writes JSON by hand (docs/watch.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ninfer_kits.alert.results import BUILD, PUBLISH, Result, markdown, read_results, write_result
from ninfer_kits.config import settings
from ninfer_kits.errors import EXIT_CHECK_FAILED, BadInput, NinferKitsError
from ninfer_kits.log import Reporter
from ninfer_kits.net import remote


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", metavar="RESULT_DIR", nargs="?", type=Path, default=None,
                        help="the folder of result-<kit>.json files (subfolders too: one per "
                             "downloaded artifact)")
    parser.add_argument("--write-result", metavar="DIR", type=Path, default=None,
                        help="write one kit's result file into DIR instead (with --kit, "
                             "--revision, --reason, --build, --publish, --tag)")
    parser.add_argument("--kit", default=None)
    parser.add_argument("--revision", default="", help="the upstream revision built")
    parser.add_argument("--reason", default="", help="why the kit was rebuilt")
    parser.add_argument("--build", choices=BUILD, default=None)
    parser.add_argument("--publish", choices=PUBLISH, default="skipped")
    parser.add_argument("--tag", default="", help="the kit's release tag")


def execute(args: argparse.Namespace) -> int:
    reporter = Reporter()
    try:
        if args.write_result is not None:
            return _write(args)
        return _summarise(args, reporter)
    except NinferKitsError as error:
        reporter.error(remote.redact(str(error)), title="ninfer-kits summary")
        raise


def _write(args: argparse.Namespace) -> int:
    if args.results is not None:
        raise BadInput("summary: give RESULT_DIR or --write-result DIR, not both")
    missing = [flag for flag, value in (("--kit", args.kit), ("--build", args.build))
               if value is None]
    if missing:
        raise BadInput(f"summary --write-result: {' and '.join(missing)} "
                       f"{'is' if len(missing) == 1 else 'are'} needed")
    path = write_result(args.write_result, Result(
        kit=args.kit, revision=args.revision.strip(), reason=args.reason, build=args.build,
        publish=args.publish, tag=args.tag.strip()))
    print(f"wrote {path}")
    return 0


def _summarise(args: argparse.Namespace, reporter: Reporter) -> int:
    if args.results is None:
        raise BadInput("summary: give RESULT_DIR (the folder of result-<kit>.json files), or "
                       "--write-result DIR to write one")
    given = [flag for flag in ("kit", "build") if getattr(args, flag) is not None]
    if given:
        raise BadInput(f"summary: --{given[0]} goes with --write-result")
    results = read_results(args.results)
    text = markdown(results)
    print(text, end="")
    path = settings.read(settings.GITHUB_STEP_SUMMARY)
    if path:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(text)
    failed = [r for r in results if r.failed]
    for r in failed:
        where = ("build" if r.build == "failure" else "ledger (the release is out, its "
                 "ledger file did not land)" if r.publish == "unlanded" else
                 f"publish ({r.publish})")
        reporter.error(f"kit {r.kit}: {where} failed" + (f" ({r.tag})" if r.tag else ""),
                       title=f"rebuild failed: {r.kit}")
    return EXIT_CHECK_FAILED if failed else 0
