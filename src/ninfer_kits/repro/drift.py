"""What of the build environment differs between two builds of a kit (`a`: the kit, `b`: the
rebuild), from their BUILDINFO.txt alone, so that "NOT reproducible" comes with what to act on.
The finding kinds: docs/repro.md, "When the bytes differ"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from ninfer_kits.inspector.inputs import printable
from ninfer_kits.kit.buildinfo import HOST_TOOLCHAIN, BuildInfo

REVISION: Final = "revision"
BUILDER: Final = "builder"
TOOLCHAIN: Final = "toolchain"
TOOLCHAIN_IMAGE: Final = "toolchain-image"
COMPILERS: Final = "compilers"
INPUTS: Final = "inputs"
RECIPE: Final = "recipe"
PACKER: Final = "packer"
SAME_TOOLCHAIN: Final = "same-toolchain"
UNRECORDED: Final = "unrecorded"
# What each part of BUILDINFO's `inputs` covers; `revision` and `recipe` are findings of their own.
INPUT_PARTS: Final = {
    "upstream": "the upstream's entry (repository, URL, "
    "branch, VERSION file, targets)", "cmake_options": "the CMake options",
    "licenses": "the licence files' globs", "arch": "the CUDA arch",
    "kit": "the kit's entry (card, tag, asset, portable)",
    "toolchain": "the toolchain's recipe (Dockerfile, context, base, arguments, CUDA, pin)",
    "runtime": "the runtime image's recipe"}

# A pin as BUILDINFO records it; anything else (`none (not pinned: …)`) is not pinned.
PIN: Final = re.compile(r"[^\s@]+@sha256:[0-9a-f]{64}")
LOCAL: Final = "local"  # the builder that compiles in no image
PIN_HOW: Final = ("pin the toolchain by digest (`ninfer-kits toolchain push {toolchain}`, "
                  "docs/reproducibility.md) to reproduce across time")


@dataclass(frozen=True)
class Environment:
    """What one kit records of where it was compiled."""

    builder: str
    toolchain: str  # the matrix toolchain, or HOST_TOOLCHAIN (local builder)
    pin: str | None  # run.toolchain_image when it is a pin
    image: str | None  # run.image, LOCALNAME@<image id> (docker builder)
    base_image: str
    base_id: str  # the base image's ID on the engine that built the image, or "unknown"
    compilers: tuple[tuple[str, str], ...]  # (what, version): CUDA, host compiler, CMake

    @property
    def image_name(self) -> str | None:
        return None if self.image is None else self.image.rpartition("@")[0] or self.image

    @property
    def image_id(self) -> str | None:
        return None if self.image is None else self.image.rpartition("@")[2]

    def image_words(self) -> str:
        """The image and its base, as a sentence names them: `X (base B = sha256:…)`."""
        shown = self.pin or self.image or "an image it did not record"
        return f"{printable(shown)} (base {printable(self.base_image)} = {printable(self.base_id)})"


@dataclass(frozen=True)
class Finding:
    kind: str  # one of the kinds above
    detail: str  # one sentence, printable
    a: str | None = None  # the kit's value, where there is one to show
    b: str | None = None  # the rebuild's
    short: str = ""  # the sentence without the values, for a record's one-line summary

    @property
    def summary(self) -> str:
        return self.short or self.detail


@dataclass(frozen=True)
class Drift:
    """The findings, the most telling first; `differs` when any names a difference."""

    findings: tuple[Finding, ...]

    @property
    def differs(self) -> bool:
        return any(item.kind not in (SAME_TOOLCHAIN, UNRECORDED) for item in self.findings)

    @property
    def headline(self) -> str:
        """The first finding, short: a record's summary."""
        return self.findings[0].summary if self.findings else "nothing recorded to compare"


def recorded_pin(info: BuildInfo) -> str | None:
    """`run.toolchain_image` when it records a pin, else None."""
    value = info.run_value("toolchain_image")
    return value if value is not None and PIN.fullmatch(value) else None


def environment(info: BuildInfo) -> Environment:
    return Environment(
        builder=info.builder, toolchain=info.toolchain, pin=recorded_pin(info),
        image=info.run_value("image"), base_image=info.base_image, base_id=info.base_image_id,
        compilers=(("CUDA", info.cuda_version), ("host compiler", info.host_compiler),
                   ("CMake", info.cmake_version)))


