"""What each stage of the build does (the table in order is pipeline.stages): each takes the
state so far and returns it with its own result added; its docstring says what."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ninfer_kits import attestations, kitdir, owed_sources, resources
from ninfer_kits.atomic import hash_file, write_file
from ninfer_kits.buildinfo import BuildInfo, render
from ninfer_kits.checksums import write_sha1sums, write_sha256sums
from ninfer_kits.errors import CheckFailed, need
from ninfer_kits.inspector.compiled_in import DEPS_FILE, device_sources, outside, read_deps
from ninfer_kits.inspector.floor import render_table
from ninfer_kits.inspector.inspection import Inspection, inspect_path
from ninfer_kits.log import Reporter
from ninfer_kits.owed_sources import SourceFile
from ninfer_kits.pipeline.builders import RECIPE, CompileRequest
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
from ninfer_kits.pipeline.source import fetch_source
from ninfer_kits.pipeline.state import BuildState, Flavour


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
                             recipe=RECIPE, cache_dir=state.request.cache_dir)
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
    _check_glibc_floor(state, inspection, kitdir.PLAIN)
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
        # A library whose licence owes its source is distributed only with that source:
        # the build records which (and where from, while the environment's apt sources and
        # keys are at hand); publish fetches them. No network here.
        verdicts = load_verdicts()
        obligations = classify((item.origin for item in repaired.bundled), root, verdicts)
        # the SBOM's SPDX licence of each library: the verdict on its source package
        licences = write_bundled_licences(
            portable_root, bundled_licences(repaired.bundled, root, verdicts))
        owed = owed_record(obligations, root)
        # without a cache folder, the work folder (dropped after the build) holds them
        store = state.request.cache_dir or state.workspace
        sources = built_sources(obligations.built, environment.facts, root, store)
    with (portable_root / THIRD_PARTY_README.removeprefix("kit/")).open("a",
                                                                       encoding="utf-8") as readme:
        readme.write(readme_section(obligations, state.tag))
    after = inspect_path(portable_root)
    check_search_paths(after)
    _check_glibc_floor(state, after, kitdir.PORTABLE.name)
    size = sum(item.size for item in repaired.bundled)
    reporter.info(f"bundled {len(repaired.bundled)} libraries ({size / 1e6:.1f} MB) in kit/lib")
    reporter.info(f"copyleft: {len(owed.packages)} Debian source packages owed, recorded in "
                  f"{owed_sources.RECORD}; publish fetches them"
                  + (f"; {len(sources)} files of {len(obligations.built)} built in the toolchain "
                     f"image, in {SOURCES}/" if obligations.built else ""))
    reporter.info("floor before the repair:\n" + render_table(inspection.floor.table))
    reporter.info("floor after the repair:\n" + render_table(after.floor.table))
    notices = sorted({item.notice for item in repaired.bundled} | {THIRD_PARTY_README, licences})
    portable = Flavour(name=kitdir.PORTABLE.name, root=portable_root,
                       asset=kitdir.PORTABLE.asset(state.asset), inspection=after,
                       licenses=(*state.licenses, *notices), bundled=repaired.bundled,
                       sources=sources, owed=owed if owed.packages else None)
    return dataclasses.replace(state, flavours=(*state.flavours, portable))


def _check_glibc_floor(state: BuildState, inspection: Inspection, flavour: str) -> None:
    """Against the toolchain's glibc floor, when the kit was compiled in its image (the local
    builder compiles with this host's own compilers and glibc)."""
    if need(state.toolchain, "toolchain").image:
        check_glibc_floor(state.request.kit.toolchain, inspection, flavour)


