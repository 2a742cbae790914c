"""Files that appear complete or not at all: written beside their final name, then renamed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` through a temporary file in the same folder and a rename, so a
    reader never sees a partial file and a crash leaves the old one (or none)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
