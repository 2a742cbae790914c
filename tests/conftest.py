"""Shared fixtures: real binaries compiled once per test run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from docker_fixtures import (
    cold_volumes,
    docker_builds,
    engine,
    once_per_run,
    prebuild_toolchain_image,
    prebuilds,
    preparations,
    prepare_in_background,
)
from tools import DATA, ROOT, git, missing, nvcc, run, tool

# The docker builder's session fixtures (one engine client, two cold builds of the example kit)
# live with the rest of the Docker set-up; named here so that every test file can use them.
__all__ = ["cold_volumes", "docker_builds", "engine"]

# A suite started in the background of a script (`cmd &`, where job control is off) inherits
# SIGINT ignored, and an ignored signal stays ignored across exec: the builds that the tests stop
# with Ctrl-C's signal would never see it. Take it back as a terminal has it (a signal with a
# handler is reset to its default at exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the toolchain images that collected tests name (prebuilt_toolchain), and
    making the roots and images they name (prepared, or the roots fixture), in the background
    now, so that they are ready, or nearly, when those tests come."""
    if session.config.option.collectonly:
        return
    wanted = {marker.args[0] for item in session.items
              for marker in item.iter_markers("prebuilt_toolchain")}
    for toolchain in sorted(wanted):
        prebuild_toolchain_image(toolchain)
    prepare_in_background(session.items)


