"""The docker builder's bookkeeping, without an engine: image tags and labels (provenance), the
compile container's settings, and engine failures as exit status 3. The few SDK calls the
builder makes are answered by a small fake; tests/test_docker.py runs all of it on a real
engine."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from ninfer_kits.config.settings import RUN_ID
from ninfer_kits.errors import EXIT_ENVIRONMENT, BadInput, EnvironmentFailure
from ninfer_kits.host.engine import LABEL, RUN_LABEL
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import Toolchain, load_matrix
from ninfer_kits.pipeline.builders import RECIPE, CompileRequest
from ninfer_kits.pipeline.docker_builder import NOT_PINNED, DockerBuilder
from ninfer_kits.pipeline.images import BASE_ID_LABEL, BASE_LABEL, ImageRecipe, ensure_image
from test_recipe_report import report

from tools import ROOT

docker = pytest.importorskip("docker")

ID1, ID2, ID3 = ("sha256:" + digit * 64 for digit in "123")


@dataclass
class FakeImage:
    id: str
    tags: list[str]
    labels: dict[str, str] = field(default_factory=dict)


class FakeImages:
    def __init__(self, *present: FakeImage) -> None:
        self.present = list(present)

    def get(self, name: str) -> FakeImage:
        for image in reversed(self.present):
            if name in image.tags:
                return image
        raise docker.errors.ImageNotFound(name)

    def pull(self, name: str) -> FakeImage:
        raise docker.errors.APIError(f"pull access denied for {name}")

    def retag(self, name: str, new_id: str) -> None:
        """`docker pull` of a newer base under the same name."""
        for image in self.present:
            if name in image.tags:
                image.tags.remove(name)
        self.present.append(FakeImage(new_id, [name]))


class FakeApi:
    def __init__(self, images: FakeImages) -> None:
        self.images, self.builds = images, list[dict[str, Any]]()

    def build(self, **options: Any) -> Iterator[dict[str, str]]:
        with tarfile.open(fileobj=options["fileobj"]) as context:  # as the engine reads it
            options["context"] = {member.name: context.extractfile(member).read()  # type: ignore[union-attr]
                                  for member in context if member.isfile()}
            options["mtimes"] = {member.name: member.mtime for member in context.getmembers()}
        self.builds.append(options)
        built = f"sha256:{len(self.builds):064x}"
        self.images.present.append(FakeImage(built, [options["tag"]], dict(options["labels"])))
        return iter([{"stream": "Step 1/1 : FROM base\n"}])


class FakeContainer:
    short_id = "c0ffee"

    def __init__(self, out: bytes) -> None:
        self.out, self.removed = out, False

    def put_archive(self, path: str, data: bytes) -> None:
        pass

    def start(self) -> None:
        pass

    def logs(self, stream: bool = False, follow: bool = False) -> Any:
        return iter([b"[1/1] compiling\n"]) if stream else b""

    def wait(self) -> dict[str, int]:
        return {"StatusCode": 0}

    def get_archive(self, path: str) -> tuple[Iterator[bytes], dict[str, str]]:
        return iter([self.out]), {}

    def remove(self, force: bool, v: bool) -> None:
        self.removed = True


class FakeContainers:
    def __init__(self, out: bytes, fail: Exception | None = None) -> None:
        self.out, self.fail = out, fail
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.made: list[FakeContainer] = []

    def create(self, image: str, **options: Any) -> FakeContainer:
        if self.fail is not None:
            raise self.fail
        self.created.append((image, options))
        self.made.append(FakeContainer(self.out))
        return self.made[-1]


@dataclass
class FakeVolume:
    name: str
    labels: dict[str, str]
    volumes: FakeVolumes

    def remove(self) -> None:
        del self.volumes.made[self.name]


class FakeVolumes:
    def __init__(self) -> None:
        self.made: dict[str, FakeVolume] = {}

    def get(self, name: str) -> FakeVolume:
        if name not in self.made:
            raise docker.errors.NotFound(f"no volume {name}")
        return self.made[name]

    def create(self, name: str, labels: dict[str, str]) -> FakeVolume:
        self.made[name] = FakeVolume(name, labels, self)
        return self.made[name]

    def list(self, filters: dict[str, str]) -> list[FakeVolume]:
        key, _, value = filters["label"].partition("=")
        return [volume for volume in self.made.values() if volume.labels.get(key) == value]


class FakeClient:
    def __init__(self, *present: FakeImage, out: bytes = b"",
                 fail: Exception | None = None) -> None:
        self.images = FakeImages(*present)
        self.api = FakeApi(self.images)
        self.containers = FakeContainers(out, fail)
        self.volumes = FakeVolumes()
        self.networks = type("Networks", (), {"list": staticmethod(lambda **_: ["bridge"])})()


def bases(toolchain: Toolchain) -> tuple[FakeImage, FakeImage]:
    """The toolchain's base image (ID1) and its runtime image's base (ID3), as on an engine
    where both were made or pulled."""
    return FakeImage(ID1, [toolchain.base_image]), FakeImage(ID3, [toolchain.runtime_base_image])


def client_with(volumes: FakeVolumes) -> FakeClient:
    client = FakeClient()
    client.volumes = volumes
    return client


def quiet() -> Reporter:
    return Reporter(stream=io.StringIO(), mode="plain")


def image_recipe(tmp_path: Path) -> ImageRecipe:
    dockerfile = tmp_path / "tc.Dockerfile"
    dockerfile.write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    return ImageRecipe(role="toolchain", toolchain="tc", dockerfile=dockerfile,
                       base_image="base:1", build_args=(("CUDA_WHEELS", "13.1"),))


def test_the_tag_hashes_the_base_images_id_and_every_argument(tmp_path: Path) -> None:
    recipe = image_recipe(tmp_path)
    tag = recipe.tag(ID1)
    assert tag.startswith("ninfer-kits/toolchain-tc:") and recipe.tag(ID1) == tag
    others = {
        recipe.tag(ID2),  # the same name, pulled anew
        replace(recipe, build_args=(("CUDA_WHEELS", "13.0"),)).tag(ID1),
        replace(recipe, base_image="base:2").tag(ID1),
        replace(recipe, role="runtime").tag(ID1),
    }
    assert len(others | {tag}) == 5
    recipe.dockerfile.write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN true\n")
    assert recipe.tag(ID1) != tag


def test_the_context_folders_a_dockerfile_copies_from_are_sent_and_hashed(
        tmp_path: Path) -> None:
    recipe = image_recipe(tmp_path)
    (tmp_path / "context" / "wheels").mkdir(parents=True)
    (tmp_path / "context" / "wheels" / "13.1.txt").write_text("nvidia-cuda-nvcc==13.1.115\n")
    (tmp_path / "context" / "unused").mkdir()
    (tmp_path / "context" / "unused" / "x").write_text("not sent\n")
    plain = recipe.tag(ID1)
    recipe.dockerfile.write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nARG CUDA_WHEELS\n"
                                 "COPY context/wheels/${CUDA_WHEELS}.txt /tmp/\n")
    tag = recipe.tag(ID1)
    assert tag != plain
    (tmp_path / "context" / "unused" / "x").write_text("changed\n")
    assert recipe.tag(ID1) == tag
    (tmp_path / "context" / "wheels" / "13.1.txt").write_text("nvidia-cuda-nvcc==13.1.116\n")
    assert recipe.tag(ID1) != tag
    client = FakeClient(FakeImage(ID1, ["base:1"]))
    ensure_image(client, recipe, quiet())
    context = client.api.builds[0]["context"]
    assert sorted(context) == ["Dockerfile", "context/wheels/13.1.txt", "host-ca.crt"]
    assert context["context/wheels/13.1.txt"] == b"nvidia-cuda-nvcc==13.1.116\n"
    # COPY keeps a file's mtime, and nvcc -lineinfo records a header's: none is the checkout's
    assert set(client.api.builds[0]["mtimes"].values()) == {0}
    # a folder that is not there is said before any build
    recipe.dockerfile.write_text("FROM base\nCOPY a context/gone/b /tmp/\n")
    with pytest.raises(BadInput, match=r"tc.Dockerfile: COPY from context/gone/"):
        recipe.tag(ID1)


def test_an_image_build_shows_its_dockerfiles_steps(tmp_path: Path) -> None:
    recipe = image_recipe(tmp_path)
    client = FakeClient(FakeImage(ID1, ["base:1"]))
    said = io.StringIO()
    ensure_image(client, recipe, Reporter(stream=said, mode="plain"))
    # the fake engine's one step, the last: a plain line (a terminal gets a live one)
    assert f"building {recipe.tag(ID1)} 0:00 [1/1] FROM base" in said.getvalue()


def test_an_image_is_labelled_with_the_base_it_was_built_from(tmp_path: Path) -> None:
    recipe = image_recipe(tmp_path)
    client = FakeClient(FakeImage(ID1, ["base:1"]))
    made = ensure_image(client, recipe, quiet())
    assert made.tag == recipe.tag(ID1)
    build = client.api.builds[0]
    assert build["buildargs"] == {"CUDA_WHEELS": "13.1", "BASE_IMAGE": "base:1"}
    assert build["labels"] == {LABEL: "toolchain", BASE_LABEL: "base:1", BASE_ID_LABEL: ID1}
    assert made.labels[BASE_ID_LABEL] == ID1
    assert ensure_image(client, recipe, quiet()) == made and len(client.api.builds) == 1
    # The base moves under the same name: another image, labelled with the new ID; the first
    # image keeps the ID it was built from.
    client.images.retag("base:1", ID2)
    moved = ensure_image(client, recipe, quiet())
    assert moved.tag == recipe.tag(ID2) != made.tag and len(client.api.builds) == 2
    assert moved.labels[BASE_ID_LABEL] == ID2
    assert client.images.get(made.tag).labels[BASE_ID_LABEL] == ID1


def test_two_builds_needing_one_new_image_build_it_once(tmp_path: Path) -> None:
    """Two builds at once (threads here; processes lock the same way): the second waits for
    the first's image build, says so, and takes its image."""
    import threading
    import time

    recipe = image_recipe(tmp_path)
    client = FakeClient(FakeImage(ID1, ["base:1"]))
    building, slow = threading.Event(), client.api.build

    def build(**options: Any) -> Iterator[dict[str, str]]:
        building.set()
        time.sleep(0.5)  # the other build arrives meanwhile
        return slow(**options)

    client.api.build = build  # type: ignore[method-assign]
    said = [io.StringIO(), io.StringIO()]
    made: list[Any] = [None, None]

    def ensure(index: int) -> None:
        made[index] = ensure_image(client, recipe, Reporter(stream=said[index], mode="plain"))

    first = threading.Thread(target=ensure, args=(0,))
    first.start()
    assert building.wait(10)
    ensure(1)
    first.join(10)
    assert len(client.api.builds) == 1 and made[0] == made[1] is not None
    assert "waiting for PID" in said[1].getvalue() and f"building {recipe.tag(ID1)}" in \
        said[1].getvalue(), said[1].getvalue()


