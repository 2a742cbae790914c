"""The ledger: releases/<tag>.toml, one file per published kit, written last and atomically.

`publish` writes it only once every store holds the complete release, so a ledger file always
names a release that can be downloaded and checked. `fetch`, `kit-url` and the scheduled
rebuild read it through `read()` (so it stands on the ground floor, beside every job, with
nothing but the standard library); releases/README.md documents every key. The format is
stable: a new key may be added, none is renamed or removed without raising `format`.
"""

from __future__ import annotations

import datetime
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from ninfer_kits.atomic import write_file
from ninfer_kits.errors import BadInput

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
    """What the release's REPRODUCTION.json says: the independent rebuild's result."""

    result: str  # identical, differs, failed
    date: str  # UTC, YYYY-MM-DDTHH:MM:SSZ, when it ran
    run: str  # the GitHub Actions run (URL) that ran it
    summary: str
    sha256: str  # of REPRODUCTION.json, one of `assets`


_REPRODUCTION_KEYS = ("result", "date", "run", "summary", "sha256")
_RESULTS = ("identical", "differs", "failed")


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
    # the portable tarball (one of `assets`), for a kit built portable; None for the others
    # and in files written before portable kits
    portable_asset: str | None = None
    portable_sha256: str | None = None
    portable_size: int | None = None
    # ninfer_kits.matrix.inputs' digest of everything that made the kit (`sha256:<hex>`, from
    # BUILDINFO's `inputs`) and the first 16 hex digits of each part's sha256, which `watch`
    # compares with today's; None and () in files written before, or for a kit without them
    inputs: str | None = None
    input_parts: tuple[tuple[str, str], ...] = ()
    # the fingerprint (SHA256:…, as ssh-keygen shows it) of the key that signed SHA256SUMS
    # (the release's SHA256SUMS.sig); None for an unsigned release and in files written before
    signed_by: str | None = None
    # the release's REPRODUCTION.json, as [reproduction]; None for a release without one and in
    # files written before
    reproduction: LedgerReproduction | None = None

    def url(self, name: str | None = None, store: str | None = None) -> str:
        """The download URL of asset `name` (default: the tarball) from `store` (default: the
        first store that has one, in publishing order)."""
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
    """Every release the ledger folder records, oldest first (by when published, then tag);
    none when there is no folder. BadInput names a file that does not read."""
    if not ledger_dir.is_dir():
        return []
    entries = [read_listed(path) for path in sorted(ledger_dir.glob(f"*{SUFFIX}"))]
    return sorted(entries, key=lambda entry: (entry.published_at, entry.tag))


# --------------------------------------------------------------------------- writing


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
        *_portable_lines(entry),
        *([f"inputs = {_string(entry.inputs)}"] if entry.inputs is not None else []),
        *([f"signed_by = {_string(entry.signed_by)}"] if entry.signed_by is not None else []),
        f"published_at = {when.strftime('%Y-%m-%dT%H:%M:%SZ')}",
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
    return "\n".join(lines) + "\n"


def _portable_lines(entry: LedgerEntry) -> list[str]:
    if entry.portable_asset is None:
        return []
    if entry.portable_sha256 is None or entry.portable_size is None:
        raise ValueError(f"{entry.tag}: portable_asset without its sha256 and size")
    return [f"portable_asset = {_string(entry.portable_asset)}",
            f"portable_sha256 = {_string(entry.portable_sha256)}",
            f"portable_size = {entry.portable_size}"]


def write(path: Path, entry: LedgerEntry) -> None:
    """Write the ledger file atomically (a temporary file, fsync, rename), checking first that
    it reads back as the same entry."""
    text = render(entry)
    if parse(text, str(path)) != replace(entry, published_at=entry.published_at.astimezone(
            datetime.UTC).replace(microsecond=0)):
        raise AssertionError(f"{path}: the ledger does not read back as written")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, text.encode("utf-8"))


# --------------------------------------------------------------------------- reading


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
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise BadInput(f"{source}: invalid TOML: {error}") from None
    except ValueError as error:  # an integer of more than 4300 digits (sys.int_info)
        raise BadInput(f"{source}: invalid TOML: {str(error)[:100]}") from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise BadInput(f"{source}: invalid TOML: nested too deep") from None
    if data.get("format") != FORMAT:
        raise BadInput(f"{source}: unsupported format {_shown(data.get('format'))} (this tool "
                       f"reads {FORMAT})")
    values = {name: _text(data, name, source) for name in _SCALARS}
    when = data.get("published_at")
    if not isinstance(when, datetime.datetime) or when.tzinfo is None:
        raise BadInput(f"{source}: published_at must be a date-time with a time zone")
    stores_table = data.get("stores")
    if not isinstance(stores_table, dict) or not stores_table:
        raise BadInput(f"{source}: no [stores.NAME] table")
    stores = tuple(_store(name, section, source) for name, section in stores_table.items())
    assets = tuple(_asset(item, source) for item in _tables(data, "assets", source))
    if values["asset"] not in {asset.name for asset in assets}:
        raise BadInput(f"{source}: asset {values['asset']!r} is not among [[assets]]")
    floor = tuple((_text(row, "requirement", source), _text(row, "why", source))
                  for row in _tables(data, "floor", source, required=False))
    portable = _portable(data, assets, values["asset"], source)
    inputs, input_parts = _inputs(data, source)
    signed_by = data.get("signed_by")
    if signed_by is not None and (not isinstance(signed_by, str)
                                  or _FINGERPRINT.fullmatch(signed_by) is None):
        raise BadInput(f"{source}: signed_by must be a key fingerprint SHA256:<43 base64 "
                       f"characters>, got {_shown(signed_by)}")
    return LedgerEntry(format=FORMAT, **values, published_at=when, stores=stores,
                       assets=assets, floor=floor, portable_asset=portable[0],
                       portable_sha256=portable[1], portable_size=portable[2],
                       inputs=inputs, input_parts=input_parts, signed_by=signed_by,
                       reproduction=_reproduction(data, assets, source))


