"""The docker builder: build/recipe.py in the kit's toolchain image without network, and the smoke
test in its runtime image, on any engine the docker SDK reaches (docs/build.md, "In the kit's
toolchain image")."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ninfer_kits.errors import CheckFailed
from ninfer_kits.host import children
from ninfer_kits.host.engine import LABEL, connect, engine_guard
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Kit
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
from ninfer_kits.pipeline.ccache_dir import CCACHE_AT, ccache_from_dir
from ninfer_kits.pipeline.containers import (
    WORK,
    build_container,
    copy_out,
    remove_container,
    tar_of,
)
from ninfer_kits.pipeline.images import (
    BASE_ID_LABEL,
    BASE_LABEL,
    ImageRecipe,
    ensure_image,
    pinned_image,
    require_base,
)
from ninfer_kits.pipeline.recipe_report import read_recipe_report
from ninfer_kits.pipeline.smoke import read_trace, trace_script
from ninfer_kits.pipeline.toolchain_export import exported_toolchain

SECTION = "=== kit "  # the smoke test's output: where each flavour's kit/ trace begins
COMPILE_NETWORK = "none"  # the compile needs nothing from the network: the source is fetched
SOURCE, CMAKE, OUT = f"{WORK}/source", f"{WORK}/cmake", f"{WORK}/out"  # as the local builder's
INCOMING = "/tmp/ninfer-kits-source"  # the exported source; the recipe syncs it into SOURCE
RECIPE_AT = "/tmp/ninfer-kits-recipe.py"  # beside it: both arrive in one put_archive
KIT_LABEL = "org.ninfer-kits.kit"  # on a kept build tree's volume: whose tree it is
IMAGE_ID_LABEL = "org.ninfer-kits.image-id"  # and the toolchain image it was built in
NOT_PINNED = "none (not pinned: built on this engine)"  # BUILDINFO's run.toolchain_image


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
        """The toolchain image, pulled by its pin or built once per recipe; the smoke test's runtime
        base must be there too, so that one missing fails now, not after the compile."""
        if kit.toolchain.id in self._toolchains:
            return self._toolchains[kit.toolchain.id]
        toolchain = kit.toolchain
        recipe = ImageRecipe.toolchain_image(toolchain)
        for needed, pinned in ((recipe, toolchain.image),
                               (ImageRecipe.runtime_image(toolchain), toolchain.runtime_image)):
            if not pinned:
                require_base(self.client, needed, reporter)
        if toolchain.image:
            pin = toolchain.image
            image = pinned_image(self.client, recipe, pin, reporter)
        else:
            image, pin = ensure_image(self.client, recipe, reporter), ""
        found = PreparedToolchain(
            builder=self.name, nvcc=f"nvcc in {pin or image.tag}",
            cuda_version=toolchain.cuda.text,
            base_image=image.labels.get(BASE_LABEL) or toolchain.base_image,
            base_image_digest=image.labels.get(BASE_ID_LABEL)
            or f"unknown ({image.tag} has no {BASE_ID_LABEL} label)",
            image=image.tag, image_id=image.id, pin=pin)
        self._toolchains[toolchain.id] = found
        return found

    @engine_guard()
    def compile(self, request: CompileRequest, reporter: Reporter) -> Compiled:
        """The recipe in a container of the toolchain image, without network; with a compiler cache,
        the kit's build tree is kept in a volume beside it (emptied by the recipe when unfit)."""
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
                                  tar_of({Path(RECIPE_AT).name: request.recipe,
                                           Path(INCOMING).name: request.source}))
            container.start()
            _stream_log(container, request, reporter)
            status = container.wait().get("StatusCode", 1)
            if status != 0:
                tail = tuple(_tail(request.log))
                raise CompileFailed(f"compiling {request.kit.id} in {toolchain.image}", status,
                                    tail, request.log)
            copy_out(container, OUT, out)
        name = toolchain.pin.partition("@")[0] if toolchain.pin else toolchain.image
        run = (("image", f"{name}@{toolchain.image_id}"),
               ("toolchain_image", toolchain.pin or NOT_PINNED),
               ("ccache", said),
               ("build_tree", tree or "none (a fresh one in the container)"))
        return Compiled(bin_dir=out / "kit" / "bin", report=read_recipe_report(out),
                        log=request.log, run_entries=run)

    @contextmanager
    def build_environment(self, kit: Kit, reporter: Reporter,
                          cache_dir: Path | None = None) -> Iterator[Path]:
        """The toolchain image's libraries, loader cache and package records (toolchain_export)."""
        toolchain = self.preflight(kit, reporter)
        with exported_toolchain(self.client, kit.toolchain.id, toolchain, reporter,
                                cache_dir) as root:
            yield root

    @engine_guard()
    def smoke_test(self, kit: Kit, kit_roots: Sequence[Path], interpreter: str, log: Path,
                   reporter: Reporter) -> tuple[str, ...]:
        """The loader's trace of each flavour's kit/ in the runtime image, in one container."""
        recipe = ImageRecipe.runtime_image(kit.toolchain)
        tag = pinned_image(self.client, recipe, kit.toolchain.runtime_image, reporter).tag \
            if kit.toolchain.runtime_image else ensure_image(self.client, recipe, reporter).tag
        places = [f"/smoke/{index}" for index in range(len(kit_roots))]
        script = "; ".join(f'echo "{SECTION}{place}"; '
                           + trace_script(interpreter, f"{place}/kit/bin") for place in places)
        with build_container(self.client, image=tag, command=["sh", "-c", script],
                             env={}, volumes={}, network="none") as container, \
                children.stoppable(lambda: remove_container(container)) as stopped:
            # Each whole kit: a portable one finds its libraries in kit/lib through $ORIGIN.
            kits = zip(places, kit_roots, strict=True)
            container.put_archive("/", tar_of({f"{place[1:]}/kit": root for place, root in kits}))
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


def ensure_volume(client: Any, name: str, labels: dict[str, str] | None = None) -> str:
    """The volume `name`, made with `labels` (a compiler cache's, by default) if it is not there."""
    import docker.errors

    try:
        client.volumes.get(name)
    except docker.errors.NotFound:
        client.volumes.create(name=name, labels=labels or {LABEL: "ccache"})
    return name


def ensure_tree_volume(client: Any, ccache_volume: str, kit: str, image_id: str) -> str:
    """The volume keeping `kit`'s build tree for this toolchain image; those of other images are
    removed (unless a build holds them)."""
    import docker.errors

    prefix = f"{ccache_volume}-tree-{kit}-"
    name = prefix + (image_id.removeprefix("sha256:")[:12] or "unknown")
    for stale in client.volumes.list(filters={"label": f"{KIT_LABEL}={kit}"}):
        if stale.name != name and stale.name.startswith(prefix):
            with suppress(docker.errors.APIError):  # in use by a running build: left for later
                stale.remove()
    return ensure_volume(client, name, {LABEL: "build-tree", KIT_LABEL: kit,
                                        IMAGE_ID_LABEL: image_id})


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
