"""Folder trees walked, removed and resolved without recursion.

A tree comes from an archive someone else made (a fetched kit, an archive given to `verify`),
or was left by an older ninfer-kits that unpacked whatever it was given: it may be thousands
of folders deep. CPython 3.11's `shutil.rmtree`, `os.walk`, `Path.rglob`, `os.makedirs` and
`os.path.realpath` each recurse once per folder (or per link of a chain), so such a tree ends
them in RecursionError, and a path past PATH_MAX makes every call that takes one fail. What is
here keeps its own stack and, where a tree may be deeper than a path can say, works relative to
an open folder. Standard library only: the `.pyz`'s fetch runs it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

# Links Linux follows in one lookup (MAXSYMLINKS): a path through more fails with ELOOP.
MAX_SYMLINKS = 40
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TooManyLinks(Exception):
    """Resolving a path follows more than MAX_SYMLINKS symlinks (a loop, or a chain longer
    than the kernel follows)."""


def remove_tree(path: Path) -> None:
    """Remove `path` and everything under it, as `rm -rf` does: symlinks are removed, never
    followed; every step is relative to an open folder, so depth and path length do not
    matter. A `path` that is not there is no error; any other failure is the OSError."""
    try:
        top = os.open(path, _FOLDER)
    except FileNotFoundError:
        return
    except OSError as error:
        if error.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        os.unlink(path)  # a file, or a symlink (never followed)
        return
    _empty(top)
    os.rmdir(path)


def _empty(fd: int) -> None:
    """Remove everything in the folder open as `fd`, and close it. The folders entered are a
    stack of (name, device, inode of the folder holding it), left again through '..', which
    must lead back to that very folder (nothing was moved meanwhile)."""
    entered: list[tuple[str, int, int]] = []
    try:
        while True:
            inner = _first_folder(fd)
            if inner is not None:
                status = os.fstat(fd)
                fd, outer = os.open(inner, _FOLDER, dir_fd=fd), fd
                os.close(outer)
                entered.append((inner, status.st_dev, status.st_ino))
                continue
            if not entered:
                return
            name, device, inode = entered.pop()
            fd, inner_fd = os.open("..", _FOLDER, dir_fd=fd), fd
            os.close(inner_fd)
            status = os.fstat(fd)
            if (status.st_dev, status.st_ino) != (device, inode):
                raise OSError(errno.ESTALE, f"{name}: its folder was moved while it was removed")
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)


def _first_folder(fd: int) -> str | None:
    """Unlink every entry of the folder open as `fd` that is not a folder; the name of the
    first folder met, or None once the folder is empty (listed again after removals, since a
    listing need not show what changed while it ran)."""
    while True:
        seen = False
        with os.scandir(fd) as entries:
            for entry in entries:
                seen = True
                if entry.is_dir(follow_symlinks=False):
                    return entry.name
                os.unlink(entry.name, dir_fd=fd)
        if not seen:
            return None


def walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry under `root`: its path relative to `root` ('/'-separated) and its lstat,
    each folder before what it holds, names sorted; symlinks are not followed. An entry that
    cannot be listed or read is the OSError."""
    pending = _children(root, "")
    while pending:
        relative = pending.pop()
        status = os.lstat(root / relative)
        yield relative, status
        if stat.S_ISDIR(status.st_mode):
            pending += _children(root, relative)


def _children(root: Path, relative: str) -> list[str]:
    """The entries of root/relative, as paths relative to root, last name first (a stack)."""
    prefix = f"{relative}/" if relative else ""
    return [prefix + name for name in sorted(os.listdir(root / relative), reverse=True)]


def stays_inside(root: str, name: str) -> bool:
    """Whether root/name leads to a place inside the folder `root` as the file system
    resolves it, following the symlinks in the tree (a name that is not there, yet, counts
    as it reads, as realpath takes it); going above `root` on the way counts as leaving.
    TooManyLinks past MAX_SYMLINKS links."""
    pending = name.split("/")[::-1]  # a stack: the next name last
    where: list[str] = []  # the resolved place, by names below root
    followed = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not where:
                return False
            where.pop()
            continue
        where.append(part)
        try:
            target = os.readlink(os.path.join(root, *where))
        except OSError:  # not a link, or not there: a place of that name
            continue
        followed += 1
        if followed > MAX_SYMLINKS:
            raise TooManyLinks(name)
        if target.startswith("/"):
            return False
        where.pop()
        pending += target.split("/")[::-1]
    return True
