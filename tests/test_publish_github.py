"""Publishing to GitHub Releases through PyGithub, against the local GitHub server
(tests/github_server.py) over real HTTP: the draft-then-publish order, verification, resuming,
conflicts, faults (5xx and drops mid-upload, secondary limits, 429, a 422 after a retried POST,
SIGKILL at random points), preflight, and a canary token that must never show."""

from __future__ import annotations

import functools
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from github.GitReleaseAsset import GitReleaseAsset

from github_server import Event, GitHubServer, Snapshot
from ninfer_kits.errors import BadInput, CheckFailed
from ninfer_kits.kit import kitdir
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.net.retry import RetryPolicy, ServiceFailed
from ninfer_kits.publish.holdings import PublishConflict, PublishRefused
from ninfer_kits.publish.store import ConcurrentPublish
from ninfer_kits.release import ledger
from test_publish_support import (
    ASSET,
    CANARY,
    FAST,
    PORTABLE,
    TAG,
    Captured,
    cli,
    cli_started,
    compile_program,
    github_store,
    info_for,
    load,
    make_kit,
    matrix_file,
    publish,
    release_sums,
)

NAMES = (ASSET, "BUILDINFO.txt", "SHA1SUMS", "ninfer-kits.pyz", "SHA256SUMS")


def check_published_releases(event: Event, snapshot: Snapshot) -> None:
    """At every moment: a published release lists a SHA256SUMS, and every file it names is
    there, uploaded, with that sha256. A change touches one repository: only its releases are
    checked again (a test of hundreds of repositories would otherwise hash them all at each)."""
    changed = (event.detail or {}).get("repo")
    for release in snapshot.releases:
        if release.draft or release.name == "made by the test" or \
                changed not in (None, release.repo):
            continue
        sums = release.asset("SHA256SUMS")
        assert sums is not None and sums.state == "uploaded", \
            f"{release.tag_name} published without SHA256SUMS (event {event.seq} {event.name})"
        for line in sums.data.decode().splitlines():
            digest, name = line.split("  ", 1)
            asset = release.asset(name)
            assert asset is not None and asset.state == "uploaded" and asset.sha256 == digest, \
                f"{release.tag_name}: SHA256SUMS names {name}, which is missing or different " \
                f"(event {event.seq} {event.name})"


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    with GitHubServer() as running:
        running.add_repo("o/r")
        running.add_token(CANARY)
        running.observe(check_published_releases)
        yield running


def run(server: GitHubServer, kit: kitdir.KitDir, tmp: Path, captured: Captured | None = None,
        repo: str = "o/r", retry: RetryPolicy = FAST, timeout: float = 5,
        **options: object):  # type: ignore[no-untyped-def]
    captured = captured or Captured()
    matrix = load(matrix_file(tmp, github=GitHubTarget(repository=repo, api=server.base_url),
                              portable=kit.portable is not None))
    store = github_store(server, repo, CANARY, captured.reporter, retry, timeout)
    return publish(kit.path, matrix, [store], tmp, captured.reporter, **options)


def asset_bytes(kit: kitdir.KitDir, name: str) -> bytes:
    """What an asset of the release holds: a file of the kit folder, ninfer-kits.pyz, or the
    release's SHA256SUMS: the kit folder's lines and those of SHA1SUMS and the pyz."""
    if name == "ninfer-kits.pyz":
        return _pyz_bytes()
    if name == "SHA256SUMS":
        return release_sums(kit, _pyz_bytes())
    return (kit.path / name).read_bytes()


@functools.cache
def _pyz_bytes() -> bytes:
    import tempfile

    from ninfer_kits.publish import plan

    with tempfile.TemporaryDirectory(prefix="ninfer-kits-test-pyz-") as scratch:
        return plan.pyz_asset(Path(scratch)).path.read_bytes()


def assert_complete(server: GitHubServer, kit: kitdir.KitDir, repo: str = "o/r") -> None:
    """One published release of the tag, its four assets the kit folder's own bytes."""
    releases = [r for r in server.snapshot().of(repo) if r.tag_name == TAG]
    published = [r for r in releases if not r.draft]
    assert len(published) == 1, [(r.id, r.draft) for r in releases]
    release = published[0]
    assert sorted(a.name for a in release.assets) == sorted(NAMES)
    for name in NAMES:
        asset = release.asset(name)
        assert asset is not None and asset.state == "uploaded"
        assert asset.data == asset_bytes(kit, name), name
    listed = release.asset("SHA256SUMS").data.decode().splitlines()  # type: ignore[union-attr]
    for line in listed:
        digest, name = line.split("  ", 1)
        assert release.asset(name).sha256 == digest  # type: ignore[union-attr]
    # every asset but SHA256SUMS itself is listed (the release is unsigned: no .sig)
    assert sorted(line.split("  ", 1)[1] for line in listed) == sorted(set(NAMES) - {"SHA256SUMS"})


