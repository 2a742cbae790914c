"""The kit index as fetch and kit-url read it (where it is: docs/index.md): read once, when a
name is not in the ledger here; none there is no error, and one that is no index is bad input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path

from ninfer_kits.config import settings
from ninfer_kits.errors import BadInput
from ninfer_kits.fetch.http import Client, HttpFailure, NotFound, shown
from ninfer_kits.fetch.ledger import Recorded
from ninfer_kits.inspector.inputs import printable
from ninfer_kits.release import kitindex
from ninfer_kits.release.ledger import LedgerEntry

COMMITTED = "releases/" + kitindex.JSON_NAME  # where the rebuild workflow commits it
ATTEMPTS = 2  # an index that does not answer is only a fallback's loss; do not wait long
TIMEOUT = 15.0


NO_INDEX = "none"  # --index none: locate as before there was an index
BY = "the kit index"  # Recorded.by of its entries


def index_location(given: str | None, repository: str | None, web: str,
                   environ: Mapping[str, str] | None = None) -> str | None:
    """--index, else $NINFER_KITS_INDEX, else the repository's; None for `none` or no repo."""
    chosen = given or settings.read(settings.INDEX, environ)
    if chosen:
        return None if chosen == NO_INDEX else chosen
    return f"{web}/{repository}/raw/HEAD/{COMMITTED}" if repository else None


class IndexSource:
    """The index at `location`, read at most once, when first asked."""

    def __init__(self, location: str, client: Client | None = None) -> None:
        self.location = location
        # the user's (--index, $NINFER_KITS_INDEX) or the API's web host
        self._client = client or Client(attempts=ATTEMPTS, timeout=TIMEOUT, servers=(location,))
        self._entries: tuple[LedgerEntry, ...] | None = None
        self.note = ""  # why there was none, once asked
        # why it was not read, once asked; "" when it answered (a 404 answers: no index)
        self.failure = ""

    @property
    def words(self) -> str:
        return f"the kit index {shown(self.location)}"

    @property
    def loaded(self) -> bool:
        """Whether it was read already (by fetch --auto)."""
        return self._entries is not None

    def entries(self) -> tuple[LedgerEntry, ...]:
        if self._entries is None:
            self._entries = tuple(_shown_as_is(entry, self.words) for entry in self._read())
        return self._entries

    def entry(self, tag: str) -> Recorded | None:
        found = next((entry for entry in self.entries() if entry.tag == tag), None)
        return Recorded(self.words, found, BY) if found is not None else None

    def entries_of(self, kit: str) -> list[Recorded]:
        """Every release of `kit` in the index, oldest first (the index's order)."""
        return [Recorded(self.words, entry, BY) for entry in self.entries() if entry.kit == kit]

    def _read(self) -> tuple[LedgerEntry, ...]:
        if "://" not in self.location:
            return kitindex.read(Path(self.location))
        try:
            data = self._client.get_bytes(self.location, limit=kitindex.MAX_SIZE)
        except NotFound:
            self.note = "not there: it answered 404"
            return ()
        except HttpFailure as error:
            self.failure = _reason(error, shown(self.location))
            self.note = f"which did not answer: {self.failure}"
            return ()
        try:
            return kitindex.parse(data, shown(self.location))
        except BadInput as error:
            raise BadInput(f"{error} (give --index URL|FILE for another, or --index "
                           f"{NO_INDEX} to go without one)") from None


def _reason(error: HttpFailure, url: str) -> str:
    """Why a request failed, without the URL (the message names the index already)."""
    text = str(error)
    return text.removeprefix(f"{url}: ") if text.startswith(f"{url}: ") else printable(text)


def _shown_as_is(entry: LedgerEntry, where: str) -> LedgerEntry:
    """The entry, when each text can be shown as is (a server's tags reach the terminal, where
    an escape sequence would act); refused, shown escaped, otherwise."""
    for text in _texts(entry):
        if not text.isprintable():
            raise BadInput(f"{where}: release {printable(entry.tag)} holds a control character "
                           f"in {printable(text[:80])}: refused (give --index URL|FILE for "
                           f"another, or --index {NO_INDEX} to go without one)")
    return entry


def _texts(value: object) -> Iterator[str]:
    """Every str in a ledger entry (its dataclasses and tuples, of a fixed shape)."""
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield from _texts(getattr(value, item.name))
    elif isinstance(value, tuple):
        for item in value:
            yield from _texts(item)
