"""`ninfer-kits repro`: the example kit built twice under different conditions (folder and its
depth, job count, TZ, LANG, umask, HOME, user name, the time of day) is
byte-identical, both flavours; `--against` compares one fresh build with a kit folder; and an
upstream that embeds something of its build environment (HOME, through a CMake cache default)
is reported as not reproducible, naming the member, the section and both values."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools import ROOT, git  # git with the tests' own identity: a fresh machine has none

pytestmark = pytest.mark.slow


def repro(*args: str, cwd: Path, kit: str = "example",
          matrix: Path | None = ROOT / "matrix.toml") -> subprocess.CompletedProcess[str]:
    """`ninfer-kits repro KIT`; with matrix=None, as README shows it: ./matrix.toml."""
    given = ["--matrix", str(matrix)] if matrix is not None else []
    env = {name: value for name, value in os.environ.items() if name != "NINFER_KITS_MATRIX"}
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "repro", kit, *given, *args],
                          capture_output=True, text=True, check=False, cwd=cwd, env=env)


def test_the_example_kit_is_reproducible(tmp_path: Path) -> None:
    """As README shows it, from the project folder without --matrix or --source: the example
    engine is then this repository's examples/engine, exported as a tree (`<sha>:<folder>`),
    which git archive stamps with the current time unless the export restamps it."""
    done = repro("--work", str(tmp_path / "w"), "--json", cwd=ROOT, matrix=None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document: dict[str, Any] = json.loads(done.stdout)
    assert document["identical"] is True
    compared = document["comparisons"][0]
    assert compared["layout"] == "kit-folder"  # both tarballs, BUILDINFO, sums, log, modes
    assert "-j1, umask 022" in done.stderr and "umask 077" in done.stderr
    assert "TZ=Pacific/Kiritimati" in done.stderr
    first = next((tmp_path / "w" / "a" / "dist").iterdir())
    against = repro("--against", os.path.relpath(first, ROOT), "--work",
                    str(tmp_path / "again"), cwd=ROOT, matrix=None)
    assert against.returncode == 0, against.stdout[-3000:] + against.stderr[-3000:]
    assert "reproducible: identical bytes" in against.stdout


def test_a_bad_matrix_or_kit_is_said_before_any_build(tmp_path: Path) -> None:
    nowhere = repro(cwd=tmp_path, matrix=None)  # no ./matrix.toml here
    assert nowhere.returncode == 2, nowhere.stderr
    assert "matrix file not found: matrix.toml" in nowhere.stderr
    unknown = repro(cwd=tmp_path, kit="no-such-kit")
    assert unknown.returncode == 2, unknown.stderr
    assert "no-such-kit" in unknown.stderr
    for done in (nowhere, unknown):
        assert "build first" not in done.stderr and "Traceback" not in done.stderr


def test_a_build_that_embeds_home_is_named(example_repo: tuple[Path, str],
                                           tmp_path: Path) -> None:
    repo = tmp_path / "leaky"
    shutil.copytree(example_repo[0], repo)
    cmake = repo / "CMakeLists.txt"
    cmake.write_text(cmake.read_text().replace(
        'set(NINFER_BUILD_INFO "local build"', 'set(NINFER_BUILD_INFO "built in $ENV{HOME}"', 1))
    git("commit", "-qam", "embed HOME", cwd=repo)
    # A --source relative to where repro runs: each build runs in a folder of its own, so repro
    # must hand it on as an absolute path.
    done = repro("--source", os.path.relpath(repo, ROOT), "--work", str(tmp_path / "w"),
                 "--json", cwd=ROOT)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    document: dict[str, Any] = json.loads(done.stdout)
    assert document["identical"] is False
    plain = document["comparisons"][0]
    members = {member["path"]: member for member in plain["members"]}
    binary = next(path for path in members if path.endswith("kit/bin/ninfer"))
    causes = members[binary]["causes"]
    shown = json.dumps(causes)
    assert str(tmp_path / "w" / "a-home") in shown and str(tmp_path / "w" / "b-home") in shown
    assert any(cause["kind"] in ("embedded-path", "string") for cause in causes), causes
