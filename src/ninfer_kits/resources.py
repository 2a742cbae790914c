"""Where the files that are part of the tool itself live: the shipped data files, the build
recipe and the Dockerfiles.

The data files (`ninfer_kits/data/*.toml`, `*.json`: distributions, drivers, loaders, runtime
libraries, packages, the portable policy, build dependencies, the JSON schemas) are package data
in every installation, a checkout, a wheel and the unpacked .pyz alike. A TOML file is read one
way: `tables.read_data_file(data_file(NAME), ...)`, whose Table each facts module checks against
its own rules (a ConfigError naming file, line, table and key) before it caches what it builds,
so a file is parsed once per run. The JSON schemas are for the tests and for users.

The recipe and the Dockerfiles are kept at the top of the repository (build/recipe.py,
dockerfiles/), where maintainers edit them and the docs point, and setup.py copies them into
the package at build time as
`ninfer_kits/_bundled/build/recipe.py` and `ninfer_kits/_bundled/dockerfiles/*.Dockerfile`, the
same layout under another root. So:

- in a checkout (running from src/, or an editable install) the repository top is the root, and
  an edit to build/recipe.py takes effect at once;
- in an installed wheel the bundled copy is the root, and a maintainer's own matrix file can
  live anywhere.

Never beside the matrix: the recipe is part of ninfer-kits, not of a matrix. Code that needs
these files calls `recipe_path()`, `dockerfiles_dir()` or `shipped_dockerfile(NAME)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from ninfer_kits.errors import BadInput

_PACKAGE: Final = Path(__file__).resolve().parent
DATA: Final = _PACKAGE / "data"
BUNDLED: Final = _PACKAGE / "_bundled"
RECIPE_NAME: Final = Path("build") / "recipe.py"
DOCKERFILES_NAME: Final = "dockerfiles"
DOCKERFILE_SUFFIX: Final = ".Dockerfile"


def data_file(name: str) -> Path:
    """The shipped data file of that name (`distros.toml`): an absolute path."""
    return DATA / name


def checkout_root() -> Path | None:
    """The repository top when this package is imported from a checkout's src/, else None."""
    top = _PACKAGE.parent.parent
    if _PACKAGE.parent.name != "src" or not (top / "pyproject.toml").is_file():
        return None
    return top if (top / RECIPE_NAME).is_file() else None


def root() -> Path:
    """The folder holding build/recipe.py and dockerfiles/: the checkout's top, else the copy
    bundled into the installed package (which may be missing from a broken install: callers
    that need a file check it, see `require`)."""
    return checkout_root() or BUNDLED


def recipe_path() -> Path:
    """build/recipe.py: what both builders run (an absolute path)."""
    return root() / RECIPE_NAME


def dockerfiles_dir() -> Path:
    """The folder of the Dockerfiles ninfer-kits ships (an absolute path)."""
    return root() / DOCKERFILES_NAME


def shipped_dockerfile(name: str) -> Path | None:
    """The shipped Dockerfile of that file name (`toolchain-wheels-debian.Dockerfile`), or None
    when ninfer-kits ships none by that name."""
    if not name.endswith(DOCKERFILE_SUFFIX) or Path(name).name != name:
        return None
    path = dockerfiles_dir() / name
    return path if path.is_file() else None


def shipped_dockerfiles() -> tuple[str, ...]:
    """The names of the shipped Dockerfiles, sorted."""
    folder = dockerfiles_dir()
    if not folder.is_dir():
        return ()
    return tuple(sorted(p.name for p in folder.iterdir() if p.name.endswith(DOCKERFILE_SUFFIX)))


def require(path: Path, what: str) -> Path:
    """path, or BadInput saying this installation of ninfer-kits lacks it."""
    if not path.is_file():
        raise BadInput(f"{what} {path} is missing: this ninfer-kits installation is incomplete "
                       f"(reinstall it: pip install --force-reinstall ninfer-kits; in a "
                       f"checkout, restore it with git)")
    return path
