"""Debian roots for verify's tests (bookworm and trixie minbase with the runtime libraries kits
link), made once and kept in .cache/roots/, and /proc mounted in them while a test runs: the
loader needs /proc to expand $ORIGIN in a program's RUNPATH. A bullseye one, made the same way,
for the tests that read an older release's files (`old_roots`)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from docker_fixtures import ROOTS_CACHE, ensure_engine, export_root, process_lock
from tools import missing


@pytest.fixture(scope="session")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ensure_engine()
    if shutil.which("chroot") is None:
        missing("chroot (coreutils)")
    return {suite: export_root(suite, ROOTS_CACHE) for suite in ("bookworm", "trixie")}


@pytest.fixture(scope="session")
def old_roots() -> dict[str, Path]:
    """Roots of releases older than those verify's tests run in, made the same way and only
    when a test asks: bullseye's, for the Debian 11 facts of distros.toml (test_floor_cmd).
    No /proc is mounted in them."""
    ensure_engine()
    return {"bullseye": export_root("bullseye", ROOTS_CACHE)}


@pytest.fixture()
def proc_mounted(roots: dict[str, Path]) -> Iterator[None]:
    with proc_in(roots.values()):
        yield


@contextmanager
def proc_in(roots: Iterable[Path]) -> Iterator[None]:
    """/proc mounted in each root for the block."""
    with ExitStack() as stack:
        for root in roots:
            stack.enter_context(_proc_mounted(root))
        yield


@contextmanager
def _proc_mounted(root: Path) -> Iterator[None]:
    """/proc mounted in `root` for the block, unmounted after by the last of the test processes
    using it (pytest-xdist's workers and the other Python's lane share the roots): each user
    holds a shared flock on a file beside the root, and the one that can take it exclusively
    at the end is the last."""
    users = os.open(root.parent / f".{root.name}.proc-users", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                    0o644)
    try:
        with process_lock(f"proc-{root}"):
            if not (root / "proc" / "self").exists():
                (root / "proc").mkdir(exist_ok=True)
                subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
            fcntl.flock(users, fcntl.LOCK_SH)
        try:
            yield
        finally:
            with process_lock(f"proc-{root}"):
                try:
                    fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pass  # another process still runs in the root
                else:
                    subprocess.run(["umount", str(root / "proc")], check=False)
    finally:
        os.close(users)
