"""Docker set-up for the tests: an engine, the local base images and the test runtime image.

Plain functions, each meant to be called once per test session (wrap them in session fixtures).
They drive the scripts in scripts/ and the Dockerfiles in dockerfiles/ exactly as a maintainer
would by hand, so the tests exercise those files too. Whatever cannot be had here (no docker
client, not root, no network for apt or PyPI) skips the calling test through `tools.missing`,
which fails instead under CI.

Images (all local, no registry involved):
- BASE_IMAGE, the toolchain base: Debian trixie minbase + compilers, CMake, Ninja, libcurl and
  FFmpeg dev (scripts/make-base-image.sh); the `trixie-cuda130` toolchain builds FROM it.
- MINBASE_IMAGE: a plain trixie minbase root, the start of the test runtime image.
- RUNTIME_TEST_IMAGE: dockerfiles/runtime-wheels-debian.Dockerfile, where a kit of the test
  toolchain must load (libcurl, libstdc++ and libcudart.so.13 at /usr/local/cuda-13.0/lib).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ninfer_kits.kit import buildinfo

from tools import ROOT, missing

SCRIPTS = ROOT / "scripts"
DOCKERFILES = ROOT / "dockerfiles"
BASE_IMAGE = "ninfer-kits/debian-trixie-base:local"
MINBASE_IMAGE = "ninfer-kits/debian-trixie-minbase:local"
RUNTIME_TEST_IMAGE = "ninfer-kits/runtime-trixie-cuda130:local"
RUNTIME_TEST_DOCKERFILE = DOCKERFILES / "runtime-wheels-debian.Dockerfile"
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
DOCKERFILE_LABEL = "org.ninfer-kits.dockerfile-sha256"
# The example kit as matrix.toml builds it with the test toolchain (`portable = true` there).
TAG = "example-v0.3.0-linux-sm86"
ASSET = "ninfer-example-kit-v0.3.0-sm86.tar.gz"
PORTABLE = "ninfer-example-kit-v0.3.0-sm86-portable.tar.gz"
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")

_engine: str | None = None
# The background image builds (prebuild_toolchain_image) and the tests both start the engine:
# one at a time. (Each base image has a lock of its own: process_lock.)
_setting_up = threading.RLock()


def _run(command: list[str], what: str, timeout: float, env: dict[str, str] | None = None) -> str:
    """Runs a set-up step; a failure skips (locally) or fails (CI) with the step's last output."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                env=env, check=False)
    except subprocess.TimeoutExpired:
        missing(f"{what} (timed out after {timeout:.0f} s)")
        raise AssertionError from None  # unreachable: missing() raises
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-15:]
        missing(f"{what} (exit {result.returncode}):\n" + "\n".join(tail))
    return result.stdout


def _docker_env() -> dict[str, str]:
    env = dict(os.environ)
    host = ensure_engine()
    if host:
        env["DOCKER_HOST"] = host
    return env


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          env=_docker_env(), check=False)


def _needs_client() -> None:
    if shutil.which("docker") is None:
        missing("the docker client (apt-get install docker.io)")


def ensure_engine() -> str:
    """A Docker engine that answers; returns the DOCKER_HOST to use ("" for Docker's default).

    Runs scripts/start-docker-engine.sh, which returns at once when `docker info` already works
    and otherwise installs docker.io and starts dockerd (that part needs root).
    """
    global _engine
    with _setting_up:
        if _engine is not None:
            return _engine
        _needs_client()
        output = _run(["bash", str(SCRIPTS / "start-docker-engine.sh")],
                      "a Docker engine (scripts/start-docker-engine.sh)", timeout=600)
        lines = output.strip().splitlines()
        host = lines[-1].strip() if lines else ""
        # Docker's default socket needs no DOCKER_HOST, unless the environment already names one.
        if host == DEFAULT_SOCKET and not os.environ.get("DOCKER_HOST"):
            host = ""
        _engine = host
        return host


def ensure_second_engine(name: str = "second", host: str = "") -> str:
    """A second, independent engine (own socket, data root, exec root); returns its address.

    For tests that check DOCKER_HOST is honoured. Stop it with stop_engine(name). Needs root.
    """
    _needs_client()
    command = ["bash", str(SCRIPTS / "start-docker-engine.sh"), "--name", name]
    if host:
        command += ["--host", host]
    output = _run(command, f"a second Docker engine {name!r}", timeout=300)
    return output.strip().splitlines()[-1].strip()


