"""The `github` store's client on PyGithub, through net.github_client: a draft release, filled
and verified, published last (docs/publish.md, stages 4 and 10). A create or upload that a
retry answers 422 `already_exists` was our own earlier success, checked as such.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from github import GithubException
from github.GithubException import UnknownObjectException
from github.GitRelease import GitRelease
from github.GitReleaseAsset import GitReleaseAsset
from github.Repository import Repository

from ninfer_kits.errors import BadInput, CheckFailed
from ninfer_kits.log import Progress, Reporter
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.net.github_client import client, failure, transient
from ninfer_kits.net.remote import Secret
from ninfer_kits.net.retry import RetryPolicy, ServiceFailed, once
from ninfer_kits.publish.store import (
    Asset,
    ConcurrentPublish,
    Found,
    Presence,
    Release,
    StoreRecord,
    VerifyFailed,
)
from ninfer_kits.stores.github import download_base

T = TypeVar("T")

MAX_ASSET_SIZE = 2 * 1024**3 - 1  # "each file included in a release must be under 2 GiB"
DOWNLOAD_CHUNK = 1 << 20
UPLOADED = "uploaded"
# A publish filling a draft changes it every few seconds (or uploads one file for longer: a
# big tarball); a draft unchanged this long was left behind by one that ended.
QUIET_DRAFT = 120.0


class ReleaseConflict(CheckFailed):
    """The store holds something under this release's names that is not this kit."""


