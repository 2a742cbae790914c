"""Child processes (the recipe, git, quick probes) that end with ninfer-kits, however it ends.

Each child leads a session of its own, which names its whole tree (Ninja's per-job process groups
too) and keeps a terminal's Ctrl-C to ninfer-kits, which then ends the session itself; killed
outright, Linux's parent-death signal ends the leader. What users see: docs/build.md,
"Interrupted builds"."""

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
    """`command` leading a new session; stdout and stderr in one pipe (OutputLines) unless
    told; killed with this process on Linux, from the main thread. An interrupt while it starts
    ends it again (the caller never holds it), unless the caller holds interrupts itself
    (deferred_signals around this call): then the caller gets it, and the interrupt after."""
    held_outside = bool(_HELD)
    with deferred_signals() as caught:
        process = subprocess.Popen(list(command), stdin=stdin, stdout=stdout, stderr=stderr,
                                   env=None if env is None else dict(env), cwd=cwd,
                                   umask=umask, start_new_session=True,
                                   preexec_fn=_die_with_parent())
        if caught and not held_outside:
            end_session(process)
    return process


class ProbeTimeout(EnvironmentFailure):
    """A tool did not answer a quick question in time."""


def probe(command: Sequence[str], *, timeout: float = PROBE_TIMEOUT, cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`command`'s status and text output; ProbeTimeout after `timeout` seconds (a driver
    stuck in D state hangs nvidia-smi for minutes), its session killed first."""
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
    """SIGKILL the session at once (a probe keeps no state), waiting for the pipes only
    briefly: a process stuck in the kernel or outside the session may hold them."""
    with deferred_signals():
        _signal_all(process, process.pid, signal.SIGKILL)
        try:
            process.communicate(timeout=PROBE_KILL_WAIT)
        except subprocess.TimeoutExpired:
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()


def wait_handing_on(process: subprocess.Popen[bytes], wait: float = HAND_ON_WAIT) -> int:
    """The status of a child that cleans up on signals itself (a `ninfer-kits build`); an
    interrupt is handed on to it as it came, with `wait` seconds to end, then its session is
    ended."""
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
    """SIGTERM to the whole session, `grace` seconds, SIGKILL; return when none is left (or
    KILL_WAIT later); a second interrupt waits until this is done."""
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
    """The live processes of a session (zombies left out), from /proc."""
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
    """False when there was no process to signal."""
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
    """One thread beside the main one (the smoke test); on an interrupt its `stoppable`
    work is stopped before the thread is waited for."""
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
    """`stop` ends the block early on an interrupt; the event yielded is set once it did."""
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


_HELD: list[list[int]] = []  # the signals the outermost deferred_signals block caught so far


@contextmanager
def deferred_signals() -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM held back until the block is done (main thread only); within another
    such block, the outermost holds them. Yields the signals held so far."""
    previous = {signum: signal.getsignal(signum) for signum in INTERRUPTS}
    if threading.current_thread() is not threading.main_thread() or \
            None in previous.values():  # (None: a handler not set from Python)
        yield []
        return
    if _HELD:
        yield _HELD[0]
        return
    caught: list[int] = []
    for signum in INTERRUPTS:
        signal.signal(signum, lambda number, _frame: caught.append(number))
    _HELD.append(caught)
    try:
        yield caught
    finally:
        _HELD.pop()
        for signum, handler in previous.items():
            assert handler is not None
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])


def _die_with_parent() -> Callable[[], None] | None:
    """PR_SET_PDEATHSIG (Linux), from the main thread only: a thread's end is its signal."""
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
    """A child's output pipe handed to `take` a text line at a time, unbuffered. An interrupt
    comes only while waiting for output: a chunk once read always reaches `take` (one that came
    between the read and its lines was lost: an interrupted build's log was empty)."""

    def __init__(self, pipe: IO[bytes], take: Callable[[str], None]) -> None:
        self._fd = pipe.fileno()
        self._take_line = take
        self._decoder = io.IncrementalNewlineDecoder(
            codecs.getincrementaldecoder("utf-8")("replace"), translate=True)
        self._pending = ""
        self._ended = False

    def follow(self) -> None:
        """Every line until the pipe ends."""
        while not self._ended:
            select.select([self._fd], [], [])  # an interrupt here has read nothing
            self._read()

    def drain(self, seconds: float = DRAIN) -> None:
        """The lines left, reading the pipe at most `seconds` (others may hold it open), then
        the last line if it was never finished."""
        deadline = time.monotonic() + seconds
        while not self._ended:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                break
            self._read()
        self._unfinished()

    def _read(self) -> None:
        with deferred_signals():  # the pipe is readable: this does not block
            chunk = os.read(self._fd, CHUNK)
            self._ended = not chunk
            lines = (self._pending + self._decoder.decode(chunk, final=self._ended)).split("\n")
            self._pending = lines.pop()
            for line in lines:
                self._take_line(line + "\n")
            if self._ended:
                self._unfinished()

    def _unfinished(self) -> None:
        if self._pending:
            line, self._pending = self._pending, ""
            self._take_line(line)
