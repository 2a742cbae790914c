"""The docker builder's images: a toolchain's compile and runtime images, built from the matrix's
Dockerfiles (tagged by the recipe and the base's ID) or pulled by their pins, and their bases
(docs/build.md, "--builder docker"; docs/toolchain.md)."""

from __future__ import annotations

import hashlib
import io
import re
import shlex
import tarfile
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ninfer_kits.config import settings
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.files import locks
from ninfer_kits.host.engine import LABEL, engine_address, first_line
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Toolchain
from ninfer_kits.oci.reference import parse_pin
from ninfer_kits.oci.transfer import pull_pinned
from ninfer_kits.pipeline.builders import LOG_TAIL

BASE_LABEL = "org.ninfer-kits.base-image"  # the base image's name, as the matrix gives it
BASE_ID_LABEL = "org.ninfer-kits.base-image-id"  # its ID on the engine when this image was built
IMAGE_PREFIX = "ninfer-kits"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
WHEELS_ARG = "CUDA_WHEELS"  # the build argument of the images that get CUDA from PyPI wheels
IMAGE_WAIT = 4 * 3600.0  # seconds to wait for another process building the same image
DOCKER_STEP = re.compile(r"Step (?P<done>[0-9]+)/(?P<total>[0-9]+) : (?P<what>.*)")
COPY_LINE = re.compile(r"^\s*(?:COPY|ADD)\s(.*)$", re.IGNORECASE | re.MULTILINE)
CONTEXT_FOLDER = re.compile(r"(?<!\S)(context/[\w.-]+)/")  # a source's context/<folder>/


@dataclass(frozen=True, kw_only=True)
class ImageRecipe:
    """An image we build ourselves: its Dockerfile and build arguments decide its tag."""

    role: str  # "toolchain" or "runtime"
    toolchain: str
    dockerfile: Path
    base_image: str
    build_args: tuple[tuple[str, str], ...] = ()  # besides BASE_IMAGE, which base_image gives

    @classmethod
    def toolchain_image(cls, toolchain: Toolchain) -> ImageRecipe:
        """The image the docker builder compiles in, as the matrix's toolchain describes it."""
        return cls(role="toolchain", toolchain=toolchain.id, dockerfile=toolchain.dockerfile_path,
                   base_image=toolchain.base_image, build_args=toolchain.build_args)

    @classmethod
    def runtime_image(cls, toolchain: Toolchain) -> ImageRecipe:
        """The image the smoke test runs a finished kit in (runtime_packages included)."""
        return cls(role="runtime", toolchain=toolchain.id,
                   dockerfile=toolchain.runtime_dockerfile_path,
                   base_image=toolchain.runtime_base_image,
                   build_args=toolchain.runtime_image_build_args)

    def all_build_args(self) -> dict[str, str]:
        """Every build argument, BASE_IMAGE included (a pinned base by its digest alone)."""
        base = parse_pin(self.base_image).by_digest() if "@" in self.base_image \
            else self.base_image
        return {**dict(self.build_args), "BASE_IMAGE": base}

    def tag(self, base_id: str) -> str:
        """The image's tag for a base whose ID on the engine is `base_id` (`sha256:…`)."""
        digest = self._recipe_digest()
        # and the base's ID, so that a base pulled anew under the same name is another image too
        digest.update(f"\0{BASE_ID_LABEL}={base_id}".encode())
        return f"{IMAGE_PREFIX}/{self.role}-{self.toolchain}:{digest.hexdigest()[:16]}"

    def recipe_key(self) -> str:
        """16 hex digits of what the image is made from: a pushed image's tag, so a pin whose tag
        differs was made from another recipe."""
        return str(self._recipe_digest().hexdigest()[:16])

    def _recipe_digest(self) -> Any:  # a hashlib object: typeshed's type is private
        if not self.dockerfile.is_file():
            raise BadInput(f"toolchain {self.toolchain}: {self.role} Dockerfile {self.dockerfile} "
                           f"not found")
        digest = hashlib.sha256(self.dockerfile.read_bytes())
        for name, path in context_files(self.dockerfile):  # what it COPYs is the recipe too
            digest.update(f"\0{name}\0".encode() + path.read_bytes())
        for name, value in sorted(self.all_build_args().items()):  # a changed one: another image
            digest.update(f"\0{name}={value}".encode())
        return digest


def network_mode(client: Any) -> str:
    """NINFER_KITS_DOCKER_NETWORK, else `host` on an engine without a bridge network."""
    chosen = settings.read(settings.DOCKER_NETWORK)
    if chosen:
        return chosen
    return "default" if client.networks.list(names=["bridge"]) else "host"


