"""The build matrix: which upstream is built for which CUDA arch, read from matrix.toml.

Everything is checked when the file is loaded, so that a typo fails `ninfer-kits matrix` in a
second, naming the file, table, key and line, instead of failing a build an hour later.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, Final, TypeVar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - tomli is only installed on 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

from ninfer_kits import resources
from ninfer_kits.errors import BadInput, ConfigError, NinferKitsError, Where

SCHEMA_VERSION: Final = 1
MATRIX_ENV: Final = "NINFER_KITS_MATRIX"
DEFAULT_MATRIX: Final = Path("matrix.toml")

PLACEHOLDERS: Final = (
    "kit", "upstream", "arch", "arch_id", "cmake_arch",
    "rev", "rev8", "rev12", "branch", "version", "version_core",
)
VERSION_PLACEHOLDERS: Final = frozenset({"version", "version_core"})
ARCH_FORMS: Final = "sm_NN, sm_NNN, sm_NNa, sm_NNf, e.g. sm_86, sm_120a"

# ASCII classes throughout: `\d` would also accept digits of other scripts.
_ARCH = re.compile(r"sm_[0-9]{2,3}[af]?")
_HEX_REVISION = re.compile(r"[0-9a-fA-F]{7,40}")
_CUDA_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){1,2}")
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]*")
_VERSION_CORE = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_CMAKE_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FILE_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_SCP_URL = re.compile(r"[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:")
_GIT_REF_BAD_CHARS: Final = frozenset(" ~^:?*[\\")

# The kit's arch decides the CUDA architectures; an upstream must not override it.
_RESERVED_CMAKE: Final = frozenset({"CMAKE_CUDA_ARCHITECTURES"})

# Image build arguments. BASE_IMAGE comes from base_image / runtime_base_image, and the runtime
# image gets EXTRA_RUNTIME_PACKAGES from runtime_packages: neither may be given by hand.
BASE_IMAGE_ARG: Final = "BASE_IMAGE"
EXTRA_RUNTIME_PACKAGES: Final = "EXTRA_RUNTIME_PACKAGES"
_BUILD_ARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")  # Debian Policy 5.6.1


class UnresolvedPlaceholders(NinferKitsError):
    """A template needs facts (a full revision, a VERSION) that are not known yet."""

    def __init__(self, what: str, names: Sequence[str]) -> None:
        listed = ", ".join(f"{{{name}}}" for name in names)
        super().__init__(f"cannot render {what} yet: {listed} not known")
        self.names = tuple(names)


# --------------------------------------------------------------------------- small helpers


def arch_id(arch: str) -> str:
    """`sm_120a` → `sm120a`, the form used in tags and asset names."""
    return arch.replace("_", "")


def cmake_arch(arch: str) -> str:
    """`sm_120a` → `120a`, the form CMAKE_CUDA_ARCHITECTURES takes."""
    return arch.removeprefix("sm_")


def is_valid_arch(arch: str) -> bool:
    return _ARCH.fullmatch(arch) is not None


def version_core(version: str) -> str | None:
    """The leading dotted number of a version: `0.6.1-rtx3090` → `0.6.1`; None if there is none."""
    match = _VERSION_CORE.match(version)
    return match.group(0) if match else None


def did_you_mean(word: str, choices: Iterable[str], *, n: int = 1, form: str = "'{}'") -> str:
    """A '; did you mean ...?' suffix naming up to n close choices, or '' when none is close."""
    options = [form.format(c) for c in difflib.get_close_matches(word, list(choices), n=n)]
    if not options:
        return ""
    listed = options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
    return f"; did you mean {listed}?"


def unknown_name(kind: str, word: str, known: Sequence[str]) -> str:
    """`unknown kit 'x'; did you mean 'y'?`, or the known names when nothing is close."""
    hint = did_you_mean(word, known)
    if not hint:
        hint = f" (known: {', '.join(known)})" if known else ""
    return f"unknown {kind} {_quote(word)}{hint}"


def _printable(text: str) -> str:
    # Messages are printed as one line; a control character from the file must not break that.
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _quote(text: str) -> str:
    return f"'{_printable(text)}'"


def _kind(value: object) -> str:
    kinds: tuple[tuple[type, str], ...] = (
        (bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
        (list, "an array"), (dict, "a table"), (datetime.datetime, "a date-time"),
        (datetime.date, "a date"), (datetime.time, "a time"),
    )
    return next((name for kind, name in kinds if isinstance(value, kind)), "nothing")


def _expected(what: str, value: object) -> str:
    return f"expected {what}, got {_kind(value)}"


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True, kw_only=True)
class CudaVersion:
    """A CUDA version as written (`13.1`) and as numbers for comparing (`(13, 1)`)."""

    text: str
    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        if _CUDA_VERSION.fullmatch(text) is None:
            raise ValueError(f"invalid CUDA version {_quote(text)} (expected MAJOR.MINOR[.PATCH])")
        return cls(text=text, parts=tuple(int(part) for part in text.split(".")))

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
        """True when `url` is a folder on this machine rather than a git URL."""
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
    """A build environment: its Dockerfile, base image, build arguments and CUDA version, and
    the runtime image (Dockerfile, base, build arguments, extra apt packages) the smoke test
    runs a finished kit in."""

    id: str
    dockerfile: str  # as written: relative to the matrix file's folder, or absolute
    base_image: str
    cuda: CudaVersion
    runtime_dockerfile: str
    runtime_base_image: str
    build_args: tuple[tuple[str, str], ...] = ()  # for the toolchain image, in file order
    runtime_build_args: tuple[tuple[str, str], ...] = ()
    runtime_packages: tuple[str, ...] = ()
    base_dir: Path = field(default=Path(), compare=False)

    @property
    def dockerfile_path(self) -> Path:
        return resolve_dockerfile(self.dockerfile, self.base_dir)[0]

    @property
    def runtime_dockerfile_path(self) -> Path:
        return resolve_dockerfile(self.runtime_dockerfile, self.base_dir)[0]

    @property
    def runtime_image_build_args(self) -> tuple[tuple[str, str], ...]:
        """runtime_build_args, plus EXTRA_RUNTIME_PACKAGES (space-joined) when runtime_packages
        names any: what the runtime image is built with, besides BASE_IMAGE."""
        if not self.runtime_packages:
            return self.runtime_build_args
        return (*self.runtime_build_args,
                (EXTRA_RUNTIME_PACKAGES, " ".join(self.runtime_packages)))


def resolve_dockerfile(path: str, base_dir: Path) -> tuple[Path, tuple[Path, ...]]:
    """The Dockerfile a matrix names, and every place looked at for it, in order.

    An absolute path is itself; a relative one is relative to the matrix file's folder, and a
    `dockerfiles/NAME` that is not there but that ninfer-kits ships is the shipped one, so that
    a matrix anywhere can use the standard images. When nothing is found, the first place
    looked at comes back (it is what an error names)."""
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
    """What is known about the source being built: its revision (full or abbreviated), VERSION."""

    revision: str | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        if self.revision is not None and _HEX_REVISION.fullmatch(self.revision) is None:
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
    """One upstream built for one arch, with the names its release tag and asset get."""

    id: str
    upstream: Upstream
    arch: str
    toolchain: Toolchain
    card: str
    tag: str
    asset: str

    @property
    def arch_id(self) -> str:
        return arch_id(self.arch)

    @property
    def cmake_arch(self) -> str:
        return cmake_arch(self.arch)

    def pinned_facts(self) -> RevisionFacts:
        """The facts matrix.toml itself gives: the pinned revision and the expected version."""
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
        """The asset file name; `partial` as for render_tag."""
        what = f"the asset of kit '{self.id}'"
        return render(self.asset, self.values(facts), partial=partial, what=what)

    def pending(self, facts: RevisionFacts | None = None) -> tuple[str, ...]:
        """The placeholders of tag and asset that the facts do not fill yet, in order."""
        values = self.values(facts)
        names = template_placeholders(self.tag) + template_placeholders(self.asset)
        return tuple(dict.fromkeys(name for name in names if values.get(name) is None))


@dataclass(frozen=True, kw_only=True, eq=False)
class Matrix:
    """The whole matrix.toml: upstreams, toolchains and kits, each in file order."""

    path: Path
    schema: int
    upstreams: Mapping[str, Upstream]
    toolchains: Mapping[str, Toolchain]
    kits: Mapping[str, Kit]

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


# --------------------------------------------------------------------------- templates


def template_placeholders(template: str) -> tuple[str, ...]:
    """The placeholder names in a template, in order; ValueError for a stray brace."""
    leftover = _PLACEHOLDER.sub("", template)
    if "{" in leftover or "}" in leftover:
        raise ValueError(f"unbalanced brace in template {_quote(template)}")
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
            raise ValueError(f"unknown placeholder {{{name}}} in {_quote(template)}")
        value = values.get(name)
        if value is None:
            missing.append(name)
            return match.group(0)
        return value

    text = _PLACEHOLDER.sub(substitute, template)
    if missing and not partial:
        raise UnresolvedPlaceholders(what, list(dict.fromkeys(missing)))
    return text


# --------------------------------------------------------------------------- where is it?


_KEY_PART = re.compile(r"""[ \t]*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')[ \t]*""")


