"""`ninfer-kits publish KIT`: a finished kit folder onto B2 and GitHub Releases (or a local
folder), exactly once, verifiably, then releases/<tag>.toml. Running it again is always safe."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from ninfer_kits import kitdir, kitindex, ledger, licence_policy, remote, reproduction
from ninfer_kits.errors import BadInput, EnvironmentFailure, NinferKitsError
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import (
    GitHubTarget,
    Matrix,
    add_matrix_argument,
    github_api_problem,
    load_matrix,
)
from ninfer_kits.publish import credentials, plan
from ninfer_kits.publish.holdings import PublishConflict
from ninfer_kits.publish.stage_functions import DISTRIBUTING
from ninfer_kits.publish.stages import run_publish
from ninfer_kits.publish.state import CONFLICT, PUBLISHED, REPRODUCED, Outcome, PublishRequest
from ninfer_kits.publish.store import ConcurrentPublish, Store
from ninfer_kits.publish.stores import STORE_NAMES, download_base
from ninfer_kits.publish.stores.local import LocalStore
from ninfer_kits.retry import RetryPolicy

DEFAULT_OUT = Path("published")
DEFAULT_DRY_RUN_OUT = Path("dry-run")
# How long a publish waits for another one of the same tag, uploading into the same release at
# the same time, to finish: uploading a kit's release takes seconds to minutes.
RACE_WAIT = 600.0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", help="a kit from matrix.toml (its one finished folder in --dist), "
                                    "or a finished kit folder (dist/<tag>)")
    add_matrix_argument(parser)
    parser.add_argument("--dist", type=Path, default=Path("dist"),
                        help="where finished kits are (default: dist/)")
    parser.add_argument("--to", action="append", choices=STORE_NAMES, metavar="STORE",
                        help="publish to this store only (b2, github, local; repeatable; "
                             "default: the remotes in matrix.toml's [publish], else local)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help=f"the local store's folder (default: {DEFAULT_OUT}/; with "
                             f"--dry-run: {DEFAULT_DRY_RUN_OUT}/)")
    parser.add_argument("--dry-run", action="store_true",
                        help="touch no remote: write the exact release that would be made "
                             "(assets and RELEASE.md with the notes) to a local folder")
    parser.add_argument("--replace", action="store_true",
                        help="replace assets that are there with other content (a published "
                             "release goes back to a draft meanwhile; an immutable one never)")
    parser.add_argument("--github-api", metavar="URL", default=None,
                        help="the GitHub REST API base URL (default: [publish.github] api, "
                             "else https://api.github.com; GitHub Enterprise: https://HOST/api/v3)")
    parser.add_argument("--b2-env", type=Path, metavar="FILE", default=None,
                        help=f"an env file with {credentials.B2_KEY_ID} and {credentials.B2_KEY} "
                             f"(default: those variables, else ${credentials.B2_ENV_FILE})")
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
    if getattr(args, "github_output", False) and not environ.get("GITHUB_OUTPUT"):
        raise BadInput("--github-output: $GITHUB_OUTPUT is not set")
    folder = plan.find_kit_dir(args.kit, args.dist, matrix)
    if args.reproduction is not None:  # a bad record is said before any store is asked
        reproduction.read(args.reproduction)
    names = _store_names(args.to, matrix)
    if not args.dry_run:  # a missing extra is said before any credential is asked for
        _check_store_modules(names)
    github = _github_target(matrix, args.github_api, "github" in names)
    retry = RetryPolicy.from_environment(environ)
    signing_key, missing = None, []
    if matrix.publish.signing is not None:
        try:
            signing_key = credentials.signing_key(environ)
        except remote.MissingCredentials as error:
            # GitHub and B2 are where users download from: no release goes there unsigned. A
            # dry run, or a local folder, writes an unsigned release, saying so: trying the
            # quick start needs no key.
            remotes = [name for name in names if name != "local"]
            if remotes and not args.dry_run:
                missing.append(f"{error}; a publish to {' and '.join(remotes)} is always signed "
                               f"(docs/release.md: the maintainers' key)")
    if args.dry_run:
        out = (args.out or DEFAULT_DRY_RUN_OUT).absolute()
        stores: tuple[Store, ...] = (LocalStore(out),)
        notes_base = _dry_notes_base(names, matrix, github, out, folder.name)
    else:
        try:
            stores = make_stores(names, matrix, github, args, environ, retry, reporter)
        except remote.MissingCredentials as error:
            missing.append(str(error))
        if missing:  # every credential missing named at once, the signing key's too
            raise remote.MissingCredentials("; ".join(missing))
        notes_base = None
    request = PublishRequest(
        kit_dir=folder, matrix=matrix, stores=stores,
        lock_dir=(args.cache_dir or default_cache_dir()).absolute() / "publish",
        ledger_dir=None if args.dry_run else ledger_dir_for(args.ledger_dir, names, matrix),
        replace=args.replace or args.dry_run, wait=args.wait, notes_base=notes_base,
        signing_key=signing_key, reproduction=args.reproduction,
        dry_run=args.dry_run)
    try:
        outcome = _run_settling_a_race(request, reporter, lambda: make_stores(
            names, matrix, github, args, environ, retry, reporter))
    except PublishConflict as conflict:
        _github_output({"tag": conflict.tag, "changed": "false", "ledger": "",
                        "ledger_mode": matrix.publish.ledger, "outcome": CONFLICT})
        raise
    would = _would_be(outcome, args.ledger_dir or matrix.path.absolute().parent / "releases") \
        if args.dry_run else None
    report(outcome, reporter, dry_run=args.dry_run, would=names, ledger_mode=matrix.publish.ledger,
           would_be=would)
    return 0


# The third-party modules each store talks through (the `publish` extra's).
STORE_MODULES = {"github": ("github", "requests"), "b2": ("b2sdk",)}


def _check_store_modules(names: tuple[str, ...]) -> None:
    """EnvironmentFailure naming the extra to install when a store's module is missing: the
    user who lacks it learns that first, not which token to set."""
    import importlib.util

    from ninfer_kits.cli import extra_missing

    for name in names:
        for module in STORE_MODULES.get(name, ()):
            if importlib.util.find_spec(module) is None:
                raise extra_missing(module, "publish")


def ledger_dir_for(chosen: Path | None, names: tuple[str, ...], matrix: Matrix) -> Path | None:
    """Where the release is recorded: `--ledger-dir`, else the team's ledger beside the matrix
    for a release on GitHub or B2 (where everyone fetches from). A release in a local folder
    only is this machine's: recorded nowhere unless asked, since the team's ledger is tracked,
    and an entry naming a path of this machine (and the kit index made again with it) would
    dirty the checkout, whose next build records it."""
    if chosen is not None:
        return chosen.absolute()
    if any(name != "local" for name in names):
        return matrix.path.absolute().parent / "releases"
    return None


def _run_settling_a_race(request: PublishRequest, reporter: Reporter,
                         new_stores: Callable[[], tuple[Store, ...]]) -> Outcome:
    """run_publish; when another publish of the tag uploads into the same release at the same
    time, wait for it to publish, then publish once more with new stores: that run compares
    with what the other published (the same kit tarballs: reproduced; others: a conflict)."""
    try:
        return run_publish(request, reporter)
    except ConcurrentPublish as race:
        reporter.warning(f"{race}: waiting for it to publish (at most {RACE_WAIT:.0f} s), "
                         f"then comparing with what it published")
        if not race.published_within(RACE_WAIT):
            raise
    return run_publish(dataclasses.replace(request, stores=new_stores()), reporter)


def _would_be(outcome: Outcome, ledger_dir: Path) -> str:
    """A dry run reads no store: what the real run would be, as the ledger knows the tag (a
    recorded release with the same tarballs: reproduced; with others: conflict)."""
    path = ledger.path_for(ledger_dir, outcome.kit.tag)
    if not path.is_file():
        return PUBLISHED
    try:
        recorded = {asset.name: asset.sha256 for asset in ledger.read(path).assets}
    except NinferKitsError:
        return PUBLISHED
    if all(recorded.get(flavour.asset) == flavour.sha256 for flavour in outcome.kit.flavours):
        return REPRODUCED
    return CONFLICT


def _store_names(chosen: list[str] | None, matrix: Matrix) -> tuple[str, ...]:
    names = set(chosen or matrix.publish.remotes or ("local",))
    return tuple(name for name in STORE_NAMES if name in names)


def _github_target(matrix: Matrix, api: str | None, needed: bool) -> GitHubTarget | None:
    target = matrix.publish.github
    if target is None:
        if needed:
            raise BadInput(f"{matrix.path}: no [publish.github] table: add one with "
                           f"repository = \"OWNER/NAME\" to publish to GitHub")
        return None
    if api is not None:
        problem = github_api_problem(api)
        if problem:
            raise BadInput(f"--github-api {api}: {problem}")
        target = GitHubTarget(repository=target.repository, api=api.rstrip("/"))
    return target


def make_stores(names: tuple[str, ...], matrix: Matrix, github: GitHubTarget | None,
                args: argparse.Namespace, environ: Mapping[str, str], retry: RetryPolicy,
                reporter: Reporter) -> tuple[Store, ...]:
    """Every store of `names`; the credentials missing for any of them are named at once (one
    run, not one per store, finds out what to set)."""
    stores: list[Store] = []
    missing: list[str] = []
    for name in names:
        try:
            stores.append(make_store(name, matrix, github, args, environ, retry, reporter))
        except remote.MissingCredentials as error:
            missing.append(str(error))
    if missing:
        raise remote.MissingCredentials("; ".join(missing))
    return tuple(stores)


def make_store(name: str, matrix: Matrix, github: GitHubTarget | None,
               args: argparse.Namespace, environ: Mapping[str, str], retry: RetryPolicy,
               reporter: Reporter) -> Store:
    """One store, its credentials read now (a missing one is named before anything runs)."""
    if name == "local":
        return LocalStore((args.out or DEFAULT_OUT).absolute())
    if name == "github":
        assert github is not None
        token = remote.github_token(environ, github.repository)
        from ninfer_kits.publish.stores.github import GitHubStore

        return GitHubStore(github, token, retry=retry, reporter=reporter)
    target = matrix.publish.b2
    if target is None:
        raise BadInput(f"{matrix.path}: no [publish.b2] table: add one with bucket = \"NAME\" "
                       f"and prefix = \"kits/\" to publish to B2")
    key_id, key = credentials.b2_key(environ, args.b2_env)
    from ninfer_kits.publish.stores.b2 import B2Store

    return B2Store(target, key_id, key, retry=retry, reporter=reporter)


def _dry_notes_base(names: tuple[str, ...], matrix: Matrix, github: GitHubTarget | None,
                    out: Path, tag: str) -> str:
    """The download folder the real release's notes would show."""
    if "github" in names and github is not None:
        return download_base(github, tag)
    if "b2" in names and matrix.publish.b2 is not None:
        target = matrix.publish.b2
        return f"<B2 download URL>/file/{target.bucket}/{target.prefix}{tag}"
    return (out / tag).as_uri()


