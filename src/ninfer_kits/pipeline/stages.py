"""The main job: one matrix entry → a finished kit folder, dist/<release-tag>/ (ninfer_kits.kitdir).

The stages below, in order, are the whole program (STAGES, right after them; the helpers they
call come after it); each takes the state so far and returns it with its own result added.
The kit is a tuple of flavours (the plain kit, then a sibling such as the portable one, made
by `repair`): every stage after it loops over them, so a new flavour is one more entry. The
build runs in the kit's work folder, held by this process alone (pipeline.workspace); the kit
folder is made in a staging folder next to dist/<tag>/ and moved into place by one rename at
the end (kitdir.install), so dist/ never holds a partial kit, and never loses another kit's
folder to a tag they share.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ninfer_kits import __version__, children, kitdir, nvidia_smi, resources
from ninfer_kits.atomic import PackedFile, hash_file, write_file
from ninfer_kits.buildinfo import BuildInfo, render, toolchain_field
from ninfer_kits.checksums import write_sha1sums, write_sha256sums
from ninfer_kits.children import ProbeTimeout, probe
from ninfer_kits.errors import CheckFailed, EnvironmentFailure, need
from ninfer_kits.inspector.floor import describe_device_code, render_table
from ninfer_kits.inspector.inspection import Inspection, inspect_path
from ninfer_kits.kitdir import KitDir
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Kit
from ninfer_kits.matrix.inputs import kit_inputs
from ninfer_kits.pipeline.builders import (
    RECIPE,
    Builder,
    Compiled,
    CompileRequest,
    PreparedToolchain,
)
from ninfer_kits.pipeline.pack import compressor, pack_tree
from ninfer_kits.pipeline.portable_policy import load_policy
from ninfer_kits.pipeline.repair import (
    THIRD_PARTY_README,
    Bundled,
    LibraryEnvironment,
    repair,
)
from ninfer_kits.pipeline.source import SourceTree, fetch_source
from ninfer_kits.pipeline.workspace import held_workspace


@dataclass(frozen=True, kw_only=True)
class BuildRequest:
    kit: Kit
    builder: Builder
    project: Path  # the folder of matrix.toml
    dist_dir: Path
    cache_dir: Path
    work_dir: Path
    jobs: int = 0
    revision: str | None = None
    source_url: str | None = None
    keep_work: bool = False
    # Replace dist/<tag>/ even when it holds this kit built from another revision (the tag's
    # template has no {rev}); without it such a build stops before the compile.
    replace: bool = False


@dataclass(frozen=True)
class PipelineCheckout:
    """The checkout that holds the matrix and builds the kit."""

    revision: str  # the commit; `<sha>-dirty` when files differ from it
    changes: str  # the files that differ (at most LISTED_CHANGES named), or ""


@dataclass(frozen=True, kw_only=True)
class BuildState:
    request: BuildRequest
    workspace: Path
    started: float
    toolchain: PreparedToolchain | None = None
    source: SourceTree | None = None
    compiled: Compiled | None = None
    kit_root: Path | None = None
    licenses: tuple[str, ...] = ()
    inspection: Inspection | None = None
    tag: str = ""
    asset: str = ""
    staging: Path | None = None
    kit_dir: KitDir | None = None
    recipe_sha256: str = ""  # build/recipe.py as this build runs it (BUILDINFO's `recipe`)
    checkout: PipelineCheckout | None = None  # the pipeline's own revision
    # the kit's tarballs, the plain one first (from `inspect`), each sibling after (`repair`)
    flavours: tuple[Flavour, ...] = ()
    background: Executor | None = None  # work that overlaps later stages (the smoke test)
    smoke_pending: Future[tuple[str, ...]] | None = None

    @property
    def plain(self) -> Flavour:
        return need(self.flavours[0] if self.flavours else None, "flavours")


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """One tarball of the kit as it is built: the plain kit from the compile, or a sibling
    made from it (kitdir.SIBLINGS; the portable one carries every library its binaries load
    but glibc's and the driver's in kit/lib). Every stage after `repair` loops over them."""

    name: str  # kitdir.PLAIN or a sibling's: the `flavour` of its own BUILDINFO.txt
    root: Path  # its kit/ folder
    asset: str  # its tarball's name
    inspection: Inspection  # of its files: its floor
    licenses: tuple[str, ...]
    bundled: tuple[Bundled, ...] = ()  # the libraries it carries (the portable repair's)
    buildinfo: BuildInfo | None = None  # its own BUILDINFO.txt, inputs only
    tarball: PackedFile | None = None
    smoke: str = ""  # the smoke test's verdict


Stage = Callable[[BuildState, Reporter], BuildState]


def preflight(state: BuildState, reporter: Reporter) -> BuildState:
    """Fail before fetching anything when the builder's toolchain cannot build this kit."""
    # The recipe is part of ninfer-kits (not of the matrix): a missing one is a broken install.
    recipe = resources.require(RECIPE, "the build recipe")
    recipe_sha256 = hash_file(recipe).sha256
    reporter.info(f"recipe {recipe} (sha256 {recipe_sha256[:12]})")
    toolchain = state.request.builder.preflight(state.request.kit, reporter)
    reporter.info(f"builder {toolchain.builder}: CUDA {toolchain.cuda_version} ({toolchain.nvcc})")
    return dataclasses.replace(state, toolchain=toolchain, recipe_sha256=recipe_sha256)


