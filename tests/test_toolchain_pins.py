"""Issue 40, "reproducible across time", end to end with a real registry.

The walk, on the tiny engine (the claim is about the toolchain, not the compile):

1. a toolchain made FROM a base that holds the compilers (tests/data/drift-toolchain.Dockerfile
   on `ninfer-kits-test/drift-base:local`, a tag of the session's trixie-cuda130 image), and a
   kit built in it UNPINNED (`run.toolchain_image: none (not pinned: …)`);
2. `toolchain push drift-test --write` to a docker-registry on 127.0.0.1 (tests/registry_server):
   the bases, the toolchain and runtime images pushed, their pins written into matrix.toml; a
   kit built PINNED (`run.toolchain_image` the pin);
3. the pinned images deleted from the engine (every name of the registry's, and the toolchain
   image made on the pinned base), and the base made again "as a later archive would": nvcc
   whose host code comes out otherwise (a changed compiler default), so the kit's bytes change;
4. `repro --against` the pinned kit pulls the recorded pin and says identical (exit 0);
   `repro --against` the unpinned kit (with the matrix as it was before the pins) rebuilds the
   toolchain image from the new base, differs (exit 1), and names the drift: the toolchain
   image, both bases, "the base image … changed since", and `ninfer-kits toolchain push` — in
   the text, in --json and in --record's REPRODUCTION.json.

Cost: 168 s here (2 cores, the session's trixie-cuda130 image there; issue 40): four docker
builds of the tiny engine, the pushes of the bases, toolchain and runtime images into a local
registry (layers the registry has not seen: ~1.2 GB), two images of seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ninfer_kits.kit import buildinfo, kitdir
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import load_matrix
from ninfer_kits.oci.reference import parse_pin
from ninfer_kits.pipeline.images import ImageRecipe, ensure_image
from registry_server import Registry, registries

from docker_fixtures import cache_sharing_environments
from tools import DATA, ROOT, git  # git: the tests' own identity

__all__ = ["registries"]  # the fixture, for pytest

pytestmark = [pytest.mark.slow, pytest.mark.prebuilt_toolchain("trixie-cuda130")]

TOOLCHAIN = "drift-test"
BASE = "ninfer-kits-test/drift-base:local"
NAMESPACE = "ns"
# The compilers of a later archive, as far as a compile can tell: nvcc's host code comes out
# otherwise (appended flags, as changed defaults of a later GCC and ptxas would). (A
# changed header would not do: the build refuses a compiled-in file its package did not
# install, compiled_in.py.)
LATER_ARCHIVE = 'ENV NVCC_APPEND_FLAGS="-Xptxas=-O0 -Xcompiler=-O0"'


def toolchain_table() -> str:
    """The test's toolchain: drift-toolchain.Dockerfile on BASE; the runtime image as
    trixie-cuda130's (the smoke test runs there)."""
    return f"""
[toolchains.{TOOLCHAIN}]
dockerfile = "{DATA / 'drift-toolchain.Dockerfile'}"
base_image = "{BASE}"
cuda = "13.0.88"
runtime_dockerfile = "{ROOT / 'dockerfiles' / 'runtime-wheels-debian.Dockerfile'}"
runtime_base_image = "ninfer-kits/debian-trixie-minbase:local"
runtime_build_args = {{ CUDA_WHEELS = "13.0" }}
runtime_packages = ["libavformat61", "libavcodec61", "libavutil59", "libswscale8"]
"""


def project(folder: Path, where: Registry) -> Path:
    """A pipeline checkout of its own: matrix.toml (the example kit in the test's toolchain,
    [registry] on the test's registry) and allowed_signers, committed."""
    folder.mkdir(parents=True)
    shutil.copyfile(ROOT / "allowed_signers", folder / "allowed_signers")
    text = (ROOT / "matrix.toml").read_text()
    marker = '[kits.example]\nupstream = "example"\narch = "sm_86"\ntoolchain = "trixie-cuda130"'
    assert marker in text
    text = text.replace(marker, marker.replace("trixie-cuda130", TOOLCHAIN))
    registry = '[registry]\nprefix = "ghcr.io/ninfer-kits"\n'
    assert registry in text
    text = text.replace(registry, f'[registry]\nprefix = "{where.address}/{NAMESPACE}"\n')
    text += toolchain_table()
    (folder / "matrix.toml").write_text(text)
    for command in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "pipeline")):
        git(*command, cwd=folder)
    return folder / "matrix.toml"


def ninfer_kits(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=3600)


