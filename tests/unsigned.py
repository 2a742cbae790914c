"""The production matrix without its [publish.signing] table, for the tests whose releases are
made unsigned (test kits packed on the spot): with the production matrix, which declares that
releases are signed, fetch and verify refuse them, as they must refuse any unsigned release."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from tools import ROOT

SIGNING = "\n[publish.signing]\n"


@functools.cache
def unsigned_matrix() -> Path:
    """matrix.toml as the repository has it but for [publish.signing] (the last table), in a
    folder of its own that shares the repository's releases/ (the ledger and the kit index
    that fetch reads)."""
    text = (ROOT / "matrix.toml").read_text(encoding="utf-8")
    assert text.count(SIGNING) == 1 and "\n[" not in text[text.index(SIGNING) + 1:], \
        "[publish.signing] is no longer the last table of matrix.toml"
    folder = Path(tempfile.mkdtemp(prefix="ninfer-kits-unsigned-"))
    atexit.register(shutil.rmtree, folder, True)
    (folder / "releases").symlink_to(ROOT / "releases")
    (folder / "matrix.toml").write_text(text[:text.index(SIGNING) + 1], encoding="utf-8")
    return folder / "matrix.toml"


def unsigned_env() -> dict[str, str]:
    """The environment that makes unsigned_matrix() the default matrix of a command (`floor`
    takes no --matrix; without one, the repository's own is found in the current folder)."""
    return {"NINFER_KITS_MATRIX": str(unsigned_matrix())}
