"""The store registry: every place a release can go, by the name `--to` and `--from` take, so
that publish, fetch, kit-url and the matrix name none (adding one: DEVELOPING.md, "Adding a
store"). A kind imports its job's code only when called, so fetch and the matrix never load a
publish module, b2sdk or PyGithub.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ninfer_kits.net.remote import MissingCredentials

if TYPE_CHECKING:
    import argparse

    from ninfer_kits.config.tables import Table
    from ninfer_kits.fetch.http import Client
    from ninfer_kits.fetch.locate import Context, Located, Wanted
    from ninfer_kits.log import Reporter
    from ninfer_kits.matrix import Matrix
    from ninfer_kits.net.retry import RetryPolicy
    from ninfer_kits.publish.store import Store

BUILTIN = ("local", "b2", "github")  # the modules of this package that declare a KIND


@dataclass(frozen=True, kw_only=True)
class StoreSetup:
    """What a store is made from: matrix, arguments, environment, retry policy, reporter."""

    matrix: Matrix
    args: argparse.Namespace
    environ: Mapping[str, str]
    retry: RetryPolicy
    reporter: Reporter
    out: Path  # the local folder: --out, else published/ (a dry run's: dry-run/)

    def target(self, name: str) -> object | None:
        """The store's `[publish.NAME]` table as its kind read it, None without one."""
        return self.matrix.publish.targets.get(name)


@dataclass(frozen=True, kw_only=True)
class Origin:
    """How `fetch --from NAME` and `kit-url --from NAME` find a release on a store."""

    locate: Callable[[Wanted, Context, Client | None], Located]
    words: str  # what --from NAME fetches, for the help: "B2's friendly URLs"
    # why locating needs the matrix file when there is none (None: it does without)
    matrix_needed: Callable[[Context], str | None]


@dataclass(frozen=True, kw_only=True)
class StoreKind:
    """One kind of store: how publish makes it, the matrix configures it, fetch reads it."""

    name: str  # what --to and --from take, and the ledger records
    publish_rank: int  # the publishing order, lowest first: blob storage before the release page
    notes_rank: int  # whose download URLs the notes show, lowest first: the release page's
    make: Callable[[StoreSetup], Store]  # reads its credentials: MissingCredentials names them
    distributes: bool = True  # users download from it: signed, recorded in the team's ledger
    extras: tuple[str, ...] = ()  # the third-party modules `make` imports (the publish extra)
    read_table: Callable[[Table], object] | None = None  # its [publish.NAME], checked
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None  # publish's options
    # checks its publish options (chosen or not) before credentials are asked for
    check_arguments: Callable[[StoreSetup, bool], None] | None = None
    # the download folder a dry run's notes show; None: not known without reaching it
    notes_base: Callable[[StoreSetup, str], str | None] | None = None
    origin: Origin | None = None  # None: users cannot fetch from it


_kinds: dict[str, StoreKind] = {}
_builtin_loaded = False


def register(kind: StoreKind) -> None:
    """Make `kind` a store that publish, fetch, kit-url and the matrix know."""
    _load_builtin()
    _kinds[kind.name] = kind


def unregister(name: str) -> None:
    """Forget the store `name` (a test's toy store, when the test is over)."""
    _kinds.pop(name, None)


def _load_builtin() -> None:
    global _builtin_loaded
    if not _builtin_loaded:
        _builtin_loaded = True
        for module in BUILTIN:
            kind: StoreKind = importlib.import_module(f"{__name__}.{module}").KIND
            _kinds.setdefault(kind.name, kind)


def kinds() -> tuple[StoreKind, ...]:
    _load_builtin()
    return tuple(sorted(_kinds.values(), key=lambda kind: (kind.publish_rank, kind.name)))


def names() -> tuple[str, ...]:
    """What --to takes, in publishing order."""
    return tuple(kind.name for kind in kinds())


def kind(name: str) -> StoreKind:
    _load_builtin()
    return _kinds[name]


def by_notes() -> tuple[StoreKind, ...]:
    """Every store, the one whose download URLs the notes prefer first."""
    return tuple(sorted(kinds(), key=lambda kind: (kind.notes_rank, kind.name)))


def distributing(chosen: Iterable[str]) -> tuple[str, ...]:
    """Those of `chosen` that users download from (the licence gate refuses to them)."""
    _load_builtin()
    return tuple(name for name in chosen if name in _kinds and _kinds[name].distributes)


def notes_rank(name: str) -> int:
    """Where the store `name` comes in the notes' preference (one not registered: last)."""
    _load_builtin()
    found = _kinds.get(name)
    return found.notes_rank if found is not None else max(k.notes_rank for k in _kinds.values()) + 1


def with_tables() -> tuple[StoreKind, ...]:
    """The stores configured by a `[publish.NAME]` table, as the matrix lists its keys."""
    return tuple(kind for kind in by_notes() if kind.read_table is not None)


def origins() -> tuple[StoreKind, ...]:
    """The stores users fetch from, as --from lists them (the default first)."""
    return tuple(kind for kind in by_notes() if kind.origin is not None)


def origin(name: str) -> Origin | None:
    """How a release on store `name` is located; None for no such store (a folder's path)."""
    _load_builtin()
    found = _kinds.get(name)
    return found.origin if found is not None else None


def origin_words(last: str) -> str:
    """`github, b2 or LAST`: the origins' names for a message."""
    return f"{', '.join(kind.name for kind in origins())} or {last}"


def make_stores(chosen: tuple[str, ...], setup: StoreSetup) -> tuple[Store, ...]:
    """The stores `chosen` names; every missing credential is named at once, so one run finds
    out all there is to set."""
    stores: list[Store] = []
    missing: list[str] = []
    for name in chosen:
        try:
            stores.append(kind(name).make(setup))
        except MissingCredentials as error:
            missing.append(str(error))
    if missing:
        raise MissingCredentials("; ".join(missing))
    return tuple(stores)


def dry_notes_base(chosen: tuple[str, ...], setup: StoreSetup, tag: str) -> str:
    """The folder the real notes would show (the preferred store's that knows it), else ours."""
    for each in by_notes():
        base = each.notes_base(setup, tag) if each.name in chosen and each.notes_base else None
        if base is not None:
            return base
    return (setup.out / tag).as_uri()
