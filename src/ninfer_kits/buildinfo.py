"""BUILDINFO.txt: how a kit was built, as `key: value` lines that people and programs both read.

The file has two parts. Everything above the run marker is a pure function of the inputs
(upstream revision, toolchain, options) and is the same for every build of them; it is the copy
inside the tarball. The published BUILDINFO.txt beside the tarball adds, below the marker, what
belongs to this one run (job count, compile time, driver, GPU, compiler-cache statistics). The
README documents every key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ninfer_kits.errors import BadInput

FORMAT = 1
HEADER = "# BUILDINFO.txt: how this kit was built (ninfer-kits; README.md documents each key)."
RUN_MARKER = "# --- this run: the only lines that differ between builds of the same inputs ---"

# Scalar keys in the order they are written; the lists below follow them.
SCALARS = (
    "format", "kit", "card", "upstream", "upstream_url", "tracked_ref", "revision", "version",
    "arch", "cuda_version", "host_compiler", "cmake_version", "cmake_options", "builder",
    "toolchain", "base_image", "base_image_digest", "source_date_epoch", "pipeline_version",
    "pipeline_revision", "glibc_floor", "sonames", "runpath", "sass", "ptx",
    "relocatable_device_code",
)
# Scalars added after format 1 was first written: a file without one reads as this value.
OPTIONAL = {"relocatable_device_code": "none"}
REPEATED = {"symbol_floor": "symbol_floors", "floor": "floor", "sha256": "binaries",
            "license": "licenses"}


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
    toolchain: str
    base_image: str
    base_image_digest: str
    source_date_epoch: int
    pipeline_version: str
    pipeline_revision: str
    glibc_floor: str
    sonames: str
    runpath: str
    sass: str  # SASS archs the CUDA runtime loads (.nv_fatbin), e.g. "sm_86"
    ptx: str  # PTX archs the CUDA runtime loads, e.g. "compute_86"; "none" when there is none
    # __nv_relfatbin: device-link inputs (-rdc), never loaded, e.g. "SASS sm_86 ×12, PTX ..."
    relocatable_device_code: str = "none"
    symbol_floors: tuple[str, ...] = ()  # e.g. GLIBCXX_3.4.32, one per prefix
    floor: tuple[tuple[str, str], ...] = ()  # the floor table: (requirement, why)
    binaries: tuple[tuple[str, str], ...] = ()  # (sha256, path in the tarball)
    licenses: tuple[str, ...] = ()
    run: tuple[tuple[str, str], ...] = field(default=())  # below the marker

    def run_value(self, key: str) -> str | None:
        return dict(self.run).get(key)


def render(info: BuildInfo, *, with_run: bool = True) -> str:
    lines = [HEADER]
    lines += [f"{key}: {getattr(info, key)}" for key in SCALARS]
    lines += [f"symbol_floor: {name}" for name in info.symbol_floors]
    lines += [f"floor: {requirement} | {why}" for requirement, why in info.floor]
    lines += [f"sha256: {digest}  {path}" for digest, path in info.binaries]
    lines += [f"license: {path}" for path in info.licenses]
    if with_run and info.run:
        lines += [RUN_MARKER, *(f"run.{key}: {value}" for key, value in info.run)]
    return "\n".join(lines) + "\n"


def parse(text: str, source: str = "BUILDINFO.txt") -> BuildInfo:
    """Read a BUILDINFO.txt back; one BadInput naming the line for anything malformed."""
    scalars: dict[str, str] = {}
    repeated: dict[str, list[str]] = {name: [] for name in REPEATED.values()}
    run: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, value = line.partition(": ")
        if not sep:
            raise BadInput(f"{source}:{number}: expected 'key: value', got {line[:60]!r}")
        if key.startswith("run."):
            run.append((key.removeprefix("run."), value))
        elif key in REPEATED:
            repeated[REPEATED[key]].append(value)
        elif key in SCALARS:
            scalars[key] = value
        else:
            raise BadInput(f"{source}:{number}: unknown key '{key}'")
    return _build(scalars, repeated, run, source)


def _build(scalars: dict[str, str], repeated: dict[str, list[str]],
           run: list[tuple[str, str]], source: str) -> BuildInfo:
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
    values["run"] = tuple(run)
    return BuildInfo(**values)  # type: ignore[arg-type]


def _split_row(row: str, source: str) -> tuple[str, str]:
    requirement, sep, why = row.partition(" | ")
    if not sep:
        raise BadInput(f"{source}: floor row without ' | ': {row[:60]!r}")
    return requirement, why


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
