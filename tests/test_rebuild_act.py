""".github/workflows/rebuild.yml itself, run by `act` (tests/act_runner.py) in Docker job
containers, against the local GitHub server (tests/github_server.py: its API, releases, issues
and git remotes over smart HTTP) and the local Docker engine, with the tiny engine
(tests/data/tiny-engine: the example's build interface, one kernel) as two upstreams, up/alpha and
up/beta (git repositories the server serves): the claim is the workflow, not the compile.

What act cannot do here, and what stands in: github.com's JavaScript actions (actions/cache,
upload-artifact, download-artifact) are STAND-INS built at test time from tests/act_actions/
(same inputs and outputs, the same @actions npm libraries called the same way) against act's
own cache and artifact servers; `ubuntu-latest` is a Debian trixie image made from Debian
packages; pip in the job containers installs from a wheelhouse. act ignores `concurrency`, so
two runs at once really run at once (the test of that is harder than GitHub would be).

The runs, each starting from the checkout as the server's git remote has it then (a scheduled
run on GitHub checks out the default branch as it is):

1. scheduled, both kits missing from the ledger: both built (docker builder, compiler cache
   restored and saved by actions/cache), both rebuilt cold by the reproduce legs and found
   identical, both published (releases on the server holding the built tarballs and the
   reproduction's record, their notes saying so), both ledger files landed on the remote; the
   next scheduled run builds nothing (watch: 0 stale, no build or publish legs). The later
   runs switch the reproduce legs off (NINFER_KITS_REPRODUCE=off): each is a cold build;
2. a dispatch with force=true of a published kit, its leg on an engine that holds none of the
   suite's images and with an empty cache server, as a hosted runner whose caches expired:
   rebuild.yml's own steps make the Debian base images (debootstrap), the toolchain and runtime
   images and the toolchain's export, and the kit is compiled cold; publish's outcome is
   `reproduced` (the kit made on a toolchain made anew is the first run's, byte for byte), the
   run is green and the release is unchanged (asset ids, bytes). The other runs' legs use the
   suite's engine, its images made before act runs (each leg from nothing would cost ~5
   minutes of CI: issue 40's registry);
3. both upstreams moved, beta's new head does not build: alpha's kit is still published (its
   compiler cache restored through actions/cache, which the first run saved), the run is red,
   the summary names beta and its step, and one issue is opened; a second failing run opens no
   second issue;
4. two runs at once, after both upstreams moved again: afterwards every release is complete
   and alone for its tag, the ledger files parse and both landed, the kit index on main is
   the one the whole ledger makes, and the ledger's history has no conflict markers.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from act_runner import (
    LEG_ENVIRONMENTS,
    Act,
    ActRun,
    project_checkout,
    runner_image,
    stand_in_actions,
    wheelhouse,
)
from github_server import GitHubServer, IssueView, ReleaseView
from ninfer_kits.release import kitindex, ledger
from ninfer_kits.release.ledger import LedgerEntry
from rebuild_matrix import rebuild_matrix

from docker_fixtures import (
    BASE_IMAGE,
    MINBASE_IMAGE,
    cache_sharing_environments,
    ensure_base_image,
    ensure_engine,
    ensure_second_engine,
    stop_engine,
)
from tools import ROOT, git

pytestmark = [pytest.mark.slow, pytest.mark.prepared("act")]

TOKEN = "ghs_ACTrunnerInstallationToken0123456789ab"  # what Actions gives: an installation token
REPO = "kits/ninfer-kits"  # the workflow's own repository: releases, issues, the ledger
KITS = {"alpha-sm86": "alpha", "beta-sm86": "beta"}
BROKEN = 'message(FATAL_ERROR "this revision does not build")\n'



@dataclass
class World:
    """The server, the upstreams' working repositories, the project's checkout and act."""

    server: GitHubServer
    upstreams: dict[str, Path]  # name → working repository (pushed to the server's remote)
    remotes: dict[str, Path]  # "owner/name" → the bare repository the server serves
    checkout: Path
    act: Act
    base: Path

    def move(self, name: str, message: str, broken: bool = False, fixed: bool = False) -> str:
        """A new commit on upstream `name`'s main, pushed and made the server's branch head."""
        repo = self.upstreams[name]
        cmake = repo / "CMakeLists.txt"
        text = cmake.read_text(encoding="utf-8")
        if broken:
            text += BROKEN
        if fixed:
            text = text.replace(BROKEN, "")
        cmake.write_text(text, encoding="utf-8")
        with (repo / "CHANGES").open("a", encoding="utf-8") as changes:
            changes.write(f"{message}\n")
        git("add", "-A", cwd=repo)
        git("commit", "-q", "-m", message, cwd=repo)
        git("push", "-q", str(self.remotes[f"up/{name}"]), "HEAD:main", cwd=repo)
        head = git("rev-parse", "HEAD", cwd=repo)
        self.server.set_branch(f"up/{name}", "main", head)
        return head

    def sync(self) -> None:
        """The checkout at the remote's main, as the next run checks it out."""
        git("fetch", "-q", "origin", "main", cwd=self.checkout)
        git("reset", "-q", "--hard", "FETCH_HEAD", cwd=self.checkout)

    def run(self, event: str = "schedule", run_id: int | None = None,
            cache: Path | None = None, reproduce: bool = False, engine: str | None = None,
            **inputs: object) -> ActRun:
        """One run of rebuild.yml, from the default branch as the remote has it now. Only a
        run given `reproduce` has the reproduce legs: each is one more cold build. `engine`:
        where the legs' Docker socket leads (Act.run)."""
        if run_id is None:
            self.sync()
        variables = {"NINFER_KITS_GITHUB_API": self.server.base_url}
        if not reproduce:
            variables["NINFER_KITS_REPRODUCE"] = "off"
        return self.act.run(event, inputs=inputs or None, secrets={"GITHUB_TOKEN": TOKEN},
                            variables=variables, run_id=run_id, cache=cache, engine=engine)

    def result(self, run: int, kit: str) -> dict[str, Any]:
        """The result file the run's publish leg of `kit` wrote (ninfer-kits summary's input)."""
        files = self.artifact(run, f"result-{kit}")
        return dict(json.loads(files[f"result-{kit}.json"]))

    def issues(self) -> list[IssueView]:
        return self.server.issue_views(REPO)

    def releases(self) -> dict[str, ReleaseView]:
        return {r.tag_name: r for r in self.server.snapshot().of(REPO) if not r.draft}

    def ledger(self) -> dict[str, LedgerEntry]:
        """releases/*.toml on the remote's main."""
        bare = self.remotes[REPO]
        names = git("ls-tree", "--name-only", "main", "releases/", cwd=bare).splitlines()
        out = {}
        for name in names:
            if name.endswith(".toml"):
                text = git("show", f"main:{name}", cwd=bare)
                path = self.base / "ledger-read" / Path(name).name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text + "\n", encoding="utf-8")
                entry = ledger.read(path)
                out[entry.tag] = entry
        return out

    def index(self) -> dict[str, LedgerEntry]:
        """releases/index.json on the remote's main, as fetch reads it: tag → entry."""
        text = git("show", "main:releases/index.json", cwd=self.remotes[REPO])
        return {entry.tag: entry for entry in kitindex.parse(text.encode(), "index.json")}

    def history(self) -> list[str]:
        return git("log", "--format=%s", "main", cwd=self.remotes[REPO]).splitlines()

    def artifact(self, run: int, name: str) -> dict[str, bytes]:
        """The files of artifact `name` of run number `run` (act's artifact server keeps the
        zip the upload made)."""
        zipped = self.act.state / "artifacts" / str(run) / name / f"{name}.zip"
        with zipfile.ZipFile(io.BytesIO(zipped.read_bytes())) as archive:
            return {info.filename: archive.read(info) for info in archive.infolist()
                    if not info.is_dir()}


