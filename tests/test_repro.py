"""`ninfer-kits repro`: the example kit built twice under different conditions (folder and its
depth, job count, TZ, LANG, umask, HOME, user name, the time of day) is
byte-identical, both flavours; `--against` compares one fresh build with a kit folder; and an
upstream that embeds something of its build environment (HOME, through a CMake cache default)
is reported as not reproducible, naming the member, the section and both values; SIGTERM to
repro alone ends its build the way the build ends on SIGTERM."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from test_build import processes_of

from tools import ROOT, git, needs_libcurl_headers, tool  # git: the tests' own identity

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
    # as the rebuild workflow's reproduce job runs it: its record is what publish publishes
    record = tmp_path / "REPRODUCTION.json"
    against = repro("--against", os.path.relpath(first, ROOT), "--work",
                    str(tmp_path / "again"), "--record", str(record), "--run", "a test run",
                    cwd=ROOT, matrix=None)
    assert against.returncode == 0, against.stdout[-3000:] + against.stderr[-3000:]
    assert "reproducible: identical bytes" in against.stdout
    written = json.loads(record.read_text())
    assert (written["result"], written["run"], written["tag"], written["differences"]) == \
        ("identical", "a test run", first.name, [])
    assert written["compared"] == {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
                                   for path in first.glob("*.tar.gz")}


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


def test_sigterm_to_repro_alone_ends_its_build_cleanly(example_repo: tuple[Path, str],
                                                       tmp_path: Path) -> None:
    """SIGTERM (a cancelled CI job, `timeout`) sent to the repro process alone while its first
    build runs CMake: repro hands it on to the build and waits, so the build's own cleanup runs
    (its children ended, build.log written, its lock emptied and freed), no process of it is
    left, and repro exits 143 as a build would."""
    tool("ninja")
    needs_libcurl_headers()
    work = tmp_path / "w"
    command = [sys.executable, "-m", "ninfer_kits", "repro", "example", "--matrix",
               str(ROOT / "matrix.toml"), "--source", str(example_repo[0]), "--work", str(work)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path, start_new_session=True)
    first = work / "a" / "cache" / "work"
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if line.startswith("==> compile"):
                break
        deadline = time.monotonic() + 180
        while not any("/cmake -S " in found for found in processes_of(first)):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "CMake never started"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
        left = processes_of(work)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for found in processes_of(work):  # this test's own, left by a failure
            os.kill(int(found.partition(":")[0]), signal.SIGKILL)
    assert process.returncode == 143, stderr[-3000:]
    assert stderr.rstrip().endswith("ninfer-kits: terminated (SIGTERM)"), stderr[-3000:]
    assert stderr.count("ninfer-kits: terminated (SIGTERM)") == 2, stderr[-3000:]  # build's too
    assert left == []
    locks = sorted(work.rglob("*.lock"))
    assert first / "example.lock" in locks
    for lock in locks:
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: a new build takes it at once
        finally:
            os.close(fd)
    assert (first / "example.lock").read_text() == ""  # emptied by the build's own cleanup
    log = (first / "example" / "build.log").read_text()
    assert "/cmake -S " in log, log
    assert not (work / "b").exists()  # the second build never started
