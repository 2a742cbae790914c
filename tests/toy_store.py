"""A toy store, all in this one module, as a newcomer would add one: a "shelf" folder with a
layout of its own (`<root>/<tag>--<asset>`, and `<root>/<tag>.published` listing the assets
once the release is complete), configured by `[publish.toy] root = "/ABSOLUTE/PATH"`, and
fetched back from with `--from toy`. tests/test_store_registry.py registers KIND."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config.tables import Table
from ninfer_kits.errors import BadInput
from ninfer_kits.fetch.fetch import DIR
from ninfer_kits.fetch.http import Client
from ninfer_kits.fetch.locate import Context, Located, RemoteFile, Wanted
from ninfer_kits.publish.store import (
    Asset,
    Found,
    Presence,
    Release,
    Store,
    StoreRecord,
    VerifyFailed,
)
from ninfer_kits.stores import Origin, StoreKind, StoreSetup

NAME = "toy"


@dataclass(frozen=True)
class Shelf:
    """[publish.toy]: the shelf's folder."""

    root: Path


def read_table(table: Table) -> Shelf:
    table.check_keys(("root",))
    root = Path(table.text("root"))
    if not root.is_absolute():
        raise table.error("root", "must be an absolute path")
    return Shelf(root)


def _shelf(target: object | None, where: str) -> Shelf:
    if not isinstance(target, Shelf):
        raise BadInput(f"{where}: no [publish.{NAME}] table")
    return target


class ShelfStore:
    name = NAME
    max_asset_size: int | None = None

    def __init__(self, shelf: Shelf) -> None:
        self.root = shelf.root
        self._tag = ""

    def _file(self, name: str) -> Path:
        return self.root / f"{self._tag}--{name}"

    @property
    def _marker(self) -> Path:
        return self.root / f"{self._tag}.published"

    def describe(self) -> str:
        return f"the toy shelf {self.root}"

    def download_base(self, tag: str) -> str:
        return self.root.as_uri()

    def preflight(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def inspect(self, release: Release) -> Found:
        self._tag = release.tag
        return Found(published=self._marker.is_file(),
                     assets={asset.name: self._presence(asset) for asset in release.assets})

    def _presence(self, asset: Asset) -> Presence:
        path = self._file(asset.name)
        if not path.is_file():
            return Presence.ABSENT
        same = hashlib.sha256(path.read_bytes()).hexdigest() == asset.sha256
        return Presence.SAME if same else Presence.DIFFERENT

    def unpublish(self) -> None:
        self._marker.unlink(missing_ok=True)

    def put(self, asset: Asset, *, replace: bool) -> None:
        shutil.copyfile(asset.path, self._file(asset.name))

    def verify(self, asset: Asset) -> None:
        if self._presence(asset) is not Presence.SAME:
            raise VerifyFailed(f"{self._file(asset.name)} is not the kit's {asset.name}")

    def download(self, name: str, dest: Path) -> None:
        shutil.copyfile(self._file(name), dest)

    def finish(self, release: Release) -> StoreRecord:
        self._marker.write_text("".join(f"{asset.name}\n" for asset in release.assets))
        return StoreRecord(store=NAME, location=str(self.root),
                           urls={asset.name: self._file(asset.name).as_uri()
                                 for asset in release.assets})


def _make(setup: StoreSetup) -> Store:
    return ShelfStore(_shelf(setup.target(NAME), str(setup.matrix.path)))


def _locate(want: Wanted, ctx: Context, client: Client | None) -> Located:
    """The release's files on the shelf, read from this machine as a folder's are."""
    shelf = _shelf(ctx.matrix.publish.targets.get(NAME) if ctx.matrix else None, "--from toy")
    marker = shelf.root / f"{want.tag}.published"
    if not marker.is_file() or want.asset is None:
        raise BadInput(f"the toy shelf {shelf.root} has no release {want.tag}")
    files = {name: RemoteFile(name, str(shelf.root / f"{want.tag}--{name}"))
             for name in marker.read_text().split()}
    kit = want.kit.id if want.kit else (want.entry.kit if want.entry else None)
    return Located(want.tag, want.asset, DIR, f"the toy shelf {shelf.root}", files, kit=kit,
                   ledger=want.entry, notes=want.notes)


KIND = StoreKind(name=NAME, publish_rank=5, notes_rank=5, make=_make, read_table=read_table,
                 origin=Origin(locate=_locate, words="a toy shelf",
                               matrix_needed=lambda ctx: f"the shelf is its [publish.{NAME}]"))
