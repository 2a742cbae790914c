"""ninfer-kits.pyz: built with the stdlib zipapp, pure Python inside, the same bytes twice, lazy
about the build and publish parts; run on this host without site-packages, and in a Debian
minbase root that has python3 and nothing else (Docker, network none)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ninfer_kits.cli import SUBCOMMANDS
from ninfer_kits.errors import EXIT_ENVIRONMENT
from ninfer_kits.release import pyz as zipapp
from test_fetch import ASSET, KIT, TAG, make_kit, publish_folder, write_ledger
from unsigned import unsigned_matrix

from tools import ROOT, missing

# Modules of the build, publish and docker parts, and of the dependencies fetch does without.
# (The ledger's reader, ninfer_kits.release.ledger, is on the ground floor: no publish module
# loads.)
NEVER_AT_START = re.compile(
    r"^(docker|requests|urllib3|github|b2sdk|elftools|ninfer_kits\.publish\.\w+"
    r"|ninfer_kits\.commands\.build_cmd|ninfer_kits\.pipeline\.(stages|state|stage_functions"
    r"|kit_rules|buildinfo_keys|builders|docker_builder|images|containers|ccache_dir"
    r"|toolchain_export|source|hostdeps|smoke|probe|workspace"
    r"|recipe_report|pack))(\.|$)")


def build_pyz(output: Path, *extra: str) -> Path:
    done = subprocess.run([sys.executable, "-m", "ninfer_kits.zipapp", "-o", str(output),
                           *extra], capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert f"{output} (" in done.stdout
    return output


@pytest.fixture(scope="module")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the test releases are unsigned: a pyz carrying the production matrix refuses them
    return build_pyz(tmp_path_factory.mktemp("pyz") / "ninfer-kits.pyz", "--matrix",
                     str(unsigned_matrix()))


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory, pyz: Path) -> Path:
    """A folder as a rented box would have it: the zipapp, a release folder, a test checkout."""
    folder = tmp_path_factory.mktemp("box")
    shutil.copy(pyz, folder / "ninfer-kits.pyz")
    publish_folder(make_kit(folder / "tree", filler=1 << 20), folder / "dist")
    shutil.rmtree(folder / "tree")
    return folder


def run_pyz(pyz: Path, *args: str, cwd: Path, python: str = sys.executable,
            flags: tuple[str, ...] = ("-I", "-S"), more_env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """The zipapp in an isolated interpreter without site-packages (-I -S): only what it
    carries and the standard library can be imported."""
    env = {"PATH": os.environ["PATH"], "NINFER_KITS_PYZ_CACHE": str(cwd / ".pyz-cache"),
           "HOME": str(cwd), **(more_env or {})}
    return subprocess.run([python, *flags, str(pyz), *args], capture_output=True, text=True,
                          check=False, cwd=cwd, env=env, timeout=300)


def test_the_zipapp_is_pure_python_and_reproducible(tmp_path: Path, pyz: Path) -> None:
    again = build_pyz(tmp_path / "again.pyz", "--matrix", str(unsigned_matrix()))
    assert again.read_bytes() == pyz.read_bytes()
    assert pyz.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    assert os.access(pyz, os.X_OK)
    with zipfile.ZipFile(pyz) as archive:
        names = archive.namelist()
    assert names == sorted(names) or names[0] == "__main__.py"
    assert "ninfer_kits/fetch/fetch.py" in names and "ninfer_kits/data/distros.toml" in names
    assert "ninfer_kits/_bundled/matrix.toml" in names
    assert not [n for n in names if n.endswith((".so", ".pyc")) or ".cpython-" in n]
    assert not [n for n in names
                if n.startswith(("requests/", "github/", "docker/", "urllib3/", "elftools/"))]
    assert pyz.stat().st_size < 1 << 20


@pytest.mark.parametrize("command", [
    ("inspect", f"dist/{TAG}/{ASSET}"),
    ("verify", f"dist/{TAG}"),
    ("fetch", TAG, "--from", "dist", "--dest", "fetched"),
    ("kit-url", KIT),
])
def test_runs_without_site_packages_and_imports_no_build_or_publish_part(
        box: Path, command: tuple[str, ...]) -> None:
    shutil.rmtree(box / "fetched", ignore_errors=True)
    done = run_pyz(box / "ninfer-kits.pyz", *command, cwd=box, flags=("-I", "-S", "-X",
                                                                      "importtime"))
    assert done.returncode == 0, done.stderr[-3000:]
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")]
    assert "ninfer_kits.cli" in imported
    assert [name for name in imported if NEVER_AT_START.match(name)] == []


@pytest.mark.parametrize("command", [("build", "example"), ("publish", "example"),
                                     ("watch",), ("--debug", "watch", "--help"),
                                     ("repro", "example")])
def test_what_needs_the_full_installation_says_so(box: Path, command: tuple[str, ...]) -> None:
    """One line, exit 3 (the environment), no traceback: `watch` died on a missing `requests`."""
    done = run_pyz(box / "ninfer-kits.pyz", *command, cwd=box)
    assert (done.returncode, done.stdout) == (EXIT_ENVIRONMENT, ""), done.stderr
    name = next(word for word in command if not word.startswith("-"))
    assert done.stderr.splitlines() == [
        f"ninfer-kits.pyz runs {', '.join(zipapp.COMMANDS)}; `{name}` needs the full "
        f"installation ({zipapp.full_install(name)})"]


@pytest.mark.parametrize("command,extra", [(("build", "--help"), "local"),
                                           (("repro", "example"), "local"),
                                           (("publish", "example"), "publish")])
def test_the_install_it_names_is_the_extra_the_command_needs(
        box: Path, command: tuple[str, ...], extra: str) -> None:
    # build said `[publish]`, which brings no CMake: build needs `[local]`
    done = run_pyz(box / "ninfer-kits.pyz", *command, cwd=box)
    assert done.returncode == EXIT_ENVIRONMENT
    assert done.stderr.rstrip().endswith(f"(pip install 'ninfer-kits[{extra}]')"), done.stderr


def test_a_kit_whose_tag_needs_the_kit_index_says_the_index_did_not_answer(box: Path) -> None:
    # `example`'s tag needs its version; the ledger it carries has no release of it, so the
    # kit index is read, here from a port where nothing listens (as a box offline).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        index = f"http://127.0.0.1:{probe.getsockname()[1]}/index.json"
    done = run_pyz(box / "ninfer-kits.pyz", "fetch", "example", cwd=box,
                   more_env={"NINFER_KITS_INDEX": index})
    assert done.returncode == EXIT_ENVIRONMENT, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"and the kit index {index}, which may record it, did not answer (connection " \
           f"refused): try again when it can be reached, or name the release's tag instead " \
           f"of the kit" in lines[0], lines[0]
    assert "has no release of it" not in lines[0]


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_command_runs_or_says_it_needs_the_full_installation(
        box: Path, command: str) -> None:
    done = run_pyz(box / "ninfer-kits.pyz", command, "--help", cwd=box)
    assert "Traceback" not in done.stderr, done.stderr
    if command in zipapp.NEEDS_FULL:
        assert done.returncode == EXIT_ENVIRONMENT and "full installation" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"usage: ninfer-kits {command}")


def test_a_module_it_lacks_is_named_not_a_traceback(box: Path) -> None:
    """Whatever a command meets that the zipapp does not carry (here an import made to fail,
    as `import requests` fails in it) ends in one line and exit 3."""
    script = ("import runpy, sys; sys.modules['json'] = None; "
              f"sys.argv = ['ninfer-kits.pyz', 'inspect', '--json', 'dist/{TAG}/{ASSET}']; "
              "runpy.run_path('ninfer-kits.pyz', run_name='__main__')")
    done = run_pyz(Path("-c"), script, cwd=box)
    assert done.returncode == EXIT_ENVIRONMENT, done.stderr
    assert done.stderr.splitlines() == [
        f"ninfer-kits.pyz: `inspect` needs the full installation here "
        f"({zipapp.FULL_INSTALL}): the zipapp carries no json"]


def test_matrix_lists_the_matrix_it_carries(box: Path) -> None:
    """No matrix.toml in the folder, none named: `matrix` reads the zipapp's own copy, as
    fetch and kit-url do (it said "matrix file not found: matrix.toml")."""
    assert not (box / "matrix.toml").exists()
    done = run_pyz(box / "ninfer-kits.pyz", "matrix", cwd=box)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert "feaf4dd0983f" in rows["ninfer-sm120a"] and KIT in rows
    named = run_pyz(box / "ninfer-kits.pyz", "matrix", "--matrix", "nowhere.toml", cwd=box)
    assert named.returncode == 2 and "matrix file not found: nowhere.toml" in named.stderr


def test_a_cache_folder_that_cannot_be_written_falls_back(tmp_path: Path, box: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "XDG_CACHE_HOME": "/proc/x",
           "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-I", "-S", str(box / "ninfer-kits.pyz"),
                           "kit-url", KIT], capture_output=True, text=True, env=env,
                          cwd=box, check=False)
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.glob(f"ninfer-kits-pyz-{os.getuid()}/*/.complete"))


# ------------------------------------------------------------------ python3 and nothing else


@pytest.fixture(scope="module")
def python_minbase() -> str:
    from docker_fixtures import PYTHON_MINBASE, ensure_base_image

    if os.geteuid() != 0:
        missing("root (to make the python3 minbase image with debootstrap)")
    return ensure_base_image(PYTHON_MINBASE, "trixie", include="python3")


def in_minbase(image: str, folder: Path, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", f"{os.getuid()}",
         "-e", "HOME=/box", "-v", f"{folder}:/box", "-w", "/box", image, "sh", "-c", script],
        capture_output=True, text=True, check=False, timeout=600)


@pytest.mark.prepared("python-minbase")
def test_in_a_minbase_root_with_python3_only(python_minbase: str, box: Path,
                                             tmp_path: Path) -> None:
    folder = tmp_path / "box"
    shutil.copytree(box, folder, ignore=shutil.ignore_patterns("fetched", ".pyz-cache"))
    # the image has python3 and nothing else: no pip, no curl, no site-packages to lean on
    probe = in_minbase(python_minbase, folder,
                       "python3 --version; command -v pip pip3 curl wget tar gzip || true; "
                       "python3 -c 'import elftools' 2>&1 || true; cat /etc/os-release")
    assert "Python 3." in probe.stdout and "trixie" in probe.stdout, probe.stderr
    assert "/pip" not in probe.stdout and "/curl" not in probe.stdout
    assert "No module named 'elftools'" in probe.stdout

    inspected = in_minbase(python_minbase, folder,
                           f"python3 ninfer-kits.pyz inspect dist/{TAG}/{ASSET}")
    assert inspected.returncode == 0, inspected.stderr
    assert "Runtime floor of" in inspected.stdout and "kit/bin/app" in inspected.stdout

    verified = in_minbase(python_minbase, folder, f"python3 ninfer-kits.pyz verify dist/{TAG}")
    assert verified.returncode == 0, verified.stderr
    assert "Debian GNU/Linux 13 (trixie)" in verified.stdout
    assert "SHA256SUMS ok" in verified.stdout

    fetched = in_minbase(python_minbase, folder,
                         f"python3 ninfer-kits.pyz fetch {TAG} --from dist --dest /box/got "
                         f"&& /box/got/kit/bin/app && echo RAN")
    assert fetched.returncode == 0, fetched.stderr
    assert "RAN" in fetched.stdout and "| Requirement" in fetched.stdout

    # over HTTP, inside the container: python3's own http.server as the release host, the
    # ledger of a checkout naming its URLs (urllib in the zipapp, nothing else)
    matrix = _checkout_for(folder, "http://127.0.0.1:8765")
    write_ledger(matrix, folder / "dist" / TAG, {"github": f"http://127.0.0.1:8765/{TAG}"})
    served = in_minbase(
        python_minbase, folder,
        "python3 -m http.server 8765 --bind 127.0.0.1 --directory dist >/dev/null 2>&1 & "
        "sleep 1; python3 ninfer-kits.pyz fetch " + KIT + " --matrix checkout/matrix.toml "
        "--dest /box/http; status=$?; kill %1; exit $status")
    assert served.returncode == 0, served.stderr
    assert (folder / "http" / "kit" / "bin" / "app").is_file()
    assert f"downloaded {ASSET}" in served.stderr

    # no matrix given, none in the folder: the zipapp's own copy names the repository
    url = in_minbase(python_minbase, folder, "python3 ninfer-kits.pyz kit-url ninfer-sm120a")
    assert url.returncode == 0, url.stderr
    assert url.stdout.strip().endswith("/releases/download/rtx5090-linux-sm120a-feaf4dd0/"
                                       "ninfer-5090-kit-feaf4dd0983f-sm120a.tar.gz")


def _checkout_for(folder: Path, api: str) -> Path:
    from test_fetch import checkout

    return checkout(folder, api)
