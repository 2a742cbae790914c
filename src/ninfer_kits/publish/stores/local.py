"""A local folder as a store: <folder>/<tag>/ holds the assets and RELEASE.md; the default
without a remote, and what --dry-run writes. Its draft is <folder>/.<tag>.draft/, put in place
with one rename (docs/publish.md, "A local folder, and the ledger")."""

from __future__ import annotations

import shutil
from pathlib import Path

from ninfer_kits.errors import EnvironmentFailure
from ninfer_kits.files.atomic import fsync_dir, hash_file, replacing
from ninfer_kits.files.outputs import check_output_folder
from ninfer_kits.publish.store import Asset, Found, Presence, Release, StoreRecord, VerifyFailed

NOTES_FILE = "RELEASE.md"


class LocalStore:
    name = "local"
    max_asset_size: int | None = None

    def __init__(self, folder: Path) -> None:
        self.folder = folder.absolute()
        self._tag = ""

    def describe(self) -> str:
        return f"the local folder {self.folder}"

    def download_base(self, tag: str) -> str:
        return (self.folder / tag).as_uri()

    @property
    def _published(self) -> Path:
        return self.folder / self._tag

    @property
    def _draft(self) -> Path:
        return self.folder / f".{self._tag}.draft"

    @property
    def _label(self) -> str:
        return f"the local release folder {self.folder} (--out)"

    def preflight(self) -> None:
        # not writable or full is the environment's (3), as elsewhere
        check_output_folder(self.folder, self._label, what="the release's files")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise EnvironmentFailure(f"{self._label}: cannot be made: "
                                     f"{error.strerror}") from None

    def inspect(self, release: Release) -> Found:
        self._tag = release.tag
        published = self._published.is_dir()
        where = self._published if published else self._draft
        assets = {asset.name: _presence(where / asset.name, asset) for asset in release.assets}
        check_output_folder(self.folder, self._label, what="the release's files", needs=sum(
            asset.size for asset in release.assets if assets[asset.name] is not Presence.SAME))
        return Found(published=published, assets=assets,
                     held_sha256={name: hash_file(where / name).sha256
                                  for name, state in assets.items()
                                  if state is Presence.DIFFERENT})

    def download(self, name: str, dest: Path) -> None:
        shutil.copyfile(self._published / name, dest)

    def unpublish(self) -> None:
        if self._published.is_dir():
            shutil.rmtree(self._draft, ignore_errors=True)
            self._published.rename(self._draft)

    def put(self, asset: Asset, *, replace: bool) -> None:
        self._draft.mkdir(parents=True, exist_ok=True)
        try:
            with replacing(self._draft / asset.name) as partial:
                shutil.copyfile(asset.path, partial)
        except OSError as error:
            raise EnvironmentFailure(f"cannot copy {asset.name} to {self._draft}: "
                                     f"{error.strerror or error}") from error

    def verify(self, asset: Asset) -> None:
        where = self._published if self._published.is_dir() else self._draft
        if _presence(where / asset.name, asset) is not Presence.SAME:
            raise VerifyFailed(f"{where / asset.name} does not match the kit's {asset.name}")

    def finish(self, release: Release) -> StoreRecord:
        if not self._published.is_dir():
            notes = f"# {release.title}\n\n{release.notes}"
            (self._draft / NOTES_FILE).write_text(notes, encoding="utf-8")
            self._draft.rename(self._published)
            fsync_dir(self.folder)
        return StoreRecord(
            store=self.name, location=str(self._published),
            urls={asset.name: (self._published / asset.name).as_uri()
                  for asset in release.assets})


def _presence(path: Path, asset: Asset) -> Presence:
    if not path.is_file():
        return Presence.ABSENT
    if path.stat().st_size != asset.size:
        return Presence.DIFFERENT
    packed = hash_file(path)
    return Presence.SAME if packed.sha256 == asset.sha256 else Presence.DIFFERENT

