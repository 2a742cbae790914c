"""What every command that talks to a remote obeys (publish, fetch, watch), in one place.

- secrets are never shown: a token or key is `register`ed once, and every text that may quote
  one (an error, a server's answer, a --debug traceback) passes through `redact`, which also
  hides the credentials a URL carries (`https://user:token@host/`);
- no token over plain http, except to this machine's loopback (a local test server):
  `cleartext_token_problem`;
- how long a server asks us to wait: `server_wait` (Retry-After in seconds or as an HTTP date;
  else the primary rate limit's reset when none is left).

Standard library only, and quick to import: the zipapp's fetch loads it.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections.abc import Mapping

REDACTED = "***"
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
    (`https://user:token@host/`) too."""
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


def server_wait(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asked us to wait: Retry-After (seconds or an HTTP date), else the
    primary rate limit's reset time when none is left; None when it asked for nothing (or
    said something that is neither: the caller's own backoff then)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    after = lowered.get("retry-after")
    if after is not None:
        after = str(after).strip()
        if after.isdigit():
            return float(after)
        import email.utils

        try:
            when = email.utils.parsedate_to_datetime(after)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - now)
    if str(lowered.get("x-ratelimit-remaining", "")).strip() == "0":
        reset = str(lowered.get("x-ratelimit-reset", "")).strip()
        if reset.isdigit():
            return max(0.0, float(reset) - now) + 1.0
    return None
