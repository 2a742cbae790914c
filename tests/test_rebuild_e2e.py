"""What .github/workflows/rebuild.yml does, end to end, with real parts only: `ninfer-kits
watch` against the local GitHub server (tests/github_server.py) over HTTP, its build matrix read
from $GITHUB_OUTPUT and looped over as the workflow's matrix jobs are (the build legs of a run
at once, as GitHub runs them, the publish legs after them one by one), `ninfer-kits build` (the
local builder: a real clone of a real git upstream and a real CUDA compile of the example
engine) and `ninfer-kits publish` to the same server, then the ledger file committed to the
checkout as the workflow's "Land the ledger" step does.

Two upstreams, up/alpha and up/beta, are git repositories holding examples/engine; the server
serves their branch heads, set to the repositories' own `git rev-parse`. Five workflow runs:

1. the first: every kit is missing from the ledger, so each is built, published (a release on
   the server whose tarball is the built one) and recorded in releases/<tag>.toml;
2. nothing changed: with the same ETag state file the server answers only 304s and nothing is
   built or published;
3. alpha moved (a new commit, the server's head set to it): exactly alpha's kit is rebuilt at
   the new head; beta's is not built;
4. a dispatch of beta's kit at an older commit (an abbreviated SHA, as a person types it): built
   at that commit, published, and the ledger records that revision;
5. a scheduled run after that: the server answers 304 for both (the state file kept between
   runs, as actions/cache keeps it) and nothing is built: beta's newest release is now the
   older commit, but its head was released by the first run (rebuilt, it would take that
   release's tag with other bytes, and publish would refuse it, run after run).

Every ledger file lands as a commit of the checkout, beside matrix.toml where watch reads it.
The GitHub token is in every watch and publish environment and never in any output, summary,
step output, state file, ledger or other file the runs leave. Four builds, their compiles from
the session's warm compiler cache (as the workflow's come from actions/cache: nothing here is
about a cold compile)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from github_server import GitHubServer
from ninfer_kits.kit import buildinfo, kitdir
from ninfer_kits.release import ledger
from ninfer_kits.release.checksums import SHA256, parse_sums
from ninfer_kits.release.ledger import LedgerEntry
from rebuild_matrix import rebuild_matrix

from tools import ROOT, git, needs_libcurl_headers, nvcc, sha256_of, tool

pytestmark = pytest.mark.slow

TOKEN = "ghp_REBUILDcanary0123456789abcdefE2E"
RELEASES_REPO = "kits/releases"
KITS = {"alpha-sm86": "alpha", "beta-sm86": "beta"}
BRANCHES = {"alpha": "main", "beta": "release/v1"}
HEAD_PATH = r"/repos/([^/]+/[^/]+)/commits/"  # the branch-head requests watch sends


# What the runner's environment must not bring in: each step sets its own.
FOREIGN = ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS",
           "NINFER_KITS_MATRIX", "NINFER_KITS_CACHE", "NINFER_KITS_GITHUB_API",
           "B2_APPLICATION_KEY_ID", "B2_APPLICATION_KEY", "NINFER_B2_ENV")


def read_outputs(path: Path) -> dict[str, str]:
    """A step's outputs: the NAME=VALUE lines it appended to $GITHUB_OUTPUT."""
    if not path.exists():
        return {}
    return dict(line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines())


def head_of(path: str) -> str:
    """The repository (OWNER/NAME) whose branch head a request's path asks for."""
    match = re.search(HEAD_PATH, path)
    assert match is not None, path
    return match.group(1)


@dataclass(frozen=True)
class Job:
    """One build-matrix entry: its build job, then its publish job (and the ledger commit)."""

    entry: dict[str, Any]
    dist: Path
    build: subprocess.CompletedProcess[str]
    publish: subprocess.CompletedProcess[str]
    outputs: dict[str, str]  # the publish step's outputs

    @property
    def kit(self) -> str:
        return str(self.entry["kit"])

    @property
    def folders(self) -> list[Path]:
        """The finished kit folders this job's build left in its dist/ (its artifact)."""
        return sorted(p for p in self.dist.iterdir() if (p / kitdir.BUILDINFO).is_file())