def _key_path(line: str, pos: int) -> tuple[tuple[str, ...], int] | None:
    """Parse a dotted TOML key (bare or quoted parts) starting at pos."""
    parts: list[str] = []
    while (match := _KEY_PART.match(line, pos)) is not None:
        bare, basic, literal = match.groups()
        parts.append(bare or literal or _unescape(basic or ""))
        pos = match.end()
        if not line.startswith(".", pos):
            return tuple(parts), pos
        pos += 1
    return None


def _unescape(basic: str) -> str:
    try:
        value = json.loads(f'"{basic}"')
    except ValueError:
        return basic
    return value if isinstance(value, str) else basic


def _header(line: str) -> tuple[str, ...] | None:
    parsed = _key_path(line, 1) if line.startswith("[") else None
    if parsed is None or not line.startswith("]", parsed[1]):
        return None
    rest = line[parsed[1] + 1 :].strip()
    return parsed[0] if not rest or rest.startswith("#") else None


def _key_line(line: str) -> tuple[str, ...] | None:
    parsed = _key_path(line, 0)
    return parsed[0] if parsed is not None and line.startswith("=", parsed[1]) else None


def _opens_multiline_string(line: str) -> str | None:
    return next((quote for quote in ('"""', "'''") if line.count(quote) % 2), None)


