"""matrix.toml: the real file loads as written, and every bad matrix says where it is wrong."""

from __future__ import annotations

import dataclasses
import io
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ninfer_kits.config import resources
from ninfer_kits.errors import BadInput, ConfigError
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import (
    CudaVersion,
    Kit,
    Matrix,
    RevisionFacts,
    UnresolvedPlaceholders,
    arch_id,
    cmake_arch,
    default_matrix_path,
    load_matrix,
    render,
    version_core,
)
from ninfer_kits.pipeline.images import ImageRecipe, ensure_image

from tools import TOOLCHAIN_TC

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ROOT / "matrix.toml"
FULL_5090_SHA = "feaf4dd0983f" + "0123456789abcdef0123456789ab"

# A small valid matrix; each bad case below changes one thing in it.
MINIMAL = """\
schema = 1

[upstreams.eng]
repository = "owner/eng"
url = "https://example.com/owner/eng.git"
branch = "main"
revision = "0123456789ab"
version_file = "VERSION"
archs = ["sm_86", "sm_120a"]
min_cuda = "13.0"
licenses = ["LICENSE", "third_party/*/LICENSE*"]
cmake_options = { CMAKE_BUILD_TYPE = "Release" }
targets = { "eng" = "apps/eng" }

""" + TOOLCHAIN_TC + """
[kits.example]
upstream = "eng"
arch = "sm_86"
toolchain = "tc"
card = "RTX 3090"
tag = "eng-v{version}-linux-{arch_id}-{rev8}"
asset = "eng-kit-{rev12}-{arch_id}.tar.gz"
"""

SECOND_KIT = """
[kits.second]
upstream = "eng"
arch = "sm_120a"
toolchain = "tc"
card = "RTX 5090"
tag = "eng-v{version}-linux-{arch_id}-{rev8}"
asset = "eng-kit-{rev12}-{arch_id}.tar.gz"
"""