def fetch(state: BuildState, reporter: Reporter) -> BuildState:
    """The upstream at its revision, exported without .git; its commit time is the build's time."""
    request = state.request
    tree = fetch_source(request.kit.upstream, cache_dir=request.cache_dir,
                        dest=state.workspace / "source", revision=request.revision,
                        url=request.source_url, log=reporter.info)
    inputs = tree.template_inputs()
    tag, asset = request.kit.render_tag(inputs), request.kit.render_asset(inputs)
    reporter.info(f"{request.kit.upstream.repository} {tree.ref} @ {tree.revision[:12]}"
                  f"{f', VERSION {tree.version}' if tree.version else ''} → {tag}/{asset}")
    # Before the compile: a tag another kit's folder holds, or the same kit's of another
    # revision, stops the build now, not at the end (`--replace` lets the latter go on).
    kitdir.check_tag_free(request.dist_dir, tag, request.kit.id, revision=tree.revision,
                          replace_revision=request.replace)
    return dataclasses.replace(state, source=tree, tag=tag, asset=asset)


def compile_kit(state: BuildState, reporter: Reporter) -> BuildState:
    """Configure and build the upstream's targets with the recipe, on the chosen builder."""
    source = need(state.source, "source")
    request = CompileRequest(kit=state.request.kit, source=source.path,
                             workspace=state.workspace, jobs=state.request.jobs,
                             source_date_epoch=source.commit_time,
                             log=state.workspace / "build.log",
                             recipe=RECIPE)
    compiled = state.request.builder.compile(request, reporter)
    reporter.info(f"compiled in {compiled.report.compile_seconds} s with "
                  f"{compiled.report.jobs} jobs, {compiled.report.build_folder} build folder")
    return dataclasses.replace(state, compiled=compiled)


def assemble(state: BuildState, reporter: Reporter) -> BuildState:
    """kit/bin/ from the compile, and the upstream's licenses (Apache-2.0 requires them)."""
    compiled, source = need(state.compiled, "compiled"), need(state.source, "source")
    kit_root = state.workspace / "kit"
    if kit_root.exists():
        shutil.rmtree(kit_root)
    shutil.copytree(compiled.bin_dir, kit_root / "bin")
    licenses = copy_licenses(state.request.kit, source.path, kit_root)
    reporter.info(f"licenses: {', '.join(licenses)}")
    return dataclasses.replace(state, kit_root=kit_root, licenses=licenses)


