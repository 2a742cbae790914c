"""One publish of a tag at a time on this machine: a flock under the cache dir, naming its
holder to whoever waits."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ninfer_kits.errors import EnvironmentFailure
from ninfer_kits.log import Reporter

LOCK_POLL = 0.1


class PublishBusy(EnvironmentFailure):
    """Another publish of the same tag runs on this machine."""


@contextmanager
def held_lock(lock_dir: Path, tag: str, wait: float, reporter: Reporter) -> Iterator[None]:
    """One publish of `tag` at a time on this machine: an exclusive flock on
    <lock_dir>/<tag>.lock (with the holder's PID in it), released however the holder ends.
    A second publish waits up to `wait` seconds, then stops naming the holder."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{tag}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + max(wait, 0.0)
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise PublishBusy(
                        f"another publish of {tag} is running ({_holder(fd)}; lock {path}); "
                        f"wait for it to finish, or give --wait SECONDS") from None
                if not told:
                    reporter.info(f"waiting for another publish of {tag} ({_holder(fd)}) to "
                                  f"finish, up to {wait:.0f} s")
                    told = True
                time.sleep(LOCK_POLL)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    return f"PID {text}" if text.isdigit() else "a process that has not written its PID yet"
