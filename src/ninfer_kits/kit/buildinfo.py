"""BUILDINFO.txt, written and read back: every key and the run marker in docs/buildinfo.md.
One line is one key, so a value with a control character or a repeated key is refused both ways.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ninfer_kits.errors import BadInput
from ninfer_kits.kit import flavours
from ninfer_kits.kit.flavours import PLAIN

FORMAT = 1
HEADER = "# BUILDINFO.txt: how this kit was built (ninfer-kits; README.md documents each key)."
RUN_MARKER = "# --- this run: the only lines that differ between builds of the same inputs ---"

SCALARS = (
    "format", "kit", "card", "upstream", "upstream_url", "tracked_ref", "revision", "version",
    "arch", "cuda_version", "host_compiler", "cmake_version", "cmake_options", "builder",
    "toolchain", "base_image", "base_image_digest", "source_date_epoch", "pipeline_version",
    "pipeline_revision", "recipe", "inputs", "python_version", "zlib_version", "glibc_floor",
    "sonames", "runpath", "sass", "ptx", "relocatable_device_code", "flavour",
)  # then `<name>_asset` of each flavour the kit has (flavours.KINDS' order)
# Added after format 1: a file without one reads as this value (`pipeline_revision` went the
# other way: newer kits have `run.pipeline_revision`).
OPTIONAL = {"relocatable_device_code": "none", "python_version": "unknown",
            "zlib_version": "unknown", "flavour": PLAIN,
            "pipeline_revision": "", "base_image_digest": "", "recipe": "unknown",
            "inputs": "unknown"}
UNWRITTEN_DEFAULTS = {"flavour": PLAIN, "pipeline_revision": "",
                      "base_image_digest": "", "recipe": "unknown", "inputs": "unknown"}
RECIPE_VALUE = re.compile(r"[0-9a-f]{64}")
INPUTS_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
INPUT_PART = re.compile(r"([a-z_]+)=([0-9a-f]{16})")
REPEATED = {"symbol_floor": "symbol_floors", "floor": "floor", "sha256": "binaries",
            "license": "licenses", "bundled": "bundled"}
NO_ASSET = "none"  # a `<name>_asset` that names no tarball: read as none, never written
BUNDLED_FIELDS = ("soname", "sha256", "origin", "license", "notice")
BUNDLED_ORIGIN = re.compile(r"(?P<package>[^\s|()]+) (?P<version>[^\s|()]+) "
                            r"\((?P<manager>dpkg|wheel|built)\)")
# soname, sha256, origin, license, notice path in the tarball
Bundled = tuple[str, str, str, str, str]
# The local builder uses the machine's own compilers, no matrix toolchain.
HOST_TOOLCHAIN = "host"
RUN_PREFIX = "run."
RUN_KEY = re.compile(r"[a-z0-9_]+")
FLOOR_SEPARATOR = " | "
# C0/C1 controls, the separators str.splitlines() also breaks at, lone surrogates.
FORBIDDEN_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cs"})
CONTROL_NAMES = {"\n": "a line feed", "\r": "a carriage return", "\t": "a tab",
                 "\x00": "a NUL byte", "\x1b": "an escape"}


@dataclass(frozen=True, kw_only=True)
class BuildInfo:
    format: int = FORMAT
    kit: str
    card: str
    upstream: str
    upstream_url: str
    tracked_ref: str
    revision: str
    version: str
    arch: str
    cuda_version: str
    host_compiler: str
    cmake_version: str
    cmake_options: str
    builder: str
    toolchain: str  # the matrix toolchain (docker builder), or HOST_TOOLCHAIN (local builder)
    base_image: str
    base_image_digest: str = ""  # older kits only; `base_image_id` reads either
    source_date_epoch: int
    pipeline_version: str  # the ninfer-kits version that built it
    # older kits only; `pipeline_commit` reads either
    pipeline_revision: str = ""
    recipe: str = "unknown"
    inputs: str = "unknown"
    input_parts: tuple[tuple[str, str], ...] = ()
    python_version: str = "unknown"  # the Python that packed the tarball
    # the key keeps its first name so that older ninfer-kits still read it
    zlib_version: str = "unknown"
    glibc_floor: str
    sonames: str
    runpath: str
    sass: str  # SASS archs the CUDA runtime loads (.nv_fatbin), e.g. "sm_86"
    ptx: str  # PTX archs the CUDA runtime loads, e.g. "compute_86"; "none" when there is none
    relocatable_device_code: str = "none"
    flavour: str = PLAIN  # the flavour's name in its own tarball's BUILDINFO.txt
    # (flavour, tarball): the plain kit's `<flavour>_asset` keys
    flavour_assets: tuple[tuple[str, str], ...] = ()
    symbol_floors: tuple[str, ...] = ()  # e.g. GLIBCXX_3.4.32, one per prefix
    floor: tuple[tuple[str, str], ...] = ()  # the floor table: (requirement, why)
    binaries: tuple[tuple[str, str], ...] = ()  # (sha256, path in the tarball)
    licenses: tuple[str, ...] = ()
    bundled: tuple[Bundled, ...] = ()
    run: tuple[tuple[str, str], ...] = field(default=())  # below the marker

    def run_value(self, key: str) -> str | None:
        return dict(self.run).get(key)

    def asset_of(self, flavour: str) -> str | None:
        """The tarball of `flavour` this (plain) kit's file names, or None."""
        return dict(self.flavour_assets).get(flavour)

    @property
    def pipeline_commit(self) -> str:
        """`run.pipeline_revision`, or an older kit's `pipeline_revision`; "unknown" in a
        tarball's own copy, which has no run keys."""
        return self.run_value("pipeline_revision") or self.pipeline_revision or "unknown"

    @property
    def base_image_id(self) -> str:
        """`run.base_image_digest`, or an older kit's `base_image_digest`; "unknown" in a
        tarball's own copy, which has no run keys."""
        return self.run_value("base_image_digest") or self.base_image_digest or "unknown"