class _Locator:
    """Finds the line of a table or key in the raw text: tomllib reports values, not places."""

    def __init__(self, text: str) -> None:
        self.headers: dict[tuple[str, ...], int] = {}
        self.keys: dict[tuple[str, ...], list[tuple[tuple[str, ...], int]]] = {(): []}
        section: tuple[str, ...] | None = ()
        in_string: str | None = None
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.strip(" \t\r")
            if in_string is not None:
                in_string = None if in_string in line else in_string
                continue
            if line.startswith("["):
                # An array of tables is not part of the schema; its keys must not be
                # credited to the table above it.
                section = None if line.startswith("[[") else _header(line)
                if section is not None:
                    self.headers.setdefault(section, number)
                    self.keys.setdefault(section, [])
                continue
            key = _key_line(line)
            if key is not None and section is not None:
                self.keys[section].append((key, number))
            in_string = _opens_multiline_string(line)

    def line_of(self, path: tuple[str, ...]) -> int | None:
        """The line defining path, else that of its nearest enclosing table header."""
        for depth in range(len(path), -1, -1):
            section = path[:depth]
            if section not in self.keys:
                continue
            line = self._best_key_line(section, path[depth:])
            if line is not None:
                return line
            if depth:
                return self.headers[section]
        return None

    def _best_key_line(self, section: tuple[str, ...], rest: tuple[str, ...]) -> int | None:
        best, best_line = 0, None
        for key, line in self.keys[section]:
            shared = _common_prefix(key, rest)
            if shared > best:
                best, best_line = shared, line
        return best_line


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def _table_name(parts: tuple[str, ...]) -> str:
    quoted = (p if re.fullmatch(r"[A-Za-z0-9_-]+", p) else json.dumps(p) for p in parts)
    return _printable(".".join(quoted))


