"""`ninfer-kits inspect --json` against readelf + cuobjdump, whole processes, on the same files.

Baseline per file: `readelf -d -V -W` + `cuobjdump --list-elf` + `cuobjdump --list-ptx`, the
sum of three whole-process times. Ours: the `ninfer-kits inspect --json FILE` console script as
users run it, Python start-up included (with the package's bytecode compiled first, as an
installed package has it: this checkout may run with PYTHONDONTWRITEBYTECODE, which would make
every run compile the modules changed since their .pyc was written). Target: on the big real
CUDA libraries a kit ships, libcurand.so.10 (105 MB, 186 fatbin entries, and 1,747 more
containers found in its 58 MB .data) and libcublasLt.so.13 (540 MB), ours reads at least
6.5x the baseline's megabytes per second. Throughput is the file's size over the time a side
spends on it beyond its own start-up: each side's whole-process time on the file less its
whole-process time on small-few.so (56 kB, 6 entries), so that interpreter start (ours, ~85 ms)
and process start (the baseline's three, a few ms) do not pass for reading speed. The
whole-process times, start-up included, are rows of their own (informational: that is what a
user waits for, and start-up is what the target used to count). The synthetic
files are informational; our time must follow the number of fatbin entries, not the file size:
the size rows compare files with the same number of entries but 20x or more apart in size
(target <= 1.5x), the entry rows are informational. Inputs: see fatbin_inputs.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from common import Context, Result, Stats, progress, timed_together
from fatbin_inputs import (
    CUBLASLT,
    CURAND,
    InputFile,
    Tools,
    build_inputs,
    describe,
    fetch_library,
    find_tools,
)

NAME = "inspect"
DESCRIPTION = "inspect --json vs readelf -d -V -W + cuobjdump --list-elf + --list-ptx"
BASELINE = "readelf+cuobjdump x2"
TARGET = 6.5  # ours / baseline, in MB/s
SIZE_TARGET = 1.5
HEADLINE = {"libcurand.so.10": CURAND, "libcublasLt.so.13": CUBLASLT}
STARTUP = "small-few.so"  # 56 kB, 6 entries: a side's time on it is its start-up
INFORMATIONAL = ("small-few.so", "small-many.so", "big-few.so", "big-many.so")
SAME_ENTRIES = (("big-many.so", "small-many.so"), ("big-few.so", "small-few.so"))


@dataclass(frozen=True)
class Measurement:
    """Both sides on one file: ours (None if it failed) and the baseline's summed median."""

    item: InputFile
    ours: Stats | None
    baseline: float
    error: str | None


def ours_command(path: Path) -> list[str]:
    script = Path(sys.executable).parent / "ninfer-kits"
    launcher = [str(script)] if script.exists() else [sys.executable, "-m", "ninfer_kits"]
    return [*launcher, "inspect", "--json", str(path)]


def baseline_commands(tools: Tools, path: Path) -> list[list[str]]:
    return [
        [str(tools.readelf), "-d", "-V", "-W", str(path)],
        [str(tools.cuobjdump), "--list-elf", str(path)],
        [str(tools.cuobjdump), "--list-ptx", str(path)],
    ]


def cuobjdump_spelling(kind: str, arch: str) -> str:
    """Our entry as cuobjdump names it: ELF for SASS, `sm_` for PTX too, and no `f` suffix
    (cuobjdump 13.5 lists an sm_100f cubin as sm_100; it keeps the `a` of sm_120a)."""
    arch = arch.replace("compute_", "sm_")
    arch = arch.removesuffix("f")
    return f"{'elf' if kind == 'sass' else kind} {arch}"


def inspector_archs(report: object) -> Counter[str]:
    """Entries of an `inspect --json` report (files[*].cuda[*]) in cuobjdump's spelling: those
    of the fatbin sections, which cuobjdump lists (not the containers the inspector also finds
    in data sections, as in libcurand's .data, which cuobjdump does not look for)."""
    if not isinstance(report, dict) or not isinstance(report.get("files"), list):
        raise ValueError("no `files` list in the JSON")
    return Counter(cuobjdump_spelling(str(entry["kind"]), str(entry["arch"]))
                   for item in report["files"] for entry in item.get("cuda", [])
                   if entry.get("placement", "fatbin") in ("fatbin", "relocatable"))


def _difference(ours: Counter[str], truth: Counter[str]) -> str:
    extra, missing = ours - truth, truth - ours
    parts = [f"+{n} {key}" for key, n in sorted(extra.items())]
    parts += [f"-{n} {key}" for key, n in sorted(missing.items())]
    return ", ".join(parts[:4]) + (" ..." if len(parts) > 4 else "")


