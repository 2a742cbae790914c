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

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ninfer_kits import locks
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

    def busy(holder: str) -> WorkFolderBusy:
        return WorkFolderBusy(f"kit {kit}: the work folder {workspace} is in use by another "
                              f"build ({holder}); wait for it to finish, or give this build "
                              f"another --work-dir")

    with locks.held(lock_path(work_dir, kit), busy=busy, name_holder=True):
        if workspace.exists():
            shutil.rmtree(workspace)
        workspace.mkdir()
        yield workspace