def report(outcome: Outcome, reporter: Reporter, *, dry_run: bool, would: tuple[str, ...],
           ledger_mode: str, would_be: str | None = None) -> None:
    tag = outcome.release.tag
    lines = []
    if dry_run:
        lines.append(f"dry run: nothing was published; {tag} would go to "
                     f"{', '.join(would)}; the exact release (assets, and RELEASE.md with its "
                     f"notes) is in {outcome.records[0].location}")
        lines.append(f"  outcome as the ledger knows {tag}: would be {would_be}"
                     + {REPRODUCED: " (published already with these tarballs)",
                        CONFLICT: " (published already with other tarballs: refused)"}.get(
                            would_be or "", ""))
        forbidden = [v.tarball for v in outcome.licences if v.status == licence_policy.FORBIDDEN]
        refusing = [name for name in would if name in DISTRIBUTING]
        if forbidden and refusing:
            lines.append(f"  licence gate: a publish to {', '.join(refusing)} would refuse "
                         f"{', '.join(forbidden)} (exit 1; see the warning above)")
    elif outcome.result == REPRODUCED and outcome.kept:
        lines.append(f"reproduced {tag} (kit {outcome.kit.kit}): published already with this "
                     f"build's tarballs byte for byte; its assets are unchanged"
                     + ("; the ledger entry was written" if outcome.ledger_changed else ""))
    elif outcome.changed:
        lines.append(f"published {tag} (kit {outcome.kit.kit})")
    else:
        lines.append(f"nothing to do: {tag} is already published on "
                     f"{', '.join(record.store for record in outcome.records)} and matches the "
                     f"kit" + ("; the ledger is unchanged" if outcome.ledger else ""))
    width = max(len(record.store) for record in outcome.records)
    lines += [f"  {record.store:<{width}}  {record.location}" for record in outcome.records]
    if not dry_run:
        lines += _ledger_lines(outcome, width)
    lines.append(_signature_line(outcome, width))
    name_width = max(len(asset.name) for asset in outcome.release.assets)
    lines.append("")
    lines += [f"{asset.name:<{name_width}}  {asset.size:>13,}  {asset.sha256}"
              for asset in outcome.release.assets]
    sys.stdout.write("\n".join(lines) + "\n")
    rows = "\n".join(f"| {asset.name} | {asset.size:,} | `{asset.sha256}` |"
                     for asset in outcome.release.assets)
    where = "\n".join(f"- {record.store}: {record.location}" for record in outcome.records)
    said = "dry run" if dry_run else outcome.result
    reporter.summary(f"### publish `{tag}`: {said}\n\n{where}\n\n| asset | size | sha256 |\n"
                     f"|---|---|---|\n{rows}\n")
    _github_output({"tag": tag, "changed": str(outcome.changed).lower(),
                    "ledger": str(outcome.ledger or ""), "ledger_mode": ledger_mode,
                    "outcome": would_be or outcome.result})


