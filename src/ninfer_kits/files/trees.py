"""Folder trees walked, removed and resolved without recursion: a tree from someone else's archive
may be thousands of folders deep, which ends CPython 3.11's rmtree, walk, rglob, makedirs and
realpath in RecursionError; where a path may exceed PATH_MAX, work is relative to an open folder.
Standard library only: the `.pyz`'s fetch runs it."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

MAX_SYMLINKS = 40  # Linux's MAXSYMLINKS: more fails with ELOOP
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TooManyLinks(Exception):
    """Resolving a path follows more than MAX_SYMLINKS symlinks."""


def remove_tree(path: Path) -> None:
    """`rm -rf path`, symlinks never followed; a missing `path` is no error."""
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
    """Empty and close the folder open as `fd`, leaving each entered folder through '..',
    checked to lead back to the very folder (nothing moved meanwhile)."""
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
    """Every entry under `root` (relative path, lstat), folders first, sorted, no symlink
    followed."""
    pending = _children(root, "")
    while pending:
        relative = pending.pop()
        status = os.lstat(root / relative)
        yield relative, status
        if stat.S_ISDIR(status.st_mode):
            pending += _children(root, relative)


def _children(root: Path, relative: str) -> list[str]:
    prefix = f"{relative}/" if relative else ""
    return [prefix + name for name in sorted(os.listdir(root / relative), reverse=True)]


def stays_inside(root: str, name: str) -> bool:
    """Whether root/name resolves inside `root` through the tree's symlinks (a missing name
    as it reads; going above `root` on the way is leaving); TooManyLinks past the bound."""
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
