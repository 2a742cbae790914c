"""Make the Debian base images that the toolchain and runtime images of the given kits start
from, where the Docker engine lacks them: what an engine holding none of this project's images
(a GitHub-hosted runner's) needs before `ninfer-kits build KIT --builder docker`
(.github/workflows/rebuild.yml runs it before each build).

usage: python scripts/make-kit-base-images.py [--matrix PATH] KIT...

Run with the Python that ninfer-kits is installed in. Each image is made by
scripts/make-base-image.sh (debootstrap and `docker import`: root, the Docker CLI; its mirror
from NINFER_KITS_DEBIAN_MIRROR or the machine's apt sources) with the arguments the docker
builder names when the image is missing (pipeline.docker_builder.debian_root_arguments); a base
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
from ninfer_kits.matrix import load_matrix
from ninfer_kits.pipeline.docker_builder import ImageRecipe, debian_root_arguments

SCRIPT = Path(__file__).resolve().parent / "make-base-image.sh"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrix", type=Path, default=Path("matrix.toml"))
    parser.add_argument("kits", nargs="+", metavar="KIT")
    options = parser.parse_args()
    try:
        matrix = load_matrix(options.matrix)
        toolchains = [matrix.kit(name).toolchain for name in options.kits]
    except NinferKitsError as error:
        print(f"make-kit-base-images: {error}", file=sys.stderr)
        return error.exit_code
    wanted: dict[str, tuple[str, ...]] = {}
    for toolchain in toolchains:
        for recipe in (ImageRecipe.toolchain_image(toolchain),
                       ImageRecipe.runtime_image(toolchain)):
            arguments = debian_root_arguments(recipe)
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


if __name__ == "__main__":
    sys.exit(main())
