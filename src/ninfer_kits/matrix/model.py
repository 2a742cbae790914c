"""The matrix as data: upstreams, toolchains and kits (frozen), and the tag and asset templates
a kit renders from the facts of the revision being built."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Final, TypeVar

from ninfer_kits.config import resources
from ninfer_kits.config.tables import quote, unknown_name
from ninfer_kits.errors import BadInput, NinferKitsError
from ninfer_kits.host import versions
from ninfer_kits.matrix.names import (
    HEX_REVISION,
    arch_id,
    cmake_arch,
    version_core,
)
from ninfer_kits.release.signatures import Trust

PLACEHOLDERS: Final = (
    "kit", "upstream", "arch", "arch_id", "cmake_arch",
    "rev", "rev8", "rev12", "branch", "version", "version_core",
)
VERSION_PLACEHOLDERS: Final = frozenset({"version", "version_core"})

EXTRA_RUNTIME_PACKAGES: Final = "EXTRA_RUNTIME_PACKAGES"

_CUDA_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){1,2}")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_SCP_URL = re.compile(r"[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:")


class UnresolvedPlaceholders(NinferKitsError):
    """A template needs facts (a full revision, a VERSION) that are not known yet."""

    def __init__(self, what: str, names: Sequence[str]) -> None:
        listed = ", ".join(f"{{{name}}}" for name in names)
        super().__init__(f"cannot render {what} yet: {listed} not known")
        self.names = tuple(names)


@dataclass(frozen=True, kw_only=True)
class CudaVersion:
    """A CUDA version as written (`13.1`) and as numbers for comparing (`(13, 1)`)."""

    text: str
    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        if _CUDA_VERSION.fullmatch(text) is None:
            raise ValueError(f"invalid CUDA version {quote(text)} (expected MAJOR.MINOR[.PATCH])")
        return cls(text=text, parts=versions.parse(text))

    def at_least(self, other: CudaVersion) -> bool:
        return self.parts >= other.parts

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, kw_only=True)
class Upstream:
    """An engine source: where it lives, what to build from it, which licenses to ship."""

    id: str
    repository: str
    url: str
    branch: str
    revision: str | None = None
    version_file: str | None = None
    version: str | None = None
    archs: tuple[str, ...]
    min_cuda: CudaVersion
    licenses: tuple[str, ...]
    cmake_options: tuple[tuple[str, str], ...] = ()
    targets: tuple[tuple[str, str], ...]
    base_dir: Path = field(default=Path(), compare=False)

    @property
    def is_local(self) -> bool:
        """`url` is a folder on this machine, not a git URL."""
        return "://" not in self.url and _SCP_URL.match(self.url) is None

    @property
    def local_path(self) -> Path | None:
        if not self.is_local:
            return None
        return self.base_dir / Path(self.url).expanduser()

    @property
    def source(self) -> str:
        """What to clone from: the URL as written, or the local folder resolved."""
        local = self.local_path
        return self.url if local is None else str(local)


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    """A build environment, and the runtime image the smoke test runs a finished kit in."""

    id: str
    dockerfile: str  # as written: relative to the matrix file's folder, or absolute
    base_image: str
    cuda: CudaVersion
    runtime_dockerfile: str
    runtime_base_image: str
    build_args: tuple[tuple[str, str], ...] = ()  # for the toolchain image, in file order
    runtime_build_args: tuple[tuple[str, str], ...] = ()
    runtime_packages: tuple[str, ...] = ()
    # The newest glibc a kit built in its image may need (a sysroot's): every build checks it.
    glibc_floor: str | None = None
    # Pins (NAME[:TAG]@sha256:…, docs/reproducibility.md), pulled, never built; "": built.
    image: str = ""
    runtime_image: str = ""
    base_dir: Path = field(default=Path(), compare=False)

    @property
    def dockerfile_path(self) -> Path:
        return resolve_dockerfile(self.dockerfile, self.base_dir)[0]

    @property
    def runtime_dockerfile_path(self) -> Path:
        return resolve_dockerfile(self.runtime_dockerfile, self.base_dir)[0]

    @property
    def runtime_image_build_args(self) -> tuple[tuple[str, str], ...]:
        """What the runtime image is built with besides BASE_IMAGE: runtime_build_args, and the
        runtime_packages as EXTRA_RUNTIME_PACKAGES."""
        if not self.runtime_packages:
            return self.runtime_build_args
        return (*self.runtime_build_args,
                (EXTRA_RUNTIME_PACKAGES, " ".join(self.runtime_packages)))


def merge_cmake_options(
    base: Sequence[tuple[str, str]], override: Sequence[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """`base` with `override` applied: a name in both keeps its place, new names follow."""
    merged = dict(base)
    merged.update(override)
    return tuple(merged.items())


def resolve_dockerfile(path: str, base_dir: Path) -> tuple[Path, tuple[Path, ...]]:
    """The Dockerfile a matrix names (relative to the matrix's folder, else a shipped
    `dockerfiles/NAME`, so that a matrix anywhere can use the standard images), and every place
    looked at; the first place when nothing is found (what an error names)."""
    written = Path(path).expanduser()
    beside = written if written.is_absolute() else base_dir / written
    looked = [beside]
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if not written.is_absolute() and len(parts) == 2 and parts[0] == resources.DOCKERFILES_NAME:
        shipped = resources.dockerfiles_dir() / parts[1]
        if not beside.is_file() and shipped.is_file():
            return shipped, (beside, shipped)
        looked.append(shipped)
    return beside, tuple(looked)


@dataclass(frozen=True, kw_only=True)
class RevisionFacts:
    """What is known of the source being built: its revision (full or abbreviated), VERSION."""

    revision: str | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        if self.revision is not None and HEX_REVISION.fullmatch(self.revision) is None:
            raise ValueError(f"not a revision: {self.revision!r} (7 to 40 hex digits)")

    @property
    def rev(self) -> str | None:
        return self.revision.lower() if self.revision and len(self.revision) == 40 else None

    @property
    def rev8(self) -> str | None:
        return self._prefix(8)

    @property
    def rev12(self) -> str | None:
        return self._prefix(12)

    @property
    def version_core(self) -> str | None:
        return None if self.version is None else version_core(self.version)

    def _prefix(self, length: int) -> str | None:
        if self.revision is None or len(self.revision) < length:
            return None
        return self.revision[:length].lower()


@dataclass(frozen=True, kw_only=True)
class Kit:
    """One upstream built for one arch, with the names its release tag and asset get.
    `cmake_options` are the kit's own; `upstream` is the upstream as this kit builds it, the
    kit's options over its own (merge_cmake_options): what the recipe hands CMake."""

    id: str
    upstream: Upstream
    arch: str
    toolchain: Toolchain
    card: str
    tag: str
    asset: str
    cmake_options: tuple[tuple[str, str], ...] = ()
    # Also build the portable flavour from the same compile (docs/portable.md).
    portable: bool = False

    @property
    def arch_id(self) -> str:
        return arch_id(self.arch)

    @property
    def cmake_arch(self) -> str:
        return cmake_arch(self.arch)

    def pinned_facts(self) -> RevisionFacts:
        """The facts matrix.toml gives: the pinned revision and the expected version."""
        return RevisionFacts(revision=self.upstream.revision, version=self.upstream.version)

    def values(self, facts: RevisionFacts | None = None) -> dict[str, str | None]:
        """Every placeholder's value; None for those the facts do not tell yet."""
        facts = self.pinned_facts() if facts is None else facts
        return {
            "kit": self.id, "upstream": self.upstream.id, "arch": self.arch,
            "arch_id": self.arch_id, "cmake_arch": self.cmake_arch,
            "rev": facts.rev, "rev8": facts.rev8, "rev12": facts.rev12,
            "branch": self.upstream.branch,
            "version": facts.version, "version_core": facts.version_core,
        }

    def render_tag(self, facts: RevisionFacts | None = None, *, partial: bool = False) -> str:
        """The release tag; `partial` keeps unknown placeholders as `{name}` instead of raising."""
        what = f"the tag of kit '{self.id}'"
        return render(self.tag, self.values(facts), partial=partial, what=what)

    def render_asset(self, facts: RevisionFacts | None = None, *, partial: bool = False) -> str:
        what = f"the asset of kit '{self.id}'"
        return render(self.asset, self.values(facts), partial=partial, what=what)

    def pending(self, facts: RevisionFacts | None = None) -> tuple[str, ...]:
        """The placeholders of tag and asset that the facts do not fill yet, in order."""
        values = self.values(facts)
        names = template_placeholders(self.tag) + template_placeholders(self.asset)
        return tuple(dict.fromkeys(name for name in names if values.get(name) is None))


