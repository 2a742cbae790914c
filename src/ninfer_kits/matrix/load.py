"""Reading matrix.toml: every table and key checked when the file loads, so that a typo fails
`ninfer-kits matrix` in a second, naming file, line, table and key, not a build an hour later."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Final, TypeVar

from ninfer_kits.config import resources, settings
from ninfer_kits.config.tables import (
    Table,
    did_you_mean,
    parse,
    printable,
    quote,
    unknown_name,
)
from ninfer_kits.errors import BadInput, ConfigError, Where
from ninfer_kits.matrix.collisions import check_collisions
from ninfer_kits.matrix.model import (
    DEFAULT_SNAPSHOT,
    EXTRA_RUNTIME_PACKAGES,
    LEDGER_MODES,
    PLACEHOLDERS,
    VERSION_PLACEHOLDERS,
    CudaVersion,
    Kit,
    Matrix,
    Publish,
    Registry,
    Signing,
    SourcesConfig,
    Toolchain,
    Upstream,
    merge_cmake_options,
    render,
    resolve_dockerfile,
    template_placeholders,
)
from ninfer_kits.matrix.names import (
    ARCH_FORMS,
    HEX_REVISION,
    asset_name_problem,
    git_ref_problem,
    is_valid_arch,
    relative_path_problem,
    version_core,
)
from ninfer_kits.net.remote import cleartext_token_problem
from ninfer_kits.oci.reference import check_prefix, parse_pin, parse_reference
from ninfer_kits.release.signatures import NAMESPACE, read_allowed_signers

SCHEMA_VERSION: Final = 1
MATRIX_ENV: Final = settings.MATRIX.name
DEFAULT_MATRIX: Final = Path("matrix.toml")

_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]*")
_CMAKE_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FILE_NAME = re.compile(r"[A-Za-z0-9_.+-]+")

# The kit's arch decides the CUDA architectures; an upstream must not override it.
_RESERVED_CMAKE: Final = frozenset({"CMAKE_CUDA_ARCHITECTURES"})

# Image build arguments. BASE_IMAGE comes from base_image / runtime_base_image, and the runtime
# image gets EXTRA_RUNTIME_PACKAGES from runtime_packages: neither may be given by hand.
BASE_IMAGE_ARG: Final = "BASE_IMAGE"
_BUILD_ARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")  # Debian Policy 5.6.1

_T = TypeVar("_T")


def default_matrix_path(environ: Mapping[str, str] | None = None) -> Path:
    """$NINFER_KITS_MATRIX, else ./matrix.toml, else the copy ninfer-kits.pyz carries."""
    value = settings.read(settings.MATRIX, environ)
    if value:
        return Path(value)
    if not DEFAULT_MATRIX.is_file():
        carried = resources.BUNDLED / DEFAULT_MATRIX.name
        if carried.is_file():
            return carried
    return DEFAULT_MATRIX


def add_matrix_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--matrix", metavar="PATH", type=Path, default=None,
        help=f"the matrix file (default: ${MATRIX_ENV}, else ./{DEFAULT_MATRIX}, else the "
             f"one ninfer-kits.pyz carries)",
    )


def load_matrix(path: str | os.PathLike[str] | None = None) -> Matrix:
    """Read and check a matrix file; ConfigError says where it is wrong, BadInput if unreadable."""
    path = default_matrix_path() if path is None else Path(path)
    return _build(parse(path, _read_text(path)))


def matrix_from_text(path: Path, text: str) -> Matrix:
    """The matrix `text` says, as if it were the file at `path` (checked before it is written)."""
    return _build(parse(path, text))


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


def _build(root: Table) -> Matrix:
    root.check_keys(required=("schema", "upstreams", "toolchains", "kits"),
                    optional=("publish", "registry"))
    schema = root.integer("schema")
    if schema != SCHEMA_VERSION:
        message = f"unsupported schema {schema} (this ninfer-kits reads schema {SCHEMA_VERSION})"
        raise root.error("schema", message)
    base_dir = root.source.path.absolute().parent
    upstreams = _section(root, "upstreams", lambda t: _read_upstream(t, base_dir))
    toolchains = _section(root, "toolchains", lambda t: _read_toolchain(t, base_dir))
    kits = _section(root, "kits", lambda t: _read_kit(t, upstreams, toolchains))
    _check_duplicates(root.table("kits"), kits)
    check_collisions(root.table("kits"), kits)
    publish = _read_publish(root.table("publish"), base_dir) if "publish" in root.data \
        else Publish()
    registry = _read_registry(root.table("registry")) if "registry" in root.data else None
    return Matrix(
        path=root.source.path, schema=schema, upstreams=MappingProxyType(upstreams),
        toolchains=MappingProxyType(toolchains), kits=MappingProxyType(kits), publish=publish,
        registry=registry,
    )


def _section(root: Table, key: str, read: Callable[[Table], _T]) -> dict[str, _T]:
    section = root.table(key)
    if not section.data:
        raise root.error(key, f"no {key} defined (add a [{key}.NAME] table)")
    entries: dict[str, _T] = {}
    for name in section.data:
        if _ID.fullmatch(name) is None:
            message = f"invalid name {quote(name)} (letters, digits, '.', '_', '-')"
            raise section.error(name, message)
        entries[name] = read(section.table(name))
    return entries


# --------------------------------------------------------------------------- upstreams


_UPSTREAM_REQUIRED: Final = (
    "repository", "url", "branch", "archs", "min_cuda", "licenses", "targets",
)
_UPSTREAM_OPTIONAL: Final = ("revision", "version_file", "version", "cmake_options")


def _read_upstream(table: Table, base_dir: Path) -> Upstream:
    table.check_keys(_UPSTREAM_REQUIRED, _UPSTREAM_OPTIONAL)
    version_file = _relative_path(table, "version_file") if "version_file" in table.data \
        else None
    return Upstream(
        id=table.id,
        repository=read_repository(table),
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


def read_repository(table: Table) -> str:
    value = table.text("repository")
    if _REPOSITORY.fullmatch(value) is None:
        raise table.error("repository", f"invalid repository {quote(value)} (expected OWNER/NAME)")
    return value


def _url(table: Table) -> str:
    value = table.text("url")
    if any(c.isspace() for c in value):
        raise table.error("url", f"invalid url {quote(value)}: contains whitespace")
    return value


def _branch(table: Table) -> str:
    value = table.text("branch")
    problem = git_ref_problem(value)
    if problem:
        raise table.error("branch", f"invalid branch name {quote(value)}: {problem}")
    return value


def _revision(table: Table) -> str | None:
    value = table.optional_text("revision")
    if value is not None and HEX_REVISION.fullmatch(value) is None:
        raise table.error(
            "revision", f"invalid revision {quote(value)} (expected 7 to 40 hex digits of a SHA)"
        )
    return None if value is None else value.lower()


def _version(table: Table, *, has_file: bool) -> str | None:
    value = table.optional_text("version")
    if value is None:
        return None
    if not has_file:
        raise table.error("version", "'version' needs 'version_file' (the file it is read from)")
    if _VERSION.fullmatch(value) is None or ".." in value:
        raise table.error(
            "version", f"invalid version {quote(value)} (letters, digits and . + _ -)"
        )
    return value


def _archs(table: Table) -> tuple[str, ...]:
    archs = table.texts("archs")
    for arch in archs:
        _check_arch(table, "archs", arch)
    twice = next((arch for i, arch in enumerate(archs) if arch in archs[:i]), None)
    if twice is not None:
        raise table.error("archs", f"lists {quote(twice)} twice")
    return archs


def _check_arch(table: Table, key: str, arch: str) -> None:
    if not is_valid_arch(arch):
        raise table.error(key, f"invalid arch {quote(arch)} (valid forms: {ARCH_FORMS})")


def _cuda_version(table: Table, key: str) -> CudaVersion:
    try:
        return CudaVersion.parse(table.text(key))
    except ValueError as error:
        raise table.error(key, str(error)) from None


def _relative_path(table: Table, key: str) -> str:
    value = table.text(key)
    problem = relative_path_problem(value)
    if problem:
        raise table.error(key, f"invalid path {quote(value)}: {problem}")
    return value


def _licenses(table: Table) -> tuple[str, ...]:
    licenses = table.texts("licenses")
    for pattern in licenses:
        problem = relative_path_problem(pattern)
        if problem:
            raise table.error("licenses", f"invalid pattern {quote(pattern)}: {problem}")
    return licenses


def _cmake_options(table: Table) -> tuple[tuple[str, str], ...]:
    """An upstream's CMake options, or a kit's own (given over its upstream's)."""
    if "cmake_options" not in table.data:
        return ()
    options = table.text_pairs("cmake_options")
    sub = table.table("cmake_options")
    for name, _ in options:
        if _CMAKE_VARIABLE.fullmatch(name) is None:
            raise sub.error(name, f"invalid CMake variable name {quote(name)}")
        if name in _RESERVED_CMAKE:
            raise sub.error(name, f"{name} is set from each kit's arch; remove it here")
    return options


def _targets(table: Table) -> tuple[tuple[str, str], ...]:
    targets = table.text_pairs("targets")
    sub = table.table("targets")
    if not targets:
        raise table.error("targets", "must not be empty")
    for name, path in targets:
        if _FILE_NAME.fullmatch(name) is None or name in (".", ".."):
            raise sub.error(name, f"invalid target name {quote(name)} (a plain file name)")
        problem = relative_path_problem(path)
        if problem:
            raise sub.error(name, f"invalid output path {quote(path)}: {problem}")
    return targets


# --------------------------------------------------------------------------- toolchains


_TOOLCHAIN_REQUIRED: Final = (
    "dockerfile", "base_image", "cuda", "runtime_dockerfile", "runtime_base_image",
)
_TOOLCHAIN_OPTIONAL: Final = ("build_args", "runtime_build_args", "runtime_packages",
                               "glibc_floor", "image", "runtime_image")
_GLIBC_VERSION: Final = re.compile(r"2\.\d{1,3}(?:\.\d{1,3})?")


def _read_toolchain(table: Table, base_dir: Path) -> Toolchain:
    table.check_keys(_TOOLCHAIN_REQUIRED, _TOOLCHAIN_OPTIONAL)
    return Toolchain(
        id=table.id, dockerfile=_dockerfile(table, "dockerfile", base_dir),
        base_image=_image(table, "base_image"), cuda=_cuda_version(table, "cuda"),
        runtime_dockerfile=_dockerfile(table, "runtime_dockerfile", base_dir),
        runtime_base_image=_image(table, "runtime_base_image"),
        build_args=_build_args(table, "build_args", "base_image"),
        runtime_build_args=_build_args(table, "runtime_build_args", "runtime_base_image"),
        runtime_packages=_runtime_packages(table), glibc_floor=_glibc_floor(table),
        image=_pin(table, "image"), runtime_image=_pin(table, "runtime_image"),
        base_dir=base_dir,
    )


def _pin(table: Table, key: str) -> str:
    """An image pinned by digest (NAME[:TAG]@sha256:…), or "" when the key is absent."""
    if key not in table.data:
        return ""
    value = table.text(key)
    try:
        parse_pin(value)
    except ValueError as error:
        raise table.error(key, f"invalid pin {quote(value[:200])}: {error}") from None
    return value


def _read_registry(table: Table) -> Registry:
    table.check_keys(("prefix",), ())
    prefix = table.text("prefix").rstrip("/")
    try:
        check_prefix(prefix)
    except ValueError as error:
        raise table.error("prefix", f"registry prefix {quote(prefix[:200])}: {error}") from None
    return Registry(prefix=prefix)


def _glibc_floor(table: Table) -> str | None:
    if "glibc_floor" not in table.data:
        return None
    value = table.text("glibc_floor")
    if _GLIBC_VERSION.fullmatch(value) is None:
        raise table.error("glibc_floor", f"invalid glibc version {quote(value)} (such as "
                                         f"\"2.31\": the version glibc's symbols carry)")
    return value


def _dockerfile(table: Table, key: str, base_dir: Path) -> str:
    """The path as written, once the file it names exists."""
    value = table.text(key)
    if any(c in value for c in "\0\n\r"):
        raise table.error(key, f"invalid path {quote(value)}")
    found, looked = resolve_dockerfile(value, base_dir)
    if not found.is_file():
        where = " and ".join(str(path) for path in looked)
        shipped = resources.shipped_dockerfiles()
        hint = did_you_mean(_dockerfile_stem(value), [_dockerfile_stem(n) for n in shipped],
                            form=f"'{resources.DOCKERFILES_NAME}/{{}}{resources.DOCKERFILE_SUFFIX}'")
        if not hint and len(looked) > 1 and shipped:
            hint = f" (ninfer-kits ships: {', '.join(shipped)})"
        raise table.error(key, f"Dockerfile {quote(value)} not found: looked for {where}{hint}")
    return value


def _dockerfile_stem(path: str) -> str:
    """`dockerfiles/runtime-ubuntu.Dockerfile` → `runtime-ubuntu`, for close-name hints."""
    name = PurePosixPath(path.replace("\\", "/")).name
    suffix = resources.DOCKERFILE_SUFFIX
    return name[: -len(suffix)] if name.lower().endswith(suffix.lower()) else name


def _build_args(table: Table, key: str, base_key: str) -> tuple[tuple[str, str], ...]:
    if key not in table.data:
        return ()
    pairs = table.text_pairs(key)
    sub = table.table(key)
    for name, _ in pairs:
        if _BUILD_ARG.fullmatch(name) is None:
            fixed = re.sub(r"[^A-Za-z0-9_]", "_", name)
            fixed = fixed if _BUILD_ARG.fullmatch(fixed) else f"_{fixed}"
            raise sub.error(name, f"invalid build argument name {quote(name)} (letters, "
                                  f"digits and '_', not starting with a digit); did you mean "
                                  f"{quote(fixed)}?")
        if name == BASE_IMAGE_ARG:
            raise sub.error(name, f"{BASE_IMAGE_ARG} is set from {base_key!r}; remove it here")
        if name == EXTRA_RUNTIME_PACKAGES and key == "runtime_build_args":
            raise sub.error(name, f"{EXTRA_RUNTIME_PACKAGES} is set from 'runtime_packages'; "
                                  f"list the packages there")
    return pairs


def _runtime_packages(table: Table) -> tuple[str, ...]:
    if "runtime_packages" not in table.data:
        return ()
    packages = table.texts("runtime_packages")
    for package in packages:
        if _DEBIAN_PACKAGE.fullmatch(package) is None:
            fixed = package.strip().lower().replace("_", "-")
            hint = f"; did you mean {quote(fixed)}?" if _DEBIAN_PACKAGE.fullmatch(fixed) else ""
            raise table.error("runtime_packages", (
                f"invalid Debian package name {quote(package)} (lowercase letters, digits and "
                f"+ . -, at least two characters, starting with a letter or digit){hint}"
            ))
    twice = next((p for i, p in enumerate(packages) if p in packages[:i]), None)
    if twice is not None:
        raise table.error("runtime_packages", f"lists {quote(twice)} twice")
    return packages


def _image(table: Table, key: str) -> str:
    image = table.text(key)
    try:
        parse_reference(image)
    except ValueError as error:
        raise table.error(key, f"invalid image {quote(image[:200])}: {error}") from None
    return image


# --------------------------------------------------------------------------- kits


_KIT_KEYS: Final = ("upstream", "arch", "toolchain", "card", "tag", "asset")
_KIT_OPTIONAL: Final = ("cmake_options", "portable")


def _read_kit(
    table: Table, upstreams: Mapping[str, Upstream], toolchains: Mapping[str, Toolchain]
) -> Kit:
    table.check_keys(_KIT_KEYS, _KIT_OPTIONAL)
    upstream = _reference(table, "upstream", upstreams)
    arch = _kit_arch(table, upstream)
    toolchain = _reference(table, "toolchain", toolchains)
    if not toolchain.cuda.at_least(upstream.min_cuda):
        raise table.error("toolchain", (
            f"toolchain '{toolchain.id}' has CUDA {toolchain.cuda}, "
            f"but upstream '{upstream.id}' needs at least {upstream.min_cuda}"
        ))
    own = _cmake_options(table)
    if own:  # the upstream as this kit builds it
        merged = merge_cmake_options(upstream.cmake_options, own)
        upstream = dataclasses.replace(upstream, cmake_options=merged)
    kit = Kit(
        id=table.id, upstream=upstream, arch=arch, toolchain=toolchain,
        card=table.text("card"), tag=table.text("tag"), asset=table.text("asset"),
        cmake_options=own, portable=table.flag("portable"),
    )
    _check_template(table, kit, "tag")
    _check_template(table, kit, "asset")
    return kit


def _reference(table: Table, key: str, known: Mapping[str, _T]) -> _T:
    name = table.text(key)
    if name not in known:
        raise table.error(key, unknown_name(key, name, list(known)))
    return known[name]


def _kit_arch(table: Table, upstream: Upstream) -> str:
    arch = table.text("arch")
    _check_arch(table, "arch", arch)
    if arch not in upstream.archs:
        raise table.error("arch", (
            f"arch {quote(arch)} is not among the archs of upstream '{upstream.id}' "
            f"({', '.join(upstream.archs)})"
        ))
    return arch


def _check_template(table: Table, kit: Kit, key: str) -> None:
    template = table.text(key)
    try:
        names = template_placeholders(template)
    except ValueError as error:
        raise table.error(key, str(error)) from None
    for name in names:
        if name not in PLACEHOLDERS:
            hint = did_you_mean(name, PLACEHOLDERS, n=3, form="{{{}}}")
            raise table.error(key, f"unknown placeholder {{{printable(name)}}}{hint}")
    _check_version_placeholders(table, kit, key, names)
    # Unknown facts become '0' so that the literal parts, and the values the matrix fixes
    # (arch, branch), are checked now; a VERSION read at build time is checked by the build.
    values = {name: value or "0" for name, value in kit.values().items()}
    sample = render(template, values)
    problem = git_ref_problem(sample) if key == "tag" else asset_name_problem(sample)
    if problem:
        raise table.error(key, f"{key} template {quote(template)} {problem}")


def _check_version_placeholders(
    table: Table, kit: Kit, key: str, names: Sequence[str]
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
            f"upstream '{upstream.id}' has version {quote(upstream.version)}"
        ))


