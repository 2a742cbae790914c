"""Fuzz every reader of untrusted bytes, each in its own process, and report per reader:

    python tests/fuzz/run.py [--minutes M] [--jobs J] [READER ...]     (`nox -s fuzz -- ...`)

Each reader runs tests/fuzz/harness.py (atheris, libFuzzer) for M minutes (default 0.25, the
short pass CI runs; the long pass is `--minutes 10`) on its corpus in .cache/fuzz/corpus/READER,
seeded from real files (tests/fuzz/seeds.py) and kept between runs. An input that crashes a
reader, hangs it past its timeout or grows it past the memory limit is saved as
tests/fuzz/regressions/READER/<sha1> (tests/test_fuzz_regressions.py replays them all) and the
reader is fuzzed again for the time left, up to --max-failures times. The table at the end
gives the seconds, executions, executions per second, coverage (libFuzzer's `cov:`, the
instrumented edges reached, and `ft:`, its finer features), the corpus size and the failures;
the exit status is 1 when any reader failed. A pass of a minute or more per reader (not CI's
short one) also writes the table to docs/fuzzing.md, the page the documentation links. On GitHub
Actions each failure is also an error annotation and the table goes to the job summary.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))

from fuzz.readers import READERS, REGRESSIONS  # noqa: E402
from fuzz.seeds import write_seeds  # noqa: E402
from ninfer_kits.log import Reporter  # noqa: E402

CACHE = ROOT / ".cache" / "fuzz"
STATUS = re.compile(r"^#(?P<runs>\d+)\s+\w+\s+cov: (?P<cov>\d+) ft: (?P<ft>\d+)", re.M)
FINAL = re.compile(r"^stat::(?P<key>\w+):\s+(?P<value>\d+)", re.M)
ARTIFACT = re.compile(r"^(?P<kind>crash|timeout|oom|leak|slow-unit)-[0-9a-f]{40}$")


@dataclass
class Outcome:
    reader: str
    seconds: float = 0.0
    executions: int = 0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    seeds: int = 0
    failures: list[str] = field(default_factory=list)  # "kind: path", one per saved input
    log: Path | None = None
    broken: str = ""  # the harness itself failed (no stats): why

    @property
    def rate(self) -> float:
        return self.executions / self.seconds if self.seconds else 0.0


def _save(reader: str, artifact: Path) -> Path:
    """Move a failing input to tests/fuzz/regressions/READER/<sha1 of its bytes>."""
    data = artifact.read_bytes()
    folder = REGRESSIONS / reader
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / hashlib.sha1(data).hexdigest()  # a name, as libFuzzer's
    saved.write_bytes(data)
    artifact.unlink()
    return saved


def _drop_from_corpus(corpus: Path, sha1: str) -> None:
    """Take a failing input out of the corpus (a seed, or an input that reached new code
    before a change made it fail), so that fuzzing goes on past it."""
    for path in corpus.iterdir():
        if path.is_file() and hashlib.sha1(path.read_bytes()).hexdigest() == sha1:
            path.unlink()


def fuzz(reader: str, seconds: float, max_failures: int) -> Outcome:
    outcome = Outcome(reader)
    corpus = CACHE / "corpus" / reader
    artifacts = CACHE / "artifacts" / reader
    logs = CACHE / "logs"
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    logs.mkdir(parents=True, exist_ok=True)
    outcome.seeds = write_seeds(reader, corpus)
    outcome.log = logs / f"{reader}.log"
    deadline = time.monotonic() + seconds
    attempt = 0
    outcome.log.write_bytes(b"")
    while True:
        left = deadline - time.monotonic()
        if attempt and left < 1:
            break
        attempt += 1
        started = time.monotonic()
        with outcome.log.open("ab") as log:  # written as it goes: `tail -f` it to watch
            offset = log.tell()
            done = subprocess.run(
                [sys.executable, str(HERE / "harness.py"), reader, "--seconds",
                 f"{max(1.0, left):.0f}", "--corpus", str(corpus), "--artifacts",
                 str(artifacts)],
                stdout=log, stderr=subprocess.STDOUT, check=False,
                timeout=max(1.0, left) + 600)
        outcome.seconds += time.monotonic() - started
        with outcome.log.open("rb") as log:
            log.seek(offset)
            output = log.read().decode("utf-8", "replace")
        statuses = list(STATUS.finditer(output))
        final = {m["key"]: int(m["value"]) for m in FINAL.finditer(output)}
        if statuses:
            outcome.cov = max(outcome.cov, int(statuses[-1]["cov"]))
            outcome.ft = max(outcome.ft, int(statuses[-1]["ft"]))
        outcome.executions += final.get(
            "number_of_executed_units", int(statuses[-1]["runs"]) if statuses else 0)
        found = sorted(path for path in artifacts.iterdir() if ARTIFACT.match(path.name))
        for artifact in found:
            kind = artifact.name.split("-")[0]
            saved = _save(reader, artifact)
            _drop_from_corpus(corpus, saved.name)  # else the next attempt starts on it
            failure = f"{kind}: {saved.relative_to(ROOT)}"
            if failure not in outcome.failures:
                outcome.failures.append(failure)
        if done.returncode == 0:
            break
        if not found:
            outcome.broken = (f"the harness exited {done.returncode} without a failing "
                              f"input: see {outcome.log}")
            break
        if len(outcome.failures) >= max_failures:
            break
    outcome.corpus = sum(1 for path in corpus.iterdir() if path.is_file())
    return outcome


HEADER = ("reader", "seconds", "executions", "exec/s", "cov", "ft", "corpus", "seeds",
          "failures")


def _rows(outcomes: list[Outcome]) -> list[tuple[str, ...]]:
    return [(o.reader, f"{o.seconds:.0f}", f"{o.executions}", f"{o.rate:.0f}", f"{o.cov}",
             f"{o.ft}", f"{o.corpus}", f"{o.seeds}",
             "BROKEN" if o.broken else f"{len(o.failures)}") for o in outcomes]


def markdown(outcomes: list[Outcome]) -> str:
    """The table for GitHub's job summary."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(outcomes)]
    return "## fuzzing (`nox -s fuzz`)\n\n" + "\n".join(lines) + "\n"


