"""`ninfer-kits alert KIT --failed STEP | --fixed`: one GitHub issue per failing kit (docs/watch.md,
"When a kit fails")."""

from __future__ import annotations

import argparse
import os

from ninfer_kits.config import settings
from ninfer_kits.errors import BadInput, NinferKitsError
from ninfer_kits.log import Reporter
from ninfer_kits.net import remote

_REPOSITORY_FORM = r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", metavar="KIT", help="the kit whose rebuild failed or succeeded")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--failed", metavar="STEP",
                      help="the kit's rebuild failed at STEP (build, publish, …): open its "
                           "issue, or comment on it when the failure changed")
    what.add_argument("--fixed", action="store_true",
                      help="the kit rebuilt: close its open issue with a comment (none open: "
                           "nothing is done)")
    parser.add_argument("--log", metavar="URL", default=None,
                        help="the run's log (default: this Actions run, from $GITHUB_SERVER_URL, "
                             "$GITHUB_REPOSITORY and $GITHUB_RUN_ID)")
    parser.add_argument("--detail", metavar="TEXT", default="",
                        help="what failed, in words (with --failed)")
    parser.add_argument("--repository", metavar="OWNER/NAME", default=None,
                        help="where the issue is (default: $GITHUB_REPOSITORY)")
    parser.add_argument("--api", metavar="URL", default=None,
                        help=f"GitHub's REST API (default: ${settings.GITHUB_API.name}, else "
                             f"$GITHUB_API_URL, else https://api.github.com)")


def execute(args: argparse.Namespace) -> int:
    reporter = Reporter()
    try:
        return _execute(args, reporter)
    except NinferKitsError as error:
        reporter.error(remote.redact(str(error)), title=f"ninfer-kits alert {args.kit}")
        raise


def _execute(args: argparse.Namespace, reporter: Reporter) -> int:
    import re

    from ninfer_kits.alert.results import KIT_NAME
    from ninfer_kits.matrix import DEFAULT_GITHUB_API, github_api_problem

    if KIT_NAME.fullmatch(args.kit) is None:
        raise BadInput(f"alert: {args.kit!r} is not a kit name (letters, digits, _ . + -)")
    if args.fixed and args.detail:
        raise BadInput("alert: --detail goes with --failed, not --fixed")
    if args.failed is not None and not args.failed.strip():
        raise BadInput("alert: --failed STEP: the step is empty")
    repository = args.repository or (settings.read(settings.GITHUB_REPOSITORY) or "").strip()
    if not repository:
        raise BadInput("alert: no repository: set GITHUB_REPOSITORY (as Actions does) or give "
                       "--repository OWNER/NAME")
    if re.fullmatch(_REPOSITORY_FORM, repository) is None:
        raise BadInput(f"alert: repository {repository!r} is not OWNER/NAME")
    api = (args.api or settings.read(settings.GITHUB_API) or settings.read(settings.GITHUB_API_URL)
           or DEFAULT_GITHUB_API).rstrip("/")
    token = remote.github_token(
        os.environ, repository, missing="alert: no GitHub token",
        able="write the issues of {repository} (on Actions: `permissions: issues: write`)")
    problem = github_api_problem(api)
    if problem:
        raise BadInput(f"alert: the GitHub API {api}: {problem}")
    run = args.log or settings.actions_run() or ""

    from ninfer_kits.alert.issues import Failure, KitAlerts
    from ninfer_kits.net.retry import RetryPolicy

    alerts = KitAlerts(api, repository, token, retry=RetryPolicy.from_environment(),
                       reporter=reporter)
    if args.fixed:
        closed = alerts.fixed(args.kit, run)
        if not closed:
            print(f"kit {args.kit}: no open issue; nothing to close")
        for done in closed:
            print(f"kit {args.kit}: closed issue #{done.number} ({done.url})")
        return 0
    done = alerts.failed(args.kit, Failure(step=args.failed.strip(), detail=args.detail,
                                           log=run))
    if done.action == "opened":
        print(f"kit {args.kit}: opened issue #{done.number} ({done.url})")
    elif done.action == "commented":
        print(f"kit {args.kit}: the failure changed; commented on issue #{done.number} "
              f"({done.url})")
    else:
        print(f"kit {args.kit}: issue #{done.number} already says so; nothing written "
              f"({done.url})")
    return 0

