"""A local GitHub REST server for the tests: releases and their assets over real HTTP.

GitHub cannot be reached from where the tests run, so the publish code is tested against this
server, driven by PyGithub unmodified. It speaks the part of GitHub's REST API that publishing
uses, with GitHub's answers (status codes, error bodies, headers) as the documentation, the
OpenAPI description (`@octokit/openapi`) and public reports describe them:

- repositories and tokens, set up by the test: `add_repo`, `add_token`, `set_branch`;
- releases: list (drafts only for those who can push), get by id, by tag (published only),
  latest, create, update (publishing a draft creates its tag), delete;
- assets: list, get, rename, delete, upload (`upload_url`, raw body, `?name=&label=`), download
  (the API URL with `Accept: application/octet-stream`, or `browser_download_url`: a 302 to a
  signed storage URL, which serves the bytes with `Range` support);
- `Link` pagination, `ETag`/`If-None-Match` (a 304 is not counted), rate-limit headers on every
  API answer and `GET /rate_limit`, `GET /user`, `GET /repos/{o}/{r}/commits/{ref}` (with
  `Accept: application/vnd.github.sha`, the bare SHA);
- pull requests (.github/workflows/toolchains.yml proposes new pins): create (head and base
  branches of the served git remote; GitHub's 422s for a missing branch, no commits between
  them, or an open pull request from the same head), list (`state`, `head` as OWNER:BRANCH,
  `base`), get; numbered with the repository's issues, as on GitHub (but not listed among
  them); `pull_views` shows them to a test;
- issues (`ninfer-kits alert`): list (`state`, `labels`, `per_page`/`page` with `Link`), get,
  create (with labels, made when missing, as for a user who can push), update (title, body,
  state, state_reason, labels), comments list and create, labels list and create;
  `issue_view`/`issue_views` show them to a test;
- `faults`: a deterministic schedule of failures (status codes, dropped connections, secondary
  rate limits, 429, delays, a change applied and then a failure answered);
- git over smart HTTP (`add_git_remote`): `git http-backend` as CGI behind the API's port at
  `{web_url}/{owner}/{repo}.git` for a repository registered with a bare repository's path;
  reads of a public repository need no credentials, a push needs a token that may write, as
  Basic auth `x-access-token:<token>` (what actions/checkout's `http.extraheader` sends), and
  its files at a ref as `{web_url}/{owner}/{repo}/raw/{ref}/{path}` (a 302, as to
  raw.githubusercontent.com, then the file as text/plain);
- `events`: every request, state change and fault, in order; `observe()` calls a function with
  a snapshot after every state change, so a test can check an invariant at every moment.

Three listeners on 127.0.0.1: the API (`base_url`, which also serves the web routes of
`html_url` and `browser_download_url`), uploads and storage. PyGithub refuses absolute URLs
that are on the API's host but another port (`Requester.__assertUrlAllowed`), and follows
`upload_url` and the 302 of a download with the same check; so with the default
`layout="ghes"` the server hands out upload and storage URLs on the API's host and port under
`/api/uploads` and `/api/storage`, as GitHub Enterprise Server does. `layout="dotcom"` hands
out the upload and storage listeners' own ports, as github.com does with uploads.github.com and
objects.githubusercontent.com: for clients that follow URLs as given (requests, curl).

Where this server knowingly goes beyond the published schemas, it follows GitHub's observed
behaviour: an upload that fails leaves its asset in state `starter` (the OpenAPI enum says
`uploaded` or `open`); draft releases never conflict by tag, so a retried create of a draft
makes a second draft (`duplicate_drafts=False` makes any release for the tag a conflict).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import http.server
import json
import os
import re
import secrets
import socket
import struct
import subprocess
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

API = "/api/v3"
UPLOADS = "/api/uploads"
STORAGE = "/api/storage/releases"
REPO = r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)"
GIT_PATH = re.compile(r"/(?P<o>[^/]+)/(?P<r>[^/]+?)\.git(?P<rest>/info/refs|/git-upload-pack"
                      r"|/git-receive-pack|/HEAD|/objects/.+)")
RAW_PATH = re.compile(r"(?P<served>/_raw)?/(?P<o>[^/_][^/]*)/(?P<r>[^/]+)/raw/(?P<ref>[^/]+)/"
                      r"(?P<path>[^?]+)")
DOCS = "https://docs.github.com/rest"
GIB = 1024**3
MAX_ASSET_SIZE = 2 * GIB  # "Each file included in a release must be under 2 GiB."
HOUR = 3600
Layout = Literal["ghes", "dotcom"]
FaultAction = Literal["status", "drop", "secondary_rate_limit", "too_many_requests", "delay",
                      "hold", "hold_upload", "apply_then_status", "apply_then_drop"]
SECONDARY_MESSAGE = ("You have exceeded a secondary rate limit. Please wait a few minutes before "
                     "you try again. If you reach out to GitHub Support for help, please include "
                     "the request ID {}.")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node_id(prefix: str, number: int) -> str:
    return f"{prefix}_" + base64.urlsafe_b64encode(struct.pack(">Q", number)).decode().rstrip("=")


def _asset_name(name: str) -> str:
    """GitHub renames asset files with special characters, and leading or trailing periods."""
    return re.sub(r"[^A-Za-z0-9._+@~-]", ".", name).strip(".")


# ---------------------------------------------------------------------------------------------
# What a test sees: events, snapshots, faults


@dataclass(frozen=True, eq=False)
class Event:
    """One entry of `GitHubServer.events`.

    kind "request": `name` is "METHOD path", `status` the answer, `who` the token's login (never
    the token), `schema` names the OpenAPI schema of the JSON answered (`release`,
    `release-asset`, `release[]`, `release-asset[]`, `basic-error`, `validation-error`) and
    `body` that JSON. kind "change": `name` is e.g. "release.created", "asset.started",
    "asset.uploaded"; `detail` says what. kind "fault": `name` is the fault's action."""

    seq: int
    kind: Literal["request", "change", "fault"]
    name: str
    method: str = ""
    path: str = ""
    status: int | None = None
    who: str | None = None
    schema: str | None = None
    body: Any = None
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AssetView:
    id: int
    name: str
    label: str
    state: str
    content_type: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class PullView:
    """A pull request as a test sees it (`GitHubServer.pull_views`)."""

    number: int
    title: str
    body: str | None
    state: str
    head: str  # the branch
    base: str
    head_sha: str  # the head branch's commit when the pull request was opened


@dataclass(frozen=True)
class IssueView:
    """An issue as a test sees it (`GitHubServer.issue_views`): comments are their bodies."""

    number: int
    title: str
    body: str | None
    state: str
    state_reason: str | None
    labels: tuple[str, ...]
    comments: tuple[str, ...]


@dataclass(frozen=True)
class ReleaseView:
    repo: str
    id: int
    tag_name: str
    name: str | None
    body: str | None
    draft: bool
    prerelease: bool
    immutable: bool
    assets: tuple[AssetView, ...]

    def asset(self, name: str) -> AssetView | None:
        return next((a for a in self.assets if a.name == name), None)


@dataclass(frozen=True)
class Snapshot:
    """Every release the server holds, at one moment (`seq`: the event that made it)."""

    seq: int
    releases: tuple[ReleaseView, ...]

    def of(self, repo: str) -> list[ReleaseView]:
        return [r for r in self.releases if r.repo == repo]

    def published(self, repo: str, tag: str) -> ReleaseView | None:
        return next((r for r in self.releases
                     if r.repo == repo and r.tag_name == tag and not r.draft), None)


@dataclass
class Fault:
    """One rule of `GitHubServer.faults`: requests whose method is `method` (or "*") and whose
    path (with its /api/v3, /api/uploads or /api/storage prefix, without the query) matches the
    regex `path` are counted; the `nth` to the `nth + times - 1`-th of them get `action`:

    - "status": answer `status` (a failed upload leaves its asset in state `starter` when
      `starter`, after the whole body was read); with `message`, its JSON message is that
      text, `{authorization}` replaced by the request's Authorization header (a hostile
      server echoing the token back);
    - "drop": close the connection with a reset, after reading `after_bytes` of the request body
      (an upload: its asset stays `starter`), or for a download from storage after sending
      `after_bytes` of the file;
    - "secondary_rate_limit": 403 with GitHub's message and `Retry-After: retry_after`;
    - "too_many_requests": 429 with `Retry-After`;
    - "delay": wait `seconds`, then answer as usual;
    - "hold": wait until `gate` is set (at most `seconds`), then answer as usual: a client held
      mid-request for as long as a test needs, however slowly the machine runs;
    - "hold_upload": an upload whose asset is made (listed, state `starter`) and whose body is
      then not read until `gate` is set: an upload in flight, as another client sees it;
    - "apply_then_status", "apply_then_drop": do what the request asks, then answer `status`, or
      reset the connection, instead of the real answer.

    `fired` counts the requests it answered."""

    action: FaultAction
    method: str = "*"
    path: str = ".*"
    nth: int = 1
    times: int = 1
    status: int = 502
    retry_after: int = 1
    seconds: float = 0.0
    after_bytes: int = 0
    starter: bool = True
    message: str | None = None
    gate: threading.Event | None = None
    seen: int = 0
    fired: int = 0

    def _count(self, method: str, path: str) -> bool:
        if self.method not in ("*", method) or not re.search(self.path, path):
            return False
        self.seen += 1
        return self.nth <= self.seen < self.nth + self.times

    @property
    def done(self) -> bool:
        return self.fired >= self.times


class Faults:
    """The fault schedule: rules in the order added; the first rule whose count says so answers
    a request (every matching rule counts it)."""

    def __init__(self) -> None:
        self._rules: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._rules.append(fault)
        return fault

    def status(self, status: int = 502, **match: Any) -> Fault:
        return self.add(Fault("status", status=status, **match))

    def drop(self, after_bytes: int = 0, **match: Any) -> Fault:
        return self.add(Fault("drop", after_bytes=after_bytes, **match))

    def secondary_rate_limit(self, retry_after: int = 1, **match: Any) -> Fault:
        return self.add(Fault("secondary_rate_limit", status=403, retry_after=retry_after, **match))

    def too_many_requests(self, retry_after: int = 1, **match: Any) -> Fault:
        return self.add(Fault("too_many_requests", status=429, retry_after=retry_after, **match))

    def delay(self, seconds: float, **match: Any) -> Fault:
        return self.add(Fault("delay", seconds=seconds, **match))

    def hold(self, gate: threading.Event, seconds: float = 120, **match: Any) -> Fault:
        return self.add(Fault("hold", gate=gate, seconds=seconds, **match))

    def hold_upload(self, gate: threading.Event, seconds: float = 120, **match: Any) -> Fault:
        return self.add(Fault("hold_upload", gate=gate, seconds=seconds, **match))

    def apply_then_status(self, status: int = 502, **match: Any) -> Fault:
        return self.add(Fault("apply_then_status", status=status, **match))

    def apply_then_drop(self, **match: Any) -> Fault:
        return self.add(Fault("apply_then_drop", **match))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def __iter__(self) -> Iterator[Fault]:
        with self._lock:
            return iter(list(self._rules))

    @property
    def pending(self) -> list[Fault]:
        """Rules that have not answered all their requests yet."""
        return [f for f in self if not f.done]

    def _take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            chosen = None
            for rule in self._rules:
                if rule._count(method, path) and chosen is None:
                    chosen = rule
            if chosen is not None:
                chosen.fired += 1
            return chosen