def stop_engine(name: str, purge: bool = True) -> None:
    """Stops an engine that ensure_second_engine started; purge also deletes its data root."""
    command = ["bash", str(SCRIPTS / "stop-docker-engine.sh"), name]
    if purge:
        command.append("--purge")
    # Purging deletes the engine's images (gigabytes where a leg debootstrapped and built its
    # own): 120 s was not enough on a loaded machine (a cold CI run of issue 40).
    subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)


def image_exists(tag: str) -> bool:
    return _docker("image", "inspect", tag).returncode == 0


def ensure_base_image(tag: str = BASE_IMAGE, suite: str = "trixie",
                      include: str | None = None) -> str:
    """A debootstrapped Debian image (scripts/make-base-image.sh); returns its tag.

    include=None takes the script's default package list (the toolchain's needs); "" gives a
    plain minbase. An existing image is kept. The first build takes one to two minutes.
    """
    ensure_engine()
    with process_lock(f"base-{tag}"):  # threads too: each its own descriptor
        if image_exists(tag):
            return tag
        command = ["bash", str(SCRIPTS / "make-base-image.sh"), tag, suite]
        if include is not None:
            command += ["--include", include]
        _run(command, f"the base image {tag} (scripts/make-base-image.sh)", timeout=1800,
             env=_docker_env())
    return tag


def process_lock(name: str) -> Any:
    """A lock between the test processes of this machine (CI runs two Pythons' tests at once,
    .ci/lanes.py): the second to need an image waits for the first to make it."""
    from ninfer_kits.files import locks

    return locks.held(locks.named(name, folder="ninfer-kits-tests"), wait=None)


def once_per_run(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]) -> Any:
    """`make(folder)`'s result (JSON, kept beside the folder), made once per pytest run by the
    first of its processes (pytest-xdist's workers) to ask; the others wait for it and read it.
    A make that fails leaves nothing: the next to ask tries again (and fails in its own test)."""
    from ninfer_kits.files import locks

    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's folder
    made = shared / f"{name}.json"
    with locks.held(shared / f"{name}.lock", wait=None):
        if not made.exists():
            result = make(shared / name)
            made.write_text(json.dumps(result), encoding="utf-8")
        return json.loads(made.read_text(encoding="utf-8"))


def host_ca_bundle() -> Path:
    """The CA bundle pip needs inside a build to reach PyPI the way this machine does."""
    for candidate in (os.environ.get("PIP_CERT", ""), os.environ.get("SSL_CERT_FILE", ""),
                      *CA_BUNDLES):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    missing("a CA bundle for pip inside docker builds (/etc/ssl/certs/ca-certificates.crt)")
    raise AssertionError


def build_image(dockerfile: Path, tag: str, build_args: dict[str, str] | None = None,
                timeout: float = 1800) -> str:
    """`docker build --network host` of a Dockerfile of dockerfiles/ with the host's CA bundle.

    The context is a temporary folder with the Dockerfile and host-ca.crt, as the Dockerfiles
    expect. The image is labelled with a sha256 of the Dockerfile and the build args, and an
    image that already carries the label of the current ones is kept as it is.
    """
    ensure_engine()
    args = dict(build_args or {})
    recipe = dockerfile.read_bytes()
    recipe += "".join(f"\n{key}={value}" for key, value in sorted(args.items())).encode()
    digest = hashlib.sha256(recipe).hexdigest()
    inspected = _docker("image", "inspect", "--format",
                        f'{{{{index .Config.Labels "{DOCKERFILE_LABEL}"}}}}', tag)
    if inspected.returncode == 0 and inspected.stdout.strip() == digest:
        return tag
    with tempfile.TemporaryDirectory(prefix="ninfer-kits-context-") as context:
        shutil.copyfile(dockerfile, Path(context) / "Dockerfile")
        shutil.copyfile(host_ca_bundle(), Path(context) / "host-ca.crt")
        command = ["docker", "build", "--network", "host",
                   "--label", f"{DOCKERFILE_LABEL}={digest}", "-t", tag]
        for key, value in sorted(args.items()):
            command += ["--build-arg", f"{key}={value}"]
        _run([*command, context], f"the image {tag} ({dockerfile.name})", timeout=timeout,
             env=_docker_env())
    return tag


