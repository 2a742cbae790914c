"""The docker builder: run build/recipe.py inside the kit's pinned toolchain image.

Any engine the docker SDK reaches works: the local one, or a remote build box through DOCKER_HOST
(`tcp://…`, `ssh://user@host` with `pip install "docker[ssh]"`). Images are built with the
classic builder (the SDK has no BuildKit), so the compiler cache lives in a named volume per
toolchain, mounted into the build container. Every container this module starts carries the
engine's labels (ninfer_kits.engine: its role, and the run) and is removed in `finally`
(NINFER_KITS_KEEP_CONTAINER=1 keeps it for debugging).

Provenance: an image's tag hashes its Dockerfile, its build arguments and the *ID* of its base
image as the engine has it, so a base that moves (a new `docker pull` of the same name) makes
another image; the ID it was built from is a label on the image, read back for BUILDINFO's
`base_image_digest`. The compile runs with no network: the source is fetched before.
Engine failures (no engine, an API error, a broken connection) are EnvironmentFailure.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shlex
import shutil
import tarfile
import tempfile
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ninfer_kits import children, locks
from ninfer_kits.children import deferred_signals
from ninfer_kits.engine import (
    LABEL,
    RUN_LABEL,
    connect,
    container_labels,
    engine_address,
    engine_guard,
    exported_image,
    first_line,
)
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Kit, Toolchain
from ninfer_kits.pipeline.builders import (
    CCACHE_NAMESPACE,
    DEFAULT_CCACHE_MAX_SIZE,
    LOG_TAIL,
    NINJA_STATUS,
    BuilderOptions,
    Compiled,
    CompileFailed,
    CompileRequest,
    PreparedToolchain,
    recipe_arguments,
)
from ninfer_kits.pipeline.recipe_report import read_recipe_report
from ninfer_kits.pipeline.smoke import read_trace, trace_script
from ninfer_kits.tarsafe import extract_all

BASE_LABEL = "org.ninfer-kits.base-image"  # the base image's name, as the matrix gives it
BASE_ID_LABEL = "org.ninfer-kits.base-image-id"  # its ID on the engine when this image was built
SECTION = "=== kit "  # the smoke test's output: where each flavour's kit/ trace begins
COMPILE_NETWORK = "none"  # the compile needs nothing from the network: the source is fetched
IMAGE_PREFIX = "ninfer-kits"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
WORK = "/work"  # fixed paths inside the container keep builds reproducible across hosts
SOURCE, CMAKE, OUT = f"{WORK}/source", f"{WORK}/cmake", f"{WORK}/out"  # as the local builder's
INCOMING = "/tmp/ninfer-kits-source"  # the exported source; the recipe syncs it into SOURCE
RECIPE_AT = "/tmp/ninfer-kits-recipe.py"  # beside it: both arrive in one put_archive
KIT_LABEL = "org.ninfer-kits.kit"  # on a kept build tree's volume: whose tree it is
IMAGE_ID_LABEL = "org.ninfer-kits.image-id"  # and the toolchain image it was built in
KEEP_ENV = "NINFER_KITS_KEEP_CONTAINER"
WHEELS_ARG = "CUDA_WHEELS"  # the build argument of the images that get CUDA from PyPI wheels
IMAGE_WAIT = 4 * 3600.0  # seconds to wait for another process building the same image
CCACHE_AT = "/ccache"  # where the compiler cache's volume is mounted in the build container
CCACHE_ROLE = "ccache"  # the role of the containers that load, trim and save a --ccache-dir
CONTEXT = "context"  # dockerfiles/context/: the files a Dockerfile COPYs, one folder per use
DOCKER_STEP = re.compile(r"Step (?P<done>[0-9]+)/(?P<total>[0-9]+) : (?P<what>.*)")
COPY_LINE = re.compile(r"^\s*(?:COPY|ADD)\s(.*)$", re.IGNORECASE | re.MULTILINE)
CONTEXT_FOLDER = re.compile(r"(?<!\S)(context/[\w.-]+)/")  # a source's context/<folder>/


@dataclass(frozen=True, kw_only=True)
class ImageRecipe:
    """An image we build ourselves: its Dockerfile and build arguments decide its tag."""

    role: str  # "toolchain" or "runtime"
    toolchain: str
    dockerfile: Path
    base_image: str
    build_args: tuple[tuple[str, str], ...] = ()  # besides BASE_IMAGE, which base_image gives

    @classmethod
    def toolchain_image(cls, toolchain: Toolchain) -> ImageRecipe:
        """The image the docker builder compiles in, as the matrix's toolchain describes it."""
        return cls(role="toolchain", toolchain=toolchain.id, dockerfile=toolchain.dockerfile_path,
                   base_image=toolchain.base_image, build_args=toolchain.build_args)

    @classmethod
    def runtime_image(cls, toolchain: Toolchain) -> ImageRecipe:
        """The image the smoke test runs a finished kit in (runtime_packages included)."""
        return cls(role="runtime", toolchain=toolchain.id,
                   dockerfile=toolchain.runtime_dockerfile_path,
                   base_image=toolchain.runtime_base_image,
                   build_args=toolchain.runtime_image_build_args)

    def all_build_args(self) -> dict[str, str]:
        """Every build argument the image is built with, BASE_IMAGE included."""
        return {**dict(self.build_args), "BASE_IMAGE": self.base_image}

    def tag(self, base_id: str) -> str:
        """The image's tag for a base whose ID on the engine is `base_id` (`sha256:…`)."""
        if not self.dockerfile.is_file():
            raise BadInput(f"toolchain {self.toolchain}: {self.role} Dockerfile {self.dockerfile} "
                           f"not found")
        digest = hashlib.sha256(self.dockerfile.read_bytes())
        for name, path in context_files(self.dockerfile):  # what it COPYs is the recipe too
            digest.update(f"\0{name}\0".encode() + path.read_bytes())
        # Every argument, sorted: a changed one is another image; and the base's ID, so that a
        # base pulled anew under the same name is another image too.
        for name, value in sorted(self.all_build_args().items()):
            digest.update(f"\0{name}={value}".encode())
        digest.update(f"\0{BASE_ID_LABEL}={base_id}".encode())
        return f"{IMAGE_PREFIX}/{self.role}-{self.toolchain}:{digest.hexdigest()[:16]}"


