"""The ledger: releases/<tag>.toml, one file per published kit, written last and atomically so
that it always names a complete release. Every key: releases/README.md; standard library only.
A key may be added, none renamed or removed without raising `format`.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from ninfer_kits.config import toml_text
from ninfer_kits.config.tables import Locator, Source, Table
from ninfer_kits.errors import BadInput
from ninfer_kits.files.atomic import write_file
from ninfer_kits.kit.flavours import PLAIN, beside, names

FORMAT = 1
SUFFIX = ".toml"
_HEX = {"sha256": re.compile(r"[0-9a-f]{64}"), "sha1": re.compile(r"[0-9a-f]{40}")}
_SCALARS = ("tag", "kit", "card", "upstream", "upstream_url", "revision", "version", "arch",
            "cuda_version", "toolchain", "asset")


@dataclass(frozen=True, kw_only=True)
class LedgerAsset:
    name: str
    size: int
    sha256: str
    sha1: str
    urls: tuple[tuple[str, str], ...]  # (store, download URL), in publishing order


@dataclass(frozen=True, kw_only=True)
class LedgerStore:
    name: str  # "b2", "github", "local"
    location: str  # the release page, the bucket folder, the local folder
    details: tuple[tuple[str, str], ...] = ()  # e.g. ("repository", "OWNER/NAME")


@dataclass(frozen=True, kw_only=True)
class LedgerReproduction:

    result: str  # identical, differs, failed
    date: str  # UTC, YYYY-MM-DDTHH:MM:SSZ, when it ran
    run: str  # the GitHub Actions run (URL) that ran it
    summary: str
    sha256: str  # of REPRODUCTION.json, one of `assets`


_REPRODUCTION_KEYS = ("result", "date", "run", "summary", "sha256")
_RESULTS = ("identical", "differs", "failed")


@dataclass(frozen=True, kw_only=True)
class LedgerNeeds:
    """What a flavour's ELF files need, read at publish."""

    glibc: str | None  # "2.38"; None when it references no GLIBC_ version
    sonames: tuple[str, ...]  # what the system must provide
    runpath: tuple[str, ...]  # where its programs look first ($ORIGIN: inside the kit)
    sass: tuple[str, ...]  # loaded by the CUDA runtime
    ptx: tuple[str, ...]
    relocatable_sass: tuple[str, ...]  # device-link inputs (-rdc)
    relocatable_ptx: tuple[str, ...]
    # ("libstdc++.so.6", ("CXXABI_1.3", …)): system libraries' symbol versions, kit's aside
    versions: tuple[tuple[str, tuple[str, ...]], ...] = ()


_NEEDS_LISTS = ("sonames", "runpath", "sass", "ptx", "relocatable_sass", "relocatable_ptx")


@dataclass(frozen=True, kw_only=True)
class LedgerFlavour:
    """One tarball as [[flavours]]: needs and distributions judged at publish; None for both in
    files written before them."""

    flavour: str  # PLAIN, or another flavour's name
    asset: str  # one of `assets`
    needs: LedgerNeeds | None = None
    meets: tuple[str, ...] | None = None  # ids of data/distros.toml where it runs
    not_known: tuple[str, ...] = ()  # ids whose facts could not decide


