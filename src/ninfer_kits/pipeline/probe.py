"""Quick questions to outside tools (`nvcc --version`, `nvidia-smi`, `git status`), with a limit.

A probe answers in well under a second; one that does not (a driver stuck in D state makes
`nvidia-smi` hang for minutes) is killed with everything it started, and the caller decides
whether a missing answer stops the build (ProbeTimeout is an EnvironmentFailure) or is
recorded as unknown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from ninfer_kits.errors import EnvironmentFailure

PROBE_TIMEOUT: Final = 30.0  # seconds
KILL_WAIT: Final = 2.0  # seconds for a killed probe's pipes to close


class ProbeTimeout(EnvironmentFailure):
    """A tool did not answer a quick question in time."""


def probe(command: Sequence[str], *, timeout: float = PROBE_TIMEOUT, cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `command` with no input and return its exit status and output; ProbeTimeout when it
    has not finished after `timeout` seconds (it and its children are killed first)."""
    process = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors="replace", cwd=cwd,
                               env=None if env is None else dict(env), start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise ProbeTimeout(f"{' '.join(command)} did not answer in {timeout:g} s") from None
    except BaseException:
        _kill_group(process)
        raise
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    # Reap it and close the pipes, but not for long: a process stuck in the kernel (a hung
    # driver's) dies late, and one that left the group may hold the pipes open, and a Ctrl-C
    # or SIGTERM must still end the build.
    try:
        process.communicate(timeout=KILL_WAIT)
    except subprocess.TimeoutExpired:
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
