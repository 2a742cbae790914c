"""A Docker image's filesystem in a private temporary folder, through the docker SDK.

A container is created (never started), exported, and removed; only the members `wanted`
accepts are written, so a 1 GB toolchain image costs what its libraries and package records
weigh. `verify --image` reads a target's loader files from it; the portable repair reads the
libraries a kit was linked against, and which package each came from, in the toolchain image.
"""

from __future__ import annotations

import contextlib
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ninfer_kits.errors import BadInput
from ninfer_kits.tarsafe import UnsafeMember, extract

Wanted = Callable[[str], bool]  # a member's path, without the leading "/"


@contextmanager
def exported_image(client: Any, image: str, wanted: Wanted, *,
                   what: str = "--image") -> Iterator[Path]:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise BadInput(f"{what} {image}: no such image on the engine (docker pull it first)") \
            from None
    from ninfer_kits.pipeline.docker_builder import container_labels

    folder = Path(tempfile.mkdtemp(prefix="ninfer-kits-image-"))
    container = client.containers.create(image, command=["/nonexistent"], detach=True,
                                         labels=container_labels("export"))
    try:
        with tempfile.TemporaryFile() as spool:
            for chunk in container.export():
                spool.write(chunk)
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r|") as archive:
                for member in archive:
                    if _kind_kept(member) and wanted(member.name.lstrip("/")):
                        # A member under a symlink that leaves the folder is refused by the
                        # "tar" policy: its path as the image sees it is still reached through
                        # the link, which RootFS follows inside the root.
                        with contextlib.suppress(UnsafeMember):
                            extract(archive, member, folder, policy="tar")
        yield folder
    finally:
        container.remove(force=True)
        shutil.rmtree(folder, ignore_errors=True)


def _kind_kept(member: tarfile.TarInfo) -> bool:
    return member.isfile() or member.isdir() or member.issym()
