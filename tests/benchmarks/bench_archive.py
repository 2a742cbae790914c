"""`ninfer-kits inspect --json` on kit archives against `tar -xzOf` (GNU tar + gzip, the same as
`tar xzf FILE -O > /dev/null`), whole processes, on the same files.

The inspector reads an archive in one streaming pass: each byte decompressed once (by a thread
of its own, a MiB at a time, ahead of the reader: inspector/decompress.py, which reads gzip
members one after the other, as a parallel packer writes them), each ELF member held once (in
memory, or in an unnamed temporary file past 64 MiB) and read from there, everything else only
streamed past. So its time should follow tar's, which decompresses the whole archive to
/dev/null: target <= 1.1x. Inputs (built once, cached in .cache/bench/inputs/):

  zeros.tar.gz       1 GiB of zeros plus 30 small ELF members (/bin/true), 1.5 MB: the
                     case an earlier reader took 24 s on (it decompressed twice and wrote each
                     ELF member out in full)
  nvidia-kit.tar.gz  kit/lib/ with libcurand, libcufft, libcufftw and libcudart from NVIDIA's
                     wheels (about 420 MB unpacked): big members that go to temporary files
"""

from __future__ import annotations

import gzip
import io
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

from common import Context, Result, progress, run_checked, timed_together

NAME = "archive"
DESCRIPTION = "inspect --json on kit archives vs tar -xzOf (decompress everything)"
BASELINE = "tar -xzOf"
TARGET = 1.1
REPEAT = 3  # each run takes seconds
ZEROS = 1 << 30
SMALL_ELF = Path("/bin/true")
WHEELS = (
    ("nvidia-curand==10.4.5.25", "nvidia_curand-10.4.5.25-*.whl",
     "nvidia/cu13/lib/libcurand.so.10"),
    ("nvidia-cufft==12.0.0.61", "nvidia_cufft-12.0.0.61-*.whl",
     "nvidia/cu13/lib/libcufft.so.12"),
    ("nvidia-cufft==12.0.0.61", "nvidia_cufft-12.0.0.61-*.whl",
     "nvidia/cu13/lib/libcufftw.so.12"),
    ("nvidia-cuda-runtime==13.0.96", "nvidia_cuda_runtime-13.0.96-*.whl",
     "nvidia/cu13/lib/libcudart.so.13"),
)


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


def _member(archive: tarfile.TarFile, name: str, size: int, source: io.IOBase) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o755, 0
    archive.addfile(info, source)  # type: ignore[arg-type]


def zeros_archive(cache: Path) -> Path:
    target = cache / "inputs" / "zeros.tar.gz"
    if target.is_file():
        return target
    progress(f"writing {target.name}: 1 GiB of zeros and 30 ELF members")
    target.parent.mkdir(parents=True, exist_ok=True)
    elf = SMALL_ELF.read_bytes()
    partial = target.with_name(target.name + ".part")
    with partial.open("wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as stream, \
            tarfile.open(fileobj=stream, mode="w|") as archive:
        for index in range(15):
            _member(archive, f"kit/bin/tool{index:02d}", len(elf), io.BytesIO(elf))
        _member(archive, "kit/share/zeros.bin", ZEROS, io.BufferedReader(_Zeros(ZEROS)))
        for index in range(15, 30):
            _member(archive, f"kit/lib/libtool{index:02d}.so", len(elf), io.BytesIO(elf))
    partial.replace(target)
    return target


def _wheel_member(cache: Path, requirement: str, pattern: str, member: str) -> bytes:
    wheels = cache / "wheels"
    found = sorted(wheels.glob(pattern))
    if not found:
        progress(f"downloading {requirement} into {wheels}")
        run_checked([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                     requirement, "-d", str(wheels)])
        found = sorted(wheels.glob(pattern))
    if not found:
        raise RuntimeError(f"pip download left no {pattern} in {wheels}")
    with zipfile.ZipFile(found[-1]) as wheel:
        return wheel.read(member)


def nvidia_archive(cache: Path) -> Path:
    target = cache / "inputs" / "nvidia-kit.tar.gz"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with partial.open("wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as stream, \
            tarfile.open(fileobj=stream, mode="w|") as archive:
        for requirement, pattern, member in WHEELS:
            data = _wheel_member(cache, requirement, pattern, member)
            progress(f"packing {Path(member).name} ({len(data) / 1e6:.0f} MB)")
            _member(archive, f"kit/lib/{Path(member).name}", len(data), io.BytesIO(data))
    partial.replace(target)
    return target


def ours(path: Path) -> list[str]:
    script = Path(sys.executable).parent / "ninfer-kits"
    launcher = [str(script)] if script.exists() else [sys.executable, "-m", "ninfer_kits"]
    return [*launcher, "inspect", "--json", str(path)]


def compile_package() -> None:
    """Write the package's bytecode, as installing it does, so that no timed run compiles."""
    import compileall

    import ninfer_kits

    compileall.compile_dir(Path(ninfer_kits.__file__).parent, quiet=1)


def run(ctx: Context) -> list[Result]:
    compile_package()
    tar = shutil.which("tar")
    if tar is None:
        raise RuntimeError("GNU tar is not on PATH")
    results = []
    for label, build in (("zeros.tar.gz (1 GiB of zeros, 30 ELF members)", zeros_archive),
                         ("nvidia-kit.tar.gz (4 NVIDIA libraries)", nvidia_archive)):
        path = build(ctx.cache)
        run_checked(ours(path))  # it works, before it is timed
        progress(f"timing {path.name} ({path.stat().st_size / 1e6:.1f} MB)")
        mine, baseline = timed_together([ours(path), [tar, "-xzOf", str(path)]],
                                        min(ctx.repeat, REPEAT))
        results.append(Result(benchmark=NAME, measured=f"inspect --json {label}",
                              baseline_name=BASELINE, ours=mine.median,
                              baseline=baseline.median, target=TARGET,
                              note=f"min {mine.min:.2f} s"))
    return results
