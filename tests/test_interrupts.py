"""How a build ends when it is interrupted (Ctrl-C, SIGTERM). Its long children
(ninfer_kits.host.children) run in a session of their own that ends with the build, with
everything they started, and their output is read to the last line; an interrupt after the
final rename says the kit is in place. Real processes (sh, sleep, Python), real signals, a real
kit folder. The whole build, interrupted, is in test_build.py."""

from __future__ import annotations

import fcntl
import io
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, KeysView, Mapping
from pathlib import Path

import pytest

from ninfer_kits.host import children
from ninfer_kits.host.children import probe
from ninfer_kits.kit import kitdir
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import load_matrix
from ninfer_kits.pipeline.builders import LocalBuilder, run_logged
from ninfer_kits.pipeline.source import fetch_source
from ninfer_kits.pipeline.stage_functions import publish_to_dist
from ninfer_kits.pipeline.state import BuildContext, BuildRequest, Staged
from test_publish_support import KIT, TAG, compile_program, make_kit
from test_source import make_upstream

from tools import ROOT


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat.rpartition(b")")[2].split()[0] not in (b"Z", b"X")


def wait_for(path: Path, seconds: float = 20) -> str:
    deadline = time.monotonic() + seconds
    while not (path.is_file() and path.read_text().endswith("\n")):
        assert time.monotonic() < deadline, f"{path} never came"
        time.sleep(0.02)
    return path.read_text()


def ctrl_c_once(pid_file: Path) -> threading.Thread:
    """A thread that sends this process Ctrl-C (SIGINT) once `pid_file` says the child runs."""

    def interrupt() -> None:
        wait_for(pid_file)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)

    interrupter = threading.Thread(target=interrupt)
    interrupter.start()
    return interrupter


# A tree as a build's: a job in a process group of its own (as Ninja starts each one, so that a
# terminal's Ctrl-C does not reach it), and one that ignores SIGTERM (SIGKILL must end it).
TREE = f"""
{sys.executable} -c 'import os; os.setpgid(0, 0); os.execvp("sleep", ["sleep", "300"])' &
echo "job $!" > "$1"
(trap '' TERM; exec sleep 301) & echo "stubborn $!" >> "$1"
printf 'last line\\r\\nunfinished'
sleep 302
"""


def test_ending_the_session_ends_every_process_in_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    process = children.start(["sh", "-c", TREE, "tree", str(pid_file)])
    assert process.stdout is not None
    with process.stdout:
        lines: list[str] = []
        output = children.OutputLines(process.stdout, lines.append)
        try:
            deadline = time.monotonic() + 20
            while not pid_file.is_file() or pid_file.read_text().count("\n") < 2:
                assert time.monotonic() < deadline, "the tree never started"
                time.sleep(0.02)
            pids = {name: int(pid) for name, pid in
                    (line.split() for line in pid_file.read_text().splitlines())}
            while os.getpgid(pids["job"]) != pids["job"]:  # the job has made its group
                assert time.monotonic() < deadline
                time.sleep(0.02)
        except BaseException:
            children.end_session(process, grace=0)
            raise
        assert os.getpgid(pids["job"]) == pids["job"] != process.pid  # a group of its own
        assert os.getsid(pids["job"]) == process.pid  # in the session all the same
        assert set(children.session_members(process.pid)) >= {process.pid, *pids.values()}
        started = time.monotonic()
        children.end_session(process, grace=0.5)
        took = time.monotonic() - started
        # What the session wrote before it ended is still read: \r\n as \n, and the last line
        # that it never finished.
        output.drain()
        assert lines == ["last line\n", "unfinished"]
    assert process.returncode == -signal.SIGTERM
    assert children.session_members(process.pid) == []
    assert not any(alive(pid) for pid in pids.values())
    assert 0.5 <= took < 5, took  # the stubborn one waited out the grace, then got SIGKILL