def table(outcomes: list[Outcome]) -> str:
    rows = [HEADER, *_rows(outcomes)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                       for i, (cell, width) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    return "\n".join([lines[0], "  ".join("-" * width for width in widths), *lines[1:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("readers", nargs="*", metavar="READER",
                        help=f"which readers (default all: {', '.join(READERS)})")
    parser.add_argument("--minutes", type=float, default=0.25, help="per reader (default 0.25)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="readers fuzzed at once (default 1; each is one process)")
    parser.add_argument("--max-failures", type=int, default=3,
                        help="failing inputs saved per reader before it stops (default 3)")
    args = parser.parse_args()
    unknown = [name for name in args.readers if name not in READERS]
    if unknown:
        parser.error(f"unknown reader(s) {', '.join(unknown)} (one of {', '.join(READERS)})")
    if args.minutes <= 0 or args.jobs < 1 or args.max_failures < 1:
        parser.error("--minutes, --jobs and --max-failures must be positive")
    names = args.readers or list(READERS)
    seconds = max(1.0, args.minutes * 60)
    print(f"fuzzing {len(names)} reader(s) for {seconds:.0f} s each, {args.jobs} at a time; "
          f"logs and corpora in {CACHE.relative_to(ROOT)}/", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(fuzz, name, seconds, args.max_failures) for name in names]
        outcomes = []
        for future in futures:
            outcome = future.result()
            outcomes.append(outcome)
            print(f"  {outcome.reader}: {outcome.executions} executions, cov {outcome.cov}, "
                  f"{len(outcome.failures)} failure(s)", flush=True)
    print()
    print(table(outcomes))
    if args.minutes >= 1:
        page = ROOT / "docs" / "fuzzing.md"
        page.write_text(f"# ninfer-kits fuzzing (`nox -s fuzz`)\n\n{time.strftime('%Y-%m-%d')}, "
                        f"{args.minutes:g} minutes a reader. How: [DEVELOPING.md]"
                        f"(../DEVELOPING.md#fuzzing).\n\n" + markdown(outcomes).split("\n\n", 1)[1],
                        encoding="utf-8")
    return 1 if report(outcomes, Reporter(sys.stdout)) else 0


def report(outcomes: list[Outcome], reporter: Reporter) -> bool:
    """Each broken harness and saved failing input, said (and annotated on GitHub); whether
    there was any."""
    failed = False
    for outcome in outcomes:
        if outcome.broken:
            failed = True
            reporter.info(f"\n{outcome.reader}: {outcome.broken}")
            reporter.error(f"fuzz {outcome.reader}: the harness failed: {outcome.broken}")
        for failure in outcome.failures:
            failed = True
            reporter.info(f"\n{outcome.reader}: {failure} (the traceback is in {outcome.log}; "
                          f"replay: pytest tests/test_fuzz_regressions.py)")
            reporter.error(f"fuzz {outcome.reader}: {failure}")
    reporter.summary(markdown(outcomes))
    return failed


if __name__ == "__main__":
    sys.exit(main())