# ---------------------------------------------------------------------------------------------
# State


@dataclass
class _Token:
    token: str
    login: str
    user_id: int
    scopes: tuple[str, ...] | None
    permissions: dict[str, str] | None
    can_write: bool | None
    limit: int = 5000
    used: int = 0
    reset: int = 0
    # "installation": a GitHub App installation token (ghs_…, what Actions' GITHUB_TOKEN is);
    # `repositories`: the full names it was granted (None: every repository of the server)
    kind: Literal["user", "installation"] = "user"
    repositories: tuple[str, ...] | None = None


@dataclass
class _Asset:
    id: int
    name: str
    label: str
    content_type: str
    uploader: _Token | None
    state: str = "starter"
    data: bytes = b""
    download_count: int = 0
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)


@dataclass
class _Release:
    id: int
    tag_name: str
    target_commitish: str
    name: str | None
    body: str | None
    draft: bool
    prerelease: bool
    author: _Token | None
    untagged: str = field(default_factory=lambda: secrets.token_hex(10))
    immutable: bool = False
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    published_at: str | None = None
    assets: dict[int, _Asset] = field(default_factory=dict)

    @property
    def url_tag(self) -> str:
        """The tag in html_url and browser_download_url: a draft's is `untagged-<hex>`."""
        return f"untagged-{self.untagged}" if self.draft else self.tag_name


@dataclass
class _Repo:
    owner: str
    name: str
    id: int
    private: bool
    writable: bool
    immutable_releases: bool
    default_branch: str
    branches: dict[str, str]
    tags: dict[str, str] = field(default_factory=dict)
    releases: dict[int, _Release] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class _Comment:
    id: int
    body: str
    user: _Token | None
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)


@dataclass
class _Issue:
    id: int
    number: int
    title: str
    body: str | None
    user: _Token | None
    labels: list[str]
    state: str = "open"
    state_reason: str | None = None
    comments: list[_Comment] = field(default_factory=list)
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    closed_at: str | None = None
    closed_by: _Token | None = None


@dataclass
class _Pull:
    id: int
    number: int
    title: str
    body: str | None
    user: _Token | None
    head: str
    base: str
    head_sha: str
    base_sha: str
    state: str = "open"
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)


@dataclass
class _Issues:
    """A repository's issues and pull requests (numbered together from 1, as on GitHub) and
    labels (name → (id, color, description))."""

    issues: dict[int, _Issue] = field(default_factory=dict)
    labels: dict[str, tuple[int, str, str | None]] = field(default_factory=dict)
    pulls: dict[int, _Pull] = field(default_factory=dict)

    def next_number(self) -> int:
        return len(self.issues) + len(self.pulls) + 1


class _Drop(Exception):
    """Reset the connection instead of answering (`graceful`: close it, mid-answer)."""

    def __init__(self, graceful: bool = False) -> None:
        super().__init__()
        self.graceful = graceful


@dataclass
class _Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    schema: str | None = None
    json: Any = None
    drop_after: int | None = None  # send this many bytes of the body, then reset


@dataclass
class _Request:
    handler: _Handler
    method: str
    path: str
    query: dict[str, str]
    origin: str
    fault: Fault | None = None
    token: _Token | None = None
    body_read: bool = False
    data: Any = None  # the JSON body of an API request

    def header(self, name: str) -> str | None:
        return self.handler.headers.get(name)

    @property
    def length(self) -> int | None:
        value = self.header("Content-Length")
        return int(value) if value is not None and value.strip().isdigit() else None

    def read_body(self, limit: int | None = None) -> bytes:
        """The request body (at most `limit` bytes of it: the connection is then unusable)."""
        if self.body_read:
            return b""
        rfile = self.handler.rfile
        if (self.header("Transfer-Encoding") or "").lower() == "chunked":
            out = bytearray()
            while limit is None or len(out) < limit:
                size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                out += rfile.read(size)
                rfile.readline()
            self.body_read = limit is None
            return bytes(out if limit is None else out[:limit])
        length = self.length or 0
        want = length if limit is None else min(limit, length)
        out = bytearray()
        while len(out) < want:
            chunk = rfile.read(min(want - len(out), 1 << 20))
            if not chunk:
                raise _Drop()
            out += chunk
        self.body_read = want == length
        return bytes(out)

    def json_body(self) -> Any:
        raw = self.read_body()
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return None


# ---------------------------------------------------------------------------------------------
# The server


