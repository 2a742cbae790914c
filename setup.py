"""Packaging glue: carry build/recipe.py and dockerfiles/ (with context/) into the package.

Everything else is declared in pyproject.toml. The recipe and the Dockerfiles are part of the
tool (both builders run the recipe; the docker builder builds the Dockerfiles), but they live at
the top of the repository, where maintainers edit them and the docs point. A build_py step that
copies them into the build folder as `ninfer_kits/_bundled/` is the robust way to ship them:

- one copy in git, no symlinks (which sdists, wheels and some file systems mangle), no second
  copy under src/ to keep in step;
- it runs wherever a wheel is made (`pip install .`, `pip wheel`, `python -m build`, from the
  repository or from the sdist, which carries the files through MANIFEST.in), and the wheel
  holds them as ordinary package data;
- package-data or data-files alone cannot do it: package-data only takes files inside the
  package folder, and data-files install outside the package where nothing can find them.

An editable install gets no copy; ninfer_kits.config.resources then uses the repository's own files.

setuptools' own scratch folder defaults to `build/`, and its sdist leaves out everything under
that folder, build/recipe.py included. So its scratch folder moves below, into build/lib/
(already ignored by git, where setuptools has always put its copies).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
BUNDLED = ("ninfer_kits", "_bundled")
SCRATCH = "build/lib"  # setuptools' build_base: not build/, which holds recipe.py


def bundled_files() -> list[tuple[Path, Path]]:
    """(source, path under _bundled/) of every file carried into the package."""
    files = [(HERE / "build" / "recipe.py", Path("build") / "recipe.py")]
    files += [(path, Path("dockerfiles") / path.name)
              for path in sorted((HERE / "dockerfiles").glob("*.Dockerfile"))]
    # What the Dockerfiles COPY (pin lists, build scripts): pipeline/images.py sends it along.
    files += [(path, path.relative_to(HERE))
              for path in sorted((HERE / "dockerfiles" / "context").rglob("*")) if path.is_file()]
    missing = [str(source) for source, _ in files if not source.is_file()]
    if missing or len(files) < 2:
        raise SystemExit(f"ninfer-kits: cannot bundle {', '.join(missing) or 'the Dockerfiles'}"
                         f": not found beside setup.py")
    return files


class BuildPyWithBundled(build_py):
    """build_py, then the recipe and Dockerfiles into <build_lib>/ninfer_kits/_bundled/."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads them from the repository
        target = Path(self.build_lib).joinpath(*BUNDLED)
        if target.exists():
            shutil.rmtree(target)  # a Dockerfile removed from the repository goes here too
        for source, name in bundled_files():
            dest = target / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, dest)  # with its mode: a script the image runs stays executable

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs: list[str] = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            target = Path(self.build_lib).joinpath(*BUNDLED)
            outputs += [str(target / name) for _, name in bundled_files()]
        return outputs


setup(
    cmdclass={"build_py": BuildPyWithBundled},
    options={"build": {"build_base": SCRATCH}},
)
