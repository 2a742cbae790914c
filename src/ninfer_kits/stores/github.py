"""The `github` store: the `[publish.github]` repository's releases, published to last, where
users find the notes. Its table, token and fetch's side are here; its client is
publish/stores/github.py (docs/publish.md)."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import TYPE_CHECKING

from ninfer_kits.config.tables import Table, quote
from ninfer_kits.errors import BadInput
from ninfer_kits.matrix import (
    DEFAULT_GITHUB_API,
    GitHubTarget,
    github_api_problem,
    read_repository,
)
from ninfer_kits.net.remote import github_token, github_web
from ninfer_kits.stores import Origin, StoreKind, StoreSetup

if TYPE_CHECKING:
    from ninfer_kits.fetch.http import Client
    from ninfer_kits.fetch.locate import Context, Located, Wanted
    from ninfer_kits.publish.store import Store


def read_table(table: Table) -> GitHubTarget:
    table.check_keys(("repository",), ("api",))
    repository = read_repository(table)
    if any(part in (".", "..") for part in repository.split("/")):
        raise table.error("repository", f"invalid repository {quote(repository)} "
                                         f"(expected OWNER/NAME)")
    api = table.optional_text("api") or DEFAULT_GITHUB_API
    problem = github_api_problem(api)
    if problem:
        raise table.error("api", f"invalid API base URL {quote(api)}: {problem}")
    return GitHubTarget(repository=repository, api=api.rstrip("/"))


def download_base(target: GitHubTarget, tag: str) -> str:
    """Where a published GitHub release's assets are downloaded from."""
    quoted = urllib.parse.quote(tag, safe="")
    return f"{github_web(target.api)}/{target.repository}/releases/download/{quoted}"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--github-api", metavar="URL", default=None,
                        help="the GitHub REST API base URL (default: [publish.github] api, "
                             "else https://api.github.com; GitHub Enterprise: https://HOST/api/v3)")


def _target(setup: StoreSetup, needed: bool) -> GitHubTarget | None:
    """[publish.github], its API replaced by --github-api; BadInput when `needed` and absent."""
    target = setup.matrix.publish.github
    if target is None:
        if needed:
            raise BadInput(f"{setup.matrix.path}: no [publish.github] table: add one with "
                           f"repository = \"OWNER/NAME\" to publish to GitHub")
        return None
    api = setup.args.github_api
    if api is not None:
        problem = github_api_problem(api)
        if problem:
            raise BadInput(f"--github-api {api}: {problem}")
        target = GitHubTarget(repository=target.repository, api=api.rstrip("/"))
    return target


def _check_arguments(setup: StoreSetup, chosen: bool) -> None:
    _target(setup, chosen)


def _make(setup: StoreSetup) -> Store:
    target = _target(setup, True)
    assert target is not None
    token = github_token(setup.environ, target.repository)
    from ninfer_kits.publish.stores.github import GitHubStore

    return GitHubStore(target, token, retry=setup.retry, reporter=setup.reporter)


def _notes_base(setup: StoreSetup, tag: str) -> str | None:
    target = _target(setup, False)
    return None if target is None else download_base(target, tag)


def _locate(want: Wanted, ctx: Context, client: Client | None) -> Located:
    from ninfer_kits.fetch.locate import github_release

    return github_release(want, ctx, client)


def _matrix_needed(ctx: Context) -> str | None:
    if ctx.repository is not None:
        return None
    return "without one, name a release tag and --repository OWNER/NAME"


KIND = StoreKind(
    name="github", publish_rank=1, notes_rank=0, make=_make, extras=("github", "requests"),
    read_table=read_table, add_arguments=_add_arguments, check_arguments=_check_arguments,
    notes_base=_notes_base,
    origin=Origin(locate=_locate, words="the GitHub release", matrix_needed=_matrix_needed))
