"""`fetch`: a published kit into DEST, checked against its release's SHA256SUMS, unpacked.

DEST (default ./<tag>/) ends up holding what `curl -O` of the release and `tar xzf … -C DEST`
would leave, once every checksum matched:

    DEST/kit/…            the kit, unpacked (kit/bin/ninfer, kit/bin/ninfer-serve, …)
    DEST/<asset>          the tarball, under its final name only once its sha256 matched
    DEST/SHA256SUMS       as the release has it (`sha256sum -c SHA256SUMS` works there)
    DEST/SHA1SUMS, DEST/BUILDINFO.txt   when the release has them (BUILDINFO.txt checked too)
    DEST/SHA256SUMS.sig   when the release is signed (checked before SHA256SUMS is trusted)

SHA256SUMS is checked against the release's SHA256SUMS.sig first (signatures.check_sums): with
the matrix's [publish.signing] a missing or bad signature is refused (exit 1) unless
--insecure-no-signature (a loud warning); without it, a release without one is "unsigned", as
every release made before signing is.

With --portable the tarball is the release's `<stem>-portable.tar.gz`, and everything below is
the same. A release with both tarballs lists both in SHA256SUMS and SHA1SUMS while DEST holds
one: there `sha256sum -c --ignore-missing SHA256SUMS` checks what is here.

The tarball is written to `.<asset>.part` and unpacked, while it arrives, into a private staging
folder in DEST; only when its sha256 (and sha1 where one is recorded) matches does the staging
folder become DEST/kit and the .part file DEST/<asset>. A mismatch removes both: nothing is
extracted and no half file has the final name. The checksums cannot be skipped: a release
without SHA256SUMS, or whose SHA256SUMS does not list the tarball, is refused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits import atomic, locks, signatures
from ninfer_kits.checksums import SHA1, SHA256, parse_sums
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
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
)
from ninfer_kits.fetch.extract import Extraction, FollowingArchive, extract
from ninfer_kits.fetch.http import Client, NotFound, shown
from ninfer_kits.fetch.locate import (
    BUILDINFO,
    SHA1SUMS,
    SHA256SUMS,
    Located,
    RemoteFile,
    plain_file_name,
)
from ninfer_kits.inspector.archive import HEAD_BYTES, KitArchive, terminate_as_exit
from ninfer_kits.kitdir import REPRODUCTION, SIGNATURE
from ninfer_kits.log import Reporter

KIT = "kit"
STAGING_PREFIX = ".ninfer-kits-fetch-"
# Bytes a download of no recorded size may still bring once the archive was read to its end
# (what the decompressor had not reached yet: a trailer, padding); more is refused.
TAIL_LIMIT = 16 << 20


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

    # --- small files ------------------------------------------------------------------------

    def _small(self, file: RemoteFile) -> bytes:
        if "://" not in file.url:
            path = Path(file.url)
            if path.stat().st_size > 4 << 20:
                raise BadInput(f"{path}: larger than the small file expected")
            return path.read_bytes()
        return self.client.get_bytes(file.url, accept=file.accept)

    def _sums(self, located: Located) -> tuple[dict[str, str], bytes]:
        file = located.files.get(SHA256SUMS)
        if file is None:
            raise CheckFailed(f"{located.where} has no {SHA256SUMS}: the kit cannot be checked, "
                              f"and fetch does not unpack a kit it cannot check")
        try:
            data = self._small(file)
        except NotFound:
            raise CheckFailed(f"{located.where}: {SHA256SUMS} is not there ({shown(file.url)}): "
                              f"the kit cannot be checked") from None
        text = data.decode("utf-8", "replace")
        return parse_sums(text, SHA256, f"{located.where}: {SHA256SUMS}"), data

    def _signature(self, located: Located, sums: bytes) -> tuple[str, bytes | None]:
        """SHA256SUMS checked against the release's SHA256SUMS.sig, before anything trusts
        it: (the words for `checked`, the .sig's bytes or None)."""
        file = located.files.get(SIGNATURE)
        data = None
        if file is not None:
            try:
                data = self._small(file)
            except NotFound:
                data = None
        words, warning = signatures.check_sums(sums, data, self.trust, insecure=self.insecure)
        if warning is not None:
            self.reporter.warning(f"{located.where}: {warning}")
        return words, data

    # --- the job ------------------------------------------------------------------------------

    def fetch(self, located: Located, dest: Path) -> Fetched:
        """DEST complete, or, when this fetch made it and fails, no DEST at all (a .part
        kept to resume from aside)."""
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
        if sha256 is None:
            raise CheckFailed(f"{located.where}: {SHA256SUMS} does not list {located.asset} "
                              f"(it lists {', '.join(sorted(sums)) or 'nothing'})")
        agreed = []
        if tarball.sha256 is not None:
            if tarball.sha256 != sha256:
                raise CheckFailed(f"{located.asset}: {SHA256SUMS} says {sha256}, "
                                  f"{tarball.recorded_by} says {tarball.sha256}: refusing it")
            agreed.append(tarball.recorded_by)
        sha1, sha1_text = self._sha1(located, sums)
        extras = self._extras(located, sums)
        with terminate_as_exit():
            result = self._tarball(located, dest, sha256, sha1)
        digests, reused, extraction, resumed_from, reconnects = result
        atomic.write_file(dest / SHA256SUMS, sums_data)
        if signature is not None:
            atomic.write_file(dest / SIGNATURE, signature)
        else:  # an older fetch's .sig must not sit beside another release's SHA256SUMS
            (dest / SIGNATURE).unlink(missing_ok=True)
        if sha1_text is not None:
            atomic.write_file(dest / SHA1SUMS, sha1_text)
        for name, data in extras.items():
            atomic.write_file(dest / name, data)
        if REPRODUCTION not in extras:  # an older fetch's record is not this release's
            (dest / REPRODUCTION).unlink(missing_ok=True)
        parts = [f"{SHA256SUMS} ok"]
        if sha1 is not None:
            parts.append(f"{SHA1SUMS} ok" if sha1_text is not None else
                         f"sha1 ok (as {tarball.sha1_by} records it)")
        parts += [f"{who} agrees" for who in agreed]
        parts.append(signed)
        checked = ", ".join(parts)
        return Fetched(located, dest, dest / located.asset, digests, checked, reused,
                       resumed_from, reconnects, time.monotonic() - started, extraction)

    def _sha1(self, located: Located, sums: dict[str, str]) -> tuple[str | None, bytes | None]:
        """The tarball's recorded SHA-1 (ledger, SHA1SUMS) and SHA1SUMS's bytes, if any;
        SHA1SUMS checked against SHA256SUMS where that lists it (a release published since
        SHA256SUMS lists every file)."""
        recorded = located.tarball.sha1
        file = located.files.get(SHA1SUMS)
        if file is None:
            return recorded, None
        try:
            data = self._small(file)
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
        """BUILDINFO.txt, when the release has it and SHA256SUMS lists it, and REPRODUCTION.json
        (the independent rebuild's record), which a release has whenever SHA256SUMS lists it:
        each checked against SHA256SUMS."""
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
            data = self._small(file)
            actual = hashlib.sha256(data).hexdigest()
            if actual != sums[name]:
                raise CheckFailed(f"{located.where}: {name} does not match {SHA256SUMS} "
                                  f"(listed {sums[name]}, the file hashes to {actual})")
            extras[name] = data
        return extras

    def _source(self, file: RemoteFile) -> Source:
        if "://" not in file.url:
            return FileSource(Path(file.url))
        return HttpSource(self.client, file.url, file.accept)

    def _tarball(self, located: Located, dest: Path, sha256: str, sha1: str | None
                 ) -> tuple[Digests, bool, Extraction, int, int]:
        final = dest / located.asset
        tarball = located.tarball
        reuse = _existing(final, sha256, sha1)
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=dest))
        try:
            if reuse is not None:
                with KitArchive(final, shown=located.asset) as archive:
                    extraction = extract(archive, staging, archive_size=reuse.size)
                digests, resumed_from, reconnects = reuse, reuse.size, 0
            else:
                digests, extraction, resumed_from, reconnects = self._download(
                    located, tarball, dest, staging, sha256, sha1)
            _place(staging / KIT, dest / KIT, staging)
            if reuse is None:
                part, marker = part_paths(dest, located.asset)
                os.replace(part, final)
                marker.unlink(missing_ok=True)
            return digests, reuse is not None, extraction, resumed_from, reconnects
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _download(self, located: Located, tarball: RemoteFile, dest: Path, staging: Path,
                  sha256: str, sha1: str | None) -> tuple[Digests, Extraction, int, int]:
        part, marker = part_paths(dest, located.asset)
        have = prepare_part(dest, located.asset, sha256)
        if have:
            self.reporter.info(f"resuming {located.asset} from byte {have} ({part.name})")
        feed = Feed()
        bar = self.reporter.progress(f"downloading {located.asset}")
        downloader = Downloader(self._source(tarball), part, expected_size=tarball.size,
                                sha1=sha1 is not None, feed=feed,
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
            if isinstance(feed.error, CheckFailed):
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
    """One fetch at a time into a DEST (a lock on the folder itself: nothing is left behind)."""
    with locks.held(dest, busy=lambda _: EnvironmentFailure(
            f"another fetch into {dest} is running; wait for it, or give another --dest")):
        yield


def _clear_stale_staging(dest: Path) -> None:
    """Staging folders of fetches that were killed (SIGKILL, a power cut): their process is
    gone."""
    for path in dest.glob(f"{STAGING_PREFIX}*"):
        pid = path.name[len(STAGING_PREFIX):].partition("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            pass  # someone else's live process


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


def _place(new: Path, final: Path, staging: Path) -> None:
    """The unpacked kit in place of DEST/kit (an older one goes into staging, then away)."""
    if os.path.lexists(final):
        _check_replaceable(final)
        final.rename(staging / "previous-kit")
    try:
        new.rename(final)
    except OSError:
        if os.path.lexists(staging / "previous-kit"):
            (staging / "previous-kit").rename(final)
        raise


def _missing_folders(dest: Path) -> list[Path]:
    """DEST and the folders above it that do not exist yet, deepest first."""
    missing = []
    folder = dest.absolute()
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """The folders a failed fetch made, where nothing is left in them (deepest first)."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _remove(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


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

