"""One publish of a tag at a time on this machine: a flock under the cache dir, naming its
holder to whoever waits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ninfer_kits import locks
from ninfer_kits.errors import EnvironmentFailure
from ninfer_kits.log import Reporter


class PublishBusy(EnvironmentFailure):
    """Another publish of the same tag runs on this machine."""


@contextmanager
def held_lock(lock_dir: Path, tag: str, wait: float, reporter: Reporter) -> Iterator[None]:
    """One publish of `tag` at a time on this machine: <lock_dir>/<tag>.lock (the holder's PID
    in it). A second publish waits up to `wait` seconds, then stops naming the holder."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{tag}.lock"

    def busy(holder: str) -> PublishBusy:
        return PublishBusy(f"another publish of {tag} is running ({holder}; lock {path}); "
                           f"wait for it to finish, or give --wait SECONDS")

    def waiting(holder: str) -> None:
        reporter.info(f"waiting for another publish of {tag} ({holder}) to finish, up to "
                      f"{wait:.0f} s")

    with locks.held(path, wait=wait, busy=busy, waiting=waiting, name_holder=True):
        yield
