"""The Docker engine client every job uses: connecting, the engine's failures as
EnvironmentFailure, container labels, and an image's filesystem exported into a folder. The
docker SDK loads only inside the functions, so a command that never reaches an engine never pays
for it; an export writes only the members `wanted` accepts (a 1 GB image costs its libraries)."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ninfer_kits.config import settings
from ninfer_kits.errors import BadInput, EnvironmentFailure, NinferKitsError
from ninfer_kits.files.tarsafe import UnsafeMember, extract

LABEL = "org.ninfer-kits.role"
RUN_LABEL = "org.ninfer-kits.run"
_PROCESS_RUN_ID = uuid.uuid4().hex
START_ENGINE_HINT = ("start one (as root: scripts/start-docker-engine.sh, or `dockerd &`), or "
                     "point DOCKER_HOST at a remote engine (tcp://HOST:2375, ssh://user@HOST)")


def connect() -> Any:
    """A client for the engine DOCKER_HOST names, checked with a ping."""
    try:
        import docker
    except ImportError:
        raise EnvironmentFailure("the docker builder needs the docker SDK: pip install docker"
                                 ) from None
    where = engine_address()
    # paramiko is the client's side of ssh://: without it, no engine is asked
    if where.startswith("ssh://") and importlib.util.find_spec("paramiko") is None:
        raise EnvironmentFailure(f"DOCKER_HOST={where} needs paramiko, which is not installed: "
                                 f'pip install "docker[ssh]"')
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as error:  # the SDK raises DockerException, requests' and OS errors alike
        # A remote engine (tcp://, ssh://) is not started here: that hint would mislead.
        hint = (f"check that the engine at {where} runs and is reachable from here, or unset "
                f"DOCKER_HOST to use a local one" if where.startswith(("tcp://", "ssh://"))
                else START_ENGINE_HINT)
        raise EnvironmentFailure(f"no Docker engine answers at {where} ({first_line(error)}); "
                                 f"{hint}") from None
    return client


@contextmanager
def engine_guard() -> Iterator[None]:
    """The engine's own failures as one EnvironmentFailure naming it; ours pass through."""
    try:
        yield
    except NinferKitsError:
        raise
    except Exception as error:
        if not _from_engine(error):
            raise
        raise EnvironmentFailure(f"the Docker engine at {engine_address()} failed: "
                                 f"{first_line(error)}") from error


def _from_engine(error: Exception) -> bool:
    """An error of the docker SDK, requests or the connection (not a local OSError)."""
    if isinstance(error, ConnectionError):
        return True
    module = type(error).__module__
    return module.startswith(("docker.", "requests.", "urllib3.", "paramiko."))


def container_labels(role: str) -> dict[str, str]:
    return {LABEL: role, RUN_LABEL: settings.read(settings.RUN_ID) or _PROCESS_RUN_ID}


def engine_address() -> str:
    return settings.read(settings.DOCKER_HOST) or "the local socket (unix:///var/run/docker.sock)"


Wanted = Callable[[str], bool]  # a member's path, without the leading "/"


@contextmanager
def exported_image(client: Any, image: str, wanted: Wanted, *,
                   what: str = "--image", into: Path | None = None) -> Iterator[Path]:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise BadInput(f"{what} {image}: no such image on the engine (docker pull it first)") \
            from None

    # `into`: a folder on the file system where the caller will keep it (one rename, no copy)
    folder = Path(tempfile.mkdtemp(prefix=".ninfer-kits-image-", dir=into))
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


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
