"""`fetch`: a published kit into DEST, checked against its release's SHA256SUMS (and signature),
bound to what was asked for, unpacked in a staging folder, then switched in as one step so
that DEST holds one release's files, never a mix (docs/fetch.md, "DEST changes in one step").
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.fetch import identity
from ninfer_kits.fetch.download import (
    Aborted,
    Digests,
    Downloader,
    Feed,
    FileSource,
    HttpSource,
    Source,
    part_paths,
    prepare_part,
    read_local,
)
from ninfer_kits.fetch.extract import Extraction, FollowingArchive, extract
from ninfer_kits.fetch.http import SMALL_LIMIT, Client, NotFound, shown
from ninfer_kits.fetch.locate import (
    BUILDINFO,
    SHA1SUMS,
    SHA256SUMS,
    Located,
    RemoteFile,
    plain_file_name,
)
from ninfer_kits.files import atomic, locks
from ninfer_kits.files.trees import remove_tree
from ninfer_kits.inspector.archive import HEAD_BYTES, KitArchive, terminate_as_exit
from ninfer_kits.inspector.inputs import os_error_words
from ninfer_kits.kit.kitdir import REPRODUCTION, SIGNATURE
from ninfer_kits.log import Reporter
from ninfer_kits.release import signatures
from ninfer_kits.release.checksums import SHA1, SHA256, parse_sums

KIT = "kit"
STAGING_PREFIX = ".ninfer-kits-fetch-"
# A staging folder's new files; DEST's earlier files moved aside; the folder renamed (commit).
NEW, OLD, REPLACED = "new", "old", "replaced"
# What a fetch puts in DEST besides the tarball, replaced as one set.
RELEASE_FILES = (KIT, SHA256SUMS, SIGNATURE, SHA1SUMS, BUILDINFO, REPRODUCTION)
# What a download of no recorded size may still bring past the archive's end (a trailer).
TAIL_LIMIT = 16 << 20
# How far it may run ahead of the extractor: with TAIL_LIMIT, the most past the end.
AHEAD_LIMIT = 16 << 20
DIR = "dir"  # Located.origin of --from DIR


@dataclass(frozen=True)
class Fetched:
    located: Located
    dest: Path  # holds kit/
    tarball: Path
    digests: Digests
    checked: str  # for verify's "Kit" line: what was checked against what
    reused: bool  # the tarball was already in DEST, with the right sha256
    resumed_from: int
    reconnects: int
    seconds: float
    extraction: Extraction


class Fetcher:
    def __init__(self, client: Client, reporter: Reporter, *,
                 trust: signatures.Trust | None = None, insecure: bool = False) -> None:
        self.client = client
        self.reporter = reporter
        self.trust = trust  # the matrix's [publish.signing]: releases must be signed
        self.insecure = insecure  # --insecure-no-signature

    def _small(self, located: Located, file: RemoteFile) -> bytes:
        if located.origin == DIR:  # --from DIR: the one origin whose files are on this machine
            return read_local(Path(file.url), SMALL_LIMIT)
        return self.client.get_bytes(file.url, accept=file.accept)

    def _sums(self, located: Located) -> tuple[dict[str, str], bytes]:
        file = located.files.get(SHA256SUMS)
        if file is None:
            raise CheckFailed(f"{located.where} has no {SHA256SUMS}: the kit cannot be checked, "
                              f"and fetch does not unpack a kit it cannot check")
        try:
            data = self._small(located, file)
        except NotFound:
            raise CheckFailed(f"{located.where}: {SHA256SUMS} is not there ({shown(file.url)}): "
                              f"the kit cannot be checked") from None
        text = data.decode("utf-8", "replace")
        return parse_sums(text, SHA256, f"{located.where}: {SHA256SUMS}"), data

    def _signature(self, located: Located, sums: bytes) -> tuple[str, bytes | None]:
        """SHA256SUMS checked against its signature first: (words for `checked`, the .sig)."""
        file = located.files.get(SIGNATURE)
        data = None
        if file is not None:
            try:
                data = self._small(located, file)
            except NotFound:
                data = None
        words, warning = signatures.check_sums(sums, data, self.trust, insecure=self.insecure)
        if warning is not None:
            self.reporter.warning(f"{located.where}: {warning}")
        return words, data

    def fetch(self, located: Located, dest: Path) -> Fetched:
        """DEST complete or, when this fetch made it and fails, no DEST (a .part aside)."""
        started = time.monotonic()
        made = _missing_folders(dest)
        dest.mkdir(parents=True, exist_ok=True)
        with _only_fetch_into(dest):
            try:
                _clear_stale_staging(dest)
                return self._fetch(located, dest, started)
            except BaseException:
                _remove_empty(made)
                raise

    def _fetch(self, located: Located, dest: Path, started: float) -> Fetched:
        if not plain_file_name(located.asset):
            raise BadInput(f"{located.where}: the kit's asset {located.asset!r} is not a plain "
                           f"file name: refused")
        _check_replaceable(dest / KIT)
        sums, sums_data = self._sums(located)
        signed, signature = self._signature(located, sums_data)
        tarball = located.tarball
        sha256 = sums.get(located.asset)
        if sha256 is None:  # the names shown as they are: parse_sums refuses unprintable ones
            raise CheckFailed(f"{located.where}: {SHA256SUMS} does not list {located.asset} "
                              f"(it lists {', '.join(sorted(sums)) or 'nothing'})")
        agreed = []
        if tarball.sha256 is not None:
            if tarball.sha256 != sha256:
                raise CheckFailed(f"{located.asset}: {SHA256SUMS} says {sha256}, "
                                  f"{tarball.recorded_by} says {tarball.sha256}: refusing it")
            agreed.append(tarball.recorded_by)
        recorded = identity.check_listed(_request(located), located.asset, sha256, SHA256SUMS)
        if recorded is not None and recorded not in agreed:
            agreed.append(recorded)
        sha1, sha1_text = self._sha1(located, sums)
        extras = self._extras(located, sums)
        small = {SHA256SUMS: sums_data, SIGNATURE: signature, SHA1SUMS: sha1_text, **extras}
        with terminate_as_exit(), _staging(dest) as staging:
            result = self._tarball(located, dest, staging, sha256, sha1)
            for name, data in small.items():
                if data is not None:
                    atomic.write_file(staging / NEW / name, data)
            _switch(dest, staging, located.asset)
        digests, reused, extraction, resumed_from, reconnects = result
        parts = [f"{SHA256SUMS} ok"]
        if sha1 is not None:
            parts.append(f"{SHA1SUMS} ok" if sha1_text is not None else
                         f"sha1 ok (as {tarball.sha1_by} records it)")
        parts += [f"{who} agrees" for who in agreed]
        parts.append(_request(located).bound)
        parts.append(signed)
        checked = ", ".join(parts)
        return Fetched(located, dest, dest / located.asset, digests, checked, reused,
                       resumed_from, reconnects, time.monotonic() - started, extraction)

    def _sha1(self, located: Located, sums: dict[str, str]) -> tuple[str | None, bytes | None]:
        """The recorded SHA-1 and SHA1SUMS's bytes, checked against SHA256SUMS."""
        recorded = located.tarball.sha1
        file = located.files.get(SHA1SUMS)
        if file is None:
            return recorded, None
        try:
            data = self._small(located, file)
        except NotFound:
            return recorded, None
        actual = hashlib.sha256(data).hexdigest()
        if SHA1SUMS in sums and actual != sums[SHA1SUMS]:
            raise CheckFailed(f"{located.where}: {SHA1SUMS} does not match {SHA256SUMS} "
                              f"(listed {sums[SHA1SUMS]}, the file hashes to {actual})")
        listed = parse_sums(data.decode("utf-8", "replace"), SHA1,
                            f"{located.where}: {SHA1SUMS}").get(located.asset)
        if listed is None:
            return recorded, None
        if recorded is not None and recorded != listed:
            raise CheckFailed(f"{located.asset}: {SHA1SUMS} says {listed}, "
                              f"{located.tarball.sha1_by} says {recorded}: refusing it")
        return listed, data

    def _extras(self, located: Located, sums: dict[str, str]) -> dict[str, bytes]:
        """BUILDINFO.txt and REPRODUCTION.json where SHA256SUMS lists them, checked."""
        extras = {}
        for name in (BUILDINFO, REPRODUCTION):
            file = located.files.get(name)
            if name not in sums:
                continue
            if file is None:
                if name == BUILDINFO:
                    continue
                raise CheckFailed(f"{located.where}: {SHA256SUMS} lists {name}, which the "
                                  f"release does not hold")
            data = self._small(located, file)
            actual = hashlib.sha256(data).hexdigest()
            if actual != sums[name]:
                raise CheckFailed(f"{located.where}: {name} does not match {SHA256SUMS} "
                                  f"(listed {sums[name]}, the file hashes to {actual})")
            extras[name] = data
        return extras

    def _source(self, located: Located, file: RemoteFile) -> Source:
        """The tarball's source; any URL is opened over http(s) only (UrlPolicy)."""
        if located.origin == DIR:
            return FileSource(Path(file.url))
        return HttpSource(self.client, file.url, file.accept)

    def _tarball(self, located: Located, dest: Path, staging: Path, sha256: str,
                 sha1: str | None) -> tuple[Digests, bool, Extraction, int, int]:
        """The tarball, checked, with kit/ unpacked beside it in staging/NEW."""
        new = staging / NEW
        final = dest / located.asset
        reuse = _existing(final, sha256, sha1)
        if reuse is not None:
            with KitArchive(final, shown=located.asset) as archive:
                extraction = extract(archive, new, archive_size=reuse.size)
            self._bind(located, dest, new / KIT)
            _link_or_copy(final, new / located.asset)
            return reuse, True, extraction, reuse.size, 0
        digests, extraction, resumed_from, reconnects = self._download(
            located, located.tarball, dest, new, sha256, sha1)
        self._bind(located, dest, new / KIT)
        part, marker = part_paths(dest, located.asset)
        os.replace(part, new / located.asset)
        marker.unlink(missing_ok=True)
        return digests, False, extraction, resumed_from, reconnects

    def _bind(self, located: Located, dest: Path, kit: Path) -> None:
        """Bind the unpacked kit/BUILDINFO.txt to the request; a refused download is removed."""
        try:
            identity.check_unpacked(_request(located), located.asset, kit, located.where)
        except CheckFailed:
            _remove(*part_paths(dest, located.asset))
            raise

    def _download(self, located: Located, tarball: RemoteFile, dest: Path, staging: Path,
                  sha256: str, sha1: str | None) -> tuple[Digests, Extraction, int, int]:
        part, marker = part_paths(dest, located.asset)
        have = prepare_part(dest, located.asset, sha256)
        if have:
            self.reporter.info(f"resuming {located.asset} from byte {have} ({part.name})")
        feed = Feed(ahead=None if tarball.size is not None else AHEAD_LIMIT)
        bar = self.reporter.progress(f"downloading {located.asset}")
        downloader = Downloader(self._source(located, tarball), part,
                                expected_size=tarball.size, sha1=sha1 is not None, feed=feed,
                                pace=self.client.pace,
                                progress=lambda done, total: bar.bytes(done, total or 0))
        thread = threading.Thread(target=downloader.run, name="ninfer-kits-download",
                                  daemon=True)
        thread.start()
        extraction: Extraction | None = None
        unreadable: BadInput | None = None
        try:
            try:
                feed.wait_for(HEAD_BYTES - 1)
                size = tarball.size or 0

                def bound() -> None:  # no size recorded: the archive's end bounds the body
                    if tarball.size is None:
                        downloader.limit = feed.written + TAIL_LIMIT
                        feed.release()

                with FollowingArchive(part, feed, shown=located.asset, at_end=bound) as archive:
                    extraction = extract(archive, staging, archive_size=size)
            except Aborted:
                pass  # the downloader's error, below
            except BadInput as error:
                unreadable = error
                if not feed.done:  # no use downloading on what cannot be unpacked
                    feed.abort()
            thread.join()
        finally:
            if thread.is_alive():  # Ctrl-C, SIGTERM or a failure above: stop the download
                feed.abort()
                thread.join(timeout=5)
        if unreadable is not None and downloader.digests is None:
            _remove(part, marker)  # stopped early: a damaged download or a hostile archive
            raise BadInput(f"{unreadable} (the download was stopped at byte "
                           f"{downloader.have} and deleted)") from unreadable
        if feed.error is not None:
            if not _resumable(feed.error):  # a refusal: nothing of it stays in DEST
                _remove(part, marker)
            raise feed.error
        digests = downloader.digests
        assert digests is not None
        self._check(located, digests, sha256, sha1, part, marker)
        if unreadable is not None:  # the bytes are the release's, and cannot be unpacked
            _remove(part, marker)
            raise unreadable
        assert extraction is not None
        rate = (digests.size - downloader.resumed_from) / max(time.monotonic() - bar.started,
                                                             1e-6)
        self.reporter.info(f"downloaded {located.asset}: {digests.size / 1e6:.1f} MB "
                           f"({rate / 1e6:.0f} MB/s), {extraction.files} files unpacked")
        return digests, extraction, downloader.resumed_from, downloader.reconnects

    def _check(self, located: Located, digests: Digests, sha256: str, sha1: str | None,
               part: Path, marker: Path) -> None:
        problems = []
        if digests.sha256 != sha256:
            problems.append(f"sha256 {digests.sha256}, {SHA256SUMS} says {sha256}")
        if sha1 is not None and digests.sha1 != sha1:
            problems.append(f"sha1 {digests.sha1}, recorded {sha1}")
        if problems:
            _remove(part, marker)
            raise CheckFailed(f"{located.asset} from {located.where}: checksum mismatch "
                              f"({'; '.join(problems)}): nothing was unpacked and the download "
                              f"was deleted")