def _check_duplicates(section: Table, kits: Mapping[str, Kit]) -> None:
    """No two kits build one upstream for one arch in one toolchain with the same CMake options."""
    builds: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], str] = {}
    names: dict[tuple[str, str], str] = {}
    for kit in kits.values():
        table = section.table(kit.id)
        build = (kit.upstream.id, kit.arch, kit.toolchain.id,
                 tuple(sorted(kit.upstream.cmake_options)))
        if build in builds:
            same = " with the same CMake options" if kit.cmake_options else ""
            raise table.error("arch", (
                f"duplicate kit: kit '{builds[build]}' already builds upstream "
                f"'{kit.upstream.id}' for {kit.arch}{same} in toolchain '{kit.toolchain.id}'"
            ))
        rendered = (kit.render_tag(partial=True), kit.render_asset(partial=True))
        if rendered in names:
            raise table.error("tag", (
                f"duplicate kit: tag '{rendered[0]}' and asset '{rendered[1]}' "
                f"are those of kit '{names[rendered]}' too"
            ))
        builds[build] = kit.id
        names[rendered] = kit.id


# --------------------------------------------------------------------------- publish


def _read_publish(table: Table, base_dir: Path) -> Publish:
    """[publish]: a table per store (its kind in ninfer_kits/stores reads it), [publish.signing],
    [publish.sources] and the ledger mode."""
    from ninfer_kits import stores

    if "runner" in table.data:  # rebuild.yml's build runner is the repository's to choose
        raise table.error("runner", "the build runner is no longer set here: rebuild.yml builds "
                                    "on ubuntu-latest unless the repository variable "
                                    "NINFER_KITS_BUILD_RUNNER names a runner label")
    tables = stores.with_tables()
    table.check_keys((), (*(kind.name for kind in tables), "ledger", "signing", "sources"))
    read = {kind.name: kind.read_table(table.table(kind.name)) for kind in tables
            if kind.read_table is not None and kind.name in table.data}
    ledger = table.optional_text("ledger") or "commit"
    if ledger not in LEDGER_MODES:
        raise table.error("ledger", unknown_name("ledger mode", ledger, LEDGER_MODES))
    signing = _read_signing(table.table("signing"), base_dir) if "signing" in table.data \
        else None
    sources = _read_sources(table.table("sources"), base_dir) if "sources" in table.data \
        else SourcesConfig()
    targets = {name: read[name] for name in stores.names() if name in read}  # publishing order
    return Publish(targets=targets, ledger=ledger, signing=signing, sources=sources)