def network_mode(client: Any) -> str:
    """NINFER_KITS_DOCKER_NETWORK, else `host` on an engine without a bridge network (as here),
    else the engine's default."""
    chosen = os.environ.get("NINFER_KITS_DOCKER_NETWORK")
    if chosen:
        return chosen
    return "default" if client.networks.list(names=["bridge"]) else "host"


class DockerBuilder:
    name = "docker"

    def __init__(self, client: Any | None = None, ccache_volume: str | None = None,
                 fresh_tree: bool = False, ccache_dir: Path | None = None,
                 ccache_max_size: str = DEFAULT_CCACHE_MAX_SIZE) -> None:
        # (the checks of the command line's options, for callers that construct one directly)
        BuilderOptions(ccache_volume=ccache_volume, ccache_dir=ccache_dir,
                       ccache_max_size=ccache_max_size)
        self._client = client
        self._ccache_volume = ccache_volume
        self._ccache_dir = ccache_dir.absolute() if ccache_dir is not None else None
        self._ccache_max_size = ccache_max_size
        self._fresh_tree = fresh_tree
        self._toolchains: dict[str, PreparedToolchain] = {}

    @classmethod
    def from_options(cls, options: BuilderOptions) -> DockerBuilder:
        volume = options.ccache_volume if options.ccache else "none"
        return cls(ccache_volume=volume, fresh_tree=options.fresh_tree,
                   ccache_dir=options.ccache_dir, ccache_max_size=options.ccache_max_size)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = connect()
        return self._client

    @engine_guard()
    def preflight(self, kit: Kit, reporter: Reporter) -> PreparedToolchain:
        """The toolchain image, built once per Dockerfile, arguments and base image ID (then
        reused by its tag); the base it was built from comes from the image's labels. The smoke
        test's runtime base must be there too: one missing fails now, not after the compile."""
        if kit.toolchain.id in self._toolchains:
            return self._toolchains[kit.toolchain.id]
        toolchain = kit.toolchain
        recipe = ImageRecipe.toolchain_image(toolchain)
        _require_base(self.client, recipe)
        _require_base(self.client, ImageRecipe.runtime_image(toolchain))
        image = ensure_image(self.client, recipe, reporter)
        found = PreparedToolchain(
            builder=self.name, nvcc=f"nvcc in {image.tag}", cuda_version=toolchain.cuda.text,
            base_image=image.labels.get(BASE_LABEL) or toolchain.base_image,
            base_image_digest=image.labels.get(BASE_ID_LABEL)
            or f"unknown ({image.tag} has no {BASE_ID_LABEL} label)",
            image=image.tag, image_id=image.id)
        self._toolchains[toolchain.id] = found
        return found

    @engine_guard()
    def compile(self, request: CompileRequest, reporter: Reporter) -> Compiled:
        """The recipe in a new container of the toolchain image, without network. With a
        compiler cache, the kit's build tree is kept in a volume beside it (one per kit and
        toolchain image), so a rebuild configures in a blink and compiles only what changed;
        the recipe proves the kept tree fits (its configure key) or empties it."""
        toolchain = self.preflight(request.kit, reporter)
        if self._ccache_dir is not None:
            with ccache_from_dir(self.client, toolchain.image, self._ccache_dir,
                                 self._ccache_max_size, reporter) as volume:
                return self._compile(request, reporter, toolchain, volume, tree=None,
                                     said=f"a volume of this run, loaded from and saved to "
                                          f"--ccache-dir (max_size {self._ccache_max_size})")
        volume = self._ccache_volume or f"ninfer-kits-ccache-{request.kit.toolchain.id}"
        cached = volume != "none"
        tree = None if self._fresh_tree or not cached else \
            ensure_tree_volume(self.client, volume, request.kit.id, toolchain.image_id)
        if cached:
            ensure_volume(self.client, volume)
        return self._compile(request, reporter, toolchain, volume if cached else None, tree,
                             said=volume if cached else "none (--ccache-volume none)")

    def _compile(self, request: CompileRequest, reporter: Reporter,
                 toolchain: PreparedToolchain, volume: str | None, tree: str | None,
                 said: str) -> Compiled:
        cached = volume is not None
        command = ["python3", RECIPE_AT, *(["--ccache"] if cached else []),
                   "--source-from", INCOMING,
                   *recipe_arguments(request, Path(SOURCE), Path(CMAKE), Path(OUT))]
        env = {"SOURCE_DATE_EPOCH": str(request.source_date_epoch), "CCACHE_DIR": CCACHE_AT,
               "CCACHE_BASEDIR": WORK, "CCACHE_NOHASHDIR": "1", "HOME": "/tmp",
               "CCACHE_NAMESPACE": CCACHE_NAMESPACE}
        if self._ccache_dir is not None:
            env["CCACHE_MAXSIZE"] = self._ccache_max_size
        volumes = {}
        if volume is not None:
            volumes[volume] = {"bind": CCACHE_AT, "mode": "rw"}
        if tree:
            volumes[tree] = {"bind": WORK, "mode": "rw"}
        out = request.workspace / "out"
        with build_container(self.client, image=toolchain.image, command=command, env=env,
                             volumes=volumes, network=COMPILE_NETWORK) as container:
            container.put_archive(str(Path(INCOMING).parent),
                                  _tar_of({Path(RECIPE_AT).name: request.recipe,
                                           Path(INCOMING).name: request.source}))
            container.start()
            _stream_log(container, request, reporter)
            status = container.wait().get("StatusCode", 1)
            if status != 0:
                tail = tuple(_tail(request.log))
                raise CompileFailed(f"compiling {request.kit.id} in {toolchain.image}", status,
                                    tail, request.log)
            _copy_out(container, OUT, out)
        run = (("image", f"{toolchain.image}@{toolchain.image_id}"),
               ("ccache", said),
               ("build_tree", tree or "none (a fresh one in the container)"))
        return Compiled(bin_dir=out / "kit" / "bin", report=read_recipe_report(out),
                        log=request.log, run_entries=run)

    @contextmanager
    def build_environment(self, kit: Kit, reporter: Reporter,
                          cache_dir: Path | None = None) -> Iterator[Path]:
        """The toolchain image's libraries, loader cache and package records, exported once
        per image ID into `cache_dir`/environments/ (an image's files never change under its
        ID), or into a temporary folder without a cache."""
        toolchain = self.preflight(kit, reporter)
        if cache_dir is None:
            reporter.info(f"reading the libraries and packages of {toolchain.image}")
            with engine_guard(), exported_image(self.client, toolchain.image,
                                                _build_environment_file,
                                                what="toolchain image") as root:
                yield root
            return
        key = toolchain.image_id.removeprefix("sha256:")[:16] or "unknown"
        root = cache_dir / "environments" / f"{kit.toolchain.id}-{key}-{ENVIRONMENT_LAYOUT}"
        if not (root / "etc").is_dir():
            reporter.info(f"reading the libraries and packages of {toolchain.image} into {root}")
            root.parent.mkdir(parents=True, exist_ok=True)
            with engine_guard(), exported_image(self.client, toolchain.image,
                                                _build_environment_file,
                                                what="toolchain image",
                                                into=root.parent) as fresh:
                _keep_folder(fresh, root)
        yield root

    @engine_guard()
    def smoke_test(self, kit: Kit, kit_roots: Sequence[Path], interpreter: str, log: Path,
                   reporter: Reporter) -> tuple[str, ...]:
        """The dynamic loader traces every binary of each flavour's kit/ (the plain kit,
        the portable one) inside the kit's runtime image, in one container; every missing library
        and symbol version is named, in the error and in the build log."""
        recipe = ImageRecipe.runtime_image(kit.toolchain)
        tag = ensure_image(self.client, recipe, reporter).tag
        places = [f"/smoke/{index}" for index in range(len(kit_roots))]
        script = "; ".join(f'echo "{SECTION}{place}"; '
                           + trace_script(interpreter, f"{place}/kit/bin") for place in places)
        with build_container(self.client, image=tag, command=["sh", "-c", script],
                             env={}, volumes={}, network="none") as container, \
                children.stoppable(lambda: _remove(container)) as stopped:
            # Each whole kit: a portable one finds its libraries in kit/lib through $ORIGIN.
            kits = zip(places, kit_roots, strict=True)
            container.put_archive("/", _tar_of({f"{place[1:]}/kit": root for place, root in kits}))
            container.start()
            container.wait()
            if stopped.is_set():  # the build was interrupted and removed it: no verdict
                raise KeyboardInterrupt
            output = container.logs().decode("utf-8", "replace")
        sections = dict(section.partition("\n")[::2]
                        for section in output.split(SECTION)[1:])
        verdicts = [read_trace(sections.get(place, ""), tag, strip=place + "/")
                    for place in places]
        with log.open("a", encoding="utf-8") as sink:
            for root, place, verdict in zip(kit_roots, places, verdicts, strict=True):
                sink.write(f"\n== smoke test: the loader's trace in {tag} of {root}\n"
                           f"{sections.get(place, '')}== smoke test {verdict.summary()}\n")
        failed = [(root, verdict) for root, verdict in zip(kit_roots, verdicts, strict=True)
                  if not verdict.passed]
        if failed:
            raise CheckFailed("; ".join(f"smoke test ({kit.toolchain.runtime_dockerfile}) "
                                        f"{verdict.summary()} (in {root})"
                                        for root, verdict in failed)
                              + f"; the loader's trace is in {log}")
        return tuple(verdict.summary() for verdict in verdicts)


