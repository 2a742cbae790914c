"""nvidia-smi, asked one question with a limit (a stuck driver hangs it for minutes): the one home
of what the build and `verify` ask it."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ninfer_kits.host.children import ProbeTimeout, probe

PROGRAM: Final = "nvidia-smi"
TIMEOUT: Final = 10.0  # seconds


@dataclass(frozen=True)
class Answer:
    text: str = ""  # its CSV, one line a GPU
    failure: str | None = None  # why nothing usable, a sentence naming the program
    absent: bool = False  # not found on the PATH
    timed_out: bool = False


def query_args(fields: Sequence[str]) -> tuple[str, str]:
    return f"--query-gpu={','.join(fields)}", "--format=csv,noheader"


def query(fields: Sequence[str], *, program: str = PROGRAM,
          timeout: float = TIMEOUT) -> Answer:
    found = shutil.which(program)
    if found is None:
        return Answer(failure=f"{program} is not on the PATH", absent=True)
    try:
        done = probe([found, *query_args(fields)], timeout=timeout)
    except ProbeTimeout:
        return Answer(failure=f"{program} did not answer within {timeout:g} s (killed)",
                      timed_out=True)
    except OSError as error:
        return Answer(failure=f"{program} could not be run ({error.strerror or error})")
    if done.returncode != 0:
        said = (done.stdout.strip() or done.stderr.strip() or "no message").splitlines()[0]
        return Answer(failure=f"{program} failed with status {done.returncode} ({shown(said)})")
    return Answer(text=done.stdout[:1 << 20])


def fields(line: str, count: int) -> list[str]:
    """At most `count` fields: the last takes the rest (a GPU's name may hold a comma)."""
    return [field.strip() for field in line.split(",", count - 1)]


def shown(text: str) -> str:
    return "".join(char if char.isprintable() else "?" for char in text)[:200]