def _reproduction(data: Mapping[str, Any], assets: tuple[LedgerAsset, ...],
                  source: str) -> LedgerReproduction | None:
    """[reproduction]: optional (files written before it, and releases without a
    REPRODUCTION.json, have none); its sha256 that of an asset REPRODUCTION.json."""
    table = data.get("reproduction")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise BadInput(f"{source}: reproduction must be a table")
    extra = sorted(key for key in table if key not in _REPRODUCTION_KEYS)
    if extra:
        raise BadInput(f"{source}: reproduction.{extra[0]} is not a key of [reproduction]")
    values = {key: _text(table, key, f"{source}: [reproduction]") for key in _REPRODUCTION_KEYS}
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


def _inputs(data: Mapping[str, Any],
            source: str) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """(inputs, input_parts): both optional (files written before them have neither); parts
    only beside the digest they break down."""
    if "inputs" not in data:
        if "input_parts" in data:
            raise BadInput(f"{source}: [input_parts] without inputs")
        return None, ()
    digest = _text(data, "inputs", source)
    if _INPUTS.fullmatch(digest) is None:
        raise BadInput(f"{source}: inputs is not 'sha256:<64 hex digits>'")
    table = data.get("input_parts", {})
    if not isinstance(table, dict):
        raise BadInput(f"{source}: input_parts must be a table")
    for name in table:
        if _INPUT_PART.fullmatch(_text(table, name, source)) is None:
            raise BadInput(f"{source}: input_parts.{name} is not 16 hex digits")
    return digest, tuple(table.items())


_PORTABLE = ("portable_asset", "portable_sha256", "portable_size")


def _portable(data: Mapping[str, Any], assets: tuple[LedgerAsset, ...], asset: str,
              source: str) -> tuple[str | None, str | None, int | None]:
    """(portable_asset, portable_sha256, portable_size): all three or none of them (files
    written before portable kits have none), naming an asset of [[assets]] as recorded there."""
    given = [key for key in _PORTABLE if key in data]
    if not given:
        return None, None, None
    if len(given) != len(_PORTABLE):
        missing = ", ".join(key for key in _PORTABLE if key not in data)
        raise BadInput(f"{source}: {', '.join(given)} without {missing}")
    name = _text(data, "portable_asset", source)
    digest = _text(data, "portable_sha256", source)
    size = data["portable_size"]
    if _HEX["sha256"].fullmatch(digest) is None:
        raise BadInput(f"{source}: portable_sha256 is not a sha256 hex digest")
    if not _is_size(size):
        raise BadInput(f"{source}: portable_size must be a whole number of bytes")
    recorded = next((item for item in assets if item.name == name), None)
    if name == asset or recorded is None:
        raise BadInput(f"{source}: portable_asset {name!r} is not another asset among "
                       f"[[assets]]")
    if (recorded.sha256, recorded.size) != (digest, size):
        raise BadInput(f"{source}: portable_sha256 and portable_size differ from the "
                       f"[[assets]] entry of {name}")
    return name, digest, size


def _is_size(value: object) -> TypeGuard[int]:
    """A whole number of bytes a file can have (a number of thousands of digits, which TOML
    allows, could not even be printed: str() refuses ints over 4300 digits)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def _shown(value: object) -> str:
    """A value read from the file, for a message: short, and never an error of its own."""
    try:
        return repr(value)[:60]
    except (ValueError, RecursionError):  # an int of more than 4300 digits; deep nesting
        return f"a {type(value).__name__} too large to show"


def _text(table: Mapping[str, Any], key: str, source: str) -> str:
    value = table.get(key)
    if not isinstance(value, str):
        raise BadInput(f"{source}: key {key!r} must be a string")
    return value


def _tables(data: Mapping[str, Any], key: str, source: str,
            required: bool = True) -> list[Mapping[str, Any]]:
    value = data.get(key, None if required else [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise BadInput(f"{source}: [[{key}]] tables expected")
    return value


def _store(name: str, section: object, source: str) -> LedgerStore:
    if not isinstance(section, dict):
        raise BadInput(f"{source}: stores.{name} must be a table")
    details = tuple((key, _text(section, key, source)) for key in section if key != "location")
    return LedgerStore(name=name, location=_text(section, "location", source), details=details)


def _asset(item: Mapping[str, Any], source: str) -> LedgerAsset:
    name = _text(item, "name", source)
    size = item.get("size")
    if not _is_size(size):
        raise BadInput(f"{source}: asset {name!r}: size must be a whole number of bytes")
    hashes = {}
    for key, pattern in _HEX.items():
        value = _text(item, key, source)
        if pattern.fullmatch(value) is None:
            raise BadInput(f"{source}: asset {name!r}: {key} is not a {key} hex digest")
        hashes[key] = value
    urls = item.get("urls", {})
    if not isinstance(urls, dict) or not all(isinstance(v, str) for v in urls.values()):
        raise BadInput(f"{source}: asset {name!r}: urls must be a table of strings")
    return LedgerAsset(name=name, size=size, sha256=hashes["sha256"], sha1=hashes["sha1"],
                       urls=tuple(urls.items()))