DEFAULT_GITHUB_API: Final = "https://api.github.com"
LEDGER_MODES: Final = ("commit", "pull-request")


@dataclass(frozen=True, kw_only=True)
class GitHubTarget:
    """[publish.github]: the repository (OWNER/NAME) and its REST API. Here, not in its store's
    module: fetch, the kit index and `--repository` read the project's GitHub home too."""

    repository: str
    api: str = DEFAULT_GITHUB_API


@dataclass(frozen=True, kw_only=True)
class Signing:
    """[publish.signing]: releases are signed (docs/matrix.md, "Signed releases")."""

    allowed_signers: Path  # absolute: the file committed beside matrix.toml
    identity: str  # the principal the allowed_signers line names (release@ninfer-kits)
    relative: str  # allowed_signers as matrix.toml gives it (the .pyz carries it there)

    @property
    def trust(self) -> Trust:
        return Trust(self.allowed_signers, self.identity)


DEFAULT_SNAPSHOT = "https://snapshot.debian.org"


@dataclass(frozen=True, kw_only=True)
class SourcesConfig:
    """[publish.sources]: where owed sources come from (docs/matrix.md, "Copyleft sources")."""

    mirror: str | None = None
    keyring: Path | None = None  # absolute: given relative to matrix.toml
    snapshot: str = DEFAULT_SNAPSHOT


