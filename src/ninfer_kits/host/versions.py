"""Dotted version numbers as tuples of ints: the one parser behind glibc, GCC, symbol, driver and
CUDA versions, so that each compares them the same way."""

from __future__ import annotations

import re
from typing import Final

DOTTED: Final = re.compile(r"\d+(?:\.\d+)*")


def parse(text: str) -> tuple[int, ...]:
    """"2.34" → (2, 34); ValueError for anything but numbers joined by dots."""
    if DOTTED.fullmatch(text) is None:
        raise ValueError(f"not a dotted version: {text!r}")
    return tuple(int(part) for part in text.split("."))


def dotted(numbers: tuple[int, ...]) -> str:
    return ".".join(map(str, numbers))


DRIVER_VERSION: Final = re.compile(r"^\d+(?:\.\d+){0,2}$")  # "580", "580.159.04"
CUDA_VERSION: Final = re.compile(r"^(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.\d+)?$")
