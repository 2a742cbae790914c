"""pack_tree against `tar --sort=name ... | gzip -n -6` and `| pigz -n -6`, a ~330 MB kit tree.

The tree is assembled once in .cache/bench/pack-tree/ from big shared libraries already on the
machine (the libcurand.so.10 that bench_inspect caches, then the largest .so files of the CUDA
toolkit and the system, largest first), so that it compresses like a real kit. Every side is
a whole process: ours is a Python process that imports ninfer_kits and calls pack_tree; the
baselines are GNU tar piped to gzip (one core) and to pigz (all cores), timed in the same
rounds as ours. Targets: at most 0.25x the time of the gzip pipeline and 0.6x that of the pigz
one, at no more than 1.00x gzip's size, and the same bytes on every run whatever the thread
count. Without pigz (Debian's `pigz`, which `hostdeps --tests` installs) its row says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from common import Context, Result, Stats, progress, run_checked, timed_together

NAME = "pack"
DESCRIPTION = ("pack_tree (libdeflate, 1 MiB gzip members) vs tar --sort=name ... | gzip -n -6 "
               "and | pigz -n -6, ~330 MB tree")
BASELINE = "tar | gzip -n -6"
PIGZ_BASELINE = "tar | pigz -n -6"
TIME_TARGET = 0.25  # against gzip
PIGZ_TIME_TARGET = 0.6
SIZE_TARGET = 1.00  # against gzip
MIN_TREE_BYTES = 330_000_000
MIN_FILE_BYTES = 8_000_000
MTIME = 1_700_000_000
MAX_REPEAT = 5  # each round takes ~20 s; five alternating rounds give a stable median
SEARCH = (Path("/usr/local/cuda/lib64"), Path("/usr/lib/x86_64-linux-gnu"))
OURS_SCRIPT = (
    "import sys; from pathlib import Path; from ninfer_kits.pipeline.pack import pack_tree; "
    "pack_tree(Path(sys.argv[1]), Path(sys.argv[2]), mtime=int(sys.argv[3]), "
    "threads=int(sys.argv[4]) or None)"
)


@dataclass(frozen=True)
class Tree:
    kit: Path
    size: int
    files: int


# ---------------------------------------------------------------------------- the tree


def _candidates(cache: Path) -> list[Path]:
    """Big shared libraries, in a fixed order: the cached libcurand, then largest first."""
    first = [cache / "inputs" / "libcurand.so.10"]
    found = {path.resolve() for folder in SEARCH if folder.is_dir()
             for path in folder.glob("*.so*") if path.is_file()}
    big = [path for path in found if path.stat().st_size >= MIN_FILE_BYTES]
    return [p for p in first if p.is_file()] + sorted(big, key=lambda p: (-p.stat().st_size, p))


def choose_sources(cache: Path) -> list[Path]:
    chosen: list[Path] = []
    seen: set[tuple[int, int]] = set()
    total = 0
    for path in _candidates(cache):
        info = path.stat()
        # Hard links (Mesa's drivers are one file under 13 names) would only repeat a file.
        if (info.st_dev, info.st_ino) in seen or path.name in {p.name for p in chosen}:
            continue
        seen.add((info.st_dev, info.st_ino))
        chosen.append(path)
        total += info.st_size
        if total >= MIN_TREE_BYTES:
            return chosen
    raise RuntimeError(f"only {total / 1e6:.0f} MB of big libraries found in "
                       f"{', '.join(map(str, SEARCH))}; need {MIN_TREE_BYTES / 1e6:.0f} MB")


def _manifest(sources: list[Path]) -> list[list[object]]:
    return [[str(path), path.stat().st_size] for path in sources]


def _build(folder: Path, sources: list[Path]) -> None:
    kit = folder / "kit"
    (kit / "lib").mkdir(parents=True)
    (kit / "bin").mkdir()
    for path in sources:
        progress(f"copying {path} ({path.stat().st_size / 1e6:.0f} MB)")
        shutil.copyfile(path, kit / "lib" / path.name)
    (kit / "BUILDINFO.txt").write_text("benchmark tree for the pack stage\n")


def assemble(cache: Path) -> Tree:
    """The tree, built once; rebuilt only when the chosen libraries change."""
    folder = cache / "pack-tree"
    sources = choose_sources(cache)
    wanted = _manifest(sources)
    manifest = folder / "manifest.json"
    if not (manifest.is_file() and json.loads(manifest.read_text()) == wanted):
        partial = folder.with_name(folder.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        _build(partial, sources)
        (partial / "manifest.json").write_text(json.dumps(wanted, indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    kit = folder / "kit"
    files = [path for path in kit.rglob("*") if path.is_file()]
    return Tree(kit, sum(path.stat().st_size for path in files), len(files))


# ---------------------------------------------------------------------------- the commands


def ours_command(kit: Path, out: Path, threads: int = 0) -> list[str]:
    return [sys.executable, "-c", OURS_SCRIPT, str(kit), str(out), str(MTIME), str(threads)]


def gnu_command(kit: Path, out: Path, compressor: str = "gzip") -> list[str]:
    """GNU tar piped to `compressor -n -6` (gzip or pigz)."""
    tar = (f"tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@{MTIME} "
           f"-C {shlex.quote(str(kit.parent))} -cf - {shlex.quote(kit.name)}")
    return ["bash", "-c",
            f"set -o pipefail; {tar} | {compressor} -n -6 > {shlex.quote(str(out))}"]


def pigz_version() -> str | None:
    """`pigz 2.6`, or None without pigz on PATH."""
    if shutil.which("pigz") is None:
        return None
    completed = subprocess.run(["pigz", "--version"], capture_output=True, text=True, check=False)
    return (completed.stdout or completed.stderr).strip() or "pigz"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def listing(archive: Path) -> list[str]:
    """`tar tvz` lines, sorted: both archives must describe the same members the same way."""
    out = subprocess.run(["tar", "--numeric-owner", "-tvzf", str(archive)], capture_output=True,
                         text=True, check=True, env={**os.environ, "TZ": "UTC"}).stdout
    return sorted(out.splitlines())


def problems(ours: Path, again: Path, gnu: Path) -> str | None:
    """Why our output cannot be trusted, or None: runs differ, gzip refuses it, other members."""
    if sha256(ours) != sha256(again):
        return "two runs of ours gave different bytes"
    try:
        run_checked(["gzip", "-t", str(ours)])
    except RuntimeError as error:
        return f"gzip -t refused our output: {error}"
    if listing(ours) != listing(gnu):
        return "tar -tv lists other members (or modes, owners, times) than GNU tar's archive"
    return None


# ---------------------------------------------------------------------------- the rows


def _mb(size: int) -> float:
    return size / 1e6


def rows(tree: Tree, times: list[Stats], sizes: list[int], pigz: str | None,
         error: str | None, digest: str, load: str) -> list[Result]:
    """Time and size against gzip, then against pigz (or a row saying pigz is missing)."""
    ours, gnu = times[0], times[1]
    label = f"{_mb(tree.size):.0f} MB tree, {tree.files} files, {os.cpu_count()} cores"
    results = [
        Result(NAME, f"pack_tree, {label}", BASELINE, ours.median, gnu.median, TIME_TARGET,
               note=f"min {ours.min:.2f} s vs {gnu.min:.2f} s, {ours.runs} runs, {load}"),
    ]
    if pigz is None:
        results.append(Result(f"{NAME}/pigz", f"pack_tree, {label}", PIGZ_BASELINE,
                              error="pigz is not installed (Debian: apt-get install pigz; "
                                    "ninfer-kits hostdeps --tests)"))
    else:
        results.append(Result(f"{NAME}/pigz", f"pack_tree, {label}", PIGZ_BASELINE, ours.median,
                              times[2].median, PIGZ_TIME_TARGET,
                              note=f"min {ours.min:.2f} s vs {times[2].min:.2f} s, {pigz}"))
    results.append(Result(f"{NAME}/size", "output size", BASELINE, _mb(sizes[0]), _mb(sizes[1]),
                          SIZE_TARGET, note=f"{sizes[0]} vs {sizes[1]} bytes", unit="MB"))
    if pigz is not None:
        results.append(Result(f"{NAME}/size", "output size", PIGZ_BASELINE, _mb(sizes[0]),
                              _mb(sizes[2]), note=f"{sizes[0]} vs {sizes[2]} bytes",
                              unit="MB"))
    results.append(Result(f"{NAME}/same", "two runs (threads=1 and default) byte-identical, "
                          "gzip -t, same tar -tv as GNU", "-", error=error,
                          note=f"sha256 {digest[:16]}"))
    return results


def run(ctx: Context) -> list[Result]:
    tree = assemble(ctx.cache)
    progress(f"tree: {tree.kit} ({_mb(tree.size):.0f} MB, {tree.files} files)")
    out = ctx.cache / "pack-out"
    out.mkdir(parents=True, exist_ok=True)
    ours, once, gnu = out / "ours.tar.gz", out / "ours-threads1.tar.gz", out / "gnu.tar.gz"
    pigz_out = out / "pigz.tar.gz"
    progress("one run of ours with threads=1 (the reference bytes)")
    run_checked(ours_command(tree.kit, once, threads=1))
    pigz = pigz_version()
    commands = [ours_command(tree.kit, ours), gnu_command(tree.kit, gnu)]
    if pigz is not None:
        commands.append(gnu_command(tree.kit, pigz_out, "pigz"))
    else:
        progress("pigz is not installed: its row will say so")
    progress(f"timing {len(commands)} commands, {min(ctx.repeat, MAX_REPEAT)} rounds after a "
             "warm-up")
    before = os.getloadavg()[0]
    times = timed_together(commands, min(ctx.repeat, MAX_REPEAT))
    sizes = [ours.stat().st_size, gnu.stat().st_size]
    if pigz is not None:
        sizes.append(pigz_out.stat().st_size)
    # Ours and pigz need both cores, gzip one: other work on the machine slows those more.
    load = f"load {before:.1f} -> {os.getloadavg()[0]:.1f}"
    ratios = ", ".join(f"{times[0].median / stats.median:.3f}x" for stats in times[1:])
    progress(f"time {' vs '.join(f'{stats.median:.2f} s' for stats in times)} ({ratios}), "
             f"size {sizes[0] / sizes[1]:.4f}x gzip")
    return rows(tree, times, sizes, pigz, problems(ours, once, gnu), sha256(ours), load)
