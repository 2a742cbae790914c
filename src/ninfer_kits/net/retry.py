"""Waiting on a remote: what a server asks for (Retry-After, rate-limit headers, GitHub's
secondary limit) and a bounded retry with backoff, ending in ServiceFailed (exit 3). A request
refused for good is Refused: running it again changes nothing, so it never says "later".
Standard library only, and quick to import: the .pyz loads it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from ninfer_kits.config import settings
from ninfer_kits.errors import BadInput, EnvironmentFailure

if TYPE_CHECKING:
    from ninfer_kits.log import Reporter

T = TypeVar("T")

# Multiplies every wait: tests run the real policy in milliseconds (never in production).
# GitHub: a secondary rate limit without Retry-After is waited out for at least a minute.
SECONDARY_LIMIT_WAIT = 60.0


class ServiceFailed(EnvironmentFailure):
    """A remote store kept failing (or asked to wait longer than we will): try again later."""


class Refused(BadInput):
    """A remote store refused a request for a reason that stays until it is fixed."""

    AGAIN = "running it again changes nothing until that is fixed"


@dataclass(frozen=True)
class Transient:
    """Why a call may pass when tried again, and how long the server asked us to wait."""

    reason: str  # "HTTP 502", "connection reset", "secondary rate limit"
    wait: float | None = None  # seconds, from Retry-After or X-RateLimit-Reset


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    attempts: int = 6  # tries in all
    first_delay: float = 1.0  # the first backoff, doubled on each retry
    max_delay: float = 60.0  # the longest backoff
    longest_wait: float = 900.0  # a server asking for longer makes us give up, saying so
    scale: float = 1.0  # multiplies every wait (tests)
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    clock: Callable[[], float] = field(default=time.time, compare=False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        try:
            scale = float(settings.read(settings.RETRY_SCALE, environ) or 1.0)
        except ValueError:
            scale = 1.0
        return cls(scale=max(scale, 0.0))

    def backoff(self, attempt: int) -> float:
        """The wait before try `attempt + 1` when the server asked for none."""
        base: float = min(self.max_delay, self.first_delay * 2.0 ** (attempt - 1))
        return base * random.uniform(0.75, 1.25)

    def call(self, what: str, operation: Callable[[], T],
             classify: Callable[[BaseException], Transient | None],
             reporter: Reporter | None = None) -> T:
        """`operation()`, tried again while `classify` calls its failure transient."""
        attempt = 1
        while True:
            try:
                return operation()
            except Exception as error:
                transient = classify(error)
                if transient is None:
                    raise
                if attempt >= self.attempts:
                    raise ServiceFailed(f"{what}: still failing after {attempt} tries "
                                        f"({transient.reason}); run it again later") from error
                if transient.wait is not None and transient.wait > self.longest_wait:
                    raise ServiceFailed(
                        f"{what}: {transient.reason}, and the server asks us to wait "
                        f"{transient.wait:.0f} s (more than {self.longest_wait:.0f} s); run it "
                        f"again after that") from error
                delay = self.backoff(attempt) if transient.wait is None else transient.wait
                if reporter is not None:
                    reporter.warning(f"{what}: {transient.reason}; try {attempt + 1} of "
                                     f"{self.attempts} in {delay:.1f} s")
                self.sleep(delay * self.scale)
                attempt += 1


def once(done: Callable[[], T | None], write: Callable[[], T]) -> Callable[[], T]:
    """`write`, safe to retry: from the second try on, `done()` says first whether an earlier
    try did it (the connection dropped after the server acted)."""
    tries = 0

    def operation() -> T:
        nonlocal tries
        tries += 1
        if tries > 1:
            earlier = done()
            if earlier is not None:
                return earlier
        return write()

    return operation


def server_wait(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asked us to wait: Retry-After (seconds or a date), else the rate
    limit's reset when none is left; None for nothing (or nothing readable)."""
    lowered = {key.lower(): str(value).strip() for key, value in headers.items()}
    after = lowered.get("retry-after")
    if after is not None:
        if after.isdigit():
            return float(after)
        import email.utils

        try:
            when = email.utils.parsedate_to_datetime(after)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - now)
    if lowered.get("x-ratelimit-remaining") == "0":
        reset = lowered.get("x-ratelimit-reset", "")
        if reset.isdigit():
            return max(0.0, float(reset) - now) + 1.0
    return None


def limit_wait(status: int, headers: Mapping[str, str], now: float, message: str = "", *,
               unreadable: float = SECONDARY_LIMIT_WAIT) -> float | None:
    """Seconds to wait out a rate limit, or None when it is none: a 403 or 429 saying how long,
    with a Retry-After or no requests left, a 429, or naming one in words (GitHub's secondary
    limit, whose minimum is the default). `unreadable`: for a Retry-After that is neither."""
    if status not in (403, 429):
        return None
    wait = server_wait(headers, now)
    if wait is not None:
        return wait
    lowered = {key.lower(): str(value).strip() for key, value in headers.items()}
    if lowered.get("retry-after"):
        return unreadable
    if status == 429 or lowered.get("x-ratelimit-remaining") == "0" or \
            "rate limit" in message.lower():
        return SECONDARY_LIMIT_WAIT
    return None