def test_preflight_reads_the_base_from_the_images_labels() -> None:
    kit = load_matrix(ROOT / "matrix.toml").kit("example")
    client = FakeClient(*bases(kit.toolchain))
    toolchain = DockerBuilder(client=client).preflight(kit, quiet())
    assert (toolchain.base_image, toolchain.base_image_digest) == (kit.toolchain.base_image, ID1)
    assert toolchain.image == ImageRecipe.toolchain_image(kit.toolchain).tag(ID1)


def test_preflight_needs_the_runtime_base_before_it_builds_anything() -> None:
    """The smoke test's image is built FROM the runtime base after the compile: preflight
    fails at once when it cannot be had, not after the toolchain image and the compile."""
    kit = load_matrix(ROOT / "matrix.toml").kit("example")
    client = FakeClient(FakeImage(ID1, [kit.toolchain.base_image]))
    with pytest.raises(EnvironmentFailure, match=rf"base image {kit.toolchain.runtime_base_image}"
                                                 r" \(toolchain trixie-cuda130\) cannot be had"):
        DockerBuilder(client=client).preflight(kit, quiet())
    assert client.api.builds == []


def test_a_base_that_cannot_be_pulled_is_the_environments_failure(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentFailure, match=r"base image base:1 .* cannot be had") as caught:
        ensure_image(FakeClient(), image_recipe(tmp_path), quiet())
    assert caught.value.exit_code == EXIT_ENVIRONMENT


