"""What each stage of the build does (pipeline.stages runs them in order): each takes the build and
the results it needs, and returns its own."""

from __future__ import annotations

import dataclasses
import importlib
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from pathlib import Path

from ninfer_kits.config import resources
from ninfer_kits.errors import CheckFailed
from ninfer_kits.files.atomic import hash_file, write_file
from ninfer_kits.inspector.compiled_in import DEPS_FILE, device_sources, outside, read_deps
from ninfer_kits.inspector.floor import render_table
from ninfer_kits.inspector.inspection import Inspection, inspect_path
from ninfer_kits.kit import attestations, kitdir, owed_sources
from ninfer_kits.kit.buildinfo import BuildInfo, render
from ninfer_kits.kit.flavours import PLAIN, PORTABLE, FlavourKind, beside
from ninfer_kits.kit.kitdir import KitDir
from ninfer_kits.kit.owed_sources import SourceFile
from ninfer_kits.matrix import Kit
from ninfer_kits.pipeline.builders import RECIPE, Compiled, CompileRequest, PreparedToolchain
from ninfer_kits.pipeline.buildinfo_keys import (
    make_buildinfo,
    pipeline_checkout,
    run_entries,
    sibling_buildinfo,
)
from ninfer_kits.pipeline.bundled_licences import bundled_licences, write_bundled_licences
from ninfer_kits.pipeline.compiled_in import find_licences, load_table, write_licences
from ninfer_kits.pipeline.copyleft import (
    SOURCES,
    built_sources,
    classify,
    load_verdicts,
    owed_record,
    readme_section,
)
from ninfer_kits.pipeline.kit_rules import (
    check_archs,
    check_glibc_floor,
    check_search_paths,
    copy_licenses,
)
from ninfer_kits.pipeline.pack import pack_kit
from ninfer_kits.pipeline.portable_policy import load_policy
from ninfer_kits.pipeline.repair import THIRD_PARTY_README, LibraryEnvironment, repair
from ninfer_kits.pipeline.source import SourceTree, fetch_source
from ninfer_kits.pipeline.state import (
    Assembled,
    BuildContext,
    Fetched,
    Flavour,
    FlavourMaker,
    Packed,
    Prepared,
    Recorded,
    Staged,
)
from ninfer_kits.release.checksums import write_sha1sums, write_sha256sums


def preflight(build: BuildContext) -> Prepared:
    """Fail before fetching anything when the builder's toolchain cannot build this kit."""
    # The recipe is part of ninfer-kits (not of the matrix): a missing one is a broken install.
    recipe = resources.require(RECIPE, "the build recipe")
    recipe_sha256 = hash_file(recipe).sha256
    reporter = build.reporter
    reporter.info(f"recipe {recipe} (sha256 {recipe_sha256[:12]})")
    toolchain = build.request.builder.preflight(build.request.kit, reporter)
    reporter.info(f"builder {toolchain.builder}: CUDA {toolchain.cuda_version} ({toolchain.nvcc})")
    return Prepared(toolchain=toolchain, recipe_sha256=recipe_sha256)


def fetch(build: BuildContext) -> Fetched:
    """The upstream at its revision, exported without .git; its commit time is the build's time."""
    request = build.request
    tree = fetch_source(request.kit.upstream, cache_dir=request.cache_dir,
                        dest=build.workspace / "source", revision=request.revision,
                        url=request.source_url, log=build.reporter.info)
    inputs = tree.template_inputs()
    tag, asset = request.kit.render_tag(inputs), request.kit.render_asset(inputs)
    build.reporter.info(f"{request.kit.upstream.repository} {tree.ref} @ {tree.revision[:12]}"
                  f"{f', VERSION {tree.version}' if tree.version else ''} → {tag}/{asset}")
    # Before the compile: a tag another kit's folder holds, or the same kit's of another
    # revision, stops the build now, not at the end (`--replace` lets the latter go on).
    kitdir.check_tag_free(request.dist_dir, tag, request.kit.id, revision=tree.revision,
                          replace_revision=request.replace)
    return Fetched(source=tree, tag=tag, asset=asset)


def compile_kit(build: BuildContext, source: SourceTree) -> Compiled:
    request = CompileRequest(kit=build.request.kit, source=source.path,
                             workspace=build.workspace, jobs=build.request.jobs,
                             source_date_epoch=source.commit_time,
                             log=build.workspace / "build.log",
                             recipe=RECIPE, cache_dir=build.request.cache_dir)
    compiled = build.request.builder.compile(request, build.reporter)
    build.reporter.info(f"compiled in {compiled.report.compile_seconds} s with "
                        f"{compiled.report.jobs} jobs, {compiled.report.build_folder} build folder")
    return compiled