def render(info: BuildInfo, *, with_run: bool = True) -> str:
    """The file's text; BadInput naming the key and line for a value that would break it."""
    lines = [HEADER]
    seen: dict[str, int] = {}
    for key, value in _entries(info, with_run=with_run):
        if key is None:
            lines.append(value)
            continue
        number = len(lines) + 1
        where = f"BUILDINFO.txt line {number}, key '{key}'"
        _check_value(value, where)
        if key not in REPEATED:
            if key.startswith(RUN_PREFIX) and not RUN_KEY.fullmatch(key[len(RUN_PREFIX):]):
                raise BadInput(f"{where}: not a run key (lowercase letters, digits and _)")
            if key in seen:
                raise BadInput(f"{where}: repeated (first on line {seen[key]}); only "
                               f"{', '.join(REPEATED)} may appear more than once")
            seen[key] = number
        lines.append(f"{key}: {value}")
    return "\n".join(lines) + "\n"


def _entries(info: BuildInfo, *, with_run: bool) -> Iterator[tuple[str | None, str]]:
    """(key, value) in file order; (None, line) for a comment line."""
    _check_flavour(info.flavour, info.flavour_assets, "BUILDINFO.txt")
    _check_recipe(info.recipe, "BUILDINFO.txt")
    for key in SCALARS:
        value = str(getattr(info, key))
        if key == "inputs":
            value = inputs_value(info.inputs, info.input_parts)
        # only when they say something, so that older releases still read a plain kit's file
        if key in UNWRITTEN_DEFAULTS and value == UNWRITTEN_DEFAULTS[key]:
            continue
        yield key, value
    for flavour, asset in info.flavour_assets:
        yield f"{flavour}_asset", asset
    for name in info.symbol_floors:
        yield "symbol_floor", name
    for requirement, why in info.floor:
        if FLOOR_SEPARATOR in requirement:
            raise BadInput(f"BUILDINFO.txt key 'floor': the requirement {requirement!r} holds "
                           f"{FLOOR_SEPARATOR.strip()!r}, which separates it from the reason")
        yield "floor", f"{requirement}{FLOOR_SEPARATOR}{why}"
    for digest, path in info.binaries:
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise BadInput(f"BUILDINFO.txt key 'sha256': {digest!r} is not a sha256 hex digest")
        yield "sha256", f"{digest}  {path}"
    for path in info.licenses:
        yield "license", path
    for row in info.bundled:
        yield "bundled", bundled_line(row)
    if with_run and info.run:
        yield None, RUN_MARKER
        for key, value in info.run:
            yield f"{RUN_PREFIX}{key}", value


def inputs_value(digest: str, parts: tuple[tuple[str, str], ...]) -> str:
    """The value of the `inputs` line; BadInput for a digest or part that would not read back."""
    value = " ".join([digest, *(f"{name}={part}" for name, part in parts)])
    if split_inputs(value, "BUILDINFO.txt") != (digest, parts):
        raise BadInput(f"BUILDINFO.txt key 'inputs': {value[:80]!r} is not 'sha256:<hex> "
                       f"part=<16 hex> ...' (or 'unknown')")
    return value


