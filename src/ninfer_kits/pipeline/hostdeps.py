"""The local builder's dependencies on this machine (data/build_deps.toml): all checked before
anything is fetched, named at once with one install line, installed as root on Debian or Ubuntu
(docs/build.md, "What the build needs"). `python -m ninfer_kits.pipeline.hostdeps [--tests]`."""

from __future__ import annotations

import argparse
import functools
import os
import platform
import re
import shlex
import shutil
import sys
import sysconfig
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ninfer_kits.config import settings
from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, quote, read_data_file, table_name, unknown_name
from ninfer_kits.errors import EnvironmentFailure
from ninfer_kits.host.children import probe
from ninfer_kits.log import Reporter

DATA: Final = data_file("build_deps.toml")
OS_RELEASE: Final = (Path("/etc/os-release"), Path("/usr/lib/os-release"))
NO_INSTALL_ENV: Final = settings.NO_INSTALL.name
MIN_CMAKE: Final = (3, 28)
PURPOSES: Final = ("build", "ccache", "tests")  # ccache: the local builder's, unless --no-ccache
APT_TAIL = 20
APT_TIMEOUT = 1800.0  # seconds for apt-get update or install: a held dpkg lock must not hang CI

# Package names as each family spells them (Debian Policy 5.6.1; Fedora and Arch alike, with
# capitals and '_' allowed) — never an option or a shell word.
_PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9+._-]*")
_NAME = re.compile(r"[a-z0-9][a-z0-9+._-]*")  # names of deps and families; os-release IDs
_WORD = re.compile(r"-{0,2}[A-Za-z0-9][A-Za-z0-9+._=-]*")  # a word of the install command


class MissingBuildDependencies(EnvironmentFailure):
    """Something the build needs is not here (exit status 3): all named, with one install line."""


@dataclass(frozen=True, kw_only=True)
class Dependency:
    name: str
    what: str
    purpose: str
    command: str | None = None
    pkg_config: str | None = None
    header: str | None = None

    @property
    def how(self) -> str:
        return f"command {self.command}" if self.command else f"pkg-config {self.pkg_config}"


@dataclass(frozen=True, kw_only=True)
class Family:
    name: str
    ids: tuple[str, ...]
    install: tuple[str, ...]
    packages: Mapping[str, str]
    automatic: bool = False
    note: str = ""

    def install_line(self, missing: Iterable[Dependency]) -> str:
        """`apt-get install -y libavformat-dev libswscale-dev`: each package once, in order."""
        return shlex.join([*self.install, *self.packages_for(missing)])

    def packages_for(self, missing: Iterable[Dependency]) -> list[str]:
        return list(dict.fromkeys(self.packages[dep.name] for dep in missing))


@dataclass(frozen=True)
class Catalog:
    deps: tuple[Dependency, ...]
    families: tuple[Family, ...]

    def family_for(self, os_release: Mapping[str, str]) -> Family | None:
        """The family of ID, else of the first word of ID_LIKE that has one."""
        ids = [os_release.get("ID", ""), *os_release.get("ID_LIKE", "").split()]
        for distro in ids:
            for family in self.families:
                if distro in family.ids:
                    return family
        return None


def load_catalog(path: Path = DATA) -> Catalog:
    """Read and check build_deps.toml; ConfigError names file, line, table and key."""
    root = read_data_file(path, "the build dependencies file")
    root.check_keys(("schema", "deps", "families"))
    schema = root.integer("schema")
    if schema != 1:
        raise root.error("schema", f"unsupported schema {schema!r}")
    deps = tuple(_dependency(table) for table in _tables(root, "deps"))
    families: list[Family] = []
    seen: dict[str, str] = {}
    for table in _tables(root, "families"):
        family = _family(table, deps)
        for distro in family.ids:
            if distro in seen:
                raise table.error("ids", f"ID {distro!r} is already in family {seen[distro]!r}")
            seen[distro] = family.name
        families.append(family)
    return Catalog(deps, tuple(families))


@functools.cache
def catalog() -> Catalog:
    return load_catalog()


def _tables(root: Table, key: str) -> list[Table]:
    section = root.table(key)
    if not section.data:
        raise root.error(key, "must be a table of tables, not empty")
    for name in section.data:
        if not _NAME.fullmatch(name):
            raise section.error(name, f"invalid name {name!r}")
    return [section.table(name) for name in section.data]


def _dependency(table: Table) -> Dependency:
    found_by = ("command",) if "command" in table.data else ("pkg_config", "header")
    table.check_keys(("what", "for", *found_by))
    purpose = table.text("for")
    if purpose not in PURPOSES:
        raise table.error("for", f"'for' must be one of {', '.join(PURPOSES)}, not {purpose!r}")
    values = {key: table.text(key) for key in found_by}
    return Dependency(name=table.id, what=table.text("what"), purpose=purpose,
                      command=values.get("command"), pkg_config=values.get("pkg_config"),
                      header=values.get("header"))


