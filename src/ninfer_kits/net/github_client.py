"""GitHub's REST API through PyGithub for the jobs that write to GitHub (publish's store,
alert): the client, which failures are transient, and GitHub's answers as our messages and exit
codes. PyGithub's own retries are off: every call goes through one bounded RetryPolicy."""

from __future__ import annotations

import time

import requests
from github import Auth, Github, GithubException
from github.GithubException import BadCredentialsException, RateLimitExceededException

from ninfer_kits.errors import BadInput
from ninfer_kits.net.remote import Secret
from ninfer_kits.net.retry import (
    SECONDARY_LIMIT_WAIT,
    Refused,
    RetryPolicy,
    ServiceFailed,
    Transient,
    limit_wait,
    server_wait,
)


def client(api: str, token: Secret, retry: RetryPolicy, timeout: float = 60.0) -> Github:
    """PyGithub for `api` with `token`, its retries off (`retry` decides around each call)."""
    return Github(base_url=api, auth=Auth.Token(token.value), retry=None,
                  timeout=max(1, round(timeout)), per_page=100,
                  seconds_between_requests=0.25 * retry.scale,
                  seconds_between_writes=1.0 * retry.scale)


def failure(what: str, error: GithubException, token: Secret) -> Exception:
    """The error for a GitHub call failed for good: bad input, a refusal or the service's."""
    message = explanation(error)
    if isinstance(error, BadCredentialsException) or error.status == 401:
        return BadInput(f"GitHub: {what}: the token from {token.source} was refused "
                        f"({message}): set a valid token")
    if 400 <= error.status < 500 and error.status not in (404, 408):
        # GitHub refuses the request itself (422, 403 without a rate limit, 400, 409, 410)
        return Refused(f"GitHub: {what}: refused (HTTP {error.status}): {message}; "
                       f"{Refused.AGAIN}")
    return ServiceFailed(f"GitHub: {what}: HTTP {error.status}: {message}")


def transient(error: BaseException) -> Transient | None:
    """Whether a failed GitHub call may pass when tried again, and the wait asked for."""
    if isinstance(error, GithubException):
        headers = error.headers or {}
        if error.status >= 500:
            return Transient(f"HTTP {error.status}", server_wait(headers, time.time()))
        message = explanation(error).lower()
        wait = limit_wait(error.status, headers, time.time(), message)
        if wait is None and isinstance(error, RateLimitExceededException):
            wait = SECONDARY_LIMIT_WAIT
        if wait is None:
            return None
        if error.status == 429:
            return Transient("rate limited (HTTP 429)", wait)
        kind = "secondary rate limit" if "secondary" in message else "rate limit"
        return Transient(f"{kind} (HTTP 403)", wait)
    if isinstance(error, requests.exceptions.Timeout):
        return Transient("timed out")
    if isinstance(error, requests.exceptions.RequestException | ConnectionError | TimeoutError):
        return Transient(f"connection failed ({type(error).__name__})")
    return None


def explanation(error: GithubException) -> str:
    """GitHub's explanation on one line: `message`, and for a 422 each of `errors[]`."""
    data = error.data
    if isinstance(data, dict):
        text = _one_line(data.get("message"))
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            reasons = "; ".join(_reason(item) for item in errors)
            text = f"{text}: {reasons}" if text else reasons
        return text or str(error.status)
    return _one_line(data)[:200] if data else str(error.status)


# GitHub's error codes (docs: "Client errors"), as words after `Resource.field`
_CODE_WORDS = {"missing": "is missing", "missing_field": "is missing", "invalid": "is invalid",
               "already_exists": "already exists", "unprocessable": "could not be processed"}


def _reason(item: object) -> str:
    if not isinstance(item, dict):
        return _one_line(item)
    message = _one_line(item.get("message"))
    if message:
        return message
    where = ".".join(_one_line(item.get(key)) for key in ("resource", "field") if item.get(key))
    code = _one_line(item.get("code")) or "invalid"
    return f"{where} {_CODE_WORDS.get(code, code)}" if where else code


def _one_line(value: object) -> str:
    return " ".join(str(value).split()) if value else ""