def inspect_kit(state: BuildState, reporter: Reporter) -> BuildState:
    """Derive the floor, and refuse binaries that lack the kit's arch or carry another one."""
    kit_root = need(state.kit_root, "kit_root")
    inspection = inspect_path(kit_root / "bin")
    check_archs(state.request.kit, inspection)
    check_search_paths(inspection)
    plain = Flavour(name=kitdir.PLAIN, root=kit_root, asset=state.asset, inspection=inspection,
                    licenses=state.licenses)
    return dataclasses.replace(state, inspection=inspection, flavours=(plain,))


def repair_portable(state: BuildState, reporter: Reporter) -> BuildState:
    """For a kit with `portable = true`: a copy of the kit carrying every library its binaries
    load but glibc's and the driver's, found in the environment it was compiled in (the host,
    or the toolchain image), with RUNPATH $ORIGIN; its floor before and after."""
    kit = state.request.kit
    if not kit.portable:
        return state
    kit_root, inspection = need(state.kit_root, "kit_root"), need(state.inspection, "inspection")
    portable_root = state.workspace / "portable" / "kit"
    if portable_root.parent.exists():
        shutil.rmtree(portable_root.parent)
    shutil.copytree(kit_root, portable_root, symlinks=True)
    policy = load_policy()
    with state.request.builder.build_environment(kit, reporter,
                                                 state.request.cache_dir) as root:
        environment = (LibraryEnvironment.host(portable_root) if root == Path("/") else
                       LibraryEnvironment.exported(root))
        repaired = repair(portable_root, environment, policy, reporter.info)
    after = inspect_path(portable_root)
    check_search_paths(after)
    size = sum(item.size for item in repaired.bundled)
    reporter.info(f"bundled {len(repaired.bundled)} libraries ({size / 1e6:.1f} MB) in kit/lib")
    reporter.info("floor before the repair:\n" + render_table(inspection.floor.table))
    reporter.info("floor after the repair:\n" + render_table(after.floor.table))
    notices = sorted({item.notice for item in repaired.bundled} | {THIRD_PARTY_README})
    portable = Flavour(name=kitdir.PORTABLE.name, root=portable_root,
                       asset=kitdir.PORTABLE.asset(state.asset), inspection=after,
                       licenses=(*state.licenses, *notices), bundled=repaired.bundled)
    return dataclasses.replace(state, flavours=(*state.flavours, portable))


def start_smoke_test(state: BuildState, reporter: Reporter) -> BuildState:
    """Start the loader's trace of every flavour in the kit's runtime image (docker builder), in
    one container; it runs while the kit is packed, and `smoke verdict` waits for it."""
    compiled, background = need(state.compiled, "compiled"), need(state.background, "background")
    interpreter = next(iter(state.plain.inspection.floor.interpreters),
                       "/lib64/ld-linux-x86-64.so.2")
    roots = tuple(flavour.root for flavour in state.flavours)
    pending = background.submit(state.request.builder.smoke_test, state.request.kit, roots,
                                interpreter, compiled.log, reporter)
    return dataclasses.replace(state, smoke_pending=pending)


def smoke_verdict(state: BuildState, reporter: Reporter) -> BuildState:
    """Every library and symbol version resolved, for each flavour; else CheckFailed."""
    verdicts = need(state.smoke_pending, "smoke_pending").result()
    flavours = tuple(dataclasses.replace(flavour, smoke=verdict)
                     for flavour, verdict in zip(state.flavours, verdicts, strict=True))
    for flavour in flavours:
        which = "" if flavour.name == kitdir.PLAIN else f"of the {flavour.name} kit "
        reporter.info(f"smoke test {which}{flavour.smoke}")
    return dataclasses.replace(state, flavours=flavours)


def write_buildinfo(state: BuildState, reporter: Reporter) -> BuildState:
    """BUILDINFO.txt into the kit (inputs only); the run's own keys are added when published."""
    checkout = pipeline_checkout(state.request.project)
    # the plain kit's names each sibling it was built with (portable_asset)
    siblings: dict[str, Any] = {kind.key: flavour.asset for kind in kitdir.SIBLINGS
                                for flavour in state.flavours if flavour.name == kind.name}
    plain = dataclasses.replace(make_buildinfo(state), **siblings)
    flavours = tuple(dataclasses.replace(flavour, buildinfo=plain if flavour.name == kitdir.PLAIN
                                         else sibling_buildinfo(plain, flavour))
                     for flavour in state.flavours)
    for flavour in flavours:
        (flavour.root / kitdir.BUILDINFO).write_text(
            render(need(flavour.buildinfo, "buildinfo"), with_run=False), encoding="utf-8")
    return dataclasses.replace(state, checkout=checkout, flavours=flavours)