def _ledger_lines(outcome: Outcome, width: int) -> list[str]:
    """Where the release is recorded (the ledger entry and the kit index made again with it),
    or that it is recorded nowhere: a release in a local folder only, without --ledger-dir."""
    if outcome.ledger is None:
        team = outcome.request.matrix.path.absolute().parent / "releases"
        return [f"  {'ledger':<{width}}  not recorded: a release only in a local folder leaves "
                f"{team}/ alone (--ledger-dir DIR records it in DIR)"]
    lines = [f"  {'ledger':<{width}}  {outcome.ledger}"
             + ("" if outcome.ledger_changed else " (unchanged)")]
    if outcome.index is not None:
        lines.append(f"  {'index':<{width}}  {outcome.index} and "
                     f"{kitindex.HTML_NAME} beside it")
    return lines


def _signature_line(outcome: Outcome, width: int) -> str:
    """Whether the release is signed, and by whom: one line of the report."""
    signing = outcome.request.matrix.publish.signing
    key = outcome.signed_by
    if key is not None:
        who = f"{signing.identity}, " if signing is not None else ""
        return f"  {'signed':<{width}}  {kitdir.SIGNATURE} by {who}key {key}"
    why = "no [publish.signing] in the matrix" if signing is None else \
        "no signing key: a dry run, or a local folder"
    return f"  {'unsigned':<{width}}  no {kitdir.SIGNATURE} ({why})"


def _github_output(values: Mapping[str, str]) -> None:
    """On GitHub Actions: step outputs for the workflow that lands the ledger (`outcome`:
    published, reproduced or conflict)."""
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as output:
        output.writelines(f"{key}={value}\n" for key, value in values.items())
