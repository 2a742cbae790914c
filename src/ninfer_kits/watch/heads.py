"""A tracked branch's head through GitHub's REST API, cheaply and politely: the bare SHA with
an ETag kept in the state file, so an unchanged branch answers 304, which costs no rate limit;
rate limits waited out within `max_wait`, failures retried, a rename followed (docs/watch.md).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from ninfer_kits.errors import BadInput
from ninfer_kits.files.atomic import write_file
from ninfer_kits.net.remote import Secret
from ninfer_kits.net.retry import RetryPolicy, limit_wait, server_wait

STATE_FORMAT = 1
SHA_MEDIA_TYPE = "application/vnd.github.sha"
DEFAULT_MAX_WAIT = 60.0  # seconds one upstream may wait for a rate limit, in all
ATTEMPTS = 4
TRANSIENT_STATUS = frozenset({500, 502, 503, 504})  # tried again: GitHub's own passing failures
_SHA = re.compile(r"[0-9a-f]{40}")
_REPO_URL = re.compile(r"/repos/([^/]+/[^/]+)/")


class HeadError(Exception):
    """One upstream's head could not be read, and why. `service`: the network or GitHub failed,
    not the upstream (exit 3, not 1)."""

    def __init__(self, message: str, *, service: bool = False) -> None:
        super().__init__(message)
        self.service = service


@dataclass(frozen=True)
class HeadResult:
    sha: str
    cached: bool  # the server answered 304: the ETag cache's SHA
    moved_to: str | None = None  # OWNER/NAME when the repository answered 301


class StateFile:
    """The ETag cache: {"format": 1, "heads": {URL: {"etag": ..., "sha": ...}}}."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.heads: dict[str, dict[str, str]] = {}
        if path is None or not path.exists():
            return
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise BadInput(f"{path}: cannot read the watch state file: {error} (delete it to "
                           "start afresh)") from None
        heads = data.get("heads") if isinstance(data, dict) else None
        if (not isinstance(data, dict) or data.get("format") != STATE_FORMAT
                or not isinstance(heads, dict)):
            raise BadInput(f"{path}: not a watch state file of format {STATE_FORMAT} (delete it "
                           "to start afresh)")
        self.heads = {url: {k: v for k, v in entry.items() if isinstance(v, str)}
                      for url, entry in heads.items() if isinstance(entry, dict)}

    def save(self) -> None:
        if self.path is None:
            return
        text = json.dumps({"format": STATE_FORMAT, "heads": self.heads}, indent=2,
                          sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_file(self.path, (text + "\n").encode("utf-8"))


class HeadClient:
    def __init__(self, api: str, state: StateFile, token: Secret | None = None, *,
                 max_wait: float = DEFAULT_MAX_WAIT, timeout: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.api = api.rstrip("/")
        self.state = state
        self.token = token
        self.max_wait = max_wait
        self.timeout = timeout
        self.sleep = sleep
        self.retry = RetryPolicy.from_environment()  # its backoff (and tests' scale)
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "ninfer-kits-watch"
        self.session.headers["X-GitHub-Api-Version"] = "2022-11-28"
        if token:
            self.session.headers["Authorization"] = f"Bearer {token.value}"

    def head(self, repository: str, branch: str) -> HeadResult:
        """The head SHA of `branch` of `repository` (OWNER/NAME); HeadError naming both."""
        url = f"{self.api}/repos/{repository}/commits/{quote(branch, safe='')}"
        cached = self.state.heads.get(url, {})
        headers = {"Accept": SHA_MEDIA_TYPE}
        if cached.get("etag") and cached.get("sha"):
            headers["If-None-Match"] = cached["etag"]
        if cached.get("last_modified") and cached.get("sha"):
            headers["If-Modified-Since"] = cached["last_modified"]
        response = self._get(url, headers, f"{repository} branch '{branch}'")
        moved = _moved_to(response)
        if response.status_code == 304 and cached.get("sha"):
            return HeadResult(cached["sha"], True, moved)
        if response.status_code == 200:
            sha = response.text.strip().lower()
            if _SHA.fullmatch(sha) is None:
                raise HeadError(f"{repository} branch '{branch}': the API answered "
                                f"{sha[:60]!r}, not a commit SHA")
            entry = {"sha": sha}
            if response.headers.get("ETag"):
                entry["etag"] = response.headers["ETag"]
            if response.headers.get("Last-Modified"):
                entry["last_modified"] = response.headers["Last-Modified"]
            self.state.heads[url] = entry
            return HeadResult(sha, False, moved)
        raise self._explain(response, repository, branch)

    def _get(self, url: str, headers: dict[str, str], what: str) -> requests.Response:
        """One GET's answer: a drop, timeout or 5xx tried again with RetryPolicy's backoff
        (ATTEMPTS in all, about 7 s), then HeadError with `service`; a rate limit waited out
        within max_wait."""
        waited = 0.0
        for attempt in range(ATTEMPTS):
            last = attempt + 1 == ATTEMPTS
            try:
                response = self.session.get(url, headers=headers, timeout=self.timeout)
            except requests.RequestException as error:
                if last:
                    raise HeadError(f"{what}: {self.api} did not answer after {ATTEMPTS} tries: "
                                    f"{type(error).__name__}", service=True) from None
                self._backoff(attempt + 1)
                continue
            if response.status_code in TRANSIENT_STATUS and not last:
                asked = server_wait(response.headers, time.time())
                if asked is not None and waited + asked <= self.max_wait:
                    self.sleep(asked)
                    waited += asked
                else:
                    self._backoff(attempt + 1)
                continue
            wait = limit_wait(response.status_code, response.headers, time.time())
            if wait is None:
                return response
            if waited + wait > self.max_wait or attempt + 1 == ATTEMPTS:
                raise HeadError(f"{what}: rate limited ({response.status_code}); GitHub asks "
                                f"to wait {wait:.0f} s, more than --max-wait "
                                f"{self.max_wait:.0f} s allows")
            self.sleep(wait)
            waited += wait
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int) -> None:
        self.sleep(self.retry.backoff(attempt) * self.retry.scale)

    def _explain(self, response: requests.Response, repository: str,
                 branch: str) -> HeadError:
        status = response.status_code
        message = _message(response)
        where = f"{repository} branch '{branch}'"
        if status == 422 or (status == 404 and self._repo_exists(repository)):
            return HeadError(f"{where}: no such branch (deleted or renamed?): {status} {message}")
        if status in (401, 404):
            hint = ("no token given (set GITHUB_TOKEN or GH_TOKEN): a private repository "
                    "answers 404 without one" if not self.token else
                    "the token may not read it, or it does not exist")
            return HeadError(f"{where}: repository not found: {status} {message}; {hint}")
        if status == 403:
            return HeadError(f"{where}: refused: 403 {message}")
        return HeadError(f"{where}: the API answered {status} {message}",
                         service=status >= 500)

    def _repo_exists(self, repository: str) -> bool:
        try:
            response = self._get(f"{self.api}/repos/{repository}",
                                 {"Accept": "application/vnd.github+json"}, repository)
        except HeadError:
            return False
        return response.status_code == 200


def _moved_to(response: requests.Response) -> str | None:
    for earlier in response.history:
        if earlier.status_code in (301, 308):
            match = _REPO_URL.search(response.url)
            return match.group(1) if match else response.url
    return None


def _message(response: requests.Response) -> str:
    try:
        data: Any = response.json()
    except ValueError:
        return ""
    return str(data.get("message", "")) if isinstance(data, dict) else ""