@dataclass(frozen=True)
class _Source:
    path: Path
    locator: _Locator


@dataclass(frozen=True)
class _Table:
    """One TOML table with its place in the file, so that every check can say where it failed."""

    source: _Source
    parts: tuple[str, ...]
    data: Mapping[str, object]

    @property
    def id(self) -> str:
        return self.parts[-1]

    def error(self, key: str, message: str) -> ConfigError:
        line = self.source.locator.line_of(self.parts + ((key,) if key else ()))
        where = Where(self.source.path, _table_name(self.parts), _printable(key), line)
        return ConfigError(where, _printable(message))

    def check_keys(self, required: Sequence[str], optional: Sequence[str] = ()) -> None:
        known = (*required, *optional)
        for key in self.data:
            if key not in known:
                raise self.error(key, unknown_name("key", key, known))
        for key in required:
            if key not in self.data:
                raise self.error(key, f"missing required key {_quote(key)}")

    def text(self, key: str) -> str:
        value = self.data.get(key)
        if not isinstance(value, str):
            raise self.error(key, _expected("a string", value))
        if not value.strip():
            raise self.error(key, "must not be empty")
        return value

    def optional_text(self, key: str) -> str | None:
        return self.text(key) if key in self.data else None

    def integer(self, key: str) -> int:
        value = self.data.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, _expected("an integer", value))
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        """A non-empty array of non-empty strings."""
        value = self.data.get(key)
        if not isinstance(value, list):
            raise self.error(key, _expected("an array of strings", value))
        if not value:
            raise self.error(key, "must not be empty")
        for item in value:
            if not isinstance(item, str):
                raise self.error(key, _expected("an array of strings", item) + " in it")
            if not item.strip():
                raise self.error(key, "must not contain an empty string")
        return tuple(value)

    def table(self, key: str) -> _Table:
        value = self.data.get(key)
        if not isinstance(value, dict):
            raise self.error(key, _expected("a table", value))
        return _Table(self.source, (*self.parts, key), value)

    def text_pairs(self, key: str) -> tuple[tuple[str, str], ...]:
        """A table of strings, as (key, value) pairs in file order."""
        sub = self.table(key)
        return tuple((name, sub.text(name)) for name in sub.data)


# --------------------------------------------------------------------------- loading


def default_matrix_path(environ: Mapping[str, str] | None = None) -> Path:
    """$NINFER_KITS_MATRIX when set, else matrix.toml in the current directory."""
    value = (os.environ if environ is None else environ).get(MATRIX_ENV, "")
    return Path(value) if value else DEFAULT_MATRIX


def add_matrix_argument(parser: argparse.ArgumentParser) -> None:
    """The `--matrix PATH` option every command that reads the matrix takes."""
    parser.add_argument(
        "--matrix", metavar="PATH", type=Path, default=None,
        help=f"the matrix file (default: ${MATRIX_ENV}, else ./{DEFAULT_MATRIX})",
    )


def load_matrix(path: str | os.PathLike[str] | None = None) -> Matrix:
    """Read and check a matrix file; ConfigError says where it is wrong, BadInput if unreadable."""
    path = default_matrix_path() if path is None else Path(path)
    text = _read_text(path)
    source = _Source(path, _Locator(text))
    return _build(_Table(source, (), _parse_toml(path, text)))


