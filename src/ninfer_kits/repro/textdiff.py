"""Differing lines of two texts, as a few hunks (text members, PTX): common leading and trailing
lines are cut off first, so that difflib sees only what is left."""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

MATCHED_LINES = 20_000  # above this many items left after trimming, one run covers them all
T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class Hunk:
    """a_count lines of a from a_start (0-based) became b_count of b from b_start; a_lines and
    b_lines are the first few."""

    a_start: int
    a_count: int
    a_lines: tuple[str, ...]
    b_start: int
    b_count: int
    b_lines: tuple[str, ...]

    @property
    def words(self) -> str:
        a = _span(self.a_start, self.a_count)
        b = _span(self.b_start, self.b_count)
        return f"lines {a}" if a == b else f"lines {a} (a) and {b} (b)"


def _span(start: int, count: int) -> str:
    if count == 0:
        return f"after {start}"
    return str(start + 1) if count == 1 else f"{start + 1}-{start + count}"


def changed_lines(a: list[str], b: list[str], limit: int, shown: int = 6) -> list[Hunk]:
    """The first `limit` hunks where a and b differ, each showing at most `shown` lines a side."""
    hunks = []
    for i1, i2, j1, j2 in differing_runs(a, b):
        hunks.append(Hunk(i1, i2 - i1, tuple(a[i1:min(i2, i1 + shown)]),
                          j1, j2 - j1, tuple(b[j1:min(j2, j1 + shown)])))
        if len(hunks) >= limit:
            break
    return hunks


def differing_runs(a: Sequence[T], b: Sequence[T]) -> Iterator[tuple[int, int, int, int]]:
    """Where two sequences differ: runs a[i1:i2] that became b[j1:j2], in order."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    a_rest, b_rest = a[head:len(a) - tail], b[head:len(b) - tail]
    if not a_rest and not b_rest:
        return
    if max(len(a_rest), len(b_rest)) > MATCHED_LINES:
        yield head, len(a) - tail, head, len(b) - tail
        return
    matcher = difflib.SequenceMatcher(None, a_rest, b_rest, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            yield head + i1, head + i2, head + j1, head + j2