@dataclass(frozen=True, kw_only=True)
class Publish:
    """[publish]: where `publish` puts a finished kit (no remote: a local folder), and how the
    workflows land releases/<tag>.toml (`commit` or `pull-request`)."""

    # Each store's [publish.NAME] table as its kind (ninfer_kits/stores) read it, in order
    targets: Mapping[str, object] = field(default_factory=dict)
    ledger: str = "commit"
    signing: Signing | None = None
    sources: SourcesConfig = field(default_factory=SourcesConfig)

    @property
    def remotes(self) -> tuple[str, ...]:
        """The configured remote stores, in publishing order."""
        return tuple(self.targets)

    @property
    def github(self) -> GitHubTarget | None:
        """[publish.github]: the project's GitHub home, which fetch and the kit index read."""
        target = self.targets.get("github")
        return target if isinstance(target, GitHubTarget) else None


@dataclass(frozen=True)
class Registry:
    """[registry]: where `toolchain push` puts images, each `prefix`/ninfer-kits-<role>-<id>."""

    prefix: str


@dataclass(frozen=True, kw_only=True, eq=False)
class Matrix:
    """The whole matrix.toml, each table in file order."""

    path: Path
    schema: int
    upstreams: Mapping[str, Upstream]
    toolchains: Mapping[str, Toolchain]
    kits: Mapping[str, Kit]
    publish: Publish = field(default_factory=Publish)
    registry: Registry | None = None

    def kit(self, name: str) -> Kit:
        return _lookup("kit", name, self.kits)

    def upstream(self, name: str) -> Upstream:
        return _lookup("upstream", name, self.upstreams)

    def toolchain(self, name: str) -> Toolchain:
        return _lookup("toolchain", name, self.toolchains)

    def select(self, names: Iterable[str] = ()) -> tuple[Kit, ...]:
        """The named kits (each once, in the order given), or every kit when no name is given."""
        chosen = tuple(dict.fromkeys(names))
        return tuple(self.kit(name) for name in chosen) if chosen else tuple(self.kits.values())


_T = TypeVar("_T")


def _lookup(kind: str, name: str, known: Mapping[str, _T]) -> _T:
    if name not in known:
        raise BadInput(unknown_name(kind, name, list(known)))
    return known[name]


def template_placeholders(template: str) -> tuple[str, ...]:
    """The placeholder names in a template, in order; ValueError for a stray brace."""
    leftover = _PLACEHOLDER.sub("", template)
    if "{" in leftover or "}" in leftover:
        raise ValueError(f"unbalanced brace in template {quote(template)}")
    return tuple(_PLACEHOLDER.findall(template))


def render(
    template: str, values: Mapping[str, str | None], *, partial: bool = False,
    what: str = "template",
) -> str:
    """Fill `{name}` placeholders from values; a None value stays `{name}` or raises."""
    missing: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {{{name}}} in {quote(template)}")
        value = values.get(name)
        if value is None:
            missing.append(name)
            return match.group(0)
        return value

    text = _PLACEHOLDER.sub(substitute, template)
    if missing and not partial:
        raise UnresolvedPlaceholders(what, list(dict.fromkeys(missing)))
    return text