class GitHubStore:
    name = "github"
    max_asset_size: int | None = MAX_ASSET_SIZE

    def __init__(self, target: GitHubTarget, token: Secret, *, retry: RetryPolicy,
                 reporter: Reporter, timeout: float = 60.0) -> None:
        self.target = target
        self._token = token
        self._retry = retry
        self._reporter = reporter
        self._gh = client(target.api, token, retry, timeout)
        self._repo: Repository | None = None
        self._release: GitRelease | None = None
        self._tag = ""
        self._spec: Release | None = None  # the release being made (inspect names it)
        self._assets: dict[str, GitReleaseAsset] = {}  # name → the asset on the release
        self._uploaded: dict[str, GitReleaseAsset] = {}
        self._held_sha256: dict[str, str] = {}  # name → sha256 of the asset there, if other

    def describe(self) -> str:
        return f"GitHub {self.target.repository} ({self.target.api})"

    def download_base(self, tag: str) -> str:
        return download_base(self.target, tag)

    def _call(self, what: str, operation: Callable[[], T]) -> T:
        try:
            return self._retry.call(f"GitHub: {what}", operation, transient, self._reporter)
        except GithubException as error:
            raise self._failure(what, error) from None

    def _failure(self, what: str, error: GithubException) -> Exception:
        return failure(what, error, self._token)

    @property
    def repo(self) -> Repository:
        if self._repo is None:
            self.preflight()
        assert self._repo is not None
        return self._repo

    def preflight(self) -> None:
        name = self.target.repository
        try:
            repo = self._retry.call(f"GitHub: reading {name}", lambda: _loaded(
                self._gh.get_repo(name)), transient, self._reporter)
        except UnknownObjectException:
            raise BadInput(f"GitHub: repository {name} does not exist at {self.target.api}, or "
                           f"the token from {self._token.source} cannot see it") from None
        except GithubException as error:
            raise self._failure(f"reading {name}", error) from None
        permissions = repo.permissions
        can_push = permissions is not None and (permissions.push or permissions.maintain
                                                or permissions.admin)
        if not can_push and self._installation():
            self._reporter.info(f"GitHub: the token from {self._token.source} is a GitHub App "
                                f"installation token (as Actions' GITHUB_TOKEN is): GitHub "
                                f"does not say what it may write; the write check says")
        elif not can_push:
            raise BadInput(
                f"GitHub: the token from {self._token.source} can read {name} but cannot write "
                f"it: it lacks push access (releases need Contents: read and write on a "
                f"fine-grained token, the repo scope on a classic one)")
        scopes = self._gh.oauth_scopes
        if scopes is not None and not {"repo", "public_repo"} & set(scopes) and \
                any(scope for scope in scopes):
            raise BadInput(f"GitHub: the token from {self._token.source} has the scopes "
                           f"{', '.join(scopes)}, none of which writes releases: it lacks "
                           f"the repo scope")
        if repo.archived:
            raise BadInput(f"GitHub: {name} is archived (read-only): nothing can be published")
        self._probe_write(repo)
        self._repo = repo

    def _installation(self) -> bool:
        """Is the token an App installation token (whose `permissions` say push false whatever
        it was granted)? Only one may list `/installation/repositories`."""
        url = f"{self.target.api}/installation/repositories"
        try:
            self._retry.call("GitHub: asking whether the token is an installation's",
                             lambda: self._gh.requester.requestJsonAndCheck(
                                 "GET", url, parameters={"per_page": 1}),
                             transient, self._reporter)
        except GithubException as error:
            if error.status in (401, 403, 404):
                return False
            raise self._failure("asking whether the token is an installation's", error) from None
        return True

    def _probe_write(self, repo: Repository) -> None:
        """Can this token create releases? A create without a tag changes nothing: 422 (no
        tag_name) when it may, 404 or 403 when not. `permissions` are the user's, not a
        fine-grained token's."""
        url = f"{repo.url}/releases"
        try:
            self._retry.call(f"GitHub: checking that the token can write {repo.full_name}",
                             lambda: self._gh.requester.requestJsonAndCheck(
                                 "POST", url, input={"draft": True}),
                             transient, self._reporter)
        except GithubException as error:
            if error.status == 422:
                return  # allowed to write; the empty create was refused, as it must be
            headers = {key.lower(): value for key, value in (error.headers or {}).items()}
            wanted = headers.get("x-accepted-github-permissions") or (
                f"the scope {headers['x-accepted-oauth-scopes']}"
                if headers.get("x-accepted-oauth-scopes") else "")
            lacks = f"it lacks {wanted}" if wanted else "it lacks write access to its contents"
            if error.status in (403, 404):
                raise BadInput(f"GitHub: the token from {self._token.source} cannot write "
                               f"{repo.full_name}: {lacks} (releases need Contents: read and "
                               f"write on a fine-grained token, the repo scope on a classic "
                               f"one, `permissions: contents: write` for Actions' "
                               f"GITHUB_TOKEN)") from None
            raise self._failure(f"checking that the token can write {repo.full_name}",
                                error) from None
        raise ServiceFailed(f"GitHub: {repo.full_name} accepted a release without a tag; "
                            f"this is not a GitHub API publish can trust")

    def wait_for_the_other(self, timeout: float, poll: float = 2.0,
                           quiet: float = QUIET_DRAFT) -> bool:
        """Whether the other publish (ConcurrentPublish) published our tag within `timeout`;
        a draft that stays as it is for `quiet` seconds has no publish filling it."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while True:
            found = self._find_release()
            if found is not None and not found.draft:
                return True
            now = _draft_state(found)
            if now != last:
                last, since = now, time.monotonic()
            if time.monotonic() >= min(deadline, since + quiet):
                return False
            self._retry.sleep(poll)  # a real wait: the other publish takes real time

    def _find_release(self) -> GitRelease | None:
        """Our tag's published release (one request), else its oldest draft (by listing)."""
        def by_tag() -> GitRelease | None:
            try:
                return self.repo.get_release(self._tag)
            except UnknownObjectException:
                return None

        published_one = self._call(f"reading the release {self._tag}", by_tag)
        if published_one is not None and not published_one.draft:
            return published_one
        releases = self._call(f"listing the releases of {self.target.repository}", lambda: [
            release for release in self.repo.get_releases() if release.tag_name == self._tag])
        published = [release for release in releases if not release.draft]
        drafts = sorted((release for release in releases if release.draft),
                        key=lambda release: release.id)
        if len(drafts) > 1 and not published:
            self._reporter.warning(f"GitHub: {len(drafts)} draft releases for {self._tag}; "
                                   f"completing the oldest (id {drafts[0].id})")
        chosen = published or drafts
        return chosen[0] if chosen else None

    def _list_assets(self) -> dict[str, GitReleaseAsset]:
        release = self._release
        if release is None:
            return {}
        assets = self._call(f"listing the assets of {self._tag}",
                            lambda: list(release.get_assets()))
        return {asset.name: asset for asset in assets}

    def inspect(self, release: Release) -> Found:
        self._tag, self._spec = release.tag, release
        self._held_sha256 = {}
        self._release = self._find_release()
        self._assets = self._list_assets()
        presence = {asset.name: self._presence(self._assets.get(asset.name), asset)
                    for asset in release.assets}
        starters = [name for name, asset in self._assets.items() if asset.state != UPLOADED]
        notes = tuple(f"GitHub: {name} was left unfinished by a failed upload (state "
                      f"{self._assets[name].state}); it will be deleted" for name in starters)
        published = self._release is not None and not self._release.draft
        immutable = published and bool(_attribute(self._release, "immutable"))
        held = {name: self._held_sha256.get(name, "") for name, state in presence.items()
                if state is Presence.DIFFERENT}
        return Found(published=published, assets=presence, immutable=immutable, notes=notes,
                     held_sha256={name: sha256 for name, sha256 in held.items() if sha256},
                     published_within=None if self._release is None or published
                     else self.wait_for_the_other)

    def _presence(self, remote: GitReleaseAsset | None, asset: Asset) -> Presence:
        if remote is None or remote.state != UPLOADED:
            return Presence.ABSENT
        digest = _attribute(remote, "digest")
        # GitHub's digest; without one, the bytes read back, so a conflict names both sha256s
        sha256 = digest.removeprefix("sha256:") if digest else self._download_sha256(remote)
        if sha256 == asset.sha256:
            return Presence.SAME
        self._held_sha256[asset.name] = sha256
        return Presence.DIFFERENT

    def download(self, name: str, dest: Path) -> None:
        remote = self._assets[name]

        def download() -> None:
            _, _, chunks = remote.download_asset(chunk_size=DOWNLOAD_CHUNK)
            with dest.open("wb") as out:
                for chunk in chunks:
                    out.write(chunk)

        self._call(f"downloading {name} of {self._tag}", download)

    def _download_sha256(self, remote: GitReleaseAsset) -> str:
        def download() -> str:
            digest = hashlib.sha256()
            _, _, chunks = remote.download_asset(chunk_size=DOWNLOAD_CHUNK)
            for chunk in chunks:
                digest.update(chunk)
            return digest.hexdigest()

        return self._call(f"downloading {remote.name} back to check it", download)

    def unpublish(self) -> None:
        release = self._release
        if release is None or release.draft:
            return
        self._reporter.warning(f"GitHub: --replace: {self._tag} goes back to a draft until "
                               f"its assets are replaced")
        self._release = self._call(f"turning {self._tag} back into a draft", lambda: (
            release.update_release(name=release.name or self._tag, message=release.body or "",
                                   draft=True, prerelease=release.prerelease)))

    def _draft(self, release: Release | None) -> GitRelease:
        if release is None:
            raise AssertionError("GitHubStore: inspect() comes before put()")
        if self._release is not None:
            return self._release
        create = once(self._find_release, lambda: self.repo.create_git_release(
            release.tag, name=release.title, message=release.notes, draft=True))
        try:
            created = self._retry.call(f"GitHub: creating the draft release {release.tag}",
                                       create, transient, self._reporter)
        except GithubException as error:
            if not _already_exists(error):
                raise self._failure(f"creating the draft release {release.tag}", error) from None
            found = self._find_release()  # our own earlier create, answered late
            if found is None:
                raise self._failure(f"creating the draft release {release.tag}", error) from None
            created = found
        if not created.draft:
            raise ConcurrentPublish(f"GitHub: release {release.tag} was published by someone "
                                    f"else while this publish ran", self.wait_for_the_other)
        self._release = created
        return created

    def _delete(self, remote: GitReleaseAsset, why: str) -> None:
        def delete() -> None:
            with contextlib.suppress(UnknownObjectException):  # gone: an earlier try did it
                remote.delete_asset()

        self._reporter.info(f"GitHub: deleting {remote.name} ({why})")
        self._call(f"deleting {remote.name}", delete)

    def put(self, asset: Asset, *, replace: bool) -> None:
        release = self._draft(self._spec)
        remote = self._assets.pop(asset.name, None)
        if remote is not None:
            if remote.state == UPLOADED and not replace:
                raise ReleaseConflict(f"GitHub: {asset.name} is on {self._tag} with other "
                                      f"content; give --replace to replace it")
            self._delete(remote, "with other content: --replace" if remote.state == UPLOADED
                         else f"state {remote.state}, left by a failed upload")
        progress = self._reporter.progress(f"GitHub: uploading {asset.name}")
        for _ in range(3):
            try:
                uploaded = self._retry.call(f"GitHub: uploading {asset.name}",
                                            lambda: _upload(release, asset, progress),
                                            transient, self._reporter)
            except GithubException as error:
                if error.status == 404:
                    self._check_still_ours(release)
                elif not _already_exists(error):
                    raise self._failure(f"uploading {asset.name}", error) from None
                existing = self._list_assets().get(asset.name)
                if existing is None:
                    continue
                if existing.state != UPLOADED:
                    self._delete(existing, f"state {existing.state}, left by a failed upload")
                    continue
                if self._presence(existing, asset) is not Presence.SAME:
                    raise ConcurrentPublish(
                        f"GitHub: {asset.name} appeared on {self._tag} with other content "
                        f"while this publish uploaded it: another publish is running",
                        self.wait_for_the_other) from None
                uploaded = existing  # our own earlier try, answered late
            self._uploaded[asset.name] = uploaded
            return
        raise ServiceFailed(f"GitHub: uploading {asset.name}: the server kept answering that "
                            f"it exists, and kept losing it")

    def _check_still_ours(self, release: GitRelease) -> None:
        """After an upload answered 404: another publish deleted the file in flight (its state
        is `starter` to everyone else, as a failed upload's is), so it is looked for again, or
        deleted the draft it uploads into (its own, losing the race): settled as any race."""
        found = self._find_release()
        if found is None or found.id != release.id:
            raise ConcurrentPublish(f"GitHub: the draft of {self._tag} was deleted by another "
                                    f"publish while this one uploaded into it",
                                    self.wait_for_the_other) from None

    def verify(self, asset: Asset) -> None:
        uploaded = self._uploaded.get(asset.name)
        if uploaded is None:
            uploaded = self._list_assets().get(asset.name)
        if uploaded is None:
            raise VerifyFailed(f"GitHub: {asset.name} is not on {self._tag} after its upload")
        fresh = self._call(f"reading {asset.name} back",
                           lambda: _loaded(self.repo.get_release_asset(uploaded.id)))
        presence = self._presence(fresh, asset)
        if presence is not Presence.SAME:
            raise VerifyFailed(
                f"GitHub: {asset.name} on {self._tag} is not the kit's file after upload (state "
                f"{fresh.state}, {fresh.size:,} bytes, digest {_attribute(fresh, 'digest')}; "
                f"the kit's: {asset.size:,} bytes, sha256:{asset.sha256})")

    def finish(self, release: Release) -> StoreRecord:
        current = self._draft(release) if self._release is None else self._release
        if current.draft:
            self._reporter.info(f"GitHub: publishing the draft {release.tag}")
            current = self._publish_draft(current, release)
            self._release = current
        assets = self._list_assets()
        return StoreRecord(
            store=self.name, location=current.html_url,
            urls={asset.name: assets[asset.name].browser_download_url
                  for asset in release.assets if asset.name in assets},
            details=(("repository", self.target.repository), ("api", self.target.api),
                     ("release_id", str(current.id))))


    def _publish_draft(self, draft: GitRelease, release: Release) -> GitRelease:
        """The draft published; when another publish's own draft of the tag was published
        first (each made one, neither seeing the other's), ours is deleted and the race is
        settled as any other (ConcurrentPublish)."""
        try:
            return self._retry.call(f"GitHub: publishing {release.tag}", lambda: (
                draft.update_release(name=release.title, message=release.notes, draft=False,
                                     prerelease=False)), transient, self._reporter)
        except GithubException as error:
            if not _already_exists(error):
                raise self._failure(f"publishing {release.tag}", error) from None
        self._reporter.info(f"GitHub: {release.tag} was published from another draft "
                            f"meanwhile; deleting this publish's draft (id {draft.id})")
        self._call(f"deleting the draft {release.tag}", draft.delete_release)
        self._release = None
        raise ConcurrentPublish(f"GitHub: release {release.tag} was published by another "
                                f"publish while this one uploaded into its own draft",
                                self.wait_for_the_other)