def assemble(build: BuildContext, compiled: Compiled, source: SourceTree) -> Assembled:
    """kit/bin/ from the compile, and the upstream's licenses (Apache-2.0 requires them)."""
    kit_root = build.workspace / "kit"
    if kit_root.exists():
        shutil.rmtree(kit_root)
    shutil.copytree(compiled.bin_dir, kit_root / "bin")
    licenses = copy_licenses(build.request.kit, source.path, kit_root)
    build.reporter.info(f"licenses: {', '.join(licenses)}")
    return Assembled(kit_root=kit_root, licenses=licenses)


def inspect_kit(build: BuildContext, toolchain: PreparedToolchain, assembled: Assembled,
                asset: str) -> Flavour:
    """Derive the floor, and refuse binaries that lack the kit's arch or carry another one."""
    inspection = inspect_path(assembled.kit_root / "bin")
    check_archs(build.request.kit, inspection)
    check_search_paths(inspection)
    _check_glibc_floor(build.request.kit, toolchain, inspection, PLAIN)
    return Flavour(name=PLAIN, root=assembled.kit_root, asset=asset,
                   inspection=inspection, licenses=assembled.licenses)


def make_flavours(build: BuildContext, toolchain: PreparedToolchain, plain: Flavour,
                  tag: str) -> tuple[Flavour, ...]:
    """The plain kit, then each flavour the kit is built with, made by its `make` step."""
    return (plain, *(_maker(kind)(build, toolchain, plain, tag) for kind in beside()
                     if kind.built_for(build.request.kit)))


def _maker(kind: FlavourKind) -> FlavourMaker:
    module, _, name = kind.make.partition(":")
    maker: FlavourMaker = getattr(importlib.import_module(module), name)
    return maker


def repair_portable(build: BuildContext, toolchain: PreparedToolchain, plain: Flavour,
                    tag: str) -> Flavour:
    """The portable flavour (a FlavourMaker): a copy of the kit carrying every library it loads
    but glibc's and the driver's; its floor before and after."""
    kit, reporter = build.request.kit, build.reporter
    portable_root = build.workspace / "portable" / "kit"
    if portable_root.parent.exists():
        shutil.rmtree(portable_root.parent)
    shutil.copytree(plain.root, portable_root, symlinks=True)
    policy = load_policy()
    with build.request.builder.build_environment(kit, reporter,
                                                 build.request.cache_dir) as root:
        environment = (LibraryEnvironment.host(portable_root) if root == Path("/") else
                       LibraryEnvironment.exported(root))
        repaired = repair(portable_root, environment, policy, reporter.info)
        # the source owed is recorded while the environment is at hand; publish fetches it
        verdicts = load_verdicts()
        obligations = classify((item.origin for item in repaired.bundled), root, verdicts)
        licences = write_bundled_licences(
            portable_root, bundled_licences(repaired.bundled, root, verdicts))
        owed = owed_record(obligations, root)
        # without a cache folder, the work folder (dropped after the build) holds them
        store = build.request.cache_dir or build.workspace
        sources = built_sources(obligations.built, environment.facts, root, store)
    with (portable_root / THIRD_PARTY_README.removeprefix("kit/")).open("a",
                                                                       encoding="utf-8") as readme:
        readme.write(readme_section(obligations, tag))
    after = inspect_path(portable_root)
    check_search_paths(after)
    _check_glibc_floor(kit, toolchain, after, PORTABLE.name)
    size = sum(item.size for item in repaired.bundled)
    reporter.info(f"bundled {len(repaired.bundled)} libraries ({size / 1e6:.1f} MB) in kit/lib")
    reporter.info(f"copyleft: {len(owed.packages)} Debian source packages owed, recorded in "
                  f"{owed_sources.RECORD}; publish fetches them"
                  + (f"; {len(sources)} files of {len(obligations.built)} built in the toolchain "
                     f"image, in {SOURCES}/" if obligations.built else ""))
    reporter.info("floor before the repair:\n" + render_table(plain.inspection.floor.table))
    reporter.info("floor after the repair:\n" + render_table(after.floor.table))
    notices = sorted({item.notice for item in repaired.bundled} | {THIRD_PARTY_README, licences})
    return Flavour(name=PORTABLE.name, root=portable_root, asset=PORTABLE.asset(plain.asset),
                   inspection=after, licenses=(*plain.licenses, *notices),
                   bundled=repaired.bundled, sources=sources,
                   owed=owed if owed.packages else None)