class GitHubServer:
    """A local GitHub (REST API, uploads, storage) on 127.0.0.1, as a context manager:

        with GitHubServer() as server:
            server.add_repo("owner/name")
            server.add_token("t0ken", scopes=("repo",))
            gh = server.client("t0ken")               # a configured github.Github
            repo = gh.get_repo("owner/name")
            ...

    On leaving, it raises if the server failed internally or an observer raised."""

    def __init__(self, *, layout: Layout = "ghes", duplicate_drafts: bool = True,
                 max_asset_size: int = MAX_ASSET_SIZE, anonymous_limit: int = 60) -> None:
        self.layout = layout
        self.duplicate_drafts = duplicate_drafts
        self.max_asset_size = max_asset_size
        self.anonymous_limit = anonymous_limit
        self.faults = Faults()
        self.errors: list[str] = []  # tracebacks of the server's own failures
        self._lock = threading.RLock()
        self._events: list[Event] = []
        self._observers: list[Callable[[Event, Snapshot], None]] = []
        self._repos: dict[str, _Repo] = {}
        self._tokens: dict[str, _Token] = {}
        self._anonymous: dict[str, _Token] = {}
        self._git_remotes: dict[str, Path] = {}  # "owner/name" (lower case) → bare repository
        self._ids = {"repo": 700000, "user": 1000, "release": 200000000, "asset": 300000000}
        self._issues: dict[str, _Issues] = {}  # repo (lowercase) → its issues and labels
        self._secret = secrets.token_bytes(16)
        self._servers: list[http.server.ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []
        self.api_port = self.upload_port = self.storage_port = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> GitHubServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if exc[0] is None:
            self.check()

    def start(self) -> None:
        ghes = {"uploads", "storage"} if self.layout == "ghes" else set()
        roles = {"api": {"api", "web"} | ghes, "uploads": {"uploads"}, "storage": {"storage"}}
        ports = {}
        for name, serves in roles.items():
            handler = type(f"_{name.title()}Handler", (_Handler,),
                           {"app": self, "roles": frozenset(serves)})
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            server.daemon_threads = True
            ports[name] = server.server_address[1]
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                      name=f"github-server-{name}", daemon=True)
            thread.start()
            self._servers.append(server)
            self._threads.append(thread)
        self.api_port, self.upload_port, self.storage_port = (
            ports["api"], ports["uploads"], ports["storage"])

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers.clear()
        self._threads.clear()

    def check(self) -> None:
        """Raise if the server failed internally or an observer raised."""
        if self.errors:
            raise AssertionError("the local GitHub server failed:\n" + "\n".join(self.errors))

    # -- URLs --------------------------------------------------------------------------------

    @property
    def web_url(self) -> str:
        """Where html_url and browser_download_url point (the API's host and port)."""
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def base_url(self) -> str:
        """PyGithub's `base_url`."""
        return f"{self.web_url}{API}"

    @property
    def upload_base(self) -> str:
        port = self.api_port if self.layout == "ghes" else self.upload_port
        return f"http://127.0.0.1:{port}{UPLOADS}"

    @property
    def storage_base(self) -> str:
        port = self.api_port if self.layout == "ghes" else self.storage_port
        return f"http://127.0.0.1:{port}{STORAGE}"

    def client(self, token: str | None, *, retries: int | None = 2, timeout: int = 10,
               per_page: int = 30, **kwargs: Any) -> Any:
        """A PyGithub client for this server: no pauses between requests; PyGithub's own
        GithubRetry, small (`retries` attempts more, no backoff, a secondary rate limit waits
        its `Retry-After` only); `retries=None`: none."""
        import github  # a test dependency (the `test` extra)

        retry = (None if retries is None else
                 github.GithubRetry(total=retries, backoff_factor=0, secondary_rate_wait=0))
        auth = github.Auth.Token(token) if token is not None else None
        return github.Github(base_url=self.base_url, auth=auth, retry=retry, timeout=timeout,
                             per_page=per_page, seconds_between_requests=0,
                             seconds_between_writes=0, **kwargs)

    # -- setup -------------------------------------------------------------------------------

    def _next(self, kind: str) -> int:
        self._ids[kind] += 1
        return self._ids[kind]

    def add_repo(self, full_name: str, *, writable: bool = True, private: bool = False,
                 immutable_releases: bool = False, default_branch: str = "main",
                 head: str | None = None, empty: bool = False) -> None:
        """A repository. `writable`: the token's user can push to it (GitHub's `permissions`);
        `immutable_releases`: a release is immutable once published (its assets cannot change);
        `empty`: no commit yet (no branch), so a release can be a draft but never published:
        its tag has nothing to point at (422, as GitHub answers)."""
        owner, name = full_name.split("/")
        head = head or hashlib.sha1(full_name.encode()).hexdigest()
        with self._lock:
            self._repos[full_name.lower()] = _Repo(
                owner, name, self._next("repo"), private, writable, immutable_releases,
                default_branch, {} if empty else {default_branch: head})

    def add_token(self, token: str, *, scopes: tuple[str, ...] | None = ("repo",),
                  permissions: Mapping[str, str] | None = None, can_write: bool | None = None,
                  login: str = "ninfer-bot", limit: int = 5000,
                  repositories: tuple[str, ...] | None = None) -> None:
        """A personal access token, or (a token starting `ghs_`) a GitHub App installation
        token as Actions' GITHUB_TOKEN is: `permissions` as the workflow grants them (e.g.
        {"contents": "write"}; default none but metadata), `repositories` those it may use
        (default: all), login `github-actions[bot]`; see `_installation` below.
        A personal access token: Classic (the default): `scopes`, sent back in
        `X-OAuth-Scopes`; writing needs `repo` (or `public_repo` for a public repository).
        Fine-grained: `permissions` (e.g. {"contents": "write"}), no scopes header; writing needs
        contents=write. `can_write` overrides both. A token that may not write gets what GitHub
        answers: 404 for a classic token, 403 "Resource not accessible by personal access
        token" for a fine-grained one. Either way it writes only to a `writable` repository."""
        with self._lock:
            if token.startswith("ghs_"):
                self._tokens[token] = _installation(token, permissions, repositories,
                                                    self._next("user"), limit)
                return
            if any(t.login == login for t in self._tokens.values()):
                user_id = next(t.user_id for t in self._tokens.values() if t.login == login)
            else:
                user_id = self._next("user")
            self._tokens[token] = _Token(
                token, login, user_id, None if permissions is not None else tuple(scopes or ()),
                dict(permissions) if permissions is not None else None, can_write, limit,
                reset=int(time.time()) + HOUR)

    def set_rate_limit(self, token: str, *, remaining: int | None = None,
                       limit: int | None = None, reset_in: int | None = None) -> None:
        with self._lock:
            tok = self._tokens[token]
            if limit is not None:
                tok.limit = limit
            if remaining is not None:
                tok.used = tok.limit - remaining
            if reset_in is not None:
                tok.reset = int(time.time()) + reset_in

    def rate_limit(self, token: str) -> tuple[int, int]:
        """(remaining, used) of a token's core limit."""
        with self._lock:
            tok = self._tokens[token]
            return tok.limit - tok.used, tok.used

    def set_branch(self, full_name: str, branch: str, sha: str) -> None:
        with self._lock:
            self._repo(full_name).branches[branch] = sha

    def add_git_remote(self, full_name: str, bare: Path) -> str:
        """Serve the bare git repository `bare` as the git remote of `full_name` (added with
        add_repo) over smart HTTP; its clone URL."""
        with self._lock:
            self._repo(full_name)
            self._git_remotes[full_name.lower()] = Path(bare)
        return f"{self.web_url}/{full_name}.git"

    def add_release(self, full_name: str, tag: str, *, draft: bool = False,
                    prerelease: bool = False, name: str | None = None, body: str | None = "",
                    assets: Mapping[str, bytes] | None = None) -> int:
        """A release made directly (no HTTP), with its assets uploaded; its id."""
        with self._lock:
            repo = self._repo(full_name)
            rel = _Release(self._next("release"), tag, repo.default_branch, name or tag, body,
                           draft, prerelease, None)
            repo.releases[rel.id] = rel
            self._change("release.created", repo, rel)
            if not draft:
                self._publish(repo, rel)
            for asset_name, data in (assets or {}).items():
                self.add_asset(full_name, rel.id, asset_name, data)
            return rel.id

    def add_asset(self, full_name: str, release_id: int, name: str, data: bytes, *,
                  content_type: str = "application/octet-stream", state: str = "uploaded",
                  label: str = "") -> int:
        with self._lock:
            repo = self._repo(full_name)
            rel = repo.releases[release_id]
            asset = _Asset(self._next("asset"), name, label, content_type, None, state,
                           data if state == "uploaded" else b"")
            rel.assets[asset.id] = asset
            self._change("asset.uploaded" if state == "uploaded" else "asset.started",
                         repo, rel, asset)
            return asset.id

    # -- what the tests look at --------------------------------------------------------------

    @property
    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def requests(self, method: str | None = None, path: str = "") -> list[Event]:
        """Request events, of `method` (or any), whose path matches the regex `path`."""
        return [e for e in self.events if e.kind == "request"
                and method in (None, e.method) and re.search(path, e.path)]

    def observe(self, callback: Callable[[Event, Snapshot], None]) -> None:
        """Call `callback(event, snapshot)` after every state change, while the state is locked:
        it sees every state a client could have seen. What it raises fails the test."""
        with self._lock:
            self._observers.append(callback)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(len(self._events), tuple(
                ReleaseView(repo.full_name, rel.id, rel.tag_name, rel.name, rel.body, rel.draft,
                            rel.prerelease, rel.immutable,
                            tuple(AssetView(a.id, a.name, a.label, a.state, a.content_type, a.data)
                                  for a in rel.assets.values()))
                for repo in self._repos.values() for rel in repo.releases.values()))

    def asset_data(self, full_name: str, asset_id: int) -> bytes:
        with self._lock:
            return self._find_asset(self._repo(full_name), asset_id)[1].data

    # -- internals: events -------------------------------------------------------------------

    def _log(self, kind: Literal["request", "change", "fault"], name: str, **kw: Any) -> Event:
        with self._lock:
            event = Event(len(self._events) + 1, kind, name, **kw)
            self._events.append(event)
            return event

    def _change(self, name: str, repo: _Repo, rel: _Release, asset: _Asset | None = None,
                **detail: Any) -> None:
        with self._lock:
            info = {"repo": repo.full_name, "release": rel.id, "tag": rel.tag_name,
                    "draft": rel.draft, **detail}
            if asset is not None:
                info |= {"asset": asset.id, "name": asset.name, "state": asset.state,
                         "size": len(asset.data)}
            event = self._log("change", name, detail=info)
            if not self._observers:
                return
            snap = self.snapshot()
            for observer in list(self._observers):
                try:
                    observer(event, snap)
                except Exception:
                    self.errors.append(f"observer failed at {event}:\n{traceback.format_exc()}")

    # -- internals: lookups and JSON ---------------------------------------------------------

    def _repo(self, full_name: str) -> _Repo:
        return self._repos[full_name.lower()]

    def _find_asset(self, repo: _Repo, asset_id: int) -> tuple[_Release, _Asset]:
        for rel in repo.releases.values():
            if asset_id in rel.assets:
                return rel, rel.assets[asset_id]
        raise KeyError(asset_id)

    def _user_json(self, tok: _Token | None) -> dict[str, Any]:
        login, uid = (tok.login, tok.user_id) if tok else ("ninfer-bot", 1000)
        api, web = f"{self.base_url}/users/{login}", f"{self.web_url}/{login}"
        return {
            "login": login, "id": uid, "node_id": _node_id("U", uid),
            "avatar_url": f"{self.web_url}/avatars/u/{uid}?v=4", "gravatar_id": "",
            "url": api, "html_url": web, "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions", "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos", "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": "Bot" if tok is not None and tok.kind == "installation" else "User",
            "user_view_type": "public", "site_admin": False,
        }

    def _asset_json(self, repo: _Repo, rel: _Release, asset: _Asset) -> dict[str, Any]:
        uploaded = asset.state == "uploaded"
        return {
            "url": f"{self.base_url}/repos/{repo.full_name}/releases/assets/{asset.id}",
            "id": asset.id, "node_id": _node_id("RA", asset.id), "name": asset.name,
            "label": asset.label, "uploader": self._user_json(asset.uploader),
            "content_type": asset.content_type, "state": asset.state,
            "size": len(asset.data), "digest": (f"sha256:{hashlib.sha256(asset.data).hexdigest()}"
                                                if uploaded else None),
            "download_count": asset.download_count, "created_at": asset.created_at,
            "updated_at": asset.updated_at,
            "browser_download_url": (f"{self.web_url}/{repo.full_name}/releases/download/"
                                     f"{urllib.parse.quote(rel.url_tag)}/"
                                     f"{urllib.parse.quote(asset.name)}"),
        }

    def _release_json(self, repo: _Repo, rel: _Release) -> dict[str, Any]:
        url = f"{self.base_url}/repos/{repo.full_name}/releases/{rel.id}"
        tag = urllib.parse.quote(rel.tag_name, safe="")
        archive = f"{self.base_url}/repos/{repo.full_name}/{{}}ball/{tag}"
        return {
            "url": url, "assets_url": f"{url}/assets",
            "upload_url": (f"{self.upload_base}/repos/{repo.full_name}/releases/{rel.id}"
                           "/assets{?name,label}"),
            "html_url": (f"{self.web_url}/{repo.full_name}/releases/tag/"
                         f"{urllib.parse.quote(rel.url_tag, safe='')}"),
            "id": rel.id, "author": self._user_json(rel.author),
            "node_id": _node_id("RE", rel.id), "tag_name": rel.tag_name,
            "target_commitish": rel.target_commitish, "name": rel.name, "draft": rel.draft,
            "immutable": rel.immutable, "prerelease": rel.prerelease,
            "created_at": rel.created_at, "updated_at": rel.updated_at,
            "published_at": rel.published_at,
            "assets": [self._asset_json(repo, rel, a) for a in rel.assets.values()],
            "tarball_url": None if rel.draft else archive.format("tar"),
            "zipball_url": None if rel.draft else archive.format("zip"),
            "body": rel.body,
        }

    def _repo_json(self, repo: _Repo, tok: _Token | None) -> dict[str, Any]:
        api = f"{self.base_url}/repos/{repo.full_name}"
        owner = self._user_json(tok) | {"login": repo.owner,
                                        "url": f"{self.base_url}/users/{repo.owner}"}
        out = {
            "id": repo.id, "node_id": _node_id("R", repo.id), "name": repo.name,
            "full_name": repo.full_name, "private": repo.private, "owner": owner,
            "html_url": f"{self.web_url}/{repo.full_name}", "description": None, "fork": False,
            "url": api, "releases_url": f"{api}/releases{{/id}}", "tags_url": f"{api}/tags",
            "commits_url": f"{api}/commits{{/sha}}",
            "clone_url": f"{self.web_url}/{repo.full_name}.git",
            "default_branch": repo.default_branch,
            "visibility": "private" if repo.private else "public", "archived": False,
            "disabled": False, "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z", "pushed_at": "2024-01-01T00:00:00Z",
        }
        if tok is not None:
            push = repo.writable and tok.kind == "user"  # an installation's: always false
            out["permissions"] = {"admin": False, "maintain": False, "push": push, "triage": push,
                                  "pull": True}
        return out

    # -- internals: access -------------------------------------------------------------------

    def _may_read(self, tok: _Token | None, repo: _Repo) -> bool:
        if tok is not None and not _granted(tok, repo):
            return False
        if not repo.private:
            return True
        if tok is None:
            return False
        return tok.permissions is not None or "repo" in (tok.scopes or ())

    def _may_write(self, tok: _Token | None, repo: _Repo, permission: str = "contents") -> bool:
        """May `tok` write `permission` (a fine-grained or installation permission: contents,
        issues) of `repo`; a classic token's `repo` scope covers every one."""
        if tok is None or not repo.writable or not _granted(tok, repo):
            return False
        if tok.can_write is not None:
            return tok.can_write
        if tok.permissions is not None:
            return tok.permissions.get(permission) == "write"
        scopes = tok.scopes or ()
        return "repo" in scopes or ("public_repo" in scopes and not repo.private)

    def _refuse_write(self, tok: _Token | None, permission: str = "contents") -> _Response:
        if tok is None:
            return _error(401, "Requires authentication")
        accepted = {"X-Accepted-GitHub-Permissions": f"{permission}=write"}
        if tok.kind == "installation":
            return _error(403, "Resource not accessible by integration", headers=accepted)
        if tok.permissions is not None:
            return _error(403, "Resource not accessible by personal access token",
                          headers=accepted)
        return _error(404, "Not Found", headers={"X-Accepted-OAuth-Scopes": "repo"})

    def _visible(self, tok: _Token | None, repo: _Repo, rel: _Release) -> bool:
        return not rel.draft or self._may_write(tok, repo)

    # -- internals: state changes ------------------------------------------------------------

    def _publish(self, repo: _Repo, rel: _Release) -> None:
        rel.draft = False
        rel.published_at = _now()
        if rel.tag_name not in repo.tags:
            commitish = rel.target_commitish
            repo.tags[rel.tag_name] = repo.branches.get(commitish, commitish)
        rel.immutable = repo.immutable_releases
        self._change("release.published", repo, rel)

    def _tag_taken(self, repo: _Repo, tag: str, draft: bool, other_than: int | None = None) -> bool:
        if draft and self.duplicate_drafts:
            return False
        return any(r.tag_name == tag and r.id != other_than
                   and (not r.draft or not self.duplicate_drafts) for r in repo.releases.values())

    # -- request handling --------------------------------------------------------------------

    def _handle(self, handler: _Handler, method: str) -> None:
        parts = urllib.parse.urlsplit(handler.path)
        path = parts.path
        query = {k: v[-1] for k, v in
                 urllib.parse.parse_qs(parts.query, keep_blank_values=True).items()}
        origin = f"http://127.0.0.1:{handler.server.server_address[1]}"
        req = _Request(handler, method, path, query, origin)
        if path.startswith(API + "/") or path == API:
            role = "api"
        elif path.startswith(UPLOADS + "/"):
            role = "uploads"
        elif path.startswith(STORAGE + "/"):
            role = "storage"
        else:
            role = "web"
        fault = self.faults._take(method, path)
        if fault is not None:
            self._log("fault", fault.action, method=method, path=path,
                      detail={"nth": fault.nth, "fired": fault.fired})
            if fault.action in ("delay", "hold"):  # a delay: a hold whose gate never opens
                (fault.gate or threading.Event()).wait(fault.seconds)
                fault = None
        req.fault = fault
        resp = self._pre_route(req, role, fault)
        if resp is None and role == "web" and GIT_PATH.fullmatch(path):
            resp = self._git(req)
        if resp is None:
            resp = self._route(req, role) if role in handler.roles else _error(404, "Not Found")
        if fault is not None and fault.action == "apply_then_status":
            resp = _server_error(fault.status)
        if role in ("api", "uploads"):
            resp = self._api_headers(req, resp)
        who = req.token.login if req.token else None
        dropped = fault is not None and fault.action == "apply_then_drop"
        self._log("request", f"{method} {path}", method=method, path=path, status=resp.status,
                  who=who, schema=resp.schema, body=resp.json,
                  detail={"dropped": True} if dropped else {})
        if dropped:
            raise _Drop()
        handler.answer(req, resp)

    def _api_headers(self, req: _Request, resp: _Response) -> _Response:
        """GitHub's headers on an API answer: rate limit, ETag (and 304 for If-None-Match)."""
        headers = dict(resp.headers)
        etag = _etag(resp.body) if resp.status in (200, 201) and resp.body else None
        inm = req.header("If-None-Match") if req.method in ("GET", "HEAD") else None
        not_modified = etag is not None and inm is not None and _etag_matches(inm, etag)
        counted = not not_modified and req.path != f"{API}/rate_limit"
        headers |= self._rate_headers(req, counted)
        headers |= {"X-GitHub-Media-Type": "github.v3; format=json",
                    "X-GitHub-Api-Version-Selected": "2022-11-28",
                    "X-GitHub-Request-Id": secrets.token_hex(8).upper(),
                    "Vary": "Accept, Authorization, Cookie, X-GitHub-OTP",
                    "Cache-Control": "private, max-age=60, s-maxage=60"}
        if req.token is not None and req.token.scopes is not None:
            headers["X-OAuth-Scopes"] = ", ".join(req.token.scopes)
        if etag is not None:
            headers["ETag"] = etag
        if not_modified:
            headers.pop("Content-Type", None)
            return _Response(304, b"", headers)
        return _Response(resp.status, resp.body, headers, resp.schema, resp.json, resp.drop_after)

    def _pre_route(self, req: _Request, role: str, fault: Fault | None) -> _Response | None:
        """The faults answered before the request is looked at."""
        if fault is None:
            return None
        upload = role == "uploads" and req.method == "POST"
        if fault.action in ("secondary_rate_limit", "too_many_requests"):
            req.read_body()
            message = SECONDARY_MESSAGE.format(secrets.token_hex(8).upper())
            return _error(fault.status, message, headers={"Retry-After": str(fault.retry_after)},
                          documentation_url="https://docs.github.com/rest/overview/"
                          "rate-limits-for-the-rest-api#about-secondary-rate-limits")
        if fault.action == "status" and not upload:
            req.read_body()
            if fault.message is not None:
                return _json(fault.status, {"message": fault.message.format(
                    authorization=req.header("Authorization") or "")})
            return _server_error(fault.status)
        download = role == "storage" and req.method == "GET"
        if fault.action == "drop" and not upload and not download:
            req.read_body(fault.after_bytes)
            raise _Drop()
        return None

    def _authenticate(self, req: _Request) -> _Response | None:
        value = req.header("Authorization")
        if value is None:
            return None
        scheme, _, credential = value.partition(" ")
        tok = self._tokens.get(credential.strip())
        if tok is None or scheme.lower() not in ("token", "bearer"):
            return _error(401, "Bad credentials")
        req.token = tok
        return None

    def _route(self, req: _Request, role: str) -> _Response:
        if role == "storage":
            return self._storage(req)
        resp = self._authenticate(req)
        if resp is not None:
            req.read_body()
            return resp
        if role == "web":
            return self._web(req)
        limited = self._spend(req)
        if limited is not None:
            req.read_body()
            return limited
        if role == "uploads":
            return self._uploads(req)
        return self._api(req)

    def _rate_holder(self, req: _Request) -> _Token:
        if req.token is not None:
            return req.token
        ip = req.handler.client_address[0]
        with self._lock:
            if ip not in self._anonymous:
                self._anonymous[ip] = _Token("", "anonymous", 0, None, None, False,
                                             self.anonymous_limit, reset=int(time.time()) + HOUR)
            return self._anonymous[ip]

    def _spend(self, req: _Request) -> _Response | None:
        """Check the primary rate limit (the request is counted in `answer`)."""
        holder = self._rate_holder(req)
        with self._lock:
            if time.time() >= holder.reset:
                holder.used, holder.reset = 0, int(time.time()) + HOUR
            if holder.used >= holder.limit and req.path != f"{API}/rate_limit":
                uid = holder.user_id
                return _error(403, f"API rate limit exceeded for user ID {uid}. If you reach out "
                              "to GitHub Support for help, please include the request ID X.",
                              documentation_url="https://docs.github.com/rest/overview/"
                              "rate-limits-for-the-rest-api#about-the-primary-rate-limit")
        return None

    def _rate_headers(self, req: _Request, counted: bool) -> dict[str, str]:
        holder = self._rate_holder(req)
        with self._lock:
            if counted and holder.used < holder.limit:
                holder.used += 1
            return {"X-RateLimit-Limit": str(holder.limit),
                    "X-RateLimit-Remaining": str(holder.limit - holder.used),
                    "X-RateLimit-Reset": str(holder.reset), "X-RateLimit-Used": str(holder.used),
                    "X-RateLimit-Resource": "core"}

    # -- the API -----------------------------------------------------------------------------

    ROUTES: tuple[tuple[str, str, str], ...] = (
        ("GET", r"/rate_limit", "_rate_limit"),
        ("GET", r"/user", "_get_user"),
        ("GET", REPO, "_get_repo"),
        ("GET", REPO + r"/commits/(?P<ref>.+)", "_get_commit"),
        ("GET", REPO + r"/releases", "_list_releases"),
        ("POST", REPO + r"/releases", "_create_release"),
        ("GET", REPO + r"/releases/latest", "_latest_release"),
        ("GET", REPO + r"/releases/tags/(?P<tag>.+)", "_release_by_tag"),
        ("GET", REPO + r"/releases/assets/(?P<id>\d+)", "_get_asset"),
        ("PATCH", REPO + r"/releases/assets/(?P<id>\d+)", "_patch_asset"),
        ("DELETE", REPO + r"/releases/assets/(?P<id>\d+)", "_delete_asset"),
        ("GET", REPO + r"/releases/(?P<id>\d+)", "_get_release"),
        ("PATCH", REPO + r"/releases/(?P<id>\d+)", "_patch_release"),
        ("DELETE", REPO + r"/releases/(?P<id>\d+)", "_delete_release"),
        ("GET", REPO + r"/releases/(?P<id>\d+)/assets", "_list_assets"),
    )

    def _api(self, req: _Request) -> _Response:
        sub = req.path[len(API):]
        method = "GET" if req.method == "HEAD" else req.method
        req.data = req.json_body()  # before taking the lock
        for verb, pattern, name in self.ROUTES:
            match = re.fullmatch(pattern, sub)
            if match and verb == method:
                args = {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
                if "o" in args:
                    repo = self._repos.get(f"{args.pop('o')}/{args.pop('r')}".lower())
                    if repo is None or not self._may_read(req.token, repo):
                        req.read_body()
                        return _error(404, "Not Found")
                    args["repo"] = repo  # type: ignore[assignment]
                with self._lock:
                    return getattr(self, name)(req, **args)  # type: ignore[no-any-return]
        req.read_body()
        return _error(404, "Not Found")

    def _rate_limit(self, req: _Request) -> _Response:
        holder = self._rate_holder(req)
        core = {"limit": holder.limit, "remaining": holder.limit - holder.used,
                "reset": holder.reset, "used": holder.used, "resource": "core"}
        other = {"limit": 30, "remaining": 30, "reset": int(time.time()) + 60, "used": 0}
        return _json(200, {"resources": {"core": core, "search": other | {"resource": "search"},
                                         "graphql": core | {"resource": "graphql"}},
                           "rate": core})

    def _get_user(self, req: _Request) -> _Response:
        if req.token is None:
            return _error(401, "Requires authentication")
        if req.token.kind == "installation":
            return _error(403, "Resource not accessible by integration")
        return _json(200, self._user_json(req.token) | {"name": None, "email": None})

    def _get_repo(self, req: _Request, repo: _Repo) -> _Response:
        return _json(200, self._repo_json(repo, req.token))

    # -- installation tokens (GitHub App; Actions' GITHUB_TOKEN) ------------------------------

    ROUTES += (("GET", r"/installation/repositories", "_installation_repos"),)

    def _installation_repos(self, req: _Request) -> _Response:
        """The repositories an installation token may use; any other credential is refused as
        GitHub refuses it (semantic-release/github's verify tells the two apart by this)."""
        if req.token is None:
            return _error(401, "Requires authentication")
        if req.token.kind != "installation":
            return _error(403, "You must authenticate with an installation access token in "
                          "order to list repositories for an installation.")
        repos = [r for _, r in sorted(self._repos.items()) if _granted(req.token, r)]
        items, headers = _page(req, [self._repo_json(r, req.token) for r in repos])
        return _json(200, {"total_count": len(repos), "repository_selection": "selected",
                           "repositories": items}, headers=headers)

    def _get_commit(self, req: _Request, repo: _Repo, ref: str) -> _Response:
        sha = repo.branches.get(ref) or repo.tags.get(ref)
        known = set(repo.branches.values()) | set(repo.tags.values())
        if sha is None and ref in known:
            sha = ref
        if sha is None:
            return _json(422, {"message": f"No commit found for SHA: {ref}",
                               "documentation_url": DOCS, "status": "422"})
        if "application/vnd.github.sha" in (req.header("Accept") or ""):
            return _Response(200, sha.encode(),
                             {"Content-Type": "application/vnd.github.sha; charset=utf-8"})
        api = f"{self.base_url}/repos/{repo.full_name}"
        who = {"name": "ninfer", "email": "ninfer@example.invalid", "date": "2024-01-01T00:00:00Z"}
        return _json(200, {
            "sha": sha, "node_id": _node_id("C", int(sha[:12], 16)), "url": f"{api}/commits/{sha}",
            "html_url": f"{self.web_url}/{repo.full_name}/commit/{sha}", "parents": [],
            "commit": {"message": "", "author": who, "committer": who,
                       "tree": {"sha": sha, "url": f"{api}/git/trees/{sha}"},
                       "url": f"{api}/git/commits/{sha}", "comment_count": 0}})

    def _list_releases(self, req: _Request, repo: _Repo) -> _Response:
        rels = sorted((r for r in repo.releases.values() if self._visible(req.token, repo, r)),
                      key=lambda r: r.id, reverse=True)
        items, link = _page(req, rels)
        return _json(200, [self._release_json(repo, r) for r in items], schema="release[]",
                     headers=link)

    def _latest_release(self, req: _Request, repo: _Repo) -> _Response:
        rels = [r for r in repo.releases.values() if not r.draft and not r.prerelease]
        if not rels:
            return _error(404, "Not Found")
        rel = max(rels, key=lambda r: (r.published_at or "", r.id))
        return _json(200, self._release_json(repo, rel), schema="release")

    def _release_by_tag(self, req: _Request, repo: _Repo, tag: str) -> _Response:
        rel = next((r for r in repo.releases.values() if r.tag_name == tag and not r.draft), None)
        if rel is None:
            return _error(404, "Not Found")
        return _json(200, self._release_json(repo, rel), schema="release")

    def _release(self, req: _Request, repo: _Repo, rid: str) -> _Release | None:
        rel = repo.releases.get(int(rid))
        return rel if rel is not None and self._visible(req.token, repo, rel) else None

    def _get_release(self, req: _Request, repo: _Repo, id: str) -> _Response:
        rel = self._release(req, repo, id)
        if rel is None:
            return _error(404, "Not Found")
        return _json(200, self._release_json(repo, rel), schema="release")

    def _create_release(self, req: _Request, repo: _Repo) -> _Response:
        data = req.data
        if not self._may_write(req.token, repo):
            return self._refuse_write(req.token)
        if not isinstance(data, dict):
            return _error(400, "Problems parsing JSON")
        tag = data.get("tag_name")
        if not isinstance(tag, str) or not tag:
            return _invalid("Release", "missing_field", "tag_name")
        draft = bool(data.get("draft", False))
        if self._tag_taken(repo, tag, draft):
            return _invalid("Release", "already_exists", "tag_name")
        commitish = data.get("target_commitish") or repo.default_branch
        if not draft and _no_tag_possible(repo, tag, commitish):
            return _invalid_tag()
        rel = _Release(self._next("release"), tag,
                       data.get("target_commitish") or repo.default_branch, data.get("name"),
                       data.get("body"), draft, bool(data.get("prerelease", False)), req.token)
        repo.releases[rel.id] = rel
        self._change("release.created", repo, rel)
        if not draft:
            self._publish(repo, rel)
        body = self._release_json(repo, rel)
        return _json(201, body, schema="release", headers={"Location": body["url"]})

    def _patch_release(self, req: _Request, repo: _Repo, id: str) -> _Response:
        data = req.data
        rel = self._release(req, repo, id)
        if not self._may_write(req.token, repo):
            return self._refuse_write(req.token)
        if rel is None:
            return _error(404, "Not Found")
        if not isinstance(data, dict):
            return _error(400, "Problems parsing JSON")
        if rel.immutable:
            return _immutable()
        tag = data.get("tag_name") or rel.tag_name
        draft = bool(data.get("draft", rel.draft))
        if (tag != rel.tag_name or not draft) and self._tag_taken(repo, tag, draft, rel.id):
            return _invalid("Release", "already_exists", "tag_name")
        publish = rel.draft and not draft
        if publish and _no_tag_possible(repo, tag, data.get("target_commitish")
                                        or rel.target_commitish):
            return _invalid_tag()
        rel.tag_name = tag
        for key in ("name", "body", "target_commitish"):
            if key in data:
                setattr(rel, key, data[key])
        rel.prerelease = bool(data.get("prerelease", rel.prerelease))
        if draft and not rel.draft:
            rel.draft, rel.published_at = True, None
        rel.updated_at = _now()
        self._change("release.updated", repo, rel)
        if publish:
            self._publish(repo, rel)
        return _json(200, self._release_json(repo, rel), schema="release")

    def _delete_release(self, req: _Request, repo: _Repo, id: str) -> _Response:
        rel = self._release(req, repo, id)
        if not self._may_write(req.token, repo):
            return self._refuse_write(req.token)
        if rel is None:
            return _error(404, "Not Found")
        del repo.releases[rel.id]
        self._change("release.deleted", repo, rel)
        return _Response(204)

    def _list_assets(self, req: _Request, repo: _Repo, id: str) -> _Response:
        rel = self._release(req, repo, id)
        if rel is None:
            return _error(404, "Not Found")
        items, link = _page(req, list(rel.assets.values()))
        return _json(200, [self._asset_json(repo, rel, a) for a in items],
                     schema="release-asset[]", headers=link)

    def _asset(self, req: _Request, repo: _Repo, aid: str) -> tuple[_Release, _Asset] | None:
        try:
            rel, asset = self._find_asset(repo, int(aid))
        except KeyError:
            return None
        return (rel, asset) if self._visible(req.token, repo, rel) else None

    def _get_asset(self, req: _Request, repo: _Repo, id: str) -> _Response:
        found = self._asset(req, repo, id)
        if found is None:
            return _error(404, "Not Found")
        rel, asset = found
        if "application/octet-stream" in (req.header("Accept") or ""):
            return self._redirect_to_storage(repo, rel, asset)
        return _json(200, self._asset_json(repo, rel, asset), schema="release-asset")

    def _patch_asset(self, req: _Request, repo: _Repo, id: str) -> _Response:
        data = req.data
        found = self._asset(req, repo, id)
        if not self._may_write(req.token, repo):
            return self._refuse_write(req.token)
        if found is None:
            return _error(404, "Not Found")
        rel, asset = found
        if rel.immutable:
            return _immutable()
        if not isinstance(data, dict):
            return _error(400, "Problems parsing JSON")
        name = _asset_name(data.get("name") or asset.name)
        if any(a.name == name and a.id != asset.id for a in rel.assets.values()):
            return _invalid("ReleaseAsset", "already_exists", "name")
        asset.name, asset.label = name, data.get("label", asset.label) or ""
        asset.updated_at = _now()
        self._change("asset.updated", repo, rel, asset)
        return _json(200, self._asset_json(repo, rel, asset), schema="release-asset")

    def _delete_asset(self, req: _Request, repo: _Repo, id: str) -> _Response:
        found = self._asset(req, repo, id)
        if not self._may_write(req.token, repo):
            return self._refuse_write(req.token)
        if found is None:
            return _error(404, "Not Found")
        rel, asset = found
        if rel.immutable:
            return _immutable()
        del rel.assets[asset.id]
        self._change("asset.deleted", repo, rel, asset)
        return _Response(204)

    # -- uploads -----------------------------------------------------------------------------

    def _uploads(self, req: _Request) -> _Response:
        match = re.fullmatch(r"/repos/([^/]+)/([^/]+)/releases/(\d+)/assets",
                             req.path[len(UPLOADS):])
        fault = req.fault
        with self._lock:
            refusal = self._upload_refusal(req, match)
            if refusal is None:
                assert match is not None
                repo = self._repo(f"{match[1]}/{match[2]}")
                rel = repo.releases[int(match[3])]
                asset = _Asset(self._next("asset"), _asset_name(req.query["name"]),
                               req.query.get("label", ""),
                               req.header("Content-Type") or "application/octet-stream", req.token)
                starter = fault is None or fault.action not in ("status", "drop") or fault.starter
                if starter:
                    rel.assets[asset.id] = asset
                    self._change("asset.started", repo, rel, asset)
        if refusal is not None or (fault is not None and fault.action in ("status", "drop")):
            if fault is not None and fault.action == "drop":
                req.read_body(fault.after_bytes)
                raise _Drop()
            if fault is not None and fault.action == "status":
                req.read_body()
                return _server_error(fault.status)
            assert refusal is not None
            if (req.length or 0) > self.max_asset_size:
                refusal.headers["Connection"] = "close"  # the body is not read
                return refusal
            req.read_body()
            return refusal
        if fault is not None and fault.action == "hold_upload":
            (fault.gate or threading.Event()).wait(fault.seconds)
        data = req.read_body()
        with self._lock:
            if rel.assets.get(asset.id) is not asset or repo.releases.get(rel.id) is not rel:
                return _error(404, "Not Found")  # deleted while it was uploading
            asset.data, asset.state, asset.updated_at = data, "uploaded", _now()
            self._change("asset.uploaded", repo, rel, asset)
            return _json(201, self._asset_json(repo, rel, asset), schema="release-asset")

    def _upload_refusal(self, req: _Request, match: re.Match[str] | None) -> _Response | None:
        if req.method != "POST" or match is None:
            return _error(404, "Not Found")
        repo = self._repos.get(f"{match[1]}/{match[2]}".lower())
        if repo is None or not self._may_read(req.token, repo):
            return _error(404, "Not Found")
        if not self._may_write(req.token, repo):
            return self._refuse_write(req.token)
        rel = repo.releases.get(int(match[3]))
        if rel is None:
            return _error(404, "Not Found")
        if rel.immutable:
            return _immutable()
        name = _asset_name(req.query.get("name", ""))
        if not name:
            return _invalid("ReleaseAsset", "missing_field", "name")
        if (req.length or 0) > self.max_asset_size:
            error = {"resource": "ReleaseAsset", "code": "custom", "field": "size",
                     "message": f"size must be less than {self.max_asset_size}"}
            return _json(422, {"message": "Validation Failed", "documentation_url": DOCS,
                               "errors": [error], "status": "422"}, schema="validation-error")
        if any(a.name == name for a in rel.assets.values()):
            return _invalid("ReleaseAsset", "already_exists", "name")
        return None

    # -- downloads ---------------------------------------------------------------------------

    def _sign(self, asset_id: int, expires: int) -> str:
        return hmac.new(self._secret, f"{asset_id}:{expires}".encode(), "sha256").hexdigest()

    def _redirect_to_storage(self, repo: _Repo, rel: _Release, asset: _Asset) -> _Response:
        if asset.state != "uploaded":
            return _error(404, "Not Found")
        asset.download_count += 1
        expires = int(time.time()) + 300
        query = urllib.parse.urlencode({"expires": expires, "filename": asset.name,
                                        "signature": self._sign(asset.id, expires)})
        location = f"{self.storage_base}/{repo.id}/{asset.id}?{query}"
        return _Response(302, b"", {"Location": location})

    def _raw(self, req: _Request, match: re.Match[str]) -> _Response:
        """`/{owner}/{repo}/raw/{ref}/{path}`: github.com answers a 302 to
        raw.githubusercontent.com, which serves the file at that ref (HEAD: the default
        branch) as text/plain; here the same redirect, to `/_raw/…` on this host, and the file
        read from the repository's git remote (`add_git_remote`). 404 for anything else."""
        full_name = f"{match['o']}/{match['r']}".lower()
        with self._lock:
            bare, repo = self._git_remotes.get(full_name), self._repos.get(full_name)
        if bare is None or repo is None or not self._may_read(req.token, repo):
            return _Response(404, b"404: Not Found", {"Content-Type": "text/plain; charset=utf-8"})
        if not match["served"]:
            return _Response(302, b"", {"Location": f"{self.web_url}/_raw{req.path}"})
        shown = subprocess.run(["git", "--git-dir", str(bare), "show",
                                f"{match['ref']}:{match['path']}"],
                               capture_output=True, timeout=60, check=False)
        if shown.returncode != 0:
            return _Response(404, b"404: Not Found", {"Content-Type": "text/plain; charset=utf-8"})
        return _Response(200, shown.stdout, {"Content-Type": "text/plain; charset=utf-8"})

    def _web(self, req: _Request) -> _Response:
        """`browser_download_url`: /{owner}/{repo}/releases/download/{tag}/{name}; raw files
        (`_raw`)."""
        raw = RAW_PATH.fullmatch(req.path)
        if raw is not None and req.method in ("GET", "HEAD"):
            return self._raw(req, raw)
        match = re.fullmatch(r"/([^/]+)/([^/]+)/releases/download/([^/]+)/([^/]+)", req.path)
        if req.method not in ("GET", "HEAD") or match is None:
            return _Response(404, b"Not Found", {"Content-Type": "text/plain; charset=utf-8"})
        tag, name = urllib.parse.unquote(match[3]), urllib.parse.unquote(match[4])
        with self._lock:
            repo = self._repos.get(f"{match[1]}/{match[2]}".lower())
            if repo is None or not self._may_read(req.token, repo):
                return _Response(404, b"Not Found", {"Content-Type": "text/plain; charset=utf-8"})
            for rel in repo.releases.values():
                if rel.url_tag == tag and self._visible(req.token, repo, rel):
                    for asset in rel.assets.values():
                        if asset.name == name:
                            return self._redirect_to_storage(repo, rel, asset)
        return _Response(404, b"Not Found", {"Content-Type": "text/plain; charset=utf-8"})

    def _storage(self, req: _Request) -> _Response:
        match = re.fullmatch(r"/(\d+)/(\d+)", req.path[len(STORAGE):])
        forbidden = _Response(403, b"<Error><Code>AccessDenied</Code></Error>",
                              {"Content-Type": "application/xml"})
        if req.method not in ("GET", "HEAD") or match is None:
            return forbidden
        asset_id, expires = int(match[2]), req.query.get("expires", "")
        if (not expires.isdigit() or int(expires) < time.time()
                or not hmac.compare_digest(self._sign(asset_id, int(expires)),
                                           req.query.get("signature", ""))):
            return forbidden
        with self._lock:
            try:
                _, asset = self._find_asset(self._repos_by_id(int(match[1])), asset_id)
            except KeyError:
                return _Response(404, b"<Error><Code>NoSuchKey</Code></Error>",
                                 {"Content-Type": "application/xml"})
            data, name = asset.data, asset.name
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes",
                   "Content-Disposition": f"attachment; filename={name}",
                   "ETag": f'"{hashlib.md5(data).hexdigest()}"',
                   "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT"}
        status, body = 200, data
        wanted = req.header("Range")
        if wanted:
            found = re.fullmatch(r"bytes=(\d*)-(\d*)", wanted.strip())
            start, end = (found[1], found[2]) if found else ("", "")
            if found and start == "" and end:
                first, last = max(len(data) - int(end), 0), len(data) - 1
            elif found and start:
                first, last = int(start), min(int(end) if end else len(data) - 1, len(data) - 1)
            else:
                first, last = 0, -1
            if first > last or first >= len(data):
                return _Response(416, b"", headers | {"Content-Range": f"bytes */{len(data)}"})
            status, body = 206, data[first:last + 1]
            headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        fault = req.fault
        drop = fault.after_bytes if fault is not None and fault.action == "drop" else None
        return _Response(status, body, headers, drop_after=drop)

    # -- git over smart HTTP ------------------------------------------------------------------

    def _git(self, req: _Request) -> _Response:
        """`git http-backend` (CGI) for /{owner}/{repo}.git/...: fetches of a public repository
        as anyone, pushes with Basic `x-access-token:<token>` of a token that may write."""
        match = GIT_PATH.fullmatch(req.path)
        assert match is not None
        full_name = f"{match['o']}/{match['r']}".lower()
        with self._lock:
            bare = self._git_remotes.get(full_name)
            repo = self._repos.get(full_name)
        unauthorized = _Response(401, b"Authentication failed\n", {
            "Content-Type": "text/plain", "WWW-Authenticate": 'Basic realm="GitHub"'})
        if bare is None or repo is None:
            req.read_body()
            return _Response(404, b"Repository not found.\n", {"Content-Type": "text/plain"})
        tok: _Token | None = None
        value = req.header("Authorization") or ""
        scheme, _, credential = value.partition(" ")
        if value:
            try:
                user, _, secret = base64.b64decode(credential).decode().partition(":")
            except ValueError:
                user, secret = "", ""
            tok = self._tokens.get(secret) if scheme.lower() == "basic" else None
            if tok is None or user != "x-access-token":
                req.read_body()
                return unauthorized
        push = (match["rest"] == "/git-receive-pack"
                or req.query.get("service") == "git-receive-pack")
        if (push and not self._may_write(tok, repo)) or not self._may_read(tok, repo):
            req.read_body()
            if tok is not None:
                return _Response(403, b"Permission denied.\n", {"Content-Type": "text/plain"})
            return unauthorized
        body = req.read_body() if req.method == "POST" else b""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_HTTP_EXPORT_ALL": "1",
               "GIT_PROJECT_ROOT": str(bare.parent), "REQUEST_METHOD": req.method,
               "PATH_INFO": f"/{bare.name}{match['rest']}",
               "QUERY_STRING": urllib.parse.urlsplit(req.handler.path).query,
               "CONTENT_TYPE": req.header("Content-Type") or "",
               "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": tok.login if tok else "",
               "REMOTE_ADDR": "127.0.0.1", "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.receivepack",
               "GIT_CONFIG_VALUE_0": "true"}
        if req.header("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = req.header("Content-Encoding") or ""
        if req.header("Git-Protocol"):
            env["GIT_PROTOCOL"] = req.header("Git-Protocol") or ""
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                              timeout=120, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = done.stdout.partition(b"\n\n")
        status, headers = 200, {}
        for line in head.decode("latin-1").splitlines():
            key, _, val = line.partition(":")
            if key.lower() == "status":
                status = int(val.split()[0])
            elif key:
                headers[key.strip()] = val.strip()
        if done.returncode != 0 and not done.stdout:
            self.errors.append(f"git http-backend {req.path}: {done.stderr.decode()[-2000:]}")
            return _Response(500, b"", {})
        if push and req.method == "POST":
            self._log("change", "git.push", method="POST", path=req.path,
                      detail={"repo": repo.full_name})
        return _Response(status, payload, headers)

    def _repos_by_id(self, repo_id: int) -> _Repo:
        for repo in self._repos.values():
            if repo.id == repo_id:
                return repo
        raise KeyError(repo_id)


    # -- issues (ninfer-kits alert) ----------------------------------------------------------
    # GitHub's issues API as `ninfer-kits alert` uses it, with the `issue`, `issue-comment` and
    # `label` schemas of @octokit/openapi (tests/data/openapi/github-issues.json). Writing an
    # issue needs a classic token's repo scope (public_repo for a public repository) or a
    # fine-grained token's issues=write (contents=write is not enough); `can_write` overrides.

    ROUTES = (*ROUTES,
        ("GET", REPO + r"/issues", "_list_issues"),
        ("POST", REPO + r"/issues", "_create_issue"),
        ("GET", REPO + r"/issues/(?P<number>\d+)", "_get_issue"),
        ("PATCH", REPO + r"/issues/(?P<number>\d+)", "_patch_issue"),
        ("GET", REPO + r"/issues/(?P<number>\d+)/comments", "_list_comments"),
        ("POST", REPO + r"/issues/(?P<number>\d+)/comments", "_create_comment"),
        ("GET", REPO + r"/labels", "_list_labels"),
        ("POST", REPO + r"/labels", "_create_label"),
    )
    STATE_REASONS = frozenset({"completed", "not_planned", "reopened", "duplicate"})

    def add_issue(self, full_name: str, title: str, body: str | None = "", *,
                  labels: tuple[str, ...] = (), state: str = "open",
                  comments: tuple[str, ...] = ()) -> int:
        """An issue made directly (no HTTP), with its labels and comments; its number."""
        with self._lock:
            store = self._issue_store(full_name)
            for name in labels:
                self._label(store, name)
            issue = _Issue(self._next_issue_id(), store.next_number(), title, body, None,
                           list(labels), state, "completed" if state == "closed" else None)
            issue.comments = [_Comment(self._next_issue_id(), text, None) for text in comments]
            store.issues[issue.number] = issue
            return issue.number

    def issue_views(self, full_name: str) -> list[IssueView]:
        """Every issue of the repository, by number."""
        with self._lock:
            store = self._issue_store(full_name)
            return [IssueView(i.number, i.title, i.body, i.state, i.state_reason,
                              tuple(i.labels), tuple(c.body for c in i.comments))
                    for _, i in sorted(store.issues.items())]

    def _issue_store(self, full_name: str) -> _Issues:
        return self._issues.setdefault(full_name.lower(), _Issues())

    def _next_issue_id(self) -> int:
        self._ids.setdefault("issue", 1500000000)
        return self._next("issue")

    def _label(self, store: _Issues, name: str, color: str = "ededed",
               description: str | None = None) -> tuple[int, str, str | None]:
        if name not in store.labels:
            store.labels[name] = (self._next_issue_id(), color, description)
        return store.labels[name]

    def _label_json(self, repo: _Repo, name: str, label: tuple[int, str, str | None]
                    ) -> dict[str, Any]:
        return {"id": label[0], "node_id": _node_id("LA", label[0]),
                "url": f"{self.base_url}/repos/{repo.full_name}/labels/"
                       f"{urllib.parse.quote(name, safe='')}",
                "name": name, "color": label[1], "description": label[2], "default": False}

    def _issue_json(self, repo: _Repo, issue: _Issue) -> dict[str, Any]:
        api = f"{self.base_url}/repos/{repo.full_name}"
        url = f"{api}/issues/{issue.number}"
        store = self._issue_store(repo.full_name)
        user = self._user_json(issue.user)
        return {
            "id": issue.id, "node_id": _node_id("I", issue.id), "url": url,
            "repository_url": api, "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments", "events_url": f"{url}/events",
            "html_url": f"{self.web_url}/{repo.full_name}/issues/{issue.number}",
            "number": issue.number, "state": issue.state, "state_reason": issue.state_reason,
            "title": issue.title, "body": issue.body, "user": user,
            "labels": [self._label_json(repo, name, self._label(store, name))
                       for name in issue.labels],
            "assignee": None, "assignees": [], "milestone": None, "locked": False,
            "active_lock_reason": None, "comments": len(issue.comments),
            "closed_at": issue.closed_at, "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "closed_by": None if issue.closed_by is None else self._user_json(issue.closed_by),
            "author_association": "OWNER" if issue.user is None else "CONTRIBUTOR",
            "timeline_url": f"{url}/timeline",
        }

    def _comment_json(self, repo: _Repo, issue: _Issue, comment: _Comment) -> dict[str, Any]:
        api = f"{self.base_url}/repos/{repo.full_name}"
        return {
            "id": comment.id, "node_id": _node_id("IC", comment.id),
            "url": f"{api}/issues/comments/{comment.id}", "body": comment.body,
            "html_url": (f"{self.web_url}/{repo.full_name}/issues/{issue.number}"
                         f"#issuecomment-{comment.id}"),
            "user": self._user_json(comment.user), "created_at": comment.created_at,
            "updated_at": comment.updated_at, "issue_url": f"{api}/issues/{issue.number}",
            "author_association": "OWNER" if comment.user is None else "CONTRIBUTOR",
        }

    def _list_issues(self, req: _Request, repo: _Repo) -> _Response:
        state = req.query.get("state", "open")
        if state not in ("open", "closed", "all"):
            return _invalid("Issue", "invalid", "state")
        wanted = [name.strip() for name in req.query.get("labels", "").split(",") if name.strip()]
        store = self._issue_store(repo.full_name)
        found = [i for i in sorted(store.issues.values(), key=lambda i: i.number, reverse=True)
                 if state in ("all", i.state) and all(name in i.labels for name in wanted)]
        items, link = _page(req, found)
        return _json(200, [self._issue_json(repo, i) for i in items], schema="issue[]",
                     headers=link)

    def _issue(self, repo: _Repo, number: str) -> _Issue | None:
        return self._issue_store(repo.full_name).issues.get(int(number))

    def _get_issue(self, req: _Request, repo: _Repo, number: str) -> _Response:
        issue = self._issue(repo, number)
        if issue is None:
            return _error(404, "Not Found")
        return _json(200, self._issue_json(repo, issue), schema="issue")

    def _create_issue(self, req: _Request, repo: _Repo) -> _Response:
        data = req.data
        if not self._may_write(req.token, repo, "issues"):
            return self._refuse_write(req.token, "issues")
        if not isinstance(data, dict):
            return _error(400, "Problems parsing JSON")
        title = data.get("title")
        if not isinstance(title, str | int) or not str(title).strip():
            return _invalid("Issue", "missing_field", "title")
        labels = data.get("labels") or []
        if not isinstance(labels, list) or not all(isinstance(n, str) for n in labels):
            return _invalid("Issue", "invalid", "labels")
        store = self._issue_store(repo.full_name)
        for name in labels:  # a label that does not exist is made (for a user who can push)
            self._label(store, name)
        issue = _Issue(self._next_issue_id(), store.next_number(), str(title),
                       data.get("body"), req.token, list(dict.fromkeys(labels)))
        store.issues[issue.number] = issue
        body = self._issue_json(repo, issue)
        return _json(201, body, schema="issue", headers={"Location": body["url"]})

    def _patch_issue(self, req: _Request, repo: _Repo, number: str) -> _Response:
        data = req.data
        issue = self._issue(repo, number)
        if not self._may_write(req.token, repo, "issues"):
            return self._refuse_write(req.token, "issues")
        if issue is None:
            return _error(404, "Not Found")
        if not isinstance(data, dict):
            return _error(400, "Problems parsing JSON")
        state = data.get("state", issue.state)
        reason = data.get("state_reason")
        if state not in ("open", "closed"):
            return _invalid("Issue", "invalid", "state")
        if reason is not None and reason not in self.STATE_REASONS:
            return _invalid("Issue", "invalid", "state_reason")
        for key in ("title", "body"):
            if key in data:
                setattr(issue, key, data[key])
        if "labels" in data and isinstance(data["labels"], list):
            store = self._issue_store(repo.full_name)
            issue.labels = [self._label(store, n) and n for n in dict.fromkeys(data["labels"])]
        if state == "closed" and issue.state == "open":
            issue.state, issue.closed_at, issue.closed_by = "closed", _now(), req.token
            issue.state_reason = reason or "completed"
        elif state == "open" and issue.state == "closed":
            issue.state, issue.closed_at, issue.closed_by = "open", None, None
            issue.state_reason = "reopened"
        elif reason is not None and state == "closed":
            issue.state_reason = reason
        issue.updated_at = _now()
        return _json(200, self._issue_json(repo, issue), schema="issue")

    def _list_comments(self, req: _Request, repo: _Repo, number: str) -> _Response:
        issue = self._issue(repo, number)
        if issue is None:
            return _error(404, "Not Found")
        items, link = _page(req, issue.comments)
        return _json(200, [self._comment_json(repo, issue, c) for c in items],
                     schema="issue-comment[]", headers=link)

    def _create_comment(self, req: _Request, repo: _Repo, number: str) -> _Response:
        data = req.data
        issue = self._issue(repo, number)
        if not self._may_write(req.token, repo, "issues"):
            return self._refuse_write(req.token, "issues")
        if issue is None:
            return _error(404, "Not Found")
        if not isinstance(data, dict) or not isinstance(data.get("body"), str) \
                or not data["body"]:
            return _invalid("IssueComment", "missing_field", "body")
        comment = _Comment(self._next_issue_id(), data["body"], req.token)
        issue.comments.append(comment)
        issue.updated_at = _now()
        body = self._comment_json(repo, issue, comment)
        return _json(201, body, schema="issue-comment", headers={"Location": body["url"]})

    def _list_labels(self, req: _Request, repo: _Repo) -> _Response:
        store = self._issue_store(repo.full_name)
        items, link = _page(req, sorted(store.labels.items()))
        return _json(200, [self._label_json(repo, name, label) for name, label in items],
                     schema="label[]", headers=link)

    def _create_label(self, req: _Request, repo: _Repo) -> _Response:
        data = req.data
        if not self._may_write(req.token, repo, "issues"):
            return self._refuse_write(req.token, "issues")
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) \
                or not data["name"]:
            return _invalid("Label", "missing_field", "name")
        store = self._issue_store(repo.full_name)
        if data["name"] in store.labels:
            return _invalid("Label", "already_exists", "name")
        label = self._label(store, data["name"], str(data.get("color") or "ededed"),
                            data.get("description"))
        return _json(201, self._label_json(repo, data["name"], label), schema="label")


    # -- pull requests (.github/workflows/toolchains.yml) -------------------------------------
    # The `pull-request` schema of @octokit/openapi, the parts a client reads; opening one needs
    # pull_requests=write (an installation or fine-grained token) or a classic token's repo
    # scope. Branches are read from the served git remote (a push updates them), else from
    # set_branch.

    ROUTES = (*ROUTES,
        ("GET", REPO + r"/pulls", "_list_pulls"),
        ("POST", REPO + r"/pulls", "_create_pull"),
        ("GET", REPO + r"/pulls/(?P<number>\d+)", "_get_pull"),
    )

    def pull_views(self, full_name: str) -> list[PullView]:
        """Every pull request of the repository, by number."""
        with self._lock:
            store = self._issue_store(full_name)
            return [PullView(p.number, p.title, p.body, p.state, p.head, p.base, p.head_sha)
                    for _, p in sorted(store.pulls.items())]

    def _branch_sha(self, repo: _Repo, branch: str) -> str | None:
        bare = self._git_remotes.get(repo.full_name.lower())
        if bare is None:
            return repo.branches.get(branch)
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet",
                               f"refs/heads/{branch}^{{commit}}"], cwd=bare, capture_output=True,
                              text=True, timeout=30, check=False)
        return done.stdout.strip() or None

    def _pull_json(self, repo: _Repo, pull: _Pull) -> dict[str, Any]:
        api = f"{self.base_url}/repos/{repo.full_name}"
        html = f"{self.web_url}/{repo.full_name}/pull/{pull.number}"
        repo_json = self._repo_json(repo, None)

        def end(ref: str, sha: str) -> dict[str, Any]:
            return {"label": f"{repo.owner}:{ref}", "ref": ref, "sha": sha,
                    "user": repo_json["owner"], "repo": repo_json}

        return {
            "url": f"{api}/pulls/{pull.number}", "id": pull.id,
            "node_id": _node_id("PR", pull.id), "html_url": html, "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch", "issue_url": f"{api}/issues/{pull.number}",
            "commits_url": f"{api}/pulls/{pull.number}/commits",
            "comments_url": f"{api}/issues/{pull.number}/comments",
            "statuses_url": f"{api}/statuses/{pull.head_sha}",
            "number": pull.number, "state": pull.state, "locked": False, "title": pull.title,
            "user": self._user_json(pull.user), "body": pull.body, "labels": [],
            "milestone": None, "active_lock_reason": None, "created_at": pull.created_at,
            "updated_at": pull.updated_at, "closed_at": None, "merged_at": None,
            "merge_commit_sha": None, "assignee": None, "assignees": [],
            "requested_reviewers": [], "requested_teams": [], "draft": False,
            "head": end(pull.head, pull.head_sha), "base": end(pull.base, pull.base_sha),
            "author_association": "CONTRIBUTOR", "auto_merge": None, "merged": False,
            "mergeable": None, "mergeable_state": "unknown",
        }

    def _list_pulls(self, req: _Request, repo: _Repo) -> _Response:
        state = req.query.get("state", "open")
        if state not in ("open", "closed", "all"):
            return _invalid("PullRequest", "invalid", "state")
        owner, _, head = req.query.get("head", "").rpartition(":")
        base = req.query.get("base", "")
        found = [p for p in sorted(self._issue_store(repo.full_name).pulls.values(),
                                   key=lambda p: p.number, reverse=True)
                 if state in ("all", p.state) and (not base or p.base == base)
                 and (not head or (p.head == head and owner.lower() == repo.owner.lower()))]
        items, link = _page(req, found)
        return _json(200, [self._pull_json(repo, p) for p in items], schema="pull-request[]",
                     headers=link)

    def _get_pull(self, req: _Request, repo: _Repo, number: str) -> _Response:
        pull = self._issue_store(repo.full_name).pulls.get(int(number))
        if pull is None:
            return _error(404, "Not Found")
        return _json(200, self._pull_json(repo, pull), schema="pull-request")

    def _create_pull(self, req: _Request, repo: _Repo) -> _Response:
        data = req.data
        if not self._may_write(req.token, repo, "pull_requests"):
            return self._refuse_write(req.token, "pull_requests")
        if not isinstance(data, dict):
            return _error(400, "Problems parsing JSON")
        for key in ("title", "head", "base"):
            if not isinstance(data.get(key), str) or not data[key]:
                return _invalid("PullRequest", "missing_field", key)
        owner, _, head = str(data["head"]).rpartition(":")
        base = str(data["base"])
        head_sha = self._branch_sha(repo, head) if owner.lower() in ("", repo.owner.lower()) \
            else None
        base_sha = self._branch_sha(repo, base)
        if head_sha is None or base_sha is None:
            return _invalid("PullRequest", "invalid", "head" if head_sha is None else "base")
        store = self._issue_store(repo.full_name)
        if any(p.state == "open" and p.head == head and p.base == base
               for p in store.pulls.values()):
            return _custom_invalid("PullRequest", f"A pull request already exists for "
                                                  f"{repo.owner}:{head}.")
        if head_sha == base_sha:
            return _custom_invalid("PullRequest", f"No commits between {base} and {head}")
        pull = _Pull(self._next_issue_id(), store.next_number(), str(data["title"]),
                     data.get("body"), req.token, head, base, head_sha, base_sha)
        store.pulls[pull.number] = pull
        body = self._pull_json(repo, pull)
        return _json(201, body, schema="pull-request", headers={"Location": body["url"]})