def ensure_runtime_test_image(tag: str = RUNTIME_TEST_IMAGE) -> str:
    """The test runtime image (dockerfiles/runtime-wheels-debian.Dockerfile); returns its tag.

    Built FROM the plain minbase (made first when missing); pip fetches the pinned
    nvidia-cuda-runtime wheel during the build, so the first build needs PyPI (about 20 s).
    """
    base = ensure_base_image(MINBASE_IMAGE, include="")
    return build_image(RUNTIME_TEST_DOCKERFILE, tag, {"BASE_IMAGE": base})


# A toolchain image that compiles libraries from source (the portable toolchain's: ~15 minutes on
# 2 cores) is built while the tests before its module run (conftest starts it for each
# `prebuilt_toolchain` marker among the collected tests). Its RUN steps get the engine's default
# CPU weight: with a low one (64 of 1024) the portable toolchains, starved by the end-to-end
# modules, finished 39 minutes into issue 40's cold run and their module ran on alone after.
PREBUILD_LOGS = ROOT / ".cache" / "logs"


@dataclass
class Prebuild:
    """One toolchain image built in a background thread: its tag, or why it failed."""

    toolchain: str
    log: Path
    started: float = dataclasses.field(default_factory=time.monotonic)
    finished: float | None = None
    tag: str | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def wait(self) -> str:
        """The image's tag once built; the build's failure (or skip) raised here, in the
        test that needs the image. Returns at once when the build is done."""
        assert self.thread is not None
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.tag is not None
        return self.tag

    def said(self) -> str:
        took = f"{self.finished - self.started:.0f} s" if self.finished else "not finished"
        verdict = "built" if self.tag else f"failed ({self.error!r})" if self.error else "running"
        return f"{self.toolchain}: {verdict}, {took} in the background (log {self.log})"


_prebuilds: dict[str, Prebuild] = {}
# One background build per Dockerfile at a time: the portable toolchains for CUDA 13.0 and 13.1
# share their longest stage (the sysroot's libraries), which the second then finds in the
# engine's build cache instead of compiling it beside the first.
_dockerfile_locks: collections.defaultdict[str, threading.Lock] = collections.defaultdict(
    threading.Lock)


def prebuild_toolchain_image(toolchain: str, logs: Path = PREBUILD_LOGS) -> Prebuild:
    """Start building matrix.toml's toolchain image `toolchain` in a daemon thread (once per
    session) as the docker builder would, logging to logs/; Prebuild.wait() then gives it.
    A session that ends first drops the thread, and the engine ends a build whose client went."""
    if toolchain in _prebuilds:
        return _prebuilds[toolchain]
    logs.mkdir(parents=True, exist_ok=True)
    prebuild = Prebuild(toolchain=toolchain, log=logs / f"prebuild-{toolchain}.log")
    prebuild.thread = threading.Thread(target=_prebuild, args=(prebuild,), daemon=True,
                                       name=f"prebuild-{toolchain}")
    _prebuilds[toolchain] = prebuild
    prebuild.thread.start()
    return prebuild


def prebuilds() -> list[Prebuild]:
    return list(_prebuilds.values())


def _prebuild(prebuild: Prebuild) -> None:
    try:
        import docker

        from ninfer_kits.log import Reporter
        from ninfer_kits.matrix import load_matrix
        from ninfer_kits.pipeline.images import ImageRecipe, ensure_image

        toolchain = load_matrix(ROOT / "matrix.toml").toolchain(prebuild.toolchain)
        assert toolchain.base_image == BASE_IMAGE, toolchain.base_image  # the one made here
        ensure_base_image(BASE_IMAGE)
        client = docker.from_env(environment=_docker_env(), timeout=3600)
        with _dockerfile_locks[str(toolchain.dockerfile_path)], \
                prebuild.log.open("a", encoding="utf-8") as log:
            image = ensure_image(client, ImageRecipe.toolchain_image(toolchain),
                                 Reporter(log, mode="plain"))
        prebuild.tag = image.tag
    except BaseException as error:
        prebuild.error = error
    finally:
        prebuild.finished = time.monotonic()