def _upstream(place: Path, name: str, bare: Path) -> str:
    shutil.copytree(ROOT / "tests" / "data" / "tiny-engine", place,
                    ignore=shutil.ignore_patterns("build", "build-*"))
    git("init", "-q", "-b", "main", cwd=place)
    git("add", "-A", cwd=place)
    git("commit", "-q", "-m", f"{name}: import the tiny engine", cwd=place)
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=place)
    git("push", "-q", str(bare), "HEAD:main", cwd=place)
    return git("rev-parse", "HEAD", cwd=place)


def _ensure_images(matrix: Path) -> None:
    """The test toolchain's images, made on the engine before act runs: the jobs' builds find
    them by their content tag (as a runner whose engine made them once does)."""
    from ninfer_kits.host.engine import connect
    from ninfer_kits.log import Reporter
    from ninfer_kits.matrix import load_matrix
    from ninfer_kits.pipeline.images import ImageRecipe, ensure_image

    ensure_base_image(BASE_IMAGE)
    ensure_base_image(MINBASE_IMAGE, include="")
    toolchain = load_matrix(matrix).toolchain("trixie-cuda130")
    client = connect()
    for recipe in (ImageRecipe.toolchain_image(toolchain), ImageRecipe.runtime_image(toolchain)):
        ensure_image(client, recipe, Reporter(io.StringIO()))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    ensure_engine()
    base = tmp_path_factory.mktemp("act")
    image = runner_image()
    actions = stand_in_actions()
    wheels = wheelhouse(image)
    with GitHubServer() as server:
        # Actions' GITHUB_TOKEN: an installation token with what the publish job asks for.
        server.add_token(TOKEN, permissions={"contents": "write", "issues": "write"})
        remotes: dict[str, Path] = {}
        upstreams: dict[str, Path] = {}
        for name in KITS.values():
            full = f"up/{name}"
            remotes[full] = base / "remotes" / f"{name}.git"
            head = _upstream(base / "upstreams" / name, name, remotes[full])
            upstreams[name] = base / "upstreams" / name
            server.add_repo(full, head=head)
            server.add_git_remote(full, remotes[full])
        server.add_repo(REPO)
        remotes[REPO] = base / "remotes" / "ninfer-kits.git"
        url = server.add_git_remote(REPO, remotes[REPO])
        matrix = rebuild_matrix({name: (f"{server.web_url}/up/{name}.git", "main")
                                 for name in KITS.values()}, REPO, server.base_url)
        checkout = project_checkout(base / "checkout", matrix, remote=url, slug=REPO)
        git("init", "-q", "--bare", "-b", "main", str(remotes[REPO]), cwd=base)
        git("push", "-q", str(remotes[REPO]), "HEAD:main", cwd=checkout)
        server.set_branch(REPO, "main", git("rev-parse", "HEAD", cwd=checkout))
        _ensure_images(checkout / "matrix.toml")
        act = Act(checkout, base / "act", image=image, actions=actions, wheels=wheels,
                  environments=(cache_sharing_environments(base / "cache") / "environments"
                                ).resolve())
        yield World(server, upstreams, remotes, checkout, act, base)


