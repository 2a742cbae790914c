"""Mutated and truncated real ELF files: the inspector returns a result or one clean error."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.elf import read_elf_buffer

CASES = 6000
CLI_CASES = 40


def _mutate(original: bytes, rng: random.Random) -> bytes:
    data = bytearray(original)
    choice = rng.randrange(6)
    if choice == 0:  # truncate anywhere
        return bytes(data[: rng.randrange(len(data))])
    if choice == 1:  # flip bytes in the ELF header and the program/section header tables
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(min(len(data), 64))] = rng.randrange(256)
    elif choice == 2:  # overwrite a run of the section header table (at the end of the file)
        start = max(0, len(data) - rng.randrange(1, 4096))
        for i in range(start, min(len(data), start + rng.randint(1, 64))):
            data[i] = rng.randrange(256)
    elif choice == 3:  # random bytes anywhere
        for _ in range(rng.randint(1, 32)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif choice == 4:  # corrupt the fatbin headers specifically
        at = original.find(b"\x50\xed\x55\xba")
        if at >= 0:
            for _ in range(rng.randint(1, 6)):
                data[at + rng.randrange(256)] = rng.randrange(256)
    else:  # large values into 8-byte fields, the classic overflow bait
        at = rng.randrange(0, max(1, min(len(data), 64) - 8))
        data[at:at + 8] = rng.choice([b"\xff" * 8, b"\x00" * 8, b"\x7f" + b"\xff" * 7])
    return bytes(data)


@pytest.fixture(scope="module")
def seeds(c_binaries: dict[str, Path], cuda_binaries: dict[str, Path]) -> list[bytes]:
    paths = [c_binaries["glibc234"], c_binaries["kitlib"], c_binaries["recent_cxx"],
             cuda_binaries["plain"], cuda_binaries["rdc.o"]]
    return [path.read_bytes() for path in paths]


def test_mutations_give_a_result_or_a_clean_error(seeds: list[bytes]) -> None:
    rng = random.Random(20261129)
    outcomes = {"result": 0, "clean error": 0}
    for case in range(CASES):
        data = _mutate(seeds[case % len(seeds)], rng)
        try:
            read_elf_buffer(data, f"case-{case}")
            outcomes["result"] += 1
        except NotAnElf as error:
            assert str(error).startswith(f"case-{case}: "), error
            assert "\n" not in str(error)
            outcomes["clean error"] += 1
    # Both outcomes occur, so the mutations reach past the magic check and into the parser.
    assert outcomes["result"] > CASES // 20 and outcomes["clean error"] > CASES // 20, outcomes


def test_cli_reports_corrupt_files_in_one_line(seeds: list[bytes], tmp_path: Path) -> None:
    rng = random.Random(7)
    failures = 0
    for case in range(CLI_CASES):
        path = tmp_path / f"case-{case}"
        path.write_bytes(_mutate(seeds[case % len(seeds)], rng)[: 1 << 20])
        done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", str(path)],
                              capture_output=True, text=True, check=False)
        assert done.returncode in (0, 2), done.stderr
        assert "Traceback" not in done.stderr
        if done.returncode == 2:
            failures += 1
            assert done.stderr.count("\n") == 1 and str(path) in done.stderr
    assert failures > 0
