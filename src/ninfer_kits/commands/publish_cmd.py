"""`ninfer-kits publish KIT` (docs/publish.md). Wiring only: the stores are ninfer_kits/stores',
the publish publish/stages'."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from ninfer_kits import stores
from ninfer_kits.config import settings
from ninfer_kits.errors import BadInput, EnvironmentFailure, NinferKitsError
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Matrix, add_matrix_argument, load_matrix
from ninfer_kits.net import remote
from ninfer_kits.net.retry import RetryPolicy
from ninfer_kits.publish import credentials, plan, report
from ninfer_kits.publish.holdings import PublishConflict
from ninfer_kits.publish.stages import run_publish
from ninfer_kits.publish.state import CONFLICT, Outcome, PublishRequest
from ninfer_kits.publish.store import ConcurrentPublish, Store
from ninfer_kits.release import reproduction
from ninfer_kits.stores import StoreSetup

DEFAULT_OUT = Path("published")
DEFAULT_DRY_RUN_OUT = Path("dry-run")
# How long a publish waits for another of the same tag to finish (an upload takes minutes).
RACE_WAIT = 600.0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", help="a kit from matrix.toml (its one finished folder in --dist), "
                                    "or a finished kit folder (dist/<tag>)")
    add_matrix_argument(parser)
    parser.add_argument("--dist", type=Path, default=Path("dist"),
                        help="where finished kits are (default: dist/)")
    parser.add_argument("--to", action="append", choices=stores.names(), metavar="STORE",
                        help=f"publish to this store only ({', '.join(stores.names())}; "
                             f"repeatable; default: the remotes in matrix.toml's [publish], "
                             f"else local)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help=f"the local store's folder (default: {DEFAULT_OUT}/; with "
                             f"--dry-run: {DEFAULT_DRY_RUN_OUT}/)")
    parser.add_argument("--dry-run", action="store_true",
                        help="touch no remote: write the exact release that would be made "
                             "(assets and RELEASE.md with the notes) to a local folder")
    parser.add_argument("--replace", action="store_true",
                        help="replace assets that are there with other content (a published "
                             "release goes back to a draft meanwhile; an immutable one never)")
    for kind in stores.by_notes():  # each store's own options
        if kind.add_arguments is not None:
            kind.add_arguments(parser)
    parser.add_argument("--ledger-dir", type=Path, default=None, metavar="DIR",
                        help="record the release as DIR/<tag>.toml and make DIR's kit index "
                             "again (default: releases/ beside matrix.toml for a publish to "
                             "GitHub or B2; a publish to a local folder only records nothing "
                             "without this)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="holds the per-tag publish lock (default: ~/.cache/ninfer-kits)")
    parser.add_argument("--github-output", action="store_true",
                        help="write tag, outcome, changed, ledger and ledger_mode to "
                             "$GITHUB_OUTPUT (done on GitHub Actions anyway; this makes a "
                             "missing $GITHUB_OUTPUT an error)")
    parser.add_argument("--reproduction", type=Path, default=None, metavar="FILE",
                        help="REPRODUCTION.json of an independent rebuild of this kit (`repro "
                             "--against DIST --record FILE`): published with the release, "
                             "listed in SHA256SUMS, shown in the notes and the ledger")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="wait this long for another publish of the same tag on this "
                             "machine (default: stop at once, naming it)")


def execute(args: argparse.Namespace) -> int:
    reporter = Reporter()
    try:
        return _execute(args, reporter, os.environ)
    except NinferKitsError as error:
        error.args = (remote.redact(str(error)),)
        reporter.error(str(error))
        raise
    except (ImportError, KeyboardInterrupt):
        raise
    except Exception as error:  # a library's failure that no store turned into a message
        message = remote.redact(f"{type(error).__name__}: {error}")
        reporter.error(message)
        raise EnvironmentFailure(f"publish failed: {message}") from None


def _execute(args: argparse.Namespace, reporter: Reporter, environ: Mapping[str, str]) -> int:
    from ninfer_kits.commands.build_cmd import default_cache_dir

    matrix = load_matrix(args.matrix)
    if args.wait < 0:
        raise BadInput(f"--wait must be 0 or more seconds, got {args.wait}")
    if getattr(args, "github_output", False) and not settings.read(settings.GITHUB_OUTPUT, environ):
        raise BadInput("--github-output: $GITHUB_OUTPUT is not set")
    folder = plan.find_kit_dir(args.kit, args.dist, matrix)
    if args.reproduction is not None:  # a bad record is said before any store is asked
        reproduction.read(args.reproduction)
    names = _store_names(args.to, matrix)
    if not args.dry_run:  # a missing extra is said before any credential is asked for
        _check_store_modules(names)
    out = (args.out or (DEFAULT_DRY_RUN_OUT if args.dry_run else DEFAULT_OUT)).absolute()
    setup = StoreSetup(matrix=matrix, args=args, environ=environ, reporter=reporter, out=out,
                       retry=RetryPolicy.from_environment(environ))
    for kind in stores.kinds():  # its options checked, chosen or not
        if kind.check_arguments is not None:
            kind.check_arguments(setup, kind.name in names)
    signing_key, missing = None, []
    if matrix.publish.signing is not None:
        try:
            signing_key = credentials.signing_key(environ)
        except remote.MissingCredentials as error:
            # No release goes unsigned where users download from; a dry run or a local folder
            # writes one, saying so: trying the quick start needs no key.
            remotes = stores.distributing(names)
            if remotes and not args.dry_run:
                missing.append(f"{error}; a publish to {' and '.join(remotes)} is always signed "
                               f"(docs/release.md: the maintainers' key)")
    made: tuple[Store, ...] = ()
    if args.dry_run:  # the exact release, in a local folder
        made = stores.make_stores(("local",), setup)
        notes_base: str | None = stores.dry_notes_base(names, setup, folder.name)
    else:
        try:
            made = stores.make_stores(names, setup)
        except remote.MissingCredentials as error:
            missing.append(str(error))
        if missing:  # every credential missing named at once, the signing key's too
            raise remote.MissingCredentials("; ".join(missing))
        notes_base = None
    request = PublishRequest(
        kit_dir=folder, matrix=matrix, stores=made,
        lock_dir=(args.cache_dir or default_cache_dir()).absolute() / "publish",
        ledger_dir=None if args.dry_run else ledger_dir_for(args.ledger_dir, names, matrix),
        replace=args.replace or args.dry_run, wait=args.wait, notes_base=notes_base,
        signing_key=signing_key, reproduction=args.reproduction,
        dry_run=args.dry_run)
    try:
        outcome = _run_settling_a_race(request, reporter,
                                       lambda: stores.make_stores(names, setup))
    except PublishConflict as conflict:
        report.github_output({"tag": conflict.tag, "changed": "false", "ledger": "",
                        "ledger_mode": matrix.publish.ledger, "outcome": CONFLICT})
        raise
    would = report.would_be(outcome, args.ledger_dir or matrix.path.absolute().parent /
                            "releases") if args.dry_run else None
    report.report(outcome, reporter, dry_run=args.dry_run, would=names,
                  ledger_mode=matrix.publish.ledger, would_be=would)
    return 0


def _check_store_modules(names: tuple[str, ...]) -> None:
    """Name the extra to install when a store's module is missing, before any token is asked."""
    import importlib.util

    from ninfer_kits.cli import extra_missing

    for name in names:
        for module in stores.kind(name).extras:
            if importlib.util.find_spec(module) is None:
                raise extra_missing(module, "publish")


