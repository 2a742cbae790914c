"""Work spread over the cores this process may use: packing, hashing and patching kits."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def usable_cores() -> int:
    """The cores this process may run on (a container or taskset may allow fewer than exist)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def in_parallel(work: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """`work` on every item, in order, a thread per usable core (for work that leaves the GIL);
    the first error is raised."""
    with ThreadPoolExecutor(max_workers=usable_cores()) as pool:
        return list(pool.map(work, items))
