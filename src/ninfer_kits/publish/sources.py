"""A portable kit's source debt paid at publish: the Debian source packages its SOURCES.json
records, fetched by the host's apt-get on a scratch configuration (none of the host's apt state
read or written), else from the snapshot archive, checked and cached (docs/portable.md,
"Copyleft"). SourcesUnreachable is exit 3, SourceMismatch exit 1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ninfer_kits.errors import CheckFailed, EnvironmentFailure
from ninfer_kits.fetch.http import Client, HttpFailure, NotFound, TooLarge
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.host.children import ProbeTimeout, probe
from ninfer_kits.kit.owed_sources import Archive, OwedPackage, OwedSources, SourceFile
from ninfer_kits.matrix import SourcesConfig

STORE = "sources"  # the cache's folder of fetched source packages
MANIFEST = "SHA256SUMS"  # in each cached package's folder: what the archive's index said
APT_TIMEOUT = 1800  # a cold fetch of the example's sources is ~400 MB
SNAPSHOT_LIMIT = 1 << 20  # a srcfiles answer is a few kB
# What apt-get source --print-uris prints per file: 'URI' NAME SIZE SHA256:HEX
_URI = re.compile(r"'(?P<uri>[^']+)' (?P<name>\S+) (?P<size>[0-9]+) "
                  r"SHA256:(?P<sha256>[0-9a-f]{64})")
_MISMATCH = ("Hash Sum mismatch", "File has unexpected size", "Hashes of expected file")
_ARCHIVE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
_FIRST_SEEN = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_SHA1 = re.compile(r"[0-9a-f]{40}")


class SourcesUnreachable(EnvironmentFailure):
    """An owed source package is in none of the archives tried (or they did not answer)."""


class SourceMismatch(CheckFailed):
    """A fetched source file does not match the archive's signed index or its .dsc."""


class _NotThere(Exception):
    """apt-get found no such source version in the archives it was given."""


def fetch_owed(record: OwedSources, config: SourcesConfig, cache_dir: Path,
               log: Callable[[str], None]) -> tuple[SourceFile, ...]:
    """Every file `record` owes, checked, from `cache_dir`/sources/ or fetched there (the
    archives, then the snapshot archive), sorted by name."""
    store = cache_dir / STORE
    files: list[SourceFile] = []
    todo: list[OwedPackage] = []
    for package in record.packages:
        cached = _cached(store / package.stem, package)
        files += cached or []
        if cached is None:
            todo.append(package)
    if not todo:
        log(f"sources: {len(record.packages)} source packages, all in the cache ({store})")
        return tuple(sorted(files, key=lambda item: item.name))
    log(f"sources: fetching {len(todo)} source package(s) with apt-get (cached: "
        f"{len(record.packages) - len(todo)})")
    archives = _archives(record, config)
    unasked = [f"{a.uri} (not http(s): name a mirror in its place)" for a in record.archives
               if config.mirror is None and not a.fetchable]
    tried = {package: [*dict.fromkeys(a.uri for a in archives), *unasked] for package in todo}
    missing = _fetch_all(todo, archives, record, config, store, log, files)
    for package in missing:
        where, urls = _snapshot_archives(package, record, config, log)
        tried[package] += urls
        if not where or _fetch_all([package], where, record, config, store, log, files,
                                   snapshot=True):
            raise SourcesUnreachable(
                f"source package {package.name} {package.version} (of the bundled "
                f"{', '.join(package.binaries)}) is in none of the archives tried, so the kit "
                f"cannot be distributed; nothing was published. Tried: "
                f"{', '.join(tried[package])}. Name a mirror or snapshot that has it in "
                f"[publish.sources] of matrix.toml, or rebuild the kit against the archive's "
                f"current packages")
    return tuple(sorted(files, key=lambda item: item.name))