_KEYRING_LIMIT: Final = 1 << 20


def _read_sources(table: Table, base_dir: Path) -> SourcesConfig:
    """[publish.sources]: a mirror and a snapshot URL (http allowed: the user names the host
    here, and apt checks every index's signature), and a keyring file."""
    table.check_keys((), ("mirror", "keyring", "snapshot"))
    urls: dict[str, str] = {}
    for key in ("mirror", "snapshot"):
        value = table.optional_text(key)
        if value is not None:
            problem = archive_url_problem(value)
            if problem:
                raise table.error(key, f"invalid URL {quote(value)}: {problem}")
            urls[key] = value.rstrip("/")
    keyring = None
    if "keyring" in table.data:
        relative = table.text("keyring")  # absolute, or relative to matrix.toml
        keyring = (base_dir / relative).resolve()
        if not relative.endswith((".gpg", ".asc")):
            raise table.error("keyring", f"{quote(relative)}: a keyring file ends in .gpg "
                                         f"(binary) or .asc (armored), as apt tells them apart")
        try:
            size = keyring.stat().st_size
        except OSError as error:
            raise table.error("keyring", f"{keyring}: {error.strerror or error}") from None
        if not keyring.is_file() or size > _KEYRING_LIMIT:
            raise table.error("keyring", f"{keyring}: not a keyring file (a regular file of at "
                                         f"most {_KEYRING_LIMIT} bytes)")
    return SourcesConfig(mirror=urls.get("mirror"), keyring=keyring,
                         snapshot=urls.get("snapshot", DEFAULT_SNAPSHOT))


