"""Long-running children of a build (the recipe, and with it CMake, Ninja, nvcc, the compilers)
that end with the build, however it ends.

A child is started as the leader of a session of its own. Everything it starts stays in that
session, also what Ninja puts in a process group of its own per job (so that a terminal's Ctrl-C
does not reach it), so the session names the whole tree: `end_session` sends SIGTERM to every
process in it, waits GRACE seconds, sends SIGKILL to what is left, and returns once none is
left. The build calls it on the way out, interrupted (Ctrl-C, SIGTERM: errors.Terminated) or
not, before the log is closed and the work folder's lock is released. A session of its own also
means a terminal's Ctrl-C reaches only ninfer-kits, which then ends the session itself: Ctrl-C
and a signal sent to ninfer-kits alone (`kill PID`, `timeout`, a cancelled CI job) end the build
the same way.

When ninfer-kits is killed outright (SIGKILL: nothing of it runs any more), Linux's parent-death
signal (prctl PR_SET_PDEATHSIG) sends SIGKILL to the session's leader; the processes under it
then end at their next write to the output pipe that nobody reads any more (SIGPIPE), the
compile that runs at that moment at the latest when it is done.

The same holds for git (pipeline.source: its remote helpers, ssh, the `git archive` pipe); a
child that cleans up on a signal itself (a `ninfer-kits build` under `repro`) is handed the
interrupt and waited for (`wait_handing_on`); and work in the build's background thread (the
smoke test's container) registers how to stop it (`stoppable`), which `background` does on an
interrupt before it waits for that thread.

Quick questions to outside tools (`nvcc --version`, `nvidia-smi`, `git status`: `probe`) run
the same way, with a limit: one that does not answer (a driver stuck in D state makes
`nvidia-smi` hang for minutes) is killed with its whole session, and its pipes are waited for
only PROBE_KILL_WAIT seconds, so that a process stuck in the kernel or one that left the session
holding the pipes cannot hold up the build or `verify`.
"""

from __future__ import annotations

import codecs
import ctypes
import io
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, Final, TypeAlias

from ninfer_kits.errors import EnvironmentFailure, Terminated

GRACE: Final = 5.0  # seconds between SIGTERM and SIGKILL
KILL_WAIT: Final = 10.0  # seconds for SIGKILLed processes to be gone (a slow disk's writes)
DRAIN: Final = 1.0  # seconds to read what ended processes left in the pipe
CHUNK: Final = 1 << 16
PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>
INTERRUPTS: Final = (signal.SIGINT, signal.SIGTERM)
PROC: Final = Path("/proc")
HAND_ON_WAIT: Final = 60.0  # seconds for a child ninfer-kits to clean up after an interrupt
PROBE_TIMEOUT: Final = 30.0  # seconds for a quick question's answer
PROBE_KILL_WAIT: Final = 2.0  # seconds for a killed probe's pipes to close

Stream: TypeAlias = int | IO[Any] | None  # what Popen takes for stdin, stdout, stderr


def start(command: Sequence[str], *, env: Mapping[str, str] | None = None,
          cwd: Path | None = None, stdin: Stream = subprocess.DEVNULL,
          stdout: Stream = subprocess.PIPE, stderr: Stream = subprocess.STDOUT,
          umask: int = -1) -> subprocess.Popen[bytes]:
    """`command` as the leader of a new session; by default stdin from /dev/null, stdout and
    stderr together in one pipe (read it with OutputLines); on Linux, when started from the
    main thread, it is killed if this process is killed outright."""
    with deferred_signals():  # an interrupt here would leave a child no one knows about
        return subprocess.Popen(list(command), stdin=stdin, stdout=stdout, stderr=stderr,
                                env=None if env is None else dict(env), cwd=cwd, umask=umask,
                                start_new_session=True, preexec_fn=_die_with_parent())


class ProbeTimeout(EnvironmentFailure):
    """A tool did not answer a quick question in time."""