def _archives(record: OwedSources, config: SourcesConfig) -> tuple[Archive, ...]:
    """The recorded http(s) archives, or the mirror in place of each."""
    if config.mirror is None:  # a mirror list or a path of the build host: not for us
        return tuple(archive for archive in record.archives if archive.fetchable)
    mirrored = {Archive(config.mirror, a.suites, a.components, a.keyrings)
                for a in record.archives}
    return tuple(sorted(mirrored, key=lambda a: (a.suites, a.components, a.keyrings)))


def _fetch_all(packages: Sequence[OwedPackage], archives: Sequence[Archive],
               record: OwedSources, config: SourcesConfig, store: Path,
               log: Callable[[str], None], files: list[SourceFile], *,
               snapshot: bool = False) -> list[OwedPackage]:
    """Fetch `packages` into the cache (adding to `files`); those the archives lack."""
    missing = []
    with tempfile.TemporaryDirectory(prefix="ninfer-kits-apt-") as scratch:
        apt = _Apt(Path(scratch), archives, record, config, snapshot)
        apt.update(log)
        for package in packages:
            try:
                files += apt.fetch(package, store)
            except _NotThere as error:
                log(f"sources: {package.name} {package.version}: not in "
                    f"{', '.join(dict.fromkeys(a.uri for a in archives))}: {error}")
                missing.append(package)
                continue
            log(f"sources: fetched {package.name} {package.version}")
    return missing


def _snapshot_archives(package: OwedPackage, record: OwedSources, config: SourcesConfig,
                       log: Callable[[str], None]) -> tuple[tuple[Archive, ...], list[str]]:
    """The snapshot archives that first held `package`'s .dsc, and the URLs asked."""
    base = config.snapshot.rstrip("/")
    url = (f"{base}/mr/package/{urllib.parse.quote(package.name, safe='')}/"
           f"{urllib.parse.quote(package.version, safe='')}/srcfiles?fileinfo=1")
    client = Client(servers=(config.snapshot,))
    try:
        answer = json.loads(client.get_bytes(url, accept="application/json",
                                             limit=SNAPSHOT_LIMIT))
        seen = _first_seen(answer, f"{package.stem}.dsc")
    except NotFound:
        log(f"sources: {url}: no such version")
        return (), [url]
    except (HttpFailure, TooLarge, ValueError) as error:
        log(f"sources: {url}: {error}")
        return (), [f"{url} ({error})"]
    archives = tuple(Archive(f"{base}/archive/{name}/{when}/", a.suites, a.components,
                             a.keyrings) for name, when in seen for a in record.archives)
    return archives, [url, *sorted({a.uri for a in archives})]


def _first_seen(answer: Any, dsc: str) -> list[tuple[str, str]]:
    """(archive, first-seen timestamp) of each place snapshot says held `dsc`; ValueError
    naming a field that is wrong."""
    if not isinstance(answer, dict) or not isinstance(answer.get("result"), list) or \
            not isinstance(answer.get("fileinfo"), dict):
        raise ValueError("the answer has no result list and fileinfo object")
    hashes = [item.get("hash") if isinstance(item, dict) else None for item in answer["result"]]
    if not all(isinstance(h, str) and _SHA1.fullmatch(h) for h in hashes):
        raise ValueError("a result's hash is not a sha1")
    found: set[tuple[str, str]] = set()
    for sha1 in hashes:
        infos = answer["fileinfo"].get(sha1)
        if not isinstance(infos, list):
            raise ValueError(f"fileinfo has no list for {sha1}")
        for info in infos:
            if not _valid_info(info):
                raise ValueError(f"fileinfo of {sha1}: {ascii(info)[:200]} is not "
                                 "{archive_name, first_seen, name, path, size}")
            if info["name"] == dsc:
                found.add((info["archive_name"], info["first_seen"]))
    return sorted(found)


def _valid_info(info: Any) -> bool:
    return (isinstance(info, dict)
            and sorted(info) == ["archive_name", "first_seen", "name", "path", "size"]
            and isinstance(info["archive_name"], str)
            and bool(_ARCHIVE_NAME.fullmatch(info["archive_name"]))
            and isinstance(info["first_seen"], str)
            and bool(_FIRST_SEEN.fullmatch(info["first_seen"]))
            and isinstance(info["name"], str) and isinstance(info["path"], str)
            and isinstance(info["size"], int) and not isinstance(info["size"], bool)
            and info["size"] >= 0)


