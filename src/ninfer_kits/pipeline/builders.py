"""Builders, where build/recipe.py runs: the registry (BUILDERS, each imported only when chosen)
and the local builder. Every builder runs the very same recipe, on this host or in a container."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from ninfer_kits.config import resources, settings
from ninfer_kits.config.tables import did_you_mean
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.host import children
from ninfer_kits.host.children import probe
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import CudaVersion, Kit
from ninfer_kits.pipeline.hostdeps import ensure_build_dependencies, search_path
from ninfer_kits.pipeline.recipe_report import RecipeReport, read_recipe_report
from ninfer_kits.pipeline.source import EXPORT_MTIME

# Part of the tool, never taken from beside the matrix (config.resources); absolute.
RECIPE: Final = resources.recipe_path()
LOG_TAIL = 30
NINJA_STATUS = re.compile(r"^\[(\d+)/(\d+)\]")
# Hashed into every ccache entry: ccache does not hash the mtime nvcc -lineinfo records, so
# entries compiled from files of another time must never be hit.
CCACHE_NAMESPACE: Final = f"ninfer-kits-export-mtime-{EXPORT_MTIME}"
DEFAULT_CCACHE_MAX_SIZE: Final = "2G"
CCACHE_SIZE: Final = re.compile(r"[0-9]+(\.[0-9]+)?[KMGT]i?B?")  # max_size, as ccache reads it


@dataclass(frozen=True, kw_only=True)
class PreparedToolchain:
    """What a builder has in hand to compile with, found (or made) before the compile starts."""

    builder: str
    nvcc: str
    cuda_version: str
    base_image: str = ""  # docker builder: the base the toolchain image was built from
    base_image_digest: str = ""  # and its ID on the engine when it was built (image label)
    image: str = ""  # the toolchain image's tag, or NAME@sha256:… when pinned (docker builder)
    image_id: str = ""
    pin: str = ""  # the matrix's pin it was pulled by (NAME:TAG@sha256:…), "" when built here


@dataclass(frozen=True, kw_only=True)
class CompileRequest:
    kit: Kit
    source: Path
    workspace: Path
    jobs: int
    source_date_epoch: int
    log: Path
    recipe: Path
    cache_dir: Path  # --cache-dir: where a builder keeps what outlives one build


@dataclass(frozen=True, kw_only=True)
class Compiled:
    """The compile's products and the recipe's report (recipe.json, checked)."""

    bin_dir: Path
    report: RecipeReport
    log: Path
    run_entries: tuple[tuple[str, str], ...] = ()  # the builder's own `run.` keys of BUILDINFO


@dataclass(frozen=True, kw_only=True)
class BuilderOptions:
    ccache: bool = True  # False: --no-ccache, a cold compile with no compiler cache at all
    ccache_volume: str | None = None  # docker builder only
    ccache_dir: Path | None = None  # the compiler cache's host folder (docker: loaded, saved)
    ccache_max_size: str = DEFAULT_CCACHE_MAX_SIZE  # ccache's max_size
    fresh_tree: bool = False  # docker builder: not the kit's kept build tree, a new one

    def __post_init__(self) -> None:
        if not self.ccache and (self.ccache_dir is not None or self.ccache_volume is not None):
            given = "--ccache-dir" if self.ccache_dir is not None else "--ccache-volume"
            raise BadInput(f"--no-ccache and {given} contradict each other: give one of them")
        if self.ccache_dir is not None and self.ccache_volume is not None:
            raise BadInput("--ccache-dir and --ccache-volume both say where the compiler cache "
                           "lives: give one of them")
        if self.ccache_dir is not None and self.ccache_dir.exists() \
                and not self.ccache_dir.is_dir():
            raise BadInput(f"--ccache-dir {self.ccache_dir} is not a folder")
        if not CCACHE_SIZE.fullmatch(self.ccache_max_size):
            raise BadInput(f"--ccache-max-size {self.ccache_max_size!r} is no size ccache "
                           f"reads: a number with K, M, G or T (Ki, Mi, Gi, Ti), such as 2G")


class Builder(Protocol):
    name: str

    def preflight(self, kit: Kit, reporter: Reporter) -> PreparedToolchain: ...

    def compile(self, request: CompileRequest, reporter: Reporter) -> Compiled: ...

    def build_environment(self, kit: Kit, reporter: Reporter,
                          cache_dir: Path | None = None) -> AbstractContextManager[Path]:
        """The root the kit was compiled in ("/" for this host), where the portable repair finds
        what the binaries linked and its packages (`cache_dir`: where a builder may keep it)."""
        ...

    def smoke_test(self, kit: Kit, kit_roots: Sequence[Path], interpreter: str, log: Path,
                   reporter: Reporter) -> tuple[str, ...]:
        """A verdict per kit/ folder that every library and symbol version resolves in the runtime
        image (also appended to `log`; "skipped (why)" without one); else CheckFailed naming all."""
        ...


def recipe_arguments(request: CompileRequest, source: Path, build: Path, out: Path) -> list[str]:
    upstream = request.kit.upstream
    args = ["--source", str(source), "--build-dir", str(build), "--out", str(out),
            "--arch", request.kit.cmake_arch, "--jobs", str(request.jobs)]
    for key, value in upstream.cmake_options:
        args += ["--cmake-option", f"{key}={value}"]
    for name, path in upstream.targets:
        args += ["--target", f"{name}={path}"]
    return args


def required_cuda(kit: Kit) -> CudaVersion:
    """The newer of what the upstream needs and what the kit's toolchain pins (major.minor)."""
    pinned = CudaVersion.parse(".".join(kit.toolchain.cuda.text.split(".")[:2]))
    return max(kit.upstream.min_cuda, pinned, key=lambda version: version.parts)