# What the portable repair reads in a toolchain image: its libraries, the loader's cache, and of
# /usr/share and /var only the package records and copyright files.
# The toolchain's programs (compilers, nvcc, cicc) are no libraries a kit loads: left out.
_SKIPPED_FOR_REPAIR = ("usr/include/", "usr/src/", "proc/", "sys/", "dev/", "tmp/", "run/",
                       "usr/bin/", "usr/sbin/", "usr/libexec/", "usr/lib/gcc/")
_CUDA_PROGRAMS = re.compile(r"usr/local/cuda[^/]*/(bin|nvvm|include|targets/[^/]+/include)/")
_DPKG_RECORDS = re.compile(r"var/lib/dpkg/(status|info/[^/]+\.(list|md5sums))")
_COPYRIGHT = re.compile(r"usr/share/doc/[^/]+/copyright")
# The link's inputs from GCC's own folder (crt*.o, libgcc.a, libstdc++.so) are compiled-in code
# too: the dependency output names them beside the headers. Its programs (cc1plus) are not.
_HEADERS = re.compile(r"usr/include/|usr/lib/gcc/[^/]+/[^/]+/(include/|[^/]+\.(o|a|so)$)|"
                      r"usr/local/cuda[^/]*/(include|targets/[^/]+/include)/")
