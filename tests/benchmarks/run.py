"""Run the benchmarks beside this file and print one table: ours, baseline, ratio, target.

    python tests/benchmarks/run.py [NAMES...] [--repeat N] [--strict] [--list]

Each `bench_*.py` module exposes NAME, DESCRIPTION and run(ctx) -> list[Result]. A missed
target is printed, not raised: the exit status is 0 unless a benchmark crashed (or, with
--strict, missed a target or reported an error). The table is also written, atomically, to
.cache/bench/results.json, and as Markdown (what was measured, our time, the baseline command
and its time, the ratio, the target; under it, where each benchmark last ran: the machine's
cores and load) to docs/benchmarks.md, the page the documentation links. A run of some
benchmarks replaces their rows only: the others' rows and run lines, and the page's "## Notes"
section, are kept as they were. On GitHub Actions each benchmark is a
fold group, a missed target a warning annotation (a crash an error one) and the Markdown table
goes to the job summary.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # so that bench modules can `import common` however we are run
    sys.path.insert(0, str(HERE))

from common import CACHE_DIR, Context, Result, seconds, write_json_atomic  # noqa: E402

from ninfer_kits.log import Reporter  # noqa: E402

RESULTS_FILE = CACHE_DIR / "results.json"
MARKDOWN_FILE = HERE.parents[1] / "docs" / "benchmarks.md"
COLUMNS = ("benchmark", "measured", "ours", "baseline", "ratio", "target", "status")


@dataclass(frozen=True)
class Benchmark:
    name: str
    description: str
    run: Callable[[Context], list[Result]]


def _import(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench.{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _broken(path: Path, error: Exception) -> Benchmark:
    """A module that fails to import still gets a row (and makes the run exit 1)."""

    def run(ctx: Context) -> list[Result]:
        raise RuntimeError(f"cannot import {path.name}") from error

    return Benchmark(path.stem.removeprefix("bench_"), f"(import of {path.name} failed)", run)


def discover() -> list[Benchmark]:
    found = []
    for path in sorted(HERE.glob("bench_*.py")):
        try:
            module = _import(path)
        except Exception as error:
            found.append(_broken(path, error))
            continue
        found.append(Benchmark(module.NAME, module.DESCRIPTION, module.run))
    return found


def _select(available: list[Benchmark], names: Sequence[str]) -> list[Benchmark]:
    if not names:
        return available
    known = {bench.name: bench for bench in available}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[name] for name in names]


def _run_one(bench: Benchmark, ctx: Context, reporter: Reporter) -> tuple[list[Result], bool]:
    try:
        with reporter.step(f"{bench.name}: {bench.description}"):
            results = bench.run(ctx)
    except Exception as error:
        traceback.print_exc()
        message = f"{type(error).__name__}: {error}"
        reporter.error(f"benchmark {bench.name} crashed: {message}")
        return [Result(bench.name, "(benchmark crashed)", "-", error=message)], True
    return results, False


def annotate(results: list[Result], reporter: Reporter) -> None:
    """A missed target as a warning, a row that could not be measured as an error."""
    for result in results:
        ratio = result.ratio
        if result.status == "MISS" and ratio is not None and result.target is not None:
            reporter.warning(f"benchmark {result.benchmark}: {result.measured}: "
                             f"{ratio:.3f}× the baseline ({result.baseline_name}), "
                             f"{'under' if result.throughput else 'over'} the target of "
                             f"{result.target:g}×")
        elif result.status == "ERROR":
            reporter.error(f"benchmark {result.benchmark}: {result.measured}: {result.error}")


def _cells(result: Result) -> tuple[str, ...]:
    ratio = result.ratio
    baseline = f"{seconds(result.baseline, result.unit)} ({result.baseline_name})"
    status = result.status if result.error is None else f"ERROR: {result.error}"
    if result.note:
        status = f"{status} [{result.note}]"
    return (
        result.benchmark, result.measured, seconds(result.ours, result.unit), baseline,
        "-" if ratio is None else f"{ratio:.3f}x",
        result.target_text,
        status,
    )


def print_table(results: list[Result]) -> None:
    rows = [COLUMNS, *(_cells(result) for result in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    print()
    for index, row in enumerate(rows):
        head = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1]))
        print(f"{head}  {row[-1]}")
        if index == 0:
            print("-" * (sum(widths) + 2 * len(widths) + len(COLUMNS[-1])))
    sys.stdout.flush()


def machine_header(repeat: int) -> str:
    """Where the numbers come from: they mean little without the cores and the load."""
    load = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo()
                  if line.startswith("model name")), platform.processor() or "unknown CPU")
    return (f"Machine: {os.cpu_count()} cores ({model}), load average {load} (1/5/15 min) at "
            f"the end; {platform.platform()}; Python {sys.version.split()[0]}; "
            f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {repeat} timed runs per command.")


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []


TITLE = "# ninfer-kits benchmarks (`nox -s bench`)"
TABLE_HEAD = ("| benchmark | what was measured | ours | baseline | baseline's time | ratio | "
              "target | status |")
RUNS_HEADING = "## Where each benchmark ran"
NOTES_HEADING = "## Notes"


@dataclass(frozen=True)
class Page:
    """docs/benchmarks.md as run.py writes it: table rows and run lines by benchmark, then the
    notes, which people write and run.py keeps."""

    rows: dict[str, list[str]]
    runs: dict[str, str]
    notes: str


def _row(result: Result) -> str:
    ratio = result.ratio
    status = result.status if result.error is None else f"ERROR: {result.error}"
    if result.note:
        status = f"{status} ({result.note})"
    cells = (result.benchmark, result.measured, seconds(result.ours, result.unit),
             f"`{result.baseline_name}`", seconds(result.baseline, result.unit),
             "-" if ratio is None else f"{ratio:.3f}×",
             result.target_text, status)
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _benchmark_of(row: str) -> str:
    """The benchmark a table row belongs to: its first cell up to a '/' (fetch-link/transfer)."""
    return row.removeprefix("|").split("|", 1)[0].strip().split("/", 1)[0]


def read_page(text: str) -> Page:
    """The rows, run lines and notes of a page run.py wrote (an empty page for anything else)."""
    rows: dict[str, list[str]] = {}
    runs: dict[str, str] = {}
    body, _, notes = text.partition(f"\n{NOTES_HEADING}\n")
    for line in body.splitlines():
        if line.startswith("| ") and line != TABLE_HEAD:
            rows.setdefault(_benchmark_of(line), []).append(line)
        elif line.startswith("- **") and "**: " in line:
            name, run_line = line.removeprefix("- **").split("**: ", 1)
            runs[name] = run_line
    return Page(rows, runs, notes.strip("\n") if notes else "")


def merge(page: Page, results: list[Result], ran: Sequence[str], repeat: int) -> Page:
    """`page` with the rows and run lines of the benchmarks in `ran` replaced by `results`."""
    rows = {name: lines for name, lines in page.rows.items() if name not in ran}
    runs = {name: line for name, line in page.runs.items() if name not in ran}
    header = machine_header(repeat).removeprefix("Machine: ")
    for name in ran:
        rows[name] = [_row(result) for result in results
                      if result.benchmark.split("/", 1)[0] == name]
        runs[name] = header
    return Page(rows, runs, page.notes)


def markdown(page: Page, order: Sequence[str]) -> str:
    """The page; benchmarks in `order` (discovery's), any others after them."""
    names = [name for name in order if name in page.rows]
    names += sorted(set(page.rows) - set(names))
    lines = [TITLE, "", "What the rows measure and why: "
             "[DEVELOPING.md](../DEVELOPING.md#benchmarks).", "", TABLE_HEAD,
             "|---|---|---|---|---|---|---|---|"]
    lines += [row for name in names for row in page.rows[name]]
    lines += ["", RUNS_HEADING, ""]
    lines += [f"- **{name}**: {page.runs[name]}" for name in names if name in page.runs]
    if page.notes:
        lines += ["", NOTES_HEADING, "", page.notes]
    return "\n".join(lines) + "\n"


def _text_or_empty(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def write_markdown(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _report(results: list[Result], repeat: int) -> dict[str, object]:
    return {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "machine": platform.platform(),
        "repeat": repeat,
        "results": [result.as_dict() for result in results],
    }


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per command (default 7)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on a missed target")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    available = discover()
    if args.list:
        for bench in available:
            print(f"{bench.name:12}  {bench.description}")
        return 0
    ctx = Context(cache=CACHE_DIR, repeat=args.repeat)
    reporter = Reporter(sys.stdout)  # the benchmarks' own progress lines go there too
    results: list[Result] = []
    crashed = False
    selected = _select(available, args.names)
    for bench in selected:
        rows, failed = _run_one(bench, ctx, reporter)
        results.extend(rows)
        crashed = crashed or failed
    print_table(results)
    write_json_atomic(RESULTS_FILE, _report(results, args.repeat))
    ran = [bench.name for bench in selected]
    page = merge(read_page(_text_or_empty(MARKDOWN_FILE)), results, ran, args.repeat)
    write_markdown(MARKDOWN_FILE, markdown(page, [bench.name for bench in available]))
    report = markdown(merge(Page({}, {}, ""), results, ran, args.repeat), ran)
    print()
    print(report)
    print(f"results written to {RESULTS_FILE} and {MARKDOWN_FILE}")
    annotate(results, reporter)
    reporter.summary(report)
    missed = any(result.status in ("MISS", "ERROR") for result in results)
    return 1 if crashed or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
