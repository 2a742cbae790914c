"""Dotted version numbers ("2.34", "580.159.04", "13.0.88") as tuples of ints for comparing:
the one parser behind glibc and GCC releases, symbol versions, driver versions and CUDA
versions, so that each compares them the same way."""

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
    """(2, 34) → "2.34"."""
    return ".".join(map(str, numbers))


# A driver's version: "580", "580.65", "580.159.04".
DRIVER_VERSION: Final = re.compile(r"^\d+(?:\.\d+){0,2}$")
# A CUDA version as BUILDINFO and cuda_drivers.toml write it ("13", "13.0", "13.0.88").
CUDA_VERSION: Final = re.compile(r"^(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.\d+)?$")