def changes(server: GitHubServer, since: int = 0) -> list[str]:
    return [e.name for e in server.events[since:] if e.kind == "change"]


# --------------------------------------------------------------------------- the happy path


def test_a_draft_is_filled_verified_and_published_last(server: GitHubServer,
                                                       kit: kitdir.KitDir,
                                                       tmp_path: Path) -> None:
    outcome = run(server, kit, tmp_path)
    assert_complete(server, kit)
    names = changes(server)
    assert names == ["release.created", *["asset.started", "asset.uploaded"] * 5,
                     "release.updated", "release.published"]
    created = next(e.body for e in server.requests("POST", r"/releases$") if e.status == 201)
    assert created["draft"] is True
    # each asset read back by id (its digest) right after its upload
    verified = [e.body["name"] for e in server.requests("GET", r"/releases/assets/\d+$")]
    assert verified == list(NAMES)
    entry = ledger.read(outcome.ledger)
    assert entry.url() == f"{server.web_url}/o/r/releases/download/{TAG}/{ASSET}"
    assert [a.name for a in entry.assets] == list(NAMES)
    assert entry.stores[0].location == f"{server.web_url}/o/r/releases/tag/{TAG}"
    assert dict(entry.stores[0].details)["release_id"] == str(created["id"])


def test_uploads_go_in_order_with_sha256sums_last(server: GitHubServer, kit: kitdir.KitDir,
                                                  tmp_path: Path) -> None:
    run(server, kit, tmp_path)
    uploaded = [e.body["name"] for e in server.requests("POST", "/api/uploads/")
                if e.status == 201]
    assert uploaded == list(NAMES)
    published = next(e.seq for e in server.events if e.name == "release.published")
    assert all(e.seq < published for e in server.events if e.name == "asset.uploaded")


def test_a_portable_sibling_goes_up_right_after_the_tarball_and_into_the_ledger(
        server: GitHubServer, program: Path, tmp_path: Path) -> None:
    kit = make_kit(tmp_path / "dist", program, portable=True)
    assert kit.portable is not None
    outcome = run(server, kit, tmp_path)
    order = [ASSET, PORTABLE, *NAMES[1:]]
    uploaded = [e.body["name"] for e in server.requests("POST", "/api/uploads/")
                if e.status == 201]
    assert uploaded == order
    verified = [e.body["name"] for e in server.requests("GET", r"/releases/assets/\d+$")]
    assert verified == order  # each read back by id right after its upload, as the others
    release = server.snapshot().published("o/r", TAG)
    assert release is not None
    assert sorted(a.name for a in release.assets) == sorted(order)
    for name in order:
        asset = release.asset(name)
        assert asset is not None and asset.state == "uploaded"
        assert asset.data == asset_bytes(kit, name), name
    sums = release.asset("SHA256SUMS")
    assert sums is not None and f"{kit.portable.sha256}  {PORTABLE}\n" in sums.data.decode()
    assert f"{server.web_url}/o/r/releases/download/{TAG}/{PORTABLE}" in release.body
    entry = ledger.read(outcome.ledger)
    assert [a.name for a in entry.assets] == order
    assert entry.tarballs == (ledger.LedgerTarball(
        flavour="portable", asset=PORTABLE, sha256=kit.portable.sha256, size=kit.portable.size),)
    assert entry.url(PORTABLE) == f"{server.web_url}/o/r/releases/download/{TAG}/{PORTABLE}"
    # a re-run finds the whole release, the sibling included, and changes nothing
    mark = len(server.events)
    again = run(server, kit, tmp_path)
    assert not again.changed and changes(server, mark) == []


def test_a_rerun_after_success_changes_nothing_and_says_so(server: GitHubServer,
                                                            kit: kitdir.KitDir,
                                                            tmp_path: Path) -> None:
    run(server, kit, tmp_path)
    ledger_file = tmp_path / "releases" / f"{TAG}.toml"
    before = (ledger_file.read_bytes(), ledger_file.stat().st_mtime_ns)
    mark = len(server.events)
    captured = Captured()
    again = run(server, kit, tmp_path, captured)
    assert not again.changed and again.uploaded == ()
    assert changes(server, mark) == []
    assert "already published with every asset; unchanged" in captured.all()
    assert (ledger_file.read_bytes(), ledger_file.stat().st_mtime_ns) == before