@dataclass(frozen=True)
class Run:
    """One run of the workflow: the watch step, the jobs of its matrix, and what it left."""

    watch: subprocess.CompletedProcess[str]
    outputs: dict[str, str]  # the watch step's outputs
    jobs: tuple[Job, ...]
    heads: tuple[tuple[str, int | None], ...]  # (OWNER/NAME, status) of each head request
    releases: dict[str, dict[str, str]]  # published tag → {asset name: sha256}, after the run
    sums: dict[str, dict[str, str]]  # published tag → its SHA256SUMS, {name: sha256}
    ledger: dict[str, LedgerEntry]  # releases/<tag>.toml, after the run
    landed: tuple[str, ...]  # the subjects of the checkout's commits made by this run
    rate_used: int  # the token's core rate limit used, after the run

    @property
    def include(self) -> list[dict[str, Any]]:
        return list(json.loads(self.outputs["matrix"])["include"])

    @property
    def stale(self) -> list[str]:
        return [str(entry["kit"]) for entry in self.include]


@dataclass
class Workflow:
    """rebuild.yml on this machine: a checkout holding matrix.toml and releases/, the watch
    state file that actions/cache keeps between runs, and the local GitHub server."""

    checkout: Path
    server: GitHubServer
    runner_temp: Path
    ccache: Path  # the compiler cache actions/cache restores (the session's warm one)
    texts: list[str] = field(default_factory=list)  # everything the steps printed
    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def environment(self, step: Path, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in FOREIGN}
        step.mkdir(parents=True)
        env.update(GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(step / "output"),
                   GITHUB_STEP_SUMMARY=str(step / "summary"), XDG_CACHE_HOME=str(step / "home"),
                   NINFER_KITS_RETRY_SCALE="0.001", **extra)
        return env

    def step(self, where: Path, *args: str,
             **env: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
        """`ninfer-kits ARGS` as a step runs it, in the checkout: its result and outputs."""
        environ = self.environment(where, **env)
        done = subprocess.run([sys.executable, "-m", "ninfer_kits", *args], cwd=self.checkout,
                              env=environ, capture_output=True, text=True, timeout=300,
                              check=False)
        with self.lock:  # build legs run at once
            self.texts += [done.stdout, done.stderr]
        return done, read_outputs(Path(environ["GITHUB_OUTPUT"]))

    def run(self, kit: str = "", revision: str = "") -> Run:
        """A scheduled run (no inputs), or a dispatch with the inputs `kit` and `revision`."""
        self.count += 1
        place = self.runner_temp / f"run{self.count}"
        before = len(self.server.requests("GET", HEAD_PATH))
        landed_before = len(self._log())
        args = ["--state", ".watch-state/state.json", "--github-output"]
        args += [kit] if kit else []
        args += ["--revision", revision] if revision else []
        watch, outputs = self.step(place / "watch", "watch", *args, GITHUB_TOKEN=TOKEN,
                                   NINFER_KITS_GITHUB_API=self.server.base_url)
        heads = tuple((head_of(e.path), e.status)
                      for e in self.server.requests("GET", HEAD_PATH)[before:])
        jobs: list[Job] = []
        # The build job's `if`: not cancelled (watch exiting 1 still builds the others), stale.
        if watch.returncode in (0, 1) and outputs.get("stale", "") not in ("", "0"):
            entries = json.loads(outputs["matrix"])["include"]
            # The matrix's build legs at once, as GitHub runs them (each in a folder of its
            # own); then each kit's publish job, one after another, in the matrix's order.
            with ThreadPoolExecutor(len(entries)) as pool:
                builds = [pool.submit(self._build, place / str(entry["kit"]), entry)
                          for entry in entries]
                built = [future.result() for future in builds]
            for entry, (dist, build) in zip(entries, built, strict=True):
                jobs.append(self._publish(place / str(entry["kit"]), entry, dist, build))
        log = self._log()
        return Run(watch, outputs, tuple(jobs), heads, self.published(), self.sums(),
                   self.ledger(),
                   tuple(log[: len(log) - landed_before]), self.server.rate_limit(TOKEN)[1])

    def _build(self, place: Path, entry: dict[str, Any]
               ) -> tuple[Path, subprocess.CompletedProcess[str]]:
        """A build leg: the kit built into place/dist (the artifact the build uploads and the
        publish job downloads)."""
        kit, revision = str(entry["kit"]), str(entry["revision"])
        dist = place / "dist"
        build, _ = self.step(place / "build", "build", kit, "--revision", revision,
                             "--dist", str(dist), "--cache-dir", str(place / "ninfer-kits"),
                             "--ccache-dir", str(self.ccache))
        return dist, build

    def _publish(self, place: Path, entry: dict[str, Any], dist: Path,
                 build: subprocess.CompletedProcess[str]) -> Job:
        """A publish leg, after its build leg: the release, and the ledger landed."""
        kit = str(entry["kit"])
        assert build.returncode == 0, build.stderr[-4000:]
        publish, outputs = self.step(place / "publish", "publish", kit, "--dist", str(dist),
                                     GITHUB_TOKEN=TOKEN)
        # "Land the ledger", as [publish] ledger = "commit" has it (the push left out): the
        # ledger file and the kit index made again from the whole ledger.
        if publish.returncode == 0 and outputs.get("changed") == "true":
            assert outputs["ledger_mode"] == "commit"
            folder = Path(outputs["ledger"]).parent
            index, _ = self.step(place / "index", "index", "--ledger-dir", str(folder))
            assert index.returncode == 0, index.stderr[-2000:]
            git("add", "--", outputs["ledger"], str(folder / "index.json"),
                str(folder / "index.html"), cwd=self.checkout)
            git("commit", "-q", "-m", f"releases: {outputs['tag']}", cwd=self.checkout)
        return Job(entry, dist, build, publish, outputs)

    def _log(self) -> list[str]:
        return git("log", "--format=%s", cwd=self.checkout).splitlines()

    def published(self) -> dict[str, dict[str, str]]:
        return {release.tag_name: {asset.name: asset.sha256 for asset in release.assets}
                for release in self.server.snapshot().of(RELEASES_REPO) if not release.draft}

    def sums(self) -> dict[str, dict[str, str]]:
        return {release.tag_name: parse_sums(asset.data.decode(), SHA256, release.tag_name)
                for release in self.server.snapshot().of(RELEASES_REPO) if not release.draft
                for asset in release.assets if asset.name == kitdir.SHA256SUMS}

    def ledger(self) -> dict[str, LedgerEntry]:
        entries = (ledger.read(path) for path in (self.checkout / "releases").glob("*.toml"))
        return {entry.tag: entry for entry in entries}


@dataclass(frozen=True)
class History:
    """The five runs, and the upstreams' commits they were made against."""

    runs: tuple[Run, Run, Run, Run, Run]
    first: dict[str, str]  # upstream → its head at the first run
    moved: str  # alpha's head after it moved
    older: str  # beta's commit before its head, dispatched
    texts: tuple[str, ...]  # every text the runs printed or left behind
    checkout: Path


def upstream_repo(place: Path, name: str, commits: int) -> list[str]:
    """up/<name>: examples/engine in a git repository, `commits` commits on its branch; their
    SHAs, oldest first."""
    shutil.copytree(ROOT / "examples" / "engine", place,
                    ignore=shutil.ignore_patterns("build", "build-*"))
    git("init", "-q", "-b", BRANCHES[name], cwd=place)
    git("add", "-A", cwd=place)
    git("commit", "-q", "-m", f"{name}: import the example engine", cwd=place)
    for number in range(1, commits):
        new_commit(place, f"{name}: change {number}")
    return git("rev-list", "--reverse", "HEAD", cwd=place).splitlines()


def new_commit(repo: Path, message: str) -> str:
    readme = repo / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + f"\n{message}\n", encoding="utf-8")
    git("commit", "-q", "-am", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, warm_ccache: Path) -> Iterator[History]:
    tool("ninja")
    nvcc()
    needs_libcurl_headers()
    base = tmp_path_factory.mktemp("rebuild")
    upstreams = base / "upstreams" / "up"
    alpha = upstream_repo(upstreams / "alpha", "alpha", 1)
    beta = upstream_repo(upstreams / "beta", "beta", 2)
    with GitHubServer() as server:
        server.add_token(TOKEN)
        server.add_repo(RELEASES_REPO)
        server.add_repo("up/alpha", default_branch=BRANCHES["alpha"], head=alpha[-1])
        server.add_repo("up/beta", default_branch=BRANCHES["beta"], head=beta[-1])

        checkout = base / "checkout"
        checkout.mkdir()
        text = rebuild_matrix({name: ((upstreams / name).as_uri(), BRANCHES[name])
                               for name in ("alpha", "beta")}, RELEASES_REPO, server.base_url)
        (checkout / "matrix.toml").write_text(text, encoding="utf-8")
        (checkout / ".gitignore").write_text(".watch-state/\n", encoding="utf-8")
        git("init", "-q", "-b", "main", cwd=checkout)
        git("add", "-A", cwd=checkout)
        git("commit", "-q", "-m", "matrix", cwd=checkout)

        workflow = Workflow(checkout, server, base / "runner", warm_ccache)
        first = workflow.run()
        unchanged = workflow.run()
        moved = new_commit(upstreams / "alpha", "alpha: a new head")
        server.set_branch("up/alpha", BRANCHES["alpha"], moved)
        after_move = workflow.run()
        dispatched = workflow.run("beta-sm86", beta[0][:12])
        scheduled = workflow.run()

        texts = [*workflow.texts, *(repr(event) for event in server.events)]
        for path in base.rglob("*"):
            if path.is_file() and not path.is_symlink():
                texts.append(path.read_bytes().decode("utf-8", "replace"))
        yield History((first, unchanged, after_move, dispatched, scheduled),
                      {"alpha": alpha[-1], "beta": beta[-1]}, moved, beta[0], tuple(texts),
                      checkout)