# Part of an exported environment's folder name: a new one when what is exported changes (the
# headers and link inputs were added for the compiled-in licences), since the image ID alone
# would not say so.
ENVIRONMENT_LAYOUT = 3


def _build_environment_file(name: str) -> bool:
    if _HEADERS.match(name):  # what compiled-in code comes from, for its package and licence
        return True
    if name.startswith(_SKIPPED_FOR_REPAIR) or _CUDA_PROGRAMS.match(name):
        return False
    if name.startswith("var/"):
        return name.rstrip("/") in ("var", "var/lib", "var/lib/dpkg", "var/lib/dpkg/info") \
            or _DPKG_RECORDS.fullmatch(name) is not None
    if name.startswith("usr/share/"):
        parts = name.rstrip("/").split("/")
        folder = len(parts) <= 4 and parts[2:3] in ([], ["doc"])  # usr/share/doc/<package>
        return folder or _COPYRIGHT.fullmatch(name) is not None
    return True


def _keep_folder(source: Path, dest: Path) -> None:
    """Move `source` to `dest` in one rename (both in one folder): a second build that exported
    the same image at the same time leaves one complete copy."""
    try:
        source.rename(dest)
    except OSError:
        if not (dest / "etc").is_dir():
            raise


@dataclass(frozen=True)
class EngineImage:
    """An image of ours on the engine: the tag we gave it, its ID, its labels."""

    tag: str
    id: str
    labels: dict[str, str]

    @classmethod
    def of(cls, tag: str, image: Any) -> EngineImage:
        return cls(tag=tag, id=str(image.id), labels=dict(image.labels or {}))


def ensure_image(client: Any, recipe: ImageRecipe, reporter: Reporter, *,
                 cpu_shares: int | None = None) -> EngineImage:
    """Reuse the image tagged with this recipe's hash (base image ID included), or build it,
    streaming its log, with the base's name and ID as labels.

    `cpu_shares` weighs its RUN steps against other containers (the engine's default is 1024):
    an image built in the background with a low weight takes only CPU time nothing else wants.
    """
    import docker.errors

    base = _require_base(client, recipe)
    tag = recipe.tag(base.id)
    try:
        return EngineImage.of(tag, client.images.get(tag))
    except docker.errors.ImageNotFound:
        pass
    # Two builds on this machine needing the same new image (a CI run's builds at once, two
    # terminals) build it once: the second waits for the first, then finds it.
    with locks.held(locks.named(f"image-{tag}"), wait=IMAGE_WAIT, name_holder=True,
                    waiting=lambda holder: reporter.info(
                        f"waiting for {holder}, which is building {tag}")):
        try:
            return EngineImage.of(tag, client.images.get(tag))
        except docker.errors.ImageNotFound:
            return _build_image(client, recipe, tag, base, reporter, cpu_shares)


