"""A kit's work folder (<work-dir>/<kit>/), held by one build at a time through a flock on
<work-dir>/<kit>.lock: a second build of the kit stops at once naming the holder, rather than
emptying the same build tree under the first."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ninfer_kits.errors import EnvironmentFailure
from ninfer_kits.files import locks


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