VERIFY_ROOTS = {
    # The runtime libraries a kit of each suite links (FFmpeg, libcurl, libstdc++): roots the
    # resolver is checked against, with the real loader as the oracle. bullseye's is made only
    # for test_floor_cmd's check of the Debian 11 facts (the `old_roots` fixture).
    "bullseye": "libstdc++6 libcurl4 libavformat58 libavcodec58 libavutil56 libswscale5",
    "bookworm": "libstdc++6 libcurl4 libavformat59 libavcodec59 libavutil57 libswscale6",
    "trixie": "libstdc++6 libcurl4t64 libavformat61 libavcodec61 libavutil59 libswscale8",
}


def export_root(suite: str, cache: Path) -> Path:
    """A debootstrapped Debian root of `suite` (minbase + VERIFY_ROOTS[suite]) as a folder.

    Made once with scripts/make-base-image.sh (image ninfer-kits/verify-SUITE:local), then
    exported into cache/<suite>-<image id>/ (image_root).
    """
    tag = ensure_base_image(f"ninfer-kits/verify-{suite}:local", suite, VERIFY_ROOTS[suite])
    return image_root(tag, cache, suite)


def bare_root(suite: str, cache: Path) -> Path:
    """A plain debootstrapped minbase root of `suite` (no FFmpeg, libcurl, libstdc++ or CUDA
    runtime), made once as ninfer-kits/debian-SUITE-minbase:local, as a folder."""
    tag = ensure_base_image(f"ninfer-kits/debian-{suite}-minbase:local", suite, include="")
    return image_root(tag, cache, f"{suite}-minbase")


def image_root(tag: str, cache: Path, name: str) -> Path:
    """The filesystem of image `tag` in cache/<name>-<image id>/, exported once from a created,
    never started, container."""
    image_id = _docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()
    folder = cache / f"{name}-{image_id.removeprefix('sha256:')[:12]}"
    if (folder / "etc" / "os-release").exists():
        return folder
    with process_lock(f"root-{folder}"):  # a background preparation may be exporting it
        return _export_root(tag, folder)


def _export_root(tag: str, folder: Path) -> Path:
    if (folder / "etc" / "os-release").exists():
        return folder
    # This process's own: another test process may be exporting the same image meanwhile.
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    container = _docker("create", tag, "/bin/true").stdout.strip()
    try:
        exported = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE,
                                    env=_docker_env())
        untar = subprocess.run(["tar", "-x", "-C", str(partial), "--exclude=dev/*"],
                               stdin=exported.stdout, capture_output=True, check=False)
        if exported.wait() != 0 or untar.returncode != 0:
            missing(f"an export of {tag} ({untar.stderr.decode(errors='replace')[-300:]})")
    finally:
        _docker("rm", "-f", container)
    try:
        partial.rename(folder)
    except OSError:  # the other process finished first: its copy is the same image's
        if not (folder / "etc" / "os-release").exists():
            raise
        shutil.rmtree(partial, ignore_errors=True)
    return folder


# ---------------------------------------------------------------- session fixtures (conftest)


@dataclass(frozen=True)
class Run:
    done: subprocess.CompletedProcess[str]
    dist: Path

    @property
    def out(self) -> Path:
        return self.dist / TAG

    def info(self) -> buildinfo.BuildInfo:
        return buildinfo.read(self.out / "BUILDINFO.txt")


@pytest.fixture(scope="session")
def engine() -> Any:
    """A Docker SDK client for the engine .ci/run started, with the local base images made."""
    try:
        import docker
    except ImportError:
        missing("the docker SDK (pip install docker)")
    ensure_engine()
    ensure_base_image(BASE_IMAGE)
    ensure_base_image(MINBASE_IMAGE, include="")
    return docker.from_env()


def build(place: Path, *args: str, project: Path = ROOT, env: dict[str, str] | None = None,
          ) -> Run:
    place.mkdir(parents=True, exist_ok=True)
    dist = place / "dist"
    command = [sys.executable, "-m", "ninfer_kits", "build", "--builder", "docker",
               "--matrix", str(project / "matrix.toml"), "--dist", str(dist),
               "--cache-dir", str(cache_sharing_environments(place / "cache")), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})
    return Run(done=done, dist=dist)


def cache_sharing_environments(cache: Path) -> Path:
    """A --cache-dir of its own whose environments/ (the toolchain images' exported files, one
    folder per image ID) is every test build's: exporting one takes ~15 s of each cold cache,
    and an image's files never change under its ID. The session's first build exports it."""
    shared = ROOT / ".cache" / "environments"
    shared.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    if not (cache / "environments").exists():
        (cache / "environments").symlink_to(shared, target_is_directory=True)
    return cache


