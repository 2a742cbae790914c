"""The plan: which kit folder, checked before any store is touched (sizes first, so that a
tarball too large for a store is refused before hours of hashing), and the release it makes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ninfer_kits.errors import BadInput, NinferKitsError, need
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.kit import buildinfo, kitdir
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.kit.flavours import beside
from ninfer_kits.kit.kitdir import KitDir
from ninfer_kits.matrix import Matrix, RevisionFacts
from ninfer_kits.publish import notes
from ninfer_kits.publish.store import Asset, Release
from ninfer_kits.release import reproduction
from ninfer_kits.release.checksums import SHA256, parse_sums

TARBALL_TYPE = "application/gzip"
TEXT_TYPE = "text/plain; charset=utf-8"
JSON_TYPE = "application/json"
SOURCE_TYPE = "application/octet-stream"  # .dsc, .orig.tar.xz, .asc: one type for all


class AssetTooLarge(BadInput):
    """An asset larger than a store accepts (GitHub: under 2 GiB per file)."""


def find_kit_dir(target: str, dist_dir: Path, matrix: Matrix) -> Path:
    """The kit folder `target` names: a path, or a kit of the matrix whose one finished folder
    is in dist_dir (BUILDINFO.txt's `kit` says which)."""
    as_path = Path(target)
    if as_path.is_dir() and (as_path / kitdir.BUILDINFO).exists():
        return as_path
    matrix.kit(target)  # an unknown name: did-you-mean
    found = sorted(folder for folder in _folders(dist_dir) if _kit_of(folder) == target)
    if not found:
        raise BadInput(f"no finished kit folder of kit {target} in {dist_dir}: build it first "
                       f"(ninfer-kits build {target}), or give the folder's path")
    if len(found) > 1:
        raise BadInput(f"{len(found)} finished kit folders of kit {target} in {dist_dir} "
                       f"({', '.join(folder.name for folder in found)}): give the folder's path")
    return found[0]


def _folders(dist_dir: Path) -> Iterable[Path]:
    if not dist_dir.is_dir():
        raise BadInput(f"{dist_dir}: no such folder (give --dist)")
    return (child for child in dist_dir.iterdir()
            if child.is_dir() and not child.name.startswith("."))


def _kit_of(folder: Path) -> str | None:
    try:
        return buildinfo.read(folder / kitdir.BUILDINFO).kit
    except (OSError, NinferKitsError):
        return None


def read_kit(folder: Path, matrix: Matrix, limits: Sequence[tuple[str, int | None]]) -> KitDir:
    """The kit folder, checked: layout, each asset under `limits` (store → largest asset), the
    names the matrix renders, then every hash."""
    unchecked = kitdir.read_kit_dir(folder, verify=False)
    if unchecked.sha1 is None:
        raise kitdir.KitDirInvalid(f"kit folder {folder}: {kitdir.SHA1SUMS} missing (a release "
                                   f"carries it, for B2 and sha1sum)")
    for store, limit in limits:
        for name in (*unchecked.files, *unchecked.sources):
            if name == kitdir.BUILD_LOG or limit is None:
                continue
            size = (folder / name).stat().st_size
            if size > limit:
                raise AssetTooLarge(
                    f"{folder / name}: {size:,} bytes is more than {store} takes in one asset "
                    f"({limit:,} bytes); nothing was uploaded. Make the kit smaller (nvcc "
                    f"--compress-mode=size), or publish it without {store} (--to)")
    _check_names(unchecked, matrix)
    return kitdir.read_kit_dir(folder, verify=True)


def _check_names(kit: KitDir, matrix: Matrix) -> None:
    entry = matrix.kit(kit.kit)
    facts = RevisionFacts(revision=kit.info.revision, version=kit.info.version or None)
    try:
        tag, asset = entry.render_tag(facts), entry.render_asset(facts)
    except (NinferKitsError, ValueError) as error:
        raise BadInput(f"{kit.path}: cannot render kit {kit.kit}'s names from its BUILDINFO.txt "
                       f"({error})") from None
    if (tag, asset) != (kit.tag, kit.asset):
        raise BadInput(f"{kit.path}: matrix.toml renders tag {tag!r} and asset {asset!r} for "
                       f"kit {kit.kit} at revision {kit.info.revision[:12]}, but the folder "
                       f"holds {kit.tag!r} and {kit.asset!r}: rebuild the kit (or publish with "
                       f"the matrix it was built with)")
    for kind in beside():
        wanted, held = kind.built_for(entry), kit.flavour(kind.name)
        if wanted != (held is not None):
            said = (f"no {kind.switch} = true" if not wanted else f"{kind.switch} = true"
                    if kind.switch else f"every kit has the {kind.name} flavour")
            holds = f"holds {held.asset}" if held else f"holds no {kind.name} tarball"
            raise BadInput(f"{kit.path}: matrix.toml says {said} for kit {kit.kit}, but the "
                           f"folder {holds}: rebuild the kit (or publish with the matrix it "
                           f"was built with)")


def assets_of(kit: KitDir, tools: tuple[Asset, ...] = (),
              signature: Asset | None = None, *, record: Asset | None = None,
              sums: Asset | None = None, sources: tuple[Asset, ...] = ()) -> tuple[Asset, ...]:
    """The release's assets in upload order, SHA256SUMS last: a client that finds it finds
    everything it names, and its signature. `sums`: the SHA256SUMS listing `record` (publish's,
    in scratch) instead of the kit folder's."""
    if record is None and kit.reproduction is not None:  # a release folder published again
        held = hash_file(kit.reproduction)
        record = Asset(name=kitdir.REPRODUCTION, path=held.path, size=held.size,
                       sha256=held.sha256, sha1=held.sha1, content_type=TEXT_TYPE)
    sha1sums = hash_file(kit.path / kitdir.SHA1SUMS)
    sha256sums = hash_file(sums.path if sums else kit.path / kitdir.SHA256SUMS)
    buildinfo = hash_file(kit.buildinfo_path)
    if buildinfo.sha256 != kit.buildinfo_sha256:
        raise kitdir.KitDirInvalid(f"kit folder {kit.path}: {kitdir.BUILDINFO} changed while "
                                   f"it was read")
    assets = (
        *(Asset(name=flavour.asset, path=flavour.path, size=flavour.size, sha256=flavour.sha256,
                sha1=_listed(flavour.sha1), content_type=TARBALL_TYPE)
          for flavour in kit.flavours),
        Asset(name=kitdir.BUILDINFO, path=kit.buildinfo_path, size=buildinfo.size,
              sha256=buildinfo.sha256, sha1=buildinfo.sha1, content_type=TEXT_TYPE),
        Asset(name=kitdir.SHA1SUMS, path=sha1sums.path, size=sha1sums.size,
              sha256=sha1sums.sha256, sha1=sha1sums.sha1, content_type=TEXT_TYPE),
        *_attestations(kit),
        *_owed(kit),
        *_sources(kit, {asset.name for asset in sources}),
        *sources,
        *tools,
        *((signature,) if signature is not None else ()),
        Asset(name=kitdir.SHA256SUMS, path=sha256sums.path, size=sha256sums.size,
              sha256=sha256sums.sha256, sha1=sha256sums.sha1, content_type=TEXT_TYPE),
    )
    return with_record(assets, record) if record is not None else assets


# after REPRODUCTION.json in upload order
_AFTER_RECORD = frozenset({kitdir.PYZ, kitdir.SIGNATURE, kitdir.SHA256SUMS})


def with_record(assets: tuple[Asset, ...], record: Asset) -> tuple[Asset, ...]:
    """`assets` with REPRODUCTION.json in its place."""
    at = next(index for index, asset in enumerate(assets) if asset.name in _AFTER_RECORD)
    return (*assets[:at], record, *assets[at:])


def _attestations(kit: KitDir) -> tuple[Asset, ...]:
    """Each tarball's SBOM and provenance (none in a kit built before them)."""
    assets = []
    for name, listed in kit.attestations:
        hashed = hash_file(kit.path / name)
        if hashed.sha256 != listed:
            raise kitdir.KitDirInvalid(f"kit folder {kit.path}: {name} changed while it was "
                                       f"read")
        assets.append(Asset(name=name, path=hashed.path, size=hashed.size, sha256=hashed.sha256,
                            sha1=hashed.sha1, content_type=JSON_TYPE))
    return tuple(assets)


def _owed(kit: KitDir) -> tuple[Asset, ...]:
    if kit.owed_record is None:
        return ()
    hashed = hash_file(kit.owed_record)
    if hashed.sha256 != kit.owed:
        raise kitdir.KitDirInvalid(f"kit folder {kit.path}: {kitdir.OWED} changed while it was "
                                   f"read")
    return (Asset(name=kitdir.OWED, path=hashed.path, size=hashed.size, sha256=hashed.sha256,
                  sha1=hashed.sha1, content_type=JSON_TYPE),)


def _sources(kit: KitDir, fetched: set[str]) -> tuple[Asset, ...]:
    """The copyleft source packages the kit folder holds that publish did not fetch, by their
    own names (assets are flat; SHA256SUMS lists them as sources/<name>)."""
    assets = []
    for listed in kit.sources:
        if listed.removeprefix(f"{kitdir.SOURCES}/") in fetched:
            continue
        if kitdir.source_file(kit.path, listed) is None:  # a release's folder may lack it
            continue
        hashed = hash_file(need(kitdir.source_file(kit.path, listed), listed))
        assets.append(Asset(name=listed.removeprefix(f"{kitdir.SOURCES}/"), path=hashed.path,
                            size=hashed.size, sha256=hashed.sha256, sha1=hashed.sha1,
                            content_type=SOURCE_TYPE))
    return tuple(assets)


# what SHA256SUMS does not list: the signature of it, and itself
UNLISTED = frozenset({kitdir.SIGNATURE, kitdir.SHA256SUMS})


def listed(kit: KitDir, assets: Iterable[Asset], fetched: Iterable[str] = ()
           ) -> dict[str, str]:
    """Name as listed → sha256 of every asset but UNLISTED (sources as sources/<file>)."""
    sources = {name.removeprefix(f"{kitdir.SOURCES}/"): name for name in kit.sources}
    sources |= {name: f"{kitdir.SOURCES}/{name}" for name in fetched}
    return {sources.get(asset.name, asset.name): asset.sha256 for asset in assets
            if asset.name not in UNLISTED}


def check_listed(kit: KitDir, release: Release, fetched: Iterable[str] = ()) -> None:
    """Every file but the signature is in SHA256SUMS with its own sha256, so the signature and
    `sha256sum -c` cover all a user runs; KitDirInvalid naming each one that is not."""
    sums = release.asset(kitdir.SHA256SUMS)
    held = parse_sums(sums.path.read_text(encoding="utf-8"), SHA256, str(sums.path))
    wrong = sorted(name for name, sha256 in listed(kit, release.assets, fetched).items()
                   if held.get(name) != sha256)
    if wrong:
        raise kitdir.KitDirInvalid(f"release {release.tag}: its {kitdir.SHA256SUMS} does not "
                                   f"list {', '.join(wrong)} with the sha256 of the file "
                                   f"published: nothing was uploaded")


def _listed(sha1: str | None) -> str:
    if sha1 is None:  # read_kit refuses a folder without SHA1SUMS
        raise kitdir.KitDirInvalid(f"{kitdir.SHA1SUMS} missing")
    return sha1


def make_release(kit: KitDir, download_base: str, tools: tuple[Asset, ...] = (),
                 fetch_hint: str | None = None, signature: Asset | None = None,
                 signed: tuple[str, str] | None = None, *, record: Asset | None = None,
                 sums: Asset | None = None, sources: tuple[Asset, ...] = (),
                 forbidden: tuple[str, ...] = ()) -> Release:
    """The release of `kit`; `signature` and `signed` where it is signed, `record` and `sums`
    where the rebuild was recorded, `forbidden` the licence verdicts the notes then show."""
    info: BuildInfo = kit.info
    shown = record.path if record is not None else kit.reproduction
    return Release(tag=kit.tag, title=notes.title(info, kit.tag),
                   notes=notes.render(info, tag=kit.tag, asset=kit.asset,
                                      download_base=download_base, fetch_hint=fetch_hint,
                                      tarballs=tuple((flavour.name, flavour.asset)
                                                     for flavour in kit.siblings),
                                      signed=signed,
                                      reproduced=reproduction.read(shown)
                                      if shown is not None else None,
                                      forbidden=forbidden),
                   assets=assets_of(kit, tools, signature, record=record, sums=sums,
                                    sources=sources))


def pyz_asset(folder: Path) -> Asset:
    """ninfer-kits.pyz without matrix or ledger: its bytes depend only on this ninfer-kits."""
    from ninfer_kits.release import pyz

    path, _build = pyz.build(folder / kitdir.PYZ, None)
    hashed = hash_file(path)
    return Asset(name=kitdir.PYZ, path=path, size=hashed.size, sha256=hashed.sha256,
                 sha1=hashed.sha1, content_type="application/octet-stream")
