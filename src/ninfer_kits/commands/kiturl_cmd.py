"""`ninfer-kits kit-url KIT`: the URL a client fetches a kit's tarball from (no network but the
kit index, read when the ledger does not record the release)."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable

from ninfer_kits import stores
from ninfer_kits.config.tables import did_you_mean
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
    origins = stores.origins()
    words = [kind.origin.words for kind in origins if kind.origin is not None]
    parser.add_argument("--from", dest="origin", default=origins[0].name,
                        choices=[kind.name for kind in origins],
                        help=f"where the URL points: {words[0]} (default), "
                             f"{', '.join(words[1:])}")
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
    """The release args.name means (kit-url's and fetch's). A name close to a kit's that is
    neither a kit nor a recorded release is refused before any server is asked: `exmaple` is a
    typo, not a tag to look up on GitHub."""
    origin = stores.origin(args.origin)
    without = origin.matrix_needed(ctx) if origin is not None and ctx.matrix is None else None
    if without is not None:
        from ninfer_kits.matrix import MATRIX_ENV, default_matrix_path

        raise BadInput(f"matrix file not found: {args.matrix or default_matrix_path()} (give "
                       f"--matrix PATH or set {MATRIX_ENV}; {without})")
    if not _known(args.name, ctx):
        hint = _typo_of(args.name, ctx.matrix.kits if ctx.matrix else ())
        if hint:
            raise BadInput(f"unknown kit {args.name!r}{hint} (a name this close to a kit's is "
                           f"not looked up as a release tag; nothing was asked of a server)")
    try:
        return located(args, ctx, client, args.origin)
    except BadInput as error:
        hint = "" if _known(args.name, ctx) else did_you_mean(args.name, _known_tags(ctx))
        if not hint:
            raise
        raise BadInput(f"unknown kit or release {args.name!r}{hint} (taken as a release tag: "
                       f"{error})") from None


def _known(name: str, ctx: Context) -> bool:
    """`name` is a kit of the matrix or a release the ledger here records."""
    if ctx.matrix is not None and name in ctx.matrix.kits:
        return True
    return ctx.releases is not None and (ctx.releases / f"{name}.toml").is_file()


def _known_tags(ctx: Context) -> list[str]:
    """The release tags known without asking a server again (the ledger's, the read index's)."""
    from ninfer_kits.release import ledger

    tags = [entry.tag for entry in ledger.read_all(ctx.releases)] if ctx.releases else []
    if ctx.index is not None and ctx.index.loaded:
        tags += [entry.tag for entry in ctx.index.entries()]
    return tags


# A typo of a kit's name: this close (difflib's ratio) and about as long; a tag starting with a
# kit's name (`example-v0.3.0-linux-sm120a` beside `example-sm120a`: 0.68) is looked up.
TYPO_RATIO = 0.8
TYPO_LENGTH = 2


def _typo_of(name: str, kits: Iterable[str]) -> str:
    """'; did you mean KIT?' when `name` reads as a misspelt kit, else ''."""
    near = [kit for kit in difflib.get_close_matches(name, list(kits), n=1, cutoff=TYPO_RATIO)
            if abs(len(kit) - len(name)) <= TYPO_LENGTH]
    return did_you_mean(name, near)
