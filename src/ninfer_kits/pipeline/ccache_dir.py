"""A compiler cache in a host folder (`--ccache-dir`), loaded into a volume of the build's own and
saved back through the engine's API alone: docs/build.md, "Compiler cache in a host folder"."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ninfer_kits.config import settings
from ninfer_kits.errors import EnvironmentFailure
from ninfer_kits.host.children import deferred_signals
from ninfer_kits.host.engine import LABEL, RUN_LABEL, container_labels, first_line
from ninfer_kits.log import Reporter
from ninfer_kits.pipeline.builders import LOG_TAIL
from ninfer_kits.pipeline.containers import KEEP_ENV, build_container, copy_out, root_owned

CCACHE_AT = "/ccache"  # where the compiler cache's volume is mounted in the build container
CCACHE_ROLE = "ccache"  # the role of the containers that load, trim and save a --ccache-dir


@dataclass(frozen=True)
class CcacheCounts:
    """One build's compiles as ccache counted them (its stats were zeroed when it was loaded)."""

    hits: int
    misses: int

    @classmethod
    def parse(cls, printed: str) -> CcacheCounts:
        """From `ccache --print-stats` (one `key<TAB>value` a line)."""
        counters: dict[str, int] = {}
        for line in printed.splitlines():
            key, _, value = line.partition("\t")
            if value.strip().isdigit():
                counters[key.strip()] = int(value)
        return cls(hits=counters.get("direct_cache_hit", 0)
                   + counters.get("preprocessed_cache_hit", 0),
                   misses=counters.get("cache_miss", 0))

    @property
    def line(self) -> str:
        total = self.hits + self.misses
        rate = 100 * self.hits / total if total else 0.0
        return f"ccache: {self.hits} hits, {self.misses} misses ({rate:.1f}% hit rate)"


@contextmanager
def ccache_from_dir(client: Any, image: str, folder: Path, max_size: str,
                    reporter: Reporter) -> Iterator[str]:
    """A compiler cache volume of this run's own, loaded from `folder` with its stats zeroed;
    after the block, failed or not, trimmed to `max_size`, reported and saved into `folder`."""
    import docker.errors

    volume = f"ninfer-kits-ccache-run-{uuid.uuid4().hex[:16]}"
    with deferred_signals():
        client.volumes.create(name=volume, labels={
            LABEL: CCACHE_ROLE, RUN_LABEL: container_labels(CCACHE_ROLE)[RUN_LABEL]})
    try:
        files = _load_ccache(client, image, volume, folder, max_size)
        state = "empty" if folder.exists() else "not there"
        reporter.info(f"ccache: {files} files loaded from {folder}" if files else
                      f"ccache: starting cold ({folder} is {state})")
        try:
            yield volume
        except Exception:  # the build failed: what it compiled is still worth keeping
            try:
                _report_ccache(_save_ccache(client, image, volume, folder, max_size), reporter)
            except Exception as error:  # the build's own failure is the one to tell
                reporter.warning(f"the compiler cache could not be saved into {folder}: "
                                 f"{first_line(error)}")
            raise
        _report_ccache(_save_ccache(client, image, volume, folder, max_size), reporter)
    finally:
        if settings.read(settings.KEEP_CONTAINER):  # its containers are kept, and hold it
            print(f"kept volume {volume} ({KEEP_ENV} is set)")
        else:
            with deferred_signals(), suppress(docker.errors.NotFound):
                client.volumes.get(volume).remove(force=True)


def _report_ccache(counts: CcacheCounts, reporter: Reporter) -> None:
    reporter.info(counts.line)
    summary = settings.read(settings.GITHUB_STEP_SUMMARY)
    if summary:
        with open(summary, "a", encoding="utf-8") as sink:
            sink.write(counts.line + "\n")