# ---------------------------------------------------------------------------------------------
# Answers


def _installation(token: str, permissions: Mapping[str, str] | None,
                  repositories: tuple[str, ...] | None, user_id: int, limit: int) -> _Token:
    """A GitHub App installation token: no scopes header, `permissions` as granted (writing
    releases needs contents=write, else 403 "Resource not accessible by integration")."""
    granted = {"metadata": "read"} | dict(permissions or {})
    return _Token(token, "github-actions[bot]", user_id, None, granted, None, limit,
                  reset=int(time.time()) + HOUR, kind="installation",
                  repositories=tuple(name.lower() for name in repositories)
                  if repositories is not None else None)


def _granted(tok: _Token, repo: _Repo) -> bool:
    return tok.repositories is None or repo.full_name.lower() in tok.repositories


def _json(status: int, obj: Any, *, schema: str | None = None,
          headers: dict[str, str] | None = None) -> _Response:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return _Response(status, body, {"Content-Type": "application/json; charset=utf-8",
                                    **(headers or {})}, schema, obj)


def _error(status: int, message: str, *, headers: dict[str, str] | None = None,
           documentation_url: str = DOCS) -> _Response:
    return _json(status, {"message": message, "documentation_url": documentation_url,
                          "status": str(status)}, schema="basic-error", headers=headers)