def pack(state: BuildState, reporter: Reporter) -> BuildState:
    """The deterministic tarball, hashed as it is written, in a staging folder beside dist/."""
    source, staging = need(state.source, "source"), need(state.staging, "staging")
    staging.mkdir(parents=True)
    flavours: list[Flavour] = []
    for flavour in state.flavours:
        progress = reporter.progress(f"packing {flavour.asset}")
        packed = pack_tree(flavour.root, staging / flavour.asset, mtime=source.commit_time,
                           progress=progress.bytes)
        if flavours:  # a sibling: its size beside the plain kit's
            plain = need(flavours[0].tarball, "tarball")
            reporter.info(f"{flavour.asset}: {packed.size:,} bytes, {state.asset}: "
                          f"{plain.size:,} bytes ({packed.size / plain.size:.1f}×)")
        flavours.append(dataclasses.replace(flavour, tarball=packed))
    return dataclasses.replace(state, flavours=tuple(flavours))


def checksums(state: BuildState, reporter: Reporter) -> BuildState:
    """BUILDINFO.txt beside the tarball (with this run's keys), the log, SHA256SUMS, SHA1SUMS."""
    staging, compiled = need(state.staging, "staging"), need(state.compiled, "compiled")
    info = need(state.plain.buildinfo, "buildinfo")
    published = dataclasses.replace(info, run=run_entries(state, compiled))
    buildinfo = write_file(staging / kitdir.BUILDINFO, render(published).encode("utf-8"))
    # Its mode fixed as every file of the folder: the umask must not decide it (repro found it).
    write_file(staging / kitdir.BUILD_LOG, compiled.log.read_bytes())
    tarballs = {flavour.asset: need(flavour.tarball, "tarball") for flavour in state.flavours}
    write_sha256sums(staging / kitdir.SHA256SUMS,
                     {**{name: packed.sha256 for name, packed in tarballs.items()},
                      kitdir.BUILDINFO: buildinfo.sha256})
    # B2 and older download clients verify by SHA-1; it comes from the same pass as the sha256.
    write_sha1sums(staging / kitdir.SHA1SUMS,
                   {name: packed.sha1 for name, packed in tarballs.items()})
    return state


def publish_to_dist(state: BuildState, reporter: Reporter) -> BuildState:
    """One rename puts the checked kit folder in place of the same kit's older one (of another
    revision only with --replace); another kit's folder under the same tag is refused, and a
    failed rename puts the older one back."""
    staging = need(state.staging, "staging")
    final = state.request.dist_dir / state.tag
    try:
        placed = kitdir.install(staging, state.request.dist_dir, state.tag,
                                state.request.kit.id, replace_revision=state.request.replace)
        if not state.request.keep_work:
            shutil.rmtree(state.workspace, ignore_errors=True)
    except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM once the rename was done:
        if final.is_dir() and not staging.exists():  # the kit is whole, and it says so
            interrupt.add_note(in_place(final))
        raise
    return dataclasses.replace(state, kit_dir=placed)


# The main job, in order. Each stage's docstring says what it adds.
STAGES: tuple[tuple[str, Stage], ...] = (
    ("preflight", preflight),
    ("fetch", fetch),
    ("compile", compile_kit),
    ("assemble", assemble),
    ("inspect", inspect_kit),
    ("repair", repair_portable),
    ("smoke", start_smoke_test),
    ("buildinfo", write_buildinfo),
    ("pack", pack),
    ("smoke verdict", smoke_verdict),
    ("checksums", checksums),
    ("dist", publish_to_dist),
)