@contextmanager
def _only_fetch_into(dest: Path) -> Iterator[None]:
    """One fetch at a time into DEST (a lock on the folder itself)."""
    with locks.held(dest, busy=lambda _: EnvironmentFailure(
            f"another fetch into {dest} is running; wait for it, or give another --dest")):
        yield


def _clear_stale_staging(dest: Path) -> None:
    """Staging folders of killed fetches (their process gone), a half switch settled first."""
    for path in dest.glob(f"{STAGING_PREFIX}*"):
        pid = path.name[len(STAGING_PREFIX):].partition("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _settle_or_explain(dest, path)
            _discard(path)
        except PermissionError:
            pass  # someone else's live process


@contextmanager
def _staging(dest: Path) -> Iterator[Path]:
    """A private folder in DEST for the new release's files, settled and removed at the end."""
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=dest))
    (staging / NEW).mkdir()
    try:
        yield staging
    finally:
        _settle_or_explain(dest, staging)
        _discard(staging)


def _switch(dest: Path, staging: Path, asset: str) -> None:
    """Replace DEST's release files by staging/NEW's: DEST's into OLD, OLD renamed to REPLACED
    (the commit), the new ones in; signals wait, a failure is settled before it is told."""
    old = staging / OLD
    with _signals_deferred():
        try:
            _check_replaceable(dest / KIT)
            old.mkdir()
            for name in dict.fromkeys((*RELEASE_FILES, asset)):
                if os.path.lexists(dest / name):
                    os.rename(dest / name, old / name)
            os.rename(old, staging / REPLACED)
            for name in sorted(os.listdir(staging / NEW)):
                os.rename(staging / NEW / name, dest / name)
        except OSError as error:
            held = _settle_or_explain(dest, staging)
            raise EnvironmentFailure(f"cannot put the new release's files in {dest} "
                                     f"({os_error_words(error)}): {held}") from error
    atomic.fsync_dir(dest)


