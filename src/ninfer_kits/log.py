"""The one place that talks to whoever watches a long step: a terminal gets a live status line,
plain CI logs rate-limited lines, GitHub Actions also fold groups, annotations and a job
summary. Nothing else in the package writes progress."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from ninfer_kits.config import settings

PLAIN_INTERVAL = 15.0  # seconds between progress lines when nobody watches a terminal


def detect_mode(stream: TextIO, environ: dict[str, str] | None = None) -> str:
    if settings.read(settings.GITHUB_ACTIONS, environ) == "true":
        return "github"
    if settings.read(settings.CI, environ) or not stream.isatty():
        return "plain"
    return "tty"


def _command_data(message: str) -> str:
    """A message as a workflow command's data: %, CR and LF escaped as GitHub's toolkit does."""
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(value: str) -> str:
    """A value as a workflow command's property: `:` and `,` end one, so they are escaped too."""
    return _command_data(value).replace(":", "%3A").replace(",", "%2C")


class Reporter:
    def __init__(self, stream: TextIO | None = None, mode: str | None = None) -> None:
        self.stream = stream or sys.stderr
        self.mode = mode or detect_mode(self.stream)
        self._status_shown = False

    def info(self, message: str) -> None:
        self._clear_status()
        print(message, file=self.stream, flush=True)

    def warning(self, message: str) -> None:
        self.info(f"::warning::{_command_data(message)}" if self.mode == "github"
                  else f"warning: {message}")

    def error(self, message: str, *, title: str | None = None) -> None:
        """An annotation on GitHub Actions; elsewhere the CLI's own error line is enough."""
        if self.mode == "github":
            first = message.splitlines()[0] if message else ""
            head = f"::error title={_property(title)}::" if title else "::error::"
            self.info(f"{head}{_command_data(first)}")

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """One pipeline stage: a fold group on GitHub, ✓/✕ with its duration everywhere."""
        started = time.monotonic()
        self.info(f"::group::{name}" if self.mode == "github" else f"==> {name}")
        ok = False
        try:
            yield
            ok = True
        finally:
            if self.mode == "github":
                self.info("::endgroup::")
            self.info(f"{'✓' if ok else '✕'} {name} ({time.monotonic() - started:.1f} s)")

    def progress(self, label: str) -> Progress:
        return Progress(self, label)

    def summary(self, markdown: str) -> None:
        path = settings.read(settings.GITHUB_STEP_SUMMARY)
        if self.mode == "github" and path:
            with open(path, "a", encoding="utf-8") as summary:
                summary.write(markdown.rstrip() + "\n")

    def _status(self, text: str) -> None:
        width = 120
        print(f"\r\033[K{text[:width]}", end="", file=self.stream, flush=True)
        self._status_shown = True

    def _clear_status(self) -> None:
        if self._status_shown:
            print("\r\033[K", end="", file=self.stream, flush=True)
            self._status_shown = False


class Progress:
    """A long step's progress: a live line on a terminal, a line every so often elsewhere."""

    def __init__(self, reporter: Reporter, label: str) -> None:
        self.reporter = reporter
        self.label = label
        self.started = time.monotonic()
        self._last_plain = 0.0

    def update(self, done: int | None = None, total: int | None = None, detail: str = "", *,
               milestone: bool = False) -> None:
        """Plain logs: a line every PLAIN_INTERVAL at most, always for a `milestone` (a stage that
        may run for minutes without another update)."""
        elapsed = time.monotonic() - self.started
        count = f" [{done}/{total}]" if done is not None and total else ""
        text = f"{self.label} {_clock(elapsed)}{count} {detail}".rstrip()
        if self.reporter.mode == "tty":
            self.reporter._status(text)
        elif milestone or elapsed - self._last_plain >= PLAIN_INTERVAL \
                or (done is not None and done == total):
            self._last_plain = elapsed
            self.reporter.info(text)

    def bytes(self, done: int, total: int) -> None:
        percent = f"{100 * done // total}%" if total else ""
        self.update(detail=f"{done / 1e6:.0f}/{total / 1e6:.0f} MB {percent}")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:d}:{secs:02d}"
