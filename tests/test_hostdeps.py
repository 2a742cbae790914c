"""The local builder's dependencies: found on this machine, or all named with one install line
for the distribution (read from real os-release files), installed by apt-get as root."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ninfer_kits.errors import ConfigError, EnvironmentFailure
from ninfer_kits.log import Reporter
from ninfer_kits.pipeline import hostdeps
from ninfer_kits.pipeline.hostdeps import (
    NO_INSTALL_ENV,
    MissingBuildDependencies,
    ensure_build_dependencies,
    load_catalog,
    read_os_release,
)

from tools import DATA, ROOT, missing, tool

OS_RELEASES = DATA / "os-release"
CATALOG = load_catalog()


def deps(*names: str) -> list[hostdeps.Dependency]:
    by_name = {dep.name: dep for dep in CATALOG.deps}
    return [by_name[name] for name in names]


# --------------------------------------------------------------------------- which distribution


@pytest.mark.parametrize(("release", "family", "distro", "line"), [
    ("debian-13", "debian", "Debian GNU/Linux 13 (trixie)",
     "apt-get install -y libavformat-dev libswscale-dev ninja-build"),
    ("debian-12", "debian", "Debian GNU/Linux 12 (bookworm)",
     "apt-get install -y libavformat-dev libswscale-dev ninja-build"),
    ("ubuntu-24.04", "debian", "Ubuntu 24.04.1 LTS",
     "apt-get install -y libavformat-dev libswscale-dev ninja-build"),
    ("fedora-41", "fedora", "Fedora Linux 41 (Container Image)",
     "dnf install -y libavformat-free-devel libswscale-free-devel ninja-build"),
    ("rocky-9.4", "fedora", "Rocky Linux 9.4 (Blue Onyx)",  # by ID_LIKE
     "dnf install -y libavformat-free-devel libswscale-free-devel ninja-build"),
    ("arch", "arch", "Arch Linux", "pacman -S --needed ffmpeg ninja"),  # ffmpeg once
    ("alpine-3.20", None, "Alpine Linux v3.20", None),
])
def test_install_line_for_each_distribution(release: str, family: str | None, distro: str,
                                            line: str | None) -> None:
    values = read_os_release([OS_RELEASES / release])
    found = CATALOG.family_for(values)
    assert (found.name if found else None) == family
    assert values["PRETTY_NAME"] == distro
    missing_here = deps("libavformat", "libswscale", "ninja")
    if found is None:
        assert line is None
        return
    assert found.install_line(missing_here) == line
    findings = hostdeps.Findings(tuple(missing_here), (), found, distro)
    text = hostdeps.explain(findings)
    assert text.count("install them as root") == 1  # ONE install line
    assert f"install them as root on {distro}: {line}" in text


def test_unknown_distribution_names_what_to_look_for() -> None:
    values = read_os_release([OS_RELEASES / "alpine-3.20"])
    findings = hostdeps.Findings(tuple(deps("libcurl")), (), CATALOG.family_for(values),
                                 values["PRETTY_NAME"])
    assert ("no install line is known on Alpine Linux v3.20 (Debian, Ubuntu, Fedora, RHEL and "
            "Arch are): install your distribution's packages for libcurl's development files"
            ) in hostdeps.explain(findings)


def test_os_release_fallback_and_absence(tmp_path: Path) -> None:
    usr = tmp_path / "usr-lib-os-release"
    shutil.copy(OS_RELEASES / "ubuntu-24.04", usr)
    assert read_os_release([tmp_path / "etc-os-release", usr])["ID"] == "ubuntu"
    assert read_os_release([tmp_path / "none"]) == {}
    assert CATALOG.family_for({}) is None


# --------------------------------------------------------------------------- the data file


def test_every_family_names_a_package_for_every_dependency() -> None:
    names = {dep.name for dep in CATALOG.deps}
    assert {"ninja", "g++", "pkg-config", "libcurl", "libavformat", "libavcodec", "libavutil",
            "libswscale"} <= names
    for family in CATALOG.families:
        assert set(family.packages) == names, family.name


@pytest.mark.parametrize(("change", "message"), [
    (("ninja = \"ninja-build\"\n", ""), "[families.debian.packages] missing key 'ninja'"),
    (('"g++" = "g++"\n', '"g++" = "g++ ; rm -rf /"\n'), "invalid package name 'g++ ; rm -rf /'"),
    (('ids = ["arch"]', 'ids = ["arch", "debian"]'), "ID 'debian' is already in family 'debian'"),
    (('for = "tests"', 'for = "test"'), "'for' must be one of build, ccache, tests, not 'test'"),
    (('install = ["dnf", "install", "-y"]', 'install = ["dnf", "install", "-y"]\n'
                                            "automatic = true"),
     "'automatic' is only for apt-get"),
    (('what = "Ninja"', 'what = "Ninja"\npkg_config = "ninja"'), "unknown key 'pkg_config'"),
])
def test_a_broken_data_file_says_where(tmp_path: Path, change: tuple[str, str],
                                       message: str) -> None:
    text = hostdeps.DATA.read_text()
    assert change[0] in text
    broken = tmp_path / "build_deps.toml"
    broken.write_text(text.replace(change[0], change[1], 1))
    with pytest.raises(ConfigError) as caught:
        load_catalog(broken)
    assert message in str(caught.value) and str(broken) in str(caught.value)


def test_debian_package_names_are_real_packages() -> None:
    """Every apt name in the data file is a package this Debian or Ubuntu machine knows."""
    if shutil.which("dpkg-query") is None:
        missing("dpkg-query (a Debian or Ubuntu machine)")
    debian = next(family for family in CATALOG.families if family.name == "debian")
    unknown = []
    for package in sorted(set(debian.packages.values())):
        installed = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                                   capture_output=True, text=True, check=False)
        if "installed" in installed.stdout:
            continue
        known = subprocess.run(["apt-cache", "show", "--no-all-versions", package],
                               capture_output=True, text=True, check=False)
        if known.returncode != 0 or not known.stdout.strip():
            unknown.append(package)
    assert not unknown


# --------------------------------------------------------------------------- this machine


def tools_except(tmp_path: Path, *left_out: str) -> Path:
    """A folder of links to every program on PATH but `left_out`: a PATH that really lacks
    them."""
    folder = tmp_path / "bin"
    folder.mkdir()
    left_out = (*left_out, "apt-get")  # never a link to the real one: fake_apt writes there
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not directory or not Path(directory).is_dir():
            continue
        for program in Path(directory).iterdir():
            link = folder / program.name
            if program.name in left_out or link.exists() or link.is_symlink():
                continue
            if program.is_file() and os.access(program, os.X_OK):
                link.symlink_to(program)
    return folder


def pc_files_except(tmp_path: Path, *left_out: str) -> Path:
    """A pkg-config search folder with every module this machine has but `left_out`."""
    pkg_config = tool("pkg-config")
    search = subprocess.run([pkg_config, "--variable", "pc_path", "pkg-config"],
                            capture_output=True, text=True, check=True).stdout.strip()
    folder = tmp_path / "pkgconfig"
    folder.mkdir()
    for directory in search.split(os.pathsep):
        for pc in sorted(Path(directory).glob("*.pc")) if Path(directory).is_dir() else []:
            if pc.stem not in left_out and not (folder / pc.name).exists():
                (folder / pc.name).symlink_to(pc)
    return folder


@pytest.fixture
def lacking(tmp_path: Path) -> dict[str, str]:
    """This machine's environment without ninja on PATH and without libswscale's pkg-config
    module: everything else the build needs must be here."""
    everything = hostdeps.check(environ=os.environ)
    if everything.missing or everything.problems:
        missing("every build dependency (" + ", ".join(
            [dep.what for dep in everything.missing] + list(everything.problems)) + ")")
    return {**os.environ, "PATH": str(tools_except(tmp_path, "ninja")),
            "PKG_CONFIG_LIBDIR": str(pc_files_except(tmp_path, "libswscale")),
            "PKG_CONFIG_PATH": ""}


def expected_line(*names: str) -> str:
    family = CATALOG.family_for(read_os_release())
    if family is None:
        return "no install line is known"
    return family.install_line(deps(*names))


def test_a_really_missing_dependency_is_named(lacking: dict[str, str]) -> None:
    findings = hostdeps.check(environ=lacking)
    assert [dep.name for dep in findings.missing] == ["ninja", "libswscale"]
    assert findings.problems == ()
    with pytest.raises(MissingBuildDependencies) as caught:
        ensure_build_dependencies(Reporter(io.StringIO()), environ=lacking, is_root=False)
    text = str(caught.value)
    assert "missing: Ninja (command ninja)" in text
    assert "missing: FFmpeg's libswscale development files (pkg-config libswscale)" in text
    assert expected_line("ninja", "libswscale") in text
    assert caught.value.exit_code == 3


def test_headers_stand_in_for_a_missing_pkg_config(tmp_path: Path) -> None:
    """Without pkg-config the development files are looked for by their headers, so the one
    install line names pkg-config and no -dev package this machine already has."""
    environ = {**os.environ, "PATH": str(tools_except(tmp_path, "pkg-config"))}
    everything = hostdeps.check(environ=os.environ)
    if everything.missing:
        missing("every build dependency")
    assert [dep.name for dep in hostdeps.check(environ=environ).missing] == ["pkg-config"]
    environ["CPATH"] = str(tmp_path)  # an include folder of our own, with one header
    (tmp_path / "curl").mkdir()
    (tmp_path / "curl" / "curl.h").write_text("")
    assert hostdeps.is_present(deps("libcurl")[0], environ)


def test_the_build_stops_before_fetching_and_names_everything(lacking: dict[str, str],
                                                              tmp_path: Path) -> None:
    """`ninfer-kits build example` as the quick start runs it, on a machine lacking two
    packages: exit status 2, both named, one install line, nothing fetched, nothing installed
    (NINFER_KITS_NO_INSTALL, as these tests run as root)."""
    cache = tmp_path / "cache"
    done = subprocess.run(
        [sys.executable, "-m", "ninfer_kits", "build", "example", "--matrix",
         str(ROOT / "matrix.toml"), "--dist", str(tmp_path / "dist"), "--cache-dir", str(cache)],
        capture_output=True, text=True, check=False, cwd=tmp_path,
        env={**lacking, NO_INSTALL_ENV: "1"})
    assert done.returncode == 3, done.stderr
    assert "missing: Ninja (command ninja)" in done.stderr
    assert "libswscale" in done.stderr and expected_line("ninja", "libswscale") in done.stderr
    assert "not installed: NINFER_KITS_NO_INSTALL is set" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (cache / "git").exists()


FAKE_APT = """#!/bin/sh
# apt-get as the tests need it: records each call, and `install` puts the real ninja on PATH.
echo "$DEBIAN_FRONTEND $*" >> {log}
case "$1" in install) {install} ;; esac
"""


def fake_apt(folder: Path, log: Path, install: str) -> None:
    apt = folder / "apt-get"
    assert not apt.is_symlink(), "would write through a link to the real apt-get"
    apt.write_text(FAKE_APT.format(log=log, install=install))
    apt.chmod(0o755)


def test_as_root_the_packages_are_installed_with_apt(lacking: dict[str, str],
                                                     tmp_path: Path) -> None:
    """Root on Debian/Ubuntu: apt-get update, then one non-interactive install of exactly the
    missing packages, said before it runs; then the check passes. (apt-get itself is a stand-in
    that really puts the missing programs in place: these tests must not change the machine.)"""
    if CATALOG.family_for(read_os_release()) is None or not CATALOG.family_for(
            read_os_release()).automatic:
        missing("a Debian or Ubuntu machine")
    folder = Path(lacking["PATH"])
    log = tmp_path / "apt.log"
    real_ninja = tool("ninja")
    pc = Path(lacking["PKG_CONFIG_LIBDIR"])
    swscale = subprocess.run([tool("pkg-config"), "--variable", "pcfiledir", "libswscale"],
                             capture_output=True, text=True, check=True).stdout.strip()
    fake_apt(folder, log, f"ln -s {real_ninja} {folder}/ninja; "
                          f"ln -s {swscale}/libswscale.pc {pc}/libswscale.pc")
    shown = io.StringIO()
    ensure_build_dependencies(Reporter(shown), environ=lacking, is_root=True)
    line = expected_line("ninja", "libswscale")
    assert f"installing what the build needs (ninja, libswscale): {line}" in shown.getvalue()
    assert log.read_text().splitlines() == [
        "noninteractive update -qq",
        "noninteractive install -y -qq --no-install-recommends "
        + " ".join(line.split()[3:]),
    ]


def test_a_failed_apt_get_shows_its_output(lacking: dict[str, str], tmp_path: Path) -> None:
    if CATALOG.family_for(read_os_release()) is None:
        missing("a Debian or Ubuntu machine")
    fake_apt(Path(lacking["PATH"]), tmp_path / "apt.log",
             "echo 'E: Unable to locate package ninja-build' >&2; exit 100")
    with pytest.raises(EnvironmentFailure,
                       match=r"(?s)--no-install-recommends ninja-build libswscale-dev "
                             r"failed \(exit status 100\):\n  \| E: Unable to locate"):
        ensure_build_dependencies(Reporter(io.StringIO()), environ=lacking, is_root=True)


def test_opt_out_and_not_root_only_name_them(lacking: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "apt.log"
    fake_apt(Path(lacking["PATH"]), log, "true")
    for environ, is_root, said in (({**lacking, NO_INSTALL_ENV: "1"}, True, NO_INSTALL_ENV),
                                   (lacking, False, "then run this again")):
        with pytest.raises(MissingBuildDependencies, match=said):
            ensure_build_dependencies(Reporter(io.StringIO()), environ=environ, is_root=is_root)
    assert not log.exists()


def test_the_command_line_entry(lacking: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "ninfer_kits.pipeline.hostdeps", "--tests"],
                          capture_output=True, text=True, check=False,
                          env={**lacking, NO_INSTALL_ENV: "1"})
    assert done.returncode == 3
    assert done.stderr.startswith("ninfer-kits: error: the local builder cannot build")
    clean = subprocess.run([sys.executable, "-m", "ninfer_kits.pipeline.hostdeps", "--tests"],
                           capture_output=True, text=True, check=False)
    assert (clean.returncode, clean.stderr) == (0, "")


def _toolchain_image() -> str:
    """The test toolchain image trixie-cuda130: the one tests/test_docker.py made, else made here
    as `ninfer-kits build --builder docker` makes it (a CI job of a newer Python, on a machine of
    its own, runs no tests/test_docker.py)."""
    try:
        import docker as sdk
    except ImportError:
        missing("the docker SDK (pip install docker)")
        raise AssertionError from None
    from ninfer_kits.matrix.load import load_matrix
    from ninfer_kits.pipeline.images import ImageRecipe, ensure_image

    from docker_fixtures import ensure_base_image, ensure_engine

    host = ensure_engine()
    ensure_base_image()
    client = sdk.DockerClient(base_url=host) if host else sdk.from_env()
    try:
        recipe = ImageRecipe.toolchain_image(
            load_matrix(ROOT / "matrix.toml").toolchain("trixie-cuda130"))
        return ensure_image(client, recipe, Reporter(io.StringIO(), mode="plain")).tag
    finally:
        client.close()


def test_a_fresh_debian_gets_them_from_apt(tmp_path: Path) -> None:
    """For real, on a Debian trixie root (the test toolchain image, which tests/test_docker.py
    builds): with two packages removed, `python -m ninfer_kits.pipeline.hostdeps` as root
    installs exactly those with apt-get, and the next run finds everything."""
    docker = shutil.which("docker")
    if docker is None:
        missing("docker (the Docker CLI)")
    assert docker is not None
    image = _toolchain_image()
    script = ("apt-get remove -y -qq ninja-build libswscale-dev >/dev/null 2>&1 && "
              "python3 -m ninfer_kits.pipeline.hostdeps && "
              "echo SECOND >&2 && python3 -m ninfer_kits.pipeline.hostdeps")
    done = subprocess.run(
        [docker, "run", "--rm", "--network", "host", "-v", f"{ROOT / 'src'}:/ninfer-kits:ro",
         "-e", "PYTHONPATH=/ninfer-kits", "-e", "PYTHONDONTWRITEBYTECODE=1", image,
         "sh", "-c", script],
        capture_output=True, text=True, check=False, timeout=540)
    assert done.returncode == 0, done.stdout + done.stderr
    first, said, second = done.stderr.partition("SECOND")
    assert said, done.stderr
    assert ("installing what the build needs (ninja, libswscale): "
            "apt-get install -y ninja-build libswscale-dev") in first
    assert "installing" not in second and "error" not in second