@dataclass(frozen=True)
class EngineImage:
    tag: str
    id: str
    labels: dict[str, str]

    @classmethod
    def of(cls, tag: str, image: Any) -> EngineImage:
        return cls(tag=tag, id=str(image.id), labels=dict(image.labels or {}))


def pinned_image(client: Any, recipe: ImageRecipe, text: str, reporter: Reporter) -> EngineImage:
    """The image a pin names, pulled when absent; a warning when the recipe has changed since."""
    pin = parse_pin(text)
    image = pull_pinned(client, pin, reporter, f"{recipe.role} image of toolchain "
                                               f"{recipe.toolchain}")
    if pin.tag and pin.tag != recipe.recipe_key():
        reporter.warning(f"the pinned {recipe.role} image of toolchain {recipe.toolchain} "
                         f"({pin.text()}) was made from another recipe than "
                         f"{recipe.dockerfile.name} and its arguments now give "
                         f"({recipe.recipe_key()}); `ninfer-kits toolchain push "
                         f"{recipe.toolchain}` makes a new pin")
    return EngineImage.of(pin.by_digest(), image)


def ensure_image(client: Any, recipe: ImageRecipe, reporter: Reporter) -> EngineImage:
    """The image tagged with this recipe's hash, built once (the base's name and ID as labels)."""
    import docker.errors

    base = require_base(client, recipe, reporter)
    tag = recipe.tag(base.id)
    try:
        return EngineImage.of(tag, client.images.get(tag))
    except docker.errors.ImageNotFound:
        pass
    # Two builds on this machine needing the same new image (a CI run's builds at once, two
    # terminals) build it once: the second waits for the first, then finds it.
    with locks.held(locks.named(f"image-{tag}"), wait=IMAGE_WAIT, name_holder=True,
                    waiting=lambda holder: reporter.info(
                        f"waiting for {holder}, which is building {tag}")):
        try:
            return EngineImage.of(tag, client.images.get(tag))
        except docker.errors.ImageNotFound:
            return _build_image(client, recipe, tag, base, reporter)


def _build_image(client: Any, recipe: ImageRecipe, tag: str, base: Any,
                 reporter: Reporter) -> EngineImage:
    arguments = "".join(f", {name}={value}" for name, value in recipe.build_args)
    reporter.info(f"building {tag} from {recipe.dockerfile.name} (base {recipe.base_image} = "
                  f"{base.id}{arguments})")
    # An image that builds libraries from source takes many minutes: its Dockerfile's steps
    # ("Step 12/33 : RUN …") are the progress, live on a terminal, a line every so often in CI.
    progress = reporter.progress(f"building {tag}")
    with _context(recipe.dockerfile) as context:
        tail: deque[str] = deque(maxlen=LOG_TAIL)
        for chunk in client.api.build(fileobj=context, custom_context=True, tag=tag, rm=True,
                                      forcerm=True, pull=False, decode=True,
                                      buildargs=recipe.all_build_args(),
                                      network_mode=network_mode(client),
                                      labels={LABEL: recipe.role,
                                              BASE_LABEL: recipe.base_image,
                                              BASE_ID_LABEL: base.id}):
            for line in str(chunk.get("stream", "")).splitlines():
                tail.append(line)
                step = DOCKER_STEP.match(line)
                if step:  # a RUN step may be silent for minutes: each is a line of its own
                    progress.update(int(step["done"]), int(step["total"]), step["what"][:60],
                                    milestone=True)
            if "error" in chunk:
                lines = "\n".join(f"  | {line}" for line in tail)
                raise CheckFailed(f"building image {tag} from {recipe.dockerfile} failed: "
                                  f"{str(chunk['error']).strip()}\n{lines}")
    return EngineImage.of(tag, client.images.get(tag))


def require_base(client: Any, recipe: ImageRecipe, reporter: Reporter) -> Any:
    """The base image as the engine has it now, pulled when absent (a pinned one by its digest)."""
    import docker.errors

    if "@" in recipe.base_image:
        return pull_pinned(client, parse_pin(recipe.base_image), reporter,
                           f"base image of toolchain {recipe.toolchain}'s {recipe.role} image")
    try:
        return client.images.get(recipe.base_image)
    except docker.errors.ImageNotFound:
        pass
    try:
        return client.images.pull(recipe.base_image)
    except docker.errors.APIError as error:
        raise BaseImageMissing(recipe, first_line(error)) from None