def _build_image(client: Any, recipe: ImageRecipe, tag: str, base: Any, reporter: Reporter,
                 cpu_shares: int | None) -> EngineImage:
    arguments = "".join(f", {name}={value}" for name, value in recipe.build_args)
    reporter.info(f"building {tag} from {recipe.dockerfile.name} (base {recipe.base_image} = "
                  f"{base.id}{arguments})")
    # An image that builds libraries from source takes many minutes: its Dockerfile's steps
    # ("Step 12/33 : RUN …") are the progress, live on a terminal, a line every so often in CI.
    progress = reporter.progress(f"building {tag}")
    with _context(recipe.dockerfile) as context:
        tail: deque[str] = deque(maxlen=LOG_TAIL)
        for chunk in client.api.build(fileobj=context, custom_context=True, tag=tag, rm=True,
                                      forcerm=True, pull=False, decode=True,
                                      buildargs=recipe.all_build_args(),
                                      network_mode=network_mode(client),
                                      container_limits=({"cpushares": cpu_shares}
                                                        if cpu_shares else None),
                                      labels={LABEL: recipe.role,
                                              BASE_LABEL: recipe.base_image,
                                              BASE_ID_LABEL: base.id}):
            for line in str(chunk.get("stream", "")).splitlines():
                tail.append(line)
                step = DOCKER_STEP.match(line)
                if step:  # a RUN step may be silent for minutes: each is a line of its own
                    progress.update(int(step["done"]), int(step["total"]), step["what"][:60],
                                    milestone=True)
            if "error" in chunk:
                lines = "\n".join(f"  | {line}" for line in tail)
                raise CheckFailed(f"building image {tag} from {recipe.dockerfile} failed: "
                                  f"{str(chunk['error']).strip()}\n{lines}")
    return EngineImage.of(tag, client.images.get(tag))


def _require_base(client: Any, recipe: ImageRecipe) -> Any:
    """The base image as the engine has it now (pulled when it is not there)."""
    import docker.errors

    try:
        return client.images.get(recipe.base_image)
    except docker.errors.ImageNotFound:
        pass
    try:
        return client.images.pull(recipe.base_image)
    except docker.errors.APIError as error:
        raise BaseImageMissing(recipe, first_line(error)) from None


class BaseImageMissing(EnvironmentFailure):
    """A base image the engine lacks and cannot pull. The way out depends on what the base is:
    a plain Debian root (named so, for a Dockerfile that adds CUDA from wheels) is made by
    scripts/make-base-image.sh; any other (nvidia/cuda:… carries CUDA) is not, and a toolchain
    that builds anywhere is the other way (`suggesting` names the matrix's)."""

    def __init__(self, recipe: ImageRecipe, cause: str, kit: str = "",
                 alternatives: Sequence[str] = ()) -> None:
        self.recipe, self.cause = recipe, cause
        super().__init__(_base_missing(recipe, cause, kit, alternatives))

    def suggesting(self, kit: str, alternatives: Sequence[str]) -> BaseImageMissing:
        """The same failure, naming the toolchains (`ID (CUDA X)`) kit `kit` could use."""
        return BaseImageMissing(self.recipe, self.cause, kit, alternatives)


def builds_anywhere(build_args: Iterable[tuple[str, str]]) -> bool:
    """Whether images built with these arguments get CUDA from NVIDIA's PyPI wheels on a plain
    Debian base (toolchain-wheels-debian.Dockerfile), which scripts/make-base-image.sh makes."""
    return any(name == WHEELS_ARG for name, _ in build_args)


def debian_root_arguments(recipe: ImageRecipe) -> tuple[str, ...] | None:
    """scripts/make-base-image.sh's arguments that make the recipe's base image, when it is a
    plain Debian root (named so, for a Dockerfile that adds CUDA from NVIDIA's PyPI wheels): the
    image, its suite, and for a runtime image a minbase root (`--include ''`). None for any
    other base (nvidia/cuda:… carries CUDA; only a registry has it)."""
    base = recipe.base_image
    if not (builds_anywhere(recipe.build_args) and "debian" in base.rpartition(":")[0]):
        return None
    suite = re.search(r"debian-([a-z]+)", base)
    return (base, *((suite.group(1),) if suite else ()),
            *(("--include", "") if recipe.role == "runtime" else ()))


