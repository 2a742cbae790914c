"""What the build's stages hand on: the request, the build under way, each stage's own result.
Frozen, and passed as arguments, so a stage moved before its input fails the type check."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from ninfer_kits.files.atomic import PackedFile
from ninfer_kits.inspector.inspection import Inspection
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.kit.kitdir import KitDir
from ninfer_kits.kit.owed_sources import OwedSources, SourceFile
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Kit
from ninfer_kits.pipeline.builders import Builder, PreparedToolchain
from ninfer_kits.pipeline.repair import Bundled
from ninfer_kits.pipeline.source import SourceTree

P = ParamSpec("P")
R = TypeVar("R")


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


@dataclass(frozen=True, kw_only=True)
class BuildContext:
    """What every stage may use, there before the first one runs."""

    request: BuildRequest
    workspace: Path  # the kit's work folder, held by this build alone
    staging: Path  # beside dist/<tag>/: `pack` makes it, `dist` renames it into place
    started: float  # time.monotonic() at the start (BUILDINFO's run.wall_seconds)
    reporter: Reporter

    def step(self, name: str, stage: Callable[Concatenate[BuildContext, P], R],
             *args: P.args, **kwargs: P.kwargs) -> R:
        with self.reporter.step(name):
            return stage(self, *args, **kwargs)


@dataclass(frozen=True)
class PipelineCheckout:
    revision: str  # the commit; `<sha>-dirty` when files differ from it
    changes: str  # the files that differ (at most LISTED_CHANGES named), or ""


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """`preflight`'s: the toolchain, and build/recipe.py's sha256 (BUILDINFO's `recipe`)."""

    toolchain: PreparedToolchain
    recipe_sha256: str


@dataclass(frozen=True, kw_only=True)
class Fetched:
    """`fetch`'s: the upstream's tree, and the tag and tarball name its template inputs give."""

    source: SourceTree
    tag: str
    asset: str


@dataclass(frozen=True, kw_only=True)
class Assembled:
    """`assemble`'s: kit/ with the compiled binaries and the upstream's licence files."""

    kit_root: Path
    licenses: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """One tarball of the kit as it is built: the plain kit, or a flavour made from it
    (flavours.KINDS). Every stage after `repair` loops over them, the plain one first."""

    name: str  # flavours.PLAIN or another flavour's: the `flavour` of its own BUILDINFO.txt
    root: Path  # its kit/ folder
    asset: str  # its tarball's name
    inspection: Inspection  # of its files: its floor
    licenses: tuple[str, ...]
    bundled: tuple[Bundled, ...] = ()  # the libraries it carries (the portable repair's)
    sources: tuple[SourceFile, ...] = ()  # the copyleft ones' source packages, published beside
    # the Debian source packages it owes, recorded for publish to fetch (SOURCES.json)
    owed: OwedSources | None = None


# A flavour's make step (flavours.FlavourKind.make): the build, its toolchain, the plain kit and
# the release tag in, that flavour's tarball-to-be out (pipeline.stage_functions.make_flavours).
FlavourMaker = Callable[[BuildContext, PreparedToolchain, Flavour, str], Flavour]


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """`buildinfo`'s: each flavour's BUILDINFO.txt (inputs only), and the checkout's state."""

    buildinfos: tuple[BuildInfo, ...]
    checkout: PipelineCheckout


@dataclass(frozen=True, kw_only=True)
class Packed:
    """One flavour's tarball in the staging folder (`pack`'s), with the BUILDINFO.txt in it."""

    flavour: Flavour
    buildinfo: BuildInfo
    tarball: PackedFile


@dataclass(frozen=True)
class Staged:
    """`checksums`': the staging folder, complete, that `dist` puts in place."""

    folder: Path


@dataclass(frozen=True, kw_only=True)
class Built:
    """The kit folder in dist/, and the plain kit's inspection (for the summary)."""

    kit_dir: KitDir
    inspection: Inspection
