"""A rebuild of a published tag (issue 20): the same tarballs are `reproduced` (a success that
changes no store), other tarball bytes are a `conflict` (exit 1, named). And Actions' own
GITHUB_TOKEN, a GitHub App installation token, passes publish's preflight as GitHub answers
for one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from github_server import GitHubServer
from ninfer_kits.errors import BadInput
from ninfer_kits.kit import kitdir
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.publish.holdings import PublishConflict
from ninfer_kits.release import ledger
from ninfer_kits.stores.b2 import B2Target
from test_publish_b2 import B2_CANARY, Recording, download, listed
from test_publish_github import NAMES, asset_bytes, changes
from test_publish_support import (
    ASSET,
    CANARY,
    FAST,
    TAG,
    Captured,
    b2_simulator,
    b2_store,
    cli,
    github_store,
    info_for,
    load,
    make_kit,
    matrix_file,
    publish,
)

INSTALLATION = "ghs_INSTALLATION0123456789abcdefCANARY"


@pytest.fixture
def rebuild(tmp_path: Path, program: Path, kit: kitdir.KitDir) -> kitdir.KitDir:
    """The same kit built again: the same tarball, a BUILDINFO.txt whose run.* lines differ
    (so SHA256SUMS differs too)."""
    again = make_kit(tmp_path / "rebuild", program, info=info_for(run=(("jobs", "4"),)))
    assert again.sha256 == kit.sha256
    assert again.buildinfo_sha256 != kit.buildinfo_sha256
    return again


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    with GitHubServer() as running:
        running.add_repo("o/r")
        running.add_token(CANARY)
        yield running


def run(server: GitHubServer, kit: kitdir.KitDir, tmp: Path, token: str = CANARY,
        captured: Captured | None = None, **options: Any) -> Any:
    captured = captured or Captured()
    matrix = load(matrix_file(tmp, github=GitHubTarget(repository="o/r", api=server.base_url)))
    store = github_store(server, "o/r", token, captured.reporter, FAST, 5)
    return publish(kit.path, matrix, [store], tmp, captured.reporter, **options)


def remote_assets(server: GitHubServer) -> dict[str, tuple[int, str, str]]:
    """name → (id, updated_at, sha256) of the published release's assets, as the API says."""
    release = server.client(CANARY).get_repo("o/r").get_release(TAG)
    return {asset.name: (asset.id, asset.updated_at.isoformat(), asset.digest)
            for asset in release.get_assets()}


# --------------------------------------------------------------------------- reproduced


def test_a_rebuild_with_the_same_tarball_is_reproduced_and_changes_no_asset(
        server: GitHubServer, kit: kitdir.KitDir, rebuild: kitdir.KitDir,
        tmp_path: Path) -> None:
    first = run(server, kit, tmp_path)
    assert first.result == "published"
    before = remote_assets(server)
    data_before = {a.name: a.data for a in server.snapshot().published("o/r", TAG).assets}
    entry_path = tmp_path / "releases" / f"{TAG}.toml"
    entry_path.unlink()  # the ledger commit of the first run was lost
    mark = len(server.events)
    captured = Captured()
    again = run(server, rebuild, tmp_path, captured=captured)
    assert again.result == "reproduced" and again.changed_stores == ()
    assert changes(server, mark) == []  # no state change at all on the server
    assert remote_assets(server) == before  # asset ids, updated_at, digests
    assert {a.name: a.data for a in server.snapshot().published("o/r", TAG).assets} \
        == data_before
    assert "reproduced: " in captured.all() and "keeps its own BUILDINFO.txt" in captured.all()
    # The ledger heals, and records the release as it is (its own BUILDINFO.txt and sums)
    assert again.ledger_changed and set(again.kept) == {"BUILDINFO.txt", "SHA256SUMS"}
    entry = ledger.read(entry_path)
    recorded = {asset.name: asset.sha256 for asset in entry.assets}
    assert recorded["BUILDINFO.txt"] == kit.buildinfo_sha256 != rebuild.buildinfo_sha256
    assert recorded["SHA256SUMS"] == hashlib.sha256(asset_bytes(kit, "SHA256SUMS")).hexdigest()
    assert recorded[ASSET] == kit.sha256
    # Once more: the ledger already says so
    third = run(server, rebuild, tmp_path)
    assert third.result == "reproduced" and not third.changed