def _invalid(resource: str, code: str, field_name: str) -> _Response:
    return _json(422, {"message": "Validation Failed", "documentation_url": DOCS,
                       "errors": [{"resource": resource, "code": code, "field": field_name}],
                       "status": "422"}, schema="validation-error")


def _custom_invalid(resource: str, message: str) -> _Response:
    """GitHub's 422 for a rule of the resource rather than a field (code `custom`)."""
    return _json(422, {"message": "Validation Failed", "errors": [
        {"resource": resource, "code": "custom", "message": message}],
        "documentation_url": f"{DOCS}/pulls/pulls#create-a-pull-request", "status": "422"},
        schema="validation-error")


def _no_tag_possible(repo: _Repo, tag: str, commitish: str) -> bool:
    """Publishing would create tag `tag` at `commitish`, which names no commit (no such branch,
    not a full SHA: in an empty repository, none does)."""
    return tag not in repo.tags and commitish not in repo.branches \
        and re.fullmatch(r"[0-9a-f]{40}", commitish) is None


def _invalid_tag() -> _Response:
    """GitHub's answer to publishing a release whose tag does not exist and cannot be made."""
    errors = [{"resource": "Release", "code": "custom", "field": "tag_name",
               "message": "tag_name is not a valid tag"},
              {"resource": "Release", "code": "custom",
               "message": "Published releases must have a valid tag"},
              {"resource": "Release", "code": "invalid", "field": "target_commitish"}]
    return _json(422, {"message": "Validation Failed", "documentation_url": DOCS,
                       "errors": errors, "status": "422"}, schema="validation-error")


