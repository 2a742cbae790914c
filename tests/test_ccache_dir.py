"""`build --ccache-dir DIR`: a host folder (what actions/cache saves and restores) is loaded into
a compiler cache volume of the build's own and saved back afterwards, through the engine's API
only (put_archive, get_archive), so a remote DOCKER_HOST works and nothing on the runner is left
root-owned. Small C, C++ and CUDA compiles through ccache in the test toolchain image show cold
and warm caches; one real build of the example shows the command.

Without an engine these tests skip and name themselves in the skip reason; under CI they fail
instead (tools.missing), because .ci/run starts an engine.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ninfer_kits.config.settings import RUN_ID
from ninfer_kits.errors import CheckFailed
from ninfer_kits.host.engine import LABEL, RUN_LABEL
from ninfer_kits.kit import buildinfo
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import load_matrix
from ninfer_kits.pipeline.ccache_dir import CCACHE_AT, ccache_from_dir
from ninfer_kits.pipeline.containers import KEEP_ENV, build_container
from ninfer_kits.pipeline.docker_builder import DockerBuilder

from docker_fixtures import cache_sharing_environments
from tools import ROOT

pytestmark = pytest.mark.slow

TAG = "example-v0.3.0-linux-sm86"
# One C, one C++ and one CUDA compile through ccache, as the recipe's launcher makes them; then
# the cache is handed to another user with tight modes, as a build running as root leaves it.
SOURCES = ("printf 'int c_part(void) { return 42; }\\n' > a.c && "
           "printf 'int cxx_part() { return 7; }\\n' > b.cpp && "
           "printf '__global__ void k(int *x) { *x = 1; }\\n' > k.cu")
COMPILES = (f"mkdir -p /src && cd /src && {SOURCES} && ccache gcc -c a.c -o a.o && "
            "ccache g++ -c b.cpp -o b.o && ccache nvcc -c k.cu -o k.o && "
            f"chown -R 4321:4321 {CCACHE_AT} && chmod -R go-rwx {CCACHE_AT}")


@pytest.fixture(scope="module")
def toolchain_image(engine: Any) -> str:
    kit = load_matrix(ROOT / "matrix.toml").kit("example")
    return str(DockerBuilder(client=engine).preflight(kit, Reporter(io.StringIO(), "plain")).image)


@pytest.fixture()
def run_id(engine: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A run ID of this test's own: it leaves no container and no volume with it behind."""
    run = f"test-ccache-{uuid.uuid4().hex}"
    monkeypatch.setenv(RUN_ID.name, run)
    yield run
    containers = engine.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run}"})
    for container in containers:
        container.remove(force=True, v=True)
    volumes = engine.volumes.list(filters={"label": f"{RUN_LABEL}={run}"})
    for volume in volumes:
        volume.remove(force=True)
    assert not containers, f"containers left behind: {[c.name for c in containers]}"
    assert not volumes, f"volumes left behind: {[volume.name for volume in volumes]}"


def compile_with(engine: Any, image: str, folder: Path, script: str = COMPILES,
                 max_size: str = "64M") -> str:
    """Run `script` against a cache loaded from `folder`; what ccache_from_dir reported."""
    said = io.StringIO()
    with ccache_from_dir(engine, image, folder, max_size, Reporter(said, "plain")) as volume, \
            build_container(engine, image=image, command=["sh", "-c", script],
                            env={"CCACHE_DIR": CCACHE_AT, "HOME": "/tmp"},
                            volumes={volume: {"bind": CCACHE_AT, "mode": "rw"}},
                            network="none") as container:
        container.start()
        status = container.wait()["StatusCode"]
        if status != 0:
            raise CheckFailed(f"compile failed ({status}): {container.logs().decode()}")
    return said.getvalue()