def run_build(request: BuildRequest, reporter: Reporter) -> BuildState:
    started = time.monotonic()
    # Named before any stage runs, so that whatever fails, the cleanup knows what to remove.
    staging = request.dist_dir / f".staging-{request.kit.id}-{os.getpid()}"
    placed: KitDir | None = None
    try:
        with held_workspace(request.work_dir, request.kit.id) as workspace, \
                children.background() as background:  # stopped early on an interrupt
            state = BuildState(request=request, workspace=workspace, started=started,
                               staging=staging, background=background)
            try:
                for name, stage in STAGES:
                    with reporter.step(name):
                        state = stage(state, reporter)
                placed = state.kit_dir
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except KeyboardInterrupt as interrupt:  # after the last stage, as the work folder is let go
        if placed is not None:
            interrupt.add_note(in_place(placed.path))
        raise
    return state


# --------------------------------------------------------------------------- stage helpers


NVIDIA_SMI_TIMEOUT: Final = 10.0  # seconds; a stuck driver makes nvidia-smi hang for minutes
LISTED_CHANGES: Final = 20  # changed files of a dirty pipeline checkout named in BUILDINFO


def in_place(kit_folder: Path) -> str:
    """What an interrupt after the final rename says (the CLI adds it to "interrupted")."""
    return f"the kit was already in place, complete: {kit_folder}"


@contextmanager
def kit_in_place(kit_folder: Path) -> Iterator[None]:
    """An interrupt in the block comes after the kit was put in place: it says where."""
    try:
        yield
    except KeyboardInterrupt as interrupt:
        interrupt.add_note(in_place(kit_folder))
        raise


def copy_licenses(kit: Kit, source: Path, kit_root: Path) -> tuple[str, ...]:
    found = sorted({path for pattern in kit.upstream.licenses for path in source.glob(pattern)
                    if path.is_file()})
    names = tuple(str(path.relative_to(source)) for path in found)
    if not any(Path(name).name.upper().startswith(("LICENSE", "COPYING")) for name in names):
        raise CheckFailed(f"no license file found in {kit.upstream.repository} for patterns "
                          f"{', '.join(kit.upstream.licenses)}: a kit must carry the upstream's "
                          f"license")
    for name in names:
        target = kit_root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target)
    return tuple(f"kit/{name}" for name in names)


def check_archs(kit: Kit, inspection: Inspection) -> None:
    """Per kit: some file carries SASS for the kit's arch that the CUDA runtime loads (a helper
    without device code is fine), and no file carries loaded SASS or PTX for another arch (PTX
    of the same arch is allowed: compute_86 for sm_86, compute_120a for sm_120a). Relocatable
    entries (`__nv_relfatbin`, device-link inputs) do not give the kit its SASS, but their PTX
    is JIT-linked by the CUDA runtime when the SASS does not fit: it must be of the kit's arch."""
    allowed = {("sass", kit.arch), ("ptx", f"compute_{kit.arch.removeprefix('sm_')}")}
    floor = inspection.floor
    if kit.arch not in floor.sass:
        relocatable = describe_device_code(floor.relocatable)
        raise CheckFailed(
            f"kit {kit.id} carries no SASS for {kit.arch} that the CUDA runtime loads (loaded: "
            f"{', '.join((*floor.sass, *floor.ptx)) or 'no device code'}"
            + (f"; device-link inputs: {relocatable})" if relocatable else ")"))
    for info in inspection.files:
        loaded = {(entry.kind, entry.arch) for entry in info.device_code
                  if entry.kind == "ptx" or (entry.loadable and entry.kind == "sass")}
        extra = sorted(arch for _kind, arch in loaded - allowed)
        if extra:
            raise CheckFailed(f"{info.path} carries {', '.join(extra)}, which kit {kit.id} "
                              f"does not declare (it declares {kit.arch})")


