"""`ninfer-kits build KIT`: one matrix entry → a finished, verifiable kit under dist/."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ninfer_kits.config import settings
from ninfer_kits.config.tables import printable
from ninfer_kits.errors import BadInput, NinferKitsError
from ninfer_kits.files.outputs import MB, check_output_folder
from ninfer_kits.inspector.floor import render_table
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Kit, Matrix, add_matrix_argument, load_matrix
from ninfer_kits.oci.reference import parse_pin
from ninfer_kits.pipeline.builders import BUILDERS, BuilderOptions, make_builder
from ninfer_kits.pipeline.stage_functions import kit_in_place
from ninfer_kits.pipeline.stages import run_build
from ninfer_kits.pipeline.state import BuildRequest, Built

# The room a build asks of --dist before the compile (a portable kit takes tens of MB).
BUILD_ROOM = 100 * MB


def default_cache_dir() -> Path:
    base = settings.read(settings.XDG_CACHE_HOME) or str(Path.home() / ".cache")
    given = settings.read(settings.CACHE)
    return Path(given if given is not None else Path(base) / "ninfer-kits")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", help="a kit from matrix.toml (see `ninfer-kits matrix`)")
    add_matrix_argument(parser)
    parser.add_argument("--builder", choices=list(BUILDERS), default="local",
                        help="where to compile: " + "; ".join(
                            f"{entry.name}: {entry.summary}" for entry in BUILDERS.values())
                        + " (default: local)")
    parser.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                        help="parallel compile jobs, 1 or more (default: from cores and memory)")
    parser.add_argument("--revision", help="build this revision instead of the pinned one (its "
                        "version is what its version file says, not matrix.toml's)")
    parser.add_argument("--source", dest="source_url", metavar="URL",
                        help="fetch the upstream from here instead (a fork, a local checkout)")
    parser.add_argument("--dist", type=Path, default=Path("dist"),
                        help="where finished kits go (default: dist/)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="git mirrors and other caches (default: ~/.cache/ninfer-kits)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="build trees and logs (default: <cache-dir>/work)")
    parser.add_argument("--replace", action="store_true",
                        help="replace dist/<tag>/ even when it holds this kit built from another "
                             "revision (a tag without the revision in it); without it such a "
                             "build stops before the compile, naming both revisions")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the build tree after a successful build (a work folder "
                             "is held by one build at a time: a second build of the same kit "
                             "with the same --work-dir stops, naming the first one's PID)")
    parser.add_argument("--no-ccache", dest="ccache", action="store_false",
                        help="compile cold, without a compiler cache (repro's second build "
                             "does); by default every compile goes through ccache")
    parser.add_argument("--ccache-volume", metavar="NAME", default=None,
                        help="docker builder: the compiler cache volume (default: "
                             "ninfer-kits-ccache-<toolchain>; 'none' compiles without one, "
                             "and without a kept build tree)")
    parser.add_argument("--ccache-dir", type=Path, metavar="DIR", default=None,
                        help="the compiler cache's folder. Local builder: used in place "
                             "(default: <cache-dir>/ccache). Docker builder: a host folder "
                             "(what actions/cache saves and restores) loaded into a cache "
                             "volume of this build's own through the engine's API (a remote "
                             "DOCKER_HOST works), and written back into DIR after the build, "
                             "failed or not, trimmed to --ccache-max-size; missing or empty "
                             "DIR = cold cache. Prints `ccache: H hits, M misses (R%% hit "
                             "rate)`")
    parser.add_argument("--ccache-max-size", metavar="SIZE", default="2G",
                        help="ccache's max_size: what the local builder's cache or --ccache-dir "
                             "keeps at most (default: 2G)")
    parser.add_argument("--no-portable", action="store_true",
                        help="build the plain kit only, even where the matrix sets portable = "
                             "true (the portable repair reads dpkg or wheel records, which a "
                             "Fedora or Arch host lacks); publish refuses such a folder, since "
                             "it disagrees with the matrix")
    parser.add_argument("--fresh-tree", action="store_true",
                        help="docker builder: configure and compile in a new, empty build tree "
                             "instead of the kit's kept one (a volume beside the compiler "
                             "cache, in which a rebuild compiles only what changed)")
    parser.add_argument("--toolchain-image", metavar="PIN", default=None,
                        help="docker builder: compile in exactly this image, NAME[:TAG]@sha256:"
                             "… (pulled when the engine lacks it, never built), whatever the "
                             "matrix pins; `repro --against` passes the one a kit records")


def _in_image(kit: Kit, text: str, builder: str) -> Kit:
    """The kit with its toolchain pinned to `text`, whatever the matrix pins."""
    if builder != "docker":
        raise BadInput("--toolchain-image needs --builder docker (the local builder compiles "
                       "on this machine, in no image)")
    try:
        parse_pin(text)
    except ValueError as error:
        raise BadInput(f"--toolchain-image {printable(text[:200])}: {error}") from None
    return dataclasses.replace(kit, toolchain=dataclasses.replace(kit.toolchain, image=text))


def execute(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:  # (0 is BuildRequest's "the default")
        raise BadInput(f"--jobs must be 1 or more, got {args.jobs}")
    matrix = load_matrix(args.matrix)
    kit = matrix.kit(args.kit)
    check_output_folder(args.dist, f"--dist {args.dist}", needs=BUILD_ROOM,
                        what="the kit's tarballs")
    if args.no_portable:
        kit = dataclasses.replace(kit, portable=False)
    if args.toolchain_image is not None:
        kit = _in_image(kit, args.toolchain_image, args.builder)
    cache_dir = (args.cache_dir or default_cache_dir()).absolute()
    work_dir = (args.work_dir or cache_dir / "work").absolute()
    for folder, option in ((cache_dir, "--cache-dir"), (work_dir, "--work-dir")):
        check_output_folder(folder, f"{option} {folder}")  # the mirrors, the build tree
    request = BuildRequest(
        kit=kit, builder=make_builder(args.builder, BuilderOptions(
            ccache=args.ccache, ccache_volume=args.ccache_volume, fresh_tree=args.fresh_tree,
            ccache_dir=args.ccache_dir, ccache_max_size=args.ccache_max_size)),
        project=matrix.path.absolute().parent,
        dist_dir=args.dist.absolute(),
        cache_dir=cache_dir, work_dir=work_dir,
        jobs=args.jobs or 0, revision=args.revision, source_url=args.source_url,
        keep_work=args.keep_work, replace=args.replace,
    )
    reporter = Reporter()
    try:
        built = run_build(request, reporter)
    except NinferKitsError as error:
        error = _with_alternatives(error, matrix, kit)
        reporter.error(str(error))
        raise error from None
    with kit_in_place(built.kit_dir.path):  # Ctrl-C now says the kit is there
        report(built, reporter)
    return 0


def _with_alternatives(error: NinferKitsError, matrix: Matrix, kit: Kit) -> NinferKitsError:
    """A base image that cannot be had, naming the toolchains that build anywhere instead."""
    from ninfer_kits.pipeline.images import BaseImageMissing, builds_anywhere

    if not isinstance(error, BaseImageMissing):
        return error
    return error.suggesting(kit.id, [
        f"{toolchain.id} (CUDA {toolchain.cuda})" for toolchain in matrix.toolchains.values()
        if toolchain.id != kit.toolchain.id and builds_anywhere(toolchain.build_args)
        and toolchain.cuda.at_least(kit.upstream.min_cuda)
        and error.recipe.base_image not in (toolchain.base_image, toolchain.runtime_base_image)])


def report(built: Built, reporter: Reporter) -> None:
    kit = built.kit_dir
    table = render_table(built.inspection.floor.table)
    sys.stdout.write(
        f"\nkit      {kit.tarball}\n"
        f"size     {kit.size:,} bytes ({kit.size / 1e6:.1f} MB)\n"
        f"sha256   {kit.sha256}\n"
        f"files    {', '.join(kit.files)}\n\n"
        f"Runtime floor:\n\n{table}\n"
    )
    reporter.summary(
        f"### {kit.kit} → `{kit.tag}`\n\n| file | size | sha256 |\n|---|---|---|\n"
        f"| {kit.asset} | {kit.size:,} | `{kit.sha256}` |\n\n{table}\n"
    )