def _cached(folder: Path, package: OwedPackage) -> list[SourceFile] | None:
    """The cached files of `package`, rechecked; None when absent or not checking."""
    try:
        listed = dict(line.split("  ", 1)[::-1] for line in
                      (folder / MANIFEST).read_text(encoding="utf-8").splitlines())
    except (OSError, ValueError):
        return None
    try:
        return checked(folder, package, {name: (None, sha) for name, sha in listed.items()})
    except SourceMismatch:
        return None


def checked(folder: Path, package: OwedPackage,
            expected: dict[str, tuple[int | None, str]]) -> list[SourceFile]:
    """The files of `folder`, once each matches the archive's size and sha256 and the .dsc
    names exactly the others, with the same hashes."""
    names = sorted(os.listdir(folder))
    if sorted(expected) != [name for name in names if name != MANIFEST]:
        raise SourceMismatch(f"{folder}: holds {', '.join(names)}; the archive lists "
                             f"{', '.join(sorted(expected))} for {package.name} "
                             f"{package.version}")
    files = []
    for name in sorted(expected):
        size, sha256 = expected[name]
        hashed = hash_file(folder / name)
        if hashed.sha256 != sha256 or (size is not None and hashed.size != size):
            raise SourceMismatch(f"{folder / name}: sha256 {hashed.sha256}, {hashed.size} "
                                 f"bytes; the archive's index says {sha256}"
                                 f"{f', {size} bytes' if size is not None else ''}")
        files.append(SourceFile(package.name, package.version, name, folder / name,
                                hashed.size, hashed.sha256))
    dsc = folder / f"{package.stem}.dsc"
    if not dsc.is_file():
        raise SourceMismatch(f"{folder}: no {dsc.name} for {package.name} {package.version}")
    in_dsc = dsc_checksums(dsc.read_text(encoding="utf-8", errors="replace"))
    others = {item.name: item.sha256 for item in files if item.name != dsc.name}
    if in_dsc != others:
        raise SourceMismatch(f"{dsc}: its Checksums-Sha256 lists {in_dsc}; the files "
                             f"fetched are {others}")
    return files


def dsc_checksums(text: str) -> dict[str, str]:
    """File name → sha256 from a .dsc's Checksums-Sha256 (signed or not)."""
    match = re.search(r"^Checksums-Sha256:[ \t]*\n((?:[ \t]+\S.*\n?)+)", text, re.MULTILINE)
    if match is None:
        return {}
    rows = (line.split() for line in match.group(1).splitlines())
    return {row[2]: row[0] for row in rows if len(row) == 3}


