"""The publishing pipeline: one finished kit folder → the same release on every store, then its
ledger entry. STAGES, below the stages, is the whole program, in order, beside the build's
(pipeline.stages); each stage is a step of the Reporter (a fold group on GitHub Actions), and
nothing is uploaded before every check that can fail has passed. The kit's tarballs are its
flavours (kitdir): a release is this kit when a store holds every one of them byte for byte.
"""

from __future__ import annotations

import dataclasses
import datetime
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits import ledger
from ninfer_kits.atomic import hash_file
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure, need
from ninfer_kits.kitdir import KitDir
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Matrix
from ninfer_kits.publish import plan
from ninfer_kits.publish.store import Found, Presence, Release, Store, StoreRecord
from ninfer_kits.publish.stores import NOTES_PREFERENCE

LOCK_POLL = 0.1


class PublishBusy(EnvironmentFailure):
    """Another publish of the same tag runs on this machine."""


class PublishConflict(CheckFailed):
    """The tag is published already with other kit tarball bytes than this build's: the same
    tag would name two kits. Nothing is changed (without --replace)."""

    def __init__(self, message: str, tag: str) -> None:
        super().__init__(message)
        self.tag = tag


class PublishRefused(CheckFailed):
    """A store holds something under this release that is not this kit, and publish will not
    change it (without --replace; an immutable release, never)."""