# Modules whose tests must run in one process (noxfile.SPREAD): they share a session fixture
# that cannot pass between processes (docker_builds' cold volumes, which test_docker then copies
# to a second engine). Every other module is handed out on its own.
SAME_PROCESS = {"test_portable.py": "tests/test_docker.py"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` with SAME_PROCESS's modules one unit. (pytest-xdist's own grouping,
    `loadgroup`, rewrites node ids, which pytest 9 no longer lets a plugin do.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SAME_PROCESS.get(Path(module).name, module)

    return ModulesTogether(config, log)


# The longest modules, longest first (docs/ci.md: the slowest tests): started last, one of them
# would run on alone at the end while the other processes have nothing left to do. One act module
# only: each waits for the "act" preparation (~12 minutes cold), and two started at once left a
# process of two idle that long (issue 40's cold run); test_toolchains_act comes later, when the
# preparation is made.
LONGEST_FIRST = ("test_rebuild_act.py", "test_docker.py", "test_repro.py")


def _handed_out(item: pytest.Item) -> tuple[bool, int]:
    name = item.path.name
    return (item.get_closest_marker("slow") is None,
            LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow modules first, LONGEST_FIRST's leading, the rest in the order collected: handed
    out to the processes in this order (`--no-loadscope-reorder`), the long end-to-end modules
    start at once and the quick ones fill in the end."""
    items.sort(key=_handed_out)  # stable: a module's tests stay in their order


# When each test ran, by process (.cache/logs/timeline-<python>-<process>.tsv under the run's root
# folder: start, end, test; epoch seconds): where a CI run's time went, which --durations alone
# cannot tell (DEVELOPING.md). Written where tests run: the xdist controller only relays.
_timeline: dict[str, float] = {}
_timeline_file: list[Path] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.pluginmanager.hasplugin("dsession"):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"  # CI runs two Pythons at once
    path = session.config.rootpath / ".cache" / "logs" / f"timeline-{python}-{worker}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")  # this run's alone
    _timeline_file.append(path)


def pytest_runtest_logstart(nodeid: str) -> None:
    _timeline[nodeid] = time.time()


def pytest_runtest_logfinish(nodeid: str) -> None:
    for path in _timeline_file:
        with path.open("a", encoding="utf-8") as timeline:
            timeline.write(f"{_timeline.pop(nodeid, 0.0):.1f}\t{time.time():.1f}\t{nodeid}\n")


def _background_lines() -> list[str]:
    return ([f"background image build: {prebuild.said()}" for prebuild in prebuilds()]
            + [f"background preparation: {name} {said}"
               for name, said in preparations().items()])


_WORKERS_BACKGROUND: list[str] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands its background lines to the process that reports."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["background"] = _background_lines()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    _WORKERS_BACKGROUND.extend(getattr(node, "workeroutput", {}).get("background", []))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _background_lines() + _WORKERS_BACKGROUND:
        terminalreporter.write_line(line)


CUDA_ARCHS = [
    "-gencode", "arch=compute_86,code=sm_86",
    "-gencode", "arch=compute_120a,code=sm_120a",
    "-gencode", "arch=compute_100f,code=sm_100f",
    "-gencode", "arch=compute_90,code=compute_90",
]


@pytest.fixture(scope="session")
def c_binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """C and C++ programs with known needs: symbol versions, RUNPATH/$ORIGIN, RPATH."""
    out = tmp_path_factory.mktemp("c-binaries")
    cc, cxx = tool("gcc"), tool("g++")
    (out / "lib").mkdir()
    (out / "bin").mkdir()
    lib = out / "lib" / "libkitdemo.so.1"
    run(cc, "-shared", "-fPIC", "-o", lib, DATA / "kitlib.c", "-Wl,-soname,libkitdemo.so.1",
        f"-Wl,--version-script={DATA / 'kitlib.map'}")
    (out / "lib" / "libkitdemo.so").symlink_to("libkitdemo.so.1")
    link = ["-L", out / "lib", "-lkitdemo"]
    built = {
        "glibc234": out / "bin" / "glibc234",
        "recent_cxx": out / "bin" / "recent_cxx",
        "runpath": out / "bin" / "runpath",
        "rpath": out / "bin" / "rpath",
        "empty_runpath": out / "bin" / "empty_runpath",
        "kitlib": lib,
    }
    run(cc, "-O1", "-fno-builtin", "-o", built["glibc234"], DATA / "glibc234.c")
    run(cxx, "-O1", "-std=c++17", "-o", built["recent_cxx"], DATA / "recent_cxx.cpp")
    run(cc, "-o", built["runpath"], DATA / "kitapp.c", *link,
        "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib:/opt/kitdemo/lib")
    run(cc, "-o", built["empty_runpath"], DATA / "kitapp.c", *link,  # as CMake's build tree pads
        "-Wl,--enable-new-dtags", "-Wl,-rpath,/opt/kitdemo/lib:")
    run(cc, "-o", built["rpath"], DATA / "kitapp.c", *link,
        "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib")
    return built


@pytest.fixture(scope="session")
def cuda_binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """CUDA programs with sm_86, sm_120a and sm_100f SASS and compute_90 PTX, in every form the
    inspector must read: uncompressed, compressed, nvcc's default, relocatable (-rdc)."""
    compiler = nvcc()

    def make(out: Path) -> dict[str, str]:
        out.mkdir()
        source = DATA / "kernels.cu"
        built = {name: out / name for name in
                 ("plain", "compressed", "default", "rdc.o", "rdc", "shared_cudart")}
        run(compiler, "-o", built["plain"], source, *CUDA_ARCHS, "--compress-mode=none")
        run(compiler, "-o", built["compressed"], source, *CUDA_ARCHS, "--compress-mode=size")
        run(compiler, "-o", built["default"], source, *CUDA_ARCHS)
        run(compiler, "-rdc=true", "-c", "-o", built["rdc.o"], source, *CUDA_ARCHS)
        run(compiler, "-rdc=true", "-o", built["rdc"], built["rdc.o"], *CUDA_ARCHS)
        run(compiler, "-o", built["shared_cudart"], source, "-cudart", "shared",
            "-gencode", "arch=compute_86,code=sm_86", "-Xlinker", "-rpath=/usr/local/cuda/lib64")
        return {name: str(path) for name, path in built.items()}

    return {name: Path(path)
            for name, path in once_per_run(tmp_path_factory, "cuda-binaries", make).items()}


SYSTEM_LIBRARIES = [
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libcurl.so.4",
    "/bin/ls",
    "/usr/bin/python3",
    "/usr/local/cuda/lib64/libcudart.so.13",
]


def system_libraries() -> list[Any]:
    """Every file of SYSTEM_LIBRARIES as a test parameter, present or not: one that is absent
    skips its test, naming the file (fails it under CI, which installs them all), instead of
    silently dropping out of the list (see _system_library_is_there)."""
    return [pytest.param(Path(p), marks=pytest.mark.system_library) for p in SYSTEM_LIBRARIES]


@pytest.fixture(autouse=True)
def _system_library_is_there(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("system_library") is None:
        return
    path = next(value for value in request.node.callspec.params.values()
                if isinstance(value, Path))
    if not path.exists():
        missing(f"{path} (a system file the inspector is compared with readelf on)")


@pytest.fixture(scope="session")
def example_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """examples/engine copied into a fresh git repository with one reproducible commit: one
    repository for the whole run (once_per_run), because its path is the kit's upstream_url
    and kits built by different test processes (example_build's and a test's) are compared
    byte for byte."""
    return _repository_of(tmp_path_factory, ROOT / "examples" / "engine", "ninfer-example")


@pytest.fixture(scope="session")
def tiny_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """tests/data/tiny-engine in a git repository (one reproducible commit): an upstream with
    the example's build interface that compiles in seconds, for the tests whose claim is about
    what happens around a compile."""
    return _repository_of(tmp_path_factory, DATA / "tiny-engine", "ninfer-tiny")


def _repository_of(factory: pytest.TempPathFactory, source: Path, name: str) -> tuple[Path, str]:
    """`source` copied into a git repository of that name with one commit, once per run."""
    def make(folder: Path) -> list[str]:
        repo = folder / name
        shutil.copytree(source, repo, ignore=shutil.ignore_patterns("build", "build-*"))
        git("init", "-q", "-b", "main", cwd=repo)
        git("add", "-A", cwd=repo)
        git("commit", "-q", "-m", name, cwd=repo)
        return [str(repo), git("rev-parse", "HEAD", cwd=repo)]

    repo, head = once_per_run(factory, f"{name}-repo", make)
    return Path(repo), head

# Debian roots for verify's tests: session fixtures `roots`, `old_roots` and `proc_mounted`
# (tests/roots.py).
from roots import old_roots, proc_mounted, roots  # noqa: E402, F401


def local_example_build(place: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`ninfer-kits build example ARGS` with the local builder, run in place's parent, with
    place/dist and place/cache (empty: a cold build) of its own."""
    place.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "build", "example",
                           "--matrix", str(ROOT / "matrix.toml"), "--dist", str(place / "dist"),
                           "--cache-dir", str(place / "cache"), *args],
                          capture_output=True, text=True, check=False, cwd=place.parent)


@pytest.fixture(scope="session")
def local_example_builds(example_repo: tuple[Path, str], request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory
                         ) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    """The example kit built with the local builder from example_repo, each build from empty
    caches in a folder of its own: (the build's process, its place, holding dist/ and cache/).
    "-j2": at -j2, two folders deep, through a cold compiler cache (example_build; its
    cache/ccache is then warm_ccache). "-j1": at -j1 and --no-ccache, only when a test of the
    run compares the two (test_build's two_builds); then both run at once, as separate
    processes (the -j1 build alone would leave a core idle). Made once per run, whichever of
    its processes asks first (once_per_run)."""
    from tools import needs_libcurl_headers

    tool("ninja")
    needs_libcurl_headers()
    repo = str(example_repo[0])
    compare = any("two_builds" in getattr(item, "fixturenames", ())
                  for item in request.session.items)

    def make(folder: Path) -> dict[str, Any]:
        places = {"-j2": folder / "example-build" / "deeper" / "b"}
        if compare:
            places["-j1"] = folder / "first" / "a"
        with ThreadPoolExecutor(len(places)) as pool:
            started = {jobs: pool.submit(local_example_build, place, "--source", repo,
                                         "--jobs", jobs[2:],
                                         *(("--no-ccache",) if jobs == "-j1" else ()))
                       for jobs, place in places.items()}
            done = {jobs: future.result() for jobs, future in started.items()}
        return {jobs: {"args": run.args, "returncode": run.returncode, "stdout": run.stdout,
                       "stderr": run.stderr, "place": str(places[jobs])}
                for jobs, run in done.items()}

    made = once_per_run(tmp_path_factory, "local-example-builds", make)
    return {jobs: (subprocess.CompletedProcess(done["args"], done["returncode"], done["stdout"],
                                               done["stderr"]), Path(done["place"]))
            for jobs, done in made.items()}


@pytest.fixture(scope="session")
def example_build(local_example_builds: dict[str, tuple[subprocess.CompletedProcess[str], Path]]
                  ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The example kit, built once per test session with the local builder from example_repo
    at -j2, two folders deep: (the build's process, its place, holding dist/ and cache/).
    test_build compares it with a -j1 build in another folder; the others read its dist/."""
    return local_example_builds["-j2"]


@pytest.fixture(scope="session")
def warm_ccache(example_build: tuple[subprocess.CompletedProcess[str], Path]) -> Path:
    """The compiler cache example_build filled, cold, for the local builds whose claim is not
    about coldness (`--ccache-dir` it: every compile of the example is then a hit, and the kit
    is the same bytes, which test_build proves)."""
    done, place = example_build
    assert done.returncode == 0, done.stderr[-3000:]
    return place / "cache" / "ccache"


@pytest.fixture(scope="session")
def example_dist(example_build: tuple[subprocess.CompletedProcess[str], Path]) -> Path:
    """The example kit of example_build: dist/<tag>/."""
    done, place = example_build
    assert done.returncode == 0, done.stderr[-3000:]
    return next((place / "dist").iterdir())


@pytest.fixture(scope="session")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ELF executable, the kit's bin/ninfer in the publish and kit folder tests."""
    from test_publish_support import compile_program

    return compile_program(tmp_path_factory.mktemp("program"))


@pytest.fixture
def kit(tmp_path: Path, program: Path) -> Any:
    """A finished kit folder (kitdir.KitDir) as the build makes one, in dist/ of this test."""
    from test_publish_support import make_kit

    return make_kit(tmp_path / "dist", program)


@pytest.fixture
def server() -> Iterator[Any]:
    """test_fetch's RangeServer (HTTP with ranges, a GitHub API's release listing), running."""
    from test_fetch import RangeServer

    with RangeServer() as running:
        running.thread.start()
        yield running
        running.shutdown()
