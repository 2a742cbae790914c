"""The folders a command leaves its results in, checked before the long work, so that a read-only
or full file system is said at preflight (README, "Exit status"); probed with a nameless file
(O_TMPFILE) that leaves nothing behind."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from ninfer_kits.errors import BadInput, EnvironmentFailure
from ninfer_kits.files.atomic import DiskFull

MB = 1_000_000
# Where the size is not known beforehand: enough to tell a full disk.
SOME_ROOM = 1 * MB

_WHY = {
    errno.EROFS: "it is on a read-only file system",
    errno.EACCES: "this user may not write there (permission denied)",
    errno.EPERM: "this user may not write there (operation not permitted)",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
}


def check_output_folder(folder: Path, label: str, *, needs: int = SOME_ROOM,
                        what: str = "") -> None:
    """BadInput when not a folder; EnvironmentFailure when it cannot be written; DiskFull
    below `needs` bytes free. `label`: "--dist dist"; `what`: "the kit's tarballs"."""
    existing = nearest_existing(folder)
    if not existing.is_dir():
        inside = "" if existing == folder else f" ({existing} is not a folder)"
        raise BadInput(f"{label}: not a folder{inside}")
    _probe(folder, existing, label)
    free = shutil.disk_usage(existing).free
    if free < needs:
        purpose = f" for {what}" if what else ""
        raise DiskFull(f"{label}: {_mb(free)} free on its file system, and at least "
                       f"{_mb(needs)} is needed there{purpose}")


def nearest_existing(folder: Path) -> Path:
    path = folder
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _probe(folder: Path, existing: Path, label: str) -> None:
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        why = _WHY.get(error.errno or 0, error.strerror or str(error))
        where = "" if existing == folder else f" (in {existing}, where it would be made)"
        raise EnvironmentFailure(f"{label}: cannot be written{where}: {why}") from None


def _mb(size: int) -> str:
    return f"{size / MB:,.1f} MB" if size < 10 * MB else f"{size / MB:,.0f} MB"
