"""`ninfer-kits watch`: say which kits need a rebuild, and hand the workflow its build matrix
(exit statuses: docs/watch.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ninfer_kits.config import settings
from ninfer_kits.errors import EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, BadInput
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import DEFAULT_GITHUB_API, Kit, add_matrix_argument, load_matrix
from ninfer_kits.matrix.inputs import cache_key
from ninfer_kits.matrix.names import HEX_REVISION
from ninfer_kits.net import remote
from ninfer_kits.watch.heads import DEFAULT_MAX_WAIT, HeadClient, HeadError, StateFile
from ninfer_kits.watch.plan import Stale, kit_releases, plan

ALL = "all"  # KIT: every kit (as no KIT), what a dispatch's choice list offers


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_matrix_argument(parser)
    parser.add_argument("kits", nargs="*", metavar="KIT",
                        help="watch only these kits (`all`, or none: every kit)")
    parser.add_argument("--api", metavar="URL", default=None,
                        help=f"GitHub's REST API (default: ${settings.GITHUB_API.name}, else "
                             f"{DEFAULT_GITHUB_API})")
    parser.add_argument("--state", type=Path, metavar="FILE", default=None,
                        help="the ETag cache (JSON), read and rewritten atomically: an unchanged "
                             "upstream then answers 304 and costs no rate limit")
    parser.add_argument("--ledger-dir", type=Path, metavar="DIR", default=None,
                        help="the ledger (default: releases/ beside the matrix file)")
    parser.add_argument("--revision", default=None,
                        help="build the kit at this revision (a dispatch), not the head; only "
                             "with exactly one KIT (a revision is one upstream's)")
    parser.add_argument("--force", action="store_true",
                        help="the chosen kits are stale whatever the ledger says (a dispatch)")
    parser.add_argument("--max-wait", type=float, default=DEFAULT_MAX_WAIT, metavar="SECONDS",
                        help="the longest a rate limit (Retry-After) is waited out, per upstream")
    parser.add_argument("--github-output", action="store_true",
                        help="write matrix=<json> and stale=<count> to $GITHUB_OUTPUT")


def execute(args: argparse.Namespace) -> int:
    reporter = Reporter()
    matrix = load_matrix(args.matrix)
    names = [name for name in args.kits if name != ALL]
    if args.revision is not None and (len(names) != 1 or len(args.kits) != 1):
        raise BadInput(f"--revision {args.revision[:60]!r} needs exactly one KIT (a revision is "
                       f"one upstream's), not {', '.join(args.kits) or 'all kits'}")
    kits = matrix.select(names)
    if args.revision is not None and HEX_REVISION.fullmatch(args.revision) is None:
        raise BadInput(f"--revision {args.revision!r}: not a revision (7 to 40 hex digits)")
    ledger_dir = args.ledger_dir or matrix.path.parent / "releases"
    releases = kit_releases(ledger_dir)
    state = StateFile(args.state)
    named = settings.read(settings.GITHUB_API)
    api = args.api or named or DEFAULT_GITHUB_API
    given = "--api" if args.api else f"${settings.GITHUB_API.name}" if named else ""
    token = remote.token_for(api, given)  # never shown, whatever the server says back
    client = HeadClient(api, state, token, max_wait=args.max_wait)

    heads: dict[str, str] = {}
    failures: list[str] = []
    service_failed = False
    watched = {kit.upstream.id: kit.upstream for kit in kits}
    for upstream in watched.values():
        if args.revision or upstream.revision:
            continue
        if upstream.is_local:
            reporter.info(f"upstream {upstream.id}: a local folder ({upstream.url}), not watched")
            continue
        try:
            result = client.head(upstream.repository, upstream.branch)
        except HeadError as error:  # it may quote the server: redacted
            failures.append(f"upstream {upstream.id}: {remote.redact(str(error))}")
            service_failed = service_failed or error.service
            reporter.warning(failures[-1])
            continue
        if result.moved_to:
            reporter.warning(f"upstream {upstream.id}: repository {upstream.repository} moved "
                             f"to {remote.redact(result.moved_to)} (301, followed): "
                             f"update matrix.toml")
        heads[upstream.id] = result.sha
        how = "unchanged (304)" if result.cached else "read"
        reporter.info(f"upstream {upstream.id}: {upstream.repository} {upstream.branch} at "
                      f"{result.sha[:12]}, {how}")
    state.save()

    stale = plan(kits, heads, releases, args.revision, force=args.force)
    for item in stale:
        print(f"stale  {item.kit.id}: {item.reason}")
    print(f"{len(stale)} of {len(kits)} kits stale" +
          (f"; {len(failures)} upstreams could not be read" if failures else ""))
    for failure in failures:
        print(f"ninfer-kits: error: {failure}", file=sys.stderr)
        reporter.error(failure)
    document = github_matrix(stale)
    if args.github_output:
        _github_output(document, len(stale))
    reporter.summary(_summary(stale, failures))
    if service_failed:  # the network or GitHub: a run later may read them all
        return EXIT_ENVIRONMENT
    return EXIT_CHECK_FAILED if failures else 0


def github_matrix(stale: list[Stale]) -> dict[str, Any]:
    """`strategy.matrix` of the build job: one entry per stale kit."""
    return {"include": [_entry(item.kit, item) for item in stale]}


def _entry(kit: Kit, item: Stale) -> dict[str, Any]:
    return {"kit": kit.id, "upstream": kit.upstream.id, "arch": kit.arch,
            "toolchain": kit.toolchain.id, "revision": item.revision, "reason": item.reason,
            "cache_key": cache_key(kit, item.inputs),
            "inputs": item.inputs.digest}


def _github_output(document: dict[str, Any], count: int) -> None:
    path = settings.read(settings.GITHUB_OUTPUT)
    if not path:
        raise BadInput("--github-output: $GITHUB_OUTPUT is not set")
    with open(path, "a", encoding="utf-8") as output:
        output.write(f"matrix={json.dumps(document, separators=(',', ':'))}\n")
        output.write(f"stale={count}\n")


def _summary(stale: list[Stale], failures: list[str]) -> str:
    lines = ["### ninfer-kits watch", ""]
    if stale:
        lines += ["| kit | revision | why |", "|---|---|---|"]
        lines += [f"| {s.kit.id} | `{s.revision[:12]}` | {s.reason} |" for s in stale]
    else:
        lines.append("Nothing to rebuild.")
    lines += [f"- ✕ {failure}" for failure in failures]
    return "\n".join(lines) + "\n"
