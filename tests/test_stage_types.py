"""The build's stage order is checked by the type checker, not at run time: each stage of
pipeline.stages.run_stages receives the results it needs, so a copy of stages.py with a stage
moved before one whose result it takes fails mypy (strict, the project's configuration), naming
that result, and the copy as it is passes. mypy reads the copies against the package of this
checkout: one run for all of them, about 4 s with a cold cache."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

from tools import ROOT, missing

STAGES = ROOT / "src" / "ninfer_kits" / "pipeline" / "stages.py"
# Two stages in a row, the second needing the first's result: the copy moves it before.
SWAPS = (("fetch", "compile"), ("buildinfo", "pack"), ("checksums", "dist"))
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>[0-9]+): error: (?P<message>.*)$")


def _steps(source: str) -> dict[str, ast.Assign]:
    """run_stages' statements `RESULT = build.step("NAME", stage, …)`, by NAME."""
    module = ast.parse(source)
    run_stages = next(node for node in module.body
                      if isinstance(node, ast.FunctionDef) and node.name == "run_stages")
    steps = {}
    for statement in run_stages.body:
        call = statement.value if isinstance(statement, ast.Assign) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr == "step" and isinstance(call.args[0], ast.Constant):
            steps[str(call.args[0].value)] = statement
    return steps


def _swapped(source: str, first: ast.Assign, second: ast.Assign) -> str:
    """`source` with the statement `second` (right after `first`) moved before it."""
    assert second.lineno == (first.end_lineno or 0) + 1, "the two stages are not in a row"
    lines = source.splitlines(keepends=True)
    return "".join([*lines[:first.lineno - 1], *lines[second.lineno - 1:second.end_lineno],
                    *lines[first.lineno - 1:first.end_lineno], *lines[second.end_lineno or 0:]])


def _result(statement: ast.Assign) -> str:
    target = statement.targets[0]
    assert isinstance(target, ast.Name)
    return target.id


def test_a_stage_moved_before_the_stage_whose_result_it_needs_fails_the_type_check(
        tmp_path: Path) -> None:
    if find_spec("mypy") is None:
        missing("mypy (the test extra installs it)")
    source = STAGES.read_text(encoding="utf-8")
    steps = _steps(source)
    assert list(steps)[:2] == ["preflight", "fetch"] and list(steps)[-1] == "dist"
    copies = tmp_path / "copies"
    copies.mkdir()
    (copies / "stages_as_is.py").write_text(source, encoding="utf-8")
    expected = set()
    for index, (first, second) in enumerate(SWAPS):
        copy = copies / f"stages_swap{index}.py"
        copy.write_text(_swapped(source, steps[first], steps[second]), encoding="utf-8")
        result = _result(steps[first])
        expected |= {(copy.name, steps[first].lineno, message) for message in (
            f'Name "{result}" is used before definition  [used-before-def]',
            f'Cannot determine type of "{result}"  [has-type]')}
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), "--no-error-summary",
         *sorted(str(path) for path in copies.iterdir())],
        capture_output=True, text=True, check=False, cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(ROOT / "src")})
    errors = {(Path(found["file"]).name, int(found["line"]), found["message"])
              for found in map(ERROR.match, checked.stdout.splitlines()) if found}
    assert errors == expected, checked.stdout + checked.stderr
    assert checked.returncode == 1