def probe(command: Sequence[str], *, timeout: float = PROBE_TIMEOUT, cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `command` with no input and return its exit status and output (text, undecodable
    bytes replaced); ProbeTimeout when it has not finished after `timeout` seconds (its session
    is killed first). The caller decides whether a missing answer stops the build or is
    recorded as unknown."""
    process = start(command, env=env, cwd=cwd, stderr=subprocess.PIPE)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_probe(process)
        raise ProbeTimeout(f"{' '.join(command)} did not answer in {timeout:g} s") from None
    except BaseException:
        _kill_probe(process)
        raise
    return subprocess.CompletedProcess(list(command), process.returncode,
                                       stdout.decode("utf-8", "replace"),
                                       stderr.decode("utf-8", "replace"))


def _kill_probe(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the probe's session at once (a probe keeps no state worth a SIGTERM), then
    reap it and close the pipes, but not for long: a process stuck in the kernel (a hung
    driver's) dies late, one that left the session may hold the pipes open, and a Ctrl-C or
    SIGTERM must still end the build."""
    with deferred_signals():
        _signal_all(process, process.pid, signal.SIGKILL)
        try:
            process.communicate(timeout=PROBE_KILL_WAIT)
        except subprocess.TimeoutExpired:
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()


def wait_handing_on(process: subprocess.Popen[bytes], wait: float = HAND_ON_WAIT) -> int:
    """Wait for `process`, a child that cleans up on Ctrl-C and SIGTERM itself (a `ninfer-kits
    build`), and return its status. An interrupt meanwhile is handed on to it as the signal it
    came as (SIGINT; SIGTERM for errors.Terminated), and it gets `wait` seconds to clean up
    and end before the interrupt goes on; whatever is left of its session then is ended
    (end_session), as it is when it ends by itself."""
    try:
        return process.wait()
    except KeyboardInterrupt as interrupt:
        with deferred_signals():  # a second signal waits: the child's cleanup comes first
            if process.poll() is None:
                signum = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
                with suppress(ProcessLookupError):
                    os.kill(process.pid, signum)
                with suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=wait)
        raise
    finally:
        end_session(process)


def end_session(process: subprocess.Popen[bytes], grace: float = GRACE) -> None:
    """End every process in `process`'s session: SIGTERM, `grace` seconds, then SIGKILL; return
    when none is left (or after KILL_WAIT more seconds, for a process the kernel holds in an
    uninterruptible wait), with `process` reaped. A second Ctrl-C or SIGTERM meanwhile is
    acted on when this is done, not in the middle of it."""
    with deferred_signals():
        session = process.pid
        if _signal_all(process, session, signal.SIGTERM) and \
                not _gone(process, session, grace):
            _signal_all(process, session, signal.SIGKILL)
            _gone(process, session, KILL_WAIT)
        if process.returncode is None:
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=KILL_WAIT)


def session_members(session: int) -> list[int]:
    """The processes of a session that have not ended (zombies left out), from /proc."""
    members = []
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                # pid (comm) state ppid pgrp session …; comm may hold spaces and parentheses
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:  # ended meanwhile
            continue
        if len(fields) > 3 and int(fields[3]) == session and fields[0] not in (b"Z", b"X"):
            members.append(int(entry.name))
    return members


def _signal_all(process: subprocess.Popen[bytes], session: int, signum: int) -> bool:
    """`signum` to every process of the session; False when there was none."""
    if process.poll() is None and not PROC.is_dir():  # no /proc (not Linux): the leader's
        with suppress(ProcessLookupError):  # process group, which is most of the session
            os.killpg(session, signum)
        return True
    members = session_members(session)
    for pid in members:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)
    return bool(members)


