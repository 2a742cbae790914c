"""scripts/install-cuda-wheels.sh, which puts nvcc at /usr/local/cuda on a CI runner (.ci/run on
ubuntu-latest): its wheel set is the test toolchain image's own pin list; .ci/lanes.py; and how
the suite spreads over processes (noxfile.SPREAD, conftest's scheduler, roots' shared /proc)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools import ROOT, missing

SCRIPT = ROOT / "scripts" / "install-cuda-wheels.sh"
PINS = ROOT / "dockerfiles" / "context" / "cuda-wheels"
DOCKERFILE = ROOT / "dockerfiles" / "toolchain-wheels-debian.Dockerfile"


def _dockerfile_pins(version: str) -> list[str]:
    assert "COPY context/cuda-wheels/" in DOCKERFILE.read_text(encoding="utf-8")
    text = (PINS / f"{version}.txt").read_text(encoding="utf-8")
    return re.findall(r"(?m)^([A-Za-z0-9_.-]+==\S+ --hash=sha256:[0-9a-f]{64})$", text)


@pytest.mark.parametrize("version", ["13.0", "13.1"])
def test_the_host_toolkit_installs_the_images_pinned_wheels(version: str) -> None:
    done = subprocess.run(["bash", str(SCRIPT), version, "--requirements"], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    pins = _dockerfile_pins(version)
    assert len(pins) == 10 and any(pin.startswith("nvidia-cuda-nvcc==") for pin in pins)
    assert done.stdout.splitlines() == pins


def test_an_unknown_version_is_refused() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "12.9", "--requirements"], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 2 and "unknown argument: 12.9" in done.stderr
    assert done.stdout == ""


LANES = ROOT / ".ci" / "lanes.py"
# Stand-in sessions for .ci/lanes.py: what `nox -s NAME` would print and exit with, by name.
SESSION = ("case \"$1\" in "
           "tests-3.11) sleep 0.6; echo main-start; sleep 0.6; echo main-end;; "
           "lint) echo lint-line-1; sleep 0.2; echo lint-line-2;; "
           "broken) echo broken-says-why; exit 3;; "
           "*) echo \"$1-ran\";; esac")


def _lanes(tmp_path: Path, *sessions: str, started: float | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os
    import shlex
    import sys
    import time

    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("GITHUB_", "CI_RUN_"))}
    environ["CI_RUN_STARTED"] = str(started if started is not None else time.time())
    return subprocess.run(
        [sys.executable, str(LANES), "--oldest", "3.11", "--logs", str(tmp_path / "logs"),
         "--command",
         f"bash -c {shlex.quote(SESSION)} session", *sessions],
        capture_output=True, text=True, check=False, timeout=60, env={**environ, **(env or {})})


def test_ci_lanes_print_each_side_session_whole_after_the_main_lane(tmp_path: Path) -> None:
    """tests-3.11 streams in the main lane; lint and tests-3.13 run beside it, and each one's
    output comes whole, after the main lane's, never between its lines."""
    done = _lanes(tmp_path, "lint", "tests-3.11", "tests-3.13")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.index("main-end") < out.index("lint-line-1") < out.index("lint-line-2") \
        < out.index("tests-3.13-ran")
    assert re.search(r"(?m)^\[side lane\] lint passed in 0m \d\ds; its output follows", out), out
    table = out[out.index("CI times"):]
    assert "| tests-3.11 | main | passed |" in table and "| lint | side | passed |" in table
    assert "| tests-3.13 | side | passed |" in table and "**total**" in table
    assert "warning" not in out