def _published_from(world: World, run: int, kit: str, release: ReleaseView) -> None:
    """The release's assets are the files of the kit artifact that run's build uploaded."""
    files = world.artifact(run, f"kit-{kit}")
    built = {Path(name).name: data for name, data in files.items()
             if Path(name).parts[0] == release.tag_name}
    assert built, (release.tag_name, sorted(files))
    assert all(asset.state == "uploaded" for asset in release.assets), release
    tarballs = [name for name in built if name.endswith(".tar.gz")]
    assert tarballs, sorted(built)
    for name in [*tarballs, "BUILDINFO.txt"]:
        asset = release.asset(name)
        assert asset is not None and asset.data == built[name], name
    # The release's SHA256SUMS is publish's: the build's lines, and a line for every other file
    # of the release (the reproduction's record, SHA1SUMS, the pyz) but the signature.
    sums = release.asset("SHA256SUMS")
    assert sums is not None
    lines = set(sums.data.decode().splitlines())
    assert set(built["SHA256SUMS"].decode().splitlines()) <= lines
    assert lines == {f"{asset.sha256}  {asset.name}" for asset in release.assets
                     if asset.name not in ("SHA256SUMS", "SHA256SUMS.sig")}


@dataclass(frozen=True)
class First:
    run: ActRun
    again: ActRun
    releases: dict[str, ReleaseView]
    ledger: dict[str, LedgerEntry]
    history: list[str]