def revisions(run: Run, kit: str) -> set[str]:
    """The revisions the ledger records releases of `kit` at, after the run."""
    return {entry.revision for entry in run.ledger.values() if entry.kit == kit}


def built_revision(job: Job) -> str:
    """The one kit folder the job built, and the revision its BUILDINFO.txt records."""
    assert len(job.folders) == 1, job.folders
    info = buildinfo.read(job.folders[0] / kitdir.BUILDINFO)
    assert info.kit == job.kit
    return info.revision


def assert_published(run: Run, job: Job, checkout: Path) -> LedgerEntry:
    """The job's kit is a published release whose assets are the built folder's files, and its
    ledger file records it; that ledger entry."""
    assert job.publish.returncode == 0, job.publish.stderr[-4000:]
    folder = job.folders[0]
    tag = folder.name
    assert job.outputs["tag"] == tag and job.outputs["changed"] == "true"
    assets = run.releases[tag]
    for name in (kitdir.SHA1SUMS, kitdir.BUILDINFO):
        assert assets[name] == sha256_of(folder / name), name
    # the release's SHA256SUMS is publish's: the built folder's lines, and a line for every
    # other file of the release but the signature
    built = parse_sums((folder / kitdir.SHA256SUMS).read_text(), SHA256, str(folder))
    listed = run.sums[tag]
    assert built.items() <= listed.items()
    assert listed == {name: sha256 for name, sha256 in assets.items()
                      if name not in (kitdir.SHA256SUMS, kitdir.SIGNATURE)}
    entry = run.ledger[tag]
    assert assets[entry.asset] == sha256_of(folder / entry.asset)
    assert Path(job.outputs["ledger"]) == ledger.path_for(checkout / "releases", tag)
    assert entry.kit == job.kit and entry.revision == built_revision(job)
    assert f"releases: {tag}" in run.landed
    return entry