def _read_text(path: Path) -> str:
    hint = f"give --matrix PATH or set {MATRIX_ENV}"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"matrix file not found: {path} ({hint})") from None
    except IsADirectoryError:
        raise BadInput(f"matrix file is a directory: {path} ({hint})") from None
    except OSError as error:
        raise BadInput(f"cannot read matrix file {path}: {error.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError(Where(path, line=line), "not valid UTF-8 text") from None


_TOML_AT_LINE = re.compile(r"\(at line ([0-9]+), column [0-9]+\)")


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        document: dict[str, Any] = tomllib.loads(text)
    except ValueError as error:  # TOMLDecodeError, and int() refusing a huge number
        message = str(error)
        match = _TOML_AT_LINE.search(message)
        line = int(match.group(1)) if match else None
        if line is None and "end of document" in message:
            line = len(text.rstrip("\n").split("\n"))
        raise ConfigError(Where(path, line=line), f"invalid TOML: {_printable(message)}") from None
    return document


def _build(root: _Table) -> Matrix:
    root.check_keys(required=("schema", "upstreams", "toolchains", "kits"))
    schema = root.integer("schema")
    if schema != SCHEMA_VERSION:
        message = f"unsupported schema {schema} (this ninfer-kits reads schema {SCHEMA_VERSION})"
        raise root.error("schema", message)
    base_dir = root.source.path.absolute().parent
    upstreams = _section(root, "upstreams", lambda t: _read_upstream(t, base_dir))
    toolchains = _section(root, "toolchains", lambda t: _read_toolchain(t, base_dir))
    kits = _section(root, "kits", lambda t: _read_kit(t, upstreams, toolchains))
    _check_duplicates(root.table("kits"), kits)
    return Matrix(
        path=root.source.path, schema=schema, upstreams=MappingProxyType(upstreams),
        toolchains=MappingProxyType(toolchains), kits=MappingProxyType(kits),
    )


def _section(root: _Table, key: str, read: Callable[[_Table], _T]) -> dict[str, _T]:
    section = root.table(key)
    if not section.data:
        raise root.error(key, f"no {key} defined (add a [{key}.NAME] table)")
    entries: dict[str, _T] = {}
    for name in section.data:
        if _ID.fullmatch(name) is None:
            message = f"invalid name {_quote(name)} (letters, digits, '.', '_', '-')"
            raise section.error(name, message)
        entries[name] = read(section.table(name))
    return entries


# --------------------------------------------------------------------------- upstreams


_UPSTREAM_REQUIRED: Final = (
    "repository", "url", "branch", "archs", "min_cuda", "licenses", "targets",
)
_UPSTREAM_OPTIONAL: Final = ("revision", "version_file", "version", "cmake_options")


def _read_upstream(table: _Table, base_dir: Path) -> Upstream:
    table.check_keys(_UPSTREAM_REQUIRED, _UPSTREAM_OPTIONAL)
    version_file = _optional_relative_path(table, "version_file")
    return Upstream(
        id=table.id,
        repository=_repository(table),
        url=_url(table),
        branch=_branch(table),
        revision=_revision(table),
        version_file=version_file,
        version=_version(table, has_file=version_file is not None),
        archs=_archs(table),
        min_cuda=_cuda_version(table, "min_cuda"),
        licenses=_licenses(table),
        cmake_options=_cmake_options(table),
        targets=_targets(table),
        base_dir=base_dir,
    )


def _repository(table: _Table) -> str:
    value = table.text("repository")
    if _REPOSITORY.fullmatch(value) is None:
        raise table.error("repository", f"invalid repository {_quote(value)} (expected OWNER/NAME)")
    return value


def _url(table: _Table) -> str:
    value = table.text("url")
    if any(c.isspace() for c in value):
        raise table.error("url", f"invalid url {_quote(value)}: contains whitespace")
    return value


def _branch(table: _Table) -> str:
    value = table.text("branch")
    problem = git_ref_problem(value)
    if problem:
        raise table.error("branch", f"invalid branch name {_quote(value)}: {problem}")
    return value


def _revision(table: _Table) -> str | None:
    value = table.optional_text("revision")
    if value is not None and _HEX_REVISION.fullmatch(value) is None:
        raise table.error(
            "revision", f"invalid revision {_quote(value)} (expected 7 to 40 hex digits of a SHA)"
        )
    return None if value is None else value.lower()


def _version(table: _Table, *, has_file: bool) -> str | None:
    value = table.optional_text("version")
    if value is None:
        return None
    if not has_file:
        raise table.error("version", "'version' needs 'version_file' (the file it is read from)")
    if _VERSION.fullmatch(value) is None or ".." in value:
        raise table.error(
            "version", f"invalid version {_quote(value)} (letters, digits and . + _ -)"
        )
    return value


def _archs(table: _Table) -> tuple[str, ...]:
    archs = table.texts("archs")
    for arch in archs:
        _check_arch(table, "archs", arch)
    twice = next((arch for i, arch in enumerate(archs) if arch in archs[:i]), None)
    if twice is not None:
        raise table.error("archs", f"lists {_quote(twice)} twice")
    return archs


def _check_arch(table: _Table, key: str, arch: str) -> None:
    if not is_valid_arch(arch):
        raise table.error(key, f"invalid arch {_quote(arch)} (valid forms: {ARCH_FORMS})")


def _cuda_version(table: _Table, key: str) -> CudaVersion:
    try:
        return CudaVersion.parse(table.text(key))
    except ValueError as error:
        raise table.error(key, str(error)) from None


def relative_path_problem(path: str) -> str | None:
    """Why a path from the matrix may not be used inside a source tree, or None."""
    if path.startswith(("/", "\\", "~")) or re.match(r"[A-Za-z]:", path):
        return "must be a relative path"
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:
        return "must not contain '..'"
    return None


def _relative_path(table: _Table, key: str) -> str:
    value = table.text(key)
    problem = relative_path_problem(value)
    if problem:
        raise table.error(key, f"invalid path {_quote(value)}: {problem}")
    return value


def _optional_relative_path(table: _Table, key: str) -> str | None:
    return _relative_path(table, key) if key in table.data else None


def _licenses(table: _Table) -> tuple[str, ...]:
    licenses = table.texts("licenses")
    for pattern in licenses:
        problem = relative_path_problem(pattern)
        if problem:
            raise table.error("licenses", f"invalid pattern {_quote(pattern)}: {problem}")
    return licenses


def _cmake_options(table: _Table) -> tuple[tuple[str, str], ...]:
    if "cmake_options" not in table.data:
        return ()
    options = table.text_pairs("cmake_options")
    sub = table.table("cmake_options")
    for name, _ in options:
        if _CMAKE_VARIABLE.fullmatch(name) is None:
            raise sub.error(name, f"invalid CMake variable name {_quote(name)}")
        if name in _RESERVED_CMAKE:
            raise sub.error(name, f"{name} is set from each kit's arch; remove it here")
    return options


def _targets(table: _Table) -> tuple[tuple[str, str], ...]:
    targets = table.text_pairs("targets")
    sub = table.table("targets")
    if not targets:
        raise table.error("targets", "must not be empty")
    for name, path in targets:
        if _FILE_NAME.fullmatch(name) is None or name in (".", ".."):
            raise sub.error(name, f"invalid target name {_quote(name)} (a plain file name)")
        problem = relative_path_problem(path)
        if problem:
            raise sub.error(name, f"invalid output path {_quote(path)}: {problem}")
    return targets


# --------------------------------------------------------------------------- toolchains


_TOOLCHAIN_REQUIRED: Final = (
    "dockerfile", "base_image", "cuda", "runtime_dockerfile", "runtime_base_image",
)
_TOOLCHAIN_OPTIONAL: Final = ("build_args", "runtime_build_args", "runtime_packages")


def _read_toolchain(table: _Table, base_dir: Path) -> Toolchain:
    table.check_keys(_TOOLCHAIN_REQUIRED, _TOOLCHAIN_OPTIONAL)
    return Toolchain(
        id=table.id, dockerfile=_dockerfile(table, "dockerfile", base_dir),
        base_image=_image(table, "base_image"), cuda=_cuda_version(table, "cuda"),
        runtime_dockerfile=_dockerfile(table, "runtime_dockerfile", base_dir),
        runtime_base_image=_image(table, "runtime_base_image"),
        build_args=_build_args(table, "build_args", "base_image"),
        runtime_build_args=_build_args(table, "runtime_build_args", "runtime_base_image"),
        runtime_packages=_runtime_packages(table), base_dir=base_dir,
    )


def _dockerfile(table: _Table, key: str, base_dir: Path) -> str:
    """The path as written, once the file it names is known to exist."""
    value = table.text(key)
    if any(c in value for c in "\0\n\r"):
        raise table.error(key, f"invalid path {_quote(value)}")
    found, looked = resolve_dockerfile(value, base_dir)
    if not found.is_file():
        where = " and ".join(str(path) for path in looked)
        shipped = resources.shipped_dockerfiles()
        hint = did_you_mean(_dockerfile_stem(value), [_dockerfile_stem(n) for n in shipped],
                            form=f"'{resources.DOCKERFILES_NAME}/{{}}{resources.DOCKERFILE_SUFFIX}'")
        if not hint and len(looked) > 1 and shipped:
            hint = f" (ninfer-kits ships: {', '.join(shipped)})"
        raise table.error(key, f"Dockerfile {_quote(value)} not found: looked for {where}{hint}")
    return value


def _dockerfile_stem(path: str) -> str:
    """`dockerfiles/runtime-ubuntu.Dockerfile` → `runtime-ubuntu`, for close-name hints."""
    name = PurePosixPath(path.replace("\\", "/")).name
    suffix = resources.DOCKERFILE_SUFFIX
    return name[: -len(suffix)] if name.lower().endswith(suffix.lower()) else name


def _build_args(table: _Table, key: str, base_key: str) -> tuple[tuple[str, str], ...]:
    if key not in table.data:
        return ()
    pairs = table.text_pairs(key)
    sub = table.table(key)
    for name, _ in pairs:
        if _BUILD_ARG.fullmatch(name) is None:
            fixed = re.sub(r"[^A-Za-z0-9_]", "_", name)
            fixed = fixed if _BUILD_ARG.fullmatch(fixed) else f"_{fixed}"
            raise sub.error(name, f"invalid build argument name {_quote(name)} (letters, "
                                  f"digits and '_', not starting with a digit); did you mean "
                                  f"{_quote(fixed)}?")
        if name == BASE_IMAGE_ARG:
            raise sub.error(name, f"{BASE_IMAGE_ARG} is set from {base_key!r}; remove it here")
        if name == EXTRA_RUNTIME_PACKAGES and key == "runtime_build_args":
            raise sub.error(name, f"{EXTRA_RUNTIME_PACKAGES} is set from 'runtime_packages'; "
                                  f"list the packages there")
    return pairs


def _runtime_packages(table: _Table) -> tuple[str, ...]:
    if "runtime_packages" not in table.data:
        return ()
    packages = table.texts("runtime_packages")
    for package in packages:
        if _DEBIAN_PACKAGE.fullmatch(package) is None:
            fixed = package.strip().lower().replace("_", "-")
            hint = f"; did you mean {_quote(fixed)}?" if _DEBIAN_PACKAGE.fullmatch(fixed) else ""
            raise table.error("runtime_packages", (
                f"invalid Debian package name {_quote(package)} (lowercase letters, digits and "
                f"+ . -, at least two characters, starting with a letter or digit){hint}"
            ))
    twice = next((p for i, p in enumerate(packages) if p in packages[:i]), None)
    if twice is not None:
        raise table.error("runtime_packages", f"lists {_quote(twice)} twice")
    return packages


def _image(table: _Table, key: str) -> str:
    image = table.text(key)
    if any(c.isspace() for c in image):
        raise table.error(key, f"invalid image {_quote(image)}: contains whitespace")
    return image


# --------------------------------------------------------------------------- kits


_KIT_KEYS: Final = ("upstream", "arch", "toolchain", "card", "tag", "asset")


def _read_kit(
    table: _Table, upstreams: Mapping[str, Upstream], toolchains: Mapping[str, Toolchain]
) -> Kit:
    table.check_keys(_KIT_KEYS)
    upstream = _reference(table, "upstream", upstreams)
    arch = _kit_arch(table, upstream)
    toolchain = _reference(table, "toolchain", toolchains)
    if not toolchain.cuda.at_least(upstream.min_cuda):
        raise table.error("toolchain", (
            f"toolchain '{toolchain.id}' has CUDA {toolchain.cuda}, "
            f"but upstream '{upstream.id}' needs at least {upstream.min_cuda}"
        ))
    kit = Kit(
        id=table.id, upstream=upstream, arch=arch, toolchain=toolchain,
        card=table.text("card"), tag=table.text("tag"), asset=table.text("asset"),
    )
    _check_template(table, kit, "tag")
    _check_template(table, kit, "asset")
    return kit


def _reference(table: _Table, key: str, known: Mapping[str, _T]) -> _T:
    name = table.text(key)
    if name not in known:
        raise table.error(key, unknown_name(key, name, list(known)))
    return known[name]


def _kit_arch(table: _Table, upstream: Upstream) -> str:
    arch = table.text("arch")
    _check_arch(table, "arch", arch)
    if arch not in upstream.archs:
        raise table.error("arch", (
            f"arch {_quote(arch)} is not among the archs of upstream '{upstream.id}' "
            f"({', '.join(upstream.archs)})"
        ))
    return arch


def _check_template(table: _Table, kit: Kit, key: str) -> None:
    template = table.text(key)
    try:
        names = template_placeholders(template)
    except ValueError as error:
        raise table.error(key, str(error)) from None
    for name in names:
        if name not in PLACEHOLDERS:
            hint = did_you_mean(name, PLACEHOLDERS, n=3, form="{{{}}}")
            raise table.error(key, f"unknown placeholder {{{_printable(name)}}}{hint}")
    _check_version_placeholders(table, kit, key, names)
    # Unknown facts become '0' so that the literal parts, and the values the matrix fixes
    # (arch, branch), are checked now; a VERSION read at build time is checked by the build.
    values = {name: value or "0" for name, value in kit.values().items()}
    sample = render(template, values)
    problem = git_ref_problem(sample) if key == "tag" else asset_name_problem(sample)
    if problem:
        raise table.error(key, f"{key} template {_quote(template)} {problem}")


def _check_version_placeholders(
    table: _Table, kit: Kit, key: str, names: Sequence[str]
) -> None:
    used = [name for name in names if name in VERSION_PLACEHOLDERS]
    upstream = kit.upstream
    if used and upstream.version_file is None:
        raise table.error(key, (
            f"{{{used[0]}}} needs a version_file, and upstream '{upstream.id}' has none"
        ))
    if "version_core" in used and upstream.version and version_core(upstream.version) is None:
        raise table.error(key, (
            f"{{version_core}} needs a version starting with a number; "
            f"upstream '{upstream.id}' has version {_quote(upstream.version)}"
        ))


def git_ref_problem(name: str) -> str | None:
    """Why name cannot be a git tag or branch (a subset of git check-ref-format), or None."""
    bad = sorted({c for c in name if c in _GIT_REF_BAD_CHARS or not c.isprintable()})
    if bad:
        listed = ", ".join(_quote(c) for c in bad)
        return f"contains {listed}, not allowed in a git tag or branch name"
    for part, reason in (("..", "'..'"), ("@{", "'@{'"), ("//", "'//'"), ("/.", "'/.'")):
        if part in name:
            return f"contains {reason}, not allowed in a git tag or branch name"
    if name.startswith(("-", "/", ".")) or name.endswith(("/", ".", ".lock")) or name == "@":
        return "starts or ends in a way git does not allow (-, /, ., .lock)"
    return None


def asset_name_problem(name: str) -> str | None:
    """Why name cannot be a release asset file name, or None."""
    if not name.endswith(".tar.gz") or name == ".tar.gz":
        return "must end in '.tar.gz'"
    if "/" in name or "\\" in name:
        return "must be a file name, without '/'"
    if any(c.isspace() or not c.isprintable() for c in name):
        return "must not contain whitespace or control characters"
    return None


def _check_duplicates(section: _Table, kits: Mapping[str, Kit]) -> None:
    builds: dict[tuple[str, str], str] = {}
    names: dict[tuple[str, str], str] = {}
    for kit in kits.values():
        table = section.table(kit.id)
        build = (kit.upstream.id, kit.arch)
        if build in builds:
            raise table.error("arch", (
                f"duplicate kit: kit '{builds[build]}' already builds upstream "
                f"'{kit.upstream.id}' for {kit.arch}"
            ))
        rendered = (kit.render_tag(partial=True), kit.render_asset(partial=True))
        if rendered in names:
            raise table.error("tag", (
                f"duplicate kit: tag '{rendered[0]}' and asset '{rendered[1]}' "
                f"are those of kit '{names[rendered]}' too"
            ))
        builds[build] = kit.id
        names[rendered] = kit.id
