"""Issue 40 item 3 under `act` (tests/act_runner.py): rebuild.yml's build and reproduce legs pull
the kit's toolchain pinned by digest and build no image, and .github/workflows/toolchains.yml,
after a change of a toolchain's Dockerfile, pushes the new image and proposes its pin in a pull
request. A real registry runs on 127.0.0.1 (Debian's docker-registry, tests/registry_server.py)
with basic auth that takes exactly the workflow's actor and token, as GHCR takes a run's
GITHUB_TOKEN: the legs' `docker login` is what lets the engine pull.

The toolchain is made cheap for the claim, which is the workflows, not the image: its
Dockerfile is `FROM` the suite's test toolchain image (made once by test_rebuild_act's
_ensure_images) plus a LABEL, and its runtime's likewise, so a renewal builds a label, not a
compiler. The world's matrix pins it (`ninfer-kits toolchain push --write` here, before act
runs, as a maintainer does the first time); the images it names are then removed from the
engine, so the scheduled run's build leg must pull them through the registry by digest. What
this costs: one push of the test toolchain's 1.2 GB of layers into the registry, and two act
runs (one scheduled run with its reproduce leg, one toolchains run): 3 min 36 s in all on this
project's 2 cores, the engine warm (fixtures 185 s + 30 s; a build leg 26 s, its pull included).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from act_runner import Act, ActRun, project_checkout, runner_image, stand_in_actions, wheelhouse
from github_server import GitHubServer, PullView
from rebuild_matrix import rebuild_matrix
from registry_server import Registry, registry
from test_rebuild_act import TOKEN, World, _ensure_images, _upstream

from docker_fixtures import cache_sharing_environments, ensure_engine
from tools import git

pytestmark = [pytest.mark.slow, pytest.mark.prepared("act")]

ACTOR = "nektos/act"  # act's default github.actor: the user the legs log in to the registry as
REPO = "kits/ninfer-kits"
KIT = "alpha-sm86"
TOOLCHAIN = "act-pinned"
BRANCH = "ninfer-kits/toolchain-pins"  # where toolchains.yml proposes new pins
DOCKERFILE = """# The act tests' toolchain: the suite's test image, relabelled (cheap to renew).
ARG BASE_IMAGE
FROM ${{BASE_IMAGE}}
ARG CUDA_WHEELS
LABEL org.ninfer-kits.test.act-toolchain="{revision}"
"""


def _toolchain_table(base: str, runtime_base: str) -> str:
    return f"""
[toolchains.{TOOLCHAIN}]
dockerfile = "dockerfiles/act-toolchain.Dockerfile"
base_image = "{base}"
cuda = "13.0.88"
build_args = {{ CUDA_WHEELS = "13.0" }}
runtime_dockerfile = "dockerfiles/act-runtime.Dockerfile"
runtime_base_image = "{runtime_base}"
runtime_build_args = {{ CUDA_WHEELS = "13.0" }}

"""


def _matrix(server: GitHubServer, registry_at: Registry, base: str, runtime_base: str) -> str:
    """test_rebuild_act's matrix with one kit, on the cheap toolchain, and [registry]."""
    text = rebuild_matrix({"alpha": (f"{server.web_url}/up/alpha.git", "main")}, REPO,
                          server.base_url)
    text = re.sub(r"(?ms)^\[toolchains\.trixie-cuda130\]\n.*?(?=^\[publish\])",
                  _toolchain_table(base, runtime_base).lstrip("\n"), text)
    text = text.replace('toolchain = "trixie-cuda130"', f'toolchain = "{TOOLCHAIN}"')
    return text + f'\n[registry]\nprefix = "{registry_at.address}/kits"\n'


def _suite_images(base: Path) -> tuple[str, str]:
    """The suite's test toolchain and runtime images (test_rebuild_act's), made when missing:
    the cheap toolchain's bases. Their local tags."""
    from ninfer_kits.host.engine import connect
    from ninfer_kits.log import Reporter
    from ninfer_kits.matrix import load_matrix
    from ninfer_kits.pipeline.images import ImageRecipe, ensure_image

    plain = base / "plain-matrix.toml"
    plain.write_text(rebuild_matrix({"alpha": ("https://example.invalid/a.git", "main")}, REPO,
                                    "https://example.invalid/api"), encoding="utf-8")
    _ensure_images(plain)
    toolchain = load_matrix(plain).toolchain("trixie-cuda130")
    client = connect()
    images = [ensure_image(client, recipe, Reporter(io.StringIO()))
              for recipe in (ImageRecipe.toolchain_image(toolchain),
                             ImageRecipe.runtime_image(toolchain))]
    return images[0].tag, images[1].tag


