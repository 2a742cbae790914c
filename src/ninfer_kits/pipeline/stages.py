"""The build: one matrix entry → a finished kit folder, dist/<release-tag>/ (ninfer_kits.kitdir).

STAGES is the whole program, in order: check the toolchain, fetch the upstream at its revision,
compile it with the recipe, assemble kit/ (binaries and licenses), inspect it (its floor; the
arch and search-path rules), make each sibling flavour (the portable repair), ship the licences
of the toolchain code compiled into the binaries (compiled-in), start the smoke
test, write each flavour's BUILDINFO.txt, pack the tarballs, wait for the smoke verdict, write
the checksums, and put the kit folder in dist/. Each stage (pipeline.stage_functions) takes the
state so far (pipeline.state) and returns it with its own result added. The kit is a tuple of
flavours (the plain kit, then a sibling such as the portable one, made by `repair`): every
stage after it loops over them, so a new flavour is one more entry. The build runs in the
kit's work folder, held by this process alone (pipeline.workspace); the kit folder is made in
a staging folder next to dist/<tag>/ and moved into place by one rename at the end
(kitdir.install), so dist/ never holds a partial kit, and never loses another kit's folder to
a tag they share.
"""

from __future__ import annotations

import os
import shutil
import time

from ninfer_kits import children
from ninfer_kits.kitdir import KitDir
from ninfer_kits.log import Reporter
from ninfer_kits.pipeline.stage_functions import (
    assemble,
    checksums,
    compile_kit,
    compiled_in,
    fetch,
    in_place,
    inspect_kit,
    pack,
    preflight,
    publish_to_dist,
    repair_portable,
    smoke_verdict,
    start_smoke_test,
    write_buildinfo,
)
from ninfer_kits.pipeline.state import BuildRequest, BuildState, Stage
from ninfer_kits.pipeline.workspace import held_workspace

STAGES: tuple[tuple[str, Stage], ...] = (
    ("preflight", preflight),
    ("fetch", fetch),
    ("compile", compile_kit),
    ("assemble", assemble),
    ("inspect", inspect_kit),
    ("repair", repair_portable),
    ("compiled-in", compiled_in),
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
