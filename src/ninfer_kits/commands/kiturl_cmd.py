"""`ninfer-kits kit-url KIT`: the URL a client fetches a kit's tarball from (no network but
the kit index, read when the ledger does not record the release)."""

from __future__ import annotations

import argparse

from ninfer_kits.errors import BadInput
from ninfer_kits.fetch.http import Client
from ninfer_kits.fetch.locate import (
    Context,
    Located,
    add_location_arguments,
    located,
    offline_context,
)
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
    ctx = offline_context(args)
    release = locate_named(args, ctx, None)
    for note in release.notes:
        reporter.info(note)
    if args.all:
        for name in sorted(release.files, key=lambda n: (n != release.asset, n)):
            print(release.files[name].url)
    else:
        print(release.tarball.url)
    return 0


def locate_named(args: argparse.Namespace, ctx: Context, client: Client | None) -> Located:
    """The release args.name means (kit-url's and fetch's). Without a matrix file, where the
    origin needs one, it says the file is missing; a refused name that is neither a kit nor a
    recorded release (so was taken as a tag) names the nearest kit, when one is close:
    `exampel` is a typo, not a tag."""
    if ctx.matrix is None and (args.origin == "b2" or (args.origin == "github"
                                                       and ctx.repository is None)):
        from ninfer_kits.matrix import MATRIX_ENV, default_matrix_path

        without = ("B2's bucket is named in its [publish.b2]" if args.origin == "b2" else
                   "without one, name a release tag and --repository OWNER/NAME")
        raise BadInput(f"matrix file not found: {args.matrix or default_matrix_path()} (give "
                       f"--matrix PATH or set {MATRIX_ENV}; {without})")
    try:
        return located(args, ctx, client, args.origin)
    except BadInput as error:
        hint = _nearest_kit(args.name, ctx)
        if not hint:
            raise
        raise BadInput(f"unknown kit {args.name!r}{hint} (taken as a release tag: {error})"
                       ) from None


def _nearest_kit(name: str, ctx: Context) -> str:
    from ninfer_kits.tables import did_you_mean

    if ctx.matrix is None or name in ctx.matrix.kits:
        return ""
    if ctx.releases is not None and (ctx.releases / f"{name}.toml").is_file():
        return ""
    return did_you_mean(name, ctx.matrix.kits)