# Another upstream pinned at another revision and version: its kits' names differ from those of
# 'eng' for the pins, and agree when both upstreams reach one commit (a fork and its upstream).
OTHER_UPSTREAM = """
[upstreams.fork]
repository = "someone/eng"
url = "https://example.com/someone/eng.git"
branch = "main"
revision = "fedcba987654"
version_file = "VERSION"
version = "2.0"
archs = ["sm_86"]
min_cuda = "13.0"
licenses = ["LICENSE"]
targets = { "eng" = "apps/eng" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(text, encoding="utf-8")
    return path


def edit(old: str, new: str, text: str = MINIMAL) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def line_of(text: str, needle: str) -> int:
    """The line of the first line containing needle; for a needle of several lines, the line
    its last part starts on, so that the context before it can pick one of equal lines."""
    start = text.index(needle) + needle.rfind("\n") + 1
    return text[:start].count("\n") + 1


# --------------------------------------------------------------------------- the real file


@pytest.fixture(scope="module")
def production() -> Matrix:
    return load_matrix(PRODUCTION)


def test_production_has_exactly_its_entries(production: Matrix) -> None:
    assert production.schema == 1
    assert list(production.upstreams) == ["ninfer", "ninfer-3090", "ninfer-all", "example"]
    assert list(production.toolchains) == ["ubuntu2404-cuda131", "trixie-cuda130",
                                           "bullseye-sysroot-cuda130", "bullseye-sysroot-cuda131"]
    assert [(k.id, k.upstream.repository, k.arch) for k in production.kits.values()] == [
        ("ninfer-sm120a", "Neroued/ninfer", "sm_120a"),
        ("ninfer-3090-sm86", "Don-Chad/ninfer-3090", "sm_86"),
        ("ninfer-all-sm86", "iamwavecut/ninfer-all", "sm_86"),
        ("ninfer-all-sm89", "iamwavecut/ninfer-all", "sm_89"),
        ("ninfer-all-sm120a", "iamwavecut/ninfer-all", "sm_120a"),
        ("example", "ninfer-kits/example-engine", "sm_86"),
        ("example-sm120a", "ninfer-kits/example-engine", "sm_120a"),
        ("example-glibc228", "ninfer-kits/example-engine", "sm_86"),
        ("example-jit", "ninfer-kits/example-engine", "sm_86"),
    ]


def test_production_3090_kit_renders_fully_from_the_matrix(production: Matrix) -> None:
    kit = production.kit("ninfer-3090-sm86")
    upstream = kit.upstream
    assert (upstream.branch, upstream.revision) == ("release/v0.6.0-rtx3090", "403fc56d")
    assert (upstream.version_file, upstream.version) == ("VERSION", "0.6.1-rtx3090")
    assert upstream.min_cuda == CudaVersion(text="13.0", parts=(13, 0))
    assert kit.render_tag() == "v0.6.1-rtx3090-linux-sm86"
    assert kit.render_asset() == "ninfer-3090-kit-v0.6.1-sm86.tar.gz"
    assert kit.pending() == ()


def test_production_5090_kit_renders_with_a_full_sha(production: Matrix) -> None:
    kit = production.kit("ninfer-sm120a")
    assert (kit.upstream.repository, kit.upstream.branch) == ("Neroued/ninfer", "master")
    assert kit.upstream.revision == "feaf4dd0983f"
    assert (kit.arch_id, kit.cmake_arch) == ("sm120a", "120a")
    facts = RevisionFacts(revision=FULL_5090_SHA)
    assert kit.render_tag(facts) == "rtx5090-linux-sm120a-feaf4dd0"
    assert kit.render_asset(facts) == "ninfer-5090-kit-feaf4dd0983f-sm120a.tar.gz"
    assert kit.toolchain.cuda.parts == (13, 1, 115)


def test_production_ninfer_all_waits_for_a_build(production: Matrix) -> None:
    assert production.upstream("ninfer-all").archs == ("sm_86", "sm_89", "sm_120a")
    kit = production.kit("ninfer-all-sm89")
    assert kit.upstream.revision is None
    assert kit.render_tag(partial=True) == "ninfer-all-v{version}-linux-sm89-{rev8}"
    assert kit.pending() == ("version", "rev8", "rev12")
    with pytest.raises(UnresolvedPlaceholders, match=r"\{version\}, \{rev8\} not known"):
        kit.render_tag()
    built = RevisionFacts(revision="a" * 40, version="1.2.3-x")
    assert kit.render_tag(built) == "ninfer-all-v1.2.3-x-linux-sm89-aaaaaaaa"
    assert kit.render_asset(built) == "ninfer-all-kit-aaaaaaaaaaaa-sm89.tar.gz"


def test_production_example_is_a_local_folder(production: Matrix) -> None:
    upstream = production.upstream("example")
    assert upstream.url == "examples/engine"
    assert upstream.is_local
    assert upstream.local_path == ROOT / "examples" / "engine"
    assert not production.upstream("ninfer").is_local
    assert production.upstream("ninfer").source == "https://github.com/Neroued/ninfer.git"
    toolchain = production.kit("example").toolchain
    assert toolchain.dockerfile_path == ROOT / "dockerfiles/toolchain-wheels-debian.Dockerfile"


def test_production_example_jit_is_a_variant_by_cmake_option(production: Matrix) -> None:
    """Same upstream and arch as `example`, built without separable compilation (so its kit
    keeps loadable PTX): the kit's own option goes over the upstream's, which stay as they are
    for every other kit."""
    kit = production.kit("example-jit")
    assert (kit.upstream.id, kit.arch, kit.toolchain.id) == ("example", "sm_86", "trixie-cuda130")
    assert kit.cmake_options == (("NINFER_SEPARABLE_COMPILATION", "OFF"),)
    assert kit.upstream.cmake_options == (("CMAKE_BUILD_TYPE", "Release"),
                                          ("NINFER_SEPARABLE_COMPILATION", "OFF"))
    assert production.upstream("example").cmake_options == (("CMAKE_BUILD_TYPE", "Release"),)
    assert production.kit("example").upstream.cmake_options == (("CMAKE_BUILD_TYPE", "Release"),)
    assert production.kit("example").cmake_options == ()
    facts = RevisionFacts(version="0.3.0-example")
    assert kit.render_tag(facts) == "example-jit-v0.3.0-linux-sm86"
    assert kit.render_asset(facts) == "ninfer-example-jit-kit-v0.3.0-sm86.tar.gz"
    assert kit.card == "any GPU of compute capability 8.6 or newer (example engine, PTX)"
    cmake = (ROOT / "examples" / "engine" / "CMakeLists.txt").read_text()
    assert "option(NINFER_SEPARABLE_COMPILATION" in cmake


def test_kit_cmake_options_go_over_the_upstreams(tmp_path: Path) -> None:
    variant = SECOND_KIT.replace("[kits.second]", "[kits.debug]").replace(
        'arch = "sm_120a"', 'arch = "sm_86"').replace("eng-v{version}", "eng-debug-v{version}"
    ).replace("eng-kit-", "eng-debug-kit-") + 'cmake_options = { USE_X = "ON", ' \
        'CMAKE_BUILD_TYPE = "Debug" }\n'
    matrix = load_matrix(write(tmp_path, MINIMAL + variant))
    kit = matrix.kit("debug")
    assert kit.cmake_options == (("USE_X", "ON"), ("CMAKE_BUILD_TYPE", "Debug"))
    # a name the upstream has keeps its place; new names follow
    assert kit.upstream.cmake_options == (("CMAKE_BUILD_TYPE", "Debug"), ("USE_X", "ON"))
    assert matrix.kit("example").upstream == matrix.upstream("eng")
    assert matrix.upstream("eng").cmake_options == (("CMAKE_BUILD_TYPE", "Release"),)
    # the same options as another kit of that upstream and arch: the same build, refused
    same = variant.replace('USE_X = "ON", CMAKE_BUILD_TYPE = "Debug"',
                           'CMAKE_BUILD_TYPE = "Release"')
    with pytest.raises(ConfigError, match="duplicate kit: kit 'example' already builds upstream "
                                          "'eng' for sm_86 with the same CMake options"):
        load_matrix(write(tmp_path, MINIMAL + same))
    # ... unless another toolchain builds it (an older glibc floor, another CUDA): a variant
    other = TOOLCHAIN_TC.replace("[toolchains.tc]", "[toolchains.old]")
    elsewhere = same.replace('toolchain = "tc"', 'toolchain = "old"')
    assert load_matrix(write(tmp_path, MINIMAL + other + elsewhere)).kit("debug").toolchain.id \
        == "old"


def test_portable_is_a_flag_of_a_kit(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, MINIMAL.replace("[kits.example]",
                                                         "[kits.example]\nportable = true")))
    assert matrix.kit("example").portable is True
    assert load_matrix(write(tmp_path, MINIMAL)).kit("example").portable is False
    with pytest.raises(ConfigError, match=r"\[kits.example\].*portable.*expected true or false"):
        load_matrix(write(tmp_path, MINIMAL.replace("[kits.example]",
                                                    '[kits.example]\nportable = "yes"')))


def test_production_objects_are_frozen(production: Matrix) -> None:
    kit = production.kit("example")
    for obj, name in ((kit, "arch"), (kit.upstream, "branch"), (kit.toolchain, "cuda"),
                      (production, "schema"), (kit.upstream.min_cuda, "text")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, "x")
    with pytest.raises(TypeError):
        production.kits["new"] = kit  # type: ignore[index]
    with pytest.raises(TypeError):
        Kit("positional")  # type: ignore[call-arg]


def test_unknown_kit_name_suggests(production: Matrix) -> None:
    with pytest.raises(BadInput, match=r"unknown kit 'ninfer-3090-sm68'; did you mean "
                                       r"'ninfer-3090-sm86'\?"):
        production.kit("ninfer-3090-sm68")
    assert [k.id for k in production.select(["example", "ninfer-sm120a", "example"])] == [
        "example", "ninfer-sm120a"]
    assert len(production.select()) == 9


# --------------------------------------------------------------------------- helpers


def test_arch_forms_and_version_core() -> None:
    assert (arch_id("sm_120a"), cmake_arch("sm_120a")) == ("sm120a", "120a")
    assert (arch_id("sm_86"), cmake_arch("sm_86")) == ("sm86", "86")
    assert version_core("0.6.1-rtx3090") == "0.6.1"
    assert version_core("13") == "13"
    assert version_core("beta") is None


def test_revision_facts_partial_prefixes() -> None:
    short = RevisionFacts(revision="403fc56d")
    assert (short.rev, short.rev8, short.rev12) == (None, "403fc56d", None)
    full = RevisionFacts(revision="ABCDEF0123" * 4)
    assert full.rev == "abcdef0123" * 4
    assert (full.rev8, full.rev12) == ("abcdef01", "abcdef0123ab")
    with pytest.raises(ValueError):
        RevisionFacts(revision="xyz1234")


def test_render_partial_and_strict() -> None:
    values = {"kit": "k", "rev8": "01234567", "rev12": None}
    assert render("{kit}-{rev8}-{rev12}", values, partial=True) == "k-01234567-{rev12}"
    with pytest.raises(UnresolvedPlaceholders, match=r"\{rev12\}"):
        render("{kit}-{rev12}", values)
    with pytest.raises(ValueError, match=r"unknown placeholder \{nope\}"):
        render("{nope}", values, partial=True)


def test_default_path_comes_from_the_environment() -> None:
    assert default_matrix_path({}) == Path("matrix.toml")
    assert default_matrix_path({"NINFER_KITS_MATRIX": "/x/m.toml"}) == Path("/x/m.toml")


def test_minimal_matrix_loads(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, MINIMAL + SECOND_KIT))
    upstream = matrix.upstream("eng")
    assert upstream.cmake_options == (("CMAKE_BUILD_TYPE", "Release"),)
    assert upstream.targets == (("eng", "apps/eng"),)
    assert upstream.licenses == ("LICENSE", "third_party/*/LICENSE*")
    assert [k.render_tag(partial=True) for k in matrix.kits.values()] == [
        "eng-v{version}-linux-sm86-01234567", "eng-v{version}-linux-sm120a-01234567"]


# --------------------------------------------------------------------------- toolchains

WITH_ARGS = edit('cuda = "13.1.2"', """cuda = "13.1.2"
build_args = { CUDA_WHEELS = "13.1", _X1 = "a b" }
runtime_build_args = { CUDA_WHEELS = "13.1" }
runtime_packages = ["libavformat61", "libstdc++6", "libgl1-mesa-dri"]""")


def test_toolchain_build_args_and_runtime_packages(tmp_path: Path) -> None:
    toolchain = load_matrix(write(tmp_path, WITH_ARGS)).toolchain("tc")
    assert toolchain.build_args == (("CUDA_WHEELS", "13.1"), ("_X1", "a b"))
    assert toolchain.runtime_build_args == (("CUDA_WHEELS", "13.1"),)
    assert toolchain.runtime_packages == ("libavformat61", "libstdc++6", "libgl1-mesa-dri")
    assert toolchain.runtime_image_build_args == (
        ("CUDA_WHEELS", "13.1"),
        ("EXTRA_RUNTIME_PACKAGES", "libavformat61 libstdc++6 libgl1-mesa-dri"),
    )
    plain = load_matrix(write(tmp_path, MINIMAL)).toolchain("tc")
    assert (plain.build_args, plain.runtime_build_args, plain.runtime_packages) == ((), (), ())
    assert plain.runtime_image_build_args == ()
    assert plain.glibc_floor is None


def test_toolchain_glibc_floor(tmp_path: Path) -> None:
    matrix = write(tmp_path, edit('cuda = "13.1.2"', 'cuda = "13.1.2"\nglibc_floor = "2.31"'))
    assert load_matrix(matrix).toolchain("tc").glibc_floor == "2.31"


def test_production_debian_toolchains(production: Matrix) -> None:
    ffmpeg7 = ("libavformat61", "libavcodec61", "libavutil59", "libswscale8")
    for name, wheels, cuda in (("trixie-cuda130", "13.0", (13, 0, 88)),
                               ("bullseye-sysroot-cuda130", "13.0", (13, 0, 88)),
                               ("bullseye-sysroot-cuda131", "13.1", (13, 1, 115))):
        toolchain = production.toolchain(name)
        assert toolchain.cuda.parts == cuda
        assert toolchain.build_args == toolchain.runtime_build_args == (("CUDA_WHEELS", wheels),)
        assert toolchain.runtime_packages == ffmpeg7
    kit = production.kit("example-sm120a")
    assert (kit.arch, kit.toolchain.id, kit.portable) == ("sm_120a", "bullseye-sysroot-cuda131",
                                                          True)
    assert kit.render_asset(RevisionFacts(version="0.3.0")) == (
        "ninfer-example-kit-v0.3.0-sm120a.tar.gz")
    assert production.toolchain("ubuntu2404-cuda131").build_args == ()


def test_production_kits_build_on_the_portable_toolchains(production: Matrix) -> None:
    """Every kit of the three upstreams is portable and built on a sysroot toolchain of glibc
    floor 2.28 whose CUDA meets the upstream's min_cuda; no kit uses the Ubuntu toolchain."""
    upstream_kits = [kit for kit in production.kits.values() if kit.upstream.id != "example"]
    assert {kit.upstream.id for kit in upstream_kits} == {"ninfer", "ninfer-3090", "ninfer-all"}
    for kit in upstream_kits:
        assert kit.portable, kit.id
        assert kit.toolchain.id.startswith("bullseye-sysroot-"), kit.id
        assert kit.toolchain.glibc_floor == "2.28", kit.id
    assert all(kit.toolchain.id != "ubuntu2404-cuda131" for kit in production.kits.values())
    assert production.kit("ninfer-sm120a").toolchain.id == "bullseye-sysroot-cuda131"


