"""Randomized fault schedules against the local GitHub server: hundreds of seeded publishes,
each with its own mix of server errors, dropped connections, rate limits, changes applied and
then answered with an error, and crashes between steps; then a clean re-run.

Asserted for every schedule: at no moment did a published release list a SHA256SUMS naming an
asset that was missing or different (checked by an observer after every state change of the
server); the ledger never named a release that was not complete; after the re-run the release
is published once, complete, and every asset matches SHA256SUMS and the kit folder."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from github_server import GitHubServer
from ninfer_kits.errors import NinferKitsError
from ninfer_kits.kit import kitdir
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.net.retry import RetryPolicy
from ninfer_kits.release import ledger
from test_publish_github import NAMES, assert_complete, check_published_releases
from test_publish_support import (
    CANARY,
    FAST,
    TAG,
    Captured,
    compile_program,
    github_store,
    load,
    make_kit,
    matrix_file,
    publish,
)

SCHEDULES = 240
SEED = 0x5EED_2026

TARGETS = [  # (method, path regex) of the requests a publish makes
    ("POST", r"/repos/[^/]+/[^/]+/releases$"),  # the write probe, and creating the draft
    ("POST", r"/api/uploads/"),
    ("GET", r"/repos/[^/]+/[^/]+/releases$"),
    ("GET", r"/releases/\d+/assets$"),
    ("GET", r"/releases/assets/\d+$"),
    ("PATCH", r"/releases/\d+$"),
    ("DELETE", r"/releases/assets/\d+$"),
    ("GET", r"/repos/[^/]+/[^/]+$"),
    ("*", r".*"),
]


class Crash(BaseException):
    """The process dies here: nothing after it runs, no handler sees it."""


class Crashing:
    """A store whose `at`-th call (of any protocol method) crashes the process."""

    def __init__(self, store: Any, at: int | None) -> None:
        self._store, self._at, self._calls = store, at, 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls += 1
            if self._calls == self._at:
                raise Crash(f"crash at {name} (call {self._calls})")
            return value(*args, **kwargs)

        return call


def add_faults(server: GitHubServer, rng: random.Random) -> list[str]:
    """One random schedule; returns what it holds, for the failure message."""
    chosen = []
    for _ in range(rng.randint(1, 4)):
        method, path = rng.choice(TARGETS)
        match = {"method": method, "path": path, "nth": rng.randint(1, 10),
                 "times": rng.choice([1, 1, 1, 2, 3, 40])}
        kind = rng.choice(["status", "drop", "secondary_rate_limit", "too_many_requests",
                           "apply_then_status", "apply_then_drop", "delay"])
        if kind == "status":
            server.faults.status(rng.choice([500, 502, 503, 504]), **match)
        elif kind == "drop":
            server.faults.drop(after_bytes=rng.choice([0, 7, 300, 2000]), **match)
        elif kind in ("secondary_rate_limit", "too_many_requests"):
            getattr(server.faults, kind)(retry_after=rng.choice([0, 1, 2]), **match)
        elif kind == "apply_then_status":
            server.faults.apply_then_status(rng.choice([500, 502]), **match)
        elif kind == "apply_then_drop":
            server.faults.apply_then_drop(**match)
        else:
            server.faults.delay(rng.choice([0.001, 0.005]), **match)
        chosen.append(f"{kind} {match}")
    return chosen


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> kitdir.KitDir:
    folder = tmp_path_factory.mktemp("faults-kit")
    return make_kit(folder / "dist", compile_program(folder))


@pytest.mark.slow
def test_random_fault_schedules_never_publish_a_broken_release(kit: kitdir.KitDir,
                                                              tmp_path: Path) -> None:
    started = time.monotonic()
    failed_first = crashed = 0
    with GitHubServer() as server:
        server.add_token(CANARY, limit=1_000_000)  # hundreds of schedules on one token
        server.observe(check_published_releases)
        for number in range(SCHEDULES):
            rng = random.Random(SEED + number)
            repo = f"o/s{number}"
            server.add_repo(repo)
            tmp = tmp_path / str(number)
            tmp.mkdir()
            matrix = load(matrix_file(tmp, github=GitHubTarget(repository=repo,
                                                               api=server.base_url)))
            ledger_file = tmp / "releases" / f"{TAG}.toml"
            schedule = add_faults(server, rng)
            crash_at = rng.choice([None, None, rng.randint(1, 12)])
            policy = RetryPolicy(attempts=rng.choice([2, 3, 4]), first_delay=0.001,
                                 max_delay=0.01, scale=0.001)
            captured = Captured()
            store = Crashing(github_store(server, repo, CANARY, captured.reporter, policy),
                             crash_at)
            try:
                publish(kit.path, matrix, [store], tmp, captured.reporter)
            except NinferKitsError:
                failed_first += 1
            except Crash:
                crashed += 1
            if ledger_file.exists():  # the ledger never names an incomplete release
                released = server.snapshot().published(repo, TAG)
                assert released is not None and sorted(a.name for a in released.assets) == \
                    sorted(NAMES), f"schedule {number}: {schedule}"
            server.faults.clear()
            captured = Captured()
            store = github_store(server, repo, CANARY, captured.reporter, FAST)
            try:
                publish(kit.path, matrix, [store], tmp, captured.reporter)
                assert_complete(server, kit, repo)
            except Exception as error:
                raise AssertionError(f"schedule {number} (crash at {crash_at}): {schedule}\n"
                                     f"{captured.all()}") from error
            entry = ledger.read(ledger_file)
            assert [a.sha256 for a in entry.assets] == \
                [kitdir.read_kit_dir(kit.path).sha256, *[a.sha256 for a in entry.assets[1:]]]
            assert CANARY not in captured.all()
        server.check()
    elapsed = time.monotonic() - started
    print(f"\n{SCHEDULES} fault schedules in {elapsed:.1f} s: {failed_first} first runs failed, "
          f"{crashed} crashed, every re-run completed")
    assert failed_first > SCHEDULES // 10 and crashed > SCHEDULES // 10  # the faults did bite
