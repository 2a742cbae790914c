"""A finished kit folder, dist/<tag>/: what `build` writes and `publish`, `verify` and `fetch` read.

    dist/<tag>/          the kit's release tag, rendered from matrix.toml
      <asset>            the kit tarball (the one *.tar.gz)
      BUILDINFO.txt      how it was built; its `kit` key names the matrix entry that owns the folder
      SHA256SUMS         sha256 of <asset> and of BUILDINFO.txt, sorted by name (`sha256sum -c`)
      SHA1SUMS           the SHA-1 of <asset> (`sha1sum -c`)
      build.log          the configure and compile log

Nothing else is in a kit folder. `read_kit_dir` checks all of it (and every hash, unless asked
not to) and returns a KitDir; `install` puts a finished staging folder in place of dist/<tag>/
with one rename, refuses to replace a folder that belongs to another kit, and puts the previous
folder back when the rename fails.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ninfer_kits import buildinfo
from ninfer_kits.buildinfo import BuildInfo
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.pipeline.pack import hash_file, read_sha256sums

BUILDINFO = "BUILDINFO.txt"
SHA256SUMS = "SHA256SUMS"
SHA1SUMS = "SHA1SUMS"
BUILD_LOG = "build.log"
TARBALL_SUFFIX = ".tar.gz"
FIXED_FILES = (BUILDINFO, SHA256SUMS, SHA1SUMS, BUILD_LOG)
SHA1SUMS_LINE = re.compile(r"(?P<hash>[0-9a-f]{40})  (?P<name>[^\n]+)\n")


class KitDirInvalid(CheckFailed):
    """A folder that should hold a finished kit does not: a file missing or extra, a checksum
    file that disagrees with the files, a BUILDINFO.txt that does not parse."""


class TagTaken(BadInput):
    """dist/<tag>/ holds another kit (two matrix entries render the same tag), or something that
    is not a kit folder at all: building would delete it."""


@dataclass(frozen=True, kw_only=True)
class KitDir:
    """One finished kit folder, read and checked."""

    path: Path  # dist/<tag>
    asset: str  # the tarball's file name
    info: BuildInfo  # BUILDINFO.txt beside the tarball (with this run's keys)
    size: int  # of the tarball
    sha256: str  # of the tarball, as SHA256SUMS lists it
    sha1: str  # of the tarball, as SHA1SUMS lists it
    buildinfo_sha256: str  # of BUILDINFO.txt, as SHA256SUMS lists it
    verified: bool  # every hash above was checked against the bytes

    @property
    def tag(self) -> str:
        return self.path.name

    @property
    def kit(self) -> str:
        return self.info.kit

    @property
    def tarball(self) -> Path:
        return self.path / self.asset

    @property
    def buildinfo_path(self) -> Path:
        return self.path / BUILDINFO

    @property
    def build_log(self) -> Path:
        return self.path / BUILD_LOG

    @property
    def files(self) -> tuple[str, ...]:
        """Every file of the folder, sorted by name."""
        return tuple(sorted((*FIXED_FILES, self.asset)))


def read_kit_dir(path: Path, *, verify: bool = True) -> KitDir:
    """Read dist/<tag>/ and check its layout, its checksum files and (with `verify`) that the
    hashes they list are the files' own. KitDirInvalid names the folder and what is wrong."""
    if not path.is_dir():
        raise BadInput(f"{path}: not a kit folder (no such folder)")
    asset = _check_layout(path)
    try:
        info = buildinfo.read(path / BUILDINFO)
        sums = read_sha256sums(path / SHA256SUMS)
    except BadInput as error:
        raise KitDirInvalid(f"kit folder {path}: {error}") from None
    if sorted(sums) != sorted((asset, BUILDINFO)):
        raise KitDirInvalid(f"kit folder {path}: {SHA256SUMS} lists {', '.join(sorted(sums))}; "
                            f"it must list exactly {asset} and {BUILDINFO}")
    sha1 = _read_sha1sums(path / SHA1SUMS, asset)
    kit = KitDir(path=path, asset=asset, info=info, size=(path / asset).stat().st_size,
                 sha256=sums[asset], sha1=sha1, buildinfo_sha256=sums[BUILDINFO],
                 verified=False)
    return _verified(kit) if verify else kit