def name_drift(a: BuildInfo, b: BuildInfo) -> Drift:
    """What differs between how the kit (`a`) and the rebuild (`b`) were made."""
    kit, rebuild = environment(a), environment(b)
    findings = [*_revision(a, b), *_builder(kit, rebuild), *_image(kit, rebuild),
                *_compilers(kit, rebuild), *_inputs(a, b), *_ninfer_kits(a, b)]
    # a difference first: the sentence a record's summary keeps
    findings.sort(key=lambda item: item.kind in (SAME_TOOLCHAIN, UNRECORDED))
    return Drift(tuple(findings))


def _revision(a: BuildInfo, b: BuildInfo) -> list[Finding]:
    if a.revision == b.revision:
        return []
    return [Finding(REVISION, f"the upstream revision differs: the kit was built from "
                              f"{printable(a.revision)}, this rebuild from "
                              f"{printable(b.revision)}; without --revision, repro --against "
                              f"builds the kit's", a.revision, b.revision)]


def _builder(kit: Environment, rebuild: Environment) -> list[Finding]:
    if kit.builder != rebuild.builder:
        return [Finding(BUILDER, f"the builder differs: the kit was built by the "
                                 f"{printable(kit.builder)} builder ({_toolchain_words(kit)}), "
                                 f"this rebuild by the {printable(rebuild.builder)} builder "
                                 f"({_toolchain_words(rebuild)}); rebuild with --builder "
                                 f"{printable(kit.builder)}", kit.builder, rebuild.builder)]
    if kit.toolchain != rebuild.toolchain and kit.builder != LOCAL:  # (the host's, else)
        return [Finding(TOOLCHAIN, f"the toolchain differs: the kit was built with "
                                   f"{printable(kit.toolchain)}, this rebuild with "
                                   f"{printable(rebuild.toolchain)} (matrix.toml gives the kit "
                                   f"another toolchain since)", kit.toolchain, rebuild.toolchain)]
    return []


def _toolchain_words(side: Environment) -> str:
    if side.toolchain == HOST_TOOLCHAIN:
        return "the build machine's own compilers"
    return f"toolchain {printable(side.toolchain)}"


def _image(kit: Environment, rebuild: Environment) -> list[Finding]:
    """The toolchain image: by pin where both have one, else by the image ID on the engines."""
    if HOST_TOOLCHAIN in (kit.toolchain, rebuild.toolchain) or LOCAL in (kit.builder,
                                                                         rebuild.builder):
        # no image on a local builder's side: the builder and the compilers say it
        return []
    if kit.image is None and kit.pin is None:
        return [Finding(UNRECORDED, "the kit records no toolchain image (a BUILDINFO.txt "
                                    "without run keys: the tarball's own copy)")]
    if kit.pin is not None and kit.pin == rebuild.pin:
        return [_same(f"the toolchain image is the same on both sides ({printable(kit.pin)})")]
    if kit.pin is None and rebuild.pin is None and kit.image_id == rebuild.image_id:
        return [_same(f"the toolchain image is the same on both sides "
                      f"({printable(kit.image or '')}, not pinned)")]
    why = _why(kit, rebuild)
    return [Finding(TOOLCHAIN_IMAGE, f"the toolchain image differs: the kit was built in "
                                     f"{kit.image_words()}, this rebuild in "
                                     f"{rebuild.image_words()}: {why}",
                    kit.pin or kit.image, rebuild.pin or rebuild.image,
                    short=f"the toolchain image differs: {why}")]


def _same(words: str) -> Finding:
    return Finding(SAME_TOOLCHAIN, f"{words}: what differs is not the toolchain (the upstream "
                                   f"revision, the recipe, or what the build takes from its "
                                   f"surroundings: the members above)")


