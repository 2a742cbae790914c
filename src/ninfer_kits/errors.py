"""One error family for the whole program; the CLI turns each into a message and an exit code.

Exit codes (README.md and `ninfer-kits --help` show the same table, from EXIT_CODES):
0 done; 1 a check failed or was refused: a kit (or something built on the way to one, or a
release's checksum or signature) is wrong, do not trust it; 2 the user's input is wrong: an
argument, the matrix, a file given to us; 3 the environment or a service failed: a tool
missing, too old or hanging, no Docker engine or an engine error, the network, a full disk or an
output folder that cannot be written (ninfer_kits.outputs), a kit work folder held by another
build; 4 the kit is sound, and this machine (or the root or
image checked) does not meet its floor: it will not run there (verify's and fetch's verdict,
which a script must tell from 1); 130 interrupted (Ctrl-C, SIGINT); 143 terminated (SIGTERM:
a cancelled CI job, `timeout`), which every command handles as Ctrl-C.
"""

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

# (code, meaning), in the order `--help` and README.md list them.
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


# An OSError with one of these, about a named path, says the path is wrong: not there, not a
# file or a folder, not ours to read. Any other (ENOSPC, EIO, ENOMEM, ECONNREFUSED …) is the
# environment's.
_PATH_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP,
                          errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.ENXIO})


def exit_code_for(error: OSError) -> int:
    """The exit code of an OSError that no code turned into a message of its own: bad input
    when it is about a path (missing, not a folder, refused), else the environment's."""
    if error.filename is not None and error.errno in _PATH_ERRNOS:
        return EXIT_BAD_INPUT
    return EXIT_ENVIRONMENT


def exit_codes_help() -> str:
    """The exit codes as `--help` shows them."""
    import textwrap

    rows = (textwrap.fill(meaning, width=78, initial_indent=f"  {code:<4} ",
                          subsequent_indent=" " * 7) for code, meaning in EXIT_CODES)
    return "exit status:\n" + "\n".join(rows)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (a cancelled CI job, `timeout`): a KeyboardInterrupt, so that every
    cleanup Ctrl-C runs runs for it too; only the exit status and the message differ."""

    exit_code = EXIT_TERMINATED


class NinferKitsError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code = EXIT_CHECK_FAILED


class BadInput(NinferKitsError):
    """The user gave us something we cannot use: a bad file, an unknown name, a wrong flag."""

    exit_code = EXIT_BAD_INPUT


class CheckFailed(NinferKitsError):
    """A check we run on real things (a build, a binary, a floor) did not pass."""

    exit_code = EXIT_CHECK_FAILED


class WillNotRunHere(NinferKitsError):
    """The kit is sound, and the machine judged (this host, a root, an image) does not meet its
    floor: not a refusal (1), a verdict on the machine."""

    exit_code = EXIT_WILL_NOT_RUN


class EnvironmentFailure(NinferKitsError):
    """The machine or a service failed us, not the user's input and not the kit: a tool that is
    missing, too old or does not answer, the Docker engine, the network, a full disk."""

    exit_code = EXIT_ENVIRONMENT


class NotAnElf(BadInput):
    """The input is not an ELF file we can read: wrong magic, truncated, corrupt headers."""


class Where(NamedTuple):
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


T = TypeVar("T")


def need(value: T | None, name: str) -> T:
    """A result an earlier stage of a job (build, publish) produced; None here means the job's
    stage list is out of order: a bug, not bad input."""
    if value is None:
        raise RuntimeError(f"stage order: {name} is not available yet")
    return value
