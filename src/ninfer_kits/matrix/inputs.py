"""Everything that makes a kit, as one hash (BUILDINFO's `inputs`, the ledger's): nothing of this
machine enters it, so two builders of one kit anywhere get the same. The parts and the format:
docs/buildinfo.md, "`inputs`"."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ninfer_kits.config import resources
from ninfer_kits.matrix.model import Kit

DIGEST_PREFIX: Final = "sha256:"
PART_HEX: Final = 16  # hex digits of a part's sha256 kept in BUILDINFO.txt and the ledger
PARTS: Final = ("revision", "upstream", "cmake_options", "licenses", "arch", "kit", "toolchain",
                "runtime", "recipe")
# Parts that describe the docker builder's images: a kit built by the local builder used none.
IMAGE_PARTS: Final = frozenset({"toolchain", "runtime"})
CONTEXT_FILES: Final = frozenset({"host-ca.crt"})  # made by the builder, not by the matrix
_COPY: Final = re.compile(r"^\s*(COPY|ADD)\s+((?:--\S+\s+)*)(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class KitInputs:
    """The digest (`sha256:<hex>`) and each part's full sha256 hex."""

    digest: str
    parts: Mapping[str, str]

    def short_parts(self) -> tuple[tuple[str, str], ...]:
        """(part, first PART_HEX hex digits), in PARTS order: what the records keep."""
        return tuple((name, self.parts[name][:PART_HEX]) for name in PARTS)


def kit_inputs(kit: Kit, revision: str, *, recipe: str | None = None) -> KitInputs:
    """The inputs of `kit` built from `revision`; `recipe`: build/recipe.py's sha256 if known."""
    upstream = kit.upstream
    data: dict[str, Any] = {
        "revision": revision.lower(),
        "upstream": {"repository": upstream.repository, "url": upstream.url,
                     "branch": upstream.branch, "version_file": upstream.version_file,
                     "targets": dict(upstream.targets)},
        "cmake_options": dict(upstream.cmake_options),
        "licenses": sorted(upstream.licenses),
        "arch": kit.arch,
        "kit": {"id": kit.id, "card": kit.card, "tag": kit.tag, "asset": kit.asset,
                "portable": kit.portable},
        "toolchain": _image(kit.toolchain.id, kit.toolchain.dockerfile_path,
                            kit.toolchain.base_image, kit.toolchain.build_args,
                            cuda=kit.toolchain.cuda.text, pin=kit.toolchain.image),
        "runtime": _image(kit.toolchain.id, kit.toolchain.runtime_dockerfile_path,
                          kit.toolchain.runtime_base_image,
                          kit.toolchain.runtime_image_build_args, pin=kit.toolchain.runtime_image),
        "recipe": recipe if recipe is not None else _recipe_sha256(),
    }
    parts = {name: _sha256(data[name]) for name in PARTS}
    return KitInputs(digest=DIGEST_PREFIX + _sha256(parts), parts=parts)


def changed_parts(recorded: Mapping[str, str], now: KitInputs, *,
                  ignore: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The parts whose recorded hex (full or short) differs from `now`'s; one the record lacks
    counts as changed, an `ignore`d one never."""
    return tuple(name for name in PARTS if name not in ignore
                 and not now.parts[name].startswith(recorded.get(name) or "-"))


def cache_key(kit: Kit, inputs: KitInputs) -> str:
    """The compiler cache's key: per kit and toolchain, and the toolchain's definition."""
    return f"ccache-{kit.id}-{kit.toolchain.id}-{inputs.parts['toolchain'][:16]}"


def _image(toolchain: str, dockerfile: Path, base_image: str,
           build_args: tuple[tuple[str, str], ...], cuda: str | None = None,
           pin: str = "") -> dict[str, Any]:
    if pin:  # the image's bytes are the pin's: a later edit of its Dockerfile changes no kit
        return {"id": toolchain, "pin": pin, **({"cuda": cuda} if cuda is not None else {})}
    data: dict[str, Any] = {"id": toolchain, "base_image": base_image,
                            "build_args": dict(build_args), "dockerfile": None, "copies": {}}
    if cuda is not None:
        data["cuda"] = cuda
    try:
        text = dockerfile.read_bytes()
    except OSError:  # the build will name it; the matrix may be for the local builder only
        return data
    data["dockerfile"] = hashlib.sha256(text).hexdigest()
    data["copies"] = {name: _file_sha256(dockerfile.parent / name)
                      for name in sorted(copied_files(text.decode("utf-8", "replace")))}
    return data


def copied_files(dockerfile: str) -> set[str]:
    """The files a Dockerfile COPYs or ADDs from its build context (not a stage, a URL, or the
    builder's own CONTEXT_FILES)."""
    found: set[str] = set()
    for line in dockerfile.replace("\\\n", " ").splitlines():
        match = _COPY.match(line)
        if match is None:
            continue
        flags, body = match.group(2), match.group(3).strip()
        if "--from" in flags:
            continue
        try:
            words = ([str(word) for word in json.loads(body)] if body.startswith("[")
                     else shlex.split(body))
        except (ValueError, TypeError):
            continue
        sources = words[:-1]
        found.update(source for source in sources
                     if "://" not in source and source not in CONTEXT_FILES)
    return found


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _recipe_sha256() -> str:
    path = resources.recipe_path()
    return _file_sha256(path) or "missing"


def _sha256(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
