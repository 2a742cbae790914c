"""The docker builder's containers: labelled, always removed (also on Ctrl-C or SIGTERM), files in
and out through the engine's API alone, so a remote DOCKER_HOST works (docs/build.md)."""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ninfer_kits.config import settings
from ninfer_kits.files.tarsafe import extract_all
from ninfer_kits.host.children import deferred_signals
from ninfer_kits.host.engine import container_labels

WORK = "/work"  # fixed paths inside the container keep builds reproducible across hosts
KEEP_ENV = settings.KEEP_CONTAINER.name


@contextmanager
def build_container(client: Any, *, image: str, command: list[str], env: dict[str, str],
                    volumes: dict[str, dict[str, str]], network: str,
                    role: str = "build") -> Iterator[Any]:
    """A created (not started) container, always removed afterwards unless asked to keep it."""
    container = None
    try:
        with deferred_signals():  # an interrupt while it is made waits: it is removed then
            container = client.containers.create(
                image, command=command, environment=env, volumes=volumes, network_mode=network,
                working_dir=WORK, labels=container_labels(role), detach=True,
            )
        yield container
    finally:  # also on Ctrl-C and SIGTERM; a second one waits until the container is gone
        if container is not None and settings.read(settings.KEEP_CONTAINER):
            print(f"kept container {container.short_id} ({KEEP_ENV} is set)")
        elif container is not None:
            with deferred_signals():
                remove_container(container)


def remove_container(container: Any) -> None:
    """Remove a container and its anonymous volumes; one already gone, or going (an interrupted
    smoke test's), is left to it."""
    import docker.errors

    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if error.status_code != 409 or "already in progress" not in str(error):
            raise


def tar_of(entries: dict[str, Path]) -> bytes:
    """Files and folders under the names given, owned by root, as one tar for put_archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, path in entries.items():
            archive.add(path, arcname=name, filter=root_owned)
    return buffer.getvalue()


def root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def copy_out(container: Any, path: str, dest: Path) -> None:
    """The folder `path` of the container as `dest`, unpacked beside it with the "data" policy and
    moved; nothing is left on a failure."""
    stream, _ = container.get_archive(path)
    staging = dest.parent / f".{dest.name}.copy"
    try:
        with tempfile.TemporaryFile() as spool:
            for chunk in stream:
                spool.write(chunk)
            spool.seek(0)
            with tarfile.open(fileobj=spool) as archive:
                extract_all(archive, staging, policy="data")
        (staging / Path(path).name).rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