def _out_archive() -> bytes:
    """What get_archive gives for /work/out: the binaries and the recipe's report."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in (("out/kit/bin/ninfer", b"\x7fELF"),
                           ("out/recipe.json", json.dumps(report()).encode())):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _request(tmp_path: Path) -> CompileRequest:
    kit = load_matrix(ROOT / "matrix.toml").kit("example")
    source = tmp_path / "source"
    source.mkdir()
    (source / "CMakeLists.txt").write_text("project(x)\n")
    return CompileRequest(kit=kit, source=source, workspace=tmp_path / "work", jobs=2,
                          source_date_epoch=1, log=tmp_path / "work" / "build.log",
                          recipe=RECIPE, cache_dir=tmp_path / "cache")


def test_the_compile_container_has_no_network(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUN_ID.name, "run-of-this-test")  # the label a test finds its containers by
    request = _request(tmp_path)
    client = FakeClient(*bases(request.kit.toolchain), out=_out_archive())
    compiled = DockerBuilder(client=client, ccache_volume="cc").compile(request, quiet())
    [(image, options)] = client.containers.created
    assert options["network_mode"] == "none"
    assert options["labels"] == {LABEL: "build", RUN_LABEL: "run-of-this-test"}
    assert client.containers.made[0].removed
    assert image == ImageRecipe.toolchain_image(request.kit.toolchain).tag(ID1)
    assert compiled.report.jobs == 2 and (compiled.bin_dir / "ninfer").is_file()
    built = client.images.get(image).id  # the first (and only) image the fake built
    tree = f"cc-tree-example-{built.removeprefix('sha256:')[:12]}"
    assert dict(compiled.run_entries) == {"image": f"{image}@{built}", "ccache": "cc",
                                          "toolchain_image": NOT_PINNED, "build_tree": tree}
    assert options["volumes"] == {"cc": {"bind": "/ccache", "mode": "rw"},
                                  tree: {"bind": "/work", "mode": "rw"}}
    assert client.volumes.made[tree].labels["org.ninfer-kits.image-id"] == built


def test_a_kept_tree_of_another_toolchain_image_is_removed(tmp_path: Path) -> None:
    """The kit's build tree is kept per toolchain image: a new image's build makes a new tree
    and removes the kit's older one (another kit's tree, or another cache's, stays)."""
    from ninfer_kits.pipeline.docker_builder import ensure_tree_volume

    volumes = FakeClient().volumes
    for cache, kit, image in (("cc", "example", ID1), ("cc", "other", ID1),
                              ("dd", "example", ID1)):
        ensure_tree_volume(client_with(volumes), cache, kit, image)
    assert ensure_tree_volume(client_with(volumes), "cc", "example", ID2) == \
        "cc-tree-example-222222222222"
    assert sorted(volumes.made) == ["cc-tree-example-222222222222", "cc-tree-other-111111111111",
                                    "dd-tree-example-111111111111"]


def test_no_compiler_cache_and_a_fresh_tree_keep_no_tree(tmp_path: Path) -> None:
    for options in ({"ccache_volume": "none"}, {"ccache_volume": "cc", "fresh_tree": True}):
        folder = tmp_path / str(len(options))
        folder.mkdir()
        request = _request(folder)
        client = FakeClient(*bases(request.kit.toolchain), out=_out_archive())
        compiled = DockerBuilder(client=client, **options).compile(  # type: ignore[arg-type]
            request, quiet())
        [(_image, created)] = client.containers.created
        assert "/work" not in [mount["bind"] for mount in created["volumes"].values()]
        assert dict(compiled.run_entries)["build_tree"] == "none (a fresh one in the container)"


def test_an_engine_error_is_the_environments_failure(tmp_path: Path) -> None:
    request = _request(tmp_path)
    client = FakeClient(*bases(request.kit.toolchain),
                        fail=docker.errors.APIError("500 Server Error: no space left"))
    with pytest.raises(EnvironmentFailure, match=r"the Docker engine at .* failed: 500 Server "
                                                 "Error: no space left") as caught:
        DockerBuilder(client=client).compile(request, quiet())
    assert caught.value.exit_code == EXIT_ENVIRONMENT
