"""`ninfer-kits repro`: the example kit built twice under different conditions (folder and its
depth, job count, TZ, LANG, umask, HOME, user name, the time of day) is
byte-identical, both flavours; `--against` compares one fresh build with a kit folder; and an
upstream that embeds something of its build environment (HOME, through a CMake cache default)
is reported as not reproducible, naming the member, the section and both values; SIGTERM to
repro alone ends its build the way the build ends on SIGTERM."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from source_archive import archive_for
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


@dataclass(frozen=True)
class Reproduced:
    """What the module's full repro runs left: the example's, as README shows it; the upstream's
    that embeds HOME; and two --against runs with a --record, as the rebuild workflow's
    reproduce leg runs them: against a kit that differs (the leaky upstream's first kit: the
    tiny engine rebuilt without the leak cannot match it) and with a rebuild that fails."""

    example: subprocess.CompletedProcess[str]
    example_place: Path  # its --work is example_place/w
    leaky: subprocess.CompletedProcess[str]
    leaky_place: Path  # its --work is leaky_place/w
    differs: subprocess.CompletedProcess[str] | None  # None when the leaky repro built nothing
    failing: subprocess.CompletedProcess[str]
    records: Path  # differs.json and failing.json: the --against runs' records


def _leaky_repro(tiny_repo: Path, place: Path) -> subprocess.CompletedProcess[str]:
    """The tiny engine (what repro reports is the claim, not the compile), its build info made
    of $HOME."""
    repo = place / "leaky"
    shutil.copytree(tiny_repo, repo)
    cmake = repo / "CMakeLists.txt"
    cmake.write_text(cmake.read_text().replace(
        'set(NINFER_BUILD_INFO "local build"', 'set(NINFER_BUILD_INFO "built in $ENV{HOME}"', 1))
    git("commit", "-qam", "embed HOME", cwd=repo)
    # A --source relative to where repro runs: each build runs in a folder of its own, so repro
    # must hand it on as an absolute path.
    return repro("--source", os.path.relpath(repo, ROOT), "--work", str(place / "w"), "--json",
                 cwd=ROOT)


def _against(folder: Path, place: Path, name: str, *args: str
             ) -> subprocess.CompletedProcess[str]:
    return repro("--against", os.path.relpath(folder, ROOT), "--work", str(place / name),
                 "--record", str(place / f"{name}.json"), "--run", "a test run", *args,
                 cwd=ROOT, matrix=None)


def _broken_copy(example_repo: Path, place: Path) -> Path:
    repo = place / "broken"
    shutil.copytree(example_repo, repo)
    cmake = repo / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() + 'message(FATAL_ERROR "this revision does not build")\n')
    git("commit", "-qam", "does not build", cwd=repo)
    return repo


@pytest.fixture(scope="module")
def reproduced(example_repo: tuple[Path, str], tiny_repo: tuple[Path, str],
               tmp_path_factory: pytest.TempPathFactory) -> Reproduced:
    """The module's repro runs (two cold builds of the example, three of the tiny engine), two
    at a time
    (repro's first build runs at -j1, so one alone leaves a core idle; running beside another
    build changes none of the conditions each repro sets and compares): the example's repro
    beside the leaky upstream's, then the --against runs, which need their kits. Every build
    keeps its own folder, HOME and caches whichever repro runs it."""
    example_place = tmp_path_factory.mktemp("repro-example")
    leaky_place = tmp_path_factory.mktemp("repro-leaky")
    records = tmp_path_factory.mktemp("repro-against")
    with ThreadPoolExecutor(2) as pool:
        example = pool.submit(repro, "--work", str(example_place / "w"), "--json", cwd=ROOT,
                              matrix=None)
        leaky = pool.submit(_leaky_repro, tiny_repo[0], leaky_place)
        done, leaked = example.result(), leaky.result()
        built = leaky_place / "w" / "a" / "dist"
        theirs = next(built.iterdir()) if built.is_dir() else None
        # (the tiny engine without the leak: its rebuild cannot match the leaky kit either)
        # (--revision: without it, repro builds the revision the kit records)
        differs = pool.submit(_against, theirs, records, "differs", "--source",
                              str(tiny_repo[0]), "--revision", tiny_repo[1]) if theirs else None
        broken = _broken_copy(example_repo[0], records)
        ours = example_place / "w" / "a" / "dist"
        kit = next(ours.iterdir()) if ours.is_dir() else theirs or records
        failing = _against(kit, records, "failing", "--source", str(broken), "--revision",
                           git("rev-parse", "HEAD", cwd=broken))
        return Reproduced(done, example_place, leaked, leaky_place,
                          differs.result() if differs else None, failing, records)


def test_the_example_kit_is_reproducible(reproduced: Reproduced) -> None:
    """As README shows it, from the project folder without --matrix or --source: the example
    engine is then this repository's examples/engine, exported as a tree (`<sha>:<folder>`),
    which git archive stamps with the current time unless the export restamps it."""
    done = reproduced.example
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document: dict[str, Any] = json.loads(done.stdout)
    assert document["identical"] is True
    compared = document["comparisons"][0]
    assert compared["layout"] == "kit-folder"  # both tarballs, BUILDINFO, sums, log, modes
    assert "-j1, umask 022" in done.stderr and "umask 077" in done.stderr
    assert "TZ=Pacific/Kiritimati" in done.stderr


def test_against_a_kit_that_differs_says_so_and_records_it(reproduced: Reproduced) -> None:
    """The reproduce leg's command, against a kit its rebuild cannot match: exit status 1 (the
    leg turns red), NOT reproducible, and a record that says `differs`, naming what differs
    and the tarballs it compared (the kit folder's, not the rebuild's). The identical case is
    the rebuild workflow's own first run (tests/test_rebuild_act.py)."""
    against = reproduced.differs
    assert against is not None, reproduced.leaky.stderr[-3000:]
    assert against.returncode == 1, against.stdout[-3000:] + against.stderr[-3000:]
    assert "NOT reproducible: the builds differ" in against.stdout
    folder = next((reproduced.leaky_place / "w" / "a" / "dist").iterdir())
    written = json.loads((reproduced.records / "differs.json").read_text())
    assert (written["result"], written["run"], written["tag"]) == \
        ("differs", "a test run", folder.name)
    assert any("kit/bin/ninfer" in line for line in written["differences"]), written
    # the drift: another upstream commit (--revision), built with the same compilers
    assert written["summary"].startswith("the upstream revision differs: the kit was built "
                                         "from"), written
    assert written["differences"][0].startswith("drift: the upstream revision differs"), written
    assert written["differences"][1].startswith(
        "drift: both built with the build machine's own compilers, of the same versions"), written
    assert written["compared"] == {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
                                   for path in folder.glob("*.tar.gz")}