def test_the_notes_are_the_dry_runs_notes(server: GitHubServer, kit: kitdir.KitDir,
                                          tmp_path: Path) -> None:
    matrix = matrix_file(tmp_path, github=GitHubTarget(repository="o/r", api=server.base_url))
    dry = cli("publish", kit.path, "--matrix", matrix, "--dry-run", "--out", tmp_path / "dry",
              "--cache-dir", tmp_path / "cache")
    assert dry.returncode == 0, dry.stderr
    run(server, kit, tmp_path)
    release = server.snapshot().published("o/r", TAG)
    assert release is not None
    written = (tmp_path / "dry" / TAG / "RELEASE.md").read_text()
    assert written == f"# {release.name}\n\n{release.body}"
    assert f"curl -fLO {server.web_url}/o/r/releases/download/{TAG}/{ASSET}" in release.body


def test_without_a_digest_each_asset_is_downloaded_back(server: GitHubServer,
                                                        kit: kitdir.KitDir, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GitReleaseAsset, "digest", property(lambda self: None))
    server.faults.drop(after_bytes=100, method="GET", path="/api/storage/")  # one reset
    run(server, kit, tmp_path)
    assert_complete(server, kit)
    downloads = server.requests("GET", "/api/storage/")
    assert len(downloads) == len(NAMES) + 1  # each read back, one of them twice (the reset)


# --------------------------------------------------------------------------- resuming


def test_a_rerun_after_a_partial_failure_completes_the_release(server: GitHubServer,
                                                                kit: kitdir.KitDir,
                                                                tmp_path: Path) -> None:
    server.faults.status(500, method="POST", path="/api/uploads/", nth=2, times=100)
    with pytest.raises(ServiceFailed, match=r"GitHub: uploading BUILDINFO.txt: still failing "
                       r"after 6 tries \(HTTP 500\)"):
        run(server, kit, tmp_path)
    snapshot = server.snapshot()
    assert [r.draft for r in snapshot.of("o/r")] == [True]
    assert not (tmp_path / "releases" / f"{TAG}.toml").exists()
    server.faults.clear()
    captured = Captured()
    outcome = run(server, kit, tmp_path, captured)
    assert_complete(server, kit)
    assert outcome.uploaded == (("github", "BUILDINFO.txt"), ("github", "SHA1SUMS"),
                                ("github", "ninfer-kits.pyz"), ("github", "SHA256SUMS"))
    assert f"github: {ASSET} is there already, verified" in captured.all()
    assert "BUILDINFO.txt was left unfinished by a failed upload (state starter)" \
        in captured.all()
    tarball_uploads = [e for e in server.requests("POST", "/api/uploads/")
                       if e.path.endswith(ASSET) or f"name={ASSET}" in e.path]
    assert len([e for e in tarball_uploads if e.status == 201]) <= 1


def test_other_content_on_the_draft_is_refused_unless_replace(server: GitHubServer,
                                                              kit: kitdir.KitDir,
                                                              tmp_path: Path) -> None:
    """A draft with other content may be another publish's, filling it: the race is settled
    as any (the command waits for a publish); a draft nobody publishes, unchanged for the
    quiet time, is refused as it stands."""
    server.add_release("o/r", TAG, draft=True, assets={ASSET: b"not this kit"})
    mark = len(server.events)
    with pytest.raises(ConcurrentPublish, match=r"the draft of the tag holds other content "
                       r"than the kit's: another publish may be filling it") as race:
        run(server, kit, tmp_path)
    assert isinstance(race.value.unsettled, PublishRefused)
    assert re.fullmatch(rf"nothing was changed:\n  GitHub o/r .*: {ASSET} is there with other "
                        r"content than the kit's; give --replace to replace it",
                        str(race.value.unsettled))
    assert not race.value.published_within(0)
    store = race.value.published_within.__self__  # type: ignore[attr-defined]
    started = time.monotonic()
    assert not store.wait_for_the_other(60, poll=0.05, quiet=0.5)
    assert time.monotonic() - started < 30  # the quiet time, not the whole wait
    assert changes(server, mark) == []
    outcome = run(server, kit, tmp_path, replace=True)
    assert_complete(server, kit)
    assert ("github", ASSET) in outcome.uploaded


def test_a_published_release_is_never_changed_silently(server: GitHubServer,
                                                       kit: kitdir.KitDir, program: Path,
                                                       tmp_path: Path) -> None:
    other = make_kit(tmp_path / "other", program, payload=b"a different build")
    server.add_release("o/r", TAG, name="made by the test",
                       assets={name: asset_bytes(other, name) for name in NAMES})
    mark = len(server.events)
    with pytest.raises(PublishConflict, match=(
            rf"tag {TAG} is published already with other kit bytes; nothing was changed.*"
            rf"--replace to replace it on purpose.*\n.*is sha256 {other.sha256} there, "
            rf"{kit.sha256} in this build")):
        run(server, kit, tmp_path)
    assert changes(server, mark) == []
    captured = Captured()
    run(server, kit, tmp_path, captured, replace=True)
    assert_complete(server, kit)
    assert "goes back to a draft until its assets are replaced" in captured.all()
    names = changes(server, mark)
    assert names[0] == "release.updated" and names[-1] == "release.published"