@dataclass(frozen=True, kw_only=True)
class LedgerTarball:
    """A flavour's tarball beside the plain kit's: `<flavour>_asset`, `_sha256`, `_size`."""

    flavour: str
    asset: str  # one of `assets`
    sha256: str
    size: int


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    format: int = FORMAT
    tag: str
    kit: str
    card: str
    upstream: str  # OWNER/NAME
    upstream_url: str
    revision: str  # the full commit SHA built
    version: str  # the upstream's VERSION, "" when it has none
    arch: str
    cuda_version: str
    toolchain: str
    asset: str  # the kit tarball's name (one of `assets`)
    published_at: datetime.datetime  # UTC, when publish completed
    stores: tuple[LedgerStore, ...]
    assets: tuple[LedgerAsset, ...]
    floor: tuple[tuple[str, str], ...]  # (requirement, why)
    # the keys below are empty in files written before them, or for a kit without them
    tarballs: tuple[LedgerTarball, ...] = ()  # the other flavours', flavours.KINDS' order
    inputs: str | None = None  # BUILDINFO's `inputs`, which `watch` compares with today's
    input_parts: tuple[tuple[str, str], ...] = ()
    # SHA256SUMS.sig's key, SHA256:… as ssh-keygen shows it
    signed_by: str | None = None
    reproduction: LedgerReproduction | None = None
    # data/cuda_drivers.toml's driver, the distribution facts' date, each tarball's facts
    driver_minimum: str | None = None
    distributions_as_of: str = ""
    flavours: tuple[LedgerFlavour, ...] = ()

    def flavour_facts(self) -> tuple[LedgerFlavour, ...]:
        """[[flavours]], or for a file written before them the tarballs it names, unjudged."""
        if self.flavours:
            return self.flavours
        return (LedgerFlavour(flavour=PLAIN, asset=self.asset),
                *(LedgerFlavour(flavour=item.flavour, asset=item.asset) for item in self.tarballs))

    def tarball_of(self, flavour: str) -> LedgerTarball | None:
        """The tarball of `flavour` (not the plain kit's) the release records, or None."""
        return next((item for item in self.tarballs if item.flavour == flavour), None)

    def asset_named(self, name: str) -> LedgerAsset:
        asset = next((a for a in self.assets if a.name == name), None)
        if asset is None:
            raise KeyError(f"{self.tag}: no asset {name!r}")
        return asset

    def url(self, name: str | None = None, store: str | None = None) -> str:
        """Asset `name`'s URL (default: the tarball) on `store` (default: the first with it)."""
        name = name or self.asset
        asset = next((a for a in self.assets if a.name == name), None)
        if asset is None:
            raise KeyError(f"{self.tag}: no asset {name!r}")
        for where, url in asset.urls:
            if store is None or where == store:
                return url
        raise KeyError(f"{self.tag}: asset {name!r} has no URL on {store!r}")

    def same_release(self, other: LedgerEntry) -> bool:
        """The same release on the same stores, whenever it was recorded."""
        return replace(self, published_at=other.published_at) == other


def path_for(ledger_dir: Path, tag: str) -> Path:
    return ledger_dir / f"{tag}{SUFFIX}"


def read_listed(path: Path) -> LedgerEntry:
    """`read`, for a file of a ledger folder: its tag must also be its file name."""
    entry = read(path)
    if path_for(path.parent, entry.tag) != path:
        raise BadInput(f"{path}: its tag {entry.tag!r} is not its file name")
    return entry


def read_all(ledger_dir: Path) -> list[LedgerEntry]:
    """Every release of the folder, oldest first; BadInput names a file that does not read."""
    if not ledger_dir.is_dir():
        return []
    entries = [read_listed(path) for path in sorted(ledger_dir.glob(f"*{SUFFIX}"))]
    return sorted(entries, key=lambda entry: (entry.published_at, entry.tag))


def _string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL must be escaped too)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _string(name)


def render(entry: LedgerEntry) -> str:
    when = entry.published_at.astimezone(datetime.UTC).replace(microsecond=0)
    lines = [
        f"# releases/{entry.tag}{SUFFIX}: kit {entry.kit} as `ninfer-kits publish` published it.",
        "# Written once the release was complete on every store; releases/README.md documents "
        "each key.",
        f"format = {entry.format}",
        *(f"{name} = {_string(getattr(entry, name))}" for name in _SCALARS),
        *_tarball_lines(entry),
        *([f"inputs = {_string(entry.inputs)}"] if entry.inputs is not None else []),
        *([f"signed_by = {_string(entry.signed_by)}"] if entry.signed_by is not None else []),
        f"published_at = {when.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        *([f"driver_minimum = {_string(entry.driver_minimum)}"]
          if entry.driver_minimum is not None else []),
        *([f"distributions_as_of = {_string(entry.distributions_as_of)}"]
          if entry.distributions_as_of else []),
    ]
    if entry.input_parts:
        lines += ["", "[input_parts]"]
        lines += [f"{_key(name)} = {_string(part)}" for name, part in entry.input_parts]
    for store in entry.stores:
        lines += ["", f"[stores.{_key(store.name)}]", f"location = {_string(store.location)}"]
        lines += [f"{_key(key)} = {_string(value)}" for key, value in store.details]
    for asset in entry.assets:
        lines += ["", "[[assets]]", f"name = {_string(asset.name)}", f"size = {asset.size}",
                  f"sha256 = {_string(asset.sha256)}", f"sha1 = {_string(asset.sha1)}",
                  "[assets.urls]"]
        lines += [f"{_key(store)} = {_string(url)}" for store, url in asset.urls]
    if entry.reproduction is not None:
        lines += ["", "[reproduction]"]
        lines += [f"{key} = {_string(getattr(entry.reproduction, key))}"
                  for key in _REPRODUCTION_KEYS]
    for requirement, why in entry.floor:
        lines += ["", "[[floor]]", f"requirement = {_string(requirement)}",
                  f"why = {_string(why)}"]
    for flavour in entry.flavours:
        lines += ["", *_flavour_lines(flavour)]
    return "\n".join(lines) + "\n"


