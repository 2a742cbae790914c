"""`ninfer-kits summary`: each kit's result file written by `--write-result` (atomically, checked),
read back from the folder download-artifact makes (subfolders), the run's table and totals on
stdout and in $GITHUB_STEP_SUMMARY, exit 1 when a kit failed (an annotation naming it on
Actions), exit 2 naming a result file that is not one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ninfer_kits import cli

REV_A = "0123456789abcdef0123456789abcdef01234567"
REV_B = "fedcba9876543210fedcba9876543210fedcba98"


def summary(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str,
            step_summary: Path | None = None, actions: bool = False) -> tuple[int, str, str]:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    if step_summary is not None:
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    if actions:
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code = cli.main(["summary", *args])
    out, err = capsys.readouterr()
    return code, out, err


def write(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, folder: Path,
          kit: str, build: str, publish: str, revision: str = REV_A,
          reason: str = "upstream moved", tag: str = "") -> int:
    code, _, err = summary(capsys, monkeypatch, "--write-result", str(folder), "--kit", kit,
                           "--revision", revision, "--reason", reason, "--build", build,
                           "--publish", publish, "--tag", tag)
    assert code in (0, 2), err
    return code


def test_a_run_that_built_published_and_reproduced_is_green_with_its_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results"
    # download-artifact without merge-multiple: one subfolder per artifact
    write(capsys, monkeypatch, results / "result-beta-sm86", "beta-sm86", "success",
          "reproduced", REV_B, "inputs changed: toolchain tc", "beta-sm86-fedcba98")
    write(capsys, monkeypatch, results / "result-alpha-sm86", "alpha-sm86", "success",
          "published", REV_A, "upstream alpha moved | to 0123", "alpha-sm86-01234567")
    write(capsys, monkeypatch, results, "gamma-sm89", "skipped", "skipped", "", "dry run")
    step_summary = tmp_path / "step-summary.md"
    step_summary.write_text("### before\n")
    code, out, err = summary(capsys, monkeypatch, str(results), step_summary=step_summary)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "### Rebuild", "",
        "| kit | revision | why | build | publish | tag |", "|---|---|---|---|---|---|",
        "| `alpha-sm86` | `0123456789ab` | upstream alpha moved \\| to 0123 | ✅ success "
        "| ✅ published | `alpha-sm86-01234567` |",
        "| `beta-sm86` | `fedcba987654` | inputs changed: toolchain tc | ✅ success "
        "| ♻️ reproduced | `beta-sm86-fedcba98` |",
        "| `gamma-sm89` |  | dry run | skipped | skipped |  |", "",
        "**3 kits: 2 built, 1 published, 1 reproduced, 1 skipped, 0 failed**"]
    assert step_summary.read_text() == "### before\n" + out


def test_a_failed_kit_makes_the_run_red_once_and_names_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    write(capsys, monkeypatch, tmp_path, "alpha-sm86", "failure", "skipped")
    write(capsys, monkeypatch, tmp_path, "beta-sm86", "success", "conflict", tag="beta-x")
    write(capsys, monkeypatch, tmp_path, "gamma-sm89", "success", "published", tag="gamma-x")
    # released, but its ledger push was refused to the end: a failure, not "published"
    write(capsys, monkeypatch, tmp_path, "delta-sm89", "success", "unlanded", tag="delta-x")
    code, out, err = summary(capsys, monkeypatch, str(tmp_path), actions=True)
    assert code == 1
    assert out.splitlines()[-1] == ("**4 kits: 3 built, 1 published, 0 reproduced, 0 skipped, "
                                    "3 failed**")
    assert "| `beta-sm86` | `0123456789ab` | upstream moved | ✅ success | ❌ conflict |" in out
    assert "| ✅ success | ❌ published, ledger not landed | `delta-x` |" in out
    assert err.splitlines() == [
        "::error title=rebuild failed%3A alpha-sm86::kit alpha-sm86: build failed",
        "::error title=rebuild failed%3A beta-sm86::kit beta-sm86: publish (conflict) failed "
        "(beta-x)",
        "::error title=rebuild failed%3A delta-sm89::kit delta-sm89: ledger (the release is "
        "out, its ledger file did not land) failed (delta-x)"]


def _record_step() -> str:
    """The run of rebuild.yml's "Record the result" step."""
    from ruamel.yaml import YAML

    from tools import ROOT

    workflow = YAML(typ="safe").load((ROOT / ".github/workflows/rebuild.yml").read_text())
    steps = workflow["jobs"]["publish"]["steps"]
    return str(next(step for step in steps if step.get("name") == "Record the result")["run"])