class LocalBuilder:
    """The recipe on this host with its own CUDA toolkit, through ccache unless `ccache` is off."""

    name = "local"

    def __init__(self, nvcc: str | None = None, *, ccache: bool = True,
                 ccache_dir: Path | None = None,
                 ccache_max_size: str = DEFAULT_CCACHE_MAX_SIZE) -> None:
        self.nvcc = nvcc or settings.read(settings.NVCC) or settings.read(settings.CUDACXX) or ""
        self.ccache = ccache
        self.ccache_dir = ccache_dir.absolute() if ccache_dir is not None else None
        self.ccache_max_size = ccache_max_size

    @classmethod
    def from_options(cls, options: BuilderOptions) -> LocalBuilder:
        if options.ccache_volume is not None:
            raise BadInput("--ccache-volume is for the docker builder (--builder docker); the "
                           "local builder's cache is a folder: --ccache-dir DIR")
        return cls(ccache=options.ccache, ccache_dir=options.ccache_dir,
                   ccache_max_size=options.ccache_max_size)

    def preflight(self, kit: Kit, reporter: Reporter) -> PreparedToolchain:
        if self.nvcc:  # a compiler the user named: a wrong one is their input (exit 2)
            self._find_nvcc()
        ensure_build_dependencies(reporter, nvcc=self.nvcc,  # all of them, before fetching
                                  purposes=("build", "ccache") if self.ccache else ("build",))
        nvcc = self._find_nvcc()
        version = _nvcc_version(nvcc)
        needed = required_cuda(kit)
        if not version.at_least(needed):
            raise EnvironmentFailure(
                f"kit {kit.id} needs CUDA ≥ {needed} (upstream {kit.upstream.repository} and "
                f"toolchain {kit.toolchain.id}), but the local builder has CUDA {version} "
                f"({nvcc}); install CUDA {needed} or newer and set NVCC, or build it in its "
                f"toolchain image: ninfer-kits build {kit.id} --builder docker"
            )
        return PreparedToolchain(builder=self.name, nvcc=nvcc, cuda_version=version.text)

    def compile(self, request: CompileRequest, reporter: Reporter) -> Compiled:
        out = request.workspace / "out"
        command = [sys.executable, str(request.recipe),
                   *recipe_arguments(request, request.source, request.workspace / "cmake", out),
                   "--nvcc", self._find_nvcc()]
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(request.source_date_epoch),
                   PATH=search_path())
        said = "none (--no-ccache)"
        if self.ccache:
            folder = self.ccache_dir or request.cache_dir / "ccache"
            command.append("--ccache")
            env = self._ccache_environment(env, folder, request.workspace)
            said = str(folder)
        run_logged(command, env=env, log=request.log, reporter=reporter,
                   label=f"compiling {request.kit.id}")
        return Compiled(bin_dir=out / "kit" / "bin", report=read_recipe_report(out),
                        log=request.log, run_entries=(("ccache", said),))

    def _ccache_environment(self, env: dict[str, str], folder: Path,
                            workspace: Path) -> dict[str, str]:
        """ccache's settings for this build alone: the user's own CCACHE_* would make hits depend on
        the shell it ran in."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise EnvironmentFailure(f"cannot make the compiler cache folder {folder}: "
                                     f"{error.strerror or error}; give another with "
                                     f"--ccache-dir, or build without one: --no-ccache") from None
        env = {key: value for key, value in env.items() if not key.startswith("CCACHE_")}
        return env | {"CCACHE_DIR": str(folder), "CCACHE_BASEDIR": str(workspace),
                      "CCACHE_NOHASHDIR": "1", "CCACHE_NAMESPACE": CCACHE_NAMESPACE,
                      "CCACHE_MAXSIZE": self.ccache_max_size}

    def build_environment(self, kit: Kit, reporter: Reporter,
                          cache_dir: Path | None = None) -> AbstractContextManager[Path]:
        return nullcontext(Path("/"))

    def smoke_test(self, kit: Kit, kit_roots: Sequence[Path], interpreter: str, log: Path,
                   reporter: Reporter) -> tuple[str, ...]:
        verdict = "skipped (the local builder has no runtime image; use --builder docker)"
        with log.open("a", encoding="utf-8") as sink:
            sink.write(f"\n== smoke test {verdict}\n")
        return tuple(verdict for _ in kit_roots)

    def _find_nvcc(self) -> str:
        if self.nvcc:  # named by the user: use it or say why not, never fall back silently
            if not os.access(self.nvcc, os.X_OK):
                raise BadInput(f"nvcc {self.nvcc} (from NVCC/CUDACXX) is not an executable "
                               f"file; install the CUDA toolkit or point NVCC at its nvcc")
            return self.nvcc
        for candidate in ("/usr/local/cuda/bin/nvcc", shutil.which("nvcc") or ""):
            if candidate and os.access(candidate, os.X_OK):
                return candidate
        raise EnvironmentFailure("nvcc not found: the local builder needs the CUDA toolkit "
                                 "(install it at /usr/local/cuda or set NVCC=/path/to/nvcc)")


def _nvcc_version(nvcc: str) -> CudaVersion:
    output = probe([nvcc, "--version"]).stdout
    match = re.search(r"release \S+ V(\d+\.\d+(?:\.\d+)?)", output)
    if match is None:
        raise EnvironmentFailure(f"{nvcc} --version did not report a CUDA version")
    return CudaVersion.parse(match.group(1))


def run_logged(command: list[str], *, env: dict[str, str], log: Path, reporter: Reporter,
               label: str) -> None:
    """Run `command` with its output in `log`, Ninja's [n/m] as progress, the log's tail in the
    error; in a session of its own that ends with this call, interrupted too (children)."""
    progress = reporter.progress(label)
    tail: deque[str] = deque(maxlen=LOG_TAIL)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as sink:

        def take(line: str) -> None:
            sink.write(line)
            tail.append(line.rstrip("\n"))
            status = NINJA_STATUS.match(line)
            if status:
                progress.update(int(status.group(1)), int(status.group(2)))

        process: subprocess.Popen[bytes] | None = None
        output: children.OutputLines | None = None
        try:
            with children.deferred_signals():  # an interrupt while it starts comes after this
                process = children.start(command, env=env)  # block, the process known
                assert process.stdout is not None
                output = children.OutputLines(process.stdout, take)
            output.follow()
            code = process.wait()
        finally:  # also interrupted: no process of the build outlives it, and nothing writes
            if process is not None:  # into the work folder once it is let go; what they
                with children.deferred_signals():  # wrote is in the log
                    children.end_session(process)
                    if output is not None:
                        output.drain()
                    if process.stdout is not None:
                        process.stdout.close()
    if code != 0:
        raise CompileFailed(label, code, tuple(tail), log)
    progress.update(detail="done")


class CompileFailed(CheckFailed):
    def __init__(self, label: str, code: int, tail: tuple[str, ...], log: Path) -> None:
        shown = "\n".join(f"  | {line}" for line in tail)
        super().__init__(f"{label} failed (exit status {code}); the last {len(tail)} lines of "
                         f"the log:\n{shown}\nfull log: {log}")
        self.log = log


@dataclass(frozen=True)
class BuilderEntry:
    """A builder by name; its module is imported only when chosen (the local builder never pays
    for the docker SDK)."""

    name: str
    summary: str
    module: str
    factory: str  # a class (or function) in `module` with from_options(BuilderOptions)

    def create(self, options: BuilderOptions) -> Builder:
        made: Callable[[BuilderOptions], Builder] = getattr(
            importlib.import_module(self.module), self.factory).from_options
        return made(options)


BUILDERS: Final[dict[str, BuilderEntry]] = {entry.name: entry for entry in (
    BuilderEntry("local", "this host, with its own CUDA toolkit, CMake and compilers",
                 "ninfer_kits.pipeline.builders", "LocalBuilder"),
    BuilderEntry("docker", "the kit's toolchain image, on the Docker engine DOCKER_HOST names",
                 "ninfer_kits.pipeline.docker_builder", "DockerBuilder"),
)}


def make_builder(name: str, options: BuilderOptions) -> Builder:
    entry = BUILDERS.get(name)
    if entry is None:
        raise BadInput(f"unknown builder '{name}' (builders: {', '.join(BUILDERS)})"
                       + did_you_mean(name, list(BUILDERS)))
    return entry.create(options)
