"""The `local` store: a folder on this machine (--out), the default where matrix.toml
configures no remote, and what --dry-run writes. Its client is publish/stores/local.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ninfer_kits.stores import StoreKind, StoreSetup

if TYPE_CHECKING:
    from ninfer_kits.publish.store import Store


def _make(setup: StoreSetup) -> Store:
    from ninfer_kits.publish.stores.local import LocalStore

    return LocalStore(setup.out)


# Last in both orders; fetched from by path only, so no signing key and no team ledger.
KIND = StoreKind(name="local", publish_rank=2, notes_rank=2, make=_make, distributes=False)
