"""`ninfer-kits build KIT`: one matrix entry → a finished, verifiable kit under dist/."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ninfer_kits.errors import BadInput, NinferKitsError
from ninfer_kits.inspector.floor import render_table
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import add_matrix_argument, load_matrix
from ninfer_kits.pipeline.builders import Builder, LocalBuilder
from ninfer_kits.pipeline.stages import BuildRequest, BuildState, run_build


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("NINFER_KITS_CACHE", Path(base) / "ninfer-kits"))


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", help="a kit from matrix.toml (see `ninfer-kits matrix`)")
    add_matrix_argument(parser)
    parser.add_argument("--builder", choices=["local", "docker"], default="local",
                        help="where to compile: this host, or the kit's toolchain image")
    parser.add_argument("--jobs", "-j", type=int, default=0,
                        help="parallel compile jobs (default: from cores and memory)")
    parser.add_argument("--revision", help="build this revision instead of the pinned one")
    parser.add_argument("--source", dest="source_url", metavar="URL",
                        help="fetch the upstream from here instead (a fork, a local checkout)")
    parser.add_argument("--dist", type=Path, default=Path("dist"),
                        help="where finished kits go (default: dist/)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="git mirrors and other caches (default: ~/.cache/ninfer-kits)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="build trees and logs (default: <cache-dir>/work)")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the build tree after a successful build")
    parser.add_argument("--ccache-volume", metavar="NAME", default=None,
                        help="docker builder: the compiler cache volume (default: "
                             "ninfer-kits-ccache-<toolchain>; 'none' compiles without one)")


def make_builder(args: argparse.Namespace) -> Builder:
    if args.builder == "local":
        if args.ccache_volume is not None:
            raise BadInput("--ccache-volume is for the docker builder (--builder docker)")
        return LocalBuilder()
    from ninfer_kits.pipeline.docker_builder import (
        DockerBuilder,  # the docker SDK only when asked for
    )

    return DockerBuilder(ccache_volume=args.ccache_volume)


def execute(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    kit = matrix.kit(args.kit)
    if args.jobs < 0:
        raise BadInput(f"--jobs must be 1 or more, got {args.jobs}")
    cache_dir = (args.cache_dir or default_cache_dir()).absolute()
    request = BuildRequest(
        kit=kit, builder=make_builder(args), project=matrix.path.absolute().parent,
        dist_dir=args.dist.absolute(),
        cache_dir=cache_dir, work_dir=(args.work_dir or cache_dir / "work").absolute(),
        jobs=args.jobs, revision=args.revision, source_url=args.source_url,
        keep_work=args.keep_work,
    )
    reporter = Reporter()
    try:
        state = run_build(request, reporter)
    except NinferKitsError as error:
        reporter.error(str(error))
        raise
    report(state, reporter)
    return 0


def report(state: BuildState, reporter: Reporter) -> None:
    assert state.output is not None and state.tarball is not None
    assert state.inspection is not None
    asset = state.output / state.asset
    table = render_table(state.inspection.floor.table)
    sys.stdout.write(
        f"\nkit      {asset}\n"
        f"size     {state.tarball.size:,} bytes ({state.tarball.size / 1e6:.1f} MB)\n"
        f"sha256   {state.tarball.sha256}\n"
        f"files    {', '.join(sorted(p.name for p in state.output.iterdir()))}\n\n"
        f"Runtime floor:\n\n{table}\n"
    )
    reporter.summary(
        f"### {state.request.kit.id} → `{state.tag}`\n\n| file | size | sha256 |\n|---|---|---|\n"
        f"| {state.asset} | {state.tarball.size:,} | `{state.tarball.sha256}` |\n\n{table}\n"
    )
