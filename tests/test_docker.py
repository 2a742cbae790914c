"""The docker builder against a real engine: the example kit built in the test toolchain image
(Debian trixie + CUDA from PyPI wheels), reproducibility, ccache, remote engines and faults.

Without an engine these tests skip and name themselves in the skip reason; under CI they fail
instead (tools.missing), because .ci/run starts an engine.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ninfer_kits.config.settings import RUN_ID
from ninfer_kits.host import children
from ninfer_kits.host.engine import LABEL, RUN_LABEL
from ninfer_kits.kit import buildinfo, kitdir
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import load_matrix
from ninfer_kits.pipeline.docker_builder import DockerBuilder
from ninfer_kits.pipeline.images import ImageRecipe

from docker_fixtures import (
    ASSET,
    BASE_IMAGE,
    PORTABLE,
    TAG,
    Run,
    build,
    ensure_second_engine,
    stop_engine,
)
from tools import ROOT, changed_copy, sha256_of

pytestmark = pytest.mark.slow


@pytest.fixture()
def no_leaks(engine: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every test that builds must leave none of its containers. Its builds carry a run ID of
    its own ($NINFER_KITS_RUN_ID, the label org.ninfer-kits.run), returned: the engine is shared,
    so the test looks at, and touches, only containers with that label."""
    run_id = f"test-{uuid.uuid4().hex}"
    monkeypatch.setenv(RUN_ID.name, run_id)
    yield run_id
    left = engine.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})
    assert not left, f"containers left behind: {[c.id for c in left]}"


def test_example_kit_builds_in_docker_and_loads_in_its_runtime_image(
        docker_builds: tuple[Run, Run]) -> None:
    first, _ = docker_builds
    assert sorted(p.name for p in first.out.iterdir()) == sorted(
        ("BUILDINFO.txt", "SHA1SUMS", "SHA256SUMS", "build.log", PORTABLE, ASSET,
         *kitdir.attestation_names((ASSET, PORTABLE)), kitdir.OWED))
    verdict = first.info().run_value("smoke") or ""
    assert verdict.startswith("passed in ninfer-kits/runtime-trixie-cuda130:"), verdict
    assert "every library and symbol version of 2 binaries resolved" in verdict
    assert f"smoke test {verdict}" in first.done.stderr
    log = (first.out / "build.log").read_text()
    assert "== smoke test: the loader's trace in ninfer-kits/runtime-trixie-cuda130:" in log
    assert "libavformat.so.61 => /" in log  # FFmpeg 7 from the runtime image's packages
    assert first.info().builder == "docker"


def test_two_cold_docker_builds_are_byte_identical(docker_builds: tuple[Run, Run]) -> None:
    first, second = docker_builds
    for run in docker_builds:
        info = run.info()
        assert info.run_value("ccache_hits") == "0", info.run
    assert sha256_of(first.out / ASSET) == sha256_of(second.out / ASSET)
    # The repaired kit: the toolchain image's libraries, edited the same way by patchelf.
    assert sha256_of(first.out / PORTABLE) == sha256_of(second.out / PORTABLE)


def test_cold_build_counts_every_compile_call(docker_builds: tuple[Run, Run]) -> None:
    info = docker_builds[0].info()
    calls = int(info.run_value("ccache_calls") or 0)
    misses = int(info.run_value("ccache_misses") or 0)
    # version.cpp, device.cpp, tokenize.cpp, http.cpp, media.cpp, 14 kernels, the two apps
    assert calls >= 20, info.run
    assert misses == calls and info.run_value("ccache_uncacheable") == "0", info.run


def test_floor_is_the_images_not_the_hosts(engine: Any, docker_builds: tuple[Run, Run]) -> None:
    info = docker_builds[0].info()
    host_glibc = tuple(int(p) for p in os.confstr("CS_GNU_LIBC_VERSION").split()[1].split("."))
    floor = tuple(int(p) for p in info.glibc_floor.split("."))
    # Debian trixie's glibc (2.41) turns strtol into __isoc23_strtol@GLIBC_2.38, whatever the
    # host. On a host with an older glibc, a floor above it proves the binaries were linked
    # against the image; on a newer one the floor cannot tell, and the compiler below can.
    assert floor >= (2, 38), info.glibc_floor
    if host_glibc < (2, 38):
        assert floor > host_glibc, (info.glibc_floor, host_glibc)
    assert info.base_image == BASE_IMAGE and info.base_image_id.startswith("sha256:")
    # The base the image was built from, as its label recorded it (the same base here).
    assert info.base_image_id == engine.images.get(BASE_IMAGE).id
    assert info.host_compiler.startswith("GNU 14.")
    assert info.cuda_version == "13.0.88"
    image = info.run_value("image") or ""
    assert image.startswith("ninfer-kits/toolchain-trixie-cuda130:") and "@sha256:" in image