def _check_glibc_floor(kit: Kit, toolchain: PreparedToolchain, inspection: Inspection,
                       flavour: str) -> None:
    """Only in a toolchain image: the local builder compiles with this host's own glibc."""
    if toolchain.image:
        check_glibc_floor(kit.toolchain, inspection, flavour)


def compiled_in(build: BuildContext, compiled: Compiled,
                flavours: tuple[Flavour, ...]) -> tuple[Flavour, ...]:
    """The licences of code compiled in from outside the upstream, in each kit/third_party/."""
    kit, reporter = build.request.kit, build.reporter
    deps = read_deps(compiled.bin_dir.parent.parent / DEPS_FILE)
    found = outside(device_sources(flavours[0].root / "bin"), deps)
    table = load_table()
    with build.request.builder.build_environment(kit, reporter,
                                                 build.request.cache_dir) as root:
        rows, texts = find_licences(found, root, table)
    device = sum(1 for where in found.values() if "device" in where)
    reporter.info(f"compiled in from outside {kit.upstream.repository}: {len(found)} files "
                  f"({device} in device code) of {len({r.package for r in rows})} packages: "
                  f"{', '.join(sorted({f'{r.package} ({r.licence})' for r in rows}))}")
    return tuple(dataclasses.replace(flavour, licenses=tuple(sorted(
        {*flavour.licenses, *write_licences(flavour.root, rows, texts,
                                            kit.upstream.repository)})))
        for flavour in flavours)


def start_smoke_test(build: BuildContext, background: Executor, compiled: Compiled,
                     flavours: tuple[Flavour, ...]) -> Future[tuple[str, ...]]:
    """The loader's trace of every flavour, started in `background` while the kit is packed."""
    interpreter = next(iter(flavours[0].inspection.floor.interpreters),
                       "/lib64/ld-linux-x86-64.so.2")
    roots = tuple(flavour.root for flavour in flavours)
    return background.submit(build.request.builder.smoke_test, build.request.kit, roots,
                             interpreter, compiled.log, build.reporter)


def smoke_verdict(build: BuildContext, pending: Future[tuple[str, ...]],
                  flavours: tuple[Flavour, ...]) -> tuple[str, ...]:
    """The smoke test's verdicts, in the flavours' order; else CheckFailed."""
    verdicts = pending.result()
    for flavour, verdict in zip(flavours, verdicts, strict=True):
        which = "" if flavour.name == PLAIN else f"of the {flavour.name} kit "
        build.reporter.info(f"smoke test {which}{verdict}")
    return verdicts


def write_buildinfo(build: BuildContext, prepared: Prepared, source: SourceTree,
                    compiled: Compiled, assembled: Assembled,
                    flavours: tuple[Flavour, ...]) -> Recorded:
    """BUILDINFO.txt into the kit (inputs only); the run's own keys are added when published."""
    checkout = pipeline_checkout(build.request.project)
    # the plain kit's names the other flavours' tarballs (`<flavour>_asset`)
    plain = dataclasses.replace(
        make_buildinfo(build.request, prepared, source, compiled, assembled,
                       flavours[0].inspection),
        flavour_assets=tuple((flavour.name, flavour.asset) for flavour in flavours[1:]))
    buildinfos = tuple(plain if flavour.name == PLAIN
                       else sibling_buildinfo(plain, flavour) for flavour in flavours)
    for flavour, info in zip(flavours, buildinfos, strict=True):
        (flavour.root / kitdir.BUILDINFO).write_text(render(info, with_run=False),
                                                      encoding="utf-8")
    return Recorded(buildinfos=buildinfos, checkout=checkout)


def pack(build: BuildContext, source: SourceTree, recorded: Recorded,
         flavours: tuple[Flavour, ...]) -> tuple[Packed, ...]:
    """Each flavour's deterministic tarball, hashed as written, in the staging folder."""
    build.staging.mkdir(parents=True)
    packed: list[Packed] = []
    for flavour, info in zip(flavours, recorded.buildinfos, strict=True):
        progress = build.reporter.progress(f"packing {flavour.asset}")
        tarball = pack_kit(flavour.root, build.staging / flavour.asset, mtime=source.commit_time,
                           progress=progress.bytes)
        if packed:  # another flavour: its size beside the plain kit's
            plain = packed[0]
            build.reporter.info(f"{flavour.asset}: {tarball.size:,} bytes, "
                                f"{plain.flavour.asset}: {plain.tarball.size:,} bytes "
                                f"({tarball.size / plain.tarball.size:.1f}×)")
        packed.append(Packed(flavour=flavour, buildinfo=info, tarball=tarball))
    return tuple(packed)