def test_dockerfiles_beside_the_matrix_else_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A matrix anywhere: its own Dockerfiles relative to its folder (not the current
    directory) or absolute, and `dockerfiles/NAME` it lacks is the one ninfer-kits ships."""
    monkeypatch.chdir(ROOT)  # a checkout's dockerfiles/ here must not matter
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    shipped = ROOT / "dockerfiles"
    assert resources.dockerfiles_dir() == shipped  # tests run from the checkout
    toolchain = load_matrix(write(folder, MINIMAL)).toolchain("tc")
    assert toolchain.dockerfile_path == shipped / "toolchain-cuda-ubuntu.Dockerfile"
    assert toolchain.runtime_dockerfile_path == shipped / "runtime-ubuntu.Dockerfile"

    own = folder / "dockerfiles" / "toolchain-cuda-ubuntu.Dockerfile"
    own.parent.mkdir()
    own.write_text("FROM scratch\n")
    images = tmp_path / "images" / "run.Dockerfile"
    images.parent.mkdir()
    images.write_text("FROM scratch\n")
    text = edit('"dockerfiles/runtime-ubuntu.Dockerfile"', f'"{images}"')
    toolchain = load_matrix(write(folder, text)).toolchain("tc")
    assert toolchain.dockerfile == "dockerfiles/toolchain-cuda-ubuntu.Dockerfile"
    assert toolchain.dockerfile_path == own
    assert toolchain.runtime_dockerfile_path == images

    text = edit('"dockerfiles/runtime-ubuntu.Dockerfile"', '"../images/run.Dockerfile"')
    assert load_matrix(write(folder, text)).toolchain("tc").runtime_dockerfile_path == (
        folder / "../images/run.Dockerfile")
    # Only dockerfiles/NAME falls back to a shipped file: another folder is the matrix's own.
    text = edit('"dockerfiles/runtime-ubuntu.Dockerfile"', '"other/runtime-ubuntu.Dockerfile"')
    with pytest.raises(ConfigError) as caught:
        load_matrix(write(folder, text))
    assert caught.value.detail == (
        f"Dockerfile 'other/runtime-ubuntu.Dockerfile' not found: looked for "
        f"{folder / 'other/runtime-ubuntu.Dockerfile'}; "
        f"did you mean 'dockerfiles/runtime-ubuntu.Dockerfile'?")


def test_a_missing_dockerfile_names_every_place_looked_at(tmp_path: Path) -> None:
    path = write(tmp_path, edit('"dockerfiles/toolchain-cuda-ubuntu.Dockerfile"',
                                '"dockerfiles/toolchain-cuda-ubunt.Dockerfile"'))
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    line = line_of(MINIMAL, "dockerfile =")
    assert str(caught.value) == (
        f"{path}:{line}: [toolchains.tc] key 'dockerfile': Dockerfile "
        f"'dockerfiles/toolchain-cuda-ubunt.Dockerfile' not found: looked for "
        f"{tmp_path / 'dockerfiles/toolchain-cuda-ubunt.Dockerfile'} and "
        f"{resources.dockerfiles_dir() / 'toolchain-cuda-ubunt.Dockerfile'}; "
        f"did you mean 'dockerfiles/toolchain-cuda-ubuntu.Dockerfile'?")
    assert caught.value.exit_code == 2


def image_recipes(tmp_path: Path, text: str = WITH_ARGS) -> tuple[ImageRecipe, ImageRecipe]:
    toolchain = load_matrix(write(tmp_path, text)).toolchain("tc")
    return ImageRecipe.toolchain_image(toolchain), ImageRecipe.runtime_image(toolchain)


# The base image's ID on the engine (tags hash it: a base pulled anew is another image).
BASE_ID = "sha256:" + "b" * 64


def test_image_tags_hash_every_build_argument(tmp_path: Path) -> None:
    image, runtime = image_recipes(tmp_path)
    assert image.all_build_args() == {"CUDA_WHEELS": "13.1", "_X1": "a b",
                                      "BASE_IMAGE": "nvidia/cuda:13.1.2-devel-ubuntu24.04"}
    assert runtime.all_build_args() == {
        "CUDA_WHEELS": "13.1", "BASE_IMAGE": "nvidia/cuda:13.1.2-runtime-ubuntu24.04",
        "EXTRA_RUNTIME_PACKAGES": "libavformat61 libstdc++6 libgl1-mesa-dri"}
    assert image.tag(BASE_ID).startswith("ninfer-kits/toolchain-tc:")
    assert runtime.tag(BASE_ID).startswith("ninfer-kits/runtime-tc:")
    # The order they are written in does not matter; every value does.
    swapped = WITH_ARGS.replace('CUDA_WHEELS = "13.1", _X1 = "a b"',
                                '_X1 = "a b", CUDA_WHEELS = "13.1"')
    assert image_recipes(tmp_path, swapped)[0].tag(BASE_ID) == image.tag(BASE_ID)
    changed = {
        image_recipes(tmp_path, WITH_ARGS.replace(old, new, 1))[which].tag(BASE_ID)
        for old, new, which in (
            ('CUDA_WHEELS = "13.1", _X1', 'CUDA_WHEELS = "13.2", _X1', 0),
            ('_X1 = "a b"', '_X1 = "a  b"', 0),
            ('runtime_build_args = { CUDA_WHEELS = "13.1" }',
             'runtime_build_args = { CUDA_WHEELS = "13.0" }', 1),
            ('"libgl1-mesa-dri"]', '"libgl1-mesa-dri", "curl"]', 1),
            ('"libavformat61", "libstdc++6"', '"libstdc++6", "libavformat61"', 1),
        )
    }
    assert len(changed | {image.tag(BASE_ID), runtime.tag(BASE_ID)}) == 7
    assert image.tag("sha256:" + "c" * 64) != image.tag(BASE_ID)  # the base moved


@dataclasses.dataclass
class FakeImage:
    id: str
    labels: dict[str, str]


class FakeImages:
    def __init__(self, present: set[str]) -> None:
        self.present = {name: FakeImage(BASE_ID, {}) for name in present}

    def get(self, tag: str) -> FakeImage:
        import docker.errors

        if tag not in self.present:
            raise docker.errors.ImageNotFound(tag)
        return self.present[tag]


class FakeApi:
    def __init__(self, images: FakeImages) -> None:
        self.images = images
        self.builds: list[dict[str, Any]] = []

    def build(self, **options: Any) -> list[dict[str, str]]:
        self.builds.append(options)
        self.images.present[options["tag"]] = FakeImage(f"sha256:{len(self.builds):064x}",
                                                        options["labels"])
        return [{"stream": "Step 1/1 : FROM base\n"}]


class FakeClient:
    def __init__(self, present: set[str]) -> None:
        self.images = FakeImages(present)
        self.api = FakeApi(self.images)
        self.networks = type("Networks", (), {"list": staticmethod(lambda **_: ["bridge"])})()


def test_ensure_image_passes_every_build_argument(tmp_path: Path) -> None:
    pytest.importorskip("docker")
    image, runtime = image_recipes(tmp_path)
    client = FakeClient({image.base_image, runtime.base_image})
    messages = io.StringIO()
    reporter = Reporter(stream=messages, mode="plain")
    for recipe in (image, runtime):
        assert ensure_image(client, recipe, reporter).tag == recipe.tag(BASE_ID)
    built = client.api.builds
    assert [b["tag"] for b in built] == [image.tag(BASE_ID), runtime.tag(BASE_ID)]
    assert [b["buildargs"] for b in built] == [image.all_build_args(), runtime.all_build_args()]
    assert (f"(base nvidia/cuda:13.1.2-devel-ubuntu24.04 = {BASE_ID}, CUDA_WHEELS=13.1, "
            "_X1=a b)") in messages.getvalue()
    # found by its tag: no build
    assert ensure_image(client, image, reporter).tag == image.tag(BASE_ID)
    assert len(client.api.builds) == 2


# --------------------------------------------------------------------------- bad matrices

# (id, bad text, table, key, the text of the line the error must point at or None,
#  a fragment the message must contain)
BAD_CASES: list[tuple[str, str, str, str, str | None, str]] = [
    ("toml-syntax", edit('branch = "main"', 'branch = "main'), "", "", 'branch = "main',
     "invalid TOML: Illegal character"),
    ("toml-duplicate-table", MINIMAL + "\n[kits . example]\n", "", "", "[kits . example]",
     "invalid TOML: Cannot declare ('kits', 'example') twice"),
    ("unknown-top-key", edit("schema = 1", "schema = 1\nschemma = 1"), "", "schemma",
     "schemma", "unknown key 'schemma'; did you mean 'schema'?"),
    ("unknown-upstream-key", edit("revision =", "revison ="), "upstreams.eng", "revison",
     "revison", "unknown key 'revison'; did you mean 'revision'?"),
    ("unknown-toolchain-key", edit("\ncuda = ", "\ncudaa = "), "toolchains.tc", "cudaa",
     "cudaa", "unknown key 'cudaa'; did you mean 'cuda'?"),
    ("unknown-kit-key", edit('card = "RTX 3090"', 'card = "RTX 3090"\ncolour = "red"'),
     "kits.example", "colour", "colour", "unknown key 'colour' (known: upstream, arch"),
    ("missing-key", edit('branch = "main"\n', ""), "upstreams.eng", "branch",
     "[upstreams.eng]", "missing required key 'branch'"),
    ("missing-kits", MINIMAL[: MINIMAL.index("[kits.example]")], "", "kits", None,
     "missing required key 'kits'"),
    ("empty-kits", MINIMAL[: MINIMAL.index("[kits.example]")] + "[kits]\n", "", "kits",
     "[kits]", "no kits defined"),
    ("wrong-type-string", edit('revision = "0123456789ab"', "revision = 123456789"),
     "upstreams.eng", "revision", "revision =", "expected a string, got an integer"),
    ("wrong-type-schema", edit("schema = 1", 'schema = "1"'), "", "schema", "schema =",
     "expected an integer, got a string"),
    ("wrong-type-array", edit('archs = ["sm_86", "sm_120a"]', 'archs = "sm_86"'),
     "upstreams.eng", "archs", "archs =", "expected an array of strings, got a string"),
    ("wrong-type-table", edit("[kits.example]", "[kits]\nexample = true\n[kits.other]"),
     "kits", "example", "example = true", "expected a table, got a boolean"),
    ("wrong-type-in-array", edit('licenses = ["LICENSE", ', "licenses = [1, "),
     "upstreams.eng", "licenses", "licenses =", "got an integer in it"),
    ("empty-archs", edit('archs = ["sm_86", "sm_120a"]', "archs = []"), "upstreams.eng",
     "archs", "archs =", "must not be empty"),
    ("empty-licenses", edit('licenses = ["LICENSE", "third_party/*/LICENSE*"]',
                            "licenses = []"),
     "upstreams.eng", "licenses", "licenses =", "must not be empty"),
    ("empty-targets", edit('targets = { "eng" = "apps/eng" }', "targets = {}"),
     "upstreams.eng", "targets", "targets =", "must not be empty"),
    ("invalid-kit-arch", edit('arch = "sm_86"', 'arch = "sm86"'), "kits.example", "arch",
     'arch = "sm86"', "invalid arch 'sm86' (valid forms: sm_NN, sm_NNN, sm_NNa, sm_NNf"),
    ("invalid-upstream-arch", edit('"sm_120a"]', '"sm_120b"]'), "upstreams.eng", "archs",
     "archs =", "invalid arch 'sm_120b'"),
    ("arch-not-in-upstream", edit('arch = "sm_86"', 'arch = "sm_89"'), "kits.example",
     "arch", 'arch = "sm_89"', "arch 'sm_89' is not among the archs of upstream 'eng'"),
    ("duplicate-upstream-arch", MINIMAL + edit('arch = "sm_120a"', 'arch = "sm_86"',
                                               SECOND_KIT),
     "kits.second", "arch", '[kits.second]\nupstream = "eng"\narch',
     "duplicate kit: kit 'example' already builds upstream 'eng' for sm_86"),
    ("duplicate-names", edit("-{arch_id}-{rev8}", "-{rev8}", MINIMAL).replace(
        "-{arch_id}.tar.gz", ".tar.gz") + SECOND_KIT.replace("-{arch_id}", ""),
     "kits.second", "tag", 'card = "RTX 5090"\ntag', "are those of kit "
     "'example' too"),
    # Tags that differ for the pinned revision but not for every one (see matrix/collisions.py).
    ("same-tag-for-two-archs", edit("-{arch_id}-{rev8}", "-{rev8}", MINIMAL) + SECOND_KIT.replace(
        "-{arch_id}-{rev8}", "-{rev8}"),
     "kits.second", "tag", 'card = "RTX 5090"\ntag', "kit 'second' and kit 'example' can get "
     "the same tag, e.g. 'eng-v0-linux-00000000' (from one revision of upstream 'eng'): both "
     "would be published as one release and built into one dist/<tag>/ folder; put {arch_id} "
     "in the tags"),
    ("same-tag-version-and-core", MINIMAL + SECOND_KIT.replace(
        "eng-v{version}-linux-{arch_id}-{rev8}", "eng-v{version_core}-linux-sm86-{rev8}"),
     "kits.second", "tag", 'card = "RTX 5090"\ntag', "can get the same tag, e.g. "
     "'eng-v0-linux-sm86-00000000'"),
    ("same-tag-two-upstreams", MINIMAL + OTHER_UPSTREAM + SECOND_KIT.replace(
        'upstream = "eng"', 'upstream = "fork"').replace("sm_120a", "sm_86"),
     "kits.second", "tag", 'card = "RTX 5090"\ntag', "(from revisions of upstreams 'eng' and "
     "'fork'): both would be published as one release and built into one dist/<tag>/ folder; "
     "put {upstream}, or text of each kit's own, in the tags"),
    ("unknown-placeholder", edit("-{rev8}", "-{rev9}"), "kits.example", "tag", "tag =",
     "unknown placeholder {rev9}; did you mean {rev}, {rev8} or {rev12}?"),
    ("stray-brace", edit("eng-kit-{rev12}", "eng-kit-{rev12"), "kits.example", "asset",
     "asset =", "unbalanced brace"),
    ("version-without-file", edit('version_file = "VERSION"\n', ""), "kits.example", "tag",
     "tag =", "{version} needs a version_file, and upstream 'eng' has none"),
    ("expected-version-without-file", edit('version_file = "VERSION"', 'version = "1.0"'),
     "upstreams.eng", "version", "version =", "'version' needs 'version_file'"),
    ("unknown-upstream", edit('upstream = "eng"', 'upstream = "egn"'), "kits.example",
     "upstream", 'upstream = "egn"', "unknown upstream 'egn'; did you mean 'eng'?"),
    ("unknown-toolchain", edit('toolchain = "tc"', 'toolchain = "tcc"'), "kits.example",
     "toolchain", 'toolchain = "tcc"', "unknown toolchain 'tcc'; did you mean 'tc'?"),
    ("revision-not-hex", edit('"0123456789ab"', '"0123456789xy"'), "upstreams.eng",
     "revision", "revision =", "invalid revision '0123456789xy' (expected 7 to 40 hex"),
    ("revision-too-short", edit('"0123456789ab"', '"012345"'), "upstreams.eng", "revision",
     "revision =", "invalid revision '012345'"),
    ("revision-too-long", edit('"0123456789ab"', '"' + "a" * 41 + '"'), "upstreams.eng",
     "revision", "revision =", "expected 7 to 40 hex digits"),
    ("bad-min-cuda", edit('min_cuda = "13.0"', 'min_cuda = "13"'), "upstreams.eng",
     "min_cuda", "min_cuda =", "invalid CUDA version '13' (expected MAJOR.MINOR[.PATCH])"),
    ("bad-cuda", edit('cuda = "13.1.2"', 'cuda = "13.1.x"'), "toolchains.tc", "cuda",
     'cuda = "13.1.x"', "invalid CUDA version '13.1.x'"),
    ("toolchain-too-old", edit('cuda = "13.1.2"', 'cuda = "12.8"'), "kits.example",
     "toolchain", 'toolchain = "tc"', "toolchain 'tc' has CUDA 12.8, but upstream 'eng' "
     "needs at least 13.0"),
    ("unsupported-schema", edit("schema = 1", "schema = 2"), "", "schema", "schema = 2",
     "unsupported schema 2 (this ninfer-kits reads schema 1)"),
    ("asset-not-tarball", edit("-{arch_id}.tar.gz", "-{arch_id}.zip"), "kits.example",
     "asset", "asset =", "must end in '.tar.gz'"),
    ("asset-with-slash", edit('"eng-kit-', '"dist/eng-kit-'), "kits.example", "asset",
     "asset =", "must be a file name, without '/'"),
    ("asset-from-branch-with-slash", edit('"eng-kit-', '"eng-{branch}-kit-').replace(
        'branch = "main"', 'branch = "release/v1"'), "kits.example", "asset", "asset =",
     "must be a file name, without '/'"),
    ("tag-with-space", edit('"eng-v{version}', '"eng v{version}'), "kits.example", "tag",
     "tag =", "contains ' ', not allowed in a git tag"),
    ("tag-with-dots", edit('"eng-v{version}', '"eng..v{version}'), "kits.example", "tag",
     "tag =", "contains '..', not allowed in a git tag"),
    ("tag-with-colon", edit('"eng-v{version}', '"eng:v{version}'), "kits.example", "tag",
     "tag =", "contains ':'"),
    ("bad-cmake-variable", edit("{ CMAKE_BUILD_TYPE", '{ "BAD-NAME" = "x", CMAKE_BUILD_TYPE'),
     "upstreams.eng.cmake_options", "BAD-NAME", "cmake_options =",
     "invalid CMake variable name 'BAD-NAME'"),
    ("cmake-option-not-string", edit('{ CMAKE_BUILD_TYPE = "Release" }',
                                     "{ BUILD_TESTING = false }"),
     "upstreams.eng.cmake_options", "BUILD_TESTING", "cmake_options =",
     "expected a string, got a boolean"),
    ("kit-bad-cmake-variable", edit('card = "RTX 3090"',
                                    'card = "RTX 3090"\ncmake_options = { "A B" = "x" }'),
     "kits.example.cmake_options", "A B", 'cmake_options = { "A B"',
     "invalid CMake variable name 'A B'"),
    ("kit-cmake-arch", edit('card = "RTX 3090"', 'card = "RTX 3090"\n'
                            'cmake_options = { CMAKE_CUDA_ARCHITECTURES = "90" }'),
     "kits.example.cmake_options", "CMAKE_CUDA_ARCHITECTURES",
     "cmake_options = { CMAKE_CUDA_ARCHITECTURES",
     "CMAKE_CUDA_ARCHITECTURES is set from each kit's arch; remove it here"),
    ("kit-cmake-option-not-string", edit('card = "RTX 3090"', 'card = "RTX 3090"\n'
                                         "cmake_options = { USE_X = true }"),
     "kits.example.cmake_options", "USE_X", "cmake_options = { USE_X",
     "expected a string, got a boolean"),
    ("kit-cmake-options-not-table", edit('card = "RTX 3090"', 'card = "RTX 3090"\n'
                                         'cmake_options = "USE_X=ON"'),
     "kits.example", "cmake_options", 'cmake_options = "USE_X',
     "expected a table, got a string"),
    ("target-escapes", edit('"apps/eng"', '"../eng"'), "upstreams.eng.targets", "eng",
     "targets =", "invalid output path '../eng': must not contain '..'"),
    ("bad-repository", edit('"owner/eng"', '"eng"'), "upstreams.eng", "repository",
     "repository =", "invalid repository 'eng' (expected OWNER/NAME)"),
    ("bad-kit-name", edit("[kits.example]", '[kits."my kit"]'), "kits", "my kit",
     '[kits."my kit"]', "invalid name 'my kit'"),
    ("empty-string", edit('card = "RTX 3090"', 'card = ""'), "kits.example", "card",
     "card =", "must not be empty"),
    ("dockerfile-missing", edit('"dockerfiles/toolchain-cuda-ubuntu', '"dockerfiles/nope'),
     "toolchains.tc", "dockerfile", "dockerfile =",
     "Dockerfile 'dockerfiles/nope.Dockerfile' not found: looked for "),
    ("dockerfile-misspelt", edit('"dockerfiles/runtime-ubuntu.Dockerfile"',
                                 '"dockerfiles/runtime-ubuntu.dockerfile"'),
     "toolchains.tc", "runtime_dockerfile", "runtime_dockerfile =",
     "; did you mean 'dockerfiles/runtime-ubuntu.Dockerfile'?"),
    ("dockerfile-absolute-missing", edit('"dockerfiles/toolchain-cuda-ubuntu.Dockerfile"',
                                         '"/nonexistent/tc.Dockerfile"'),
     "toolchains.tc", "dockerfile", "dockerfile =",
     "Dockerfile '/nonexistent/tc.Dockerfile' not found: looked for /nonexistent/tc.Dockerfile"),
    ("dockerfile-not-string", edit('dockerfile = "dockerfiles/toolchain-cuda-ubuntu.Dockerfile"',
                                   "dockerfile = 1"),
     "toolchains.tc", "dockerfile", "dockerfile = 1", "expected a string, got an integer"),
    ("unknown-toolchain-optional-key", edit('cuda = "13.1.2"',
                                            'cuda = "13.1.2"\nruntime_package = ["curl"]'),
     "toolchains.tc", "runtime_package", "runtime_package =",
     "unknown key 'runtime_package'; did you mean 'runtime_packages'?"),
    ("build-arg-bad-name", edit('cuda = "13.1.2"',
                                'cuda = "13.1.2"\nbuild_args = { "CUDA-WHEELS" = "13.1" }'),
     "toolchains.tc.build_args", "CUDA-WHEELS", "build_args =",
     "invalid build argument name 'CUDA-WHEELS' (letters, digits and '_', not starting with a "
     "digit); did you mean 'CUDA_WHEELS'?"),
    ("build-arg-base-image", edit('cuda = "13.1.2"',
                                  'cuda = "13.1.2"\nbuild_args = { BASE_IMAGE = "debian" }'),
     "toolchains.tc.build_args", "BASE_IMAGE", "build_args =",
     "BASE_IMAGE is set from 'base_image'; remove it here"),
    ("runtime-build-arg-base-image", edit("[kits.example]",
                                          '[toolchains.tc.runtime_build_args]\n'
                                          'CUDA_WHEELS = "13.1"\nBASE_IMAGE = "debian"\n\n'
                                          "[kits.example]"),
     "toolchains.tc.runtime_build_args", "BASE_IMAGE", 'BASE_IMAGE = "debian"',
     "BASE_IMAGE is set from 'runtime_base_image'"),
    ("runtime-build-arg-packages", edit('cuda = "13.1.2"', 'cuda = "13.1.2"\n'
                                        'runtime_build_args = { EXTRA_RUNTIME_PACKAGES = "x" }'),
     "toolchains.tc.runtime_build_args", "EXTRA_RUNTIME_PACKAGES", "runtime_build_args =",
     "EXTRA_RUNTIME_PACKAGES is set from 'runtime_packages'"),
    ("build-arg-not-string", edit('cuda = "13.1.2"',
                                  'cuda = "13.1.2"\nbuild_args = { CUDA_WHEELS = 13.1 }'),
     "toolchains.tc.build_args", "CUDA_WHEELS", "build_args =",
     "expected a string, got a float"),
    ("build-args-not-table", edit('cuda = "13.1.2"', 'cuda = "13.1.2"\nbuild_args = "x=1"'),
     "toolchains.tc", "build_args", "build_args =", "expected a table, got a string"),
    ("runtime-package-bad-name", edit('cuda = "13.1.2"', 'cuda = "13.1.2"\n'
                                      'runtime_packages = ["libcurl4t64", "libAVformat61"]'),
     "toolchains.tc", "runtime_packages", "runtime_packages =",
     "invalid Debian package name 'libAVformat61' (lowercase letters, digits and + . -, at "
     "least two characters, starting with a letter or digit); did you mean 'libavformat61'?"),
    ("runtime-package-too-short", edit('cuda = "13.1.2"',
                                       'cuda = "13.1.2"\nruntime_packages = ["x"]'),
     "toolchains.tc", "runtime_packages", "runtime_packages =",
     "invalid Debian package name 'x'"),
    ("runtime-package-option", edit('cuda = "13.1.2"',
                                    'cuda = "13.1.2"\nruntime_packages = ["-y"]'),
     "toolchains.tc", "runtime_packages", "runtime_packages =",
     "invalid Debian package name '-y'"),
    ("runtime-package-twice", edit('cuda = "13.1.2"', 'cuda = "13.1.2"\n'
                                   'runtime_packages = ["libswscale8", "libswscale8"]'),
     "toolchains.tc", "runtime_packages", "runtime_packages =", "lists 'libswscale8' twice"),
    ("runtime-packages-not-array", edit('cuda = "13.1.2"', 'cuda = "13.1.2"\n'
                                        'runtime_packages = "libswscale8"'),
     "toolchains.tc", "runtime_packages", "runtime_packages =",
     "expected an array of strings, got a string"),
    ("glibc-floor-bad", edit('cuda = "13.1.2"', 'cuda = "13.1.2"\nglibc_floor = "GLIBC_2.31"'),
     "toolchains.tc", "glibc_floor", "glibc_floor =",
     "invalid glibc version 'GLIBC_2.31' (such as \"2.31\": the version glibc's symbols carry)"),
    ("glibc-floor-number", edit('cuda = "13.1.2"', 'cuda = "13.1.2"\nglibc_floor = 2.31'),
     "toolchains.tc", "glibc_floor", "glibc_floor =", "expected a string"),
]


@pytest.mark.parametrize(
    ("text", "table", "key", "line_text", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_CASES],
)
def test_bad_matrix_says_where(
    tmp_path: Path, text: str, table: str, key: str, line_text: str | None, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    error = caught.value
    assert error.where.file == path
    assert (error.where.table, error.where.key) == (table, key)
    expected_line = None if line_text is None else line_of(text, line_text)
    assert error.where.line == expected_line
    assert message in error.detail
    shown = str(error)
    assert shown.startswith(f"{path}:{expected_line}: " if expected_line else f"{path}: ")
    assert "\n" not in shown


def test_there_are_many_distinct_bad_cases() -> None:
    assert len({case[0] for case in BAD_CASES}) == len(BAD_CASES) >= 15


def test_the_whole_message_reads_as_documented(tmp_path: Path) -> None:
    path = write(tmp_path, edit('arch = "sm_86"', 'arch = "sm86"'))
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    assert str(caught.value) == (
        f"{path}:24: [kits.example] key 'arch': invalid arch 'sm86' "
        "(valid forms: sm_NN, sm_NNN, sm_NNa, sm_NNf, e.g. sm_86, sm_120a)"
    )


DOTTED_KIT = MINIMAL[: MINIMAL.index("[kits.example]")] + """[kits]
example.upstream = "eng"
example.arch = "sm_8"
example.toolchain = "tc"
example.card = "RTX 3090"
example.tag = "t"
example.asset = "a.tar.gz"
"""


@pytest.mark.parametrize(
    ("text", "line_text"),
    [
        pytest.param(edit("[kits.example]", "[ kits . 'example' ]").replace(
            'arch = "sm_86"', 'arch = "sm_8"'), 'arch = "sm_8"', id="literal-quoted-header"),
        pytest.param(edit("[kits.example]", '[kits."example"]  # the example').replace(
            'arch = "sm_86"', 'arch = "sm_8"'), 'arch = "sm_8"', id="basic-quoted-header"),
        pytest.param(DOTTED_KIT, 'example.arch = "sm_8"', id="dotted-keys"),
        pytest.param(edit('cmake_options = { CMAKE_BUILD_TYPE = "Release" }\n', "")
                     + '\n[upstreams.eng.cmake_options]\nCMAKE_BUILD_TYPE = "Release"\n'
                     'bad-name = "x"\n', "bad-name", id="sub-table"),
        pytest.param(edit('card = "RTX 3090"', 'card = """RTX\narch = 1\n"""').replace(
            'arch = "sm_86"', 'arch = "sm_8"'), 'arch = "sm_8"', id="multiline-string"),
    ],
)
def test_locator_finds_quoted_and_dotted_forms(tmp_path: Path, text: str, line_text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_matrix(write(tmp_path, text))
    assert caught.value.where.line == line_of(text, line_text)


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(BadInput, match=f"matrix file not found: {missing}"):
        load_matrix(missing)
    with pytest.raises(BadInput, match="is a directory"):
        load_matrix(tmp_path)


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_bytes(MINIMAL.encode().replace(b"RTX 3090", b"RTX \xff"))
    with pytest.raises(ConfigError, match="not valid UTF-8") as caught:
        load_matrix(path)
    assert caught.value.where.line == line_of(MINIMAL, "RTX 3090")


# --------------------------------------------------------------------------- mutations

OPS = ("delete", "duplicate", "swap", "char", "junk", "retype", "truncate")
VALUES = ("1", "true", "[]", "{}", '"x"', "1.5", "[1, 2]", "1979-05-27", "{ a = 1 }", '""',
          '["sm_86", 3]', '"sm_1"', '"{rev9}"')
JUNK_KEYS = ("revison", "archs2", "tag", "x", "kits.extra", '"quoted key"', "schema")


def mutate(text: str, op: str, a: int, b: int, char: str) -> str:
    """One random-ish edit of a matrix text, chosen by op and steered by a and b."""
    lines = text.split("\n")
    i, j = a % len(lines), b % len(lines)
    if op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(j, lines[i])
    elif op == "swap":
        left, right = lines[i].partition("="), lines[j].partition("=")
        if left[1] and right[1]:
            lines[i], lines[j] = left[0] + "=" + right[2], right[0] + "=" + left[2]
    elif op == "char":
        k = a % (len(text) or 1)
        return text[:k] + char + text[k + 1:]
    elif op == "junk":
        lines.insert(i, f"{JUNK_KEYS[b % len(JUNK_KEYS)]} = {VALUES[a % len(VALUES)]}")
    elif op == "retype":
        key, sep, _ = lines[i].partition("=")
        if sep:
            lines[i] = f"{key}= {VALUES[b % len(VALUES)]}"
    elif op == "truncate":
        return text[: a % (len(text) or 1)]
    return "\n".join(lines)


PRODUCTION_TEXT = PRODUCTION.read_text(encoding="utf-8")

mutations = st.lists(
    st.tuples(st.sampled_from(OPS), st.integers(0, 10**6), st.integers(0, 10**6),
              st.characters(codec="utf-8")),
    min_size=1, max_size=4,
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mutations") / "matrix.toml"


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=mutations)
def test_mutated_matrix_loads_or_says_where(scratch: Path, edits: list[tuple[str, int, int, str]]
                                            ) -> None:
    text = PRODUCTION_TEXT
    for edit_args in edits:
        text = mutate(text, *edit_args)
    scratch.write_text(text, encoding="utf-8", newline="")
    try:
        matrix = load_matrix(scratch)
    except ConfigError as error:
        assert "\n" not in str(error)
        assert error.where.file == scratch
    except BadInput as error:
        assert "\n" not in str(error)
    else:
        assert matrix.kits


def seeded_mutations(count: int) -> list[str]:
    rng = random.Random(20240611)
    texts = []
    for _ in range(count):
        op = OPS[rng.randrange(len(OPS))]
        texts.append(mutate(PRODUCTION_TEXT, op, rng.randrange(10**6), rng.randrange(10**6),
                            rng.choice("=[]\"'{}x.#\n1")))
    return texts


def test_mutated_matrices_through_the_cli(tmp_path: Path) -> None:
    failing = 0
    for number, text in enumerate(seeded_mutations(12)):
        path = tmp_path / f"m{number}.toml"
        path.write_text(text, encoding="utf-8", newline="")
        try:
            load_matrix(path)
            expected = None
        except BadInput as error:
            expected = f"ninfer-kits: error: {error}"
        run = subprocess.run(
            [sys.executable, "-m", "ninfer_kits", "matrix", "--matrix", str(path)],
            capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"},
            check=False,
        )
        assert "Traceback" not in run.stderr
        if expected is None:
            assert (run.returncode, run.stderr) == (0, "")
        else:
            failing += 1
            assert run.returncode == 2
            assert run.stderr.splitlines() == [expected]
    assert failing >= 4