def test_against_with_a_rebuild_that_fails_records_the_failure(reproduced: Reproduced) -> None:
    failing = reproduced.failing
    assert failing.returncode == 1, failing.stdout[-3000:] + failing.stderr[-3000:]
    assert "this revision does not build" in failing.stderr
    assert "Traceback" not in failing.stderr
    written = json.loads((reproduced.records / "failing.json").read_text())
    assert written["result"] == "failed", written
    assert "the second build of example failed" in written["summary"], written


def test_a_bad_matrix_or_kit_is_said_before_any_build(tmp_path: Path) -> None:
    nowhere = repro(cwd=tmp_path, matrix=None)  # no ./matrix.toml here
    assert nowhere.returncode == 2, nowhere.stderr
    assert "matrix file not found: matrix.toml" in nowhere.stderr
    unknown = repro(cwd=tmp_path, kit="no-such-kit")
    assert unknown.returncode == 2, unknown.stderr
    assert "no-such-kit" in unknown.stderr
    for done in (nowhere, unknown):
        assert "build first" not in done.stderr and "Traceback" not in done.stderr


def test_a_build_that_embeds_home_is_named(reproduced: Reproduced) -> None:
    done, place = reproduced.leaky, reproduced.leaky_place
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    document: dict[str, Any] = json.loads(done.stdout)
    assert document["identical"] is False
    plain = document["comparisons"][0]
    members = {member["path"]: member for member in plain["members"]}
    binary = next(path for path in members if path.endswith("kit/bin/ninfer"))
    causes = members[binary]["causes"]
    shown = json.dumps(causes)
    assert str(place / "w" / "a-home") in shown and str(place / "w" / "b-home") in shown
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


