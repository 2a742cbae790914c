"""The folders a command leaves its results in (build's --dist, fetch's --dest, publish's --out),
checked before the long work: a read-only or full file system is said at preflight, not after a
two-minute compile or a whole download.

One rule for all three, as README's exit status table has it: a folder that cannot be written
(a read-only file system, no permission) or that has too little room is the environment's
(exit 3, as a full disk found later is); a path that is not a folder at all is bad input (2).
Nothing is created here: the folder, or its nearest existing parent, is probed with a file that
has no name (O_TMPFILE where the file system has it) and leaves nothing behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from ninfer_kits.atomic import DiskFull
from ninfer_kits.errors import BadInput, EnvironmentFailure

MB = 1_000_000
# Room asked for when a command cannot know its outputs' size beforehand: enough to tell a
# full disk from one with room; the real need is checked where it is known.
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
    """BadInput when `folder` (or the parent it would be made in) is not a folder;
    EnvironmentFailure when it cannot be written; DiskFull when its file system has fewer than
    `needs` bytes free. `label` names it as the user gave it ("--dist dist"); `what` says what
    the room is for ("the kit's tarballs")."""
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
    """`folder`, else its nearest parent that exists (where it would be made)."""
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
