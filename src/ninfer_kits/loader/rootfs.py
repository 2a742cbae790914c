"""Paths as a target sees them: a root folder (or the host, root "/"), with the kit mounted at a
place of its own. Symlinks are followed inside the root, as `chroot` would, so an absolute link
in a Debian root (`/lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/...`) stays in it.
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_LINKS = 40  # the kernel's limit on symlinks followed in one lookup


@dataclass(frozen=True)
class RootFS:
    root: Path  # the target's "/" on this machine
    mounts: tuple[tuple[str, Path], ...] = field(default=())  # (path in the target, real folder)

    def real(self, path: str) -> Path | None:
        """Where `path` of the target is on this machine; None when it does not exist."""
        try:
            return self._follow(posixpath.normpath("/" + path.lstrip("/")))
        except (OSError, _LoopError):
            return None

    def is_file(self, path: str) -> bool:
        real = self.real(path)
        try:
            return real is not None and stat.S_ISREG(real.stat().st_mode)
        except OSError:
            return False

    def is_dir(self, path: str) -> bool:
        real = self.real(path)
        return real is not None and real.is_dir()

    def read_bytes(self, path: str) -> bytes | None:
        real = self.real(path)
        try:
            return real.read_bytes() if real is not None else None
        except OSError:
            return None

    def canonical(self, path: str) -> str | None:
        real = self.real(path)
        if real is None:
            return None
        for prefix, folder in self.mounts:
            if real == folder or folder in real.parents:
                return posixpath.join(prefix, real.relative_to(folder).as_posix()).rstrip("/")
        inside = real.relative_to(self.root.resolve()).as_posix()
        return "/" + inside if inside != "." else "/"

    def _base(self, path: str) -> tuple[Path, str]:
        for prefix, folder in self.mounts:
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return folder, path[len(prefix):].lstrip("/")
        return self.root, path.lstrip("/")

    def _leads_to_mount(self, path: str) -> bool:
        """A folder above a mount is there even where the root has none: the mount makes it."""
        return any(prefix.startswith(path.rstrip("/") + "/") for prefix, _ in self.mounts)

    def _follow(self, path: str) -> Path:
        links = 0
        pending = [part for part in path.split("/") if part]
        done: list[str] = []
        while pending:
            part = pending.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            candidate = "/" + "/".join([*done, part])
            base, inside = self._base(candidate)
            real = base / inside if inside else base
            if real.is_symlink():
                links += 1
                if links > MAX_LINKS:
                    raise _LoopError(candidate)
                target = os.readlink(real)
                if target.startswith("/"):
                    done = []
                pending = [p for p in target.split("/") if p] + pending
                continue
            if not os.path.lexists(real) and not self._leads_to_mount(candidate):
                raise FileNotFoundError(candidate)
            done.append(part)
        base, inside = self._base("/" + "/".join(done))
        return (base / inside if inside else base).resolve()


class _LoopError(Exception):
    pass
