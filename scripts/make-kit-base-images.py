"""Make the Debian base images that the toolchain and runtime images of the given kits start
from, where the Docker engine lacks them: what an engine holding none of this project's images
(a GitHub-hosted runner's) needs before `ninfer-kits build KIT --builder docker`
(.github/workflows/rebuild.yml runs it before each build).

usage: python scripts/make-kit-base-images.py [--matrix PATH] [--toolchain ID]... [KIT...]

A kit's image pinned by digest in matrix.toml (`image`, `runtime_image`) is pulled by the
build, never built, so its base is not needed; a base pinned by digest is pulled too. A
`--toolchain ID` (what .github/workflows/toolchains.yml builds anew and pushes) wants the bases
of both its images, pinned or not. Run with the Python that ninfer-kits is installed in. Each
image is made by
scripts/make-base-image.sh (debootstrap and `docker import`: root, the Docker CLI; its mirror
from NINFER_KITS_DEBIAN_MIRROR or the machine's apt sources) with the arguments the docker
builder names when the image is missing (pipeline.images.debian_root_arguments); a base
of another kind (nvidia/cuda:…) is left to the build, which pulls it. Exits 0 having made or
found every one, else with make-base-image.sh's status.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import docker
import docker.errors

from ninfer_kits.errors import NinferKitsError
from ninfer_kits.matrix import Toolchain, load_matrix
from ninfer_kits.pipeline.images import ImageRecipe, debian_root_arguments

SCRIPT = Path(__file__).resolve().parent / "make-base-image.sh"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrix", type=Path, default=Path("matrix.toml"))
    parser.add_argument("--toolchain", action="append", default=[], metavar="ID",
                        help="the bases of this toolchain's images, even when it is pinned")
    parser.add_argument("kits", nargs="*", metavar="KIT")
    options = parser.parse_args()
    try:
        matrix = load_matrix(options.matrix)
        recipes = [*(recipe for name in options.kits
                     for recipe in _built_recipes(matrix.kit(name).toolchain)),
                   *(recipe for name in options.toolchain
                     for recipe in _recipes(matrix.toolchain(name)))]
    except NinferKitsError as error:
        print(f"make-kit-base-images: {error}", file=sys.stderr)
        return error.exit_code
    wanted: dict[str, tuple[str, ...]] = {}
    for recipe in recipes:
        arguments = None if "@" in recipe.base_image else debian_root_arguments(recipe)
        if arguments is not None:
            wanted.setdefault(recipe.base_image, arguments)
    client = docker.from_env()
    for image, arguments in wanted.items():
        try:
            client.images.get(image)
            print(f"make-kit-base-images: {image} is on the engine already", flush=True)
            continue
        except docker.errors.ImageNotFound:
            pass
        print(f"make-kit-base-images: making {image}", flush=True)
        done = subprocess.run(["bash", str(SCRIPT), *arguments], check=False)
        if done.returncode != 0:
            return done.returncode
    return 0


def _recipes(toolchain: Toolchain) -> tuple[ImageRecipe, ImageRecipe]:
    return ImageRecipe.toolchain_image(toolchain), ImageRecipe.runtime_image(toolchain)


def _built_recipes(toolchain: Toolchain) -> list[ImageRecipe]:
    """The images a build of the toolchain's kits makes: those the matrix does not pin."""
    pins = (toolchain.image, toolchain.runtime_image)
    for recipe, pin in zip(_recipes(toolchain), pins, strict=True):
        if pin:
            print(f"make-kit-base-images: the {recipe.role} image of toolchain "
                  f"{toolchain.id} is pinned ({pin}): pulled by the build, no base needed",
                  flush=True)
    return [recipe for recipe, pin in zip(_recipes(toolchain), pins, strict=True) if not pin]


if __name__ == "__main__":
    sys.exit(main())
