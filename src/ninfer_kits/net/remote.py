"""What every command that talks to a remote obeys: the GitHub token (GITHUB_TOKEN, else
GH_TOKEN) kept in a Secret, every secret `redact`ed from messages, and no token over plain http
but to this machine's loopback. Standard library only, and quick to import: the .pyz loads it.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from ninfer_kits.config import settings
from ninfer_kits.errors import BadInput

REDACTED = "***"
TOKENS = (settings.GITHUB_TOKEN, settings.GH_TOKEN)  # the first set is the one sent
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})

_URL_CREDENTIALS = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@\s]+)@")
# Where a user name alone may be a token (`https://TOKEN@github.com/…`, as git is handed one).
_TOKEN_AS_USER = ("http://", "https://")
_lock = threading.Lock()
_secrets: set[str] = set()


def register(value: str) -> None:
    """Never show `value` in a message from now on (too short a value would redact words)."""
    if len(value) >= 6:
        with _lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """`text` with every registered secret, and a URL's credentials, replaced by ***."""
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _URL_CREDENTIALS.sub(_hide_credentials, text)


def _hide_credentials(match: re.Match[str]) -> str:
    scheme, userinfo = match.group(1), match.group(2)
    if ":" in userinfo or scheme.lower() in _TOKEN_AS_USER:
        return f"{scheme}{REDACTED}@"
    return match.group(0)


def cleartext_token_problem(url: str) -> str | None:
    """Why a token must not go to `url` (plain http, not loopback), or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        return "plain http would send the token in clear; use https (http only for localhost)"
    return None


def github_web(api: str) -> str:
    """The web root of a GitHub API base URL (github.com, Enterprise Cloud and Server)."""
    parts = urllib.parse.urlsplit(api.rstrip("/"))
    host = parts.netloc[4:] if parts.netloc.startswith("api.") and not parts.path \
        else parts.netloc
    path = parts.path.removesuffix("/api/v3")
    return urllib.parse.urlunsplit((parts.scheme, host, path, "", ""))


class MissingCredentials(BadInput):
    """A command needs credentials that are not set: the message names the variables."""


@dataclass(frozen=True)
class Secret:
    """A credential, registered: no message shows `value`, only a client gets it."""

    value: str = field(repr=False)
    source: str  # where it came from, for messages: "GITHUB_TOKEN", "/path/b2.env"

    def __post_init__(self) -> None:
        register(self.value)

    def __str__(self) -> str:
        return f"<secret from {self.source}>"


def find_github_token(environ: Mapping[str, str] | None = None) -> Secret | None:
    for setting in TOKENS:
        value = (settings.read(setting, environ) or "").strip()
        if value:
            return Secret(value, setting.name)
    return None


def token_for(api: str, given: str = "",
              environ: Mapping[str, str] | None = None) -> Secret | None:
    """The token to send to `api` (None without one); bad input where it would cross plain
    http (`given`: what named the API)."""
    token = find_github_token(environ)
    problem = cleartext_token_problem(api) if token else None
    if problem:
        raise BadInput(f"the GitHub API {redact(api)}{f' ({given})' if given else ''}: "
                       f"{problem} (GITHUB_TOKEN or GH_TOKEN is set)")
    return token


def github_token(environ: Mapping[str, str] | None, repository: str, *,
                 missing: str = "GitHub: no token",
                 able: str = "write {repository} (a fine-grained token with Contents: read and "
                             "write, or a classic token with the repo scope)") -> Secret:
    """The token a command needs; else MissingCredentials saying what to set."""
    token = find_github_token(environ)
    if token is None:
        raise MissingCredentials(
            f"{missing}: set {TOKENS[0].name} (or {TOKENS[1].name}) to a "
            f"token that can {able.format(repository=repository)}")
    return token
