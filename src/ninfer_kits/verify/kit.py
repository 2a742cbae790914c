"""The kit to verify, on disk: an unpacked kit, a kit archive, or a kit folder or release of it,
its SHA256SUMS (and signature, REPRODUCTION.json, MANIFEST.json) checked first, as
docs/verify.md lists. Archives are unpacked with the hardened reader into a private temporary
folder, which goes when the `with` ends."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.errors import BadInput
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.files.trees import remove_tree, walk
from ninfer_kits.inspector.archive import KitArchive, archive_format
from ninfer_kits.inspector.elf import ElfInfo, is_elf, read_elf
from ninfer_kits.kit import buildinfo
from ninfer_kits.kit.kitdir import (
    BUILD_LOG,
    BUILDINFO,
    REPRODUCTION,
    SHA256SUMS,
    SIGNATURE,
    KitDirInvalid,
    check_beside,
    check_listed,
    read_kit_dir,
)
from ninfer_kits.kit.kitmanifest import check_unpacked
from ninfer_kits.release import reproduction
from ninfer_kits.release.checksums import SHA256, parse_sums
from ninfer_kits.release.signatures import Trust, check_sums


@dataclass(frozen=True)
class KitOnDisk:
    shown: str  # what the user named
    root: Path  # the folder that holds kit/
    programs: tuple[Path, ...]  # kit/bin/*
    files: tuple[ElfInfo, ...]  # every ELF of the kit (programs and kit/lib), paths kit/...
    info: buildinfo.BuildInfo | None
    checked: str  # "SHA256SUMS ok (…)" or why nothing was checked
    # REPRODUCTION.json, checked against SHA256SUMS; None: there is none
    reproduction: reproduction.Reproduction | None = None


@dataclass(frozen=True)
class SignaturePolicy:
    """How the SHA256SUMS.sig beside a kit is judged."""

    trust: Trust | None = None  # [publish.signing]; None: not required
    insecure: bool = False  # --insecure-no-signature
    warn: Callable[[str], None] | None = None

    def check(self, folder: Path) -> str:
        """The words for folder/SHA256SUMS's signature (BadSignature when required and not
        good); none is asked of a kit folder as `build` made it: only publish signs."""
        signature = folder / SIGNATURE
        if not signature.exists() and _built_here(folder):
            return (f"unsigned: a kit folder as build made it ({BUILD_LOG} beside it), not a "
                    f"release (only publish signs)")
        words, warning = check_sums((folder / SHA256SUMS).read_bytes(),
                                    signature.read_bytes() if signature.is_file() else None,
                                    self.trust, insecure=self.insecure)
        if warning is not None and self.warn is not None:
            self.warn(f"{folder}: {warning}")
        return words


def _built_here(folder: Path) -> bool:
    try:
        read_kit_dir(folder, verify=False, built=True)
    except (KitDirInvalid, BadInput):
        return False
    return True


@contextmanager
def open_kit(path: Path, *, checked: str | None = None,
             signature: SignaturePolicy | None = None) -> Iterator[KitOnDisk]:
    """The kit at `path`, its signature and checksums checked first; `checked`: the words of
    a caller that checked the files beside kit/ itself (fetch)."""
    policy = signature or SignaturePolicy()
    if not os.path.lexists(path):
        raise BadInput(f"{path}: no such file or folder")
    if path.is_dir():
        tarballs = sorted(path.glob("*.tar.gz"))
        if (path / "kit" / "bin").is_dir() or path.name == "kit":
            root = path if (path / "kit").is_dir() else path.parent
            # fetch's DEST, or a release unpacked beside its tarball
            if checked is None:
                if root == path and (path / SHA256SUMS).is_file():
                    signed = policy.check(path)
                    sums_ok = check_listed(path)
                    files = check_unpacked(path, _listed_tarballs(path))
                    checked = f"{sums_ok}; {files}; {signed}"
                else:
                    checked = f"an unpacked kit: {check_unpacked(root)}"
            yield _read(str(path), root, checked, _reproduction(root))
            return
        if tarballs and ((path / SHA256SUMS).is_file() or (path / BUILDINFO).is_file()):
            # a kit folder or release: the signature first, then every file; the plain kit is
            # verified (without SHA256SUMS, read_kit_dir says what is missing)
            sums_signed = policy.check(path) if (path / SHA256SUMS).is_file() else ""
            finished = read_kit_dir(path)
            with _unpacked(finished.tarball) as root:
                listed = len(finished.here)
                yield _read(str(path), root, f"SHA256SUMS ok ({listed} files); {sums_signed}",
                            _reproduction(path))
            return
        raise BadInput(f"{path}: neither an unpacked kit (kit/bin/) nor a kit folder "
                       f"(a .tar.gz beside SHA256SUMS and BUILDINFO.txt)")
    with path.open("rb") as stream:
        head = stream.read(512)
    if archive_format(head) is None:
        raise BadInput(f"{path}: not a kit archive (.tar.gz, .tar.xz, .tar.bz2 or .tar), "
                       f"an unpacked kit or a kit folder")
    beside_signed = policy.check(path.parent) if (path.parent / SHA256SUMS).is_file() else None
    checked = check_beside(path) or "an archive on its own: no SHA256SUMS beside it"
    if beside_signed is not None:
        checked = f"{checked}; {beside_signed}"
    with _unpacked(path) as root:
        yield _read(str(path), root, checked, _reproduction(path.parent))


def _listed_tarballs(folder: Path) -> tuple[Path, ...]:
    """The tarballs SHA256SUMS lists: their MANIFEST.json vouches for the kit/ beside them."""
    sums_path = folder / SHA256SUMS
    sums = parse_sums(sums_path.read_text(encoding="utf-8", errors="replace"), SHA256,
                      str(sums_path), KitDirInvalid)
    return tuple(folder / name for name in sorted(sums) if name.endswith(".tar.gz")
                 and "/" not in name and (folder / name).is_file())


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
        # Links last, so that no write goes through one (`t -> .` then `s -> t/../..`).
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
        with suppress(OSError):
            remove_tree(workdir)


def _reproduction(folder: Path) -> reproduction.Reproduction | None:
    """The REPRODUCTION.json, once SHA256SUMS vouches for it and it names this release's
    tarball (KitDirInvalid otherwise); None without one."""
    path = folder / REPRODUCTION
    if not path.is_file():
        return None
    sums_path = folder / SHA256SUMS
    sums = parse_sums(sums_path.read_text(encoding="utf-8", errors="replace"), SHA256,
                      str(sums_path), KitDirInvalid) if sums_path.is_file() else {}
    if REPRODUCTION not in sums:
        raise KitDirInvalid(f"{path}: the {SHA256SUMS} beside it does not list it, so nothing "
                            f"vouches for it")
    if hash_file(path).sha256 != sums[REPRODUCTION]:
        raise KitDirInvalid(f"{path} does not match the {SHA256SUMS} beside it")
    record = reproduction.read(path)
    if not any(sums.get(name) == digest for name, digest in record.compared):
        raise KitDirInvalid(f"{path}: its key 'compared' names none of the tarballs "
                            f"{SHA256SUMS} lists with their sha256: the record of another build")
    return record


def _read(shown: str, root: Path, checked: str,
          record: reproduction.Reproduction | None = None) -> KitOnDisk:
    bin_dir = root / "kit" / "bin"
    programs = tuple(p for p in sorted(bin_dir.iterdir()) if p.is_file() and is_elf(p)) \
        if bin_dir.is_dir() else ()
    if not programs:
        raise BadInput(f"{shown}: kit/bin/ holds no program")
    elfs = [root / "kit" / relative for relative, status in walk(root / "kit")
            if stat.S_ISREG(status.st_mode) and is_elf(root / "kit" / relative)]
    files = tuple(read_elf(p, str(p.relative_to(root))) for p in elfs)
    info_path = root / "kit" / "BUILDINFO.txt"
    info = buildinfo.read(info_path) if info_path.is_file() else None
    return KitOnDisk(shown, root, programs, files, info, checked, record)
