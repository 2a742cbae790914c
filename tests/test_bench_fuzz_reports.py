"""What the benchmark and fuzzing runners tell GitHub Actions: a fold group per benchmark,
annotations for missed targets, crashes and failing inputs, and their tables in the job
summary; elsewhere, plain lines."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fuzz.run import Outcome, report
from ninfer_kits.log import Reporter

BENCH_RUNNER = Path(__file__).resolve().parent / "benchmarks" / "run.py"


def _bench_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_runner_under_test", BENCH_RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The runner with two benchmarks of our own (one misses its target, one crashes) and its
    outputs in tmp_path."""
    module = _bench_runner()
    result_type = sys.modules["common"].Result

    def slow(ctx: object) -> list[object]:
        return [result_type("slow", "twice the baseline", "true", ours=2.0, baseline=1.0,
                            target=1.5),
                result_type("slow", "half the baseline", "true", ours=0.5, baseline=1.0,
                            target=1.5)]

    def broken(ctx: object) -> list[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(module, "discover", lambda: [
        module.Benchmark("slow", "misses one target", slow),
        module.Benchmark("broken", "crashes", broken)])
    monkeypatch.setattr(module, "RESULTS_FILE", tmp_path / "results.json")
    monkeypatch.setattr(module, "MARKDOWN_FILE", tmp_path / "bench.md")
    return module


def test_bench_on_github_folds_annotates_and_summarizes(
        runner: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert runner.main([]) == 1  # a crashed benchmark fails the run
    lines = capsys.readouterr().out.splitlines()
    assert "::group::slow: misses one target" in lines
    assert "::group::broken: crashes" in lines and lines.count("::endgroup::") == 2
    assert any(line.startswith("✕ broken: crashes (") for line in lines)
    warnings = [line for line in lines if line.startswith("::warning::")]
    assert warnings == ["::warning::benchmark slow: twice the baseline: 2.000× the baseline "
                        "(true), over the target of 1.5×"]
    assert "::error::benchmark broken crashed: RuntimeError: boom" in lines
    assert "::error::benchmark broken: (benchmark crashed): RuntimeError: boom" in lines
    text = summary.read_text(encoding="utf-8")
    assert text == (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert "| slow | twice the baseline |" in text and "| MISS |" in text
    assert "| slow | half the baseline |" in text and "| pass |" in text


def test_bench_elsewhere_prints_plain_lines_and_no_summary(
        runner: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    assert runner.main(["slow"]) == 0  # a miss is shown, not failed, unless --strict
    out = capsys.readouterr().out
    assert "==> slow: misses one target" in out and "::" not in out
    assert "warning: benchmark slow: twice the baseline: 2.000×" in out
    assert not (tmp_path / "summary.md").exists()
    assert runner.main(["slow", "--strict"]) == 1


def test_fuzz_failures_are_annotated_and_the_table_summarized(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    clean = Outcome("elf", seconds=15.0, executions=90_000, cov=600, ft=2_000, corpus=900)
    failing = Outcome("tar", seconds=15.0, executions=40_000, cov=800, ft=2_900, corpus=1_700,
                      failures=["crash: tests/fuzz/regressions/tar/0123abcd"],
                      log=tmp_path / "tar.log")
    broken = Outcome("ledger", broken="atheris is not installed")
    lines: list[str] = []

    class Lines:
        def write(self, text: str) -> None:
            lines.extend(text.splitlines())

        def flush(self) -> None:
            pass

    assert report([clean, failing, broken], Reporter(Lines(), mode="github"))  # type: ignore[arg-type]
    assert "::error::fuzz tar: crash: tests/fuzz/regressions/tar/0123abcd" in lines
    assert "::error::fuzz ledger: the harness failed: atheris is not installed" in lines
    text = summary.read_text(encoding="utf-8")
    assert "| elf | 15 | 90000 | 6000 | 600 | 2000 | 900 | 0 | 0 |" in text
    assert "| tar | 15 | 40000 | 2667 | 800 | 2900 | 1700 | 0 | 1 |" in text
    assert "| ledger |" in text and "| BROKEN |" in text
    assert not report([clean], Reporter(Lines(), mode="plain"))  # type: ignore[arg-type]


def test_a_run_of_some_benchmarks_keeps_the_other_rows_and_the_notes(
        runner: ModuleType, tmp_path: Path) -> None:
    page = tmp_path / "bench.md"
    assert runner.main(["slow", "broken"]) == 1
    first = page.read_text(encoding="utf-8")
    assert "- **slow**: " in first and "- **broken**: " in first
    page.write_text(first + "\n## Notes\n\nWritten by hand | kept.\n", encoding="utf-8")
    broken_rows = [line for line in first.splitlines() if line.startswith("| broken |")]
    assert broken_rows

    assert runner.main(["slow"]) == 0
    second = page.read_text(encoding="utf-8")
    assert [line for line in second.splitlines() if line.startswith("| broken |")] == broken_rows
    assert second.count("| slow | twice the baseline |") == 1
    assert second.index("| slow |") < second.index("| broken |")  # discovery's order
    assert second.endswith("## Notes\n\nWritten by hand | kept.\n")
    assert runner.read_page(second) == runner.read_page(runner.markdown(
        runner.read_page(second), ["slow", "broken"]))


def test_fetch_link_shows_the_newest_run_recorded_on_the_gpu_host() -> None:
    """The rows of the 16-core run (scripts/fetch-link-check.sh), beside this machine's: read
    from the newest file in tests/benchmarks/recorded/, with the same numbers as its table."""
    _bench_runner()  # puts tests/benchmarks on sys.path
    import bench_fetch_link

    rows = {row.benchmark: row for row in bench_fetch_link._recorded_rows()}
    newest = sorted(bench_fetch_link.RECORDED.glob("fetch-link-check-*.txt"))[-1]
    text = newest.read_text(encoding="utf-8")
    cores = text.split(" cores", 1)[0].rsplit(" ", 1)[1]
    assert set(rows) == {f"fetch-link/{cores}-cores", f"fetch-link/{cores}-cores-transfer",
                         f"fetch-link/{cores}-cores-behind", f"fetch-link/{cores}-cores-fixed"}
    for row in rows.values():
        assert "200 MB/s" in row.measured and row.target is None and newest.name in row.note
        shown = f"| {row.ratio:.3f}× |"
        assert shown in next(line for line in text.splitlines()
                             if line.startswith("| fetch-link") and row.measured in line)
