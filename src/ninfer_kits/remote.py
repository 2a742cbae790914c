"""What every command that talks to a remote obeys (publish, fetch, watch, alert), in one place.

- the GitHub token: GITHUB_TOKEN, else GH_TOKEN (what Actions and the GitHub CLI set), in a
  Secret; `token_for` an API (optional: fetch, watch), `github_token` (needed: publish, alert);
- secrets are never shown: a token or key is `register`ed once, and every text that may quote
  one (an error, a server's answer, a --debug traceback) passes through `redact`, which also
  hides the credentials a URL carries (`https://user:token@host/`);
- no token over plain http, except to this machine's loopback (a local test server):
  `cleartext_token_problem`.

How long a server asks us to wait is retry.py's.

Standard library only, and quick to import: the zipapp's fetch loads it.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from ninfer_kits.errors import BadInput

REDACTED = "***"
GITHUB_TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")
GITHUB_API_ENV = "NINFER_KITS_GITHUB_API"  # the REST API watch and alert use (a test server's)
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})

_URL_CREDENTIALS = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@\s]+)@")
# Where a user name alone may be a token (`https://TOKEN@github.com/…` is how git is handed
# one); elsewhere (`ssh://builder@host`) a name without a password is only a name.
_TOKEN_AS_USER = ("http://", "https://")
_lock = threading.Lock()
_secrets: set[str] = set()


def register(value: str) -> None:
    """Never show `value` in a message from now on (too short a value would redact words)."""
    if len(value) >= 6:
        with _lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by ***, and the credentials a URL carries
    (`https://user:token@host/`) too: any text, no URL known (pipeline.git scrubs its own)."""
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
    """Why a token must not be sent to `url` (plain http to a host other than this machine's
    loopback), or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        return "plain http would send the token in clear; use https (http only for localhost)"
    return None


def github_web(api: str) -> str:
    """The web root of a GitHub REST API base URL: api.github.com → github.com, api.HOST →
    HOST (GitHub Enterprise Cloud), HOST/api/v3 → HOST (GitHub Enterprise Server)."""
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
    """The GitHub token from GITHUB_TOKEN, else GH_TOKEN; None when neither is set."""
    env = os.environ if environ is None else environ
    for name in GITHUB_TOKEN_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return Secret(value, name)
    return None


def token_for(api: str, given: str = "",
              environ: Mapping[str, str] | None = None) -> Secret | None:
    """The GitHub token to send to `api` (None without one); bad input where it would cross
    plain http (`given`: the option or variable that named the API, for the message)."""
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
    """The GitHub token a command cannot do without; else MissingCredentials: `missing`, then
    what to set, to a token that can `able` (`{repository}` filled in)."""
    token = find_github_token(environ)
    if token is None:
        raise MissingCredentials(
            f"{missing}: set {GITHUB_TOKEN_VARIABLES[0]} (or {GITHUB_TOKEN_VARIABLES[1]}) to a "
            f"token that can {able.format(repository=repository)}")
    return token