def test_rebuild_without_change_hits_every_compile(docker_builds: tuple[Run, Run],
                                                   cold_volumes: tuple[str, str],
                                                   example_repo: tuple[Path, str],
                                                   tmp_path: Path, no_leaks: None) -> None:
    """C++20 compiles on CMake >= 3.28 carry module-scanning flags ccache refuses; the recipe
    turns scanning off, so a rebuild in a fresh tree from a warm cache hits on every call."""
    run = build(tmp_path / "again", "example", "--source", str(example_repo[0]),
                "--ccache-volume", cold_volumes[0], "--fresh-tree")
    assert run.done.returncode == 0, run.done.stderr[-3000:]
    info = run.info()
    assert info.run_value("ccache_hit_rate") == "100.0%", info.run
    assert info.run_value("ccache_uncacheable") == "0", info.run
    assert info.run_value("build_folder") == "fresh", info.run
    assert sha256_of(run.out / ASSET) == sha256_of(docker_builds[0].out / ASSET)


def test_rebuild_after_one_cu_change(engine: Any, docker_builds: tuple[Run, Run],
                                     cold_volumes: tuple[str, str],
                                     example_repo: tuple[Path, str],
                                     tmp_path: Path, no_leaks: None) -> None:
    """One kernel changed, committed five months later. In a fresh tree, ccache misses on that
    file alone. In the kit's kept tree (filled by the first cold build), only that file is
    compiled at all. Both kits are byte for byte a build's with no compiler cache at all: the
    objects carried over from the older commit are the ones the new one makes (nvcc -lineinfo
    records source mtimes, which must not follow the commit time). Going back to the first
    revision compiles it once more and gives the first build's kit; building that again
    compiles nothing."""
    # A value no earlier run compiled, so that the volume cannot hold it.
    unique = uuid.uuid4().int % 1_000_000_007
    repo = changed_copy(example_repo[0], tmp_path / "changed", "src/kernels/sampling.cu",
                        f"\n__device__ int ninfer_kits_changed = {unique};\n",
                        date="2025-06-01T00:00:00+0000")
    # The uncached build compiles everything: beside the others, which mostly hit.
    pool = ThreadPoolExecutor(1)
    compiling = pool.submit(build, tmp_path / "uncached", "example", "--source", str(repo),
                            "--ccache-volume", "none", "--no-portable")
    fresh = build(tmp_path / "rebuild", "example", "--source", str(repo),
                  "--ccache-volume", cold_volumes[1], "--fresh-tree")
    assert fresh.done.returncode == 0, fresh.done.stderr[-3000:]
    info = fresh.info()
    calls = int(info.run_value("ccache_calls") or 0)
    assert info.run_value("ccache_misses") == "1", info.run  # sampling.cu, and nothing else
    assert int(info.run_value("ccache_hits") or 0) == calls - 1, info.run

    def kept(name: str, source: Path, *extra: str) -> buildinfo.BuildInfo:
        run = build(tmp_path / name, "example", "--source", str(source),
                    "--ccache-volume", cold_volumes[0], *extra)
        assert run.done.returncode == 0, run.done.stderr[-3000:]
        assert (run.info().run_value("build_tree") or "").startswith(
            f"{cold_volumes[0]}-tree-example-"), run.info().run
        return run.info()

    incremental = kept("incremental", repo)
    assert incremental.run_value("build_folder") == "kept (1 source entries changed)"
    assert incremental.run_value("ccache_calls") == "1", incremental.run
    assert incremental.binaries == info.binaries
    assert sha256_of(tmp_path / "incremental/dist" / TAG / ASSET) == sha256_of(fresh.out / ASSET)
    back = kept("back", example_repo[0])
    assert back.run_value("ccache_calls") == "1", back.run
    assert back.binaries == docker_builds[0].info().binaries
    again = kept("again", example_repo[0], "--no-portable")  # and the plain kit alone
    assert again.run_value("build_folder") == "kept (0 source entries changed)"
    assert again.run_value("ccache_calls") == "0", again.run
    assert sorted(path.name for path in (tmp_path / "again/dist" / TAG).iterdir()) == sorted(
        ("BUILDINFO.txt", "SHA1SUMS", "SHA256SUMS", "build.log", ASSET,
         *kitdir.attestation_names((ASSET,))))
    assert again.asset_of("portable") is None and again.binaries == back.binaries
    uncached = compiling.result()
    pool.shutdown()
    assert uncached.done.returncode == 0, uncached.done.stderr[-3000:]
    assert info.binaries == uncached.info().binaries