class _Reading(io.FileIO):
    """The asset's file as an upload body, reporting progress."""

    def __init__(self, path: str, total: int, progress: Progress) -> None:
        super().__init__(path, "rb")
        self._total, self._done, self._progress = total, 0, progress

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self._done += len(data or b"")
        self._progress.bytes(self._done, self._total)
        return data or b""


def _upload(release: GitRelease, asset: Asset, progress: Progress) -> GitReleaseAsset:
    body = _Reading(str(asset.path), asset.size, progress)
    try:
        return release.upload_asset_from_memory(body, asset.size, asset.name,
                                                content_type=asset.content_type)
    finally:
        body.close()


def _loaded(obj: T) -> T:
    """A PyGithub object with its attributes fetched (inside the retry, not later)."""
    _attribute(obj, "url")
    getattr(obj, "name", None)
    return obj


def _attribute(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        return None


def _draft_state(release: GitRelease | None) -> tuple[object, ...]:
    """What changes while a publish fills a draft: its assets, their states and sizes."""
    if release is None:
        return ()
    return (release.id, tuple(sorted((asset.name, asset.state, asset.size)
                                     for asset in release.assets)))


def _already_exists(error: GithubException) -> bool:
    if error.status != 422 or not isinstance(error.data, dict):
        return False
    errors = error.data.get("errors")
    return isinstance(errors, list) and any(
        isinstance(item, dict) and item.get("code") == "already_exists" for item in errors)
