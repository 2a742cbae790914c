"""BUILDINFO.txt's values for a build: the inputs' keys, each flavour's own, and this run's (the
machine's driver and GPU, the commit of the checkout that builds the kit): docs/buildinfo.md."""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from pathlib import Path
from typing import Any, Final

from ninfer_kits import __version__
from ninfer_kits.errors import EnvironmentFailure
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.host import nvidia_smi
from ninfer_kits.host.children import ProbeTimeout, probe
from ninfer_kits.inspector.floor import describe_device_code
from ninfer_kits.inspector.inspection import Inspection
from ninfer_kits.kit import buildinfo
from ninfer_kits.kit.buildinfo import BuildInfo, toolchain_field
from ninfer_kits.matrix.inputs import kit_inputs
from ninfer_kits.pipeline.builders import Compiled, PreparedToolchain
from ninfer_kits.pipeline.pack import compressor
from ninfer_kits.pipeline.repair import Bundled
from ninfer_kits.pipeline.source import SourceTree
from ninfer_kits.pipeline.state import (
    Assembled,
    BuildRequest,
    Flavour,
    PipelineCheckout,
    Prepared,
)

LISTED_CHANGES: Final = 20  # changed files of a dirty pipeline checkout named in BUILDINFO


def make_buildinfo(request: BuildRequest, prepared: Prepared, source: SourceTree,
                   compiled: Compiled, assembled: Assembled, inspection: Inspection) -> BuildInfo:
    """The inputs' part of BUILDINFO.txt, and nothing else: the checkout's commit and the base's
    ID are run keys, so a README edit or a base made again does not change the tarball."""
    toolchain, kit = prepared.toolchain, request.kit
    report, floor = compiled.report, inspection.floor
    inputs = kit_inputs(kit, source.revision, recipe=prepared.recipe_sha256)
    return BuildInfo(
        kit=kit.id, card=kit.card, upstream=kit.upstream.repository, upstream_url=source.url,
        tracked_ref=source.ref, revision=source.revision, version=source.version or "",
        arch=kit.arch, cuda_version=report.nvcc_version or toolchain.cuda_version,
        host_compiler=report.cxx_compiler, cmake_version=report.cmake_version,
        cmake_options=" ".join(report.cmake_options),
        builder=toolchain.builder, toolchain=toolchain_field(toolchain.builder, kit.toolchain.id),
        base_image=toolchain.base_image or "none (built on the host)",
        source_date_epoch=source.commit_time, pipeline_version=__version__,
        recipe=prepared.recipe_sha256,
        inputs=inputs.digest, input_parts=inputs.short_parts(),
        python_version=platform.python_version(),
        zlib_version=compressor(),  # the key's old name: older ninfer-kits still read the file
        sass=", ".join(floor.sass) or "none", ptx=", ".join(floor.ptx) or "none",
        relocatable_device_code=describe_device_code(floor.relocatable) or "none",
        **_flavour_keys(inspection, assembled.kit_root, assembled.licenses),
    )


def sibling_buildinfo(plain: BuildInfo, sibling: Flavour) -> BuildInfo:
    """Another flavour's own BUILDINFO.txt: the plain kit's inputs, its own floor, binaries'
    hashes and licences, and each library it carries."""
    return dataclasses.replace(
        plain, flavour=sibling.name,
        bundled=tuple(_bundled_entry(item) for item in sibling.bundled),
        **_flavour_keys(sibling.inspection, sibling.root, sibling.licenses))


def _flavour_keys(inspection: Inspection, root: Path, licenses: tuple[str, ...]) -> dict[str, Any]:
    """The keys each flavour has of its own (the device code is the plain kit's in every one)."""
    floor = inspection.floor
    glibc = floor.floor("GLIBC")
    return dict(glibc_floor=glibc.version if glibc else "none",
                sonames=", ".join(floor.sonames), runpath=":".join(floor.runpath) or "none",
                symbol_floors=tuple(item.name for item in floor.prefix_floors),
                floor=tuple((row.requirement, row.why) for row in floor.table),
                binaries=tuple((hash_file(path).sha256, f"kit/bin/{path.name}")
                               for path in sorted((root / "bin").iterdir())),
                licenses=licenses)


def _bundled_entry(item: Bundled) -> tuple[str, str, str, str, str]:
    origin = item.origin
    return (item.soname, item.sha256,
            buildinfo.bundled_origin(origin.package, origin.version, origin.manager),
            origin.license, item.notice)


def run_entries(started: float, toolchain: PreparedToolchain, compiled: Compiled,
                checkout: PipelineCheckout, smoke: str) -> tuple[tuple[str, str], ...]:
    """The `run.` keys of the published BUILDINFO.txt (`started`: time.monotonic() at the start)."""
    report = compiled.report
    driver, gpu = driver_and_gpu()
    ccache = report.ccache
    return (
        ("jobs", str(report.jobs)),
        ("compile_seconds", str(report.compile_seconds)),
        ("configure_seconds", str(report.configure_seconds)),
        ("build_seconds", str(report.build_seconds)),
        ("build_folder", report.build_folder),
        ("wall_seconds", f"{time.monotonic() - started:.1f}"),
        ("driver", driver),
        ("gpu", gpu),
        ("smoke", smoke),
        ("pipeline_revision", checkout.revision),
        ("base_image_digest", toolchain.base_image_digest or "none"),
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
    """The commit of the checkout that builds the kit, `-dirty` with the changed files named."""
    try:
        head = probe(["git", "-C", str(project), "rev-parse", "HEAD"])
        status = probe(["git", "-C", str(project), "status", "--porcelain=v1", "-z",
                        "--untracked-files=all"],  # no index lock in a checkout in use
                       env=dict(os.environ, GIT_OPTIONAL_LOCKS="0"))
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
    """The paths of `git status --porcelain=v1 -z` (a rename's source is an entry of its own)."""
    entries, paths = iter(porcelain.split("\0")), set()
    for entry in entries:
        if len(entry) < 4:
            continue
        paths.add(entry[3:])
        if entry[0] in "RC":
            next(entries, None)
    return sorted(paths)
