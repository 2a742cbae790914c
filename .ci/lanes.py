"""Run CI's nox sessions in two lanes side by side, then print how long each took.

`python3 .ci/lanes.py SESSION...` (what .ci/run does): the first session of the oldest Python
(the one with the end-to-end files, most of CI's time) runs in the main lane, its output
streamed as it comes; every other session runs, one after another, in a side lane at a lower
CPU priority, using the core the main lane's serial tests leave idle. Each side session's output
is kept in .ci/logs/SESSION.log (--logs) and printed whole once the main lane is done (a GitHub
Actions fold group each), so no line of the two lanes interleaves. One session named alone runs
in the main lane. Exits 1 when any session failed.

At the end: a table of each session's lane, status and time, and the total since .ci/run
started ($CI_RUN_STARTED, seconds since the epoch), with a warning line when the total passes
WARN_AFTER (times are noisy, so never a failure). On GitHub Actions the warning is an annotation
and the table goes to the job summary. DEVELOPING.md says what the budget is.

Standard library only: it runs on the machine's python3 before any venv exists.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

WARN_AFTER = 45 * 60  # seconds: the budget is 40 minutes cold (DEVELOPING.md)
SIDE_NICENESS = 10  # the side lane yields to the main lane's compiles
LOGS = Path(__file__).resolve().parent / "logs"  # the default of --logs


@dataclass(frozen=True)
class Timed:
    session: str
    lane: str
    seconds: float
    status: int


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}m {whole % 60:02d}s"


def split(sessions: list[str], oldest: str) -> tuple[list[str], list[str]]:
    """(main lane, side lane): tests-OLDEST alone in the main lane when it is named with
    others; otherwise every session in the main lane, one after another."""
    main = f"tests-{oldest}"
    if main in sessions and len(sessions) > 1:
        return [main], [name for name in sessions if name != main]
    return list(sessions), []


def run_session(command: list[str], session: str, lane: str, log: Path | None) -> Timed:
    started = time.monotonic()
    if log is None:
        status = subprocess.call([*command, session])
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as sink:
            status = subprocess.call([*command, session], stdout=sink, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     preexec_fn=lambda: os.nice(SIDE_NICENESS))
    return Timed(session, lane, time.monotonic() - started, status)


def run_side(command: list[str], sessions: list[str], done: list[Timed], logs: Path) -> None:
    for session in sessions:
        timed = run_session(command, session, "side", logs / f"{session}.log")
        done.append(timed)
        word = "passed" if timed.status == 0 else f"FAILED (exit {timed.status})"
        print(f"\n[side lane] {session} {word} in {minutes(timed.seconds)}; its output "
              f"follows the main lane's", flush=True)


def show_side_logs(side: list[Timed], github: bool, logs: Path) -> None:
    for timed in side:
        log = logs / f"{timed.session}.log"
        print(f"::group::{timed.session} (side lane)" if github else
              f"\n======== {timed.session} (side lane): its whole output ========", flush=True)
        sys.stdout.buffer.write(log.read_bytes())
        sys.stdout.flush()
        if github:
            print("::endgroup::", flush=True)


def report(timed: list[Timed], total: float, environ: dict[str, str]) -> str:
    """The closing table, the total and (past WARN_AFTER) the warning line; on GitHub Actions
    the warning as an annotation and the table in the job summary too."""
    rows = [f"| {t.session} | {t.lane} | {'passed' if t.status == 0 else 'FAILED'} | "
            f"{minutes(t.seconds)} |" for t in timed]
    table = "\n".join(["| nox session | lane | status | time |", "|---|---|---|---|", *rows,
                       f"| **total** (.ci/run, from its start) | | | **{minutes(total)}** |"])
    lanes = {t.lane for t in timed}
    lines = ["", "CI times (the side lane runs beside the main one):" if "side" in lanes
             else "CI times:", table]
    if total > WARN_AFTER:
        warning = (f"CI took {minutes(total)}, past the {WARN_AFTER // 60}-minute warning line "
                   f"(the budget is 40 minutes cold: DEVELOPING.md)")
        lines.append(f"::warning title=CI budget::{warning}"
                     if environ.get("GITHUB_ACTIONS") == "true" else f"warning: {warning}")
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as sink:
            sink.write(f"### CI times\n\n{table}\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oldest", required=True, help="the oldest Python, e.g. 3.11")
    parser.add_argument("--command", default="nox -s",
                        help="what runs one session, the session's name appended")
    parser.add_argument("--logs", type=Path, default=LOGS,
                        help="where the side lane's sessions write their output")
    parser.add_argument("sessions", nargs="+")
    args = parser.parse_args(argv)
    command = shlex.split(args.command)
    started = float(os.environ.get("CI_RUN_STARTED") or 0) or time.time()
    github = os.environ.get("GITHUB_ACTIONS") == "true"
    main_lane, side_lane = split(args.sessions, args.oldest)
    side: list[Timed] = []
    helper = threading.Thread(target=run_side, args=(command, side_lane, side, args.logs),
                              daemon=True)
    helper.start()
    timed = [run_session(command, session, "main", None) for session in main_lane]
    helper.join()
    show_side_logs(side, github, args.logs)
    print(report([*timed, *side], time.time() - started, dict(os.environ)), flush=True)
    return 1 if any(t.status != 0 for t in [*timed, *side]) else 0


if __name__ == "__main__":
    sys.exit(main())