def check_ours(item: InputFile) -> str | None:
    """Run the inspector once for real; an error message, or None if it agrees with cuobjdump."""
    done = subprocess.run(ours_command(item.path), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        return f"exit {done.returncode}: {last[:160]}"
    try:
        ours = inspector_archs(json.loads(done.stdout))
    except (ValueError, KeyError, AttributeError) as error:
        return f"unexpected JSON: {error!r}"
    truth = Counter(item.archs)
    if ours != truth:
        return (f"{ours.total()} entries vs cuobjdump's {truth.total()}: "
                f"{_difference(ours, truth)}")
    return None


def measure(tools: Tools, item: InputFile, repeat: int) -> Measurement:
    """Ours and the three baseline commands, whole processes, timed in alternation."""
    progress(f"timing {_label(item)}")
    error = check_ours(item)
    runnable = error is None or not error.startswith("exit")
    cmds = baseline_commands(tools, item.path)
    if runnable:
        cmds.append(ours_command(item.path))
    stats = timed_together(cmds, repeat)
    baseline = sum(stat.median for stat in stats[:3])
    return Measurement(item, stats[3] if runnable else None, baseline, error)


def _size(size: int) -> str:
    if size >= 10**8:
        return f"{size / 1e6:.0f} MB"
    return f"{size / 1e6:.1f} MB" if size >= 10**6 else f"{size / 1e3:.0f} kB"


def _label(item: InputFile) -> str:
    return f"{item.name} ({_size(item.size)}, {item.entries} entries)"


def versus_baseline(m: Measurement, target: float | None) -> Result:
    return Result(
        benchmark=NAME, measured=f"inspect --json {_label(m.item)}", baseline_name=BASELINE,
        ours=None if m.ours is None else m.ours.median, baseline=m.baseline,
        target=target, error=m.error,
        note="" if m.ours is None else f"min {m.ours.min * 1000:.1f} ms",
    )


def throughput_row(m: Measurement, start: Measurement) -> Result:
    """Megabytes of the file per second beyond start-up (`start`: the same commands on a file
    too small to take time): ours against the baseline's."""
    size = m.item.size / 1e6
    baseline = m.baseline - start.baseline
    ours = None if m.ours is None or start.ours is None else m.ours.median - start.ours.median
    error = m.error or start.error
    if error is None and (ours is None or ours <= 0 or baseline <= 0):
        error = f"reading time not above start-up (ours {ours}, baseline {baseline:.4f} s)"
    readable = error is None and ours is not None
    return Result(
        benchmark=NAME, measured=f"inspect --json {_label(m.item)}, beyond start-up",
        baseline_name=BASELINE, ours=size / ours if readable and ours else None,
        baseline=size / baseline if baseline > 0 else None, target=TARGET, error=error,
        unit="MB/s",
        note=f"{ours * 1000:.0f} ms vs {baseline * 1000:.0f} ms" if readable and ours else "",
    )


def size_row(big: Measurement, small: Measurement) -> Result:
    """Same entry count, very different size: our time should stay put."""
    factor = big.item.size / small.item.size
    return Result(
        benchmark=f"{NAME}/size",
        measured=f"ours: {_label(big.item)} vs {small.item.name} ({factor:.0f}x smaller)",
        baseline_name=f"ours on {small.item.name}",
        ours=None if big.ours is None else big.ours.median,
        baseline=None if small.ours is None else small.ours.median,
        target=SIZE_TARGET, error=big.error or small.error,
    )


def entries_row(many: Measurement, few: Measurement) -> Result:
    """Same size, many more entries: informational (this is where our time may grow)."""
    return Result(
        benchmark=f"{NAME}/entries",
        measured=f"ours: {_label(many.item)} vs {few.item.name} ({few.item.entries} entries)",
        baseline_name=f"ours on {few.item.name}",
        ours=None if many.ours is None else many.ours.median,
        baseline=None if few.ours is None else few.ours.median,
        error=many.error or few.error,
    )


def rows(done: dict[str, Measurement]) -> list[Result]:
    start = done[STARTUP]
    results = [throughput_row(done[name], start) for name in HEADLINE]
    results += [versus_baseline(done[name], None) for name in (*HEADLINE, *INFORMATIONAL)]
    results += [size_row(done[big], done[small]) for big, small in SAME_ENTRIES]
    results.append(entries_row(done["big-many.so"], done["big-few.so"]))
    return results


def compile_package() -> None:
    """Write the package's bytecode, as installing it does, so that no timed run compiles."""
    import compileall

    import ninfer_kits

    compileall.compile_dir(Path(ninfer_kits.__file__).parent, quiet=1)


def run(ctx: Context) -> list[Result]:
    compile_package()
    tools = find_tools()
    inputs = {name: describe(tools, name, fetch_library(ctx.cache, wheel))
              for name, wheel in HEADLINE.items()}
    inputs.update(build_inputs(ctx.cache, tools, inputs["libcurand.so.10"].path))
    for item in inputs.values():
        progress(f"{_label(item)}: {item.elf_entries} ELF + {item.ptx_entries} PTX per cuobjdump")
    done = {name: measure(tools, item, ctx.repeat) for name, item in inputs.items()}
    return rows(done)
