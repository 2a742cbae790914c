"""One error family for the whole program; the CLI turns each into a message and an exit code
(EXIT_CODES: README.md, "Exit status", and `--help` show the same table)."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, NamedTuple, TypeVar

if TYPE_CHECKING:  # every command imports this module: it loads no more than it must
    from pathlib import Path

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_WILL_NOT_RUN = 4
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process that SIGTERM ended

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "done"),
    (EXIT_CHECK_FAILED, "a check failed or refused: the kit (or a compile, arch, smoke, checksum "
                        "or signature check on the way to it) is wrong; do not trust it"),
    (EXIT_BAD_INPUT, "bad input: an argument, the matrix, or a file given to ninfer-kits"),
    (EXIT_ENVIRONMENT, "the environment or a service failed: a tool missing, too old or not "
                       "answering, no Docker engine or an engine error, the network, a full "
                       "disk or an output folder that cannot be written, a work folder held by "
                       "another build"),
    (EXIT_WILL_NOT_RUN, "the kit is sound, and this machine (or the root or image checked) does "
                        "not meet its floor: it will not run there (verify, fetch)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_TERMINATED, "terminated (SIGTERM: a cancelled CI job, `timeout`), handled as Ctrl-C"),
)


# An OSError with one of these, about a named path, says the path is wrong; any other (ENOSPC,
# EIO, ECONNREFUSED …) is the environment's.
_PATH_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP,
                          errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.ENXIO})


def exit_code_for(error: OSError) -> int:
    """The exit code of an OSError no code put in words: bad input when it is about a path."""
    if error.filename is not None and error.errno in _PATH_ERRNOS:
        return EXIT_BAD_INPUT
    return EXIT_ENVIRONMENT


def exit_codes_help() -> str:
    import textwrap

    rows = (textwrap.fill(meaning, width=78, initial_indent=f"  {code:<4} ",
                          subsequent_indent=" " * 7) for code, meaning in EXIT_CODES)
    return "exit status:\n" + "\n".join(rows)


class Terminated(KeyboardInterrupt):
    """SIGTERM: a KeyboardInterrupt, so that every cleanup Ctrl-C runs runs for it too."""

    exit_code = EXIT_TERMINATED


class NinferKitsError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code = EXIT_CHECK_FAILED


class BadInput(NinferKitsError):
    """The user's input cannot be used: a bad file, an unknown name, a wrong flag."""

    exit_code = EXIT_BAD_INPUT


class CheckFailed(NinferKitsError):
    """A check of real things (a build, a binary, a floor) did not pass."""

    exit_code = EXIT_CHECK_FAILED


class WillNotRunHere(NinferKitsError):
    """The kit is sound and the machine does not meet its floor: a verdict, not a refusal (1)."""

    exit_code = EXIT_WILL_NOT_RUN


class EnvironmentFailure(NinferKitsError):
    """The machine or a service failed, not the user's input and not the kit."""

    exit_code = EXIT_ENVIRONMENT


class NotAnElf(BadInput):
    """The input is not an ELF file we can read: wrong magic, truncated, corrupt headers."""


class Where(NamedTuple):
    """Where in a configuration file something is wrong."""

    file: Path | str  # a str where the file has no path of its own (an index entry's ledger)
    table: str = ""
    key: str = ""
    line: int | None = None

    def __str__(self) -> str:
        place = str(self.file) if self.line is None else f"{self.file}:{self.line}"
        rest = " ".join(part for part in (self.table and f"[{self.table}]",
                                          self.key and f"key '{self.key}'") if part)
        return f"{place}: {rest}" if rest else place


class ConfigError(BadInput):
    """A configuration file is wrong at a known place."""

    def __init__(self, where: Where, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.detail = message


T = TypeVar("T")


def need(value: T | None, name: str) -> T:
    """A result an earlier stage produced; None means the stage list is out of order (a bug)."""
    if value is None:
        raise RuntimeError(f"stage order: {name} is not available yet")
    return value
