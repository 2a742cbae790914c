"""What every store speaks: the release to make, what a store holds, and the `Store` protocol
the stages drive without knowing which store it is (adding one: DEVELOPING.md, "Adding a
store")."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ninfer_kits.errors import CheckFailed


class ConcurrentPublish(CheckFailed):
    """Another publish of this tag is uploading into the same release now (two by hand, or
    act: GitHub's `concurrency` keeps workflow runs apart); `published_within(seconds)` waits
    for it, and a new publish compares with what it published."""

    def __init__(self, message: str, published_within: Callable[[float], bool],
                 unsettled: CheckFailed | None = None) -> None:
        super().__init__(message)
        self.published_within = published_within
        self.unsettled = unsettled  # what to say when nothing was published: no race, then


@dataclass(frozen=True, kw_only=True)
class Asset:
    """One file of a release, as the kit folder holds it."""

    name: str
    path: Path
    size: int
    sha256: str
    sha1: str
    content_type: str


@dataclass(frozen=True, kw_only=True)
class Release:
    """The release one kit folder makes: the same on every store."""

    tag: str
    title: str
    notes: str  # Markdown, rendered from BUILDINFO.txt
    assets: tuple[Asset, ...]  # in upload order: the tarball first, SHA256SUMS last

    def asset(self, name: str) -> Asset:
        return next(asset for asset in self.assets if asset.name == name)


class Presence(enum.Enum):
    """An asset's state on a store, against the kit's file of the same name."""

    ABSENT = "absent"  # not there (a leftover of a failed upload counts as absent: put clears it)
    SAME = "same"  # there, complete, with the kit's size and hashes
    DIFFERENT = "different"  # there with other content


@dataclass(frozen=True, kw_only=True)
class Found:
    """What a store already holds of a release."""

    published: bool  # users can see it (GitHub: a release that is not a draft)
    assets: Mapping[str, Presence]
    immutable: bool = False  # published and unchangeable (GitHub's immutable releases)
    notes: tuple[str, ...] = ()  # what the store noticed (a second draft, leftovers it will clear)
    # the sha256 of an asset there with other content, where the store knows it
    held_sha256: Mapping[str, str] = field(default_factory=dict)
    # an unpublished release (GitHub's draft) that another publish may be filling: waits at
    # most the seconds given for it to be published, and says whether it was
    published_within: Callable[[float], bool] | None = None

    def names(self, presence: Presence) -> tuple[str, ...]:
        return tuple(name for name, state in self.assets.items() if state is presence)

    @property
    def complete(self) -> bool:
        return all(state is Presence.SAME for state in self.assets.values())


@dataclass(frozen=True, kw_only=True)
class StoreRecord:
    """Where a finished release is on one store, for the ledger and the summary."""

    store: str  # "github", "b2", "local"
    location: str  # the release page, the bucket folder, the local folder
    urls: Mapping[str, str] = field(default_factory=dict)  # asset name → download URL
    details: tuple[tuple[str, str], ...] = ()  # ledger keys of the store's table


class VerifyFailed(CheckFailed):
    """An uploaded asset lacks the size or hash of the kit's file."""


class Store(Protocol):
    """One place a release goes. Every method may be called again after a failure (a re-run);
    none may publish anything before `finish`."""

    name: str  # its kind's name (ninfer_kits/stores): what --to takes and the ledger uses
    max_asset_size: int | None  # the largest asset the store takes, in bytes

    def describe(self) -> str:
        """One line for messages: `GitHub ninfer-kits/ninfer-kits (https://api.github.com)`."""
        ...

    def download_base(self, tag: str) -> str:
        """The folder URL users download this tag's assets from (for the notes)."""
        ...

    def preflight(self) -> None:
        """Check, changing nothing, that the credentials can write; raise naming what lacks."""
        ...

    def inspect(self, release: Release) -> Found:
        """What the store already holds of `release` (its assets compared by size and hash)."""
        ...

    def unpublish(self) -> None:
        """With --replace, on a published release about to change: hide it until `finish`."""
        ...

    def put(self, asset: Asset, *, replace: bool) -> None:
        """Upload one asset over a failed upload's leftover (`replace`: over other content)."""
        ...

    def verify(self, asset: Asset) -> None:
        """Check the uploaded asset's size and hash; VerifyFailed when they differ."""
        ...

    def download(self, name: str, dest: Path) -> None:
        """Copy asset `name` of the release `inspect` found into `dest`."""
        ...

    def finish(self, release: Release) -> StoreRecord:
        """Make the release visible, last, and say where it is."""
        ...
