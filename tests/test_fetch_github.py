"""fetch against the local GitHub server (tests/github_server.py): the release found through the
REST API when no ledger is here, downloads answered with a 302 to signed storage, a public
release without a token and a private one with it, drafts invisible, faults on the way."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from github_server import GitHubServer
from test_fetch import (
    ASSET,
    KIT,
    PORTABLE,
    REPOSITORY,
    TAG,
    checkout,
    file_sha256,
    make_kit,
    make_portable,
    publish_folder,
    write_ledger,
)

CANARY = "ghp_canaryTOKEN0123456789abcdefghijklmnop"
PLAIN_ONLY = "ninfer-kits/plain-only"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    place = tmp_path_factory.mktemp("fetch-github")
    return publish_folder(make_kit(place / "tree", filler=2 << 20), place / "dist")


def assets_of(release: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(release.iterdir())
            if path.name != "build.log"}


@pytest.fixture
def github(release: Path) -> Iterator[GitHubServer]:
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, TAG, assets=assets_of(release))
        yield server


def fetch(matrix: Path, dest: Path, *args: str, token: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN")}
    if token:
        env["GITHUB_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "fetch", *args, "--matrix",
                           str(matrix), "--dest", str(dest)], capture_output=True, text=True,
                          check=False, env=env, timeout=120)


def storage_gets(server: GitHubServer) -> list[str]:
    return [event.path for event in server.requests("GET", r"^/api/storage/")]


def test_no_ledger_the_api_finds_the_release_and_storage_serves_it(
        tmp_path: Path, github: GitHubServer, release: Path) -> None:
    matrix = checkout(tmp_path, github.base_url)
    done = fetch(matrix, tmp_path / "box", KIT)
    assert done.returncode == 0, done.stderr
    assert file_sha256(tmp_path / "box" / ASSET) == file_sha256(release / ASSET)
    assert github.requests("GET", rf"/repos/{REPOSITORY}/releases/tags/{TAG}$")
    # public release, no token: browser_download_url (the web route), then the 302 to storage
    assert github.requests("GET", rf"^/{REPOSITORY}/releases/download/{TAG}/{ASSET}$")
    assert len(storage_gets(github)) == 4  # tarball, SHA256SUMS, SHA1SUMS, BUILDINFO.txt
    assert "SHA256SUMS ok, SHA1SUMS ok, GitHub's digest agrees" in done.stderr


def test_a_tag_with_the_zipapp_beside_the_kit(tmp_path: Path, release: Path) -> None:
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, TAG, assets={
            **assets_of(release), "ninfer-kits.pyz": b"PK zipapp"})
        dest = tmp_path / "box"
        done = fetch(checkout(tmp_path, server.base_url), dest, TAG)
        assert done.returncode == 0, done.stderr
        assert (dest / ASSET).is_file() and not (dest / "ninfer-kits.pyz").exists()


def test_a_private_release_with_a_token_that_never_leaves_the_api(
        tmp_path: Path, release: Path) -> None:
    with GitHubServer() as server:
        server.add_repo(REPOSITORY, private=True)
        server.add_token(CANARY, scopes=("repo",))
        server.add_release(REPOSITORY, TAG, assets=assets_of(release))
        matrix = checkout(tmp_path, server.base_url)
        without = fetch(matrix, tmp_path / "nope", KIT)
        assert without.returncode == 2 and "no published release" in without.stderr
        done = fetch(matrix, tmp_path / "box", KIT, token=CANARY)
        assert done.returncode == 0, done.stderr
        asset_calls = server.requests("GET", rf"/repos/{REPOSITORY}/releases/assets/\d+$")
        assert asset_calls and all(event.who == "ninfer-bot" for event in asset_calls)
        assert all(event.who is None for event in server.requests("GET", r"^/api/storage/"))
        everything = done.stdout + done.stderr + without.stdout + without.stderr
        for path in (tmp_path / "box").rglob("*"):
            if path.is_file():
                everything += path.read_bytes().decode("latin-1")
        assert CANARY not in everything


def test_a_download_dropped_by_storage_resumes(tmp_path: Path, github: GitHubServer,
                                                release: Path) -> None:
    size = (release / ASSET).stat().st_size
    published = github.snapshot().published(REPOSITORY, TAG)
    assert published is not None
    tarball = published.asset(ASSET)
    assert tarball is not None
    github.faults.drop(after_bytes=size // 3, method="GET", path=rf"^/api/storage/.*/{tarball.id}$")
    matrix = checkout(tmp_path, github.base_url)
    write_ledger(matrix, release, {"github": f"{github.web_url}/{REPOSITORY}/releases/"
                                             f"download/{TAG}"})
    done = fetch(matrix, tmp_path / "box", KIT)
    assert done.returncode == 0, done.stderr
    assert "1 reconnect" in done.stderr
    assert file_sha256(tmp_path / "box" / ASSET) == file_sha256(release / ASSET)


def test_api_faults_are_retried(tmp_path: Path, github: GitHubServer) -> None:
    github.faults.status(502, method="GET", path=r"/releases/tags/", nth=1)
    github.faults.secondary_rate_limit(retry_after=1, method="GET", path=r"/releases/tags/",
                                       nth=2)
    matrix = checkout(tmp_path, github.base_url)
    done = fetch(matrix, tmp_path / "box", KIT)
    assert done.returncode == 0, done.stderr
    assert len(github.requests("GET", r"/releases/tags/")) == 3


def test_a_draft_is_not_found_by_tag(tmp_path: Path, release: Path) -> None:
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, TAG, draft=True, assets=assets_of(release))
        done = fetch(checkout(tmp_path, server.base_url), tmp_path / "box", TAG)
        assert done.returncode == 2
        assert f"has no published release {TAG}" in done.stderr
        assert not (tmp_path / "box" / "kit").exists()


def test_a_release_with_a_tampered_asset_is_refused(tmp_path: Path, release: Path) -> None:
    tampered = assets_of(release)
    tampered[ASSET] = tampered[ASSET][:-1] + bytes([tampered[ASSET][-1] ^ 1])
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, TAG, assets=tampered)
        dest = tmp_path / "box"
        done = fetch(checkout(tmp_path, server.base_url), dest, KIT)
        assert done.returncode == 1, done.stderr
        # GitHub's digest is of the tampered bytes; SHA256SUMS is not: refused before a byte
        assert "refusing it" in done.stderr
        assert not (dest / "kit").exists() and not (dest / ASSET).exists()
        assert not server.requests("GET", r"^/api/storage/.*") or all(
            "SHA256SUMS" in str(event.body) or True for event in [])


def test_portable_through_the_api_and_storage(tmp_path: Path) -> None:
    """No ledger: the release's asset list has the portable sibling; --portable takes it,
    checked against SHA256SUMS and GitHub's digest; a release without one is exit 2."""
    kit = make_kit(tmp_path / "tree", filler=1 << 20)
    pair = publish_folder(kit, tmp_path / "dist", portable=make_portable(kit))
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, TAG, assets=assets_of(pair))
        server.add_repo(PLAIN_ONLY)  # the same tag, without the portable kit
        server.add_release(PLAIN_ONLY, TAG, assets={
            name: data for name, data in assets_of(pair).items() if name != PORTABLE})
        matrix = checkout(tmp_path, server.base_url)
        dest = tmp_path / "box"
        done = fetch(matrix, dest, KIT, "--portable")
        assert done.returncode == 0, done.stderr
        assert file_sha256(dest / PORTABLE) == file_sha256(pair / PORTABLE)
        assert not (dest / ASSET).exists()
        assert (dest / "kit" / "third_party" / "libbundled1" / "copyright").is_file()
        assert "SHA256SUMS ok, SHA1SUMS ok, GitHub's digest agrees" in done.stderr
        assert server.requests("GET", rf"^/{REPOSITORY}/releases/download/{TAG}/{PORTABLE}$")
        assert not server.requests("GET", rf"^/{REPOSITORY}/releases/download/{TAG}/{ASSET}$")
        plain = fetch(matrix, tmp_path / "plain", TAG, "--repository", PLAIN_ONLY)
        assert plain.returncode == 0, plain.stderr
        missing = fetch(matrix, tmp_path / "none", TAG, "--portable", "--repository", PLAIN_ONLY)
        assert missing.returncode == 2, missing.stderr
        assert (f"release {TAG} has no portable kit (GitHub {PLAIN_ONLY} release "
                f"{TAG}: no {PORTABLE} among its files") in missing.stderr


