"""A target to verify a kit on: this host, a root folder, or a Docker image's filesystem, with
its loader's setup (ninfer_kits.loader) and its distribution for the fix lines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config import settings
from ninfer_kits.errors import BadInput
from ninfer_kits.loader.facts import KIT_MOUNT, OsRelease, family_of, loader_setup, os_release
from ninfer_kits.loader.resolve import LoaderSetup
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.platforms.distros import DRIVER_SONAMES
from ninfer_kits.verify.fixes import System, system_of

SKIPPED_IN_IMAGES = ("usr/share/", "usr/include/", "usr/src/", "var/", "proc/", "sys/", "dev/",
                     "tmp/", "run/")


@dataclass(frozen=True)
class Target:
    description: str
    mode: str  # "host", "root" or "image"
    kit_root: str  # the kit's folder (the one holding kit/) as the target sees it
    setup: LoaderSetup
    system: System | None = None  # its distribution, for the fix lines


@contextmanager
def open_target(kit_root: Path, *, root: Path | None = None, image: str | None = None,
                ld_library_path: tuple[str, ...] | None = None) -> Iterator[Target]:
    if image is not None:
        from ninfer_kits.host.engine import connect, exported_image

        with exported_image(connect(), image, _wanted) as folder:
            yield _in_root(folder, kit_root, f"image {image}", "image", ld_library_path or ())
        return
    if root is not None:
        if not root.is_dir():
            raise BadInput(f"--root {root}: not a folder")
        if not any((root / name).exists() for name in ("etc", "lib", "usr")):
            raise BadInput(f"--root {root}: holds no etc/, lib/ or usr/: not a root filesystem")
        yield _in_root(root, kit_root, f"root {root}", "root", ld_library_path or ())
        return
    rootfs = RootFS(Path("/"))
    env_path = tuple(p for p in (settings.read(settings.LD_LIBRARY_PATH) or "").split(":") if p)
    release = os_release(rootfs)
    yield Target(f"this host ({release.pretty_name or 'unknown distribution'})", "host",
                 str(kit_root.resolve()),
                 loader_setup(rootfs, env_path if ld_library_path is None else ld_library_path),
                 target_system(release))


def target_system(release: OsRelease) -> System:
    return system_of(release.id, release.id_like, release.version_id, release.pretty_name,
                     family_of(release).name)


def _in_root(folder: Path, kit_root: Path, what: str, mode: str,
             ld_library_path: tuple[str, ...]) -> Target:
    """A root or an image: libcuda.so.1 and such are the container runtime's to bring."""
    rootfs = RootFS(folder, ((KIT_MOUNT, kit_root.resolve()),))
    release = os_release(rootfs)
    return Target(f"{what} ({release.pretty_name or 'unknown distribution'})", mode, KIT_MOUNT,
                  loader_setup(rootfs, ld_library_path, DRIVER_SONAMES), target_system(release))


def _wanted(name: str) -> bool:
    return not name.startswith(SKIPPED_IN_IMAGES)