@pytest.fixture(scope="session")
def cold_volumes(engine: Any) -> Iterator[tuple[str, str]]:
    """Two compiler cache volumes no earlier run has filled: both builds below start cold."""
    names = tuple(f"ninfer-kits-test-ccache-{uuid.uuid4().hex[:12]}" for _ in range(2))
    yield names  # type: ignore[misc]
    for name in names:  # and the build trees kept beside them (<name>-tree-<kit>-<image>)
        for volume in engine.volumes.list(filters={"name": name}):
            with contextlib.suppress(Exception):  # already gone: nothing to clean
                volume.remove(force=True)


@pytest.fixture(scope="session")
def docker_builds(engine: Any, example_repo: tuple[Path, str], cold_volumes: tuple[str, str],
                  tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Run]:
    """Two COLD builds: different folders, job counts and empty compiler caches of their own, so
    nothing of the first can be replayed into the second (a warm ccache would hide a compiler
    that is not deterministic). They run at once, as separate processes (the -j1 build alone
    would leave a core idle); a toolchain image both need is built once (the builder's lock)."""
    from concurrent.futures import ThreadPoolExecutor

    repo = str(example_repo[0])
    with ThreadPoolExecutor(2) as pool:
        started = (pool.submit(build, tmp_path_factory.mktemp("docker-a"), "example", "--source",
                               repo, "-j", "1", "--ccache-volume", cold_volumes[0]),
                   pool.submit(build, tmp_path_factory.mktemp("docker-b") / "x", "example",
                               "--source", repo, "--ccache-volume", cold_volumes[1]))
        first, second = (future.result() for future in started)
    for run in (first, second):
        assert run.done.returncode == 0, run.done.stderr[-4000:]
    return first, second


# ------------------------------------------------------------------ background preparations

ROOTS_CACHE = ROOT / ".cache" / "roots"
PYTHON_MINBASE = "ninfer-kits/python-minbase:local"  # test_fetch_pyz: python3 and nothing else


def _act_setup() -> object:
    from act_runner import runner_image, stand_in_actions, wheelhouse

    image = runner_image()
    stand_in_actions()
    return wheelhouse(image)


# What a test module may ask to have made from the session's start (`prepared(NAME, ...)`; the
# `roots` fixture asks for "verify-roots" by its name): Debian roots and images that are mostly
# downloads (debootstrap, pip, npm), which then overlap with the compiles of the tests before
# them instead of standing in line. The fixtures call the same functions, which find what the
# thread made, or wait for it (each holds a lock per thing it makes).
PREPARATIONS: dict[str, Any] = {
    "verify-roots": lambda: [export_root(suite, ROOTS_CACHE) for suite in ("bookworm", "trixie")],
    "verify-root:bullseye": lambda: export_root("bullseye", ROOTS_CACHE),
    **{f"minbase-root:{suite}": (lambda suite=suite: bare_root(suite, ROOTS_CACHE))
       for suite in ("bullseye", "bookworm", "trixie")},
    "python-minbase": lambda: ensure_base_image(PYTHON_MINBASE, "trixie", include="python3"),
    "act": _act_setup,
}
_prepared: dict[str, str] = {}  # name → what became of it, for the session's summary


def prepare_in_background(items: list[Any]) -> None:
    """Start one daemon thread making, in the order the collected tests first need them, the
    PREPARATIONS they name. A failure here is only reported: the fixture that needs the thing
    makes it again and fails (or skips) there, in its test."""
    wanted: list[str] = []
    for item in items:
        names = ["verify-roots"] if "roots" in item.fixturenames else []
        for marker in item.iter_markers("prepared"):
            names += list(marker.args)
        wanted += [name for name in names if name not in wanted]
    if wanted:
        threading.Thread(target=_prepare, args=(wanted,), daemon=True,
                         name="prepare-in-background").start()


def _prepare(names: list[str]) -> None:
    for name in names:
        started = time.monotonic()
        try:
            PREPARATIONS[name]()
            _prepared[name] = f"made in {time.monotonic() - started:.0f} s"
        except BaseException as error:  # skips and failures too: the fixture says them
            _prepared[name] = f"failed ({first_line_of(error)})"


def first_line_of(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def preparations() -> dict[str, str]:
    return dict(_prepared)