def _settle(dest: Path, staging: Path) -> str:
    """Finish a switch left in `staging`: before its commit the old files go back, after it the
    new ones go in. Which release DEST holds, in words; OSError when a move fails."""
    if (staging / REPLACED).is_dir():
        _move_all(staging / NEW, dest)
        return f"{dest} holds the new release's files"
    if (staging / OLD).is_dir():
        _move_all(staging / OLD, dest)
        return f"{dest} holds the earlier release's files, as before"
    return f"{dest} is as it was"


def _settle_or_explain(dest: Path, staging: Path) -> str:
    try:
        return _settle(dest, staging)
    except OSError as error:
        raise EnvironmentFailure(
            f"cannot finish switching {dest} to another release's files "
            f"({os_error_words(error)}: {error.filename}): what is not in {dest} is in "
            f"{staging}; the next fetch into {dest} finishes it") from error


def _move_all(folder: Path, dest: Path) -> None:
    for name in sorted(os.listdir(folder)):
        os.rename(folder / name, dest / name)


def _discard(staging: Path) -> None:
    """Remove a settled staging folder, best effort (the next fetch tries again)."""
    with suppress(OSError):
        remove_tree(staging)


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM in the block act when it ends (a half switch would mix releases);
    outside the main thread the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {number: signal.signal(number, lambda got, _: arrived.append(got))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        for got in arrived:
            signal.raise_signal(got)


def _link_or_copy(source: Path, target: Path) -> None:
    """The tarball already in DEST, in the staging folder too (a hard link, else a copy)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _existing(final: Path, sha256: str, sha1: str | None) -> Digests | None:
    """The digests of DEST/<asset> from an earlier fetch, when it is the file wanted."""
    try:
        status = final.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(status.st_mode):
        raise BadInput(f"{final} exists and is not a regular file: move it away")
    hashed = atomic.hash_file(final)
    if hashed.sha256 != sha256 or (sha1 is not None and hashed.sha1 != sha1):
        return None
    return Digests(hashed.size, sha256, sha1)


def _check_replaceable(kit: Path) -> None:
    """DEST/kit may be replaced only when it is a kit (an earlier fetch of one)."""
    if not os.path.lexists(kit):
        return
    if kit.is_symlink() or not kit.is_dir() or not (kit / "BUILDINFO.txt").is_file():
        raise BadInput(f"{kit} exists and is not a kit (no kit/BUILDINFO.txt): fetch would "
                       f"replace it; move it away or give another --dest")


def _missing_folders(dest: Path) -> list[Path]:
    """DEST and its missing parents, deepest first."""
    missing = []
    folder = dest.absolute()
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """The folders a failed fetch made, where empty (deepest first)."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _resumable(error: BaseException) -> bool:
    """Whether the failure (network or disk, not a refusal) leaves a .part worth resuming."""
    return isinstance(error, EnvironmentFailure) and not isinstance(error, NotFound)


def _remove(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _request(located: Located) -> identity.Request:
    """What was asked for: locate's, else a hand-made Located's own (refused: unbindable)."""
    return located.request or identity.Request(located.tag, located.asset, located.kit)


def describe(fetched: Fetched) -> list[str]:
    """The lines fetch prints before verify's table."""
    located = fetched.located
    how = "already here, checked" if fetched.reused else (
        f"resumed from byte {fetched.resumed_from}" if fetched.resumed_from else "downloaded")
    if fetched.reconnects:
        how += f", {fetched.reconnects} reconnect{'s' * (fetched.reconnects != 1)}"
    kit = f" (kit {located.kit})" if located.kit else ""
    lines = [
        f"release   {located.where}{kit}",
        f"tarball   {fetched.tarball} ({fetched.digests.size:,} bytes; {how})",
        f"sha256    {fetched.digests.sha256}",
    ]
    if fetched.digests.sha1:
        lines.append(f"sha1      {fetched.digests.sha1}")
    lines.append(f"checked   {fetched.checked}")
    lines.append(f"unpacked  {fetched.dest / KIT} ({fetched.extraction.files} files, "
                 f"{fetched.extraction.bytes:,} bytes) in {fetched.seconds:.1f} s")
    return lines