@pytest.fixture(scope="module")
def first(world: World) -> First:
    run = world.run(reproduce=True)
    releases, entries, history = world.releases(), world.ledger(), world.history()
    again = world.run()
    return First(run, again, releases, entries, history)


def test_a_scheduled_run_builds_publishes_and_lands_both_stale_kits(world: World,
                                                                      first: First) -> None:
    run = first.run
    assert run.returncode == 0, run.failure
    assert set(run.jobs.values()) == {"success"}, run.jobs
    assert len(run.legs("build")) == 2 and len(run.legs("publish")) == 2, run.jobs
    assert len(run.legs("reproduce")) == 2, run.jobs
    assert len(first.releases) == 2
    for tag, release in first.releases.items():
        entry = first.ledger[tag]
        assert entry.kit in KITS
        _published_from(world, 1, entry.kit, release)
        assert release.asset(entry.asset) is not None
        assert f"releases: {tag}" in first.history
    assert set(first.ledger) == set(first.releases)


def test_each_kit_of_the_first_run_was_reproduced_and_its_release_says_so(
        world: World, first: First) -> None:
    """The reproduce legs rebuilt each kit cold beside the build and compared; publish put
    their record in the release and its notes."""
    from ninfer_kits.release import reproduction

    for tag, release in first.releases.items():
        kit = first.ledger[tag].kit
        record = world.artifact(1, f"reproduction-{kit}")[reproduction.NAME]
        asset = release.asset(reproduction.NAME)
        assert asset is not None and asset.data == record, (tag, sorted(a.name for a in
                                                                         release.assets))
        found = reproduction.parse(record, f"{tag}/{reproduction.NAME}")
        assert (found.kit, found.tag) == (kit, tag)
        assert found.identical, found.to_json()
        assert found.run.endswith("/actions/runs/1"), found.run
        words = found.words()  # the notes start the sentence with it, capitalised
        assert f"{words[0].upper()}{words[1:]}" in (release.body or ""), release.body


def test_the_next_scheduled_run_builds_nothing(world: World, first: First) -> None:
    run = first.again
    assert run.returncode == 0, run.failure
    assert "0 of 2 kits stale" in run.text
    assert run.job_ids == {"watch"}, run.jobs
    assert world.releases().keys() == first.releases.keys()
    assert world.history() == first.history


def test_the_dispatch_inputs_offer_every_kit_of_the_matrix() -> None:
    from ruamel.yaml import YAML

    workflow = YAML(typ="safe").load((ROOT / ".github/workflows/rebuild.yml").read_text())
    inputs = (workflow.get("on") or workflow[True])["workflow_dispatch"]["inputs"]
    shown = subprocess.run([sys.executable, "-m", "ninfer_kits", "matrix", "--json"], cwd=ROOT,
                           capture_output=True, text=True, check=True)
    kits = [kit["kit"] if isinstance(kit, dict) else kit for kit in _kits(json.loads(shown.stdout))]
    assert inputs["kit"]["type"] == "choice"
    assert inputs["kit"]["options"] == ["all", *kits]
    assert inputs["force"]["type"] == inputs["dry_run"]["type"] == "boolean"