@pytest.mark.parametrize(("landed", "proposed", "expected"), [
    ("success", "skipped", "published"), ("failure", "skipped", "unlanded"),
    ("skipped", "failure", "unlanded"), ("skipped", "skipped", "published")])
def test_the_workflow_records_a_failed_ledger_landing(tmp_path: Path, landed: str,
                                                      proposed: str, expected: str) -> None:
    """The step's own shell, with the step outcomes GitHub gives it, and the real CLI."""
    import os
    import subprocess
    import sys

    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "RUNNER_TEMP": str(tmp_path), "REVISION": REV_A, "REASON": "upstream moved",
           "BUILD": "success", "PUBLISHED": "success", "OUTCOME": "", "TAG": "alpha-x",
           "KIT": "alpha-sm86", "LANDED": landed, "PROPOSED": proposed,
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(["bash", "-e", "-c", _record_step()], env=env, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "final" / "result-alpha-sm86.json").read_text())
    assert written["publish"] == expected


def test_no_results_is_an_empty_green_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = summary(capsys, monkeypatch, str(tmp_path))
    assert (code, out.splitlines()[-1]) == (0, "**0 kits: 0 built, 0 published, 0 reproduced, "
                                               "0 skipped, 0 failed**")


def test_write_result_is_atomic_and_replaces_an_earlier_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    write(capsys, monkeypatch, tmp_path, "alpha-sm86", "failure", "skipped")
    write(capsys, monkeypatch, tmp_path, "alpha-sm86", "success", "published", tag="t1")
    assert [p.name for p in tmp_path.iterdir()] == ["result-alpha-sm86.json"]
    assert json.loads((tmp_path / "result-alpha-sm86.json").read_text()) == {
        "kit": "alpha-sm86", "revision": REV_A, "reason": "upstream moved", "build": "success",
        "publish": "published", "tag": "t1"}


@pytest.mark.parametrize(("content", "says"), [
    ("[]", "not a kit result (a JSON object with kit, revision, reason, build, publish, tag)"),
    ("{", "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
          "(char 1))"),
    ('{"kit": "alpha-sm86"}', "not a kit result: revision, reason, build, publish, tag are "
                              "missing or not a string"),
    ('{"kit": "alpha-sm86", "revision": "", "reason": "", "build": "done", "publish": '
     '"skipped", "tag": ""}', "build 'done' is not one of success, failure, skipped"),
    ('{"kit": "beta-sm86", "revision": "", "reason": "", "build": "success", "publish": '
     '"skipped", "tag": ""}', "holds the result of kit beta-sm86, whose file is "
                              "result-beta-sm86.json"),
])
def test_a_malformed_result_file_is_exit_2_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        content: str, says: str) -> None:
    bad = tmp_path / "result-alpha-sm86.json"
    bad.write_text(content)
    code, out, err = summary(capsys, monkeypatch, str(tmp_path))
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"ninfer-kits: error: summary: {bad}: {says}"]


def test_one_kit_twice_and_a_missing_folder_are_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    write(capsys, monkeypatch, tmp_path / "a", "alpha-sm86", "success", "published")
    write(capsys, monkeypatch, tmp_path / "b", "alpha-sm86", "failure", "skipped")
    code, _, err = summary(capsys, monkeypatch, str(tmp_path))
    assert code == 2
    assert err == (f"ninfer-kits: error: summary: kit alpha-sm86 has two results: "
                   f"{tmp_path / 'a' / 'result-alpha-sm86.json'} and "
                   f"{tmp_path / 'b' / 'result-alpha-sm86.json'}\n")
    code, _, err = summary(capsys, monkeypatch, str(tmp_path / "nothing"))
    assert code == 2 and "no such folder" in err


@pytest.mark.parametrize(("args", "says"), [
    (("--kit", "../x", "--build", "success"), "summary --write-result: kit '../x' is not a kit "
                                                "name"),
    (("--kit", "a", "--build", "success", "--revision", "main"),
     "summary --write-result: revision 'main' is not a revision"),
    (("--kit", "a"), "summary --write-result: --build is needed"),
])
def test_write_result_refuses_what_is_not_a_result(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        args: tuple[str, ...], says: str) -> None:
    code, _, err = summary(capsys, monkeypatch, "--write-result", str(tmp_path), *args)
    assert code == 2
    assert err.startswith(f"ninfer-kits: error: {says}")
    assert list(tmp_path.iterdir()) == []


def test_a_publish_outcome_outside_the_contract_is_refused_by_the_parser(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as exited:
        summary(capsys, monkeypatch, "--write-result", str(tmp_path), "--kit", "a", "--build",
                "success", "--publish", "done")
    assert exited.value.code == 2
    assert "invalid choice: 'done'" in capsys.readouterr().err
