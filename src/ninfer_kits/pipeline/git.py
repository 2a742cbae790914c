"""Running git for the source stage: settings of its own (no hook runs), no prompt, no repository
but the one named, a session that ends with it. A URL's credentials never reach a command line
(`ps` shows it): they go through git's environment as an HTTP header; messages are scrubbed."""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO, Final
from urllib.parse import unquote

from ninfer_kits.errors import CheckFailed, EnvironmentFailure
from ninfer_kits.host import children
from ninfer_kits.net.remote import REDACTED

_SSH_SCHEMES: Final = frozenset({"ssh", "git+ssh", "ssh+git"})

# What `git rev-parse --local-env-vars` lists: set by a git hook or a wrapper we run under,
# these would point our commands at another repository than the one we name.
_LOCAL_ENV: Final = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE", "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR",
})

# The user's global config stays (credential helpers, proxies, insteadOf); these settings are
# overridden because they would run code or change what we read.
_GIT_CONFIG: Final = (
    "core.hooksPath=/dev/null",  # no hook of the user or of a repository runs
    "protocol.file.allow=always",  # local paths and file:// URLs are ordinary sources here
    "core.autocrlf=false",  # export the committed bytes, whatever the user's setting
    "core.fsmonitor=false",  # `status` in a user's repository starts no daemon or hook
    "log.showSignature=false",  # `show --format=%ct` prints the format and nothing else
    "color.ui=false",
    "gc.autoDetach=false",  # an auto gc after a fetch ends before git does: no stray process
    "maintenance.autoDetach=false",
)


def redact_url(url: str) -> str:
    """The URL without its credentials (`https://host/x`, not remote.redact's `https://***@host/x`):
    a location, and the mirror's cache key."""
    return _split_credentials(url)[0]


def command(*args: str) -> list[str]:
    return ["git", *(part for item in _GIT_CONFIG for part in ("-c", item)), *args]


def _environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in _LOCAL_ENV}
    # No prompt may block an unattended build; replace refs would let a SHA name other content;
    # optional locks would make `status` rewrite the index of a user's repository.
    env.update(GIT_TERMINAL_PROMPT="0", GIT_NO_REPLACE_OBJECTS="1", GIT_OPTIONAL_LOCKS="0")
    env.update(extra or {})
    return env


def run(args: Sequence[str], *, stdin: str = "",
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """git to its end, in a session of its own: on Ctrl-C or SIGTERM what it started ends before
    the build lets go of the mirror's lock."""
    process = start(command(*args), stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        stdout, stderr = process.communicate(stdin.encode())
    finally:
        children.end_session(process)
    return subprocess.CompletedProcess(process.args, process.returncode, _text(stdout),
                                       _text(stderr))


def start(command: list[str], *, stdin: int, stderr: int | IO[bytes],
          env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    try:
        return children.start(command, env=_environment(env), stdin=stdin,
                              stdout=subprocess.PIPE, stderr=stderr)
    except FileNotFoundError:
        raise EnvironmentFailure("git is not installed (or not on PATH); sources need it"
                                 ) from None


def _text(output: bytes) -> str:
    """As a text-mode pipe reads it: undecodable bytes replaced, \r\n and \r as \n."""
    return output.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def output(args: Sequence[str], failure: str, *, stdin: str = "") -> str:
    """git's stdout, stripped; CheckFailed naming what failed and git's last words otherwise."""
    result = run(args, stdin=stdin)
    if result.returncode != 0:
        raise CheckFailed(f"{failure}: {tail(result.stderr)}")
    return result.stdout.strip()


def tail(stderr: str, lines: int = 3) -> str:
    last = [line.strip() for line in stderr.splitlines() if line.strip()][-lines:]
    return "; ".join(last) or "git gave no message"


def _split_credentials(url: str) -> tuple[str, str]:
    """(the URL without credentials, the credentials it had, '' if none)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url, ""  # a path, or scp-like `git@host:path`, whose user name is no secret
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if not at or (scheme.lower() in _SSH_SCHEMES and ":" not in userinfo):
        return url, ""  # `ssh://git@host/…` names a login, not a secret
    return f"{scheme}://{host}{slash}{path}", userinfo


def scrub(text: str, url: str) -> str:
    """`text` without `url`'s credentials, in every form git may echo (percent-decoded, Basic)."""
    clean, userinfo = _split_credentials(url)
    if not userinfo:
        return text
    text = text.replace(url, clean).replace(f"{userinfo}@", "")
    user, _, password = userinfo.partition(":")
    secrets = {password, unquote(password), _basic_credentials(userinfo)} if password else \
        {user, unquote(user), _basic_credentials(userinfo)}  # a lone `TOKEN@` is the secret
    for secret in sorted(secrets - {""}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def _basic_credentials(userinfo: str) -> str:
    """`user:password` of a URL as HTTP basic authentication sends it (percent-decoded)."""
    user, _, password = userinfo.partition(":")
    return base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")


def credentials_apart(url: str) -> tuple[str, dict[str, str]]:
    """The URL to give git, and the environment carrying its credentials: for http(s) an
    `http.<url>.extraHeader` (`https://TOKEN@host/…` sends the token as the user name, as git
    does); other schemes keep the user name and drop the password."""
    clean, userinfo = _split_credentials(url)
    if not userinfo:
        return url, {}
    scheme, _, rest = clean.partition("://")
    if scheme.lower() not in ("http", "https"):
        user = userinfo.partition(":")[0]
        return f"{scheme}://{user}@{rest}", {}
    header = f"Authorization: Basic {_basic_credentials(userinfo)}"
    return clean, {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"http.{clean}.extraHeader",
                   "GIT_CONFIG_VALUE_0": header}