def test_an_interrupt_while_reading_ends_the_session_and_keeps_the_log(tmp_path: Path) -> None:
    """Ctrl-C in the middle of run_logged: every process of the command's session is gone and
    the log holds what it wrote, before the interrupt goes on."""
    pid_file, log = tmp_path / "pid", tmp_path / "build.log"
    script = f"echo '[1/2] first'; sleep 300 & echo $! > {pid_file}; echo waiting; wait"

    interrupter = ctrl_c_once(pid_file)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_logged(["sh", "-c", script], env=dict(os.environ), log=log,
                       reporter=Reporter(io.StringIO(), mode="plain"), label="compiling x")
    finally:
        interrupter.join()
    assert not alive(int(pid_file.read_text()))
    assert log.read_text() == "[1/2] first\nwaiting\n"


def test_a_second_signal_waits_until_the_cleanup_is_done() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), children.deferred_signals():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        done.append("cleanup")
    assert done == ["cleanup"]


def test_the_session_leader_dies_with_ninfer_kits(tmp_path: Path) -> None:
    """SIGKILL leaves ninfer-kits no say: the kernel's parent-death signal ends its child."""
    code = ("import sys, time; from ninfer_kits.host import children; "
            "p = children.start(['sleep', '300']); print(p.pid, flush=True); time.sleep(300)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert alive(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while alive(child):
        assert time.monotonic() < deadline, "the child outlived its parent"
        time.sleep(0.02)


def test_an_interrupt_after_the_final_rename_says_the_kit_is_in_place(tmp_path: Path) -> None:
    """Ctrl-C while the work folder is removed, after the kit folder was renamed into dist/:
    the interrupt goes on, saying where the complete kit is."""
    dist = tmp_path / "dist"
    staging = dist / f".staging-{KIT}"
    make_kit(dist, compile_program(tmp_path)).path.rename(staging)
    workspace = tmp_path / "work" / KIT
    for folder in range(100):  # long enough to remove that the interrupt lands in it
        (workspace / str(folder)).mkdir(parents=True)
        for name in range(100):
            (workspace / str(folder) / str(name)).touch()
    request = BuildRequest(kit=load_matrix(ROOT / "matrix.toml").kit(KIT),
                           builder=LocalBuilder(), project=ROOT, dist_dir=dist,
                           cache_dir=tmp_path / "cache", work_dir=workspace.parent)
    build = BuildContext(request=request, workspace=workspace, staging=staging,
                         started=time.monotonic(), reporter=Reporter(io.StringIO(), mode="plain"))

    def interrupt_once_in_place() -> None:
        deadline = time.monotonic() + 60
        while not (dist / TAG).is_dir():
            if time.monotonic() > deadline:
                return  # never put in place: the assertions below say so
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    interrupt: KeyboardInterrupt | None = None
    interrupter = threading.Thread(target=interrupt_once_in_place)
    interrupter.start()
    try:
        try:
            publish_to_dist(build, Staged(staging), TAG)
        finally:
            interrupter.join()
    except KeyboardInterrupt as caught:
        interrupt = caught
    assert interrupt is not None, "the kit was never put in place"
    assert workspace.exists(), "the interrupt came after the work folder was removed"
    assert interrupt.__notes__ == [
        f"the kit was already in place, complete: {dist / TAG}"]
    assert kitdir.read_kit_dir(dist / TAG).kit == KIT


def test_an_interrupted_probe_does_not_wait_for_what_left_its_group(tmp_path: Path) -> None:
    """Ctrl-C while a probe runs: its group is killed, and a process that left the group and
    holds its output pipe open does not keep the build from ending."""
    pid_file = tmp_path / "pid"
    script = f"setsid sleep 300 & echo $! > {pid_file}; sleep 300"

    interrupter = ctrl_c_once(pid_file)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            probe(["sh", "-c", script])
        took = time.monotonic() - started
    finally:
        interrupter.join()
        escaped = int(wait_for(pid_file))
        os.kill(escaped, signal.SIGKILL)  # this test's own
    assert took < 10, took


# A git remote helper (git runs git-remote-<scheme> for a `<scheme>://` URL) that never answers,
# with a child of its own, as a slow network fetch or an ssh under git would be.
SLOW_HELPER = """#!/bin/sh
sleep 300 &
echo "$$ $!" > {pids}
wait
"""


def test_an_interrupted_fetch_ends_git_and_every_helper(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while git fetches through a remote helper: git, the helper and what the helper
    started are all gone before the interrupt goes on, and the mirror's lock is free."""
    helpers, pid_file = tmp_path / "bin", tmp_path / "pids"
    helpers.mkdir()
    helper = helpers / "git-remote-slow"
    helper.write_text(SLOW_HELPER.format(pids=pid_file))
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{helpers}{os.pathsep}{os.environ['PATH']}")

    interrupter = ctrl_c_once(pid_file)
    try:
        with pytest.raises(KeyboardInterrupt):
            fetch_source(make_upstream("slow://nowhere"), cache_dir=tmp_path / "cache",
                         dest=tmp_path / "source")
    finally:
        interrupter.join()
        pids = [int(pid) for pid in wait_for(pid_file).split()]
        left = [pid for pid in pids if alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)  # this test's own
    assert left == []
    for lock in (tmp_path / "cache" / "git").glob("*.lock"):
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert list((tmp_path / "cache" / "git").glob("*.lock"))


def test_an_interrupt_never_loses_a_line_already_read(tmp_path: Path) -> None:
    """Interrupts at arbitrary moments of a child's fast output: the log holds every line the
    child wrote up to its end, in order, with no gap (a chunk read from the pipe when the
    signal came was once dropped: the log of an interrupted build was empty)."""
    counter = ("import itertools, sys\nprint(0, flush=True)\nopen(sys.argv[1], 'w').close()\n"
               "for i in itertools.count(1): print(i, flush=True)")
    for attempt in range(20):
        log, started = tmp_path / f"{attempt}.log", tmp_path / f"{attempt}.started"

        def interrupt(delay: float = (attempt % 10) * 0.01, started: Path = started) -> None:
            deadline = time.monotonic() + 60
            while not started.exists() and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(delay)
            os.kill(os.getpid(), signal.SIGINT)

        interrupter = threading.Thread(target=interrupt)
        interrupter.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                run_logged([sys.executable, "-c", counter, str(started)], env=dict(os.environ),
                           log=log, reporter=Reporter(io.StringIO(), mode="plain"),
                           label="counting")
        finally:
            interrupter.join()
        lines = log.read_text().splitlines()
        assert lines, f"attempt {attempt}: an empty log (line 0 was written before the interrupt)"
        gap = next((number for number, line in enumerate(lines) if line != str(number)), None)
        assert gap is None, f"attempt {attempt}: line {gap} of the log is {lines[gap]!r}"


class _InterruptingEnvironment(Mapping[str, str]):
    """os.environ, sending this process Ctrl-C when it is read: while `children.start` starts
    its child (Popen copies it), at the moment an interrupt once lost the child."""

    def __getitem__(self, key: str) -> str:
        return os.environ[key]

    def __iter__(self) -> Iterator[str]:
        return iter(os.environ)

    def __len__(self) -> int:
        return len(os.environ)

    def keys(self) -> KeysView[str]:
        os.kill(os.getpid(), signal.SIGINT)
        return os.environ.keys()


def _sleepers(seconds: str) -> list[int]:
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()
            and alive(int(entry.name))
            and _cmdline(entry.name) == ["sleep", seconds]]


def _cmdline(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


def test_an_interrupt_while_a_child_starts_ends_it_or_hands_it_to_a_caller_holding_them() -> None:
    """Nobody would hold a child started as the interrupt came: `start` ends it before the
    interrupt goes on; a caller holding interrupts itself gets the child, then the interrupt."""
    seconds = f"{300 + secrets.randbelow(10**6) / 10**6:.6f}"
    with pytest.raises(KeyboardInterrupt):
        children.start(["sleep", seconds], env=_InterruptingEnvironment())
    assert _sleepers(seconds) == []
    process = None
    with pytest.raises(KeyboardInterrupt), children.deferred_signals():
        process = children.start(["sleep", seconds], env=_InterruptingEnvironment())
        assert process.poll() is None
    assert process is not None and _sleepers(seconds) == [process.pid]
    children.end_session(process, grace=0)
    assert _sleepers(seconds) == []