def _flavour_lines(flavour: LedgerFlavour) -> list[str]:
    lines = ["[[flavours]]", f"flavour = {_string(flavour.flavour)}",
             f"asset = {_string(flavour.asset)}"]
    if flavour.meets is not None:
        lines += [f"meets = {_strings(flavour.meets)}",
                  f"not_known = {_strings(flavour.not_known)}"]
    if flavour.needs is not None:
        needs = flavour.needs
        lines += ["[flavours.needs]",
                  *([f"glibc = {_string(needs.glibc)}"] if needs.glibc is not None else []),
                  *(f"{key} = {_strings(getattr(needs, key))}" for key in _NEEDS_LISTS),
                  "[flavours.needs.versions]",
                  *(f"{_key(library)} = {_strings(names)}" for library, names in needs.versions)]
    return lines


def _strings(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(_string(item) for item in items) + "]"


def _tarball_lines(entry: LedgerEntry) -> list[str]:
    order = [kind.name for kind in beside()]
    if [item.flavour for item in entry.tarballs] != [
            name for name in order if entry.tarball_of(name) is not None]:
        raise ValueError(f"{entry.tag}: the tarballs of flavours "
                         f"{', '.join(item.flavour for item in entry.tarballs)}, not some of "
                         f"{', '.join(order)} once each, in that order")
    return [line for item in entry.tarballs for line in (
        f"{item.flavour}_asset = {_string(item.asset)}",
        f"{item.flavour}_sha256 = {_string(item.sha256)}", f"{item.flavour}_size = {item.size}")]


def write(path: Path, entry: LedgerEntry) -> None:
    """Write the ledger file atomically, once it reads back as the same entry."""
    text = render(entry)
    if parse(text, str(path)) != replace(entry, published_at=entry.published_at.astimezone(
            datetime.UTC).replace(microsecond=0)):
        raise AssertionError(f"{path}: the ledger does not read back as written")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, text.encode("utf-8"))


