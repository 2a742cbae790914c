"""The docker builder on the example engine: cold compile vs a one-file rebuild with warm ccache,
and the pipeline's overhead around the compile.

Both in one run, on the engine DOCKER_HOST names (scripts/start-docker-engine.sh starts one):
1. cold: `ninfer-kits build example --builder docker` with a compiler cache volume of this
   run's own (`--ccache-volume`, new and empty; the engine's default one, which other builds
   use, is never touched), removed afterwards with the build trees kept beside it;
2. rebuild: one kernel of the example changed (a real code change, committed), built again with
   the compiler cache and the kit's build tree the cold build filled (kept in volumes);
3. the same revision again with `--no-portable`: the plain kit alone.
Rows: the rebuild's configure + build against the cold one's (target ≤ 0.2; the Ninja build
phase alone is shown too), and the overhead of the whole `ninfer-kits build` process beyond the
recipe (image reuse, copy in and out, inspect, the smoke test, packing) against the compile of
a real upstream (REAL_COMPILE, 5 minutes; the example compiles in about 19 s, which would make
any fixed cost look large), target ≤ 0.05: for the plain kit (3.), and for the cold build with
the portable flavour too (the repair, which copies and patches about 140 libraries, and a
150 MB second tarball).
All builds share one --cache-dir, as a maintainer's machine does: the git mirror and the
exported toolchain environment the repair reads are kept there (made once per image ID, by the
first build that needs them); the cold build's compiler cache and build tree are empty.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from common import REPO_ROOT, Context, Result, progress

NAME = "docker"
DESCRIPTION = "docker builder: cold compile vs one-file rebuild with warm ccache; overhead"
VOLUME_PREFIX = "ninfer-kits-bench-ccache-"  # + a token of the run: its own volumes only
CHANGED = "src/kernels/sampling.cu"
STAGE_LINE = re.compile(r"^✓ (.+) \((\d+\.\d) s\)$", re.M)
RUNTIME_IMAGE = re.compile(r"^smoke test passed in (\S+):", re.M)
REAL_COMPILE = 300.0  # seconds: a cold compile of a real upstream, the overhead's yardstick
REAL_NAME = "a real upstream's 5-min compile"
PORTABLE_NOTE = "about 140 bundled libraries (150 MB)"
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@ninfer-kits.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@ninfer-kits.invalid",
           "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
           "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000"}


def run(ctx: Context) -> list[Result]:
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return [Result(NAME, "docker builder", "-", error="no Docker engine answers "
                       "(start one: scripts/start-docker-engine.sh)")]
    with tempfile.TemporaryDirectory(prefix="bench-docker-") as scratch:
        work = Path(scratch)
        repo = _example_repo(work / "repo")
        cache = ctx.cache / "docker-cache"
        if not any((cache / "environments").glob("*/etc")):
            progress("a first build fills the shared cache, as a maintainer's machine has it")
            _build(work / "prime", repo, cache)
        volume = f"{VOLUME_PREFIX}{uuid.uuid4().hex[:12]}"
        ours = ("--ccache-volume", volume)
        try:
            progress("cold build (empty ccache volume, new build tree)")
            cold, cold_wall = _build(work / "cold", repo, cache, *ours)
            _change_one_kernel(repo)
            progress(f"rebuild after a change to {CHANGED} (the kept build tree, warm ccache)")
            warm, _ = _build(work / "warm", repo, cache, *ours)
            progress("the same, plain kit only (--no-portable): the overhead without the "
                     "repair")
            plain, plain_wall = _build(work / "plain", repo, cache, "--no-portable", *ours)
        finally:
            _remove_volumes(volume)  # the compiler cache, and the build trees kept beside it
        progress("a container of the runtime image started and removed, 5 times")
        start_floor = _container_floor(cold["runtime_image"])
    overhead = cold_wall - cold["compile_seconds"]
    plain_overhead = plain_wall - plain["compile_seconds"]
    return [
        Result(NAME, "configure + build: one-file rebuild / cold", "cold configure + build",
               ours=warm["compile_seconds"], baseline=cold["compile_seconds"], target=0.2,
               note=f"configure {warm['configure_seconds']:.1f} s in the kept tree "
                    f"({cold['configure_seconds']:.1f} s cold); compiles "
                    f"{warm['ccache_calls']:.0f} (ccache misses {warm['ccache_misses']:.0f})"),
        Result(NAME, "Ninja build phase: one-file rebuild / cold", "cold build phase",
               ours=warm["build_seconds"], baseline=cold["build_seconds"]),
        Result(NAME, "pipeline overhead, plain kit", REAL_NAME,
               ours=plain_overhead, baseline=REAL_COMPILE, target=0.05,
               note=f"`--no-portable` after the rebuild: whole process {plain_wall:.2f} s, "
                    f"compile {plain['compile_seconds']:.1f} s; stages {plain['stages']}"),
        Result(NAME, "pipeline overhead, with the portable flavour", REAL_NAME,
               ours=overhead, baseline=REAL_COMPILE, target=0.05,
               note=f"whole process {cold_wall:.1f} s (the example's cold compile "
                    f"{cold['compile_seconds']:.1f} s): the plain kit's overhead and the "
                    f"portable repair, pack and smoke test of {PORTABLE_NOTE}; stages "
                    f"{cold['stages']}"),
        Result(NAME, "one container started, waited for and removed (no work in it)",
               "cold compile", ours=start_floor, baseline=cold["compile_seconds"],
               note="median of 5: the engine's floor, paid twice by every build (the compile "
                    "and the smoke test)"),
    ]


def _remove_volumes(prefix: str) -> None:
    listed = subprocess.run(["docker", "volume", "ls", "-q", "--filter", f"name={prefix}"],
                            capture_output=True, text=True, check=False).stdout.split()
    for name in (name for name in listed if name.startswith(prefix)):
        subprocess.run(["docker", "volume", "rm", "-f", name], capture_output=True, check=False)


def _example_repo(repo: Path) -> Path:
    shutil.copytree(REPO_ROOT / "examples" / "engine", repo,
                    ignore=shutil.ignore_patterns("build", "build-*"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "example"]):
        _git(repo, *args)
    return repo


def _change_one_kernel(repo: Path) -> None:
    kernel = repo / CHANGED
    kernel.write_text(kernel.read_text() + "\n__device__ int ninfer_kits_bench_change = 1;\n")
    _git(repo, "commit", "-q", "-am", "change one kernel")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, **GIT_ENV, "GIT_CONFIG_GLOBAL": os.devnull})


def _container_floor(image: str) -> float:
    """What one `docker run --rm IMAGE true` costs through the SDK the builder uses."""
    import docker

    client = docker.from_env()
    times = []
    for _ in range(5):
        started = time.perf_counter()
        container = client.containers.create(image, command=["true"], network_mode="none")
        container.start()
        container.wait()
        container.remove(force=True, v=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _stage_times(output: str) -> str:
    """The stages that took a tenth of a second or more, as the build printed them."""
    stages = [f"{name} {seconds} s" for name, seconds in STAGE_LINE.findall(output)
              if float(seconds) >= 0.1]
    return ", ".join(stages) or "none over 0.1 s"


def _build(place: Path, repo: Path, cache: Path, *extra: str) -> tuple[dict[str, Any], float]:
    """One whole `ninfer-kits build` process; the recipe's times from its BUILDINFO, the
    stage times from its output."""
    from ninfer_kits.kit import buildinfo

    command = [sys.executable, "-m", "ninfer_kits", "build", "example", "--builder", "docker",
               "--matrix", str(REPO_ROOT / "matrix.toml"), "--dist", str(place / "dist"),
               "--cache-dir", str(cache), "--work-dir", str(place / "work"),
               "--source", str(repo), *extra]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"docker build failed: {done.stderr.strip().splitlines()[-1:]}")
    info = buildinfo.read(next((place / "dist").glob("*/BUILDINFO.txt")))
    keys = ("compile_seconds", "configure_seconds", "build_seconds", "ccache_calls",
            "ccache_misses")
    facts: dict[str, Any] = {key: float(info.run_value(key) or 0) for key in keys}
    output = done.stdout + done.stderr
    runtime = RUNTIME_IMAGE.search(output)
    if runtime is None:
        raise RuntimeError("the build's output names no runtime image (no smoke test line)")
    facts["stages"], facts["runtime_image"] = _stage_times(output), runtime[1]
    return facts, wall