def _ninfer_kits(*args: str, cwd: Path, docker_config: Path) -> subprocess.CompletedProcess[str]:
    import os

    done = subprocess.run([sys.executable, "-m", "ninfer_kits", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=1200, check=False,
                          env={**os.environ, "DOCKER_CONFIG": str(docker_config)})
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@dataclass
class PinnedWorld:
    world: World
    registry: Registry
    pins: dict[str, str]  # the matrix's pins as the world starts: image, runtime_image, bases
    docker_config: Path


def _pins(matrix_text: str) -> dict[str, str]:
    import tomllib

    table = tomllib.loads(matrix_text)["toolchains"][TOOLCHAIN]
    return {key: table[key] for key in ("image", "runtime_image", "base_image",
                                        "runtime_base_image")}


def _forget(pins: dict[str, str]) -> None:
    """The pinned toolchain and runtime images off the engine (their tags and digests), so
    that a build must pull them; the suite's images they are made from stay."""
    import docker.errors

    from ninfer_kits.host.engine import connect
    from ninfer_kits.oci.reference import parse_pin

    client = connect()
    for key in ("image", "runtime_image"):
        try:
            image = client.images.get(parse_pin(pins[key]).by_digest())
        except docker.errors.ImageNotFound:
            continue
        client.images.remove(image.id, force=True)


def _untag_registry_images(address: str) -> None:
    """Every tag this test's registry gave the engine's images (the images stay under their
    other names: the suite's)."""
    import docker.errors

    from ninfer_kits.host.engine import connect

    client = connect()
    for image in client.images.list():
        for name in [*image.tags, *(image.attrs.get("RepoDigests") or [])]:
            if name.startswith(f"{address}/") or f"-{TOOLCHAIN}:" in name:
                with contextlib.suppress(docker.errors.APIError):  # gone with a name before
                    client.images.remove(name)


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PinnedWorld]:
    ensure_engine()
    base = tmp_path_factory.mktemp("act-pins")
    image = runner_image()
    actions, wheels = stand_in_actions(), wheelhouse(image)
    suite_toolchain, suite_runtime = _suite_images(base)
    with GitHubServer() as server, registry(base / "registry", auth=True,
                                            credentials=(ACTOR, TOKEN)) as reg:
        server.add_token(TOKEN, permissions={"contents": "write", "issues": "write",
                                             "pull_requests": "write"})
        remotes = {"up/alpha": base / "remotes" / "alpha.git",
                   REPO: base / "remotes" / "ninfer-kits.git"}
        head = _upstream(base / "upstreams" / "alpha", "alpha", remotes["up/alpha"])
        server.add_repo("up/alpha", head=head)
        server.add_git_remote("up/alpha", remotes["up/alpha"])
        server.add_repo(REPO)
        url = server.add_git_remote(REPO, remotes[REPO])
        checkout = project_checkout(base / "checkout",
                                    _matrix(server, reg, suite_toolchain, suite_runtime),
                                    remote=url, slug=REPO)
        (checkout / "dockerfiles" / "act-toolchain.Dockerfile").write_text(
            DOCKERFILE.format(revision=1), encoding="utf-8")
        (checkout / "dockerfiles" / "act-runtime.Dockerfile").write_text(
            DOCKERFILE.format(revision="runtime 1"), encoding="utf-8")
        # The first pins, as a maintainer makes them: logged in, pushed, written.
        config = base / "docker-config"
        login = reg.login(config)
        assert login.returncode == 0, login.stderr
        _ninfer_kits("toolchain", "push", TOOLCHAIN, "--write", cwd=checkout,
                     docker_config=config)
        pins = _pins((checkout / "matrix.toml").read_text(encoding="utf-8"))
        git("add", "-A", cwd=checkout)
        git("commit", "-q", "-m", "the act toolchain, pinned", cwd=checkout)
        git("init", "-q", "--bare", "-b", "main", str(remotes[REPO]), cwd=base)
        git("push", "-q", str(remotes[REPO]), "HEAD:main", cwd=checkout)
        server.set_branch(REPO, "main", git("rev-parse", "HEAD", cwd=checkout))
        _forget(pins)
        act = Act(checkout, base / "act", image=image, actions=actions, wheels=wheels,
                  environments=(cache_sharing_environments(base / "cache") / "environments"
                                ).resolve())
        world = World(server, {"alpha": base / "upstreams" / "alpha"}, remotes, checkout, act,
                      base)
        try:
            yield PinnedWorld(world, reg, pins, config)
        finally:
            _untag_registry_images(reg.address)


