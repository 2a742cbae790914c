"""What the build's stages hand on (pipeline.stages): the request, the state so far, each
flavour of the kit. Frozen: every stage returns a new state with its own result added."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.atomic import PackedFile
from ninfer_kits.buildinfo import BuildInfo
from ninfer_kits.errors import need
from ninfer_kits.inspector.inspection import Inspection
from ninfer_kits.kitdir import KitDir
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Kit
from ninfer_kits.owed_sources import OwedSources, SourceFile
from ninfer_kits.pipeline.builders import Builder, Compiled, PreparedToolchain
from ninfer_kits.pipeline.compiled_in import CompiledIn
from ninfer_kits.pipeline.repair import Bundled
from ninfer_kits.pipeline.source import SourceTree


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
    # the toolchain's code compiled into the binaries, by package (`compiled-in`): the SBOM's
    # components beside the upstream's own
    compiled_in: tuple[CompiledIn, ...] = ()

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
    sources: tuple[SourceFile, ...] = ()  # the copyleft ones' source packages, published beside
    # the Debian source packages it owes, recorded for publish to fetch (SOURCES.json)
    owed: OwedSources | None = None
    buildinfo: BuildInfo | None = None  # its own BUILDINFO.txt, inputs only
    tarball: PackedFile | None = None
    smoke: str = ""  # the smoke test's verdict


Stage = Callable[[BuildState, Reporter], BuildState]