def build(matrix: Path, dist: Path, tiny: Path, env: dict[str, str]) -> kitdir.KitDir:
    done = ninfer_kits("build", "example", "--builder", "docker", "--matrix", str(matrix),
                       "--source", str(tiny), "--dist", str(dist), "--ccache-volume", "none",
                       "--cache-dir", str(cache_sharing_environments(dist.parent / "cache")),
                       cwd=matrix.parent, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return kitdir.read_kit_dir(next(dist.iterdir()))


def later_base(client: Any, context: Path) -> str:
    """BASE made again from a later archive: the same name, other compilers, another ID."""
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {BASE}\n{LATER_ARCHIVE}\n")
    image, _ = client.images.build(path=str(context), tag=BASE, rm=True, network_mode="host")
    return str(image.id)


def forget_registry_images(client: Any, where: Registry) -> None:
    """The engine drops every name it holds of the registry's images, and the images made only
    for them (the toolchain and runtime images built on the pinned bases): the repro below must
    pull the pin. The session's own images (the bases' contents) stay under their local names."""
    for image in client.images.list(all=True):
        names = [*image.tags, *(image.attrs.get("RepoDigests") or [])]
        ours = [name for name in names if name.startswith(f"{where.address}/")]
        if not ours:
            continue
        if len(ours) == len(names) or any(f"-{TOOLCHAIN}:" in name for name in image.tags):
            client.images.remove(image.id, force=True)
            continue
        for name in ours:
            with contextlib.suppress(Exception):
                client.images.remove(name)


@pytest.fixture
def walk_env(tmp_path: Path) -> dict[str, str]:
    """The environment of every command: no credentials of this machine (the registry asks
    for none), no matrix from the caller."""
    config = tmp_path / "docker-config"
    config.mkdir()
    env = {**os.environ, "DOCKER_CONFIG": str(config)}
    env.pop("NINFER_KITS_MATRIX", None)
    return env


@pytest.fixture
def drift_base(engine: Any) -> Iterator[Any]:
    """BASE: a tag of the session's trixie-cuda130 toolchain image (built if it is not
    there); every image the test makes is removed at its end."""
    toolchain = load_matrix(ROOT / "matrix.toml").toolchain("trixie-cuda130")
    made = ensure_image(engine, ImageRecipe.toolchain_image(toolchain), Reporter(io.StringIO()))
    engine.images.get(made.id).tag(BASE)
    yield engine
    for image in engine.images.list(all=True):
        if any(TOOLCHAIN in tag or tag == BASE for tag in image.tags) and image.id != made.id:
            with contextlib.suppress(Exception):
                engine.images.remove(image.id, force=True)
    with contextlib.suppress(Exception):
        engine.images.remove(BASE)


def test_a_pinned_kit_reproduces_after_the_base_changed_and_an_unpinned_one_names_the_drift(
        drift_base: Any, registries: Any, tiny_repo: tuple[Path, str], tmp_path: Path,
        walk_env: dict[str, str]) -> None:
    client, where = drift_base, registries()
    matrix = project(tmp_path / "pipeline", where)
    before_pins = tmp_path / "unpinned" / "matrix.toml"
    before_pins.parent.mkdir()
    shutil.copyfile(matrix, before_pins)
    shutil.copyfile(ROOT / "allowed_signers", before_pins.parent / "allowed_signers")

    unpinned = build(matrix, tmp_path / "u" / "dist", tiny_repo[0], walk_env)
    assert unpinned.info.run_value("toolchain_image") == "none (not pinned: built on this engine)"

    pushed = ninfer_kits("toolchain", "push", TOOLCHAIN, "--matrix", str(matrix), "--write",
                         cwd=matrix.parent, env=walk_env)
    assert pushed.returncode == 0, pushed.stderr[-4000:]
    pins = dict(line.split(" = ", 1) for line in pushed.stdout.splitlines() if " = " in line)
    pin = pins["image"].strip('"')
    assert parse_pin(pin).repository == (f"{where.address}/{NAMESPACE}/"
                                         f"ninfer-kits-toolchain-{TOOLCHAIN}")
    assert load_matrix(matrix).toolchain(TOOLCHAIN).image == pin
    pinned = build(matrix, tmp_path / "p" / "dist", tiny_repo[0], walk_env)
    assert pinned.info.run_value("toolchain_image") == pin

    forget_registry_images(client, where)
    old_base_id = unpinned.info.base_image_id
    assert later_base(client, tmp_path / "later") != old_base_id

    same = ninfer_kits("repro", "example", "--builder", "docker", "--matrix", str(matrix),
                       "--source", str(tiny_repo[0]), "--against", str(pinned.path),
                       "--work", str(tmp_path / "rp"), cwd=matrix.parent, env=walk_env)
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-3000:]
    assert f"repro: building in {pin}, the toolchain image" in same.stderr
    assert f"pulling the toolchain image of toolchain {TOOLCHAIN}" in same.stderr
    assert same.stdout.endswith("reproducible: the tarballs are identical bytes\n")

    record = tmp_path / "REPRODUCTION.json"
    drifted = ninfer_kits("repro", "example", "--builder", "docker", "--matrix",
                          str(before_pins), "--source", str(tiny_repo[0]), "--against",
                          str(unpinned.path), "--work", str(tmp_path / "ru"), "--json",
                          "--record", str(record), "--run", "the drift test",
                          cwd=matrix.parent, env=walk_env)
    assert drifted.returncode == 1, drifted.stdout[-3000:] + drifted.stderr[-3000:]
    assert drifted.stdout, drifted.stderr[-5000:]
    document = json.loads(drifted.stdout)
    first = document["drift"]["findings"][0]
    assert first["kind"] == "toolchain-image", document["drift"]
    rebuilt = buildinfo.read(next((tmp_path / "ru").rglob("dist/*/BUILDINFO.txt")))
    assert first["detail"].startswith(
        f"the toolchain image differs: the kit was built in {unpinned.info.run_value('image')} "
        f"(base {BASE} = {old_base_id}), this rebuild in {rebuilt.run_value('image')} "
        f"(base {BASE} = {rebuilt.base_image_id}): the base image {BASE} changed since")
    assert f"`ninfer-kits toolchain push {TOOLCHAIN}`" in first["detail"]
    members = {member["path"] for member in document["comparisons"][0]["members"]
               if member["status"] != "expected"}
    assert any(path.endswith("kit/bin/ninfer") for path in members), members
    written = json.loads(record.read_text())
    assert written["result"] == "differs"
    assert written["summary"].startswith(f"the toolchain image differs: the base image {BASE} "
                                         f"changed since")
    assert written["differences"][0].startswith("drift: the toolchain image differs")
