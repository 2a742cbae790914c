"""Debian roots for verify's tests (bookworm and trixie minbase with the runtime libraries kits
link), made once and kept in .cache/roots/, and /proc mounted in them while a test runs: the
loader needs /proc to expand $ORIGIN in a program's RUNPATH."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from docker_fixtures import ensure_engine, export_root
from tools import ROOT, missing


@pytest.fixture(scope="session")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ensure_engine()
    if shutil.which("chroot") is None:
        missing("chroot (coreutils)")
    cache = ROOT / ".cache" / "roots"
    return {suite: export_root(suite, cache) for suite in ("bookworm", "trixie")}


@pytest.fixture()
def proc_mounted(roots: dict[str, Path]) -> Iterator[None]:
    with proc_in(roots.values()):
        yield


@contextmanager
def proc_in(roots: Iterable[Path]) -> Iterator[None]:
    """/proc mounted in each root that lacks it, for the block; unmounted after."""
    mounted = []
    try:
        for root in roots:
            if not (root / "proc" / "self").exists():
                (root / "proc").mkdir(exist_ok=True)
                subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
                mounted.append(root / "proc")
        yield
    finally:
        for point in mounted:
            subprocess.run(["umount", str(point)], check=False)