def ledger_dir_for(chosen: Path | None, names: tuple[str, ...], matrix: Matrix) -> Path | None:
    """Where the release is recorded: `--ledger-dir`, else the ledger beside the matrix for a
    release on GitHub or B2. A local folder's only is nowhere unless asked: an entry naming a
    path of this machine would dirty the checkout, whose next build records it."""
    if chosen is not None:
        return chosen.absolute()
    if stores.distributing(names):
        return matrix.path.absolute().parent / "releases"
    return None


def _run_settling_a_race(request: PublishRequest, reporter: Reporter,
                         new_stores: Callable[[], tuple[Store, ...]]) -> Outcome:
    """run_publish; when another publish of the tag races it, wait for that one, then publish
    once more with new stores, comparing with what it published."""
    try:
        return run_publish(request, reporter)
    except ConcurrentPublish as race:
        reporter.warning(f"{race}: waiting for it to publish (at most {RACE_WAIT:.0f} s), "
                         f"then comparing with what it published")
        if not race.published_within(RACE_WAIT):
            if race.unsettled is not None:
                raise race.unsettled from None
            raise
    return run_publish(dataclasses.replace(request, stores=new_stores()), reporter)


def _store_names(chosen: list[str] | None, matrix: Matrix) -> tuple[str, ...]:
    names = set(chosen or matrix.publish.remotes or ("local",))
    return tuple(name for name in stores.names() if name in names)
