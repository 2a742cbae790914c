"""What the publish's stages hand on (publish.stages): the request, and the Outcome so far,
which each stage returns with its own result added; after the last one, what the publish did."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.errors import need
from ninfer_kits.kit.kitdir import KitDir
from ninfer_kits.kit.licence_policy import Verdict
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Matrix
from ninfer_kits.publish.credentials import SigningKey
from ninfer_kits.publish.needs import Judged
from ninfer_kits.publish.store import Asset, Found, Release, Store, StoreRecord

PUBLISHED, REPRODUCED, CONFLICT = "published", "reproduced", "conflict"


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
    # the SHA256SUMS signing key; None only where unsigned is allowed (a dry run, a folder)
    signing_key: SigningKey | None = None
    reproduction: Path | None = None
    # a dry run: offline, owed sources named, not fetched
    dry_run: bool = False


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """The publish so far: each stage returns it with its own result added."""

    request: PublishRequest
    held: ExitStack  # the tag's lock and the scratch folder, let go after the last stage
    read: KitDir | None = None  # the kit folder, checked
    judged: Judged | None = None  # what each tarball needs, and where that is met
    licences: tuple[Verdict, ...] = ()
    scratch: Path | None = None  # the store's own copies of a reproduced release's assets
    # REPRODUCTION.json and the SHA256SUMS listing it, in scratch; None: the kit folder's own
    record: Asset | None = None
    # the release's SHA256SUMS, in scratch (stage_functions.list_release)
    sums: Asset | None = None
    tools: tuple[Asset, ...] = ()  # ninfer-kits.pyz
    # the owed Debian sources' files, fetched: assets listed as sources/<file>
    sources: tuple[Asset, ...] = ()
    signature: Asset | None = None  # SHA256SUMS.sig, made in scratch, checked (signed releases)
    signed_sums: str | None = None  # the sha256 of the SHA256SUMS bytes it signs
    signed_by: str | None = None  # the key fingerprint of the release's SHA256SUMS.sig
    planned: Release | None = None
    found: tuple[Found, ...] = ()  # what each store holds, in the order of request.stores
    records: tuple[StoreRecord, ...] = ()  # one per store done, in order
    uploaded: tuple[tuple[str, str], ...] = ()  # (store, asset) put this run
    changed_stores: tuple[str, ...] = ()  # stores this run changed (uploaded to, published)
    ledger: Path | None = None
    ledger_changed: bool = False
    index: Path | None = None  # <ledger_dir>/index.json, made again from the whole ledger
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
        """`published` (made or completed here), or `reproduced` (there already; unchanged)."""
        return REPRODUCED if self.reproduced and not self.changed_stores else PUBLISHED


Stage = Callable[[Outcome, Reporter], Outcome]
