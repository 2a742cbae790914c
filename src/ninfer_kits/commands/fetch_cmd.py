"""`ninfer-kits fetch KIT|TAG`: a published kit, downloaded, checked against its release's
SHA256SUMS (itself checked against SHA256SUMS.sig where the release is signed), unpacked,
then verified on this host (exit status: verify's). --portable takes the release's portable
tarball instead."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ninfer_kits.errors import BadInput
from ninfer_kits.fetch.locate import ORIGINS_HELP, add_location_arguments, client_for
from ninfer_kits.log import Reporter


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="KIT|TAG",
                        help="a kit of the matrix (its published release) or a release tag")
    parser.add_argument("--from", dest="origin", default="github", metavar="github|b2|DIR",
                        help=ORIGINS_HELP)
    parser.add_argument("--dest", type=Path, default=None, metavar="DIR",
                        help="where the kit goes: DIR/kit/ (as `tar xzf … -C DIR`) and the "
                             "release's files beside it (default: ./<tag>)")
    parser.add_argument("--portable", action="store_true",
                        help="the release's portable tarball (<stem>-portable.tar.gz: the kit "
                             "carrying its own libraries, needing only glibc and the NVIDIA "
                             "driver) instead of the plain one; exit 2 when it has none")
    parser.add_argument("--insecure-no-signature", action="store_true",
                        help="go on when the release's SHA256SUMS.sig is missing or bad although "
                             "the matrix says releases are signed (a loud warning): nothing "
                             "then proves the files are the ones the project published")
    add_location_arguments(parser)


def execute(args: argparse.Namespace) -> int:
    from ninfer_kits.commands.kiturl_cmd import locate_named
    from ninfer_kits.fetch.fetch import Fetcher, describe
    from ninfer_kits.verify.check import verify
    from ninfer_kits.verify.kit import open_kit
    from ninfer_kits.verify.report import render
    from ninfer_kits.verify.target import open_target

    reporter = Reporter()
    client, ctx = client_for(args)
    release = locate_named(args, ctx, client)
    for note in release.notes:
        reporter.info(note)
    dest = args.dest if args.dest is not None else Path(release.tag)
    if dest.exists() and not dest.is_dir():
        raise BadInput(f"--dest {dest}: not a folder")
    signing = ctx.matrix.publish.signing if ctx.matrix is not None else None
    fetched = Fetcher(client, reporter, trust=signing.trust if signing else None,
                      insecure=args.insecure_no_signature).fetch(release, dest)
    for line in describe(fetched):
        reporter.info(line)
    with open_kit(fetched.dest, checked=fetched.checked) as kit, \
            open_target(kit.root) as target:
        kit = dataclasses.replace(kit, shown=str(fetched.dest))
        report = verify(kit, target)
    sys.stdout.write(render(report) + "\n")
    return report.exit_code
