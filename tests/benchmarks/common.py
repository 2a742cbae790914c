"""Shared pieces of the benchmarks: the cache folder, whole-process timing, results, progress.

Benchmarks are scripts, not tests: `python tests/benchmarks/run.py [NAMES...]` (or `nox -s bench`)
imports every `bench_*.py` beside this file and calls its `run(ctx)`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache" / "bench"


@dataclass(frozen=True)
class Stats:
    """Wall-clock seconds of one command over several runs (after one warm-up run)."""

    median: float
    min: float
    runs: int


@dataclass(frozen=True)
class Result:
    """One row of the final table: our time against a named baseline, with an optional target.

    `target` is the highest acceptable ratio ours/baseline (the lowest, for a throughput: a unit
    per second such as "MB/s"); None makes the row informational.
    `error` marks a row that could not be measured (or measured something wrong).
    """

    benchmark: str
    measured: str
    baseline_name: str
    ours: float | None = None
    baseline: float | None = None
    target: float | None = None
    error: str | None = None
    note: str = ""
    unit: str = "s"  # "s" for times (shown as ms or s); anything else is printed as is

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.baseline is None or self.baseline <= 0:
            return None
        return self.ours / self.baseline

    @property
    def throughput(self) -> bool:
        return self.unit.endswith("/s")

    @property
    def target_text(self) -> str:
        sign = ">=" if self.throughput else "<="
        return "-" if self.target is None else f"{sign} {self.target:g}x"

    @property
    def status(self) -> str:
        if self.error is not None:
            return "ERROR"
        if self.target is None:
            return "info"
        ratio = self.ratio
        if ratio is None:
            return "MISS"
        return "pass" if (ratio >= self.target if self.throughput else ratio <= self.target) \
            else "MISS"

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "measured": self.measured,
            "ours_s": self.ours,
            "baseline_name": self.baseline_name,
            "baseline_s": self.baseline,
            "ratio": self.ratio,
            "target": self.target,
            "status": self.status,
            "error": self.error,
            "note": self.note,
        }


@dataclass(frozen=True)
class Context:
    """What a benchmark gets from the runner."""

    cache: Path
    repeat: int


def progress(message: str) -> None:
    """One progress line, shown at once even when stdout is a pipe."""
    print(f"  .. {message}", flush=True)


def _run_once(cmd: Sequence[str]) -> float:
    start = time.perf_counter()
    completed = subprocess.run(
        list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, check=False,
    )
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        raise subprocess.CalledProcessError(completed.returncode, list(cmd))
    return elapsed


def timed(cmd: list[str], repeat: int) -> Stats:
    """Time a whole process: one warm-up run, then `repeat` runs; a failing run raises."""
    _run_once(cmd)
    samples = [_run_once(cmd) for _ in range(max(1, repeat))]
    return Stats(median=statistics.median(samples), min=min(samples), runs=len(samples))


def timed_together(cmds: list[list[str]], repeat: int) -> list[Stats]:
    """Time several commands in alternation (one warm-up each, then `repeat` rounds of all of
    them), so that a burst of load on the machine hits every command alike."""
    for cmd in cmds:
        _run_once(cmd)
    samples: list[list[float]] = [[] for _ in cmds]
    for _ in range(max(1, repeat)):
        for cmd, times in zip(cmds, samples, strict=True):
            times.append(_run_once(cmd))
    return [Stats(statistics.median(t), min(t), len(t)) for t in samples]


def run_checked(cmd: Sequence[str], cwd: Path | None = None) -> str:
    """Run a build or probe command; its stdout, or an error that carries its stderr."""
    completed = subprocess.run(
        list(cmd), cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        check=False,
    )
    if completed.returncode != 0:
        tail = completed.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{Path(cmd[0]).name} exited {completed.returncode}: {' / '.join(tail)}")
    return completed.stdout


def write_json_atomic(path: Path, data: object) -> None:
    """Write JSON next to its final place, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def seconds(value: float | None, unit: str = "s") -> str:
    """A value for the table: times in milliseconds below ten seconds, else seconds."""
    if value is None:
        return "-"
    if unit != "s":
        return f"{value:.1f} {unit}" if unit.endswith("/s") else f"{value:.2f} {unit}"
    return f"{value * 1000:.1f} ms" if value < 10 else f"{value:.2f} s"
