"""ninfer-kits as `pip install ninfer-kits` gives it: the recipe and the Dockerfiles travel in the
package, and a maintainer's own matrix file works from any folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from ninfer_kits.config import resources
from ninfer_kits.errors import BadInput
from ninfer_kits.files.tarsafe import extract_all
from ninfer_kits.pipeline import builders

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.name for p in (ROOT / "dockerfiles").glob("*.Dockerfile"))
CONTEXT = sorted(p.relative_to(ROOT).as_posix()
                 for p in (ROOT / "dockerfiles" / "context").rglob("*") if p.is_file())
BUNDLED = ["ninfer_kits/_bundled/build/recipe.py",
           *(f"ninfer_kits/_bundled/dockerfiles/{name}" for name in SHIPPED),
           *(f"ninfer_kits/_bundled/{name}" for name in CONTEXT)]


# --------------------------------------------------------------------------- in the checkout


def test_a_checkout_uses_the_repository_files() -> None:
    assert resources.checkout_root() == ROOT
    assert resources.recipe_path() == ROOT / "build" / "recipe.py"
    assert resources.dockerfiles_dir() == ROOT / "dockerfiles"
    assert list(resources.shipped_dockerfiles()) == SHIPPED


def test_the_builders_recipe_is_absolute() -> None:
    """pipeline.compile_kit joins it to the matrix folder: an absolute path stays itself."""
    assert resources.recipe_path() == builders.RECIPE
    assert builders.RECIPE.is_absolute()
    assert Path("/somewhere/else") / builders.RECIPE == builders.RECIPE


def test_require_says_the_install_is_broken(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"the build recipe .*/gone.py is missing: this "
                                       r"ninfer-kits installation is incomplete"):
        resources.require(tmp_path / "gone.py", "the build recipe")
    assert resources.require(builders.RECIPE, "the build recipe") == builders.RECIPE


# --------------------------------------------------------------------------- a real wheel


def clean_env(**extra: str) -> dict[str, str]:
    drop = {"NINFER_KITS_MATRIX", "PYTHONPATH", "NVCC", "CUDACXX", "VIRTUAL_ENV"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(part) for part in command], cwd=cwd, env=env or clean_env(),
                          capture_output=True, text=True, check=False, timeout=300)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, made from a copy of the files it is made of (nothing is written here)."""
    pytest.importorskip("setuptools")
    work = tmp_path_factory.mktemp("sdist")
    project = work / "project"
    project.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, project / name)
    (project / "build").mkdir()
    shutil.copy(ROOT / "build" / "recipe.py", project / "build" / "recipe.py")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "_bundled")
    shutil.copytree(ROOT / "dockerfiles", project / "dockerfiles", ignore=ignore)
    shutil.copytree(ROOT / "src", project / "src", ignore=ignore)
    script = ("import sys; from setuptools import build_meta; "
              "print(build_meta.build_sdist(sys.argv[1]))")
    name = ok(run(sys.executable, "-c", script, work / "out", cwd=project)).strip().splitlines()[-1]
    return work / "out" / name


@pytest.fixture(scope="module")
def wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from the unpacked sdist as `python -m build` does (offline: the
    setuptools of this environment, no build isolation)."""
    work = tmp_path_factory.mktemp("wheel")
    with tarfile.open(sdist) as archive:
        extract_all(archive, work / "unpacked", policy="data")
    (tree,) = (work / "unpacked").iterdir()
    ok(run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
           "--no-index", "--wheel-dir", work / "out", tree, cwd=work))
    (built,) = (work / "out").glob("ninfer_kits-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed (not editable); returns its bin/ folder. The
    dependencies come from this environment through a .pth line after the venv's own
    site-packages, so no index is needed and this checkout is never on the path."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    ok(run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv.parent))
    python = venv / "bin" / "python"
    ok(run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
           "--no-index", wheel, cwd=venv.parent))
    purelib = Path(ok(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                        "['purelib'])", cwd=venv.parent)).strip())
    ours = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    (purelib / "zz_test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    return venv / "bin"


@pytest.mark.slow
def test_sdist_and_wheel_carry_the_recipe_and_dockerfiles(sdist: Path, wheel: Path) -> None:
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"build/recipe.py", "setup.py", "MANIFEST.in",
            *(f"dockerfiles/{name}" for name in SHIPPED), *CONTEXT} <= names
    with zipfile.ZipFile(wheel) as archive:
        listed = set(archive.namelist())
        assert set(BUNDLED) <= listed
        assert archive.read(BUNDLED[0]) == (ROOT / "build" / "recipe.py").read_bytes()
        wrapper = archive.getinfo("ninfer_kits/_bundled/dockerfiles/context/sysroot/compiler")
        assert (wrapper.external_attr >> 16) & 0o111, oct(wrapper.external_attr >> 16)
    assert not any(name.startswith(("build/", "dockerfiles/")) for name in listed)


@pytest.mark.slow
def test_the_installed_package_finds_its_bundled_files(installed: Path, tmp_path: Path) -> None:
    script = ("import json, ninfer_kits, ninfer_kits.config.resources as r; "
              "import ninfer_kits.pipeline.builders as b; "
              "print(json.dumps([ninfer_kits.__file__, str(r.checkout_root()), str(r.root()), "
              "str(b.RECIPE), list(r.shipped_dockerfiles())]))")
    package, checkout, root, recipe, shipped = json.loads(
        ok(run(installed / "python", "-c", script, cwd=tmp_path)))
    venv = installed.parent
    assert Path(package).is_relative_to(venv)
    assert checkout == "None"
    assert Path(root) == Path(package).parent / "_bundled"
    assert Path(recipe) == Path(root) / "build" / "recipe.py"
    assert Path(recipe).read_bytes() == (ROOT / "build" / "recipe.py").read_bytes()
    assert shipped == SHIPPED


MAINTAINER_TOOLCHAINS = """
[toolchains.shipped]
dockerfile = "dockerfiles/toolchain-wheels-debian.Dockerfile"
base_image = "ninfer-kits/debian-trixie-base:local"
cuda = "13.1.115"
build_args = { CUDA_WHEELS = "13.1" }
runtime_dockerfile = "dockerfiles/runtime-wheels-debian.Dockerfile"
runtime_base_image = "ninfer-kits/debian-trixie-minbase:local"
runtime_packages = ["libavformat61"]