class BaseImageMissing(EnvironmentFailure):
    """A base image the engine lacks and cannot pull; its message says how to make one (a plain
    Debian root) or names toolchains that build anywhere (`suggesting`)."""

    def __init__(self, recipe: ImageRecipe, cause: str, kit: str = "",
                 alternatives: Sequence[str] = ()) -> None:
        self.recipe, self.cause = recipe, cause
        super().__init__(_base_missing(recipe, cause, kit, alternatives))

    def suggesting(self, kit: str, alternatives: Sequence[str]) -> BaseImageMissing:
        """The same failure, naming the toolchains (`ID (CUDA X)`) kit `kit` could use."""
        return BaseImageMissing(self.recipe, self.cause, kit, alternatives)


def builds_anywhere(build_args: Iterable[tuple[str, str]]) -> bool:
    """Whether these arguments get CUDA from NVIDIA's PyPI wheels on a plain Debian base."""
    return any(name == WHEELS_ARG for name, _ in build_args)


def debian_root_arguments(recipe: ImageRecipe) -> tuple[str, ...] | None:
    """scripts/make-base-image.sh's arguments for the recipe's base when it is a plain Debian
    root; None for any other (nvidia/cuda:… only a registry has)."""
    base = recipe.base_image
    if not (builds_anywhere(recipe.build_args) and "debian" in base.rpartition(":")[0]):
        return None
    suite = re.search(r"debian-([a-z]+)", base)
    return (base, *((suite.group(1),) if suite else ()),
            *(("--include", "") if recipe.role == "runtime" else ()))


def _base_missing(recipe: ImageRecipe, cause: str, kit: str, alternatives: Sequence[str]) -> str:
    base = recipe.base_image
    said = (f"base image {base} (toolchain {recipe.toolchain}) cannot be had: it is not on the "
            f"engine at {engine_address()} and pulling it failed ({cause})")
    arguments = debian_root_arguments(recipe)
    if arguments is not None:
        shown = " ".join(shlex.quote(argument) for argument in arguments)
        return (f"{said}. It is a plain Debian root (the toolchain's Dockerfile adds CUDA from "
                f"NVIDIA's PyPI wheels): make it with scripts/make-base-image.sh {shown}, "
                f"or docker pull / docker load it where a registry is reachable")
    if alternatives:
        listed = " or ".join(alternatives) if len(alternatives) <= 2 else \
            ", ".join(alternatives[:-1]) + " or " + alternatives[-1]
        instead = (f"build kit {kit} with a toolchain of the matrix that builds anywhere "
                   f"(Debian packages and NVIDIA's PyPI wheels): {listed}, as its toolchain in "
                   f"[kits.{kit}]")
    else:
        instead = ("use a toolchain that builds anywhere (Debian packages and NVIDIA's PyPI "
                   f"wheels: dockerfiles/toolchain-wheels-debian.Dockerfile with {WHEELS_ARG})")
    return (f"{said}. docker pull / docker load it on that engine where a registry is "
            f"reachable (no Debian root made by scripts/make-base-image.sh stands in for it), "
            f"or {instead}")


def context_files(dockerfile: Path) -> list[tuple[str, Path]]:
    """(name, file) of every file in the context/ folders the Dockerfile COPYs from, sorted."""
    lines = COPY_LINE.findall(dockerfile.read_text(encoding="utf-8"))
    files = []
    for folder in sorted({folder for line in lines for folder in CONTEXT_FOLDER.findall(line)}):
        place = dockerfile.parent / folder
        if not place.is_dir():
            raise BadInput(f"{dockerfile}: COPY from {folder}/, which is not a folder beside it")
        files += [(path.relative_to(dockerfile.parent).as_posix(), path)
                  for path in place.rglob("*") if path.is_file()]
    return sorted(files)


@contextmanager
def _context(dockerfile: Path) -> Iterator[io.BytesIO]:
    """The build context, with the host's CA bundle (pip and apt trust what this machine does) and
    every mtime 0: nvcc -lineinfo would record a header's checkout time in the device code."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(dockerfile, arcname="Dockerfile", filter=_without_mtime)
        for name, path in context_files(dockerfile):
            archive.add(path, arcname=name, filter=_without_mtime)
        ca = CA_BUNDLE if CA_BUNDLE.is_file() else None
        data = ca.read_bytes() if ca else b""
        info = tarfile.TarInfo("host-ca.crt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    yield buffer


def _without_mtime(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = 0
    return info
