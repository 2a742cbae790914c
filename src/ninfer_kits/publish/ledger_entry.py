"""The ledger entry a publish writes last: releases/<tag>.toml from the kit, the release and
each store's record (the format is ninfer_kits.ledger's)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path

from ninfer_kits import ledger
from ninfer_kits.errors import BadInput
from ninfer_kits.kitdir import KitDir
from ninfer_kits.log import Reporter
from ninfer_kits.publish.store import Release, StoreRecord


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