def _check_layout(path: Path) -> str:
    """The tarball's name, once the folder holds exactly the files of a kit folder."""
    names = sorted(os.listdir(path))
    tarballs = [name for name in names if name.endswith(TARBALL_SUFFIX)]
    if len(tarballs) != 1:
        found = ", ".join(tarballs) or "none"
        raise KitDirInvalid(f"kit folder {path}: holds {len(tarballs)} tarballs ({found}); a kit "
                            f"folder holds exactly one *{TARBALL_SUFFIX}")
    missing = [name for name in FIXED_FILES if name not in names]
    if missing:
        raise KitDirInvalid(f"kit folder {path}: {', '.join(missing)} missing")
    extra = [name for name in names if name not in (*FIXED_FILES, tarballs[0])]
    if extra:
        raise KitDirInvalid(f"kit folder {path}: holds {', '.join(extra)}, which is not part of "
                            f"a kit folder ({', '.join((*FIXED_FILES, tarballs[0]))})")
    for name in (*FIXED_FILES, tarballs[0]):
        if not stat.S_ISREG((path / name).lstat().st_mode):
            raise KitDirInvalid(f"kit folder {path}: {name} is not a regular file")
    return tarballs[0]


def _read_sha1sums(path: Path, asset: str) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    match = SHA1SUMS_LINE.fullmatch(text)
    if match is None or match["name"] != asset:
        raise KitDirInvalid(f"{path}: expected one line '<sha1>  {asset}', got {text[:120]!r}")
    return match["hash"]


def _verified(kit: KitDir) -> KitDir:
    tarball, info = hash_file(kit.tarball), hash_file(kit.buildinfo_path)
    for name, listed, actual, sums in (
        (kit.asset, kit.sha256, tarball.sha256, SHA256SUMS),
        (kit.asset, kit.sha1, tarball.sha1, SHA1SUMS),
        (BUILDINFO, kit.buildinfo_sha256, info.sha256, SHA256SUMS),
    ):
        if listed != actual:
            raise KitDirInvalid(f"kit folder {kit.path}: {name} does not match {sums} (listed "
                                f"{listed}, the file hashes to {actual})")
    return replace(kit, verified=True)


# --------------------------------------------------------------------------- putting one in place


def check_tag_free(dist_dir: Path, tag: str, kit: str) -> None:
    """Refuse, before anything is built, a tag whose folder belongs to another kit: two matrix
    entries that render the same tag would otherwise delete each other's kit. The same kit's
    older build is fine: `install` replaces it."""
    final = dist_dir / tag
    if not final.exists() and not final.is_symlink():
        return
    owner, problem = _owner(final)
    if owner == kit:
        return
    if owner is None:
        raise TagTaken(f"{final} exists and is not a kit folder ({problem}); kit {kit} renders "
                       f"the tag {tag!r} and would replace it: move it away, or build into "
                       f"another --dist")
    raise TagTaken(f"kits {owner} and {kit} both render the release tag {tag!r}: {final} holds "
                   f"kit {owner}, and building kit {kit} would replace it; give one of them "
                   f"another tag in matrix.toml, or build into another --dist")


def _owner(folder: Path) -> tuple[str | None, str]:
    """(the kit that BUILDINFO.txt in `folder` names, or None and why not)."""
    if folder.is_symlink() or not folder.is_dir():
        return None, "not a folder"
    try:
        return buildinfo.read(folder / BUILDINFO).kit, ""
    except FileNotFoundError:
        return None, f"no {BUILDINFO}"
    except (BadInput, OSError) as error:
        return None, str(error)


def install(staging: Path, dist_dir: Path, tag: str, kit: str) -> KitDir:
    """Move the finished folder `staging` to dist_dir/tag with one rename.

    Under a lock on dist_dir (builds running at once take turns here): refuse a folder of
    another kit (TagTaken), check the staging folder as a kit folder, set the same kit's older
    folder aside, rename, and drop the older folder. When the rename fails the older folder is
    put back: dist/ then holds what it held before."""
    final = dist_dir / tag
    with _locked(dist_dir):
        check_tag_free(dist_dir, tag, kit)
        placed = read_kit_dir(staging)
        if placed.kit != kit:
            raise KitDirInvalid(f"{staging}: {BUILDINFO} names kit {placed.kit}, not {kit}")
        retired = dist_dir / f".retired-{tag}-{os.getpid()}"
        had_previous = final.exists()
        if had_previous:
            final.rename(retired)
        try:
            staging.rename(final)
        except BaseException as error:
            if had_previous:
                retired.rename(final)
            if isinstance(error, OSError):
                kept = "the previous kit folder is back in place" if had_previous else \
                    "dist/ is as it was"
                raise EnvironmentFailure(f"cannot move the finished kit {staging} to {final} "
                                         f"({error.strerror or error}); {kept}") from error
            raise
        _fsync_dir(dist_dir)
        shutil.rmtree(retired, ignore_errors=True)
    return replace(placed, path=final)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on the folder itself (flock works on a directory's descriptor), so
    that nothing is left in dist/ but kit folders."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