def _load_ccache(client: Any, image: str, volume: str, folder: Path, max_size: str) -> int:
    """`folder`'s files into the volume, their stats zeroed; returns how many were loaded."""
    with tempfile.TemporaryFile() as spool:
        count = _cache_tar(folder, spool)
        spool.seek(0)
        _in_cache_container(client, image, volume, max_size, "ccache --zero-stats >/dev/null",
                            before=lambda container: container.put_archive(CCACHE_AT, spool))
    return count


def _cache_tar(folder: Path, sink: Any) -> int:
    """The regular files and folders under `folder` as a tar into `sink`; their count. A
    ccache.conf is left out: one ccache cannot read would fail every compile."""
    count = 0
    with tarfile.open(fileobj=sink, mode="w") as archive:
        if not folder.is_dir():
            return 0
        for root, dirs, files in os.walk(folder):
            here = Path(root)
            for name in sorted(dirs):
                if not (here / name).is_symlink():
                    archive.addfile(_cache_member(here / name, folder, tarfile.DIRTYPE, 0))
            dirs[:] = sorted(name for name in dirs if not (here / name).is_symlink())
            for name in sorted(files):
                path = here / name
                if (here == folder and name == "ccache.conf") or path.is_symlink() \
                        or not path.is_file():
                    continue
                try:
                    with path.open("rb") as source:
                        size = os.fstat(source.fileno()).st_size
                        archive.addfile(_cache_member(path, folder, tarfile.REGTYPE, size),
                                        source)
                except OSError:  # unreadable (or gone): the cache does without it
                    continue
                count += 1
    return count


def _cache_member(path: Path, folder: Path, kind: bytes, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path.relative_to(folder).as_posix())
    info.type, info.size = kind, size
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return root_owned(info)


def _save_ccache(client: Any, image: str, volume: str, folder: Path,
                 max_size: str) -> CcacheCounts:
    """Trim the cache, read this build's stats, and swap the cache in for `folder`."""
    printed = _in_cache_container(
        client, image, volume, max_size, "ccache --cleanup >/dev/null && ccache --print-stats",
        after=lambda container: _export_cache(container, folder))
    return CcacheCounts.parse(printed)


def _export_cache(container: Any, folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fresh = folder.with_name(f".{folder.name}.new-{token}")
    old = folder.with_name(f".{folder.name}.old-{token}")
    try:
        copy_out(container, CCACHE_AT, fresh)
        _make_runners(fresh)
        if folder.is_dir() and not folder.is_symlink():
            folder.rename(old)
        elif folder.exists() or folder.is_symlink():
            folder.unlink()
        fresh.rename(folder)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def _make_runners(root: Path) -> None:
    """Everything under `root` the invoking user's, 0644/0755, so a runner that is not root can
    delete it; anything but files and folders is dropped."""
    uid, gid = os.getuid(), os.getgid()
    for here, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(here) / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                path.unlink()
                continue
            os.chown(path, uid, gid)
            path.chmod(0o755 if path.is_dir() else 0o644)
    os.chown(root, uid, gid)
    root.chmod(0o755)


def _in_cache_container(client: Any, image: str, volume: str, max_size: str, script: str,
                        before: Callable[[Any], object] | None = None,
                        after: Callable[[Any], object] | None = None) -> str:
    """`script`'s output in a container with the cache mounted; `before` gets it before it starts,
    `after` once it exited well."""
    env = {"CCACHE_DIR": CCACHE_AT, "CCACHE_MAXSIZE": max_size, "HOME": "/tmp"}
    with build_container(client, image=image, command=["sh", "-c", script], env=env,
                         volumes={volume: {"bind": CCACHE_AT, "mode": "rw"}}, network="none",
                         role=CCACHE_ROLE) as container:
        if before is not None:
            before(container)
        container.start()
        status = container.wait().get("StatusCode", 1)
        output = container.logs().decode("utf-8", "replace")
        if status != 0:
            tail = "\n".join(f"  | {line}" for line in output.strip().splitlines()[-LOG_TAIL:])
            raise EnvironmentFailure(f"ccache in {image} failed (exit status {status}) running "
                                     f"`{script}`:\n{tail}")
        if after is not None:
            after(container)
        return str(output)
