"""One error family for the whole program; the CLI turns each into a message and an exit code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2


class NinferKitsError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code = EXIT_CHECK_FAILED


class BadInput(NinferKitsError):
    """The user gave us something we cannot use: a bad file, an unknown name, a wrong flag."""

    exit_code = EXIT_BAD_INPUT


class CheckFailed(NinferKitsError):
    """A check we run on real things (a build, a binary, a floor) did not pass."""

    exit_code = EXIT_CHECK_FAILED


class NotAnElf(BadInput):
    """The input is not an ELF file we can read: wrong magic, truncated, corrupt headers."""


@dataclass(frozen=True)
class Where:
    """Where in a configuration file something is wrong: file, table path, key and line."""

    file: Path
    table: str = ""
    key: str = ""
    line: int | None = None

    def __str__(self) -> str:
        place = str(self.file) if self.line is None else f"{self.file}:{self.line}"
        parts = [place]
        if self.table:
            parts.append(f"[{self.table}]")
        if self.key:
            parts.append(f"key '{self.key}'")
        return ": ".join(parts) if len(parts) == 1 else f"{parts[0]}: " + " ".join(parts[1:])


class ConfigError(BadInput):
    """A configuration file is wrong at a known place."""

    def __init__(self, where: Where, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.detail = message