def _kits(shown: Any) -> list[Any]:
    if isinstance(shown, dict):
        return list(shown.get("kits", shown.get("include", [])))
    return list(shown)


def test_the_token_never_shows(world: World, first: First) -> None:
    logs = [path.read_text(encoding="utf-8", errors="replace")
            for path in world.act.state.rglob("act.log")]
    assert logs and not [log[:200] for log in logs if TOKEN in log]


def _no_conflict_markers(world: World) -> None:
    bare = world.remotes[REPO]
    for commit in git("rev-list", "main", cwd=bare).splitlines():
        patch = git("show", "--format=", commit, cwd=bare)
        assert not re.search(r"^\+(<<<<<<<|>>>>>>>|=======$)", patch, re.M), commit


def _ccache_hits(run: ActRun) -> list[int]:
    """The hits of each build's `ccache: H hits, M misses (R% hit rate)` line (each shows
    twice: in the step's log and in the job summary it appends to)."""
    return [int(m) for m in re.findall(r"ccache: (\d+) hits?, \d+ miss", run.text)]


@dataclass(frozen=True)
class Forced:
    run: ActRun
    number: int
    before: dict[str, ReleaseView]
    after: dict[str, ReleaseView]
    history: tuple[list[str], list[str]]  # the ledger's history before and after
    images: tuple[list[str], list[str]]  # the leg's engine's image tags before and after


def _image_tags(address: str) -> list[str]:
    import docker

    client = docker.DockerClient(base_url=address)
    try:
        return sorted(tag for image in client.images.list() for tag in image.tags)
    finally:
        client.close()


@pytest.fixture(scope="module")
def forced(world: World, first: First) -> Forced:
    """The forced run's leg on an engine of its own, started empty, as a hosted runner's, and
    with a cache server of its own, empty: nothing of the first run's build is at hand."""
    name = f"act-bare-{uuid.uuid4().hex[:8]}"  # stop_engine purges the engine it names
    address = ensure_second_engine(name)
    try:
        images = _image_tags(address)
        before, history = world.releases(), world.history()
        run = world.run("workflow_dispatch", engine=address, cache=world.base / "bare-cache",
                        kit="alpha-sm86", force=True)
        return Forced(run, world.act.count, before, world.releases(),
                      (history, world.history()), (images, _image_tags(address)))
    finally:
        stop_engine(name)


def test_a_forced_rebuild_of_a_published_kit_is_reproduced_and_changes_nothing(
        world: World, forced: Forced) -> None:
    run = forced.run
    assert run.returncode == 0, run.failure
    assert set(run.jobs.values()) == {"success"}, run.jobs
    assert len(run.legs("build")) == 1 and len(run.legs("publish")) == 1, run.jobs
    assert "forced" in run.text
    result = world.result(forced.number, "alpha-sm86")
    assert result["build"] == "success" and result["publish"] == "reproduced", result
    # The release as it was: the same assets (ids and bytes).
    assert forced.after == forced.before
    # A cold compile: the same bytes came from the toolchain made anew, not from a cache.
    hits = _ccache_hits(run)
    assert hits and set(hits) == {0}, run.text[-3000:]


def test_a_leg_on_an_engine_without_our_images_makes_them_with_the_workflows_steps(
        forced: Forced) -> None:
    """What a hosted runner's engine lacks, the leg made: the Debian base images by
    rebuild.yml's step (debootstrap), the toolchain and runtime images and the toolchain's
    export by the build; the kit it built is the first run's (the previous test)."""
    run, (before, after) = forced.run, forced.images
    assert before == [], before
    made = "\n".join(run.step_output("build", "Make the Debian base images"))
    for image in (BASE_IMAGE, MINBASE_IMAGE):
        assert image in after, after
        assert f"make-base-image: made {image}:" in made, made[-3000:]
    assert any(tag.startswith("ninfer-kits/toolchain-trixie-cuda130:") for tag in after), after
    assert any(tag.startswith("ninfer-kits/runtime-trixie-cuda130:") for tag in after), after
    assert f"into {LEG_ENVIRONMENTS}" in run.text, run.text[-3000:]


