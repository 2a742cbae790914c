"""What the fuzzer found stays fixed: every input saved in tests/fuzz/regressions/<reader>/<sha1>
(by `nox -s fuzz`, or by hand; tests/fuzz/regressions/README.md says what each one found) is
replayed through its reader, which must return or raise one of its allowed errors, within its
time limit and without allocating much more than the input's size. The seed corpus the fuzzer
starts from is replayed too, as it is and mutated, so that this tests something when nothing is
saved. No fuzzing library is needed: tests/fuzz/readers.py calls the readers directly.
"""

from __future__ import annotations

import hashlib
import random
import re
import signal
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from fuzz.readers import READERS, REGRESSIONS, Reader, replay, scratch_folder
from fuzz.seeds import SEEDS

# Memory one input may take: a fixed allowance (parsers' buffers, first-use caches) plus a
# multiple of its size. A reader that copies a string out of the input for every one of many
# references to it (the ELF and ld.so.cache amplifications saved here) goes far past it.
MEMORY_ALLOWANCE = 32 << 20
MEMORY_PER_INPUT_BYTE = 64
MUTATIONS = 250
SHA1_NAME = re.compile(r"[0-9a-f]{40}")


def _saved() -> list[object]:
    found: list[object] = []
    if REGRESSIONS.is_dir():
        for folder in sorted(path for path in REGRESSIONS.iterdir() if path.is_dir()):
            for path in sorted(folder.iterdir()):
                if SHA1_NAME.fullmatch(path.name):
                    found.append(pytest.param(folder.name, path,
                                              id=f"{folder.name}/{path.name[:12]}"))
    return found


class _Overtime(BaseException):  # not an Exception: no reader's own `except` catches it
    pass


def _overtime(signum: int, frame: FrameType | None) -> None:
    raise _Overtime


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    import shutil

    folder = scratch_folder()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def bounded_replay(reader: Reader, data: bytes, scratch: Path, what: str) -> str:
    """replay() within the reader's time limit and the memory bound; the outcome."""
    previous = signal.signal(signal.SIGALRM, _overtime)
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    signal.setitimer(signal.ITIMER_REAL, reader.timeout)
    try:
        outcome = replay(reader, data, scratch)
    except _Overtime:
        pytest.fail(f"{what}: the {reader.name} reader ran past {reader.timeout} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        peak = tracemalloc.get_traced_memory()[1]
        if not tracing:
            tracemalloc.stop()
    limit = MEMORY_ALLOWANCE + MEMORY_PER_INPUT_BYTE * len(data)
    assert peak <= limit, (f"{what}: the {reader.name} reader allocated {peak >> 20} MiB for "
                           f"{len(data)} bytes of input (at most {limit >> 20} MiB)")
    return outcome


@pytest.mark.parametrize(("reader", "path"), _saved())
def test_a_saved_input_is_read_or_refused_in_bounds(reader: str, path: Path,
                                                    scratch: Path) -> None:
    assert reader in READERS, f"{path}: a folder of regressions/ names no reader"
    data = path.read_bytes()
    assert hashlib.sha1(data).hexdigest() == path.name, f"{path}: not named by its sha1"
    bounded_replay(READERS[reader], data, scratch, str(path))


@pytest.fixture(scope="module")
def seeds() -> dict[str, dict[str, bytes]]:
    return {name: build() for name, build in SEEDS.items()}


@pytest.mark.parametrize("reader", list(READERS))
def test_the_seeds_are_read(reader: str, seeds: dict[str, dict[str, bytes]],
                            scratch: Path) -> None:
    """The real files and the project's own writings that the fuzzer starts from: readable,
    most of them, so the fuzzer starts inside the parser and not at its first check."""
    assert set(SEEDS) == set(READERS)
    found = seeds[reader]
    assert found, f"no seed for {reader}"
    outcomes = {name: bounded_replay(READERS[reader], data, scratch, f"seed {name}")
                for name, data in found.items()}
    read = [name for name, outcome in outcomes.items() if outcome == "read"]
    assert len(read) * 2 >= len(outcomes), outcomes


def _mutate(data: bytes, tokens: tuple[bytes, ...], rng: random.Random) -> bytes:
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    out = bytearray(data)
    choice = rng.randrange(5)
    if choice == 0:  # truncate
        return bytes(out[:rng.randrange(len(out))])
    if choice == 1:  # flip bytes
        for _ in range(rng.randint(1, 16)):
            out[rng.randrange(len(out))] = rng.randrange(256)
    elif choice == 2 and tokens:  # splice a token in
        at = rng.randrange(len(out))
        token = rng.choice(tokens)
        out[at:at + len(token) * rng.randint(0, 1)] = token
    elif choice == 3:  # a run repeated
        at = rng.randrange(len(out))
        run = out[at:at + rng.randint(1, 32)]
        out[at:at] = run * rng.randint(2, 64)
    else:  # large values into a field, the classic overflow bait
        at = rng.randrange(len(out))
        out[at:at + 8] = rng.choice([b"\xff" * 8, b"\x00" * 8, b"\x7f" + b"\xff" * 7])
    return bytes(out)


@pytest.mark.parametrize("reader", list(READERS))
def test_mutated_seeds_are_read_or_refused(reader: str, seeds: dict[str, dict[str, bytes]],
                                           scratch: Path) -> None:
    """A quick, deterministic pass of blind mutations over the seeds (the fuzzer's are guided
    and many more): each is read or refused with an allowed error, in bounds."""
    chosen = READERS[reader]
    rng = random.Random(f"ninfer-fuzz-{reader}")
    originals = list(seeds[reader].values())
    outcomes: Counter[str] = Counter()
    for case in range(MUTATIONS):
        data = _mutate(originals[case % len(originals)], chosen.tokens, rng)[:chosen.max_len]
        outcomes[bounded_replay(chosen, data, scratch, f"mutation {case}")] += 1
    assert outcomes["refused"] > 0, outcomes