def archive_url_problem(url: str) -> str | None:
    """Why `url` cannot be an archive's or a snapshot's base URL, or None."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return "contains whitespace or a control character"
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as error:
        return str(error)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "expected http(s)://HOST[/PATH]"
    if parts.username is not None or parts.password is not None:
        return "must not hold credentials"
    if parts.query or parts.fragment or any(c in url for c in "[]\"'"):
        return "must not have a query, a fragment, brackets or quotes"
    return None


def _read_signing(table: Table, base_dir: Path) -> Signing:
    """[publish.signing]: allowed_signers, read now (a bad line fails here, not in a user's
    fetch), and the identity it must list for our namespace."""
    table.check_keys(("allowed_signers", "identity"))
    relative = _relative_path(table, "allowed_signers")
    path = base_dir / relative
    try:
        signers = read_allowed_signers(path)
    except BadInput as error:
        raise table.error("allowed_signers", str(error)) from None
    identity = table.text("identity")
    named = [signer for signer in signers if signer.names(identity)]
    if not named:
        principals = [p for signer in signers for p in signer.principals]
        raise table.error("identity", f"{relative} lists no key for {quote(identity)} (it lists "
                                      f"{', '.join(principals)})"
                                      f"{did_you_mean(identity, principals)}")
    if not any(signer.allows(NAMESPACE) for signer in named):
        raise table.error("identity", f"{relative} allows {quote(identity)}'s key only for "
                                      f"other namespaces; add {NAMESPACE} to its "
                                      f"namespaces=\"...\"")
    return Signing(allowed_signers=path, identity=identity, relative=relative)


def github_api_problem(url: str) -> str | None:
    """Why `url` cannot be a GitHub REST API base URL, or None (plain http: loopback only, or the
    token would go in clear)."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return "contains whitespace or a control character"
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "expected https://HOST[/PATH], e.g. https://api.github.com or https://HOST/api/v3"
    if parts.username is not None or parts.password is not None:
        return "must not hold credentials (the token comes from GITHUB_TOKEN or GH_TOKEN)"
    if parts.query or parts.fragment:
        return "must not have a query or a fragment"
    return cleartext_token_problem(url)