def test_without_a_digest_the_comparison_downloads_through_the_retry(
        server: GitHubServer, kit: kitdir.KitDir, rebuild: kitdir.KitDir, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from github.GitReleaseAsset import GitReleaseAsset

    run(server, kit, tmp_path)
    monkeypatch.setattr(GitReleaseAsset, "digest", property(lambda self: None))
    mark = len(server.requests("GET", "/api/storage/"))
    server.faults.drop(after_bytes=100, method="GET", path="/api/storage/")  # one reset
    server.faults.status(502, method="GET", path="/api/storage/", nth=3)
    change_mark = len(server.events)
    again = run(server, rebuild, tmp_path)
    assert again.result == "reproduced" and changes(server, change_mark) == []
    downloads = server.requests("GET", "/api/storage/")[mark:]
    # each asset read back once to compare, the two that differ once more to keep them, and
    # the two requests that failed once retried
    assert len(downloads) == len(NAMES) + 2 + 2
    assert not server.faults.pending


def test_without_a_digest_a_conflict_still_names_both_sha256s(
        server: GitHubServer, kit: kitdir.KitDir, program: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from github.GitReleaseAsset import GitReleaseAsset

    other = make_kit(tmp_path / "other", program, payload=b"a different, longer build")
    assert other.size != kit.size
    server.add_release("o/r", TAG, assets={name: asset_bytes(other, name) for name in NAMES})
    monkeypatch.setattr(GitReleaseAsset, "digest", property(lambda self: None))
    mark = len(server.events)
    with pytest.raises(PublishConflict, match=rf"{ASSET} is sha256 {other.sha256} there, "
                                              rf"{kit.sha256} in this build"):
        run(server, kit, tmp_path)
    assert changes(server, mark) == []


def test_an_older_release_without_the_pyz_is_reproduced_as_it_is(
        server: GitHubServer, kit: kitdir.KitDir, rebuild: kitdir.KitDir,
        tmp_path: Path) -> None:
    older = [name for name in NAMES if name != "ninfer-kits.pyz"]
    server.add_release("o/r", TAG, assets={name: asset_bytes(kit, name) for name in older})
    mark = len(server.events)
    again = run(server, rebuild, tmp_path)
    assert again.result == "reproduced" and changes(server, mark) == []
    assert set(again.kept) == {"BUILDINFO.txt", "SHA256SUMS", "ninfer-kits.pyz"}
    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")
    assert [asset.name for asset in entry.assets] == older


def test_a_rebuild_through_the_cli_says_reproduced_and_conflict_in_its_outputs(
        tmp_path: Path, program: Path, kit: kitdir.KitDir, rebuild: kitdir.KitDir) -> None:
    matrix = matrix_file(tmp_path)
    outputs = tmp_path / "outputs"

    def publish_cli(folder: Path, *more: str) -> Any:
        outputs.unlink(missing_ok=True)
        return cli("publish", folder, "--matrix", matrix, "--out", tmp_path / "published",
                   "--cache-dir", tmp_path / "cache", "--github-output",
                   "--ledger-dir", tmp_path / "releases", *more,
                   env={"GITHUB_OUTPUT": str(outputs)})

    def said() -> dict[str, str]:
        return dict(line.split("=", 1) for line in outputs.read_text().splitlines())

    assert publish_cli(kit.path).returncode == 0 and said()["outcome"] == "published"
    dry = publish_cli(rebuild.path, "--dry-run", "--out", str(tmp_path / "dry"))
    assert dry.returncode == 0, dry.stderr
    assert f"outcome as the ledger knows {TAG}: would be reproduced" in dry.stdout
    assert said()["outcome"] == "reproduced"
    (tmp_path / "releases" / f"{TAG}.toml").unlink()
    done = publish_cli(rebuild.path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"reproduced {TAG} (kit example)")
    assert said() | {"ledger": ""} == {"tag": TAG, "outcome": "reproduced", "changed": "true",
                                       "ledger": "", "ledger_mode": "commit"}
    assert (tmp_path / "published" / TAG / "BUILDINFO.txt").read_bytes() == \
        kit.buildinfo_path.read_bytes()
    other = make_kit(tmp_path / "other", program, payload=b"another build")
    dry = publish_cli(other.path, "--dry-run", "--out", str(tmp_path / "dry2"))
    assert "would be conflict" in dry.stdout and said()["outcome"] == "conflict"
    refused = publish_cli(other.path)
    assert refused.returncode == 1
    assert f"kit example: tag {TAG} is published already with other kit bytes" in refused.stderr
    assert kit.sha256 in refused.stderr and other.sha256 in refused.stderr
    assert said() == {"tag": TAG, "changed": "false", "ledger": "", "ledger_mode": "commit",
                      "outcome": "conflict"}
    assert (tmp_path / "published" / TAG / ASSET).read_bytes() == kit.tarball.read_bytes()
    no_output = cli("publish", kit.path, "--matrix", matrix, "--github-output")
    assert no_output.returncode == 2 and "$GITHUB_OUTPUT is not set" in no_output.stderr


def test_b2_a_rebuild_is_reproduced_and_github_gets_the_same_files(
        server: GitHubServer, kit: kitdir.KitDir, rebuild: kitdir.KitDir,
        tmp_path: Path) -> None:
    """The first run put the release on B2 and failed before GitHub; the rebuild finds B2's
    files with its tarball (reproduced there, untouched) and completes GitHub with B2's own
    BUILDINFO.txt and sums, so both stores and the ledger hold one release."""
    Recording.parts = Recording.files = Recording.fail_parts = 0
    Recording.hook = None
    api, key_id, _ = b2_simulator(Recording)
    api.session.raw_api.key_id_to_key[key_id].key = B2_CANARY
    target = B2Target(bucket="ninfer-kits", prefix="kits/")
    captured = Captured()
    matrix = load(matrix_file(tmp_path, b2=target,
                              github=GitHubTarget(repository="o/r", api=server.base_url)))
    publish(kit.path, matrix, [b2_store(api, key_id, B2_CANARY, captured.reporter)], tmp_path,
            captured.reporter)
    b2_before = {name: (v.id_, v.upload_timestamp) for name, v in listed(api).items()}
    outcome = publish(rebuild.path, matrix, [
        b2_store(api, key_id, B2_CANARY, captured.reporter),
        github_store(server, "o/r", CANARY, captured.reporter)], tmp_path, captured.reporter)
    assert {name: (v.id_, v.upload_timestamp) for name, v in listed(api).items()} == b2_before
    assert outcome.reproduced and outcome.changed_stores == ("github",)
    assert outcome.result == "published"
    release = server.snapshot().published("o/r", TAG)
    assert release is not None
    for name in NAMES:
        asset = release.asset(name)
        assert asset is not None and asset.data == asset_bytes(kit, name), name
        assert download(api, name) == asset.data
    assert download(api, "BUILDINFO.txt") == kit.buildinfo_path.read_bytes()


def test_b2_other_tarball_bytes_are_a_conflict(tmp_path: Path, program: Path,
                                               kit: kitdir.KitDir) -> None:
    api, key_id, _ = b2_simulator()
    api.session.raw_api.key_id_to_key[key_id].key = B2_CANARY
    captured = Captured()
    matrix = load(matrix_file(tmp_path, b2=B2Target(bucket="ninfer-kits", prefix="kits/")))
    publish(kit.path, matrix, [b2_store(api, key_id, B2_CANARY, captured.reporter)], tmp_path,
            captured.reporter)
    other = make_kit(tmp_path / "other", program, payload=b"another build")
    before = {name: v.id_ for name, v in listed(api).items()}
    with pytest.raises(PublishConflict, match=rf"{kit.sha256} there, {other.sha256} in this"):
        publish(other.path, matrix, [b2_store(api, key_id, B2_CANARY, captured.reporter)],
                tmp_path, captured.reporter)
    assert {name: v.id_ for name, v in listed(api).items()} == before


# --------------------------------------------------------------------------- installation tokens


def test_the_server_answers_an_installation_token_as_github_does(server: GitHubServer) -> None:
    server.add_token(INSTALLATION, permissions={"contents": "write"})
    import requests

    def get(path: str, token: str) -> requests.Response:
        return requests.get(f"{server.base_url}{path}", params={"per_page": 1}, timeout=5,
                            headers={"Authorization": f"token {token}"})

    repo = get("/repos/o/r", INSTALLATION).json()
    assert repo["permissions"]["push"] is False and repo["permissions"]["pull"] is True
    listed_repos = get("/installation/repositories", INSTALLATION)
    assert listed_repos.status_code == 200
    assert [r["full_name"] for r in listed_repos.json()["repositories"]] == ["o/r"]
    assert "X-OAuth-Scopes" not in listed_repos.headers
    refused = get("/installation/repositories", CANARY)
    assert refused.status_code == 403
    assert refused.json()["message"].startswith("You must authenticate with an installation "
                                                "access token")
    assert get("/repos/o/r", CANARY).json()["permissions"]["push"] is True


def test_publish_proceeds_with_an_installation_token_that_may_write(
        server: GitHubServer, kit: kitdir.KitDir, tmp_path: Path) -> None:
    server.add_token(INSTALLATION, permissions={"contents": "write"})
    captured = Captured()
    outcome = run(server, kit, tmp_path, INSTALLATION, captured)
    assert outcome.result == "published"
    assert "installation token" in captured.all()
    release = server.snapshot().published("o/r", TAG)
    assert release is not None and {a.name for a in release.assets} == set(NAMES)
    asked = server.requests("GET", "/api/v3/installation/repositories")
    assert [event.status for event in asked] == [200]
    assert INSTALLATION not in captured.all()


def test_an_installation_token_that_may_not_write_fails_at_its_first_write(
        server: GitHubServer, kit: kitdir.KitDir, tmp_path: Path) -> None:
    server.add_token(INSTALLATION, permissions={"contents": "read"})
    with pytest.raises(BadInput, match=r"cannot write o/r: it lacks contents=write .*"
                                       r"`permissions: contents: write` for Actions' "
                                       r"GITHUB_TOKEN"):
        run(server, kit, tmp_path, INSTALLATION)
    refused = server.requests("POST", "/api/v3/repos/o/r/releases")
    assert [event.status for event in refused] == [403]
    assert refused[0].body["message"] == "Resource not accessible by integration"
    assert server.snapshot().of("o/r") == []  # no release, draft or published


def test_a_user_token_without_push_is_still_refused_at_preflight(
        kit: kitdir.KitDir, tmp_path: Path) -> None:
    with GitHubServer() as server:
        server.add_repo("o/r", writable=False)
        server.add_token(CANARY)
        with pytest.raises(BadInput, match="can read o/r but cannot write it: it lacks push"):
            run(server, kit, tmp_path)
        assert [e.status for e in server.requests("GET", "/api/v3/installation/repositories")] \
            == [403]
        assert server.requests("POST") == []