def test_the_first_run_builds_and_publishes_every_kit_missing_from_the_ledger(
        history: History) -> None:
    run = history.runs[0]
    assert run.watch.returncode == 0, run.watch.stderr
    assert run.outputs["stale"] == "2" and sorted(run.stale) == sorted(KITS)
    assert all(e["reason"].startswith("missing release") for e in run.include)
    assert run.heads == (("up/alpha", 200), ("up/beta", 200))
    assert len(run.jobs) == 2
    for job in run.jobs:
        head = history.first[KITS[job.kit]]
        assert job.entry["revision"] == head and built_revision(job) == head
        entry = assert_published(run, job, history.checkout)
        assert entry.upstream == f"up/{KITS[job.kit]}" and entry.toolchain == "host"
    assert len(run.releases) == 2 and set(run.ledger) == set(run.releases)
    assert len(run.landed) == 2


def test_nothing_changed_costs_only_304s_and_builds_nothing(history: History) -> None:
    first, run = history.runs[0], history.runs[1]
    assert run.watch.returncode == 0, run.watch.stderr
    assert run.outputs == {"matrix": '{"include":[]}', "stale": "0"}
    assert run.heads == (("up/alpha", 304), ("up/beta", 304))
    assert run.rate_used == first.rate_used  # a 304 costs no rate limit
    assert run.jobs == ()  # no build, no publish
    assert run.releases == first.releases and set(run.ledger) == set(first.ledger)
    assert run.landed == ()
    assert "0 of 2 kits stale" in run.watch.stdout


