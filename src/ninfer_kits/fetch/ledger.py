"""The ledger, releases/<tag>.toml, as fetch and kit-url read it.

The format has one reader, `ninfer_kits.ledger` (standard library only; releases/README.md
documents the keys), which this wraps with what fetching asks: a tag's entry, a kit's entries
oldest first, each asset's URL by store, the GitHub repository it was published to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ninfer_kits import ledger
from ninfer_kits.ledger import LedgerAsset, LedgerEntry


@dataclass(frozen=True)
class Recorded:
    """One release's ledger entry, read and checked: from a ledger file, or from the kit
    index (fetch.index), which carries each file's text."""

    source: str  # for messages: the ledger file, or the kit index
    entry: LedgerEntry
    by: str = "the ledger"  # who records it, in short: "the ledger" or "the kit index"

    @property
    def tag(self) -> str:
        return self.entry.tag

    @property
    def kit(self) -> str:
        return self.entry.kit

    @property
    def asset(self) -> str:
        return self.entry.asset

    @property
    def portable_asset(self) -> str | None:
        """The portable tarball's name, when the release has one."""
        return self.entry.portable_asset

    @property
    def assets(self) -> tuple[LedgerAsset, ...]:
        return self.entry.assets

    @property
    def repository(self) -> str | None:
        """The GitHub repository it was published to, when a GitHub store is recorded."""
        for store in self.entry.stores:
            if store.name == "github":
                return dict(store.details).get("repository")
        return None

    @property
    def api(self) -> str | None:
        for store in self.entry.stores:
            if store.name == "github":
                return dict(store.details).get("api")
        return None


def url_of(asset: LedgerAsset, store: str) -> str | None:
    return dict(asset.urls).get(store)


def read_entry(folder: Path | None, tag: str) -> Recorded | None:
    """releases/<tag>.toml, or None when there is none."""
    if folder is None or "/" in tag or tag.startswith("."):
        return None
    path = ledger.path_for(folder, tag)
    if not path.is_file():
        return None
    return Recorded(f"the ledger {path}", ledger.read_listed(path))


def entries_of(folder: Path | None, kit: str) -> list[Recorded]:
    """Every release of `kit` in the ledger, oldest first (by when it was published)."""
    if folder is None:
        return []
    return [Recorded(f"the ledger {ledger.path_for(folder, entry.tag)}", entry)
            for entry in ledger.read_all(folder) if entry.kit == kit]
