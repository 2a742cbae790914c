"""Unpacking a tar archive safely, alike on every Python that requires-python admits.

tarfile's filters came with 3.11.4 (Debian 12 has 3.11.2): where there are none, `checked` makes
the same checks, so an archive is written or refused alike. Depth and symlink bounds come first
under both policies: os.makedirs and os.path.realpath recurse once per folder or link on 3.11.
A refusal is UnsafeMember; what was written before it stays."""

from __future__ import annotations

import copy
import os
import posixpath
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, Literal

from ninfer_kits.files.trees import MAX_SYMLINKS, TooManyLinks, stays_inside
from ninfer_kits.inspector.archive import MAX_DEPTH, shown_name

Policy = Literal["data", "tar"]

# Python 3.11.4+ and 3.12+: tarfile refuses by itself (tarfile.data_filter, tar_filter).
NATIVE_FILTERS: Final[bool] = hasattr(tarfile, "data_filter")
# Where tarfile has filters (the tests run the checked path there too): 3.14's default
# ("data") must not stand in for "tar".
_CHECKED: Final[dict[str, Any]] = {"filter": "fully_trusted"} if NATIVE_FILTERS else {}


class UnsafeMember(tarfile.TarError):
    """A member the policy refuses: outside the destination, a bad link, a device."""


def extract_all(archive: tarfile.TarFile, dest: Path, *, policy: Policy = "data") -> None:
    """Policy "tar": tarfile's filter, and no hard link out of `dest` (tarfile's lets one
    through before 3.12.11 and 3.13.4); "data": links out, devices and FIFOs refused too."""
    if not NATIVE_FILTERS:  # pragma: no cover - Pythons before 3.11.4 (the tests call it)
        extract_all_checked(archive, dest, policy=policy)
        return
    try:
        archive.extractall(dest, filter=_filter(policy))
    except tarfile.FilterError as error:
        raise UnsafeMember(str(error)) from error


def extract(archive: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, *,
            policy: Policy = "data") -> None:
    if not NATIVE_FILTERS:  # pragma: no cover - Pythons before 3.11.4 (the tests call it)
        extract_checked(archive, member, dest, policy=policy)
        return
    try:
        archive.extract(member, dest, filter=_filter(policy))
    except tarfile.FilterError as error:
        raise UnsafeMember(str(error)) from error


def extract_all_checked(archive: tarfile.TarFile, dest: Path, *,
                        policy: Policy = "data") -> None:
    """`extract_all` without tarfile's filters: each member checked just before it is written."""

    def members() -> Iterator[tarfile.TarInfo]:
        for member in archive:
            yield checked(member, dest, policy)

    archive.extractall(dest, members=members(), **_CHECKED)


def extract_checked(archive: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, *,
                    policy: Policy = "data") -> None:
    archive.extract(checked(member, dest, policy), dest, **_CHECKED)


def checked(member: tarfile.TarInfo, dest: Path, policy: Policy) -> tarfile.TarInfo:
    """A copy of `member` as `policy` lets it be written (tarfile's _get_filtered_attrs);
    UnsafeMember when refused."""
    root = os.path.realpath(dest)
    _within_bounds(member, root)
    name = member.name.lstrip("/" + os.sep)
    if not name and member.name:
        name = "."
    if os.path.isabs(name):
        raise UnsafeMember(f"member {member.name!r} has an absolute path")
    landing = os.path.realpath(os.path.join(root, name))
    if not _inside(landing, root):
        raise UnsafeMember(f"{member.name!r} would be extracted to {landing!r}, which is "
                           f"outside the destination")
    if policy == "data" and not (member.isreg() or member.islnk() or member.isdir()
                                 or member.issym()):
        raise UnsafeMember(f"{member.name!r} is a special file")
    if member.islnk() or (policy == "data" and member.issym()):
        _check_link(member, name, root)
    result = copy.copy(member)
    result.name = name
    mode = member.mode & 0o755
    if policy == "data":
        if member.isreg() or member.islnk():
            if not mode & 0o100:
                mode &= ~0o111
            mode |= 0o600
        elif member.isdir():
            mode = 0o777 & ~_umask()  # what the "data" filter leaves a folder: no mode
        result.uid, result.gid = os.geteuid(), os.getegid()
        result.uname = result.gname = ""
    result.mode = mode
    return result


def _check_link(member: tarfile.TarInfo, name: str, root: str) -> None:
    if os.path.isabs(member.linkname):
        raise UnsafeMember(f"{member.name!r} is a link to an absolute path")
    base = os.path.dirname(name) if member.issym() else ""
    target = os.path.realpath(os.path.join(root, base, member.linkname))
    if not _inside(target, root):
        raise UnsafeMember(f"{member.name!r} would link to {target!r}, which is outside "
                           f"the destination")


def _tar_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's "tar" filter, and no hard link to a file outside `dest`."""
    if member.islnk():
        _check_link(member, member.name, os.path.realpath(dest))
    return tarfile.tar_filter(member, dest)


def _filter(policy: Policy) -> Callable[[tarfile.TarInfo, str], tarfile.TarInfo]:
    """tarfile's filter for `policy`, after the bounds."""
    native = tarfile.data_filter if policy == "data" else _tar_filter
    return lambda member, dest: native(_within_bounds(member, dest), dest)


def _within_bounds(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """`member`, or UnsafeMember past MAX_DEPTH names or MAX_SYMLINKS links."""
    name = member.name.lstrip("/")
    if name.count("/") >= MAX_DEPTH:
        raise UnsafeMember(f"{shown_name(member.name)} is more than {MAX_DEPTH} names deep")
    paths = [name]
    if member.issym() or member.islnk():
        base = posixpath.dirname(name) if member.issym() else ""
        paths.append(posixpath.join(base, member.linkname))
    try:
        for path in paths:
            stays_inside(dest, path)
    except TooManyLinks:
        raise UnsafeMember(f"{shown_name(member.name)} resolves through more than "
                           f"{MAX_SYMLINKS} links") from None
    return member


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def _umask() -> int:
    """The umask, read without setting it (os.umask would, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022