def test_ci_lanes_fail_when_a_side_session_fails_and_warn_past_45_minutes(
        tmp_path: Path) -> None:
    import time

    done = _lanes(tmp_path, "tests-3.11", "broken", started=time.time() - 46 * 60)
    assert done.returncode == 1
    assert "broken-says-why" in done.stdout and "| broken | side | FAILED |" in done.stdout
    assert "[side lane] broken FAILED (exit 3)" in done.stdout
    assert re.search(r"(?m)^warning: CI took 46m \d\ds, past the 45-minute warning line",
                     done.stdout), done.stdout
    summary = tmp_path / "summary.md"
    github = _lanes(tmp_path, "tests-3.11", "lint", started=time.time() - 46 * 60,
                    env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert github.returncode == 0
    assert "::warning title=CI budget::CI took 46m" in github.stdout
    assert "::group::lint (side lane)" in github.stdout and "::endgroup::" in github.stdout
    assert "| lint | side | passed |" in summary.read_text(encoding="utf-8")


def test_ci_lanes_run_one_named_session_alone_in_the_main_lane(tmp_path: Path) -> None:
    done = _lanes(tmp_path, "tests-3.12")
    assert done.returncode == 0 and "tests-3.12-ran" in done.stdout
    assert "side" not in done.stdout and "| tests-3.12 | main | passed |" in done.stdout


def _noxfile_spread() -> list[str]:
    """noxfile.SPREAD, read as Python reads it (the tests' environment has no nox to import)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "SPREAD":
            return list(ast.literal_eval(node.value))
    raise AssertionError("noxfile.py has no SPREAD")


def test_the_suite_spreads_its_modules_keeping_those_that_share_a_fixture_together(
        tmp_path: Path) -> None:
    """noxfile.SPREAD with this suite's conftest: every module's tests on one process, the
    modules of conftest.SAME_PROCESS on the same one, the slow modules handed out first,
    conftest.LONGEST_FIRST's ahead of the others, and example_repo one repository for the whole
    run (its path is in every kit built from it, and kits of different processes are compared)."""
    tests = tmp_path / "tests"
    tests.mkdir()
    stub = ("import os, time, pytest\n{mark}\n@pytest.mark.parametrize('i', range(4))\n"
            "def test_it(i, example_repo):\n    time.sleep(0.2)\n"
            "    print('ran', os.environ['PYTEST_XDIST_WORKER'], __name__, *example_repo)\n")
    for name, mark in (("test_docker", ""), ("test_portable", ""), ("test_a_quick", ""),
                       ("test_z_slow", "pytestmark = pytest.mark.slow"),
                       ("test_repro", "pytestmark = pytest.mark.slow")):
        (tests / f"{name}.py").write_text(stub.format(mark=mark), encoding="utf-8")
    def pytest(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p",
                               "no:cacheprovider", "-o", "markers=slow", *args, str(tests)],
                              capture_output=True, text=True, check=False, timeout=300,
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  (str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")))})

    done = pytest(*_noxfile_spread(), "--maxprocesses", "2", "-rA")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = re.findall(r"^ran (gw\d+) (test_\w+) (\S+) ([0-9a-f]{40})$", done.stdout,
                     re.MULTILINE)
    assert len(ran) == 20, done.stdout[-3000:]
    workers: dict[str, set[str]] = {}
    for worker, module, _, _ in ran:
        workers.setdefault(module, set()).add(worker)
    assert all(len(on) == 1 for on in workers.values()), workers
    assert workers["test_docker"] == workers["test_portable"]
    assert len({worker for worker, *_ in ran}) == 2, ran
    assert len({(repo, head) for _, _, repo, head in ran}) == 1, ran
    listed = pytest("--collect-only", "-q").stdout.splitlines()
    assert [line.split("::")[0] for line in listed[:8]] == ["tests/test_repro.py"] * 4 + [
        "tests/test_z_slow.py"] * 4, listed  # LONGEST_FIRST's lead the slow modules


def test_proc_stays_mounted_in_a_shared_root_until_its_last_user_leaves(tmp_path: Path) -> None:
    """roots.proc_in between test processes: one leaving while another still runs in the root
    leaves /proc there; the last to leave unmounts it."""
    from roots import proc_in

    if os.geteuid() != 0:
        missing("root, to mount /proc in a root")
    root = tmp_path / "root"
    root.mkdir()
    user = ("import sys; from pathlib import Path; from roots import proc_in\n"
            "with proc_in([Path(sys.argv[1])]):\n    print('in', flush=True); sys.stdin.read()\n")
    with proc_in([root]):
        other = subprocess.Popen([sys.executable, "-c", user, str(root)], text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  (str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")))})
        try:
            assert other.stdout is not None and other.stdout.readline() == "in\n"
        except BaseException:
            other.kill()
            raise
    try:
        assert (root / "proc" / "self").exists()  # the other process is still in the root
    finally:
        assert other.communicate(timeout=60) == ("", None) and other.returncode == 0
    assert not (root / "proc" / "self").exists()