def _base_missing(recipe: ImageRecipe, cause: str, kit: str, alternatives: Sequence[str]) -> str:
    base = recipe.base_image
    said = (f"base image {base} (toolchain {recipe.toolchain}) cannot be had: it is not on the "
            f"engine at {engine_address()} and pulling it failed ({cause})")
    arguments = debian_root_arguments(recipe)
    if arguments is not None:
        shown = " ".join(shlex.quote(argument) for argument in arguments)
        return (f"{said}. It is a plain Debian root (the toolchain's Dockerfile adds CUDA from "
                f"NVIDIA's PyPI wheels): make it with scripts/make-base-image.sh {shown}, "
                f"or docker pull / docker load it where a registry is reachable")
    if alternatives:
        listed = " or ".join(alternatives) if len(alternatives) <= 2 else \
            ", ".join(alternatives[:-1]) + " or " + alternatives[-1]
        instead = (f"build kit {kit} with a toolchain of the matrix that builds anywhere "
                   f"(Debian packages and NVIDIA's PyPI wheels): {listed}, as its toolchain in "
                   f"[kits.{kit}]")
    else:
        instead = ("use a toolchain that builds anywhere (Debian packages and NVIDIA's PyPI "
                   f"wheels: dockerfiles/toolchain-wheels-debian.Dockerfile with {WHEELS_ARG})")
    return (f"{said}. docker pull / docker load it on that engine where a registry is "
            f"reachable (no Debian root made by scripts/make-base-image.sh stands in for it), "
            f"or {instead}")


def context_files(dockerfile: Path) -> list[tuple[str, Path]]:
    """(name in the build context, file) of every file in the context/ folders the Dockerfile
    COPYs from (a whole folder each: a build argument may pick the file), sorted by name."""
    lines = COPY_LINE.findall(dockerfile.read_text(encoding="utf-8"))
    files = []
    for folder in sorted({folder for line in lines for folder in CONTEXT_FOLDER.findall(line)}):
        place = dockerfile.parent / folder
        if not place.is_dir():
            raise BadInput(f"{dockerfile}: COPY from {folder}/, which is not a folder beside it")
        files += [(path.relative_to(dockerfile.parent).as_posix(), path)
                  for path in place.rglob("*") if path.is_file()]
    return sorted(files)