@dataclass(frozen=True, kw_only=True)
class PublishRequest:
    kit_dir: Path  # dist/<tag>/
    matrix: Matrix
    stores: tuple[Store, ...]  # in publishing order (B2 first)
    lock_dir: Path  # <cache>/publish
    ledger_dir: Path | None  # None: no ledger (a dry run)
    replace: bool = False
    wait: float = 0.0  # seconds to wait for another publish of the same tag
    notes_base: str | None = None  # the download folder the notes show (default: GitHub's,
    # else B2's, else the local folder's)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """The publish so far: each stage returns it with its own result added (as the build's
    stages do with BuildState); after the last one, what the publish did."""

    request: PublishRequest
    held: ExitStack  # the tag's lock and the scratch folder, let go after the last stage
    read: KitDir | None = None  # the kit folder, checked
    scratch: Path | None = None  # the store's own copies of a reproduced release's assets
    planned: Release | None = None
    found: tuple[Found, ...] = ()  # what each store holds, in the order of request.stores
    records: tuple[StoreRecord, ...] = ()  # one per store done, in order
    uploaded: tuple[tuple[str, str], ...] = ()  # (store, asset) put this run
    changed_stores: tuple[str, ...] = ()  # stores this run changed (uploaded to, published)
    ledger: Path | None = None
    ledger_changed: bool = False
    reproduced: bool = False  # a store held this tag published with the kit's very tarballs
    kept: tuple[str, ...] = ()  # the assets (BUILDINFO.txt…) the release keeps its own copy
    # (or its lack) of

    @property
    def kit(self) -> KitDir:
        return need(self.read, "kit")

    @property
    def release(self) -> Release:
        return need(self.planned, "release")

    @property
    def changed(self) -> bool:
        return bool(self.changed_stores) or self.ledger_changed

    @property
    def result(self) -> str:
        """`published` (this run made or completed a release), or `reproduced` (the release
        was there, published, with this build's tarballs byte for byte; no store changed)."""
        return REPRODUCED if self.reproduced and not self.changed_stores else PUBLISHED


Stage = Callable[[Outcome, Reporter], Outcome]


PUBLISHED, REPRODUCED, CONFLICT = "published", "reproduced", "conflict"


GITHUB_DOWNLOAD = re.compile(r"^https://github\.com/(?P<repo>[^/]+/[^/]+)/releases/download/")


def _fetch_hint(base: str) -> str | None:
    """What `ninfer-kits.pyz fetch TAG` needs besides the tag: the repository (the pyz carries
    no matrix); None when the notes' downloads are not GitHub's (then they show no pyz line)."""
    match = GITHUB_DOWNLOAD.match(base)
    return f" --repository {match['repo']}" if match else None


def read_kit(state: Outcome, reporter: Reporter) -> Outcome:
    """Read dist/<tag>/ (kitdir): its layout, sizes under every store's limit, the names the
    matrix renders, every hash."""
    request = state.request
    limits = [(store.describe(), store.max_asset_size) for store in request.stores]
    return dataclasses.replace(state, read=plan.read_kit(request.kit_dir, request.matrix, limits))


def lock(state: Outcome, reporter: Reporter) -> Outcome:
    """One publish of a tag at a time on this machine (a flock under the cache dir), held with
    a scratch folder beside it until the last stage."""
    request, kit = state.request, state.kit
    state.held.enter_context(held_lock(request.lock_dir, kit.tag, request.wait, reporter))
    scratch = state.held.enter_context(
        tempfile.TemporaryDirectory(prefix=".reproduced-", dir=request.lock_dir))
    return dataclasses.replace(state, scratch=Path(scratch))


def preflight(state: Outcome, reporter: Reporter) -> Outcome:
    """Each store: the credentials work and can write the target."""
    for store in state.request.stores:
        store.preflight()
        reporter.info(f"{store.describe()}: ready, can write")
    return state


def plan_release(state: Outcome, reporter: Reporter) -> Outcome:
    """The release: title, notes from BUILDINFO.txt, assets in upload order."""
    request, kit = state.request, state.kit
    base = request.notes_base or _notes_store(request.stores).download_base(kit.tag)
    tools = (plan.pyz_asset(request.lock_dir.parent / "pyz"),)
    release = plan.make_release(kit, base, tools, _fetch_hint(base))
    reporter.info(f"release {release.tag}: {', '.join(a.name for a in release.assets)}")
    return dataclasses.replace(state, planned=release)


def inspect_stores(state: Outcome, reporter: Reporter) -> Outcome:
    """Each store: what it holds already. Another kit under the tag, and every conflict, are
    refused before anything changes; a release published with this build's very tarballs is
    reproduced, keeping the store's own copy of every other asset."""
    request, kit, release = state.request, state.kit, state.release
    found = _inspect(request.stores, release, reporter)
    reproduced, kept = False, tuple[str, ...]()
    if not request.replace:
        refuse_other_kit(request.stores, found, kit)
        source = _reproducing(request.stores, found, kit)
        if source is not None:
            reproduced, ours = True, release
            release = _held_release(source, found[request.stores.index(source)], release,
                                    need(state.scratch, "scratch"), reporter)
            kept = tuple(asset.name for asset in ours.assets if asset not in release.assets)
            if kept:  # the source holds exactly `release` now; the others, anew
                found = tuple(
                    dataclasses.replace(held, assets={a.name: Presence.SAME
                                                      for a in release.assets},
                                        held_sha256={}, notes=())
                    if store is source else _inspect((store,), release, reporter)[0]
                    for store, held in zip(request.stores, found, strict=True))
    refuse_conflicts(request.stores, found, request.replace)
    return dataclasses.replace(state, planned=release, found=found, reproduced=reproduced,
                               kept=kept)


def fill_store(state: Outcome, reporter: Reporter) -> Outcome:
    """The next store in order (B2 first, then GitHub): put and verify every asset not there
    yet, SHA256SUMS last, then finish (GitHub: publish the draft)."""
    index = len(state.records)  # the stores before it are done
    store, held = state.request.stores[index], state.found[index]
    put = _fill(store, held, state.release, reporter)
    return dataclasses.replace(
        state, records=(*state.records, store.finish(state.release)),
        uploaded=(*state.uploaded, *((store.name, name) for name in put)),
        changed_stores=(*state.changed_stores,
                        *((store.name,) if put or not held.published else ())))


def record_ledger(state: Outcome, reporter: Reporter) -> Outcome:
    """releases/<tag>.toml, atomically, once every store holds the whole release."""
    path = ledger.path_for(need(state.request.ledger_dir, "ledger_dir"), state.kit.tag)
    changed = write_ledger(path, state.kit, state.release, state.records, reporter)
    return dataclasses.replace(state, ledger=path, ledger_changed=changed)


EACH_STORE = "<store>"  # one step per store, named after it ("b2", "github", "local")

# The publish, in order (nothing is uploaded before every check that can fail has passed).
# Each stage's docstring says what it adds.
STAGES: tuple[tuple[str, Stage], ...] = (
    ("kit", read_kit),
    ("lock", lock),
    ("preflight", preflight),
    ("plan", plan_release),
    ("inspect", inspect_stores),
    (EACH_STORE, fill_store),
    ("ledger", record_ledger),
)


def _steps(name: str, request: PublishRequest) -> tuple[str, ...]:
    """The Reporter steps a stage runs as: one per store for EACH_STORE, none for the ledger
    of a run that writes none (a dry run)."""
    if name == EACH_STORE:
        return tuple(store.name for store in request.stores)
    return () if name == "ledger" and request.ledger_dir is None else (name,)


def run_publish(request: PublishRequest, reporter: Reporter) -> Outcome:
    with ExitStack() as held:
        state = Outcome(request=request, held=held)
        for name, stage in STAGES:
            for step in _steps(name, request):
                with reporter.step(step):
                    state = stage(state, reporter)
        if state.kept and not state.changed_stores:
            reporter.info(f"reproduced: {state.kit.tag} is published already with this build's "
                          f"{' and '.join(state.kit.tarballs)} byte for byte; its assets are "
                          f"unchanged")
    return state


def _inspect(stores: Sequence[Store], release: Release, reporter: Reporter) -> tuple[Found, ...]:
    found = tuple(store.inspect(release) for store in stores)
    for store, held in zip(stores, found, strict=True):
        for note in held.notes:
            reporter.info(note)
        reporter.info(f"{store.describe()}: {_state(held)}")
    return found


def refuse_other_kit(stores: Sequence[Store], found: Sequence[Found], kit: KitDir) -> None:
    """A tag published with other tarball bytes is another kit under the same name: refused
    (exit 1), naming the kit, the tag and both sha256s, before anything changes."""
    problems = []
    for store, held in zip(stores, found, strict=True):
        if not held.published:
            continue
        for flavour in kit.flavours:
            if held.assets[flavour.asset] is Presence.DIFFERENT:
                theirs = held.held_sha256.get(flavour.asset, "unknown")
                problems.append(f"{store.describe()}: {flavour.asset} is sha256 {theirs} there, "
                                f"{flavour.sha256} in this build")
    if problems:
        raise PublishConflict(
            f"kit {kit.kit}: tag {kit.tag} is published already with other kit bytes; nothing "
            f"was changed (the same tag must not name two kits: give the kit a new tag, or "
            f"--replace to replace it on purpose):\n  " + "\n  ".join(problems), kit.tag)


def _reproducing(stores: Sequence[Store], found: Sequence[Found], kit: KitDir) -> Store | None:
    """The first store that holds the tag published with this build's tarballs, or None."""
    for store, held in zip(stores, found, strict=True):
        if held.published and all(held.assets[name] is Presence.SAME for name in kit.tarballs):
            return store
    return None


def _held_release(store: Store, held: Found, release: Release, scratch: Path,
                  reporter: Reporter) -> Release:
    """The release as `store` publishes it: this build's tarballs, and the store's own copy of
    every other asset that differs (BUILDINFO.txt of the build that made it, and the sums that
    list it). What the store holds stays; another store gets the same files; the ledger
    records them."""
    assets = []
    for asset in release.assets:
        if held.assets[asset.name] is Presence.SAME:
            assets.append(asset)
        elif held.assets[asset.name] is Presence.DIFFERENT:
            dest = scratch / asset.name
            store.download(asset.name, dest)
            hashed = hash_file(dest)
            reporter.info(f"{store.name}: keeps its own {asset.name} (sha256 "
                          f"{hashed.sha256[:16]}…; this build's differs)")
            assets.append(dataclasses.replace(asset, path=dest, size=hashed.size,
                                              sha256=hashed.sha256, sha1=hashed.sha1))
        else:  # absent there (an older release without the pyz): recorded as it is
            reporter.info(f"{store.name}: the published release has no {asset.name}; left so")
    return dataclasses.replace(release, assets=tuple(assets))


def _notes_store(stores: Sequence[Store]) -> Store:
    """The store whose download URLs the notes show (GitHub's, where there is one)."""
    rank = {name: index for index, name in enumerate(NOTES_PREFERENCE)}
    return min(stores, key=lambda store: rank.get(store.name, len(rank)))


def _state(found: Found) -> str:
    if found.published and found.complete:
        return "published, complete: nothing to upload"
    there = found.names(Presence.SAME)
    missing = found.names(Presence.ABSENT)
    differ = found.names(Presence.DIFFERENT)
    parts = ["published" if found.published else ("a draft" if there or differ else "nothing")]
    if there:
        parts.append(f"verified: {', '.join(there)}")
    if missing:
        parts.append(f"to upload: {', '.join(missing)}")
    if differ:
        parts.append(f"other content: {', '.join(differ)}")
    return "; ".join(parts)


def refuse_conflicts(stores: Sequence[Store], found: Sequence[Found], replace: bool) -> None:
    """Before anything changes on any store: refuse what publish must not change."""
    problems = []
    for store, held in zip(stores, found, strict=True):
        differ = held.names(Presence.DIFFERENT)
        if held.published and not held.complete:
            missing = held.names(Presence.ABSENT)
            what = "; ".join(part for part in (
                f"other content in {', '.join(differ)}" if differ else "",
                f"missing {', '.join(missing)}" if missing else "") if part)
            if held.immutable:
                problems.append(f"{store.describe()}: the release is published and immutable, "
                                f"and differs from the kit ({what}); it can never be changed: "
                                f"give the kit a new tag")
            elif not replace:
                problems.append(f"{store.describe()}: the release is published and differs "
                                f"from the kit ({what}); a published release is never changed "
                                f"silently: give --replace to replace it")
        elif differ and not replace:
            problems.append(f"{store.describe()}: {', '.join(differ)} "
                            f"{'is' if len(differ) == 1 else 'are'} there with other content "
                            f"than the kit's; give --replace to replace "
                            f"{'it' if len(differ) == 1 else 'them'}")
    if problems:
        raise PublishRefused("nothing was changed:\n  " + "\n  ".join(problems))


def _fill(store: Store, found: Found, release: Release, reporter: Reporter) -> list[str]:
    """Put and verify every asset the store lacks, in order (SHA256SUMS last)."""
    if found.published and found.complete:
        reporter.info(f"{store.describe()}: already published with every asset; unchanged")
        return []
    if found.published:
        store.unpublish()
    put = []
    for asset in release.assets:
        presence = found.assets[asset.name]
        if presence is Presence.SAME:
            reporter.info(f"{store.name}: {asset.name} is there already, verified")
            continue
        store.put(asset, replace=presence is Presence.DIFFERENT)
        store.verify(asset)
        reporter.info(f"{store.name}: {asset.name} uploaded and verified ({asset.size:,} bytes, "
                      f"sha256 {asset.sha256[:16]}…)")
        put.append(asset.name)
    return put


# --------------------------------------------------------------------------- the ledger


def ledger_entry(kit: KitDir, release: Release, records: Sequence[StoreRecord],
                 when: datetime.datetime) -> ledger.LedgerEntry:
    info = kit.info
    return ledger.LedgerEntry(
        tag=kit.tag, kit=kit.kit, card=info.card, upstream=info.upstream,
        upstream_url=info.upstream_url, revision=info.revision, version=info.version,
        arch=info.arch, cuda_version=info.cuda_version, toolchain=info.toolchain,
        asset=kit.asset, published_at=when,
        portable_asset=kit.portable.asset if kit.portable else None,
        portable_sha256=kit.portable.sha256 if kit.portable else None,
        portable_size=kit.portable.size if kit.portable else None,
        stores=tuple(ledger.LedgerStore(name=record.store, location=record.location,
                                        details=record.details) for record in records),
        assets=tuple(ledger.LedgerAsset(
            name=asset.name, size=asset.size, sha256=asset.sha256, sha1=asset.sha1,
            urls=tuple((record.store, record.urls[asset.name]) for record in records
                       if asset.name in record.urls)) for asset in release.assets),
        floor=info.floor,
        # what made the kit (BUILDINFO's `inputs`), for watch; a kit without it records none
        inputs=None if info.inputs == "unknown" else info.inputs, input_parts=info.input_parts)


def write_ledger(path: Path, kit: KitDir, release: Release, records: Sequence[StoreRecord],
                 reporter: Reporter) -> bool:
    """Write releases/<tag>.toml unless it already records this very release; True when
    written."""
    entry = ledger_entry(kit, release, records, datetime.datetime.now(datetime.UTC))
    if path.exists():
        try:
            if ledger.read(path).same_release(entry):
                reporter.info(f"{path}: already records this release; unchanged")
                return False
        except BadInput as error:  # a damaged ledger is written again, saying so
            reporter.warning(f"{error}; writing it again")
    ledger.write(path, entry)
    reporter.info(f"{path}: written")
    return True


# --------------------------------------------------------------------------- the lock


@contextmanager
def held_lock(lock_dir: Path, tag: str, wait: float, reporter: Reporter) -> Iterator[None]:
    """One publish of `tag` at a time on this machine: an exclusive flock on
    <lock_dir>/<tag>.lock (with the holder's PID in it), released however the holder ends.
    A second publish waits up to `wait` seconds, then stops naming the holder."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{tag}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + max(wait, 0.0)
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise PublishBusy(
                        f"another publish of {tag} is running ({_holder(fd)}; lock {path}); "
                        f"wait for it to finish, or give --wait SECONDS") from None
                if not told:
                    reporter.info(f"waiting for another publish of {tag} ({_holder(fd)}) to "
                                  f"finish, up to {wait:.0f} s")
                    told = True
                time.sleep(LOCK_POLL)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    return f"PID {text}" if text.isdigit() else "a process that has not written its PID yet"