def test_a_forced_rebuild_of_a_reproduced_kit_leaves_the_ledger_alone(forced: Forced) -> None:
    # The rebuild has no reproduction record; the release keeps the first run's, and so does
    # the ledger: nothing is committed.
    assert forced.history[1] == forced.history[0]


@dataclass(frozen=True)
class Failing:
    runs: tuple[ActRun, ActRun]
    numbers: tuple[int, int]
    heads: dict[str, str]
    issues: tuple[list[IssueView], list[IssueView]]
    releases: dict[str, ReleaseView]


@pytest.fixture(scope="module")
def failing(world: World, forced: Forced) -> Failing:
    heads = {"alpha": world.move("alpha", "alpha: a new head"),
             "beta": world.move("beta", "beta: a head that does not build", broken=True)}
    run = world.run()
    number = world.act.count
    issues = world.issues()
    again = world.run()  # beta's head is still unreleased: stale, and it fails again
    return Failing((run, again), (number, world.act.count), heads, (issues, world.issues()),
                   world.releases())


def test_a_failed_build_does_not_stop_the_other_kits_publish(world: World,
                                                              failing: Failing) -> None:
    run = failing.runs[0]
    assert run.returncode != 0  # the run is red
    # Each build leg's own result (act, like GitHub's needs.build.result, reports a matrix
    # job's combined result on every leg).
    assert len(run.legs("build")) == 2, run.jobs
    built = {kit: json.loads(world.artifact(failing.numbers[0], f"build-result-{kit}")[
        f"result-{kit}.json"])["build"] for kit in KITS}
    assert built == {"alpha-sm86": "success", "beta-sm86": "failure"}, built
    alpha = world.result(failing.numbers[0], "alpha-sm86")
    beta = world.result(failing.numbers[0], "beta-sm86")
    assert alpha["build"] == "success" and alpha["publish"] == "published", alpha
    assert beta["build"] == "failure" and beta["publish"] == "skipped", beta
    assert alpha["revision"] == failing.heads["alpha"]
    tag = alpha["tag"]
    assert tag in failing.releases and f"releases: {tag}" in world.history()
    assert "this revision does not build" in run.text
    # The toolchain's exported files came through the mount: alpha's leg exported nothing;
    # and its compiler cache came back through actions/cache: the build hit it (beta's leg,
    # beside it in any order, stops at configure: no hit there).
    assert f"into {LEG_ENVIRONMENTS}" not in run.text, run.text[-3000:]
    assert max(_ccache_hits(run), default=0) > 0, run.text[-3000:]
    # The summary job names the failed kit and the step, and is what turns the run red.
    assert run.legs("summary") == ["failure"], run.jobs
    summary = "\n".join(run.step_output("summary", "What this run did"))
    assert "beta-sm86" in summary and "alpha-sm86" in summary, summary
    assert re.search(r"beta-sm86.*fail", summary, re.I), summary


def test_a_failing_kit_opens_one_issue_and_a_second_failure_adds_none(
        failing: Failing) -> None:
    first, second = failing.issues
    assert len(first) == 1, first
    [issue] = first
    assert issue.state == "open" and issue.title == "rebuild failing: beta-sm86"
    assert "ninfer-kits-rebuild" in issue.labels
    assert "build" in (issue.body or "")
    assert failing.runs[1].returncode != 0
    assert second == first  # no second issue, no comment: nothing changed


@dataclass(frozen=True)
class Concurrent:
    runs: tuple[ActRun, ActRun]
    heads: dict[str, str]


