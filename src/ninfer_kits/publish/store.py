"""What every store speaks: the release to make, what a store already holds, and the protocol.

A store is one place a release goes (GitHub Releases, a B2 bucket, a local folder). The driver
(`stages`) never knows which: it asks each store what it holds (`inspect`), refuses conflicts
before anything changes, then `put`s and `verify`s each missing asset in order (SHA256SUMS
last) and `finish`es the store (GitHub: publishes the draft). Adding a store (S3, an OCI
registry) is one module with these six methods.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ninfer_kits.errors import CheckFailed


class ConcurrentPublish(CheckFailed):
    """Another publish of this tag is uploading into the same release right now (GitHub's
    `concurrency` keeps workflow runs apart; two publishes by hand, or act, do not).
    `published_within(seconds)` waits for that one to publish; a new publish then compares
    with what it published."""

    def __init__(self, message: str, published_within: Callable[[float], bool]) -> None:
        super().__init__(message)
        self.published_within = published_within


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

    def names(self, presence: Presence) -> tuple[str, ...]:
        return tuple(name for name, state in self.assets.items() if state is presence)

    @property
    def complete(self) -> bool:
        return all(state is Presence.SAME for state in self.assets.values())


@dataclass(frozen=True, kw_only=True)
class StoreRecord:
    """Where a finished release is on one store: for the ledger and the summary."""

    store: str  # "github", "b2", "local"
    location: str  # the release page, the bucket folder, the local folder
    urls: Mapping[str, str] = field(default_factory=dict)  # asset name → download URL
    details: tuple[tuple[str, str], ...] = ()  # ledger keys of the store's table


class VerifyFailed(CheckFailed):
    """An asset on a store does not have the size or hash of the kit's file after upload."""


class Store(Protocol):
    """One place a release goes. Every method may be called again after a failure (a re-run);
    none may publish anything before `finish`."""

    name: str  # "github", "b2", "local": the name --to takes and the ledger uses
    max_asset_size: int | None  # the largest asset the store takes, in bytes

    def describe(self) -> str:
        """One line for messages: `GitHub ninfer-kits/ninfer-kits (https://api.github.com)`."""
        ...

    def download_base(self, tag: str) -> str:
        """The URL of the folder users download this tag's assets from (for the notes)."""
        ...

    def preflight(self) -> None:
        """Check, changing nothing, that the credentials work and can write the target; raise
        naming what is missing (a variable, a permission, the repository or bucket)."""
        ...

    def inspect(self, release: Release) -> Found:
        """What the store already holds of `release` (its assets compared by size and hash)."""
        ...

    def unpublish(self) -> None:
        """With --replace only, on a published release about to change: hide it from users
        until `finish` (GitHub: back to a draft; B2: SHA256SUMS hidden; local: moved aside)."""
        ...

    def put(self, asset: Asset, *, replace: bool) -> None:
        """Upload one asset (clearing a leftover of a failed upload, and with `replace` an
        asset of the same name with other content)."""
        ...

    def verify(self, asset: Asset) -> None:
        """Check the uploaded asset's size and hash as the store reports them (or by reading
        it back); VerifyFailed when they differ."""
        ...

    def download(self, name: str, dest: Path) -> None:
        """Copy asset `name` of the release `inspect` found into the file `dest` (a rebuild
        that reproduced the release records the release's own files, not its own)."""
        ...

    def finish(self, release: Release) -> StoreRecord:
        """Make the release visible (GitHub: publish the draft, last) and say where it is.
        A published release that is complete is left as it is."""
        ...