def test_an_immutable_release_is_refused_even_with_replace(kit: kitdir.KitDir, program: Path,
                                                           tmp_path: Path) -> None:
    other = make_kit(tmp_path / "other", program, payload=b"a different build")
    with GitHubServer() as server:
        server.add_repo("o/i", immutable_releases=True)
        server.add_token(CANARY)
        server.add_release("o/i", TAG, assets={name: asset_bytes(other, name)
                                               for name in NAMES})
        mark = len(server.events)
        with pytest.raises(PublishRefused, match="published and immutable"):
            run(server, kit, tmp_path, repo="o/i", replace=True)
        assert changes(server, mark) == []


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize("status", [500, 502])
def test_a_server_error_mid_upload_leaves_a_starter_that_is_cleared(
        server: GitHubServer, kit: kitdir.KitDir, tmp_path: Path, status: int) -> None:
    server.faults.status(status, method="POST", path="/api/uploads/", nth=1)
    captured = Captured()
    run(server, kit, tmp_path, captured)
    assert_complete(server, kit)
    assert f"HTTP {status}; try 2 of 6" in captured.all()
    assert any(e.name == "asset.deleted" for e in server.events)


def test_a_dropped_connection_mid_upload_is_retried(server: GitHubServer, kit: kitdir.KitDir,
                                                    tmp_path: Path) -> None:
    server.faults.drop(after_bytes=1000, method="POST", path="/api/uploads/", nth=1)
    captured = Captured()
    run(server, kit, tmp_path, captured)
    assert_complete(server, kit)
    assert "connection failed" in captured.all()


@pytest.mark.parametrize("limit", ["secondary_rate_limit", "too_many_requests"])
def test_rate_limits_wait_their_retry_after(server: GitHubServer, kit: kitdir.KitDir,
                                            tmp_path: Path, limit: str) -> None:
    getattr(server.faults, limit)(retry_after=3, method="POST", path="/api/uploads/", nth=2)
    getattr(server.faults, limit)(retry_after=3, method="GET", path=r"/releases$", nth=1)
    slept: list[float] = []
    policy = RetryPolicy(attempts=4, first_delay=0.001, scale=0.001, sleep=slept.append)
    captured = Captured()
    run(server, kit, tmp_path, captured, retry=policy)
    assert_complete(server, kit)
    assert slept.count(3 * 0.001) == 2  # Retry-After: 3 seconds, times the tests' scale
    reason = "secondary rate limit (HTTP 403)" if limit == "secondary_rate_limit" \
        else "rate limited (HTTP 429)"
    assert f"{reason}; try 2 of 4 in 3.0 s" in captured.all()


def test_a_request_that_times_out_is_tried_again(server: GitHubServer, kit: kitdir.KitDir,
                                                 tmp_path: Path) -> None:
    server.faults.delay(2.5, method="GET", path=r"/releases/assets/\d+$", nth=2)
    captured = Captured()
    run(server, kit, tmp_path, captured, timeout=1)
    assert_complete(server, kit)
    assert "GitHub: reading BUILDINFO.txt back: timed out; try 2 of 6" in captured.all()


def test_an_exhausted_primary_limit_waits_for_its_reset(server: GitHubServer,
                                                         kit: kitdir.KitDir,
                                                         tmp_path: Path) -> None:
    # 3 s ahead: a limit that resets before the first request is even made (a slow start on a
    # busy machine) would leave nothing to wait for
    server.set_rate_limit(CANARY, remaining=0, reset_in=3)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    captured = Captured()
    run(server, kit, tmp_path, captured, retry=RetryPolicy(first_delay=0.001, sleep=sleep))
    assert_complete(server, kit)
    assert slept, captured.all()
    assert 1.0 <= slept[0] <= 5.0  # X-RateLimit-Reset, not a blind backoff
    assert "rate limit (HTTP 403); try 2 of 6" in captured.all()


def test_an_exhausted_primary_limit_far_away_gives_up_clearly(server: GitHubServer,
                                                               kit: kitdir.KitDir,
                                                               tmp_path: Path) -> None:
    server.set_rate_limit(CANARY, remaining=0, reset_in=7200)
    with pytest.raises(ServiceFailed, match=r"rate limit \(HTTP 403\), and the server asks us "
                       r"to wait 720\d s \(more than 900 s\); run it again after that"):
        run(server, kit, tmp_path)
    assert changes(server) == []


def test_a_422_after_a_retried_create_is_our_own_draft(server: GitHubServer,
                                                        kit: kitdir.KitDir,
                                                        tmp_path: Path) -> None:
    server.faults.apply_then_status(502, method="POST", path=r"/repos/o/r/releases$", nth=2)
    run(server, kit, tmp_path)
    assert_complete(server, kit)
    assert len(server.snapshot().of("o/r")) == 1  # no second draft


