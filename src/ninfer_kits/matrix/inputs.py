"""Everything that makes a kit, as one hash: what BUILDINFO's `inputs` and the ledger record.

`kit_inputs(kit, revision)` hashes, part by part, what the build reads from matrix.toml and from
ninfer-kits itself to make the kit's bytes:

- `revision`: the upstream commit built;
- `upstream`: where it comes from and what is built of it (repository, URL as written, branch,
  which lands in BUILDINFO's `tracked_ref`, VERSION file, targets);
- `cmake_options`: the options CMake gets (the upstream's with the kit's over them);
- `licenses`: the globs of the licence files shipped;
- `arch`: the CUDA arch;
- `kit`: the kit's own fields (card, tag and asset templates, portable);
- `toolchain`: the image the docker builder compiles in: its Dockerfile's bytes, every file the
  Dockerfile COPYs or ADDs from beside it, base image, build arguments, CUDA version;
- `runtime`: the image the smoke test runs the kit in, likewise (and its extra packages);
- `recipe`: the sha256 of build/recipe.py (BUILDINFO's `recipe`).

Each part is the sha256 of canonical JSON (sorted keys, no spaces); the digest is the sha256 of
the canonical JSON of {part: sha256}. Nothing of this machine enters it: no absolute path, no
time; a Dockerfile is hashed by its bytes, not by where it lies. `host-ca.crt`, which the
docker builder puts in every build context, is this machine's CA bundle (it only lets apt and
pip in the build trust what the host trusts) and is not an input.

Ledger entries and BUILDINFO.txt keep the digest and the first PART_HEX hex digits of each
part, so that `watch` can say which parts changed since a release was built.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ninfer_kits import resources
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
    """The inputs of `kit` built from `revision` (a full SHA as built, or as the ledger records
    it). `recipe`: build/recipe.py's sha256 when the caller has it (the build), else read."""
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
                            cuda=kit.toolchain.cuda.text),
        "runtime": _image(kit.toolchain.id, kit.toolchain.runtime_dockerfile_path,
                          kit.toolchain.runtime_base_image,
                          kit.toolchain.runtime_image_build_args),
        "recipe": recipe if recipe is not None else _recipe_sha256(),
    }
    parts = {name: _sha256(data[name]) for name in PARTS}
    return KitInputs(digest=DIGEST_PREFIX + _sha256(parts), parts=parts)


def changed_parts(recorded: Mapping[str, str], now: KitInputs, *,
                  ignore: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The parts (in PARTS order) whose recorded value (full or shortened hex) differs from
    `now`'s; a part the record does not name counts as changed, `ignore`d ones never."""
    return tuple(name for name in PARTS if name not in ignore
                 and not now.parts[name].startswith(recorded.get(name) or "-"))


def cache_key(kit: Kit, inputs: KitInputs) -> str:
    """The compiler cache's key: per kit and toolchain, and the toolchain's definition."""
    return f"ccache-{kit.id}-{kit.toolchain.id}-{inputs.parts['toolchain'][:16]}"


def _image(toolchain: str, dockerfile: Path, base_image: str,
           build_args: tuple[tuple[str, str], ...], cuda: str | None = None) -> dict[str, Any]:
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
    """The files a Dockerfile COPYs or ADDs from its build context (not `--from` a stage, not
    a URL, not the builder's own CONTEXT_FILES)."""
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