def check_search_paths(inspection: Inspection) -> None:
    """No RUNPATH/RPATH entry may be empty or relative (other than $ORIGIN-based): the loader
    would search the directory the user happens to run the kit from."""
    for info in inspection.files:
        for kind, paths in (("RUNPATH", info.runpath), ("RPATH", info.rpath)):
            bad = [p for p in paths if not p.startswith(("/", "$ORIGIN", "${ORIGIN}"))]
            if bad:
                shown = ", ".join(repr(p) for p in bad)
                raise CheckFailed(f"{info.path}: {kind} {':'.join(paths)!r} has {shown}, which "
                                  f"the loader reads relative to the current directory")


def make_buildinfo(state: BuildState) -> BuildInfo:
    """The inputs' part of BUILDINFO.txt: what the kit's bytes depend on and nothing else (the
    pipeline checkout's commit is a run key: a README edit must not change the tarball)."""
    request, toolchain = state.request, need(state.toolchain, "toolchain")
    source, compiled, inspection = (need(state.source, "source"), need(state.compiled, "compiled"),
                                    need(state.inspection, "inspection"))
    kit, report, floor = request.kit, compiled.report, inspection.floor
    inputs = kit_inputs(kit, source.revision, recipe=state.recipe_sha256)
    return BuildInfo(
        kit=kit.id, card=kit.card, upstream=kit.upstream.repository, upstream_url=source.url,
        tracked_ref=source.ref, revision=source.revision, version=source.version or "",
        arch=kit.arch, cuda_version=report.nvcc_version or toolchain.cuda_version,
        host_compiler=report.cxx_compiler, cmake_version=report.cmake_version,
        cmake_options=" ".join(report.cmake_options),
        builder=toolchain.builder, toolchain=toolchain_field(toolchain.builder, kit.toolchain.id),
        base_image=toolchain.base_image or "none (built on the host)",
        base_image_digest=toolchain.base_image_digest or "none",
        source_date_epoch=source.commit_time, pipeline_version=__version__,
        recipe=need(state.recipe_sha256 or None, "recipe_sha256"),
        inputs=inputs.digest, input_parts=inputs.short_parts(),
        python_version=platform.python_version(),
        zlib_version=compressor(),  # the key's old name: older ninfer-kits still read the file
        sass=", ".join(floor.sass) or "none", ptx=", ".join(floor.ptx) or "none",
        relocatable_device_code=describe_device_code(floor.relocatable) or "none",
        **_flavour_keys(inspection, need(state.kit_root, "kit_root"), state.licenses),
    )


def sibling_buildinfo(plain: BuildInfo, sibling: Flavour) -> BuildInfo:
    """A sibling tarball's own BUILDINFO.txt (the portable one's): the plain kit's inputs, its
    own floor (the portable kit's: glibc and the driver, and the GPU), its binaries' hashes
    after the change, and each library it carries with its package and licence."""
    return dataclasses.replace(
        plain, flavour=sibling.name,
        bundled=tuple(_bundled_entry(item) for item in sibling.bundled),
        **_flavour_keys(sibling.inspection, sibling.root, sibling.licenses))


def _flavour_keys(inspection: Inspection, root: Path, licenses: tuple[str, ...]) -> dict[str, Any]:
    """The BUILDINFO keys each flavour has of its own: its floor, its binaries' hashes (kit/bin)
    and its licenses (the device code is the plain kit's in every flavour)."""
    floor = inspection.floor
    glibc = floor.floor("GLIBC")
    return dict(glibc_floor=glibc.version if glibc else "none",
                sonames=", ".join(floor.sonames), runpath=":".join(floor.runpath) or "none",
                symbol_floors=tuple(item.name for item in floor.prefix_floors),
                floor=tuple((row.requirement, row.why) for row in floor.table),
                binaries=tuple(_hashes_of(root / "bin")), licenses=licenses)


def _bundled_entry(item: Bundled) -> tuple[str, str, str, str, str]:
    origin = item.origin
    return (item.soname, item.sha256, f"{origin.package} {origin.version} ({origin.manager})",
            origin.license, item.notice)


def _hashes_of(bin_dir: Path) -> list[tuple[str, str]]:
    return [(hash_file(path).sha256, f"kit/bin/{path.name}") for path in sorted(bin_dir.iterdir())]


