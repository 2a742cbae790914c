"""The kit to verify, on disk: an unpacked kit (the folder holding kit/), a kit archive, or a kit
folder, dist/<tag>/ or a release of it (its SHA256SUMS is checked first). Archives are unpacked
with the hardened streaming reader into a private temporary folder, which goes when the `with`
ends."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits import buildinfo
from ninfer_kits.errors import BadInput
from ninfer_kits.inspector.archive import KitArchive, archive_format
from ninfer_kits.inspector.elf import ElfInfo, is_elf, read_elf
from ninfer_kits.kitdir import BUILDINFO, SHA256SUMS, check_beside, check_listed, read_kit_dir


@dataclass(frozen=True)
class KitOnDisk:
    shown: str  # what the user named
    root: Path  # the folder that holds kit/
    programs: tuple[Path, ...]  # kit/bin/*
    files: tuple[ElfInfo, ...]  # every ELF of the kit (programs and kit/lib), paths kit/...
    info: buildinfo.BuildInfo | None
    checked: str  # "SHA256SUMS ok (…)" or why nothing was checked


@contextmanager
def open_kit(path: Path, *, checked: str | None = None) -> Iterator[KitOnDisk]:
    """The kit at `path`, its checksums checked where there are any; `checked`: the words of a
    caller that has just checked the files beside kit/ itself (fetch), which are not hashed
    again."""
    if not os.path.lexists(path):
        raise BadInput(f"{path}: no such file or folder")
    if path.is_dir():
        tarballs = sorted(path.glob("*.tar.gz"))
        if (path / "kit" / "bin").is_dir() or path.name == "kit":
            root = path if (path / "kit").is_dir() else path.parent
            # fetch's DEST, or a release's files with the tarball unpacked beside them: what
            # SHA256SUMS lists that is here is checked, kit/ is read as it is
            if checked is None:
                checked = (f"{check_listed(path)}; kit/ as unpacked here"
                           if root == path and (path / SHA256SUMS).is_file()
                           else "an unpacked kit: no checksums to check")
            yield _read(str(path), root, checked)
            return
        if tarballs and ((path / SHA256SUMS).is_file() or (path / BUILDINFO).is_file()):
            # every file and hash of a kit folder, as `build` makes it or a release of it (a
            # second tarball must be the kit's portable sibling); the plain kit is verified
            finished = read_kit_dir(path)
            with _unpacked(finished.tarball) as root:
                yield _read(str(path), root, f"SHA256SUMS ok ({len(finished.tarballs) + 1} files)")
            return
        raise BadInput(f"{path}: neither an unpacked kit (kit/bin/) nor a kit folder "
                       f"(a .tar.gz beside SHA256SUMS and BUILDINFO.txt)")
    with path.open("rb") as stream:
        head = stream.read(512)
    if archive_format(head) is None:
        raise BadInput(f"{path}: not a kit archive (.tar.gz, .tar.xz, .tar.bz2 or .tar), "
                       f"an unpacked kit or a kit folder")
    checked = check_beside(path) or "an archive on its own: no SHA256SUMS beside it"
    with _unpacked(path) as root:
        yield _read(str(path), root, checked)


@contextmanager
def _unpacked(archive_path: Path) -> Iterator[Path]:
    workdir = Path(tempfile.mkdtemp(prefix="ninfer-kits-verify-"))
    links: list[tuple[Path, str]] = []
    try:
        with KitArchive(archive_path) as archive:
            for member in archive:
                target = workdir / member.name
                if member.kind == "folder":
                    target.mkdir(parents=True, exist_ok=True)
                elif member.kind == "symlink" and member.link is not None:
                    links.append((target, member.link))
                elif member.kind == "file":
                    target.parent.mkdir(parents=True, exist_ok=True)
                    # O_NOFOLLOW|O_EXCL: never through a link, never over another member
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                 member.mode & 0o755)
                    with os.fdopen(fd, "wb") as sink:
                        member.copy_to(sink)
        # Links last: no member is ever written through one (a chain of links that each look
        # harmless, `t -> .` then `s -> t/../..`, would otherwise lead a write out of workdir).
        for target, link in links:
            target.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(target):
                raise BadInput(f"{archive_path}: {target.relative_to(workdir)} is a link to "
                               f"{link} and also holds other members: not a kit")
            target.symlink_to(link)
        if not (workdir / "kit").is_dir():
            raise BadInput(f"{archive_path}: holds no kit/ folder")
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _read(shown: str, root: Path, checked: str) -> KitOnDisk:
    bin_dir = root / "kit" / "bin"
    programs = tuple(p for p in sorted(bin_dir.iterdir()) if p.is_file() and is_elf(p)) \
        if bin_dir.is_dir() else ()
    if not programs:
        raise BadInput(f"{shown}: kit/bin/ holds no program")
    elfs = [p for p in sorted((root / "kit").rglob("*")) if p.is_file() and not p.is_symlink()
            and is_elf(p)]
    files = tuple(read_elf(p, str(p.relative_to(root))) for p in elfs)
    info_path = root / "kit" / "BUILDINFO.txt"
    info = buildinfo.read(info_path) if info_path.is_file() else None
    return KitOnDisk(shown, root, programs, files, info, checked)