@contextmanager
def _context(dockerfile: Path) -> Iterator[io.BytesIO]:
    """The build context: the Dockerfile, the context/ folders it copies from, and the host's
    CA bundle so that pip and apt inside a classic `docker build` (no mounts) trust what this
    machine trusts. Every file has mtime 0: COPY keeps it, and a header the image's compilers
    read (the sysroot's glibc-2.28.h) must not carry the moment this checkout was made, which
    nvcc -lineinfo would record in the kit's device code."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(dockerfile, arcname="Dockerfile", filter=_without_mtime)
        for name, path in context_files(dockerfile):
            archive.add(path, arcname=name, filter=_without_mtime)
        ca = CA_BUNDLE if CA_BUNDLE.is_file() else None
        data = ca.read_bytes() if ca else b""
        info = tarfile.TarInfo("host-ca.crt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    yield buffer


def _without_mtime(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = 0
    return info


def ensure_volume(client: Any, name: str, labels: dict[str, str] | None = None) -> str:
    """The volume `name`, made with `labels` (a compiler cache's, by default) if it is not there."""
    import docker.errors

    try:
        client.volumes.get(name)
    except docker.errors.NotFound:
        client.volumes.create(name=name, labels=labels or {LABEL: "ccache"})
    return name


@contextmanager
def build_container(client: Any, *, image: str, command: list[str], env: dict[str, str],
                    volumes: dict[str, dict[str, str]], network: str,
                    role: str = "build") -> Iterator[Any]:
    """A created (not started) container, always removed afterwards (also when the build is
    interrupted: Ctrl-C or SIGTERM) unless asked to keep it."""
    container = None
    try:
        with deferred_signals():  # an interrupt while it is made waits: it is removed then
            container = client.containers.create(
                image, command=command, environment=env, volumes=volumes, network_mode=network,
                working_dir=WORK, labels=container_labels(role), detach=True,
            )
        yield container
    finally:  # also on Ctrl-C and SIGTERM; a second one waits until the container is gone
        if container is not None and os.environ.get(KEEP_ENV):
            print(f"kept container {container.short_id} ({KEEP_ENV} is set)")
        elif container is not None:
            with deferred_signals():
                _remove(container)


def _remove(container: Any) -> None:
    """Remove a container, running or not, with its anonymous volumes; one removed already,
    or being removed (an interrupted build's smoke test, from the main thread), is left to it."""
    import docker.errors

    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if error.status_code != 409 or "already in progress" not in str(error):
            raise


def ensure_tree_volume(client: Any, ccache_volume: str, kit: str, image_id: str) -> str:
    """The volume that keeps `kit`'s build tree beside `ccache_volume`, for this toolchain
    image; trees the kit kept for other images are removed (unless a build holds them)."""
    import docker.errors

    prefix = f"{ccache_volume}-tree-{kit}-"
    name = prefix + (image_id.removeprefix("sha256:")[:12] or "unknown")
    for stale in client.volumes.list(filters={"label": f"{KIT_LABEL}={kit}"}):
        if stale.name != name and stale.name.startswith(prefix):
            with suppress(docker.errors.APIError):  # in use by a running build: left for later
                stale.remove()
    return ensure_volume(client, name, {LABEL: "build-tree", KIT_LABEL: kit,
                                        IMAGE_ID_LABEL: image_id})


@dataclass(frozen=True)
class CcacheCounts:
    """One build's compiles as ccache counted them (its stats were zeroed when it was loaded)."""

    hits: int
    misses: int

    @classmethod
    def parse(cls, printed: str) -> CcacheCounts:
        """From `ccache --print-stats` (one `key<TAB>value` a line)."""
        counters: dict[str, int] = {}
        for line in printed.splitlines():
            key, _, value = line.partition("\t")
            if value.strip().isdigit():
                counters[key.strip()] = int(value)
        return cls(hits=counters.get("direct_cache_hit", 0)
                   + counters.get("preprocessed_cache_hit", 0),
                   misses=counters.get("cache_miss", 0))

    @property
    def line(self) -> str:
        total = self.hits + self.misses
        rate = 100 * self.hits / total if total else 0.0
        return f"ccache: {self.hits} hits, {self.misses} misses ({rate:.1f}% hit rate)"


@contextmanager
def ccache_from_dir(client: Any, image: str, folder: Path, max_size: str,
                    reporter: Reporter) -> Iterator[str]:
    """A compiler cache volume of this run's own (labelled with the run, removed afterwards),
    loaded with the content of the host folder `folder` (missing or empty: a cold cache) and
    its stats zeroed. After the block, whether the build succeeded or failed, the cache is
    trimmed to `max_size`, this build's hits and misses are reported (and appended to
    $GITHUB_STEP_SUMMARY), and it replaces `folder`'s content. Only the engine's API moves the
    files (put_archive, get_archive, in containers of `image`): no host path is ever bound, so a
    remote DOCKER_HOST works and the runner owns every file it gets back."""
    import docker.errors

    volume = f"ninfer-kits-ccache-run-{uuid.uuid4().hex[:16]}"
    with deferred_signals():
        client.volumes.create(name=volume, labels={
            LABEL: CCACHE_ROLE, RUN_LABEL: container_labels(CCACHE_ROLE)[RUN_LABEL]})
    try:
        files = _load_ccache(client, image, volume, folder, max_size)
        state = "empty" if folder.exists() else "not there"
        reporter.info(f"ccache: {files} files loaded from {folder}" if files else
                      f"ccache: starting cold ({folder} is {state})")
        try:
            yield volume
        except Exception:  # the build failed: what it compiled is still worth keeping
            try:
                _report_ccache(_save_ccache(client, image, volume, folder, max_size), reporter)
            except Exception as error:  # the build's own failure is the one to tell
                reporter.warning(f"the compiler cache could not be saved into {folder}: "
                                 f"{first_line(error)}")
            raise
        _report_ccache(_save_ccache(client, image, volume, folder, max_size), reporter)
    finally:
        if os.environ.get(KEEP_ENV):  # its containers are kept, and hold it
            print(f"kept volume {volume} ({KEEP_ENV} is set)")
        else:
            with deferred_signals(), suppress(docker.errors.NotFound):
                client.volumes.get(volume).remove(force=True)


def _report_ccache(counts: CcacheCounts, reporter: Reporter) -> None:
    reporter.info(counts.line)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as sink:
            sink.write(counts.line + "\n")


def _load_ccache(client: Any, image: str, volume: str, folder: Path, max_size: str) -> int:
    """`folder`'s files into the volume, their stats zeroed; returns how many were loaded."""
    with tempfile.TemporaryFile() as spool:
        count = _cache_tar(folder, spool)
        spool.seek(0)
        _in_cache_container(client, image, volume, max_size, "ccache --zero-stats >/dev/null",
                            before=lambda container: container.put_archive(CCACHE_AT, spool))
    return count


def _cache_tar(folder: Path, sink: Any) -> int:
    """The regular files and folders under `folder` as a tar (root's, 0644/0755) into `sink`.
    Links and special files are left out, and so is a ccache.conf: the build's settings come
    from its environment, and a config file ccache cannot read would fail every compile."""
    count = 0
    with tarfile.open(fileobj=sink, mode="w") as archive:
        if not folder.is_dir():
            return 0
        for root, dirs, files in os.walk(folder):
            here = Path(root)
            for name in sorted(dirs):
                if not (here / name).is_symlink():
                    archive.addfile(_cache_member(here / name, folder, tarfile.DIRTYPE, 0))
            dirs[:] = sorted(name for name in dirs if not (here / name).is_symlink())
            for name in sorted(files):
                path = here / name
                if (here == folder and name == "ccache.conf") or path.is_symlink() \
                        or not path.is_file():
                    continue
                try:
                    with path.open("rb") as source:
                        size = os.fstat(source.fileno()).st_size
                        archive.addfile(_cache_member(path, folder, tarfile.REGTYPE, size),
                                        source)
                except OSError:  # unreadable (or gone): the cache does without it
                    continue
                count += 1
    return count


def _cache_member(path: Path, folder: Path, kind: bytes, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path.relative_to(folder).as_posix())
    info.type, info.size = kind, size
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return _root_owned(info)


def _save_ccache(client: Any, image: str, volume: str, folder: Path,
                 max_size: str) -> CcacheCounts:
    """Trim the volume's cache to `max_size`, read this build's stats, and replace `folder`
    with the cache: written beside it, then swapped in (the invoking user's, 0644/0755)."""
    printed = _in_cache_container(
        client, image, volume, max_size, "ccache --cleanup >/dev/null && ccache --print-stats",
        after=lambda container: _export_cache(container, folder))
    return CcacheCounts.parse(printed)


def _export_cache(container: Any, folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fresh = folder.with_name(f".{folder.name}.new-{token}")
    old = folder.with_name(f".{folder.name}.old-{token}")
    try:
        _copy_out(container, CCACHE_AT, fresh)
        _make_runners(fresh)
        if folder.is_dir() and not folder.is_symlink():
            folder.rename(old)
        elif folder.exists() or folder.is_symlink():
            folder.unlink()
        fresh.rename(folder)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def _make_runners(root: Path) -> None:
    """Every file and folder under `root` the invoking user's, files 0644 and folders 0755, so
    that a runner which is not root can replace or delete them; anything else is dropped."""
    uid, gid = os.getuid(), os.getgid()
    for here, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(here) / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                path.unlink()
                continue
            os.chown(path, uid, gid)
            path.chmod(0o755 if path.is_dir() else 0o644)
    os.chown(root, uid, gid)
    root.chmod(0o755)


def _in_cache_container(client: Any, image: str, volume: str, max_size: str, script: str,
                        before: Callable[[Any], object] | None = None,
                        after: Callable[[Any], object] | None = None) -> str:
    """Run `script` (sh) in a container of `image` with the cache volume mounted; its output.
    `before` and `after` get the container before it starts and after it exited well."""
    env = {"CCACHE_DIR": CCACHE_AT, "CCACHE_MAXSIZE": max_size, "HOME": "/tmp"}
    with build_container(client, image=image, command=["sh", "-c", script], env=env,
                         volumes={volume: {"bind": CCACHE_AT, "mode": "rw"}}, network="none",
                         role=CCACHE_ROLE) as container:
        if before is not None:
            before(container)
        container.start()
        status = container.wait().get("StatusCode", 1)
        output = container.logs().decode("utf-8", "replace")
        if status != 0:
            tail = "\n".join(f"  | {line}" for line in output.strip().splitlines()[-LOG_TAIL:])
            raise EnvironmentFailure(f"ccache in {image} failed (exit status {status}) running "
                                     f"`{script}`:\n{tail}")
        if after is not None:
            after(container)
        return str(output)


def _tar_of(entries: dict[str, Path]) -> bytes:
    """Files and folders under the names given, owned by root, as one tar for put_archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, path in entries.items():
            archive.add(path, arcname=name, filter=_root_owned)
    return buffer.getvalue()


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _stream_log(container: Any, request: CompileRequest, reporter: Reporter) -> None:
    progress = reporter.progress(f"compiling {request.kit.id} in docker")
    request.log.parent.mkdir(parents=True, exist_ok=True)
    with request.log.open("w", encoding="utf-8") as sink:
        for line in _lines(container.logs(stream=True, follow=True)):
            sink.write(line + "\n")
            status = NINJA_STATUS.match(line)
            if status:
                progress.update(int(status.group(1)), int(status.group(2)))


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


def _tail(log: Path) -> Iterator[str]:
    lines: deque[str] = deque(maxlen=LOG_TAIL)
    if log.is_file():
        with log.open(encoding="utf-8", errors="replace") as source:
            lines.extend(line.rstrip("\n") for line in source)
    return iter(lines)


def _copy_out(container: Any, path: str, dest: Path) -> None:
    """The folder `path` of the container as `dest`: get_archive gives a tar of it, unpacked
    beside `dest` with the "data" policy (tarsafe), then moved; nothing is left on a failure."""
    stream, _ = container.get_archive(path)
    staging = dest.parent / f".{dest.name}.copy"
    try:
        with tempfile.TemporaryFile() as spool:
            for chunk in stream:
                spool.write(chunk)
            spool.seek(0)
            with tarfile.open(fileobj=spool) as archive:
                extract_all(archive, staging, policy="data")
        (staging / Path(path).name).rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