def run_entries(state: BuildState, compiled: Compiled) -> tuple[tuple[str, str], ...]:
    """The `run.` keys of the published BUILDINFO.txt: this run's, not the inputs'."""
    report = compiled.report
    driver, gpu = driver_and_gpu()
    checkout = need(state.checkout, "checkout")
    ccache = report.ccache
    return (
        ("jobs", str(report.jobs)),
        ("compile_seconds", str(report.compile_seconds)),
        ("configure_seconds", str(report.configure_seconds)),
        ("build_seconds", str(report.build_seconds)),
        ("build_folder", report.build_folder),
        ("wall_seconds", f"{time.monotonic() - state.started:.1f}"),
        ("driver", driver),
        ("gpu", gpu),
        ("smoke", state.plain.smoke),
        ("pipeline_revision", checkout.revision),
        *((("pipeline_changes", checkout.changes),) if checkout.changes else ()),
        *compiled.run_entries,
        *((("ccache_calls", str(ccache.calls)), ("ccache_hits", str(ccache.hits)),
           ("ccache_misses", str(ccache.misses)), ("ccache_uncacheable", str(ccache.uncacheable)),
           ("ccache_hit_rate", ccache.hit_rate)) if ccache else ()),
    )


def driver_and_gpu(timeout: float = nvidia_smi.TIMEOUT) -> tuple[str, str]:
    """The build machine's NVIDIA driver and first GPU, from nvidia-smi (which may hang)."""
    answer = nvidia_smi.query(("driver_version", "name"), timeout=timeout)
    if answer.absent:
        return "none (no nvidia-smi)", "none"
    if answer.timed_out:
        return f"unknown (nvidia-smi did not answer in {timeout:g} s)", "unknown"
    lines = answer.text.strip().splitlines()  # one a GPU: "580.159.04, NVIDIA H200"
    driver, _, gpu = (lines[0] if lines else "").partition(",")
    return (_one_line(driver) or "none", _one_line(gpu) or "none")


def _one_line(text: str) -> str:
    """A tool's answer as a BUILDINFO value: no control characters, whatever the tool printed."""
    return "".join(char if char.isprintable() else "?" for char in text).strip()


def pipeline_checkout(project: Path) -> PipelineCheckout:
    """The commit of the checkout that holds the matrix and builds the kit, and whether it has
    uncommitted changes (tracked or not, ignored files aside), so a kit names what made it."""
    try:
        head = probe(["git", "-C", str(project), "rev-parse", "HEAD"])
        status = probe(["git", "-C", str(project), "status", "--porcelain=v1", "-z",
                        "--untracked-files=all"], env=_git_env())
    except ProbeTimeout as error:
        raise EnvironmentFailure(f"reading the pipeline's revision: {error}") from None
    except FileNotFoundError:
        return PipelineCheckout("unknown (git is not installed)", "")
    if head.returncode != 0:
        return PipelineCheckout("unknown (not a git checkout)", "")
    sha = head.stdout.strip()
    changed = _changed_paths(status.stdout)
    if status.returncode != 0 or not changed:
        return PipelineCheckout(sha, "")
    shown = ", ".join(_one_line(name) for name in changed[:LISTED_CHANGES])
    more = len(changed) - LISTED_CHANGES
    return PipelineCheckout(f"{sha}-dirty", shown + (f" and {more} more" if more > 0 else ""))


def _changed_paths(porcelain: str) -> list[str]:
    """The paths of `git status --porcelain=v1 -z`: `XY path`, and after a rename or copy the
    source path as an entry of its own."""
    entries, paths = iter(porcelain.split("\0")), set()
    for entry in entries:
        if len(entry) < 4:
            continue
        paths.add(entry[3:])
        if entry[0] in "RC":
            next(entries, None)
    return sorted(paths)


def _git_env() -> dict[str, str]:
    # `status` must not take the index lock of a checkout someone is working in.
    return dict(os.environ, GIT_OPTIONAL_LOCKS="0")
