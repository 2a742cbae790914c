"""retry.py's reading of a server's wait, which every job shares: a Retry-After that is neither
seconds nor a date (test_publish has those two), and when a 403 or 429 is a rate limit at all."""

from __future__ import annotations

import pytest

from ninfer_kits.net.retry import SECONDARY_LIMIT_WAIT, limit_wait, server_wait

NOW = 1_700_000_000.0


@pytest.mark.parametrize("garbage", ["soon, maybe", "-5", "1.5", "", "Wed, 99 Foo 2023"])
def test_a_retry_after_that_is_neither_is_no_wait_said(garbage: str) -> None:
    assert server_wait({"Retry-After": garbage}, NOW) is None
    assert limit_wait(429, {"Retry-After": garbage}, NOW, unreadable=0.5) == \
        (0.5 if garbage else SECONDARY_LIMIT_WAIT)


def test_when_an_answer_is_a_rate_limit() -> None:
    exhausted = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 9)}
    assert limit_wait(403, exhausted, NOW) == 10.0  # a second past the reset
    assert limit_wait(403, {"X-RateLimit-Remaining": "0"}, NOW) == SECONDARY_LIMIT_WAIT
    assert limit_wait(429, {}, NOW) == SECONDARY_LIMIT_WAIT
    assert limit_wait(403, {}, NOW, "You have exceeded a secondary rate limit") == \
        SECONDARY_LIMIT_WAIT
    assert limit_wait(403, {"X-RateLimit-Remaining": "12"}, NOW, "Forbidden") is None
    assert limit_wait(503, {"Retry-After": "5"}, NOW) is None  # a 5xx is the caller's to judge
