"""kit/MANIFEST.json: a kit's own files by sha256, packed in its tarball so that the signature
covers them once unpacked (docs/release.md, "Inside the kit", says which manifest is trusted).
Standard library only (the .pyz runs verify), and every walk a loop, whatever the tree's depth.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ninfer_kits.errors import BadInput, CheckFailed

KIT: Final = "kit"  # the folder a kit tarball holds (kitdir.UNPACKED)
NAME: Final = "MANIFEST.json"
PATH: Final = f"{KIT}/{NAME}"  # its name inside the tarball and in the folder that holds kit/
FORMAT: Final = 1
MAX_BYTES: Final = 16 << 20  # a kit of 100,000 files lists them in under 16 MiB
SHOWN: Final = 8  # paths named per kind of difference before "and N more"
_READ: Final = 1 << 20


class ManifestMismatch(CheckFailed):
    """kit/ is not what its manifest lists: a file changed, missing or added."""


@dataclass(frozen=True)
class Entry:

    sha256: str | None = None
    executable: bool = False
    link: str | None = None

    def as_json(self) -> dict[str, object]:
        if self.link is not None:
            return {"link": self.link}
        return {"sha256": self.sha256, "executable": self.executable}


def _walk(folder: Path, prefix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(path under `prefix`, entry) of everything below `folder` but folders."""
    pending = [(folder, prefix)]
    while pending:
        current, name = pending.pop()
        with os.scandir(current) as listing:
            for entry in listing:
                path = f"{name}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    pending.append((Path(entry.path), path))
                else:
                    yield path, entry


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_READ):
            digest.update(chunk)
    return digest.hexdigest()


def _entry(entry: os.DirEntry[str]) -> Entry | None:
    """None for what a kit never holds (a FIFO, a device, a socket)."""
    status = entry.stat(follow_symlinks=False)
    if stat.S_ISLNK(status.st_mode):
        return Entry(link=os.readlink(entry.path))
    if stat.S_ISREG(status.st_mode):
        return Entry(sha256=_sha256(Path(entry.path)), executable=bool(status.st_mode & 0o111))
    return None


def entries_of(kit: Path) -> dict[str, Entry | None]:
    """Every path below `kit` (as kit/<path>) but kit/MANIFEST.json."""
    return {path: _entry(entry) for path, entry in _walk(kit, KIT) if path != PATH}


def render(entries: Mapping[str, Entry]) -> bytes:
    """The manifest's bytes: sorted, no times, ASCII, one line per path."""
    files = {path: entries[path].as_json() for path in sorted(entries)}
    return (json.dumps({"format": FORMAT, "files": files}, sort_keys=True, indent=0,
                       ensure_ascii=True) + "\n").encode("ascii")


def write(kit: Path) -> Path:
    entries = entries_of(kit)
    odd = sorted(path for path, entry in entries.items() if entry is None)
    if odd:
        raise BadInput(f"{kit}: {odd[0]} is not a file, folder or symlink; it cannot go in a kit")
    path = kit / NAME
    path.write_bytes(render({name: entry for name, entry in entries.items()
                             if entry is not None}))
    return path


def parse(data: bytes, shown: str) -> dict[str, Entry]:
    """A manifest's entries; ManifestMismatch naming `shown` when it is not one."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"not a format {FORMAT} manifest")
        files = document["files"]
        if not isinstance(files, dict):
            raise ValueError("'files' is not an object")
        return {str(path): _parsed(value) for path, value in files.items()}
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise ManifestMismatch(f"{shown} is not a kit manifest ({error})") from None


def _parsed(value: object) -> Entry:
    if not isinstance(value, dict):
        raise ValueError("an entry is not an object")
    if "link" in value:
        return Entry(link=str(value["link"]))
    digest = value["sha256"]
    if not isinstance(digest, str) or len(digest) != 64:
        raise ValueError(f"{digest!r} is not a sha256")
    return Entry(sha256=digest, executable=bool(value["executable"]))


def from_tarball(tarball: Path) -> bytes | None:
    """The tarball's kit/MANIFEST.json, or None. Members are sorted, so reading stops past it."""
    from ninfer_kits.inspector.archive import KitArchive

    with KitArchive(tarball, memory_limit=MAX_BYTES) as archive:
        for member in archive:
            if member.name == PATH and member.kind == "file":
                return member.read()
            if os.fsencode(member.name) > os.fsencode(PATH):
                return None
    return None


@dataclass(frozen=True)
class Differences:
    changed: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    added: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.changed) + len(self.missing) + len(self.added)

    def words(self) -> str:
        from ninfer_kits.inspector.inputs import printable

        parts = []
        for what, paths in (("changed", self.changed), ("missing", self.missing),
                            ("added", self.added)):
            if paths:
                more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
                parts.append(f"{what}: {', '.join(printable(p) for p in paths[:SHOWN])}{more}")
        return "; ".join(parts)


def _change(expected: Entry, actual: Entry | None) -> str | None:
    """Why a path differs from the manifest's entry (None: it does not)."""
    if actual == expected:
        return None
    if actual is None:
        return "not a file or symlink"
    if expected.link is not None and actual.link is not None:
        return "link target"
    if actual.link is not None:
        return "a link instead of a file"
    if expected.link is not None:
        return "a file instead of a link"
    return "content" if actual.sha256 != expected.sha256 else "executable bit"


def differences(expected: Mapping[str, Entry], kit: Path, manifest: bytes) -> Differences:
    """How `kit` and its own manifest differ from the trusted `expected` and `manifest`."""
    found = entries_of(kit)
    changed = [f"{path} ({why})" for path in sorted(set(expected) & set(found))
               if (why := _change(expected[path], found[path])) is not None]
    missing = sorted(set(expected) - set(found))
    own = kit / NAME
    if not own.is_file() or own.is_symlink():
        missing = sorted((*missing, PATH))
    elif own.read_bytes() != manifest:
        changed = sorted((*changed, f"{PATH} (content)"))
    return Differences(tuple(changed), tuple(missing), tuple(sorted(set(found) - set(expected))))


def check_unpacked(root: Path, tarballs: Sequence[Path] = ()) -> str:
    """Check root/kit/ against the trusted manifest: the words for what was checked;
    ManifestMismatch naming what changed, is missing and was added."""
    kit = root / KIT
    carried = [(tarball.name, data) for tarball in tarballs
               if (data := from_tarball(tarball)) is not None]
    if tarballs and not carried:
        return (f"{KIT}/ not checked file by file: {', '.join(t.name for t in tarballs)} "
                f"carries no {PATH} (packed before kits listed their files)")
    if not carried:
        own = kit / NAME
        if not own.is_file():
            return f"{KIT}/ not checked file by file: no {PATH} (a kit packed before kits " \
                   f"listed their files)"
        carried = [(f"its own {PATH}", own.read_bytes())]
    judged = [(name, data, parse(data, f"{name}: {PATH}")) for name, data in carried]
    found = [(name, entries, differences(entries, kit, data))
             for name, data, entries in judged]
    name, entries, nearest = min(found, key=lambda item: item[2].count)
    if nearest.count:
        raise ManifestMismatch(f"{kit} is not as {name} lists it: {nearest.words()}")
    if not tarballs:
        return (f"{KIT}/ as its own {PATH} lists it ({len(entries)} files; no tarball beside "
                f"it vouches for that list)")
    return f"{KIT}/ as {name} lists it ({len(entries)} files)"
