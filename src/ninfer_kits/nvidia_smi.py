"""nvidia-smi, asked one question with a limit: for each GPU, the fields named (`driver_version`,
`compute_cap`, `name`, …) in CSV. The one home of what the build (BUILDINFO's driver and GPU)
and `verify` (the host's GPUs, when libcuda and NVML said nothing) ask it: a stuck driver makes
nvidia-smi hang for minutes, so it runs as a probe (children.probe), killed when it is late."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ninfer_kits.children import ProbeTimeout, probe

PROGRAM: Final = "nvidia-smi"
TIMEOUT: Final = 10.0  # seconds


@dataclass(frozen=True)
class Answer:
    """What nvidia-smi printed, or why it printed nothing usable (`failure`, a sentence that
    names the program as it was given)."""

    text: str = ""  # its CSV, one line a GPU
    failure: str | None = None
    absent: bool = False  # not found on the PATH
    timed_out: bool = False


def query_args(fields: Sequence[str]) -> tuple[str, str]:
    return f"--query-gpu={','.join(fields)}", "--format=csv,noheader"


def query(fields: Sequence[str], *, program: str = PROGRAM,
          timeout: float = TIMEOUT) -> Answer:
    """Ask nvidia-smi for `fields` of every GPU."""
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
    """One line of the CSV cut into at most `count` stripped fields (the last field asked for
    takes the rest: a GPU's name, the only field that could hold a comma, goes last)."""
    return [field.strip() for field in line.split(",", count - 1)]


def shown(text: str) -> str:
    """Text from a driver, as it can be shown on one line."""
    return "".join(char if char.isprintable() else "?" for char in text)[:200]
