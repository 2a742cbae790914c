"""Locks between processes of this machine: an exclusive flock, which the kernel drops with the
descriptor, so that a lock never outlives its holder (SIGKILL included). A lock file names its
holder by PID only (a command line may carry a token, and messages reach CI logs), removed on
release: a PID left names a process killed outright."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

from ninfer_kits.errors import EnvironmentFailure

POLL: Final = 0.1  # seconds between tries while waiting a bounded time


def named(name: str, *, folder: str = "ninfer-kits") -> Path:
    """The lock file of `name` (any text), in this user's own temporary folder."""
    place = Path(tempfile.gettempdir()) / f"{folder}-{os.getuid()}"
    place.mkdir(mode=0o700, exist_ok=True)
    return place / f"{hashlib.sha256(name.encode()).hexdigest()[:16]}.lock"


@contextmanager
def held(path: Path, *, wait: float | None = 0.0,
         busy: Callable[[str], Exception] | None = None,
         waiting: Callable[[str], None] | None = None,
         name_holder: bool = False) -> Iterator[None]:
    """The lock on `path` for the block; after `wait` seconds (None: no limit) `busy(holder)`
    is raised, and `waiting(holder)` called once when waiting starts."""
    flags = os.O_RDONLY | os.O_DIRECTORY if path.is_dir() else os.O_RDWR | os.O_CREAT
    fd = os.open(path, flags | os.O_CLOEXEC, 0o644)
    try:
        _take(fd, path, wait, busy, waiting)
        if name_holder:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            if name_holder:
                with suppress(OSError):
                    os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _take(fd: int, path: Path, wait: float | None,
          busy: Callable[[str], Exception] | None,
          waiting: Callable[[str], None] | None) -> None:
    if wait is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + max(wait, 0.0)
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = _holder(fd)
                raise (busy(holder) if busy else EnvironmentFailure(
                    f"{path} is locked by another process ({holder})")) from None
            if waiting is not None and not told:
                waiting(_holder(fd))
                told = True
            time.sleep(POLL)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except IsADirectoryError:
        return "a process that cannot be named"
    if not text.isdigit():
        return "a process that has not written its PID yet"
    alive = Path(f"/proc/{text}").exists()
    return f"PID {text}" + ("" if alive else ", in another PID namespace or just ending")