def _immutable() -> _Response:
    return _json(422, {"message": "Cannot modify an immutable release.",
                       "documentation_url": DOCS, "status": "422"}, schema="validation-error")


def _server_error(status: int) -> _Response:
    if status >= 500:
        return _json(status, {"message": "Server Error"})
    return _json(status, {"message": "Fault", "documentation_url": DOCS, "status": str(status)})


def _page(req: _Request, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
    """One page of `items` and its `Link` header, as GitHub paginates (per_page at most 100)."""
    def number(key: str, default: int) -> int:
        value = req.query.get(key, "")
        return int(value) if value.isdigit() and int(value) > 0 else default

    per_page = min(number("per_page", 30), 100)
    page = number("page", 1)
    last = max(1, -(-len(items) // per_page))

    def url(n: int) -> str:
        query = urllib.parse.urlencode(req.query | {"page": str(n)})
        return f"{req.origin}{req.path}?{query}"

    links = []
    if page < last:
        links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
    if page > 1:
        links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
    header = {"Link": ", ".join(links)} if links else {}
    return items[(page - 1) * per_page: page * per_page], header


def _etag(body: bytes) -> str:
    return f'W/"{hashlib.sha256(body).hexdigest()[:40]}"'


def _etag_matches(header: str, etag: str) -> bool:
    bare = etag.removeprefix("W/")
    return any(t.strip() == "*" or t.strip().removeprefix("W/") == bare for t in header.split(","))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK wait
    server_version = "GitHub.com"
    sys_version = ""
    app: GitHubServer
    roles: frozenset[str]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        try:
            self.app._handle(self, self.command)
        except _Drop as drop:
            self._reset(drop.graceful)
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception:
            self.app.errors.append(f"{self.command} {self.path}:\n{traceback.format_exc()}")
            with contextlib.suppress(OSError):
                self.close_connection = True
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()

    do_GET = do_HEAD = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    def _reset(self, graceful: bool) -> None:
        """Close the connection mid-request with a TCP reset, or mid-answer with a FIN (what
        was sent arrives, the rest never does)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            if graceful:
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()
            self.connection.close()

    def answer(self, req: _Request, resp: _Response) -> None:
        headers, status, body = resp.headers, resp.status, resp.body
        if not req.body_read and req.method in ("POST", "PATCH", "PUT") and (req.length or 0) > 0:
            headers["Connection"] = "close"
        if headers.get("Connection") == "close":
            self.close_connection = True
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if status not in (204, 304):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if req.method == "HEAD" or status in (204, 304):
            return
        view = memoryview(body)
        end = len(view) if resp.drop_after is None else min(resp.drop_after, len(view))
        for start in range(0, end, 1 << 20):
            self.wfile.write(view[start:min(start + (1 << 20), end)])
        if resp.drop_after is not None:
            raise _Drop(graceful=True)
