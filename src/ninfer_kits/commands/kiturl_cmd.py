"""`ninfer-kits kit-url KIT`: the URL a client fetches a kit's tarball from (no network)."""

from __future__ import annotations

import argparse

from ninfer_kits.fetch.locate import add_location_arguments, located, offline_context
from ninfer_kits.log import Reporter


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="KIT|TAG", help="a kit of the matrix, or a release tag")
    parser.add_argument("--from", dest="origin", default="github", choices=("github", "b2"),
                        help="the GitHub release download URL (default), or B2's friendly URL")
    parser.add_argument("--all", action="store_true",
                        help="every file of the release (tarball, SHA256SUMS, …), one a line")
    parser.add_argument("--portable", action="store_true",
                        help="the URL of the release's portable tarball "
                             "(<stem>-portable.tar.gz); exit 2 when it has none")
    add_location_arguments(parser)


def execute(args: argparse.Namespace) -> int:
    reporter = Reporter()
    release = located(args, offline_context(args), None, args.origin)
    for note in release.notes:
        reporter.info(note)
    if args.all:
        for name in sorted(release.files, key=lambda n: (n != release.asset, n)):
            print(release.files[name].url)
    else:
        print(release.tarball.url)
    return 0