def split_inputs(value: str, source: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(digest, parts) of an `inputs` value; "unknown" is ("unknown", ())."""
    if value == OPTIONAL["inputs"]:
        return value, ()
    digest, *words = value.split(" ")
    parts = tuple(match.groups() for match in map(INPUT_PART.fullmatch, words) if match)
    if (INPUTS_DIGEST.fullmatch(digest) is None or len(parts) != len(words)
            or len({name for name, _ in parts}) != len(parts)):
        raise BadInput(f"{source}: inputs {value[:80]!r} is neither 'sha256:<hex> part=<16 hex> "
                       f"...' (ninfer_kits.matrix.inputs) nor 'unknown'")
    return digest, tuple((name, part) for name, part in parts)


def bundled_line(row: Bundled) -> str:
    """The value of one `bundled` line; BadInput for a row that would not read back as itself."""
    if len(row) != len(BUNDLED_FIELDS):
        raise BadInput(f"BUILDINFO.txt key 'bundled': {len(row)} fields, not "
                       f"{len(BUNDLED_FIELDS)} ({', '.join(BUNDLED_FIELDS)}): {row!r}")
    _check_bundled(row, "BUILDINFO.txt key 'bundled'")
    return FLOOR_SEPARATOR.join(row)


def _check_bundled(row: tuple[str, ...], where: str) -> None:
    for name, value in zip(BUNDLED_FIELDS, row, strict=True):
        if not value.strip() or "|" in value or value != value.strip():
            raise BadInput(f"{where}: the {name} {value!r} is empty, holds '|' or starts or "
                           f"ends with a space (' | ' separates the fields)")
    if not re.fullmatch(r"[0-9a-f]{64}", row[1]):
        raise BadInput(f"{where}: {row[1]!r} is not a sha256 hex digest")
    if BUNDLED_ORIGIN.fullmatch(row[2]) is None:
        raise BadInput(f"{where}: the origin {row[2]!r} is not '<package> <version> "
                       f"(dpkg|wheel|built)'")


def bundled_origin(package: str, version: str, manager: str) -> str:
    """`libstdc++6 14.2.0-19 (dpkg)`."""
    origin = f"{package} {version} ({manager})"
    if BUNDLED_ORIGIN.fullmatch(origin) is None:
        raise BadInput(f"BUILDINFO.txt key 'bundled': the origin {origin!r} is not '<package> "
                       f"<version> (dpkg|wheel|built)' (no spaces, '|' or parentheses in the "
                       f"package or the version)")
    return origin


def _check_flavour(flavour: str, assets: tuple[tuple[str, str], ...], where: str) -> None:
    if flavour not in flavours.names():
        raise BadInput(f"{where}: flavour {flavour!r} is not one of "
                       f"{', '.join(flavours.names())}")
    order = [kind.name for kind in flavours.beside()]
    if [name for name, _ in assets] != [name for name in order if name in dict(assets)]:
        raise BadInput(f"{where}: names the tarballs of flavours "
                       f"{', '.join(name for name, _ in assets)}, not some of "
                       f"{', '.join(order)} once each, in that order")
    for name, asset in assets:
        suffix = flavours.beside()[order.index(name)].suffix
        if not asset.endswith(suffix) or "/" in asset or asset == suffix:
            raise BadInput(f"{where}: {name}_asset {asset!r} is neither 'none' nor a file name "
                           f"ending in {suffix}")


def _check_recipe(recipe: str, where: str) -> None:
    if recipe != OPTIONAL["recipe"] and RECIPE_VALUE.fullmatch(recipe) is None:
        raise BadInput(f"{where}: recipe {recipe[:80]!r} is neither a sha256 hex digest (of "
                       f"build/recipe.py) nor 'unknown'")


def _check_value(value: str, where: str) -> None:
    """Refuse a character that would break the line (`where` names the key and the line)."""
    for column, char in enumerate(value, start=1):
        if unicodedata.category(char) in FORBIDDEN_CATEGORIES:
            name = CONTROL_NAMES.get(char) or str(unicodedata.name(char, "a control character"))
            raise BadInput(f"{where}: holds {name.lower()} (U+{ord(char):04X}) at column "
                           f"{column}; a value must stay on its line: {value[:60]!r}")


def parse(text: str, source: str = "BUILDINFO.txt") -> BuildInfo:
    """Read a BUILDINFO.txt back; one BadInput naming the line for anything malformed."""
    scalars: dict[str, str] = {}
    repeated: dict[str, list[str]] = {name: [] for name in REPEATED.values()}
    run: list[tuple[str, str]] = []
    asset_keys = {kind.key: kind.name for kind in flavours.beside()}
    named: dict[str, str] = {}  # flavour → the tarball its `<flavour>_asset` names
    first_seen: dict[str, int] = {}
    # \n only: splitlines() would also split at \r, \v, \f, U+2028 and hide them in a value
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        key, sep, value = line.partition(": ")
        shown = f"{source}:{number}" + (f": key '{key}'" if sep else "")
        _check_value(line, shown)
        if not line.strip() or line.startswith("#"):
            continue
        if not sep:
            raise BadInput(f"{source}:{number}: expected 'key: value', got {line[:60]!r}")
        if key not in REPEATED:
            if key in first_seen:
                raise BadInput(f"{shown}: repeated (first on line {first_seen[key]}); only "
                               f"{', '.join(REPEATED)} may appear more than once")
            first_seen[key] = number
        if key.startswith(RUN_PREFIX):
            run.append((key.removeprefix(RUN_PREFIX), value))
        elif key in REPEATED:
            repeated[REPEATED[key]].append(value)
        elif key in SCALARS:
            scalars[key] = value
        elif key in asset_keys:
            if value != NO_ASSET:
                named[asset_keys[key]] = value
        else:
            raise BadInput(f"{source}:{number}: unknown key '{key}'")
    assets = tuple((kind.name, named[kind.name]) for kind in flavours.beside()
                   if kind.name in named)
    return _build(scalars, repeated, run, assets, source)


def _build(scalars: dict[str, str], repeated: dict[str, list[str]], run: list[tuple[str, str]],
           assets: tuple[tuple[str, str], ...], source: str) -> BuildInfo:
    scalars = {**OPTIONAL, **scalars}
    missing = [key for key in SCALARS if key not in scalars]
    if missing:
        raise BadInput(f"{source}: missing key{'s' * (len(missing) > 1)} {', '.join(missing)}")
    if scalars["format"] != str(FORMAT):
        raise BadInput(f"{source}: unsupported format {scalars['format']!r} (this tool reads 1)")
    try:
        epoch = int(scalars["source_date_epoch"])
    except ValueError:
        raise BadInput(f"{source}: source_date_epoch is not a number") from None
    values: dict[str, object] = {k: v for k, v in scalars.items() if k not in ("format",)}
    values["source_date_epoch"] = epoch
    values["symbol_floors"] = tuple(repeated["symbol_floors"])
    values["floor"] = tuple(_split_row(row, source) for row in repeated["floor"])
    values["binaries"] = tuple(_split_hash(row, source) for row in repeated["binaries"])
    values["licenses"] = tuple(repeated["licenses"])
    values["bundled"] = tuple(_split_bundled(row, source) for row in repeated["bundled"])
    values["run"] = tuple(run)
    values["flavour_assets"] = assets
    _check_flavour(scalars["flavour"], assets, source)
    _check_recipe(scalars["recipe"], source)
    values["inputs"], values["input_parts"] = split_inputs(scalars["inputs"], source)
    return BuildInfo(**values)  # type: ignore[arg-type]


def _split_row(row: str, source: str) -> tuple[str, str]:
    requirement, sep, why = row.partition(FLOOR_SEPARATOR)
    if not sep:
        raise BadInput(f"{source}: floor row without ' | ': {row[:60]!r}")
    return requirement, why


def _split_bundled(row: str, source: str) -> Bundled:
    fields = row.split(FLOOR_SEPARATOR)
    if len(fields) != len(BUNDLED_FIELDS):
        raise BadInput(f"{source}: bundled line is not '{' | '.join(BUNDLED_FIELDS)}' "
                       f"({len(fields)} fields): {row[:80]!r}")
    _check_bundled(tuple(fields), f"{source}: bundled line {row[:60]!r}")
    soname, digest, origin, license_, notice = fields
    return soname, digest, origin, license_, notice


def _split_hash(row: str, source: str) -> tuple[str, str]:
    digest, sep, path = row.partition("  ")
    if not sep or len(digest) != 64:
        raise BadInput(f"{source}: sha256 line is not '<64 hex>  <path>': {row[:80]!r}")
    return digest, path


def read(path: Path) -> BuildInfo:
    try:
        return parse(path.read_text(encoding="utf-8"), str(path))
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not a UTF-8 text file") from None


def toolchain_field(builder: str, matrix_toolchain: str) -> str:
    """The docker builder's matrix toolchain, or HOST_TOOLCHAIN for the local builder."""
    return HOST_TOOLCHAIN if builder == "local" else matrix_toolchain
