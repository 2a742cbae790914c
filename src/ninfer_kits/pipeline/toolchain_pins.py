"""A toolchain's images made once and pinned: bases and images pushed to a registry, named by digest
in matrix.toml (docs/toolchain.md). A pushed image's tag is its recipe key, so `stale_pins` needs
no registry to say which pins an edit of dockerfiles/ left behind."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Kit, Toolchain
from ninfer_kits.oci.reference import ImageReference, parse_pin, parse_reference
from ninfer_kits.oci.transfer import push_image
from ninfer_kits.pipeline.images import ImageRecipe, ensure_image, require_base

IMAGE_NAME: Final = "ninfer-kits-{role}-{toolchain}"  # under the registry prefix
BASE_NAME: Final = "ninfer-kits-base"  # every base image, one tag each


@dataclass(frozen=True)
class Stale:
    toolchain: str
    key: str  # the matrix key: image or runtime_image
    reason: str


def image_keys(toolchain: Toolchain) -> tuple[tuple[str, ImageRecipe, str], ...]:
    """(matrix key, recipe, pin or "") of the toolchain's two images."""
    return (("image", ImageRecipe.toolchain_image(toolchain), toolchain.image),
            ("runtime_image", ImageRecipe.runtime_image(toolchain), toolchain.runtime_image))


def stale_pins(kits: Iterable[Kit]) -> list[Stale]:
    """The kits' toolchains' pins that are missing or made from another recipe, in order."""
    toolchains = {kit.toolchain.id: kit.toolchain for kit in kits}
    found = []
    for toolchain in toolchains.values():
        for key, recipe, text in image_keys(toolchain):
            if not text:
                found.append(Stale(toolchain.id, key, "not pinned"))
                continue
            made_from, now = parse_pin(text).tag, recipe.recipe_key()
            if made_from != now:
                found.append(Stale(toolchain.id, key, f"the recipe changed since the pin was "
                                                      f"made ({made_from or 'no key'} → {now})"))
    return found


def push_toolchain(client: Any, toolchain: Toolchain, prefix: str,
                   reporter: Reporter) -> list[tuple[str, str]]:
    """Pin the toolchain's unpinned bases and push its stale images; the (matrix key, pin) pairs
    of [toolchains.<id>], bases first."""
    pins: list[tuple[str, str]] = []
    for key in ("base_image", "runtime_base_image"):
        text = getattr(toolchain, key)
        if "@" in text:
            continue
        recipe = ImageRecipe.toolchain_image(toolchain) if key == "base_image" \
            else ImageRecipe.runtime_image(toolchain)
        base = require_base(client, recipe, reporter)
        pin = registry_pin(text, base) or push_image(
            client, text, f"{prefix}/{BASE_NAME}", base_tag(text, str(base.id)), reporter)
        pins.append((key, pin.text()))
        toolchain = dataclasses.replace(toolchain, base_image=pin.text()) \
            if key == "base_image" else dataclasses.replace(toolchain,
                                                            runtime_base_image=pin.text())
    for key, recipe, current in image_keys(toolchain):
        if current and parse_pin(current).tag == recipe.recipe_key():
            # made from this very recipe: pushed again, it would be another digest of the same
            # recipe, a new pin, and every kit of the toolchain stale for nothing
            reporter.info(f"{key} of toolchain {toolchain.id}: its pin is this recipe's, kept")
            pins.append((key, current))
            continue
        image = ensure_image(client, recipe, reporter)
        repository = f"{prefix}/" + IMAGE_NAME.format(role=recipe.role, toolchain=toolchain.id)
        pins.append((key, push_image(client, image.tag, repository, recipe.recipe_key(),
                                     reporter).text()))
    return pins


def registry_pin(name: str, image: Any) -> ImageReference | None:
    """A base pulled from a registry is pinned where it came from (pushed again: a copy to keep)."""
    try:
        wanted = parse_reference(name)
    except ValueError:
        return None
    for held in image.attrs.get("RepoDigests") or []:
        try:
            found = parse_reference(str(held))
        except ValueError:
            continue
        if found.repository == wanted.repository and found.digest:
            return ImageReference(found.repository, wanted.tag, found.digest)
    return None


def base_tag(name: str, image_id: str) -> str:
    """A base's tag: its name and 12 digits of its ID, so one made again goes beside the old."""
    readable = re.sub(r"[^\w.-]+", "-", name.rpartition("/")[2]).strip(".-") or "base"
    return f"{readable[:100]}-{image_id.removeprefix('sha256:')[:12]}"