@dataclass(frozen=True)
class Scheduled:
    run: ActRun
    images: list[str]  # the engine's RepoDigests after the run


def _repo_digests() -> list[str]:
    from ninfer_kits.host.engine import connect

    return sorted(digest for image in connect().images.list()
                  for digest in image.attrs.get("RepoDigests") or [])


@pytest.fixture(scope="module")
def scheduled(pinned: PinnedWorld) -> Scheduled:
    from ninfer_kits.oci.reference import parse_pin

    forgotten = {parse_pin(pinned.pins[key]).by_digest() for key in ("image", "runtime_image")}
    assert not forgotten & set(_repo_digests())  # the legs must pull them
    run = pinned.world.run(reproduce=True)
    return Scheduled(run, _repo_digests())


def _leg_text(run: ActRun, job: str) -> str:
    return "\n".join(str(line.get("msg", "")) for line in run.lines if line.get("jobID") == job)


def test_a_scheduled_run_pulls_the_pinned_toolchain_and_builds_no_image(
        pinned: PinnedWorld, scheduled: Scheduled) -> None:
    from ninfer_kits.oci.reference import parse_pin

    run = scheduled.run
    assert run.returncode == 0, run.failure
    assert set(run.jobs.values()) == {"success"}, run.jobs
    assert run.legs("build") == ["success"] and run.legs("reproduce") == ["success"], run.jobs
    for job in ("build", "reproduce"):
        text = _leg_text(run, job)
        assert f"{KIT}: its toolchain is pinned by digest: pulled, not built" in text, text[-3000:]
        assert "Login Succeeded" in text, text[-3000:]
        # no image built: neither the toolchain's nor the runtime's, nor a Debian base
        assert not re.search(r"building ninfer-kits/(toolchain|runtime)-", text), text[-3000:]
        assert not run.step_output(job, "Make the Debian base images"), job
    toolchain, runtime = (parse_pin(pinned.pins[key]) for key in ("image", "runtime_image"))
    for role, pin in (("toolchain", toolchain), ("runtime", runtime)):
        assert re.search(rf"pulling the {role} image .*{re.escape(pin.by_digest())} from "
                         rf"{re.escape(pin.registry)}", run.text), run.text[-3000:]
    assert toolchain.by_digest() in scheduled.images and runtime.by_digest() in scheduled.images
    # what the kit says it was built in: the pin
    files = pinned.world.artifact(1, f"kit-{KIT}")
    [buildinfo] = [data for name, data in files.items()
                   if name.count("/") == 1 and name.endswith("/BUILDINFO.txt")]
    assert f"run.toolchain_image: {pinned.pins['image']}\n" in buildinfo.decode(), \
        buildinfo.decode()[-2000:]


def test_the_token_never_shows(pinned: PinnedWorld, scheduled: Scheduled) -> None:
    logs = [path.read_text(encoding="utf-8", errors="replace")
            for path in pinned.world.act.state.rglob("act.log")]
    assert logs and not [log[:200] for log in logs if TOKEN in log]


@dataclass(frozen=True)
class Renewed:
    run: ActRun
    pulls: list[PullView]
    proposed: dict[str, str]  # the pins of matrix.toml on the proposed branch
    recipe_key: str  # the changed toolchain's recipe key, as ninfer-kits computes it


def _recipe_key(checkout: Path) -> str:
    from ninfer_kits.matrix import load_matrix
    from ninfer_kits.pipeline.images import ImageRecipe

    toolchain = load_matrix(checkout / "matrix.toml").toolchain(TOOLCHAIN)
    return ImageRecipe.toolchain_image(toolchain).recipe_key()