def checksums(build: BuildContext, toolchain: PreparedToolchain, compiled: Compiled,
              recorded: Recorded, packed: tuple[Packed, ...], verdicts: tuple[str, ...]) -> Staged:
    """BUILDINFO.txt with the run's keys, the log, each tarball's SBOM and provenance, the sums."""
    staging = build.staging
    run = run_entries(build.started, toolchain, compiled, recorded.checkout, verdicts[0])
    published = dataclasses.replace(packed[0].buildinfo, run=run)
    buildinfo = write_file(staging / kitdir.BUILDINFO, render(published).encode("utf-8"))
    # Its mode fixed as every file of the folder: the umask must not decide it (repro found it).
    write_file(staging / kitdir.BUILD_LOG, compiled.log.read_bytes())
    tarballs = {each.flavour.asset: each.tarball for each in packed}
    documents = {name: write_file(staging / name, data).sha256
                 for each in packed for name, data in _attestations(each, published).items()}
    flavours = [each.flavour for each in packed]
    sources = place_sources(staging, [item for flavour in flavours for item in flavour.sources])
    owing = [flavour.owed for flavour in flavours if flavour.owed is not None]
    owed = {owed_sources.RECORD: write_file(staging / owed_sources.RECORD,
                                            owed_sources.render(owing[0])).sha256} \
        if owing else {}
    write_sha256sums(staging / kitdir.SHA256SUMS,
                     {**{name: tarball.sha256 for name, tarball in tarballs.items()},
                      kitdir.BUILDINFO: buildinfo.sha256, **documents, **sources, **owed})
    # B2 and older download clients verify by SHA-1; it comes from the same pass as the sha256.
    write_sha1sums(staging / kitdir.SHA1SUMS,
                   {name: tarball.sha1 for name, tarball in tarballs.items()})
    return Staged(staging)


def _attestations(packed: Packed, published: BuildInfo) -> dict[str, bytes]:
    """The SBOM and provenance of one tarball (its BUILDINFO with the published run keys)."""
    info = dataclasses.replace(packed.buildinfo, run=published.run)
    flavour = packed.flavour
    texts = attestations.licence_texts(
        info, lambda path: (flavour.root / path.removeprefix(f"{kitdir.UNPACKED}/")).read_bytes())
    listed = flavour.root / attestations.COMPILED_IN
    rows = attestations.read_compiled_in(listed.read_bytes(), str(listed)) \
        if listed.exists() else ()
    subject = attestations.Subject(asset=flavour.asset, sha256=packed.tarball.sha256)
    return attestations.documents(subject, info, texts, rows)


def place_sources(staging: Path, files: list[SourceFile]) -> dict[str, str]:
    """The copyleft sources in staging/sources/ (hard links where it can), rechecked; name → sha."""
    listed: dict[str, str] = {}
    for item in files:
        dest = staging / SOURCES / item.name
        if f"{SOURCES}/{item.name}" in listed:
            continue  # two flavours carrying the same library: one file
        dest.parent.mkdir(exist_ok=True)
        try:
            os.link(item.path, dest)
        except OSError:
            shutil.copyfile(item.path, dest)
        os.chmod(dest, 0o644)  # as every file of the folder: the umask must not decide it
        placed = hash_file(dest)
        if placed.sha256 != item.sha256:
            raise CheckFailed(f"{dest}: sha256 {placed.sha256}, but {item.path} was checked "
                              f"as {item.sha256} against Debian's archive")
        listed[f"{SOURCES}/{item.name}"] = item.sha256
    return listed


def publish_to_dist(build: BuildContext, staged: Staged, tag: str) -> KitDir:
    """One rename puts the kit folder in place (dist/<tag>/ rules: kitdir.install)."""
    request = build.request
    final = request.dist_dir / tag
    try:
        placed = kitdir.install(staged.folder, request.dist_dir, tag, request.kit.id,
                                replace_revision=request.replace)
        if not request.keep_work:
            shutil.rmtree(build.workspace, ignore_errors=True)
    except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM once the rename was done:
        if final.is_dir() and not staged.folder.exists():  # the kit is whole, and it says so
            interrupt.add_note(in_place(final))
        raise
    return placed


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