class _Apt:
    """The host's apt-get on a scratch configuration: deb-src lines for `archives`, each
    trusting only its keyrings; lists, cache and status in `scratch`."""

    def __init__(self, scratch: Path, archives: Sequence[Archive], record: OwedSources,
                 config: SourcesConfig, snapshot: bool) -> None:
        self.apt_get = shutil.which("apt-get")
        if self.apt_get is None:
            raise EnvironmentFailure("apt-get not found: publishing a portable kit fetches the "
                                     "Debian source packages it owes with apt-get (publish on "
                                     "a Debian or Ubuntu host)")
        self.scratch = scratch
        for sub in ("lists/partial", "cache/archives/partial", "parts", "prefs", "trusted.d",
                    "keyrings"):
            (scratch / sub).mkdir(parents=True)
        (scratch / "status").write_text("", encoding="utf-8")
        for keyring in record.keyrings:
            (scratch / "keyrings" / keyring.name).write_bytes(keyring.data)
        extra = (config.keyring,) if config.keyring is not None else ()
        lines = [_deb_src(archive, scratch / "keyrings", extra, snapshot) for archive in archives]
        (scratch / "sources.list").write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.options = [
            "-o", f"Dir::Etc::sourcelist={scratch / 'sources.list'}",
            "-o", f"Dir::Etc::sourceparts={scratch / 'parts'}",
            "-o", f"Dir::Etc::preferencesparts={scratch / 'prefs'}",
            "-o", f"Dir::Etc::trusted={scratch / 'trusted.gpg'}",  # none: only signed-by
            "-o", f"Dir::Etc::trustedparts={scratch / 'trusted.d'}",
            "-o", f"Dir::State::Lists={scratch / 'lists'}",
            "-o", f"Dir::State::status={scratch / 'status'}",
            "-o", f"Dir::Cache={scratch / 'cache'}",
            "-o", "Debug::NoLocking=1", "-o", "Acquire::Retries=3",
            "-o", "APT::Get::Only-Source=true", "-q",
        ]
        if os.geteuid() == 0:  # apt's _apt user could not write the scratch folder
            self.options += ["-o", "APT::Sandbox::User=root"]

    def _run(self, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
        command = [str(self.apt_get), *self.options, *args]
        try:
            done = probe(command, timeout=APT_TIMEOUT, cwd=cwd,
                         env={**os.environ, "LC_ALL": "C.UTF-8"})
        except ProbeTimeout as error:
            raise SourcesUnreachable(str(error)) from None
        return done.returncode, done.stdout, done.stderr

    def update(self, log: Callable[[str], None]) -> None:
        """Read the archives' source indexes; one that fails is logged, not fatal."""
        code, out, err = self._run("update")
        if code != 0 or "W: " in err or "E: " in err:
            log(f"sources: apt-get update: {(err or out).strip()[-1500:]}")

    def fetch(self, package: OwedPackage, store: Path) -> list[SourceFile]:
        spec = f"{package.name}={package.version}"
        code, printed, err = self._run("source", "--print-uris", spec)
        if code != 0:
            raise _NotThere(err.strip()[-500:])
        expected: dict[str, tuple[int | None, str]] = {
            m["name"]: (int(m["size"]), m["sha256"]) for m in _URI.finditer(printed)}
        if f"{package.stem}.dsc" not in expected:
            raise SourceMismatch(f"apt-get source --print-uris {spec} named no "
                                 f"{package.stem}.dsc:\n{printed.strip()[-1500:]}")
        store.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{package.stem}-", dir=store))
        try:
            code, out, err = self._run("source", "--download-only", spec, cwd=work)
            if code != 0:
                said = (err or out).strip()[-1500:]
                if any(sign in said for sign in _MISMATCH):
                    raise SourceMismatch(f"source package {package.name} {package.version}: "
                                         f"apt-get source --download-only failed ({code}): "
                                         f"{said}")
                raise _NotThere(said)  # the index lists it, the pool does not serve it
            files = checked(work, package, expected)
            manifest = "".join(f"{item.sha256}  {item.name}\n" for item in files)
            (work / MANIFEST).write_text(manifest, encoding="utf-8")
            os.chmod(work, 0o755)  # mkdtemp's 0700: the cache is as readable as its files
            final = store / package.stem
            shutil.rmtree(final, ignore_errors=True)  # one that did not check
            work.rename(final)  # whole or not at all: a cache reader never sees half of it
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return [SourceFile(item.package, item.version, item.name, final / item.name, item.size,
                           item.sha256) for item in files]


def _deb_src(archive: Archive, keyrings: Path, extra: Sequence[Path], snapshot: bool) -> str:
    """An archive's deb-src lines, one per suite; a snapshot's Release has long expired
    (check-valid-until=no), its signature is still checked."""
    keys = ",".join([str(keyrings / name) for name in archive.keyrings] + [str(p) for p in extra])
    options = ([f"signed-by={keys}"] if keys else []) + \
        (["check-valid-until=no"] if snapshot else [])
    opened = f" [{' '.join(options)}]" if options else ""
    return "\n".join(f"deb-src{opened} {archive.uri} {' '.join((suite, *archive.components))}"
                     for suite in archive.suites)