def test_a_failed_build_leaves_nothing_stale_in_the_kept_tree(
        engine: Any, docker_builds: tuple[Run, Run], cold_volumes: tuple[str, str],
        example_repo: tuple[Path, str], tmp_path: Path, no_leaks: None) -> None:
    """Two kernels changed, one of them broken: the build fails in the kit's kept tree (filled
    by the second cold build). With the broken one mended and the other as it was, the next
    build compiles what the change made stale, though its file is no longer new to the tree:
    its kit is byte for byte a fresh tree's."""
    unique = uuid.uuid4().int % 1_000_000_007
    good = f"\n__device__ int ninfer_kits_stale_check = {unique};\n"
    changed = changed_copy(example_repo[0], tmp_path / "changed", "src/kernels/sampling.cu",
                           good)
    broken = changed_copy(changed, tmp_path / "broken", "src/kernels/topk.cu",
                          "\nthis is not C++;\n")
    failed = build(tmp_path / "failed", "example", "--source", str(broken),
                   "--ccache-volume", cold_volumes[1], "-j", "1")
    assert failed.done.returncode != 0 and "Traceback" not in failed.done.stderr
    assert "compiling example" in failed.done.stderr, failed.done.stderr[-3000:]
    mended = build(tmp_path / "mended", "example", "--source", str(changed),
                   "--ccache-volume", cold_volumes[1])
    fresh = build(tmp_path / "fresh", "example", "--source", str(changed),
                  "--ccache-volume", cold_volumes[1], "--fresh-tree")
    for run in (mended, fresh):
        assert run.done.returncode == 0, run.done.stderr[-3000:]
    assert mended.info().run_value("build_folder") == "kept (1 source entries changed)"
    assert mended.info().binaries == fresh.info().binaries
    assert mended.info().binaries != docker_builds[1].info().binaries  # the change is in it