def test_against_a_local_release_fetched_from_a_checkout_made_dirty(
        tiny_repo: tuple[Path, str], tmp_path: Path) -> None:
    """Issue 39's walk on the tiny engine (the claim is what happens around the compile): a
    build in a clean pipeline checkout, `publish --to local`, a fetch of that release; the
    checkout is still clean (the local publish recorded nothing in its ledger). Then a file of
    the maintainer's own makes it dirty, and `repro --against` the fetched copy is
    reproducible (exit 0): the rebuild's `…-dirty` commit, in its BUILDINFO.txt run keys and
    in its provenance, is reported, never a difference."""
    project = tmp_path / "pipeline"
    (project / "releases").mkdir(parents=True)
    for name in ("matrix.toml", "allowed_signers", ".gitignore", "releases/index.json",
                 "releases/index.html"):
        shutil.copyfile(ROOT / name, project / name)
    git("init", "-q", "-b", "main", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "pipeline", cwd=project)
    env = {**os.environ, "NINFER_KITS_CACHE": str(tmp_path / "cache")}
    env.pop("NINFER_KITS_MATRIX", None)
    fetched = tmp_path / "fetched"
    said = {}
    with contextlib.ExitStack() as served:  # the archive, served while the loop runs
        for command in (("build", "example", "--source", str(tiny_repo[0])),
                        ("publish", "example", "--to", "local"),
                        ("fetch", "example-v0.3.0-linux-sm86", "--from", "published",
                         "--insecure-no-signature", "--dest", str(fetched))):
            if command[0] == "publish":  # the owed Debian sources, from an archive served here
                table = served.enter_context(archive_for(
                    project / "dist/example-v0.3.0-linux-sm86", tmp_path / "sources"))
                with (project / "matrix.toml").open("a") as matrix:
                    matrix.write(table)
                git("commit", "-q", "-am", "the sources' mirror", cwd=project)
            done = subprocess.run([sys.executable, "-m", "ninfer_kits", *command], cwd=project,
                                  env=env, capture_output=True, text=True, check=False)
            # (an unsigned release, taken only when told to; fetch's status is then verify's, 4
            # on a machine without a GPU)
            assert done.returncode in (0, 4), done.stderr[-3000:]
            said[command[0]] = done.stdout
    assert "  ledger  not recorded: a release only in a local folder" in said["publish"]
    assert git("status", "--porcelain", "--untracked-files=all", cwd=project) == ""
    (project / "notes.txt").write_text("a maintainer's own file\n")

    again = repro("--source", str(tiny_repo[0]), "--against", str(fetched), "--work",
                  str(tmp_path / "w"), cwd=project, matrix=project / "matrix.toml")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.endswith("reproducible: the tarballs are identical bytes\n")
    # no --revision: the rebuild built the commit the fetched kit records; a local builder's
    # kit ran in no image, and repro says nothing of one
    assert f"repro: building {tiny_repo[1]}, the revision {fetched}/BUILDINFO.txt records" in \
        again.stderr, again.stderr[-3000:]
    assert "toolchain image" not in again.stderr
    assert "run.pipeline_changes: notes.txt" in again.stdout
    # The kit folder published (with the provenance, which fetch does not take) against the
    # rebuild: the provenance's commit differs only where expected.
    rebuilt = next((tmp_path / "w" / "b" / "deeper" / "build-folder" / "dist").iterdir())
    published = project / "published" / rebuilt.name
    diff = subprocess.run([sys.executable, "-m", "ninfer_kits", "diff", str(published),
                           str(rebuilt)], capture_output=True, text=True, check=False, env=env)
    assert diff.returncode == 0, diff.stdout[-3000:]
    head = git("rev-parse", "HEAD", cwd=project)
    assert f'annotations.revision: "{head}-dirty"' in diff.stdout, diff.stdout[-3000:]