def read(path: Path) -> LedgerEntry:
    """Read and check releases/<tag>.toml; BadInput names the file and what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"no ledger file {path}: that tag has not been published") from None
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"cannot read the ledger file {path}: {error}") from None
    return parse(text, str(path))


def parse(text: str, source: str = "ledger") -> LedgerEntry:
    """A ledger file's text; BadInput (ConfigError for a key of the wrong kind) names `source`."""
    try:
        data = toml_text.loads(text)
    except toml_text.InvalidToml as error:
        raise BadInput(f"{source}: invalid TOML: {error}") from None
    root = Table(Source(Path(source), Locator(text), shown=source), (), data)
    if data.get("format") != FORMAT:
        raise BadInput(f"{source}: unsupported format {_shown(data.get('format'))} (this tool "
                       f"reads {FORMAT})")
    values = {name: root.text(name, empty=True) for name in _SCALARS}
    when = data.get("published_at")
    if not isinstance(when, datetime.datetime) or when.tzinfo is None:
        raise BadInput(f"{source}: published_at must be a date-time with a time zone")
    stores_table = data.get("stores")
    if not isinstance(stores_table, dict) or not stores_table:
        raise BadInput(f"{source}: no [stores.NAME] table")
    stores = tuple(_store(name, root.table("stores").table(name)) for name in stores_table)
    assets = tuple(_asset(item, source) for item in _tables(root, "assets", source))
    if values["asset"] not in {asset.name for asset in assets}:
        raise BadInput(f"{source}: asset {values['asset']!r} is not among [[assets]]")
    floor = tuple((row.text("requirement", empty=True), row.text("why", empty=True))
                  for row in _tables(root, "floor", source, required=False))
    tarballs = tuple(item for kind in beside()
                     if (item := _tarball(root, kind.name, assets, values["asset"], source)))
    inputs, input_parts = _inputs(root, source)
    signed_by = data.get("signed_by")
    if signed_by is not None and (not isinstance(signed_by, str)
                                  or _FINGERPRINT.fullmatch(signed_by) is None):
        raise BadInput(f"{source}: signed_by must be a key fingerprint SHA256:<43 base64 "
                       f"characters>, got {_shown(signed_by)}")
    flavours = tuple(_flavour(row, assets, source)
                     for row in _tables(root, "flavours", source, required=False))
    as_of = root.optional_text("distributions_as_of", empty=True)
    if any(flavour.meets is not None for flavour in flavours) and \
            _DATE.fullmatch(as_of or "") is None:
        raise BadInput(f"{source}: distributions_as_of must be a date YYYY-MM-DD beside "
                       f"[[flavours]] that say where they run")
    return LedgerEntry(format=FORMAT, **values, published_at=when, stores=stores,
                       assets=assets, floor=floor, tarballs=tarballs, inputs=inputs,
                       input_parts=input_parts, signed_by=signed_by,
                       reproduction=_reproduction(root, assets, source),
                       driver_minimum=root.optional_text("driver_minimum", empty=True),
                       distributions_as_of=as_of or "", flavours=flavours)


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _flavour(row: Table, assets: tuple[LedgerAsset, ...], source: str) -> LedgerFlavour:
    name = row.text("flavour", empty=True)
    where = f"{source}: [[flavours]] {name!r:.40}"
    if name not in names():
        raise BadInput(f"{where}: flavour must be one of {', '.join(names())}")
    asset = row.text("asset", empty=True)
    if asset not in {item.name for item in assets}:
        raise BadInput(f"{where}: asset {asset!r:.80} is not among [[assets]]")
    extra = sorted(set(row.data) - {"flavour", "asset", "meets", "not_known", "needs"})
    if extra:
        raise BadInput(f"{where}: {extra[0]} is not a key of [[flavours]]")
    meets = _string_list(row.data, "meets", where) if "meets" in row.data else None
    not_known = _string_list(row.data, "not_known", where) if "not_known" in row.data else ()
    needs = row.data.get("needs")
    if needs is not None and not isinstance(needs, dict):
        raise BadInput(f"{where}: needs must be a table")
    return LedgerFlavour(flavour=name, asset=asset, meets=meets, not_known=not_known,
                         needs=None if needs is None else _needs(row.table("needs"),
                                                                 f"{where}: needs"))


def _needs(table: Table, where: str) -> LedgerNeeds:
    extra = sorted(set(table.data) - {"glibc", "versions", *_NEEDS_LISTS})
    if extra:
        raise BadInput(f"{where}: {extra[0]} is not a key of [flavours.needs]")
    lists = {key: _string_list(table.data, key, where) for key in _NEEDS_LISTS}
    versions = table.data.get("versions", {})
    if not isinstance(versions, dict):
        raise BadInput(f"{where}: versions must be a table")
    return LedgerNeeds(glibc=table.optional_text("glibc", empty=True), **lists,
                       versions=tuple((library, _string_list(versions, library,
                                                             f"{where}.versions"))
                                      for library in versions))