def cache_files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def test_cold_then_warm_through_the_engine_api(engine: Any, toolchain_image: str, run_id: str,
                                               tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    folder = tmp_path / "restored" / "ccache"  # missing, as on a first run: a cold cache
    cold = compile_with(engine, toolchain_image, folder)
    assert "ccache: starting cold" in cold
    assert "ccache: 0 hits, 3 misses (0.0% hit rate)" in cold, cold
    files = cache_files(folder)
    assert files, "the cache came back empty"
    # The container left them 4321's and 0600/0700; the runner gets its own, deletable ones.
    for path in [folder, *folder.rglob("*")]:
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (os.getuid(), os.getgid()), path
        assert stat.S_IMODE(info.st_mode) == (0o755 if path.is_dir() else 0o644), path
    assert not list(tmp_path.glob("restored/.ccache.*")), "staging folders left beside DIR"

    warm = compile_with(engine, toolchain_image, folder)
    assert f"{len(files)} files loaded from {folder}" in warm
    assert "ccache: 3 hits, 0 misses (100.0% hit rate)" in warm, warm
    assert summary.read_text().splitlines() == ["ccache: 0 hits, 3 misses (0.0% hit rate)",
                                                "ccache: 3 hits, 0 misses (100.0% hit rate)"]


def test_junk_in_the_folder_is_left_out(engine: Any, toolchain_image: str, run_id: str,
                                        tmp_path: Path) -> None:
    """A ccache.conf ccache cannot read would fail every compile; links and FIFOs are no cache;
    a damaged cache entry is a miss. None of them stops the build or comes back."""
    folder = tmp_path / "ccache"
    compile_with(engine, toolchain_image, folder)  # a real cache, then damaged
    entries = sorted(path for path in cache_files(folder) if path.name.endswith("R"))
    assert entries, [str(path) for path in cache_files(folder)]
    for entry in entries:
        entry.write_bytes(os.urandom(300))
    (folder / "ccache.conf").write_text("this is = not ccache's\n[garbage\n")
    (folder / "passwd").symlink_to("/etc/passwd")
    os.mkfifo(folder / "fifo")
    said = compile_with(engine, toolchain_image, folder)
    assert "ccache: 0 hits, 3 misses (0.0% hit rate)" in said, said
    assert not (folder / "ccache.conf").exists()
    assert not (folder / "passwd").is_symlink() and not (folder / "fifo").exists()
    assert "ccache: 3 hits" in compile_with(engine, toolchain_image, folder)


def test_the_saved_cache_is_trimmed_to_its_max_size(engine: Any, toolchain_image: str,
                                                    run_id: str, tmp_path: Path) -> None:
    roomy, tight = tmp_path / "roomy", tmp_path / "tight"
    compile_with(engine, toolchain_image, roomy)
    compile_with(engine, toolchain_image, tight, max_size="1K")
    entries = [path for path in cache_files(roomy) if path.name.endswith("R")]
    assert len(entries) == 3, [str(path) for path in cache_files(roomy)]
    assert not [path for path in cache_files(tight) if path.name.endswith("R")]
    assert "ccache: 0 hits" in compile_with(engine, toolchain_image, tight)


def test_a_failed_build_still_saves_what_it_compiled(engine: Any, toolchain_image: str,
                                                     run_id: str, tmp_path: Path) -> None:
    folder = tmp_path / "ccache"
    with pytest.raises(CheckFailed, match="compile failed"):
        compile_with(engine, toolchain_image, folder, COMPILES + " && exit 3")
    assert cache_files(folder)
    assert "ccache: 3 hits" in compile_with(engine, toolchain_image, folder)


def test_no_host_path_is_bound(engine: Any, toolchain_image: str, run_id: str, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Every container the cache's way in and out needs (kept here to be looked at) mounts the
    run's volume, and nothing of this host: an engine elsewhere (DOCKER_HOST) does as well."""
    monkeypatch.setenv(KEEP_ENV, "1")
    compile_with(engine, toolchain_image, tmp_path / "ccache", "true")
    kept = engine.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})
    try:
        roles = sorted(container.labels[LABEL] for container in kept)
        assert roles == ["build", "ccache", "ccache"]
        for container in kept:
            mounts = container.attrs["Mounts"]
            assert [(mount["Type"], mount["Destination"]) for mount in mounts] == \
                [("volume", CCACHE_AT)], mounts
            assert not container.attrs["HostConfig"].get("Binds") or all(
                not bind.startswith("/") for bind in container.attrs["HostConfig"]["Binds"])
            assert mounts[0]["Name"].startswith("ninfer-kits-ccache-run-")
    finally:
        for container in kept:
            container.remove(force=True, v=True)
        for volume in engine.volumes.list(filters={"label": f"{RUN_LABEL}={run_id}"}):
            volume.remove(force=True)


def test_build_with_a_ccache_dir(engine: Any, tiny_repo: tuple[Path, str], run_id: str,
                                 tmp_path: Path) -> None:
    """The command: a cold build (of the tiny engine: the cache's round trip is the claim) from a
    missing DIR leaves a filled DIR, the runner's, and says how ccache did, in the log and the
    step summary."""
    folder = tmp_path / "ccache"
    summary = tmp_path / "summary.md"
    done = subprocess.run(
        [sys.executable, "-m", "ninfer_kits", "build", "example", "--builder", "docker",
         "--matrix", str(ROOT / "matrix.toml"), "--source", str(tiny_repo[0]),
         "--dist", str(tmp_path / "dist"),
         "--cache-dir", str(cache_sharing_environments(tmp_path / "cache")),
         "--ccache-dir", str(folder), "--ccache-max-size", "500M", "--no-portable"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(line for line in done.stderr.splitlines() if line.startswith("ccache: 0 hits"))
    misses = int(line.split()[3])
    assert misses > 0 and line == f"ccache: 0 hits, {misses} misses (0.0% hit rate)"
    assert line in summary.read_text()
    assert cache_files(folder) and folder.stat().st_uid == os.getuid()
    info = buildinfo.read(tmp_path / "dist" / TAG / "BUILDINFO.txt")
    assert "loaded from and saved to --ccache-dir" in (info.run_value("ccache") or "")
    assert info.run_value("build_tree") is None or "none" in (info.run_value("build_tree") or "")


@pytest.mark.parametrize(("args", "needle"), [
    (("--ccache-dir", "d", "--ccache-volume", "v"), "give one of them"),
    (("--ccache-dir", "d", "--ccache-max-size", "lots"), "--ccache-max-size 'lots'"),
    (("--ccache-volume", "v", "--builder", "local"), "--ccache-volume is for the docker builder"),
    (("--ccache-dir", "d", "--no-ccache"), "--no-ccache and --ccache-dir contradict"),
    (("--ccache-volume", "v", "--no-ccache"), "--no-ccache and --ccache-volume contradict"),
    (("--no-ccache", "--builder", "local", "--ccache-max-size", "2"), "--ccache-max-size '2'"),
])
def test_bad_ccache_options(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ninfer_kits", "build", "example", "--builder", "docker",
         "--matrix", str(ROOT / "matrix.toml"), "--cache-dir", str(tmp_path), *args],
        capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr and "Traceback" not in done.stderr


def test_a_file_as_ccache_dir(tmp_path: Path) -> None:
    (tmp_path / "d").write_text("not a folder")
    done = subprocess.run(
        [sys.executable, "-m", "ninfer_kits", "build", "example", "--builder", "docker",
         "--matrix", str(ROOT / "matrix.toml"), "--cache-dir", str(tmp_path),
         "--ccache-dir", "d"], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 2 and "is not a folder" in done.stderr, done.stderr