[toolchains.own]
dockerfile = "images/own.Dockerfile"
base_image = "debian:trixie"
cuda = "13.1"
runtime_dockerfile = "dockerfiles/runtime-ubuntu.Dockerfile"
runtime_base_image = "debian:trixie-slim"
"""

MAINTAINER_MATRIX = """\
schema = 1

[upstreams.engine]
repository = "someone/engine"
url = "engine"
branch = "main"
archs = ["sm_86", "sm_120a"]
min_cuda = "13.0"
licenses = ["LICENSE"]
targets = { "ninfer" = "apps/ninfer" }
""" + MAINTAINER_TOOLCHAINS + """
[kits.engine-sm86]
upstream = "engine"
arch = "sm_86"
toolchain = "own"
card = "RTX 3090"
tag = "engine-{rev8}-{arch_id}"
asset = "engine-{rev12}-{arch_id}.tar.gz"

[kits.engine-sm120a]
upstream = "engine"
arch = "sm_120a"
toolchain = "shipped"
card = "RTX 5090"
tag = "engine-{rev8}-{arch_id}"
asset = "engine-{rev12}-{arch_id}.tar.gz"
"""


@pytest.mark.slow
def test_a_maintainers_matrix_anywhere(installed: Path, tmp_path: Path) -> None:
    """The installed `ninfer-kits` reads a matrix in a folder of its own: its Dockerfiles beside
    it, the standard ones from the package; `build` takes the recipe from the package."""
    folder = tmp_path / "maintainer"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "own.Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    matrix = folder / "matrix.toml"
    matrix.write_text(MAINTAINER_MATRIX)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    bundled = Path(ok(run(installed / "python", "-c", "import ninfer_kits.config.resources as r; "
                                                      "print(r.root())", cwd=elsewhere)).strip())
    cli = installed / "ninfer-kits"

    document = json.loads(ok(run(cli, "matrix", "--json", "--matrix", matrix, cwd=elsewhere)))
    toolchains = {kit["kit"]: kit["toolchain"] for kit in document["kits"]}
    assert toolchains["engine-sm86"]["dockerfile_path"] == str(folder / "images/own.Dockerfile")
    assert toolchains["engine-sm86"]["runtime_dockerfile_path"] == str(
        bundled / "dockerfiles/runtime-ubuntu.Dockerfile")
    assert toolchains["engine-sm120a"]["dockerfile_path"] == str(
        bundled / "dockerfiles/toolchain-wheels-debian.Dockerfile")
    assert toolchains["engine-sm120a"]["build_args"] == {"CUDA_WHEELS": "13.1"}
    assert toolchains["engine-sm120a"]["runtime_packages"] == ["libavformat61"]

    # A Dockerfile that is nowhere: one line, the file, line, table and key, exit status 2.
    broken = folder / "broken.toml"
    text = MAINTAINER_MATRIX.replace('"images/own.Dockerfile"', '"images/gone.Dockerfile"')
    broken.write_text(text)
    failed = run(cli, "matrix", "--matrix", broken, cwd=elsewhere)
    line = text[: text.index("images/gone")].count("\n") + 1
    assert failed.returncode == 2
    assert failed.stderr == (
        f"ninfer-kits: error: {broken}:{line}: [toolchains.own] key 'dockerfile': Dockerfile "
        f"'images/gone.Dockerfile' not found: looked for {folder / 'images/gone.Dockerfile'}\n")

    # The build finds the recipe in the package and says which, before it checks the compiler
    # (made to fail here, so that nothing is fetched or compiled).
    built = run(cli, "build", "engine-sm86", "--matrix", matrix, "--dist", tmp_path / "dist",
                "--cache-dir", tmp_path / "cache", cwd=elsewhere,
                env=clean_env(NVCC=str(tmp_path / "no-nvcc"), CI="1"))
    assert built.returncode == 2, built.stderr
    assert f"recipe {bundled / 'build' / 'recipe.py'} (sha256 " in built.stderr
    assert f"nvcc {tmp_path / 'no-nvcc'} (from NVCC/CUDACXX) is not an executable" in (
        built.stderr)
    assert "Traceback" not in built.stderr
    assert not (tmp_path / "dist").exists() or not any((tmp_path / "dist").iterdir())
