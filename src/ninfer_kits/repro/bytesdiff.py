"""Where two byte regions differ, and what the differing bytes read as (a path, a time, a
string). Chunks are compared in C and a differing one XORed as two big integers, its runs found
by a regex, and only the first runs kept: a section of hundreds of MB costs one pass over its
pages and a bounded amount of Python. A difference is read out to the nearest non-printable
byte on each side, so a build folder or a `__DATE__` string shows whole."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ninfer_kits.inspector.inputs import ByteSource

CHUNK = 1 << 20
MERGE_GAP = 8  # runs closer than this many equal bytes are one range
CONTEXT = 240  # bytes of text read on each side of a difference
NONZERO = re.compile(rb"[^\x00]+")
PRINTABLE = frozenset(range(0x20, 0x7F))
MONTH = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
# __DATE__ ("Nov 30 2026", the day space-padded), __TIME__ ("10:14:39"), __TIMESTAMP__
# ("Mon Nov 30 10:14:39 2026") and ISO dates/times ("2026-11-30", "2026-11-30T10:14:39").
TIMES = re.compile(
    rf"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) )?{MONTH} [ 0-3]\d(?: \d\d:\d\d:\d\d)? \d{{4}}"
    r"(?: \d\d:\d\d:\d\d)?"
    r"|\d{4}-[01]\d-[0-3]\d(?:[T ]\d\d:\d\d(?::\d\d)?)?"
    r"|(?<!\d)[0-2]\d:[0-5]\d:[0-6]\d(?!\d)")
PATH = re.compile(r"[^\s\"'<>|:;,()\[\]{}=]*/[^\s\"'<>|:;,()\[\]{}=]*")


@dataclass(frozen=True)
class Ranges:
    """Differing ranges [start, end) relative to the regions' starts; `more`: more followed."""

    ranges: tuple[tuple[int, int], ...]
    more: bool

    def __bool__(self) -> bool:
        return bool(self.ranges)


def differing(a: ByteSource, a_start: int, a_size: int, b: ByteSource, b_start: int,
              b_size: int, limit: int) -> Ranges:
    """The first `limit` differing ranges of a[a_start:+a_size] and b[b_start:+b_size]; bytes
    past the shorter one are one range."""
    found: list[tuple[int, int]] = []
    common = min(a_size, b_size)
    position = 0
    while position < common:
        length = min(CHUNK, common - position)
        left = a[a_start + position:a_start + position + length]
        right = b[b_start + position:b_start + position + length]
        if left != right:
            for start, end in _runs(bytes(left), bytes(right)):
                _add(found, position + start, position + end)
                if len(found) > limit:
                    return Ranges(tuple(found[:limit]), True)
        position += length
    if a_size != b_size:
        _add(found, common, max(a_size, b_size))
    return Ranges(tuple(found[:limit]), len(found) > limit)


def _runs(left: bytes, right: bytes) -> list[tuple[int, int]]:
    xored = (int.from_bytes(left, "big") ^ int.from_bytes(right, "big")).to_bytes(
        len(left), "big")
    return [match.span() for match in NONZERO.finditer(xored)]


def _add(found: list[tuple[int, int]], start: int, end: int) -> None:
    if found and start - found[-1][1] < MERGE_GAP:
        found[-1] = (found[-1][0], max(found[-1][1], end))
    else:
        found.append((start, end))


def text_around(data: ByteSource, start: int, end: int, at: int) -> tuple[int, str]:
    """(where it starts, the printable text around data[at] within data[start:end], at most
    CONTEXT bytes each way); '' when data[at] is not printable."""
    if not start <= at < end:
        return at, ""
    lo = max(start, at - CONTEXT)
    window = bytes(data[lo:min(end, at + 1 + CONTEXT)])
    middle = at - lo
    if window[middle] not in PRINTABLE:
        return at, ""
    left = middle
    while left > 0 and window[left - 1] in PRINTABLE:
        left -= 1
    right = middle + 1
    while right < len(window) and window[right] in PRINTABLE:
        right += 1
    return lo + left, window[left:right].decode("ascii")


@dataclass(frozen=True)
class Reading:
    """What a differing piece of text is: "time", "path" or "string", and the part to show."""

    kind: str
    shown: str


def read_as(text: str, offset: int) -> Reading:
    """What the text is, looking at the part that covers `offset` (where the bytes differ)."""
    for match in TIMES.finditer(text):
        if match.start() <= offset < max(match.end(), match.start() + 1):
            return Reading("time", match.group())
    for match in PATH.finditer(text):
        if match.start() <= offset < match.end() and len(match.group()) > 1:
            return Reading("path", match.group())
    return Reading("string", text)


def first_difference(left: str, right: str) -> int:
    """The first index where two strings differ (the shorter one's length if a prefix)."""
    for index, (x, y) in enumerate(zip(left, right, strict=False)):
        if x != y:
            return index
    return min(len(left), len(right))
