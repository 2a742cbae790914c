"""What each store holds of a release, and what publish makes of it: conflicts refused before
anything changes, a reproduced release kept, what a store lacks uploaded (docs/publish.md,
stage 8)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from ninfer_kits.errors import CheckFailed
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.kit import kitdir
from ninfer_kits.kit.kitdir import KitDir
from ninfer_kits.log import Reporter
from ninfer_kits.publish import plan
from ninfer_kits.publish.store import Asset, ConcurrentPublish, Found, Presence, Release, Store
from ninfer_kits.release import reproduction
from ninfer_kits.release.checksums import SHA256, parse_sums


class PublishConflict(CheckFailed):
    """The tag is published with other kit tarball bytes: one tag would name two kits."""

    def __init__(self, message: str, tag: str) -> None:
        super().__init__(message)
        self.tag = tag


class PublishRefused(CheckFailed):
    """A store holds something under this release that is not this kit, and publish will not
    change it."""


def inspect_each(stores: Sequence[Store], release: Release,
                 reporter: Reporter) -> tuple[Found, ...]:
    """What each store holds of `release`, in order, each said in one line."""
    found = tuple(store.inspect(release) for store in stores)
    for store, held in zip(stores, found, strict=True):
        for note in held.notes:
            reporter.info(note)
        reporter.info(f"{store.describe()}: {_state(held)}")
    return found


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
    """Refuse, before anything changes on any store, what publish must not change."""
    problems = []
    filling: list[tuple[Store, Callable[[float], bool]]] = []
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
            if held.published_within is not None:
                filling.append((store, held.published_within))
    if not problems:
        return
    refusal = PublishRefused("nothing was changed:\n  " + "\n  ".join(problems))
    if len(filling) == len(problems) == 1:
        # another publish of the tag, a step ahead, filling its draft: the race is settled as
        # any (wait, compare); a draft that nobody publishes was left behind, and is refused
        store, published_within = filling[0]
        raise ConcurrentPublish(f"{store.describe()}: the draft of the tag holds other content "
                                f"than the kit's: another publish may be filling it",
                                published_within, unsettled=refusal)
    raise refusal


def refuse_other_kit(stores: Sequence[Store], found: Sequence[Found], kit: KitDir) -> None:
    """PublishConflict (exit 1) for a tag published with other tarball bytes, naming the kit,
    the tag and both sha256s."""
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


def reproducing_store(stores: Sequence[Store], found: Sequence[Found], kit: KitDir) -> Store | None:
    """The first store that holds the tag published with this build's tarballs, or None."""
    for store, held in zip(stores, found, strict=True):
        if held.published and all(held.assets[name] is Presence.SAME for name in kit.tarballs):
            return store
    return None


def held_release(store: Store, held: Found, release: Release, scratch: Path,
                  reporter: Reporter) -> Release:
    """The release as `store` publishes it: this build's tarballs, and the store's own copy of
    every other asset that differs (BUILDINFO.txt and the sums of the build that made it)."""
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
    record = _held_record(store, tuple(assets), scratch, reporter)
    return dataclasses.replace(release, assets=plan.with_record(tuple(assets), record)
                               if record is not None else tuple(assets))


def _held_record(store: Store, assets: tuple[Asset, ...], scratch: Path,
                 reporter: Reporter) -> Asset | None:
    """The store's REPRODUCTION.json, where a forced rebuild brings none: the release keeps it."""
    if any(asset.name == reproduction.NAME for asset in assets):
        return None
    sums = next(asset for asset in assets if asset.name == kitdir.SHA256SUMS)
    listed = parse_sums(sums.path.read_text(encoding="utf-8"), SHA256,
                        f"{store.describe()}: {kitdir.SHA256SUMS}").get(reproduction.NAME)
    if listed is None:
        return None
    dest = scratch / reproduction.NAME
    store.download(reproduction.NAME, dest)
    hashed = hash_file(dest)
    if hashed.sha256 != listed:
        raise PublishRefused(f"{store.describe()}: {reproduction.NAME} is sha256 "
                             f"{hashed.sha256}, its {kitdir.SHA256SUMS} lists {listed}; nothing "
                             f"was changed")
    reporter.info(f"{store.name}: keeps its own {reproduction.NAME} (this build has none)")
    return Asset(name=reproduction.NAME, path=dest, size=hashed.size, sha256=hashed.sha256,
                 sha1=hashed.sha1, content_type=plan.TEXT_TYPE)


def upload_missing(store: Store, found: Found, release: Release, reporter: Reporter) -> list[str]:
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