@pytest.fixture(scope="module")
def renewed(pinned: PinnedWorld, scheduled: Scheduled) -> Renewed:
    """A push to main that changes the toolchain's Dockerfile, then toolchains.yml on it."""
    world = pinned.world
    world.sync()
    dockerfile = world.checkout / "dockerfiles" / "act-toolchain.Dockerfile"
    dockerfile.write_text(DOCKERFILE.format(revision=2), encoding="utf-8")
    git("commit", "-q", "-am", "dockerfiles: the act toolchain, revision 2", cwd=world.checkout)
    git("push", "-q", str(world.remotes[REPO]), "HEAD:main", cwd=world.checkout)
    world.server.set_branch(REPO, "main", git("rev-parse", "HEAD", cwd=world.checkout))
    run = world.act.run("push", "toolchains.yml", secrets={"GITHUB_TOKEN": TOKEN},
                        variables={"NINFER_KITS_GITHUB_API": world.server.base_url})
    pulls = world.server.pull_views(REPO)
    proposed = {}
    if pulls:
        proposed = _pins(git("show", f"{BRANCH}:matrix.toml", cwd=world.remotes[REPO]))
    return Renewed(run, pulls, proposed, _recipe_key(world.checkout))


def _manifest_digest(reg: Registry, repository: str, tag: str) -> str:
    from registry_server import MANIFEST_TYPES

    status, headers, _ = reg.request("HEAD", f"/v2/{repository}/manifests/{tag}",
                                     {"Accept": MANIFEST_TYPES})
    assert status == 200, (repository, tag, status)
    return headers["docker-content-digest"]  # registry_server lowercases header names


def test_a_dockerfile_change_pushes_the_toolchain_and_proposes_its_pin(
        pinned: PinnedWorld, renewed: Renewed) -> None:
    from ninfer_kits.oci.reference import parse_pin

    run = renewed.run
    assert run.returncode == 0, run.failure
    assert set(run.jobs.values()) == {"success"}, run.jobs
    assert f"stale toolchains: {TOOLCHAIN}" in run.text, run.text[-3000:]
    assert re.search(rf"{TOOLCHAIN}: image the recipe changed", run.text), run.text[-3000:]
    [pull] = renewed.pulls
    assert (pull.head, pull.base, pull.state) == (BRANCH, "main", "open"), pull
    assert TOOLCHAIN in pull.title
    old, new = parse_pin(pinned.pins["image"]), parse_pin(renewed.proposed["image"])
    # the new pin: the same repository, tagged with the changed recipe's key, and the digest
    # the registry holds under that tag
    assert new.repository == old.repository and new.digest != old.digest
    assert new.tag == renewed.recipe_key != old.tag
    name = new.repository.removeprefix(f"{pinned.registry.address}/")
    assert _manifest_digest(pinned.registry, name, new.tag) == new.digest
    # what did not change: the bases stay pinned as they were; the runtime image is pushed
    # again, from the same recipe (its tag)
    for key in ("base_image", "runtime_base_image"):
        assert renewed.proposed[key] == pinned.pins[key], key
    runtime = parse_pin(renewed.proposed["runtime_image"])
    assert runtime.tag == parse_pin(pinned.pins["runtime_image"]).tag
    # proposed, not landed: main keeps the old pin until a maintainer merges
    on_main = _pins(git("show", "main:matrix.toml", cwd=pinned.world.remotes[REPO]))
    assert on_main["image"] == pinned.pins["image"]


def test_the_proposal_is_the_only_change_and_needs_no_registry_to_check(
        pinned: PinnedWorld, renewed: Renewed) -> None:
    """The branch differs from main by matrix.toml alone, and with it the matrix says no
    toolchain is stale (`toolchain stale` reads only the pins' tags and dockerfiles/)."""
    bare = pinned.world.remotes[REPO]
    changed = git("diff", "--name-only", "main", BRANCH, cwd=bare).split()
    assert changed == ["matrix.toml"], changed
    work = pinned.world.base / "proposed"
    git("clone", "-q", "--branch", BRANCH, str(bare), str(work), cwd=pinned.world.base)
    stale = subprocess.run([sys.executable, "-m", "ninfer_kits", "toolchain", "stale", "--json"],
                           cwd=work, capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(stale.stdout)["stale"] == [], stale.stdout


