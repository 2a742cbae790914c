"""The ledger as fetch and kit-url read it: `release.ledger` (its one reader) wrapped with what
fetching asks (a tag's entry, a kit's entries, asset URLs, the GitHub repository)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.release import ledger
from ninfer_kits.release.ledger import LedgerAsset, LedgerEntry


@dataclass(frozen=True)
class Recorded:
    """One release's ledger entry, from a ledger file or from the kit index."""

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
    def assets(self) -> tuple[LedgerAsset, ...]:
        return self.entry.assets

    @property
    def repository(self) -> str | None:
        """The GitHub repository it was published to, when a GitHub store is recorded."""
        return self._github("repository")

    @property
    def api(self) -> str | None:
        return self._github("api")

    def _github(self, key: str) -> str | None:
        store = next((store for store in self.entry.stores if store.name == "github"), None)
        return None if store is None else dict(store.details).get(key)


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
    """Every release of `kit` in the ledger, oldest first."""
    if folder is None:
        return []
    return [Recorded(f"the ledger {ledger.path_for(folder, entry.tag)}", entry)
            for entry in ledger.read_all(folder) if entry.kit == kit]