# The server's repository refuses the first push of a ledger after moving main itself, as
# another run that landed a moment earlier would: the collision the "Land the ledger" step's
# retry loop exists for, forced rather than left to timing. The hook writes outside the push's
# quarantine (whose objects git drops when the push is refused).
COLLIDE_ONCE = """#!/bin/sh
marker="$GIT_DIR/ninfer-kits-collided"
[ -e "$marker" ] && exit 0
: > "$marker"
unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
export GIT_AUTHOR_NAME=other-run GIT_AUTHOR_EMAIL=other-run@example.invalid
export GIT_COMMITTER_NAME=other-run GIT_COMMITTER_EMAIL=other-run@example.invalid
head=$(git rev-parse refs/heads/main) || exit 1
moved=$(echo "another run landed first" | git commit-tree "$head^{tree}" -p "$head") || exit 1
git update-ref refs/heads/main "$moved" "$head" || exit 1
echo "main moved meanwhile (a forced collision)" >&2
exit 1
"""


@pytest.fixture(scope="module")
def concurrent(world: World, failing: Failing) -> Concurrent:
    heads = {"alpha": world.move("alpha", "alpha: another head"),
             "beta": world.move("beta", "beta: builds again", fixed=True)}
    world.sync()
    # act ignores `concurrency`: both runs really run at once. Each its own cache server
    # folder (a copy: both start warm), its own run id.
    caches = []
    for number in (1, 2):
        cache = world.act.state / f"cache-{number}"
        shutil.copytree(world.act.state / "cache", cache)
        caches.append(cache)
    hook = world.remotes[REPO] / "hooks" / "pre-receive"
    hook.write_text(COLLIDE_ONCE, encoding="utf-8")
    hook.chmod(0o755)
    base = world.act.count + 1
    world.act.count += 2
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(world.run, "schedule", run_id=base + i, cache=caches[i])
                   for i in range(2)]
        runs = tuple(future.result() for future in futures)
    hook.unlink()
    return Concurrent((runs[0], runs[1]), heads)


def test_two_runs_at_once_leave_whole_releases_and_both_ledger_files(
        world: World, concurrent: Concurrent) -> None:
    for run in concurrent.runs:
        assert run.returncode == 0, run.failure
    releases = [r for r in world.server.snapshot().of(REPO)]
    tags = [r.tag_name for r in releases]
    assert len(tags) == len(set(tags)) and not [r for r in releases if r.draft], tags
    for release in releases:
        assert release.assets and all(a.state == "uploaded" for a in release.assets), release
        sums = release.asset("SHA256SUMS")
        assert sums is not None
        listed = dict(line.split()[::-1] for line in sums.data.decode().splitlines())
        for name, digest in listed.items():
            asset = release.asset(name.lstrip("*"))
            assert asset is not None and asset.sha256 == digest, name
    entries = world.ledger()  # every file parses
    assert set(entries) == {r.tag_name for r in releases}
    # the kit index landed with them, made from the whole ledger: the other run's too
    assert world.index() == entries
    landed = {entry.revision for entry in entries.values()}
    assert set(concurrent.heads.values()) <= landed
    _no_conflict_markers(world)


def test_a_refused_ledger_push_lands_from_the_moved_branch(
        world: World, concurrent: Concurrent) -> None:
    """The forced collision (COLLIDE_ONCE): one push was refused after main moved; its step
    fetched the new main and landed on it, with the other run's commit kept."""
    text = "\n".join(run.text for run in concurrent.runs)
    assert "push refused (attempt 1)" in text, text[-6000:]
    assert re.search(r"landed the ledger of \S+ on main \(attempt [2-6]\)", text), text[-6000:]
    assert "another run landed first" in world.history()


def test_a_fixed_kit_closes_its_issue(world: World, concurrent: Concurrent) -> None:
    [issue] = world.issues()
    assert issue.state == "closed", issue