def _family(table: Table, deps: Sequence[Dependency]) -> Family:
    table.check_keys(("ids", "install", "packages"), ("automatic", "note"))
    ids, install = table.texts("ids"), table.texts("install")
    for key, value, form in (("ids", ids, _NAME), ("install", install, _WORD)):
        if not all(form.fullmatch(item) for item in value):
            raise table.error(key, f"{key!r} must be a non-empty array of plain words")
    automatic = table.flag("automatic")
    if automatic and install[0] != "apt-get":
        raise table.error("automatic", "'automatic' is only for apt-get (the install this tool "
                                       "runs itself)")
    packages = table.table("packages")
    names = [dep.name for dep in deps]
    for dep in packages.data:
        if dep not in names:
            raise packages.error(dep, unknown_name("key", dep, names))
    absent = sorted(set(names) - set(packages.data))
    if absent:
        raise table.error("packages", f"[{table_name(packages.parts)}] missing key "
                                      f"{quote(absent[0])}")
    for dep, package in table.text_pairs("packages"):
        if not _PACKAGE.fullmatch(package):
            raise packages.error(dep, f"invalid package name {package!r} for {dep!r}")
    return Family(name=table.id, ids=ids, install=install,
                  packages=dict(table.text_pairs("packages")), automatic=automatic,
                  note=table.text("note", empty=True) if "note" in table.data else "")


def read_os_release(paths: Sequence[Path] = OS_RELEASE) -> dict[str, str]:
    """The first os-release file that exists, as a dict ({} when there is none)."""
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        values: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, raw = line.strip().partition("=")
            if not sep or key.startswith("#") or not key.isidentifier():
                continue
            try:
                words = shlex.split(raw)
            except ValueError:
                continue
            values[key] = " ".join(words)
        return values
    return {}


def search_path(environ: Mapping[str, str] | None = None) -> str:
    """PATH with this environment's bin/ first (CMake from the `[local]` extra is there, also when
    the environment is not activated)."""
    return os.pathsep.join([str(Path(sys.executable).parent),
                            settings.read(settings.PATH, environ) or ""])


def include_dirs(environ: Mapping[str, str]) -> list[Path]:
    multiarch = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"
    listed = [part for setting in (settings.CPATH, settings.C_INCLUDE_PATH,
                                   settings.CPLUS_INCLUDE_PATH)
              for part in (settings.read(setting, environ) or "").split(os.pathsep) if part]
    return [Path(p) for p in (*listed, "/usr/local/include", f"/usr/include/{multiarch}",
                              "/usr/include", "/usr/include/ffmpeg")]


def is_present(dep: Dependency, environ: Mapping[str, str]) -> bool:
    path = search_path(environ)
    if dep.command:
        return shutil.which(dep.command, path=path) is not None
    pkg_config = (settings.read(settings.PKG_CONFIG, environ)
                  or shutil.which("pkg-config", path=path))
    if pkg_config:
        done = probe([pkg_config, "--exists", str(dep.pkg_config)], env=environ)
        return done.returncode == 0
    return any((folder / str(dep.header)).is_file() for folder in include_dirs(environ))


def cmake_problem(environ: Mapping[str, str]) -> str | None:
    hint = "pip install 'ninfer-kits[local]' (or 'cmake>=3.28') into this environment"
    cmake = shutil.which("cmake", path=search_path(environ))
    if cmake is None:
        return f"CMake not found: the upstreams need CMake 3.28 or newer: {hint}"
    output = probe([cmake, "--version"]).stdout
    match = re.search(r"cmake version (\d+)\.(\d+)", output)
    found = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if found >= MIN_CMAKE:
        return None
    shown = ".".join(map(str, found)) if match else "of unknown version"
    return f"{cmake} is CMake {shown}; the upstreams need CMake 3.28 or newer: {hint}"


def nvcc_problem(nvcc: str, environ: Mapping[str, str]) -> str | None:
    """NVCC/CUDACXX when set (and then only that), else /usr/local/cuda/bin/nvcc, else PATH."""
    named = (nvcc or settings.read(settings.NVCC, environ)
             or settings.read(settings.CUDACXX, environ) or "")
    if named:
        if os.access(named, os.X_OK):
            return None
        return (f"nvcc {named} (from NVCC/CUDACXX) is not an executable file; install the CUDA "
                f"toolkit or point NVCC at its nvcc")
    if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) or shutil.which(
            "nvcc", path=settings.read(settings.PATH, environ) or ""):
        return None
    return ("nvcc not found: the local builder needs the CUDA toolkit, 13.0 or newer, from "
            "NVIDIA (install it at /usr/local/cuda or set NVCC=/path/to/nvcc)")