def test_no_engine_says_how_to_start_one(tmp_path: Path) -> None:
    run = build(tmp_path, "example", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert run.done.returncode == 3  # the environment, not the input
    stderr = run.done.stderr
    assert "no Docker engine answers at unix:///nonexistent/docker.sock" in stderr
    assert "scripts/start-docker-engine.sh" in stderr and "Traceback" not in stderr


def test_docker_host_reaches_a_second_engine(engine: Any, docker_builds: tuple[Run, Run],
                                             cold_volumes: tuple[str, str],
                                             example_repo: tuple[Path, str],
                                             tmp_path: Path) -> None:
    """A second engine on a loopback TCP port: the build runs there (its images, its volume).
    Its compiler cache volume is seeded with what the first cold build compiled (where the
    build runs is the claim here, not a cold compile: test_two_cold_docker_builds has those)."""
    import docker

    # A name and a port of this test's own: stop_engine purges the engine it names, and the
    # machine may run another copy of this test at the same time.
    name = f"second-{uuid.uuid4().hex[:8]}"
    address = ensure_second_engine(name, host=f"tcp://127.0.0.1:{_free_port()}")
    try:
        remote = docker.DockerClient(base_url=address)
        missing_base = build(tmp_path / "bare", "example", "--source", str(example_repo[0]),
                             env={"DOCKER_HOST": address})
        assert missing_base.done.returncode == 3
        assert f"not on the engine at {address}" in missing_base.done.stderr
        _copy_images(engine, remote, _images_for_example(engine))
        _copy_volume(address, cold_volumes[0], "ninfer-kits-ccache-trixie-cuda130", BASE_IMAGE)
        run = build(tmp_path / "remote", "example", "--source", str(example_repo[0]),
                    env={"DOCKER_HOST": address})
        assert run.done.returncode == 0, run.done.stderr[-3000:]
        assert sha256_of(run.out / ASSET) == sha256_of(docker_builds[0].out / ASSET)
        assert run.info().run_value("ccache_misses") == "0", run.info().run  # the seeded cache
        assert remote.volumes.get("ninfer-kits-ccache-trixie-cuda130") is not None
        assert remote.containers.list(all=True) == []
    finally:
        stop_engine(name)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _images_for_example(engine: Any) -> list[str]:
    toolchain = load_matrix(ROOT / "matrix.toml").kit("example").toolchain
    recipes = (ImageRecipe.toolchain_image(toolchain), ImageRecipe.runtime_image(toolchain))
    # Tags hash the base's ID; `docker save | docker load` keeps image IDs, so they carry over.
    return [toolchain.base_image, toolchain.runtime_base_image,
            *(recipe.tag(engine.images.get(recipe.base_image).id) for recipe in recipes)]


def _copy_images(source: Any, target: Any, tags: list[str]) -> None:
    """docker save | docker load between engines, so the remote build reuses the same images."""
    saved = subprocess.Popen(["docker", "save", *tags], stdout=subprocess.PIPE,
                             env={k: v for k, v in os.environ.items() if k != "DOCKER_HOST"})
    assert saved.stdout is not None
    target.images.load(saved.stdout)
    assert saved.wait() == 0


def _copy_volume(address: str, volume: str, into: str, image: str) -> None:
    """Volume `volume` of this machine's engine copied into volume `into` of the engine at
    `address`, through a tar stream between two containers of `image`."""
    here = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    source = subprocess.Popen(["docker", "run", "--rm", "--network", "none", "-v",
                               f"{volume}:/from:ro", image, "tar", "-C", "/from", "-cf", "-", "."],
                              stdout=subprocess.PIPE, env=here)
    target = subprocess.run(["docker", "run", "--rm", "-i", "--network", "none", "-v",
                             f"{into}:/to", image, "tar", "-C", "/to", "-xf", "-"],
                            stdin=source.stdout, capture_output=True, check=False,
                            env={**here, "DOCKER_HOST": address})
    assert source.wait() == 0 and target.returncode == 0, target.stderr[-2000:]


# --------------------------------------------------------------------------- faults


def project_copy(tmp_path: Path, edit: tuple[str, str] | None = None,
                 dockerfiles: dict[str, str] | None = None) -> Path:
    """This project's matrix, recipe and Dockerfiles in a temporary folder, one thing changed."""
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    shutil.copy(ROOT / "build/recipe.py", project / "build/recipe.py")
    shutil.copytree(ROOT / "dockerfiles", project / "dockerfiles")
    for name, text in (dockerfiles or {}).items():
        (project / "dockerfiles" / name).write_text(text)
    matrix = (ROOT / "matrix.toml").read_text()
    if edit:
        assert edit[0] in matrix
        matrix = matrix.replace(edit[0], edit[1])
    (project / "matrix.toml").write_text(matrix)
    shutil.copy(ROOT / "allowed_signers", project / "allowed_signers")  # [publish.signing]'s
    return project


def assert_failed_cleanly(run: Run, code: int, *needles: str) -> None:
    assert run.done.returncode == code, run.done.stderr[-3000:]
    for needle in needles:
        assert needle in run.done.stderr, (needle, run.done.stderr[-3000:])
    assert "Traceback" not in run.done.stderr
    assert not run.dist.exists() or list(run.dist.iterdir()) == []


def test_broken_dockerfile(engine: Any, example_repo: tuple[Path, str], tmp_path: Path,
                           no_leaks: None) -> None:
    broken = "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN echo about to fail && exit 3\n"
    project = project_copy(tmp_path, ('dockerfile = "dockerfiles/toolchain-wheels-debian',
                                      'dockerfile = "dockerfiles/broken'),
                           {"broken.Dockerfile": broken})
    run = build(tmp_path, "example", "--source", str(example_repo[0]), project=project)
    assert_failed_cleanly(run, 1, "building image ninfer-kits/toolchain-trixie-cuda130:",
                          "about to fail", "returned a non-zero code: 3")


def test_base_image_that_cannot_be_had(engine: Any, example_repo: tuple[Path, str],
                                       tmp_path: Path, no_leaks: None) -> None:
    # A tag of this test's own: an engine that has NVIDIA's image would build with it.
    base = f"nvidia/cuda:13.1.2-devel-ubuntu24.04-{uuid.uuid4().hex[:12]}"
    project = project_copy(tmp_path, ('base_image = "ninfer-kits/debian-trixie-base:local"',
                                      f'base_image = "{base}"'))
    run = build(tmp_path, "example", "--source", str(example_repo[0]), project=project)
    # Not NVIDIA's name on a Debian root (make-base-image.sh); every wheels toolchain lacks the
    # base here, so none is offered: the kind of toolchain is.
    assert_failed_cleanly(run, 3, f"base image {base} (toolchain trixie-cuda130) cannot be had",
                          "no Debian root made by scripts/make-base-image.sh stands in for it",
                          "or use a toolchain that builds anywhere")
    assert "make-base-image.sh nvidia" not in run.done.stderr
    assert "bullseye-sysroot-cuda130 (CUDA" not in run.done.stderr


def test_compile_failure_in_docker(engine: Any, example_repo: tuple[Path, str], tmp_path: Path,
                                   no_leaks: None) -> None:
    repo = changed_copy(example_repo[0], tmp_path / "broken", "src/kernels/rmsnorm.cu",
                        "\nthis is not CUDA;\n")
    run = build(tmp_path / "x", "example", "--source", str(repo))
    assert_failed_cleanly(run, 1, "compiling example in ninfer-kits/toolchain-trixie-cuda130",
                          "rmsnorm.cu", "full log: ")


def test_container_killed_mid_compile(engine: Any, example_repo: tuple[Path, str],
                                      tmp_path: Path, no_leaks: str) -> None:
    place = tmp_path / "killed"
    place.mkdir()
    command = [sys.executable, "-m", "ninfer_kits", "build", "example", "--builder", "docker",
               "--matrix", str(ROOT / "matrix.toml"), "--dist", str(place / "dist"),
               "--cache-dir", str(place / "cache"), "--source", str(example_repo[0])]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, RUN_ID.name: no_leaks})
    killed = _kill_build_container_once_compiling(engine, no_leaks, timeout=120)
    stdout, stderr = process.communicate(timeout=300)
    run = Run(done=subprocess.CompletedProcess(command, process.returncode, stdout, stderr),
              dist=place / "dist")
    assert killed
    assert_failed_cleanly(run, 1, "compiling example in", "exit status 137")


