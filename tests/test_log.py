"""The progress reporter in each of its three modes: terminal, plain CI log, GitHub Actions."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ninfer_kits.log import Reporter, detect_mode


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_mode_follows_the_environment() -> None:
    assert detect_mode(FakeTerminal(), {}) == "tty"
    assert detect_mode(FakeTerminal(), {"CI": "true"}) == "plain"
    assert detect_mode(io.StringIO(), {}) == "plain"
    assert detect_mode(io.StringIO(), {"GITHUB_ACTIONS": "true", "CI": "true"}) == "github"


def test_github_gets_fold_groups_annotations_and_a_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = io.StringIO()
    reporter = Reporter(out, mode="github")
    with reporter.step("compile"):
        reporter.progress("compiling").update(3, 3)
    with pytest.raises(RuntimeError), reporter.step("pack"):
        raise RuntimeError("disk")
    reporter.warning("dirty tree")
    reporter.error("compile failed\nlast lines…")
    reporter.summary("| kit | sha256 |")
    lines = out.getvalue().splitlines()
    assert lines[0] == "::group::compile"
    assert "::endgroup::" in lines and lines.count("::group::pack") == 1
    assert any(line.startswith("✓ compile (") for line in lines)
    assert any(line.startswith("✕ pack (") for line in lines)
    assert "::warning::dirty tree" in lines and "::error::compile failed" in lines
    assert summary.read_text() == "| kit | sha256 |\n"


def test_github_annotations_escape_what_workflow_commands_read() -> None:
    """%, CR and LF in an annotation's text would be read as escapes and a line end."""
    out = io.StringIO()
    reporter = Reporter(out, mode="github")
    reporter.warning("ratio 100% over\ntarget")
    reporter.warning("carriage\rreturn")
    reporter.error("50%0A done\nthe rest in the log")  # an error annotates its first line
    assert out.getvalue().splitlines() == ["::warning::ratio 100%25 over%0Atarget",
                                           "::warning::carriage%0Dreturn",
                                           "::error::50%250A done"]


def test_terminal_gets_a_live_status_line() -> None:
    out = FakeTerminal()
    Reporter(out, mode="tty").progress("compiling example").update(7, 11)
    assert out.getvalue().startswith("\r\033[Kcompiling example 0:00 [7/11]")


def test_plain_logs_are_rate_limited_but_show_the_end() -> None:
    out = io.StringIO()
    progress = Reporter(out, mode="plain").progress("compiling")
    for step in range(1, 200):
        progress.update(step, 200)
    progress.update(200, 200)
    lines = out.getvalue().splitlines()
    assert lines[-1].endswith("[200/200]") and len(lines) <= 3
    assert "\r" not in out.getvalue()


def test_plain_logs_show_every_milestone() -> None:
    """An image build's Dockerfile steps: a quick one, then one that runs for minutes without a
    word; the log must say which step it is in, not the last one shown before the limit."""
    out = io.StringIO()
    progress = Reporter(out, mode="plain").progress("building image")
    for step in range(1, 18):
        progress.update(step, 40, f"RUN step {step}", milestone=True)
        progress.update(step, 40, "output of the step")
    lines = out.getvalue().splitlines()
    assert [line.rsplit(" ", 3)[-1] for line in lines if "RUN step" in line] == \
        [str(step) for step in range(1, 18)]
    assert lines[-1].endswith("[17/40] RUN step 17")