def _string_list(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadInput(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _reproduction(root: Table, assets: tuple[LedgerAsset, ...],
                  source: str) -> LedgerReproduction | None:
    """[reproduction], optional; its sha256 that of an asset REPRODUCTION.json."""
    table = root.data.get("reproduction")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise BadInput(f"{source}: reproduction must be a table")
    extra = sorted(key for key in table if key not in _REPRODUCTION_KEYS)
    if extra:
        raise BadInput(f"{source}: reproduction.{extra[0]} is not a key of [reproduction]")
    values = {key: root.table("reproduction").text(key, empty=True)
              for key in _REPRODUCTION_KEYS}
    if values["result"] not in _RESULTS:
        raise BadInput(f"{source}: reproduction.result must be one of {', '.join(_RESULTS)}")
    recorded = next((a for a in assets if a.name == "REPRODUCTION.json"), None)
    if recorded is None or recorded.sha256 != values["sha256"]:
        raise BadInput(f"{source}: reproduction.sha256 is not that of an asset "
                       f"REPRODUCTION.json among [[assets]]")
    return LedgerReproduction(**values)


_FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


_INPUTS = re.compile(r"sha256:[0-9a-f]{64}")
_INPUT_PART = re.compile(r"[0-9a-f]{16}")


def _inputs(root: Table, source: str) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """(inputs, input_parts), both optional; parts only beside their digest."""
    if "inputs" not in root.data:
        if "input_parts" in root.data:
            raise BadInput(f"{source}: [input_parts] without inputs")
        return None, ()
    digest = root.text("inputs", empty=True)
    if _INPUTS.fullmatch(digest) is None:
        raise BadInput(f"{source}: inputs is not 'sha256:<64 hex digits>'")
    table = root.data.get("input_parts", {})
    if not isinstance(table, dict):
        raise BadInput(f"{source}: input_parts must be a table")
    for name in table:
        if _INPUT_PART.fullmatch(root.table("input_parts").text(name, empty=True)) is None:
            raise BadInput(f"{source}: input_parts.{name} is not 16 hex digits")
    return digest, tuple(table.items())


def _tarball(root: Table, flavour: str, assets: tuple[LedgerAsset, ...],
             asset: str, source: str) -> LedgerTarball | None:
    """`<flavour>_asset`, `_sha256`, `_size`: all three or none, naming an asset of [[assets]]."""
    data = root.data
    keys = (f"{flavour}_asset", f"{flavour}_sha256", f"{flavour}_size")
    given = [key for key in keys if key in data]
    if not given:
        return None
    if len(given) != len(keys):
        missing = ", ".join(key for key in keys if key not in data)
        raise BadInput(f"{source}: {', '.join(given)} without {missing}")
    name = root.text(keys[0], empty=True)
    digest = root.text(keys[1], empty=True)
    size = data[keys[2]]
    if _HEX["sha256"].fullmatch(digest) is None:
        raise BadInput(f"{source}: {keys[1]} is not a sha256 hex digest")
    if not _is_size(size):
        raise BadInput(f"{source}: {keys[2]} must be a whole number of bytes")
    recorded = next((item for item in assets if item.name == name), None)
    if name == asset or recorded is None:
        raise BadInput(f"{source}: {keys[0]} {name!r} is not another asset among [[assets]]")
    if (recorded.sha256, recorded.size) != (digest, size):
        raise BadInput(f"{source}: {keys[1]} and {keys[2]} differ from the [[assets]] entry "
                       f"of {name}")
    return LedgerTarball(flavour=flavour, asset=name, sha256=digest, size=size)


def _is_size(value: object) -> TypeGuard[int]:
    """A file size (TOML allows ints of thousands of digits, which str() refuses to print)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def _shown(value: object) -> str:
    """A value read from the file, for a message: short, and never an error of its own."""
    try:
        return repr(value)[:60]
    except (ValueError, RecursionError):  # an int of more than 4300 digits; deep nesting
        return f"a {type(value).__name__} too large to show"


def _tables(root: Table, key: str, source: str, required: bool = True) -> tuple[Table, ...]:
    value = root.data.get(key, None if required else [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise BadInput(f"{source}: [[{key}]] tables expected")
    return root.tables(key)


def _store(name: str, section: Table) -> LedgerStore:
    details = tuple((key, section.text(key, empty=True)) for key in section.data
                    if key != "location")
    return LedgerStore(name=name, location=section.text("location", empty=True),
                       details=details)


def _asset(item: Table, source: str) -> LedgerAsset:
    name = item.text("name", empty=True)
    size = item.data.get("size")
    if not _is_size(size):
        raise BadInput(f"{source}: asset {name!r}: size must be a whole number of bytes")
    hashes = {}
    for key, pattern in _HEX.items():
        value = item.text(key, empty=True)
        if pattern.fullmatch(value) is None:
            raise BadInput(f"{source}: asset {name!r}: {key} is not a {key} hex digest")
        hashes[key] = value
    urls = item.data.get("urls", {})
    if not isinstance(urls, dict) or not all(isinstance(v, str) for v in urls.values()):
        raise BadInput(f"{source}: asset {name!r}: urls must be a table of strings")
    return LedgerAsset(name=name, size=size, sha256=hashes["sha256"], sha1=hashes["sha1"],
                       urls=tuple(urls.items()))
