"""What `nvcc --compress-mode=size` (the recipe's default since issue 23) gives the download and
costs the start, against nvcc's own default mode.

Both builds are the example engine's, made by `scripts/startup-check.sh prepare` (build/recipe.py
as a kit build runs it: sm_86, separable compilation, -lineinfo; without FFmpeg, which the GPU
host lacks) into .cache/startup-check/, so that the sizes here are those of the very files the
GPU host then starts. Rows: the size of kit/bin/ninfer, and of the two programs packed by
pack_tree (the kit's compressor); then the start-up, JIT cache off and warm, median of five
starts that run every kernel; then the same for a real upstream's ninfer
(`scripts/kit-startup-check.sh`: its device code loaded at once, the check's header says how).
Start-up needs a GPU: on a machine without one (this project's CI machines) those rows are read
from the newest runs on the GPU host kept in recorded/, and say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO_ROOT, Context, Result, progress

NAME = "kit-size"
DESCRIPTION = "nvcc --compress-mode=size vs default: the example's ninfer, its tarball, its start"
BASELINE = "nvcc --compress-mode=default"
SIZE_TARGET = 1.0  # the recipe's mode must never make the download larger
START_TARGET = 1.05  # ... nor the start noticeably slower
SCRIPT = REPO_ROOT / "scripts" / "startup-check.sh"
KIT_SCRIPT = REPO_ROOT / "scripts" / "kit-startup-check.sh"  # needs .cache/kit-startup prepared
BUILDS = REPO_ROOT / ".cache" / "startup-check"
RECORDED = Path(__file__).resolve().parent / "recorded"
MTIME = 1_700_000_000


def _mb(size: int) -> float:
    return size / 1e6


def _prepare() -> dict[str, Path]:
    progress("building the example twice (default and size modes, about a minute each)")
    subprocess.run(["bash", str(SCRIPT), "prepare"], check=True,
                   env={**os.environ, "PYTHON": sys.executable, "ARCHS": "86"})
    return {mode: BUILDS / f"sm86-{mode}" for mode in ("size", "default")}


def _packed(kit_parent: Path) -> int:
    from ninfer_kits.pipeline.pack import pack_tree

    with tempfile.TemporaryDirectory(prefix="kit-size-") as scratch:
        tree = Path(scratch) / "kit"
        shutil.copytree(kit_parent / "kit" / "bin", tree / "bin")
        return pack_tree(tree, Path(scratch) / "kit.tar.gz", mtime=MTIME).size


def _size_rows(builds: dict[str, Path]) -> list[Result]:
    ours, base = (builds[mode] / "kit" / "bin" / "ninfer" for mode in ("size", "default"))
    packed = {mode: _packed(folder) for mode, folder in builds.items()}
    return [
        Result(NAME, "example's kit/bin/ninfer (sm_86, separable compilation)", BASELINE,
               _mb(ours.stat().st_size), _mb(base.stat().st_size), SIZE_TARGET,
               note=f"{ours.stat().st_size} vs {base.stat().st_size} bytes", unit="MB"),
        Result(f"{NAME}/tarball", "both programs packed by pack_tree (tar.gz)", BASELINE,
               _mb(packed["size"]), _mb(packed["default"]), SIZE_TARGET,
               note=f"{packed['size']} vs {packed['default']} bytes", unit="MB"),
    ]


def _has_gpu() -> bool:
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _startup_table(script: Path, pattern: str, ready: Path) -> tuple[str, str]:
    """The output of `script run`: measured here when there is a GPU and `ready` (what its
    prepare makes) exists, else the newest recorded run; and where it comes from."""
    if ready.exists() and _has_gpu():
        progress(f"starting each build on this machine's GPU ({script.name})")
        run = subprocess.run(["bash", str(script), "run"], check=True, capture_output=True,
                             text=True)
        return run.stdout, "measured now"
    recorded = sorted(RECORDED.glob(pattern))
    if not recorded:
        return "", "no GPU here and no recorded run"
    newest = recorded[-1]
    return (newest.read_text(encoding="utf-8"),
            f"no GPU here: recorded by `{script.name} run` in {newest.name}")


def _starts(table: str) -> dict[str, tuple[float, float]]:
    """mode -> (first start without a JIT cache, start with it warm), in seconds, from the
    table a check prints (its builds end in -default and -size, or are named so)."""
    starts: dict[str, tuple[float, float]] = {}
    cold = warm = -1
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] == "build":
            cold = next(i for i, cell in enumerate(cells) if "JIT cache off" in cell
                        or "empty JIT cache" in cell)
            warm = next(i for i, cell in enumerate(cells) if "JIT cache warm" in cell)
        mode = cells[0].rsplit("-", 1)[-1]
        if cold > 0 and mode in ("default", "size") and cells[cold].endswith(" s"):
            starts[mode] = (float(cells[cold][:-2]), float(cells[warm][:-2]))
    return starts


def _start_rows(name: str, what: str, script: Path, pattern: str, ready: Path
                ) -> list[Result]:
    table, source = _startup_table(script, pattern, ready)
    facts = [line.split(": ", 1)[1] for line in table.splitlines()
             if line.startswith(("GPU: ", "Kit: "))]
    starts = _starts(table)
    if set(starts) != {"size", "default"}:
        return [Result(name, f"{what}: start-up on a GPU", BASELINE,
                       error=f"no start-up of both builds ({source})")]
    note = "; ".join([source, *facts])
    return [
        Result(name, f"{what}: first start, no JIT cache", BASELINE, starts["size"][0],
               starts["default"][0], START_TARGET, note=note),
        Result(name, f"{what}: start, JIT cache warm (a user's next start)", BASELINE,
               starts["size"][1], starts["default"][1], START_TARGET, note=note),
    ]


def run(ctx: Context) -> list[Result]:
    return [*_size_rows(_prepare()),
            *_start_rows(f"{NAME}/start", "example's ninfer, every kernel run", SCRIPT,
                         "startup-check-*.txt", BUILDS),
            *_start_rows(f"{NAME}/upstream-start", "a real upstream's ninfer, every module "
                         "loaded at once", KIT_SCRIPT, "kit-startup-check-*.txt",
                         REPO_ROOT / ".cache" / "kit-startup" / "KIT")]