def test_sigterm_to_the_build_alone_removes_its_container(
        engine: Any, example_repo: tuple[Path, str], tmp_path: Path, no_leaks: None) -> None:
    """SIGTERM (a cancelled CI job, `timeout`) sent to the ninfer-kits process alone while it
    compiles: the build container is removed as on Ctrl-C, and the status is 143."""
    volume = f"ninfer-kits-test-ccache-{uuid.uuid4().hex[:12]}"  # names this build's container
    place = tmp_path / "terminated"
    place.mkdir()
    command = [sys.executable, "-m", "ninfer_kits", "build", "example", "--builder", "docker",
               "--matrix", str(ROOT / "matrix.toml"), "--dist", str(place / "dist"),
               "--cache-dir", str(place / "cache"), "--source", str(example_repo[0]),
               "--ccache-volume", volume]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(b"[1/" in container.logs()
                      for container in engine.containers.list(filters={"volume": volume})):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the compile never started"
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
        left = engine.containers.list(all=True, filters={"volume": volume})
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for container in engine.containers.list(all=True, filters={"volume": volume}):
            container.remove(force=True)  # this test's own, left by a failure
        for made in engine.volumes.list(filters={"name": volume}):  # and its kept tree
            with contextlib.suppress(Exception):
                made.remove(force=True)
    assert left == []
    run = Run(done=subprocess.CompletedProcess(command, process.returncode, stdout, stderr),
              dist=place / "dist")
    assert_failed_cleanly(run, 143, "ninfer-kits: terminated (SIGTERM)")


