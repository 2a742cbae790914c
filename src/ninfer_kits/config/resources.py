"""Where the files that are part of the tool itself live (the data files, the build recipe, the
Dockerfiles): a checkout's top, else the copy bundled in the package (DEVELOPING.md, "The files
ninfer-kits ships")."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from ninfer_kits.errors import BadInput

_PACKAGE: Final = Path(__file__).resolve().parent.parent
DATA: Final = _PACKAGE / "data"
BUNDLED: Final = _PACKAGE / "_bundled"
RECIPE_NAME: Final = Path("build") / "recipe.py"
DOCKERFILES_NAME: Final = "dockerfiles"
DOCKERFILE_SUFFIX: Final = ".Dockerfile"


def data_file(name: str) -> Path:
    """The shipped data file of that name (`distros.toml`), absolute."""
    return DATA / name


def checkout_root() -> Path | None:
    """The repository top when this package is imported from a checkout's src/, else None."""
    top = _PACKAGE.parent.parent
    if _PACKAGE.parent.name != "src" or not (top / "pyproject.toml").is_file():
        return None
    return top if (top / RECIPE_NAME).is_file() else None


def root() -> Path:
    """The checkout's top, else the bundled copy (missing from a broken install: `require`)."""
    return checkout_root() or BUNDLED


def recipe_path() -> Path:
    """build/recipe.py, what both builders run (absolute)."""
    return root() / RECIPE_NAME


def dockerfiles_dir() -> Path:
    return root() / DOCKERFILES_NAME


def shipped_dockerfiles() -> tuple[str, ...]:
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
