"""A kit's work folder (<work-dir>/<kit>/: source, build tree, log), held by one build at a time.

Two builds of the same kit with the same work folder would empty and fill one build tree at
once, and fail with messages that point nowhere near the cause. A build holds an exclusive
flock on <work-dir>/<kit>.lock for as long as it runs, with its PID in the file; a second build
of that kit finds the lock taken and stops at once (WorkFolderBusy, exit status 3), naming the
process that holds it. The kernel drops the lock when the holder exits, however it exits; a
build that ends (also interrupted: its children are ended first, children.py) empties the
file before it lets go, so a PID found in a free lock file names a build that was killed outright.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ninfer_kits.errors import EnvironmentFailure


class WorkFolderBusy(EnvironmentFailure):
    """Another process builds the same kit in the same work folder."""


def lock_path(work_dir: Path, kit: str) -> Path:
    return work_dir / f"{kit}.lock"


@contextmanager
def held_workspace(work_dir: Path, kit: str) -> Iterator[Path]:
    """The kit's work folder, emptied, for this process alone until the block ends."""
    work_dir.mkdir(parents=True, exist_ok=True)
    workspace = work_dir / kit
    fd = os.open(lock_path(work_dir, kit), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    held = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkFolderBusy(
                f"kit {kit}: the work folder {workspace} is in use by another build "
                f"({_holder(fd)}); wait for it to finish, or give this build another "
                f"--work-dir") from None
        held = True
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        if workspace.exists():
            shutil.rmtree(workspace)
        workspace.mkdir()
        yield workspace
    finally:
        if held:  # our PID goes first: one left in the file names a build killed outright
            with suppress(OSError):
                os.ftruncate(fd, 0)
        os.close(fd)  # releases the lock; the file stays, as the git mirrors' locks do


def _holder(fd: int) -> str:
    """The holding process, by the PID it wrote (not its command line: that may carry a
    --source URL with a token, and this message goes into CI logs)."""
    text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    if not text.isdigit():
        return "a process that has not written its PID yet"
    alive = Path(f"/proc/{text}").exists()
    return f"PID {text}" + ("" if alive else ", in another PID namespace or just ending")