def _gone(process: subprocess.Popen[bytes], session: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        ended = process.poll() is not None  # reaps the leader as soon as it ends
        if (not session_members(session)) if PROC.is_dir() else ended:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


_STOPPERS: dict[object, Callable[[], None]] = {}
_STOPPERS_LOCK = threading.Lock()


@contextmanager
def background(name: str = "background") -> Iterator[ThreadPoolExecutor]:
    """One thread for work that overlaps the main thread's (the smoke test). On Ctrl-C or
    SIGTERM in the main thread, what runs there in a `stoppable` block is stopped before the
    thread is waited for, so that the build ends without waiting for it."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=name) as executor:
        try:
            yield executor
        except KeyboardInterrupt:
            with deferred_signals():
                with _STOPPERS_LOCK:
                    stoppers = list(_STOPPERS.values())
                for stop in stoppers:
                    with suppress(Exception):  # what could not be stopped is waited for
                        stop()
            raise


@contextmanager
def stoppable(stop: Callable[[], None]) -> Iterator[threading.Event]:
    """While the block runs (in a `background` thread), `stop` is what ends it early when the
    main thread is interrupted; the event it yields is set once `stop` was called."""
    stopped = threading.Event()

    def stop_it() -> None:
        stopped.set()
        stop()

    key = object()
    with _STOPPERS_LOCK:
        _STOPPERS[key] = stop_it
    try:
        yield stopped
    finally:
        with _STOPPERS_LOCK:
            del _STOPPERS[key]


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back until the block is done, then acted on as they would have
    been (in the main thread, where Python runs signal handlers; elsewhere a no-op)."""
    previous = {signum: signal.getsignal(signum) for signum in INTERRUPTS}
    if threading.current_thread() is not threading.main_thread() or \
            None in previous.values():  # (None: a handler not set from Python)
        yield
        return
    caught: list[int] = []
    for signum in INTERRUPTS:
        signal.signal(signum, lambda number, _frame: caught.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            assert handler is not None
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec function that has the child killed when this thread ends (PR_SET_PDEATHSIG:
    Linux only, and only from the main thread, whose end is the process's)."""
    if not sys.platform.startswith("linux") or \
            threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the forked child
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent ended before the signal was asked for
            os._exit(1)

    return preexec


class OutputLines:
    """A child's output pipe as lines of text (UTF-8, undecodable bytes replaced, \\r\\n and \\r
    read as \\n, as a text-mode pipe reads them). The pipe is read without a buffer of Python's,
    and lines wait in a queue until taken, so that when reading stops (an interrupt) nothing that
    was read is lost, and `rest` still gets what the ended processes left behind."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._fd = pipe.fileno()
        self._decoder = io.IncrementalNewlineDecoder(
            codecs.getincrementaldecoder("utf-8")("replace"), translate=True)
        self._pending = ""
        self._ready: deque[str] = deque()
        self._ended = False

    def __iter__(self) -> Iterator[str]:
        """Every line, until the pipe's last writer closes it."""
        while True:
            while self._ready:
                yield self._ready.popleft()
            if self._ended:
                return
            self._take(os.read(self._fd, CHUNK))

    def rest(self, seconds: float = DRAIN) -> Iterator[str]:
        """What is left: the lines read but not taken, what the pipe still holds (for at most
        `seconds`: a process outside the session may hold it open), and the unfinished line."""
        deadline = time.monotonic() + seconds
        while True:
            while self._ready:
                yield self._ready.popleft()
            left = deadline - time.monotonic()
            if self._ended or left <= 0 or not select.select([self._fd], [], [], left)[0]:
                break
            self._take(os.read(self._fd, CHUNK))
        if self._pending:
            line, self._pending = self._pending, ""
            yield line

    def _take(self, chunk: bytes) -> None:
        self._ended = not chunk
        lines = (self._pending + self._decoder.decode(chunk, final=self._ended)).split("\n")
        self._pending = lines.pop()
        self._ready.extend(line + "\n" for line in lines)
        if self._ended and self._pending:
            self._ready.append(self._pending)
            self._pending = ""