def _why(kit: Environment, rebuild: Environment) -> str:
    """Why the two images differ, and what to do about it."""
    how = PIN_HOW.format(toolchain=printable(kit.toolchain))
    if kit.pin is not None and rebuild.pin is not None:
        return "two pins of the toolchain; rebuild in the kit's (repro --against passes it on)"
    if kit.pin is not None:
        return ("the kit's image is pinned and this rebuild did not run in it; repro --against "
                "--builder docker builds in the recorded pin")
    if rebuild.pin is not None:
        return ("the kit was built in an image that was never pushed (not pinned): no rebuild "
                "can run in it again, on another engine or after that one let it go")
    base = printable(kit.base_image)
    if kit.base_image != rebuild.base_image:
        return f"the toolchain's base image changed (another name); {how}"
    if kit.base_id != rebuild.base_id:
        return f"the base image {base} changed since (made again: another ID); {how}"
    if kit.image_name != rebuild.image_name:
        return ("the toolchain's recipe changed since (another tag: its Dockerfile, context or "
                f"build arguments); {how}")
    return (f"the image was built again from the same recipe and base (what its Dockerfile "
            f"installs, from Debian's archive and PyPI, on another day); {how}")


def _compilers(kit: Environment, rebuild: Environment) -> list[Finding]:
    changed = [(what, old, new) for (what, old), (_, new) in zip(kit.compilers,
                                                                 rebuild.compilers, strict=True)
               if old != new]
    if not changed:
        if kit.builder == LOCAL and rebuild.builder == LOCAL:
            return [_same("both built with the build machine's own compilers, of the same "
                          "versions")]
        return []
    words = ", ".join(f"{what} {printable(old)} (kit) against {printable(new)} (rebuild)"
                      for what, old, new in changed)
    return [Finding(COMPILERS, f"the compilers differ: {words}",
                    "; ".join(f"{what} {old}" for what, old, _ in changed),
                    "; ".join(f"{what} {new}" for what, _, new in changed))]


def _inputs(a: BuildInfo, b: BuildInfo) -> list[Finding]:
    """The parts of `inputs` that differ, where both kits record them."""
    if not a.input_parts or not b.input_parts:
        return []
    theirs, ours = dict(a.input_parts), dict(b.input_parts)
    changed = [name for name in INPUT_PARTS if theirs.get(name) != ours.get(name)]
    if not changed:
        return []
    words = "; ".join(INPUT_PARTS[name] for name in changed)
    return [Finding(INPUTS, f"the inputs differ (BUILDINFO.txt's inputs): {words}; the kit was "
                            f"made from another matrix.toml: rebuild from the ninfer-kits "
                            f"commit the kit records ({printable(a.pipeline_commit)})",
                    ", ".join(changed), None,
                    short=f"the inputs differ: {', '.join(changed)}; rebuild from the "
                          f"ninfer-kits commit the kit records")]


def _ninfer_kits(a: BuildInfo, b: BuildInfo) -> list[Finding]:
    """What of ninfer-kits shapes the bytes: the recipe that compiles, the compressor that packs."""
    found = []
    if a.recipe != b.recipe:
        found.append(Finding(
            RECIPE, f"the recipe differs: build/recipe.py sha256 {printable(a.recipe)} (kit, "
                    f"ninfer-kits {printable(a.pipeline_commit)}) against {printable(b.recipe)} "
                    f"(rebuild, ninfer-kits {printable(b.pipeline_commit)}); rebuild from the "
                    f"ninfer-kits commit the kit records", a.recipe, b.recipe,
            short="the recipe differs (build/recipe.py); rebuild from the ninfer-kits commit "
                  "the kit records (run.pipeline_revision)"))
    if a.zlib_version != b.zlib_version:
        found.append(Finding(PACKER, f"the tarballs were packed by another compressor: "
                                     f"{printable(a.zlib_version)} (kit) against "
                                     f"{printable(b.zlib_version)} (rebuild)",
                             a.zlib_version, b.zlib_version))
    return found


def render(drift: Drift) -> str:
    """The findings as lines, each `drift: …`, for the text report before its verdict."""
    return "".join(f"drift: {item.detail}\n" for item in drift.findings)


def to_json(drift: Drift) -> dict[str, Any]:
    return {"differs": drift.differs,
            "findings": [{"kind": item.kind, "detail": item.detail, "summary": item.summary,
                          "a": item.a, "b": item.b} for item in drift.findings]}