def compiled_in(state: BuildState, reporter: Reporter) -> BuildState:
    """The files from outside the upstream's tree that reached the binaries (the cubins' line
    tables, the compile's dependency output), their packages in the build environment, and those
    packages' licence texts in kit/third_party/ of every flavour, listed in its README."""
    compiled, kit = need(state.compiled, "compiled"), state.request.kit
    deps = read_deps(compiled.bin_dir.parent.parent / DEPS_FILE)
    found = outside(device_sources(state.plain.root / "bin"), deps)
    table = load_table()
    with state.request.builder.build_environment(kit, reporter,
                                                 state.request.cache_dir) as root:
        rows, texts = find_licences(found, root, table)
    device = sum(1 for where in found.values() if "device" in where)
    reporter.info(f"compiled in from outside {kit.upstream.repository}: {len(found)} files "
                  f"({device} in device code) of {len({r.package for r in rows})} packages: "
                  f"{', '.join(sorted({f'{r.package} ({r.licence})' for r in rows}))}")
    flavours = tuple(dataclasses.replace(flavour, licenses=tuple(sorted(
        {*flavour.licenses, *write_licences(flavour.root, rows, texts,
                                            kit.upstream.repository)})))
        for flavour in state.flavours)
    return dataclasses.replace(state, flavours=flavours, compiled_in=rows)


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
    """The deterministic tarball of each flavour, with kit/MANIFEST.json in it (its own list of
    its files), hashed as it is written, in a staging folder beside dist/."""
    source, staging = need(state.source, "source"), need(state.staging, "staging")
    staging.mkdir(parents=True)
    flavours: list[Flavour] = []
    for flavour in state.flavours:
        progress = reporter.progress(f"packing {flavour.asset}")
        packed = pack_kit(flavour.root, staging / flavour.asset, mtime=source.commit_time,
                          progress=progress.bytes)
        if flavours:  # a sibling: its size beside the plain kit's
            plain = need(flavours[0].tarball, "tarball")
            reporter.info(f"{flavour.asset}: {packed.size:,} bytes, {state.asset}: "
                          f"{plain.size:,} bytes ({packed.size / plain.size:.1f}×)")
        flavours.append(dataclasses.replace(flavour, tarball=packed))
    return dataclasses.replace(state, flavours=tuple(flavours))


def checksums(state: BuildState, reporter: Reporter) -> BuildState:
    """BUILDINFO.txt beside the tarball (with this run's keys), the log, each tarball's SBOM
    and provenance (ninfer_kits.attestations), SHA256SUMS, SHA1SUMS."""
    staging, compiled = need(state.staging, "staging"), need(state.compiled, "compiled")
    info = need(state.plain.buildinfo, "buildinfo")
    published = dataclasses.replace(info, run=run_entries(state, compiled))
    buildinfo = write_file(staging / kitdir.BUILDINFO, render(published).encode("utf-8"))
    # Its mode fixed as every file of the folder: the umask must not decide it (repro found it).
    write_file(staging / kitdir.BUILD_LOG, compiled.log.read_bytes())
    tarballs = {flavour.asset: need(flavour.tarball, "tarball") for flavour in state.flavours}
    documents = {name: write_file(staging / name, data).sha256
                 for flavour in state.flavours
                 for name, data in _attestations(flavour, published).items()}
    sources = place_sources(staging, [item for flavour in state.flavours
                                      for item in flavour.sources])
    owing = [flavour.owed for flavour in state.flavours if flavour.owed is not None]
    owed = {owed_sources.RECORD: write_file(staging / owed_sources.RECORD,
                                            owed_sources.render(owing[0])).sha256} \
        if owing else {}
    write_sha256sums(staging / kitdir.SHA256SUMS,
                     {**{name: packed.sha256 for name, packed in tarballs.items()},
                      kitdir.BUILDINFO: buildinfo.sha256, **documents, **sources, **owed})
    # B2 and older download clients verify by SHA-1; it comes from the same pass as the sha256.
    write_sha1sums(staging / kitdir.SHA1SUMS,
                   {name: packed.sha1 for name, packed in tarballs.items()})
    return state


def _attestations(flavour: Flavour, published: BuildInfo) -> dict[str, bytes]:
    """The SBOM and provenance of one tarball, from its own BUILDINFO.txt (with the run keys of
    the one beside the tarballs: the toolchain image) and the licence texts in its kit/."""
    info = dataclasses.replace(need(flavour.buildinfo, "buildinfo"), run=published.run)
    packed = need(flavour.tarball, "tarball")
    texts = attestations.licence_texts(
        info, lambda path: (flavour.root / path.removeprefix(f"{kitdir.UNPACKED}/")).read_bytes())
    listed = flavour.root / attestations.COMPILED_IN
    rows = attestations.read_compiled_in(listed.read_bytes(), str(listed)) \
        if listed.exists() else ()
    return attestations.documents(attestations.Subject(asset=flavour.asset, sha256=packed.sha256),
                                  info, texts, rows)


def place_sources(staging: Path, files: list[SourceFile]) -> dict[str, str]:
    """The copyleft libraries' source files in staging/sources/ (hard links to the cache where
    it can, copies else), rechecked as they are placed: sources/<name> → sha256."""
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