def test_a_422_after_a_retried_upload_is_our_own_upload(server: GitHubServer,
                                                         kit: kitdir.KitDir,
                                                         tmp_path: Path) -> None:
    server.faults.apply_then_status(502, method="POST", path="/api/uploads/", nth=1)
    server.faults.apply_then_drop(method="POST", path="/api/uploads/", nth=3)
    run(server, kit, tmp_path)
    assert_complete(server, kit)
    answers = [e.status for e in server.requests("POST", "/api/uploads/")]
    assert answers.count(422) == 2 and not any(e.name == "asset.deleted" for e in server.events)


def test_a_publish_answered_by_a_502_is_not_done_twice(server: GitHubServer,
                                                       kit: kitdir.KitDir,
                                                       tmp_path: Path) -> None:
    server.faults.apply_then_status(502, method="PATCH", path=r"/releases/\d+$")
    run(server, kit, tmp_path)
    assert_complete(server, kit)
    assert changes(server).count("release.published") == 1


# --------------------------------------------------------------------------- preflight


@pytest.mark.parametrize(("setup", "message"), [
    ({"repo": "o/missing"}, r"GitHub: repository o/missing does not exist at .*, or the token "
                            r"from GITHUB_TOKEN cannot see it"),
    ({"token": {"can_write": False}}, r"cannot write o/r: it lacks the scope repo"),
    ({"token": {"permissions": {"contents": "read", "metadata": "read"}}},
     r"cannot write o/r: it lacks contents=write"),
    ({"token": {"scopes": ("read:org",)}}, r"has the scopes read:org, none of which writes "
                                           r"releases: it lacks the repo scope"),
    ({"readonly": True}, r"can read o/ro but cannot write it: it lacks push access"),
    ({"unknown": True}, r"the token from GITHUB_TOKEN was refused \(Bad credentials\)"),
])
def test_preflight_says_what_the_token_lacks_before_anything_changes(
        kit: kitdir.KitDir, tmp_path: Path, setup: dict[str, object], message: str) -> None:
    with GitHubServer() as server:
        server.add_repo("o/r")
        server.add_repo("o/ro", writable=False)
        repo = str(setup.get("repo", "o/ro" if setup.get("readonly") else "o/r"))
        if not setup.get("unknown"):
            server.add_token(CANARY, **setup.get("token", {}))  # type: ignore[arg-type]
        captured = Captured()
        with pytest.raises(BadInput, match=message) as caught:
            run(server, kit, tmp_path, captured, repo=repo)
        assert changes(server) == []
        assert CANARY not in str(caught.value) + captured.all()
        assert not (tmp_path / "releases").exists()


def test_public_repo_scope_writes_a_public_repository(kit: kitdir.KitDir,
                                                      tmp_path: Path) -> None:
    with GitHubServer() as server:
        server.add_repo("o/r")
        server.add_token(CANARY, scopes=("public_repo",))
        run(server, kit, tmp_path)
        assert_complete(server, kit)


# --------------------------------------------------------------------------- processes


def _cli_args(server: GitHubServer, kit: kitdir.KitDir, tmp: Path, repo: str) -> list[str]:
    matrix = matrix_file(tmp, github=GitHubTarget(repository=repo, api=server.base_url))
    return ["publish", str(kit.path), "--matrix", str(matrix), "--cache-dir", str(tmp / "cache"),
            "--ledger-dir", str(tmp / "releases")]