def test_a_moved_upstream_rebuilds_exactly_its_kits(history: History) -> None:
    before, run = history.runs[1], history.runs[2]
    assert run.watch.returncode == 0, run.watch.stderr
    assert run.heads == (("up/alpha", 200), ("up/beta", 304))  # only alpha's answer changed
    assert run.stale == ["alpha-sm86"]
    [job] = run.jobs  # beta's kit is not built
    assert job.entry["revision"] == history.moved != history.first["alpha"]
    assert job.entry["reason"].startswith("new head of main")
    assert built_revision(job) == history.moved
    entry = assert_published(run, job, history.checkout)
    assert set(run.releases) - set(before.releases) == {entry.tag}
    assert revisions(run, "alpha-sm86") == {history.first["alpha"], history.moved}
    assert revisions(run, "beta-sm86") == {history.first["beta"]}


def test_a_dispatch_builds_and_records_the_revision_asked_for(history: History) -> None:
    before, run = history.runs[2], history.runs[3]
    assert run.watch.returncode == 0, run.watch.stderr
    assert run.heads == ()  # a dispatched revision asks the server nothing
    assert run.stale == ["beta-sm86"]
    [job] = run.jobs
    assert job.entry["revision"] == history.older[:12]  # as dispatched
    assert job.entry["reason"].startswith("requested revision")
    assert built_revision(job) == history.older != history.first["beta"]
    entry = assert_published(run, job, history.checkout)
    assert entry.revision == history.older  # the full SHA
    assert set(run.releases) - set(before.releases) == {entry.tag}
    assert revisions(run, "beta-sm86") == {history.first["beta"], history.older}
    assert revisions(run, "alpha-sm86") == revisions(before, "alpha-sm86")


def test_a_scheduled_run_after_the_dispatch_builds_nothing(history: History) -> None:
    """beta's newest release is now the older commit, but its head was released in the first
    run: not stale (a rebuild would take that release's tag, and publish would refuse it)."""
    before, run = history.runs[3], history.runs[4]
    assert run.watch.returncode == 0, run.watch.stderr
    assert run.heads == (("up/alpha", 304), ("up/beta", 304))
    assert run.stale == [], run.include
    assert run.jobs == () and run.releases == before.releases


def test_every_release_is_in_the_ledger_committed_beside_the_matrix(history: History) -> None:
    last = history.runs[-1]
    assert len(last.releases) == 4 and set(last.ledger) == set(last.releases)
    tracked = git("ls-files", "releases", cwd=history.checkout).splitlines()
    assert sorted(tracked) == sorted([*(f"releases/{tag}.toml" for tag in last.ledger),
                                      "releases/index.html", "releases/index.json"])
    assert git("status", "--porcelain", cwd=history.checkout) == ""
    # the index on the branch is the one its whole ledger makes, every release in it
    checked = subprocess.run([sys.executable, "-m", "ninfer_kits", "index", "--ledger-dir",
                              "releases", "--check"], cwd=history.checkout, capture_output=True,
                             text=True, check=False)
    assert checked.returncode == 0, checked.stderr
    assert sum(len(run.landed) for run in history.runs) == 4


def test_the_token_never_shows(history: History) -> None:
    assert len(history.texts) > 20
    leaks = [text[:200] for text in history.texts if TOKEN in text]
    assert not leaks