def test_an_interrupt_removes_the_smoke_test_running_beside(engine: Any, tmp_path: Path,
                                                            no_leaks: None) -> None:
    """Ctrl-C or SIGTERM in the main thread while the smoke test's container runs in the
    build's background thread (as it does while the kit is packed): the container is removed
    at once, and the build ends without waiting for it. The loader is replaced by a minute's
    sleep (after `:`, which takes the loader's trace variables), a smoke test slow enough to
    tell."""
    kit = load_matrix(ROOT / "matrix.toml").kit("example")
    root = tmp_path / "root"
    (root / "kit" / "bin").mkdir(parents=True)
    (root / "kit" / "bin" / "ninfer").write_bytes(b"")
    token = uuid.uuid4().hex
    builder = DockerBuilder(client=engine)

    def running() -> Any:
        for container in engine.containers.list(filters={"label": f"{LABEL}=build"}):
            if token in " ".join(container.attrs["Config"]["Cmd"] or ()):
                return container
        return None

    container, took = None, 0.0
    try:
        with pytest.raises(KeyboardInterrupt), children.background() as background:
            smoke = background.submit(builder.smoke_test, kit, [root], f": ; sleep 60; : {token}",
                                      tmp_path / "build.log",
                                      Reporter(io.StringIO(), mode="plain"))
            deadline = time.monotonic() + 300  # the runtime image may be built first
            while (container := running()) is None:
                assert not smoke.done(), smoke.result()  # why it ended without a container
                assert time.monotonic() < deadline, "the smoke test never started"
                time.sleep(0.2)
            started = time.monotonic()
            raise KeyboardInterrupt
        took = time.monotonic() - started
        gone = engine.containers.list(all=True, filters={"id": container.id}) == []
    finally:
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True)  # this test's own, left by a failure
    assert gone
    assert took < 20, took
    assert smoke.done() and isinstance(smoke.exception(), KeyboardInterrupt)


def _kill_build_container_once_compiling(engine: Any, run_id: str, timeout: float) -> bool:
    """Kills the build container of run `run_id` (this test's build; never another's on the
    shared engine) once Ninja has started."""
    deadline = time.monotonic() + timeout
    ours = {"label": [f"{LABEL}=build", f"{RUN_LABEL}={run_id}"]}  # both labels must match
    while time.monotonic() < deadline:
        for container in engine.containers.list(filters=ours):
            if b"[1/" in container.logs():
                container.kill()
                return True
        time.sleep(0.2)
    return False


def test_smoke_test_names_every_missing_library(engine: Any, example_repo: tuple[Path, str],
                                               tmp_path: Path, no_leaks: None) -> None:
    """`ld.so --list` stops at the first missing library; the smoke test names all of them."""
    bare = "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n"  # no libcurl, no FFmpeg, no CUDA runtime
    project = project_copy(tmp_path, ('runtime_dockerfile = "dockerfiles/runtime-wheels-debian',
                                      'runtime_dockerfile = "dockerfiles/bare-runtime'),
                           {"bare-runtime.Dockerfile": bare})
    run = build(tmp_path, "example", "--source", str(example_repo[0]), project=project)
    assert_failed_cleanly(run, 1, "smoke test (dockerfiles/bare-runtime.Dockerfile) failed in "
                                  "ninfer-kits/runtime-trixie-cuda130:")
    for binary in ("ninfer", "ninfer-serve"):
        for name in ("libcudart.so.13", "libcurl.so.4", "libavformat.so.61", "libavcodec.so.61",
                     "libavutil.so.59", "libswscale.so.8"):
            assert f"kit/bin/{binary}: {name} not found" in run.done.stderr, (
                binary, name, run.done.stderr[-3000:])
            # a library that is not there is named once, not once more per symbol version
            assert f"kit/bin/{binary}: {name} has no" not in run.done.stderr
    log = Path(run.done.stderr.split("the loader's trace is in ", 1)[1].split()[0])
    assert "libavformat.so.61 => not found" in log.read_text()
