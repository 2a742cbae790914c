"""The build's runner: run_stages is the whole build, in order (docs/build.md lists the stages).
Each stage receives the results it needs, so one moved before its input fails the type check.
The kit folder is staged beside dist/<tag>/ and renamed into place: dist/ never holds half a kit."""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import Executor

from ninfer_kits.host import children
from ninfer_kits.kit.kitdir import KitDir
from ninfer_kits.log import Reporter
from ninfer_kits.pipeline.stage_functions import (
    assemble,
    checksums,
    compile_kit,
    compiled_in,
    fetch,
    in_place,
    inspect_kit,
    make_flavours,
    pack,
    preflight,
    publish_to_dist,
    smoke_verdict,
    start_smoke_test,
    write_buildinfo,
)
from ninfer_kits.pipeline.state import BuildContext, BuildRequest, Built
from ninfer_kits.pipeline.workspace import held_workspace


def run_build(request: BuildRequest, reporter: Reporter) -> Built:
    started = time.monotonic()
    # Named before any stage runs, so that whatever fails, the cleanup knows what to remove.
    staging = request.dist_dir / f".staging-{request.kit.id}-{os.getpid()}"
    placed: KitDir | None = None
    try:
        with held_workspace(request.work_dir, request.kit.id) as workspace, \
                children.background() as background:  # stopped early on an interrupt
            build = BuildContext(request=request, workspace=workspace, staging=staging,
                                 started=started, reporter=reporter)
            try:
                built = run_stages(build, background)
                placed = built.kit_dir
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except KeyboardInterrupt as interrupt:  # after the last stage, as the work folder is let go
        if placed is not None:
            interrupt.add_note(in_place(placed.path))
        raise
    return built


def run_stages(build: BuildContext, background: Executor) -> Built:
    """Every stage in order, each a progress step; `background` runs the smoke test."""
    prepared = build.step("preflight", preflight)
    fetched = build.step("fetch", fetch)
    compiled = build.step("compile", compile_kit, fetched.source)
    assembled = build.step("assemble", assemble, compiled, fetched.source)
    plain = build.step("inspect", inspect_kit, prepared.toolchain, assembled, fetched.asset)
    repaired = build.step("repair", make_flavours, prepared.toolchain, plain, fetched.tag)
    flavours = build.step("compiled-in", compiled_in, compiled, repaired)
    smoke = build.step("smoke", start_smoke_test, background, compiled, flavours)
    recorded = build.step("buildinfo", write_buildinfo, prepared, fetched.source, compiled,
                          assembled, flavours)
    packed = build.step("pack", pack, fetched.source, recorded, flavours)
    verdicts = build.step("smoke verdict", smoke_verdict, smoke, flavours)
    staged = build.step("checksums", checksums, prepared.toolchain, compiled, recorded, packed,
                        verdicts)
    kit_dir = build.step("dist", publish_to_dist, staged, fetched.tag)
    return Built(kit_dir=kit_dir, inspection=plain.inspection)
