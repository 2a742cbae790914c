"""`ninfer-kits fetch KIT|TAG`: a published kit downloaded, checked, unpacked and verified here
(docs/fetch.md)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ninfer_kits import stores
from ninfer_kits.errors import BadInput, WillNotRunHere
from ninfer_kits.fetch.locate import (
    Context,
    Located,
    add_location_arguments,
    client_for,
    origins_help,
)
from ninfer_kits.files.outputs import SOME_ROOM, check_output_folder
from ninfer_kits.kit import flavours
from ninfer_kits.log import Reporter


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="KIT|TAG", nargs="?", default=None,
                        help="a kit of the matrix (its published release) or a release tag; "
                             "with --auto, a kit to choose among its flavours only")
    parser.add_argument("--auto", action="store_true",
                        help="choose the kit and flavour that will run on this machine from "
                             "the kit index (or the ledger), as verify would judge them, and "
                             "say why; when none will, say so before downloading anything")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --auto: show the choice, download nothing")
    parser.add_argument("--root", type=Path, default=None, metavar="DIR",
                        help="with --auto: choose for the root filesystem DIR (a container "
                             "image's, say) instead of this host; its driver and GPU are not "
                             "checked")
    origins = [kind.name for kind in stores.origins()]
    parser.add_argument("--from", dest="origin", default=origins[0],
                        metavar="|".join((*origins, "DIR")), help=origins_help())
    parser.add_argument("--dest", type=Path, default=None, metavar="DIR",
                        help="where the kit goes: DIR/kit/ (as `tar xzf … -C DIR`) and the "
                             "release's files beside it (default: ./<tag>)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--portable", action="store_true",
                       help="the release's portable tarball (<stem>-portable.tar.gz: the kit "
                            "carrying its own libraries, needing only glibc and the NVIDIA "
                            "driver) instead of the plain one; exit 2 when it has none")
    which.add_argument("--flavour", metavar="NAME", default=None,
                       choices=[kind.name for kind in flavours.beside()],
                       help="the release's tarball of this flavour instead of the plain one "
                            f"({', '.join(kind.name for kind in flavours.beside())}; "
                            "docs/build.md#flavours); exit 2 when it has none")
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
    if args.auto:
        chosen = auto_choice(args, ctx, reporter)
        if chosen is None:
            return 0  # --dry-run: the choice is all
        args.name, args.flavour = chosen
    elif args.name is None:
        raise BadInput("fetch: name a kit or a release tag, or give --auto")
    elif args.dry_run or args.root is not None:
        raise BadInput("fetch: --dry-run and --root choose with --auto only")
    release = locate_named(args, ctx, client)
    for note in release.notes:
        reporter.info(note)
    dest = args.dest if args.dest is not None else Path(release.tag)
    check_output_folder(dest, f"--dest {dest}" if args.dest is not None else
                        f"the release's folder {dest} (--dest's default)",
                        needs=_room(release, dest), what="the tarball and the kit unpacked from it")
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


def _room(release: Located, dest: Path) -> int:
    """What a fetch into `dest` needs at the least: the tarball, and its kit unpacked (no
    smaller); a tarball already there is reused."""
    size = release.tarball.size
    if size is None or (dest / release.asset).is_file():
        return SOME_ROOM
    return 2 * size + SOME_ROOM


def auto_choice(args: argparse.Namespace, ctx: Context,
                reporter: Reporter) -> tuple[str, str] | None:
    """(tag, flavour) --auto chose, after saying why; None after --dry-run; WillNotRunHere,
    before any download, when none will run here."""
    from ninfer_kits.inspector.inputs import printable
    from ninfer_kits.verify import gpu_host
    from ninfer_kits.verify.choose import choose
    from ninfer_kits.verify.target import open_target

    if args.portable or args.flavour:
        option = "--portable" if args.portable else "--flavour"
        raise BadInput(f"fetch: --auto chooses the flavour itself; leave out {option}")
    if args.name is not None and ctx.matrix is not None and args.name not in ctx.matrix.kits:
        from ninfer_kits.config.tables import unknown_name

        raise BadInput(f"fetch --auto: {unknown_name('kit', args.name, list(ctx.matrix.kits))}"
                       f" (with --auto, name a kit of the matrix, or none)")
    entries = ctx.every_release()
    if entries and ctx.index is not None and ctx.index.failure:  # a newer release may be there
        reporter.warning(f"{ctx.index.words} did not answer ({ctx.index.failure}): choosing "
                         f"among the releases the ledger ({ctx.ledger_words}) records only")
    if not entries:
        raise ctx.not_recorded("fetch --auto: there is no published kit",
                               "name a release tag to fetch")
    with open_target(Path(args.dest or "."), root=args.root) as target:
        host = gpu_host.probe_host() if target.mode == "host" else None
        choice = choose(entries, target, host, kit=args.name)
    if not choice.judged:
        raise ctx.not_recorded(f"fetch --auto: there is no published release of kit "
                               f"{args.name}", "name a release tag to fetch")
    machine = target.description  # a root's /etc/os-release says it: shown escaped
    for judged in choice.judged:
        said = "runs" if judged.runs else "will not run: " + "; ".join(judged.unmet)
        reporter.info(printable(f"{judged.words} on {machine}: {said}"))
        for note in judged.notes:
            reporter.info(printable(f"  ({note})"))
    chosen = choice.chosen
    if chosen is None:
        nearest = choice.nearest
        assert nearest is not None
        raise WillNotRunHere(printable(
            f"no published kit will run on {machine}; the nearest is {nearest.words}: "
            f"{'; '.join(nearest.unmet)}. Nothing was downloaded"))
    kind = flavours.named(chosen.flavour.flavour)
    option = "".join(f" {word}" for word in kind.fetch_option) if kind is not None else ""
    command = f"ninfer-kits fetch {chosen.entry.tag}{option}"
    reporter.info(f"chosen: {chosen.words}" + (", its GPU code native here (SASS)"
                                              if chosen.native else ""))
    if args.dry_run:
        sys.stdout.write(f"{command}\n")
        return None
    return chosen.entry.tag, chosen.flavour.flavour