@dataclass(frozen=True)
class Findings:
    missing: tuple[Dependency, ...]  # what a distribution package brings
    problems: tuple[str, ...]  # CMake and CUDA, which no install line here brings
    family: Family | None
    distro: str

    @property
    def ok(self) -> bool:
        return not self.missing and not self.problems


def check(*, purposes: Sequence[str] = ("build",), nvcc: str = "",
          environ: Mapping[str, str] | None = None,
          os_release: Sequence[Path] = OS_RELEASE, data: Catalog | None = None) -> Findings:
    environ = os.environ if environ is None else environ
    known = data or catalog()
    release = read_os_release(os_release)
    missing = tuple(dep for dep in known.deps
                    if dep.purpose in purposes and not is_present(dep, environ))
    problems = tuple(problem for problem in (cmake_problem(environ),
                                             nvcc_problem(nvcc, environ)) if problem)
    distro = release.get("PRETTY_NAME") or release.get("NAME") or release.get("ID") or ""
    return Findings(missing, problems, known.family_for(release), distro)


def explain(findings: Findings, *, after: str = "") -> str:
    """The error: what is missing, then ONE install line (or the packages to look for)."""
    on = f" on {findings.distro}" if findings.distro else ""
    lines = ["the local builder cannot build on this machine yet:"]
    lines += [f"  missing: {dep.what} ({dep.how})" for dep in findings.missing]
    lines += [f"  {problem}" for problem in findings.problems]
    if findings.missing and findings.family is not None:
        note = f" ({findings.family.note})" if findings.family.note else ""
        lines.append(f"install them as root{on}: "
                     f"{findings.family.install_line(findings.missing)}{note}")
    elif findings.missing:
        lines.append(f"no install line is known{on or ' here'} (Debian, Ubuntu, Fedora, RHEL "
                     f"and Arch are): install your distribution's packages for "
                     f"{', '.join(dep.what for dep in findings.missing)}")
    if after:
        lines.append(after)
    return "\n".join(lines)


def ensure_build_dependencies(reporter: Reporter, *, nvcc: str = "",
                              purposes: Sequence[str] = ("build",),
                              environ: Mapping[str, str] | None = None,
                              os_release: Sequence[Path] = OS_RELEASE,
                              is_root: bool | None = None) -> None:
    """Install what is missing as root on Debian or Ubuntu; else MissingBuildDependencies."""
    environ = os.environ if environ is None else environ
    findings = check(purposes=purposes, nvcc=nvcc, environ=environ, os_release=os_release)
    if findings.ok:
        return
    root = os.geteuid() == 0 if is_root is None else is_root
    family = findings.family
    if findings.missing and family is not None and family.automatic:
        apt = shutil.which("apt-get", path=search_path(environ))
        if not root:
            raise MissingBuildDependencies(explain(findings, after="then run this again"))
        if settings.read(settings.NO_INSTALL, environ):
            raise MissingBuildDependencies(
                explain(findings, after=f"(not installed: {NO_INSTALL_ENV} is set)"))
        if apt is None:
            raise MissingBuildDependencies(explain(findings, after="(apt-get not found)"))
        packages = family.packages_for(findings.missing)
        names = ", ".join(dep.name for dep in findings.missing)
        reporter.info(f"installing what the build needs ({names}): "
                      f"{family.install_line(findings.missing)}  "
                      f"[as root; {NO_INSTALL_ENV}=1 only names them]")
        _apt_install(apt, packages, environ)
        findings = check(purposes=purposes, nvcc=nvcc, environ=environ, os_release=os_release)
        if findings.ok:
            return
    raise MissingBuildDependencies(explain(findings))


def _apt_install(apt: str, packages: Sequence[str], environ: Mapping[str, str]) -> None:
    env = dict(environ, DEBIAN_FRONTEND="noninteractive")
    for command in ([apt, "update", "-qq"],
                    [apt, "install", "-y", "-qq", "--no-install-recommends", *packages]):
        done = probe(command, env=env, timeout=APT_TIMEOUT)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-APT_TAIL:]
            shown = "\n".join(f"  | {line}" for line in tail)
            raise EnvironmentFailure(f"{shlex.join(command)} failed (exit status "
                                     f"{done.returncode}):\n{shown}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ninfer_kits.pipeline.hostdeps",
        description="Check (and, as root on Debian/Ubuntu, install) what the local builder "
                    "needs; exit status 3 names what is missing.")
    parser.add_argument("--tests", action="store_true",
                        help="also what the test suite needs (gcc, readelf)")
    args = parser.parse_args(argv)
    purposes = PURPOSES if args.tests else ("build", "ccache")
    try:
        ensure_build_dependencies(Reporter(), purposes=purposes)
    except EnvironmentFailure as error:
        print(f"ninfer-kits: error: {error}", file=sys.stderr)
        return error.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
