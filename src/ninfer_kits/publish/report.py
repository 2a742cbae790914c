"""What `ninfer-kits publish` says when done: on stdout, as the step summary and, on GitHub
Actions, as step outputs (docs/publish.md)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from ninfer_kits import stores
from ninfer_kits.config import settings
from ninfer_kits.errors import NinferKitsError
from ninfer_kits.kit import kitdir, licence_policy
from ninfer_kits.log import Reporter
from ninfer_kits.publish.state import CONFLICT, PUBLISHED, REPRODUCED, Outcome
from ninfer_kits.release import kitindex, ledger


def would_be(outcome: Outcome, ledger_dir: Path) -> str:
    """A dry run's outcome as the ledger knows the tag (reproduced, or conflict)."""
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


def report(outcome: Outcome, reporter: Reporter, *, dry_run: bool, would: tuple[str, ...],
           ledger_mode: str, would_be: str | None = None) -> None:
    """The report on stdout, the step summary and outputs; `would` names the stores chosen."""
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
        refusing = stores.distributing(would)
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
    github_output({"tag": tag, "changed": str(outcome.changed).lower(),
                    "ledger": str(outcome.ledger or ""), "ledger_mode": ledger_mode,
                    "outcome": would_be or outcome.result})


def _ledger_lines(outcome: Outcome, width: int) -> list[str]:
    """Where the release is recorded (ledger entry, kit index), or that it is nowhere."""
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
    signing = outcome.request.matrix.publish.signing
    key = outcome.signed_by
    if key is not None:
        who = f"{signing.identity}, " if signing is not None else ""
        return f"  {'signed':<{width}}  {kitdir.SIGNATURE} by {who}key {key}"
    why = "no [publish.signing] in the matrix" if signing is None else \
        "no signing key: a dry run, or a local folder"
    return f"  {'unsigned':<{width}}  no {kitdir.SIGNATURE} ({why})"


def github_output(values: Mapping[str, str]) -> None:
    """Step outputs on GitHub Actions, for the workflow that lands the ledger."""
    path = settings.read(settings.GITHUB_OUTPUT)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as output:
        output.writelines(f"{key}={value}\n" for key, value in values.items())