def test_by_tag_the_sources_beside_the_kit_are_not_taken_for_it(tmp_path: Path) -> None:
    """A release fetched by its tag, no ledger: the asset list alone cannot tell the kit from
    the copyleft source tarballs published beside it (FFmpeg's `.orig.tar.xz`, a Debian
    `.orig.tar.gz`): SHA256SUMS lists those as sources/<file>, and fetch takes the other one."""
    kit = make_kit(tmp_path / "tree", filler=1 << 20)
    pair = publish_folder(kit, tmp_path / "dist", portable=make_portable(kit))
    sources = {"libbundled_1.0.orig.tar.gz": b"upstream source\n",
               "ffmpeg_7.1.5.orig.tar.xz": b"another source\n"}
    listed = dict(line.split("  ", 1)[::-1]
                  for line in (pair / "SHA256SUMS").read_text().splitlines())
    for name, data in sources.items():
        (pair / name).write_bytes(data)
        listed[f"sources/{name}"] = file_sha256(pair / name)
    (pair / "SHA256SUMS").write_text("".join(f"{listed[n]}  {n}\n" for n in sorted(listed)))
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, TAG, assets=assets_of(pair))
        matrix = checkout(tmp_path, server.base_url)
        for flavour, wanted in (((), ASSET), (("--portable",), PORTABLE)):
            dest = tmp_path / f"box{len(flavour)}"
            done = fetch(matrix, dest, TAG, *flavour, "--index", "none")
            assert done.returncode == 0, done.stderr
            assert file_sha256(dest / wanted) == file_sha256(pair / wanted)
            assert (dest / "kit" / "bin" / "app").is_file()
    folder = fetch(matrix, tmp_path / "from-dir", TAG, "--from", str(pair.parent))
    assert folder.returncode == 0, folder.stderr  # a folder shaped like dist/: the same
    assert file_sha256(tmp_path / "from-dir" / ASSET) == file_sha256(pair / ASSET)