def _popen(args: list[str]) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("GH_TOKEN",)}
    env.update(GITHUB_TOKEN=CANARY, NINFER_KITS_RETRY_SCALE="0.001")
    return subprocess.Popen([sys.executable, "-m", "ninfer_kits", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_sigkill_at_random_points_then_a_rerun_completes(kit: kitdir.KitDir,
                                                         tmp_path: Path) -> None:
    rng = random.Random(20260501)
    outputs: list[str] = []
    with GitHubServer() as server:
        server.add_token(CANARY)
        server.observe(check_published_releases)
        for round_ in range(6):
            repo = f"o/kill{round_}"
            server.add_repo(repo)
            tmp = tmp_path / str(round_)
            tmp.mkdir()
            args = _cli_args(server, kit, tmp, repo)
            ledger_file = tmp / "releases" / f"{TAG}.toml"
            for _ in range(rng.randint(1, 3)):
                server.faults.clear()
                server.faults.delay(0.02, times=10_000)  # each request 20 ms: kills land inside
                process = _popen(args)
                time.sleep(rng.uniform(0.3, 1.6))  # the interpreter starts in ~0.3 s
                process.send_signal(signal.SIGKILL)
                out, err = process.communicate()
                outputs += [out, err]
                published = server.snapshot().published(repo, TAG)
                if ledger_file.exists():  # the ledger never names an incomplete release
                    assert published is not None and len(published.assets) == 5
            server.faults.clear()
            done = subprocess.run([sys.executable, "-m", "ninfer_kits", *args], text=True,
                                  capture_output=True, env={**os.environ, "GITHUB_TOKEN": CANARY,
                                                            "NINFER_KITS_RETRY_SCALE": "0.001"})
            outputs += [done.stdout, done.stderr]
            assert done.returncode == 0, done.stderr
            assert_complete(server, kit, repo)
            assert ledger.read(ledger_file).url() .endswith(f"/{repo}/releases/download/{TAG}/"
                                                           f"{ASSET}")
    assert all(CANARY not in text for text in outputs)


def test_two_publishes_at_once_one_waits_or_stops_clearly(server: GitHubServer,
                                                          kit: kitdir.KitDir,
                                                          tmp_path: Path) -> None:
    # The first publish is held at its first request (after it took the lock) until the other
    # two have started, however slowly the machine runs: a timed delay was seen to end first on
    # a loaded machine, and the second then found no publish running.
    gate = threading.Event()
    server.faults.hold(gate)
    args = _cli_args(server, kit, tmp_path, "o/r")
    first = _popen(args)
    lock_file = tmp_path / "cache" / "publish" / f"{TAG}.lock"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the first one holds the lock
        if lock_file.exists() and lock_file.read_text().strip() == str(first.pid):
            break
        time.sleep(0.02)
    busy = cli(*args, env={"GITHUB_TOKEN": CANARY})
    waiting = _popen([*args, "--wait", "60"])
    gate.set()
    assert first.wait(60) == 0, first.communicate()
    assert waiting.wait(60) == 0
    out, err = waiting.communicate()
    assert busy.returncode == 3
    assert f"another publish of {TAG} is running (PID {first.pid}" in busy.stderr
    assert "waiting for another publish" in err or out.startswith("nothing to do")
    assert out.startswith("nothing to do:") or out.startswith("published")
    assert_complete(server, kit)
    assert len(server.snapshot().of("o/r")) == 1


def test_the_canary_token_never_shows(server: GitHubServer, kit: kitdir.KitDir,
                                      tmp_path: Path) -> None:
    server.faults.status(502, method="POST", path="/api/uploads/", nth=1)
    server.faults.secondary_rate_limit(retry_after=1, method="GET", nth=3)
    server.faults.drop(after_bytes=10, method="POST", path="/api/uploads/", nth=3)
    args = _cli_args(server, kit, tmp_path, "o/r")
    texts = []
    for extra in ([], [], ["--debug"]):
        done = cli(*args, *extra, env={"GITHUB_TOKEN": CANARY})
        texts += [done.stdout, done.stderr]
    bad = cli(*_cli_args(server, kit, tmp_path, "o/nope"), "--debug",
              env={"GITHUB_TOKEN": CANARY})
    wrong = cli(*args, env={"GITHUB_TOKEN": CANARY[::-1]})
    texts += [bad.stdout, bad.stderr, wrong.stdout, wrong.stderr]
    assert bad.returncode == 2 and wrong.returncode == 2
    assert "was refused (Bad credentials)" in wrong.stderr
    assert_complete(server, kit)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    texts += [repr(e) for e in server.events]
    leaks = [text[:200] for text in texts if CANARY in text or CANARY[::-1] in text]
    assert not leaks


def test_a_failure_exits_with_the_services_status_and_nothing_half_published(
        server: GitHubServer, kit: kitdir.KitDir, tmp_path: Path) -> None:
    server.faults.status(502, method="PATCH", times=1000)
    done = cli(*_cli_args(server, kit, tmp_path, "o/r"), env={"GITHUB_TOKEN": CANARY})
    assert done.returncode == 3
    assert "GitHub: publishing example-v0.3.0-linux-sm86: still failing after 6 tries " \
        "(HTTP 502)" in done.stderr
    assert server.snapshot().published("o/r", TAG) is None
    assert not (tmp_path / "releases").exists()
    assert issubclass(PublishRefused, CheckFailed)  # a refusal exits 1, a service failure 3


def test_githubs_422_explanation_reaches_the_user_as_a_refusal(
        kit: kitdir.KitDir, tmp_path: Path) -> None:
    # An empty repository (no commit): the draft is made and filled, but publishing it needs a
    # tag, which has nothing to point at; GitHub answers 422 with its reasons in errors[].
    with GitHubServer() as server:
        server.add_repo("o/empty", empty=True)
        server.add_token(CANARY)
        done = cli(*_cli_args(server, kit, tmp_path, "o/empty"), env={"GITHUB_TOKEN": CANARY})
        published = server.snapshot().published("o/empty", TAG)
        patches = server.requests("PATCH")
    assert done.returncode == 2, done.stderr
    line = next(line for line in done.stderr.splitlines() if line.startswith("ninfer-kits:"))
    assert line == (f"ninfer-kits: error: GitHub: publishing {TAG}: refused (HTTP 422): "
                    f"Validation Failed: tag_name is not a valid tag; Published releases must "
                    f"have a valid tag; Release.target_commitish is invalid; running it again "
                    f"changes nothing until that is fixed"), line
    assert "again later" not in done.stderr and "Traceback" not in done.stderr
    assert published is None and len(patches) == 1  # a refusal is not tried again


def test_a_publish_racing_another_into_one_draft_waits_then_compares(tmp_path: Path) -> None:
    """Two builds of one revision (their BUILDINFO.txt differs in its run section only) published
    at once, as two workflow runs that GitHub's `concurrency` did not keep apart (act ignores
    it): both take the one draft of the tag. The publish whose BUILDINFO.txt upload finds the
    other's there waits for that one to publish, then compares with what it published: the same
    kit tarball, so reproduced, exit 0. The release is whole, and the other's."""
    program = compile_program(tmp_path)
    first = make_kit(tmp_path / "a", program, info=info_for(run=(("jobs", "1"),)))
    second = make_kit(tmp_path / "b", program, info=info_for(run=(("jobs", "2"),)))
    assert first.sha256 == second.sha256
    theirs = (first.path / kitdir.BUILDINFO).read_bytes()
    assert theirs != (second.path / kitdir.BUILDINFO).read_bytes()
    with GitHubServer() as server:
        server.add_repo("o/r")
        server.add_token(CANARY)
        server.observe(check_published_releases)
        inserted: list[int] = []

        def the_other_uploads_buildinfo(event: Event, snapshot: Snapshot) -> None:
            """Right after this publish's tarball lands in the draft, the other's BUILDINFO.txt
            does (the other publish, a step ahead)."""
            for release in snapshot.of("o/r"):
                tarball = release.asset(ASSET)
                if release.draft and not inserted and tarball and tarball.state == "uploaded":
                    inserted.append(release.id)  # first: adding it is a change observed too
                    server.add_asset("o/r", release.id, kitdir.BUILDINFO, theirs)

        server.observe(the_other_uploads_buildinfo)
        matrix = matrix_file(tmp_path, github=GitHubTarget(repository="o/r",
                                                           api=server.base_url))
        env = {"GITHUB_TOKEN": CANARY}
        racing = cli_started("publish", second.path, "--matrix", matrix, "--cache-dir",
                             tmp_path / "cache-b", "--ledger-dir", tmp_path / "ledger-b", env=env)
        deadline = time.monotonic() + 60
        while not [e for e in server.requests("POST", "/api/uploads/") if e.status == 422]:
            assert racing.poll() is None, racing.communicate()[1]
            assert time.monotonic() < deadline, "the racing publish never met the other's file"
            time.sleep(0.1)
        other = cli("publish", first.path, "--matrix", matrix, "--cache-dir", tmp_path / "c-a",
                    "--ledger-dir", tmp_path / "ledger-a", env=env)
        assert other.returncode == 0, other.stderr
        _, said = racing.communicate(timeout=120)
    assert racing.returncode == 0, said
    assert "another publish is running: waiting for it to publish" in said, said
    assert CANARY not in said + other.stderr + other.stdout
    release = server.snapshot().published("o/r", TAG)
    assert release is not None and not release.draft
    buildinfo = release.asset(kitdir.BUILDINFO)
    assert buildinfo is not None and buildinfo.data == theirs
    assert len([r for r in server.snapshot().of("o/r") if r.tag_name == TAG]) == 1


class Race:
    """Two builds of one revision (their BUILDINFO.txt differs in its run section only: two
    workflow runs) published to one local GitHub at once; `first` is the other publish's."""

    def __init__(self, tmp: Path, server: GitHubServer) -> None:
        program = compile_program(tmp)
        self.tmp, self.server = tmp, server
        self.first = make_kit(tmp / "a", program, info=info_for(run=(("jobs", "1"),)))
        self.second = make_kit(tmp / "b", program, info=info_for(run=(("jobs", "2"),)))
        server.add_repo("o/r")
        server.add_token(CANARY)
        server.observe(check_published_releases)
        self.matrix = matrix_file(tmp, github=GitHubTarget(repository="o/r",
                                                           api=server.base_url))

    def publish(self, kit: kitdir.KitDir) -> subprocess.Popen[str]:
        name = kit.path.parent.name
        return cli_started("publish", kit.path, "--matrix", self.matrix, "--cache-dir",
                           self.tmp / f"cache-{name}", "--ledger-dir",
                           self.tmp / f"ledger-{name}", env={"GITHUB_TOKEN": CANARY})

    @staticmethod
    def wait_until(what: str, done: Callable[[], bool],
                   running: subprocess.Popen[str] | None = None) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert running is None or running.poll() is None, running.communicate()[1]
            assert time.monotonic() < deadline, what
            time.sleep(0.05)

    def one_release_with(self, kit: kitdir.KitDir, *said: str) -> None:
        """One release of the tag, published and whole, with `kit`'s BUILDINFO.txt; no token
        in what the publishes said."""
        assert CANARY not in "".join(said)
        [release] = [r for r in self.server.snapshot().of("o/r") if r.tag_name == TAG]
        assert not release.draft and all(a.state == "uploaded" for a in release.assets), release
        buildinfo = release.asset(kitdir.BUILDINFO)
        assert buildinfo is not None
        assert buildinfo.data == (kit.path / kitdir.BUILDINFO).read_bytes()


def test_a_publish_whose_own_draft_lost_the_race_deletes_it_then_compares(
        tmp_path: Path) -> None:
    """Two publishes of one revision at once, each with a draft of its own (each looked before
    the other's draft existed): the other publishes first, so publishing ours is refused (422:
    the tag is another release's). Ours is deleted, and the publish waits, then compares with
    what the other published: the same kit tarball, exit 0; one release, no draft left."""
    with GitHubServer() as server:
        race = Race(tmp_path, server)
        # The other's create (its second POST to /releases: the first is the preflight's write
        # probe) waits until ours made its draft; our first upload waits until the other has
        # published.
        their_create, our_upload = threading.Event(), threading.Event()
        held_create = server.faults.hold(their_create, method="POST", path=r"/releases$", nth=2)
        held_upload = server.faults.hold(our_upload, method="POST", path=r"^/api/uploads/")
        other = race.publish(race.first)
        race.wait_until("the other never created its draft", lambda: held_create.seen >= 2)
        ours = race.publish(race.second)
        race.wait_until("ours never uploaded", lambda: held_upload.seen >= 1)
        their_create.set()
        _, other_said = other.communicate(timeout=120)
        assert other.returncode == 0, other_said
        our_upload.set()
        _, said = ours.communicate(timeout=120)
    assert ours.returncode == 0, said
    assert "was published from another draft meanwhile; deleting this publish's draft" in said
    assert "waiting for it to publish" in said, said
    race.one_release_with(race.first, said, other_said)


def test_a_publish_whose_upload_in_flight_another_deleted_uploads_it_again(
        tmp_path: Path) -> None:
    """Two publishes of one revision at once, in one draft: the other publish's first upload is
    in flight (its asset listed, state `starter`, as a failed upload's is) when this one looks,
    deletes it as unfinished, uploads the whole kit and publishes. The other's upload then ends
    in 404 (its asset is gone): it looks again, finds the file there, and settles the race as
    any other (the same kit tarball: wait, compare), exit 0 both; one whole release."""
    with GitHubServer() as server:
        race = Race(tmp_path, server)
        in_flight = threading.Event()
        held = server.faults.hold_upload(in_flight, method="POST", path=r"^/api/uploads/")
        other = race.publish(race.first)
        race.wait_until("the other publish never started an upload", lambda: bool(
            [a for r in server.snapshot().of("o/r") for a in r.assets if a.state == "starter"]),
            other)
        ours = race.publish(race.second)
        _, said = ours.communicate(timeout=120)
        in_flight.set()
        _, other_said = other.communicate(timeout=120)
    assert ours.returncode == 0, said
    assert held.fired == 1
    assert other.returncode == 0, other_said
    assert "waiting for it to publish" in other_said, other_said
    race.one_release_with(race.second, said, other_said)


def test_a_publish_meeting_another_publishs_full_draft_waits_then_compares(
        tmp_path: Path) -> None:
    """Two publishes of one revision at once: the other has filled its draft (its BUILDINFO.txt
    differs in the run section) and is about to publish it when this one looks. This one
    waits for it, then compares with what it published: the same kit tarball, exit 0."""
    with GitHubServer() as server:
        race = Race(tmp_path, server)
        publishing = threading.Event()
        held = server.faults.hold(publishing, method="PATCH", path=r"/releases/\d+$")
        other = race.publish(race.first)
        race.wait_until("the other publish never published its draft", lambda: held.seen >= 1,
                        other)
        looked = len(server.requests("GET", r"/releases/tags/"))
        ours = race.publish(race.second)
        race.wait_until("this publish never looked twice", lambda: len(  # looked, waits
            server.requests("GET", r"/releases/tags/")) >= looked + 3, ours)
        publishing.set()
        _, other_said = other.communicate(timeout=120)
        _, said = ours.communicate(timeout=120)
    assert other.returncode == 0, other_said
    assert ours.returncode == 0, said
    assert "another publish may be filling it: waiting for it to publish" in said, said
    race.one_release_with(race.first, said, other_said)
