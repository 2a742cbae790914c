"""The source stage: fetch an upstream, pick one commit, export that commit's tree.

A build starts from a commit, never from a work tree, so that one revision gives the same
source on every machine. Git repositories (URLs and local repositories) are kept as bare
mirrors in the cache; a pinned revision already in the cache is used without fetching, so a
rebuild works offline. A folder inside a local repository (the built-in example) is built from
that repository's last commit touching the folder.

Submodules are out of scope: an export holds the upstream's own tree, nothing it links to.

Credentials in a URL (`https://user:TOKEN@host/…`) never reach a command line, where `ps`
shows them to every user of the machine: git is given the URL without them, and an HTTP
Authorization header through its environment (GIT_CONFIG_COUNT); messages and logs are scrubbed.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Final
from urllib.parse import unquote

from ninfer_kits import children
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure, NinferKitsError
from ninfer_kits.matrix import RevisionFacts, Upstream, did_you_mean, relative_path_problem
from ninfer_kits.tarsafe import UnsafeMember, extract_all

Log = Callable[[str], None]

_HEX_REVISION = re.compile(r"[0-9a-fA-F]{7,40}")
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

# Branches and tags, not every ref: a forge's pull-request refs would multiply the cache.
_REFSPECS: Final = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")

# Every exported file's mtime: one fixed time (1980-01-01, the zip epoch), not the commit's.
# nvcc -lineinfo writes each source file's mtime into the device code (the cubin's line table),
# and a compiler cache or a kept build tree reuses an unchanged file's object across revisions:
# stamped with the commit's time, that object would carry an older commit's time where a fresh
# build writes the new one. With one fixed time, an object depends on the file's content alone.
# (git archive gives a commit's files the commit time, and a tree's, `<sha>:<folder>`, now.)
EXPORT_MTIME: Final = 315_532_800

# `git archive` honours export-ignore and export-subst from the tree's .gitattributes. A build
# must see what a checkout sees, and export-subst (`$Format:%d$`) would make the tree depend on
# the refs of the day. info/attributes outranks every .gitattributes in the tree.
_PLAIN_EXPORT: Final = "* -export-ignore -export-subst\n"


# What git (and curl, and ssh under it) say when the network or the server failed, rather than
# the URL or the credentials.
_UNREACHABLE: Final = re.compile(
    r"could not resolve (host|proxy)|failed to connect|connection (refused|timed out|reset)|"
    r"operation timed out|network is unreachable|no route to host|temporary failure in name "
    r"resolution|ssl certificate|server certificate|\bssl_|\bssl connect|gnutls|tls handshake|"
    r"returned error: 5\d\d|early eof|rpc failed", re.IGNORECASE)


class FetchFailed(NinferKitsError):
    """Git could not fetch from an upstream's URL (one of the two kinds below)."""


class FetchRefused(FetchFailed, BadInput):
    """The URL is wrong, the repository is not there, or the credentials were refused."""


class FetchUnreachable(FetchFailed, EnvironmentFailure):
    """The network or the server failed: no route, no name resolution, TLS, a 5xx answer."""


@dataclass(frozen=True, kw_only=True)
class SourceTree:
    """An exported source: where it is, and which commit of which repository it holds."""

    path: Path
    url: str  # as the matrix (or the user) wrote it, credentials removed
    ref: str  # the branch the upstream tracks
    revision: str  # full 40-hex SHA
    commit_time: int  # committer time; the build's SOURCE_DATE_EPOCH
    version: str | None = None
    subdir: str | None = None  # the folder inside an enclosing repository, if built from one
    dirty: bool = False  # that folder has uncommitted changes, which the export leaves out

    def template_inputs(self) -> RevisionFacts:
        """What the matrix's tag and asset templates take from the source: revision, VERSION."""
        return RevisionFacts(revision=self.revision, version=self.version)


# --------------------------------------------------------------------------- public API


def fetch_source(
    upstream: Upstream, *, cache_dir: Path, dest: Path, revision: str | None = None,
    url: str | None = None, log: Log | None = None,
) -> SourceTree:
    """Fetch the upstream, resolve the revision and export its tree into `dest`.

    The revision is `revision`, else the upstream's pinned one, else the head of its branch;
    `url` replaces the upstream's URL (a fork, a local checkout). `dest` must be new or empty.
    """
    say = log or _silent
    upstream = _with_url(upstream, url)
    _check_dest(dest)
    wanted = _wanted_revision(upstream, revision)
    with _resolved(upstream, cache_dir=cache_dir, wanted=wanted, log=say) as found:
        return _export_tree(upstream, found, dest=dest, log=say)


def resolve_revision(
    upstream: Upstream, *, cache_dir: Path, revision: str | None = None,
    url: str | None = None, log: Log | None = None,
) -> str:
    """The full SHA fetch_source would build, fetching as it would but exporting nothing."""
    upstream = _with_url(upstream, url)
    wanted = _wanted_revision(upstream, revision)
    with _resolved(upstream, cache_dir=cache_dir, wanted=wanted, log=log or _silent) as found:
        return found.sha


def redact_url(url: str) -> str:
    """The URL without the credentials it carries: `https://user:token@host/x` → `https://host/x`."""
    return _split_credentials(url)[0]


# --------------------------------------------------------------------------- running git


def _silent(_: str) -> None:
    pass


def _command(*args: str) -> list[str]:
    return ["git", *(part for item in _GIT_CONFIG for part in ("-c", item)), *args]


def _environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in _LOCAL_ENV}
    # No prompt may block an unattended build; replace refs would let a SHA name other content;
    # optional locks would make `status` rewrite the index of a user's repository.
    env.update(GIT_TERMINAL_PROMPT="0", GIT_NO_REPLACE_OBJECTS="1", GIT_OPTIONAL_LOCKS="0")
    env.update(extra or {})
    return env


def _run(args: Sequence[str], *, stdin: str = "",
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """git to its end, in a session of its own that ends with it (pipeline.children): on Ctrl-C
    or SIGTERM, what it started (a remote helper, ssh, an upload-pack) ends before the build
    goes on to let go of the mirror's lock."""
    process = _start(_command(*args), stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        stdout, stderr = process.communicate(stdin.encode())
    finally:
        children.end_session(process)
    return subprocess.CompletedProcess(process.args, process.returncode, _text(stdout),
                                       _text(stderr))


def _start(command: list[str], *, stdin: int, stderr: int | IO[bytes],
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


def _output(args: Sequence[str], failure: str, *, stdin: str = "") -> str:
    """git's stdout, stripped; CheckFailed naming what failed and git's last words otherwise."""
    result = _run(args, stdin=stdin)
    if result.returncode != 0:
        raise CheckFailed(f"{failure}: {_tail(result.stderr)}")
    return result.stdout.strip()


def _tail(stderr: str, lines: int = 3) -> str:
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


def _scrub(text: str, url: str) -> str:
    """text with url's credentials removed, wherever git may have echoed them."""
    clean, userinfo = _split_credentials(url)
    if not userinfo:
        return text
    text = text.replace(url, clean).replace(f"{userinfo}@", "")
    user, _, password = userinfo.partition(":")
    secrets = {password, unquote(password), _basic_credentials(userinfo)} if password else \
        {user, unquote(user), _basic_credentials(userinfo)}  # a lone `TOKEN@` is the secret
    for secret in sorted(secrets - {""}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _basic_credentials(userinfo: str) -> str:
    """`user:password` of a URL as HTTP basic authentication sends it (percent-decoded)."""
    user, _, password = userinfo.partition(":")
    return base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")


def _credentials_apart(url: str) -> tuple[str, dict[str, str]]:
    """The URL to give git, and the environment that carries the credentials it had.

    http(s): an `http.<url>.extraHeader` of `Authorization: Basic …`, set through git's
    GIT_CONFIG_COUNT/KEY/VALUE variables, scoped to that URL: never on a command line (where
    `ps` shows it to every user), never in the cache's config. `https://TOKEN@host/…` (GitHub's
    form) sends the token as the user name with an empty password, as git itself would. Other
    schemes keep the user name and drop the password (ssh cannot take one from a URL)."""
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


# --------------------------------------------------------------------------- what to build


def _with_url(upstream: Upstream, url: str | None) -> Upstream:
    if url is None:
        return upstream
    if not url or any(c.isspace() for c in url):
        raise BadInput(f"invalid url {url!r}: empty or contains whitespace")
    # A URL from the command line is relative to the current folder, not to matrix.toml's.
    return replace(upstream, url=url, base_dir=Path.cwd())


def _wanted_revision(upstream: Upstream, revision: str | None) -> str | None:
    chosen = revision if revision is not None else upstream.revision
    if chosen is None:
        return None
    if _HEX_REVISION.fullmatch(chosen) is None:
        raise BadInput(
            f"upstream '{upstream.id}': invalid revision {chosen!r} "
            "(expected 7 to 40 hex digits of a commit SHA)"
        )
    return chosen.lower()


def _check_dest(dest: Path) -> None:
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise BadInput(f"cannot export the source to {dest}: it exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()):
        raise BadInput(
            f"cannot export the source to {dest}: the folder is not empty "
            "(the source goes into a new or empty folder only)"
        )


# --------------------------------------------------------------------------- where it lives


@dataclass(frozen=True)
class _Remote:
    """A repository git fetches from: a URL, or the absolute path of a local repository."""

    source: str


@dataclass(frozen=True)
class _Subfolder:
    """A folder inside the work tree of a local repository, built from that repository."""

    top: Path
    subdir: str


@dataclass(frozen=True)
class _Found:
    """A resolved commit, and the git options that find the repository holding it."""

    repo: tuple[str, ...]
    base: Path  # the folder git runs in: the paths it prints are relative to it
    sha: str
    subdir: str | None = None
    dirty: bool = False

    @property
    def treeish(self) -> str:
        return self.sha if self.subdir is None else f"{self.sha}:{self.subdir}"


def _locate(upstream: Upstream) -> _Remote | _Subfolder:
    path = upstream.local_path
    if path is None:
        return _Remote(upstream.url)
    if not path.is_dir():
        problem = "is not a folder" if path.exists() else "does not exist"
        raise BadInput(f"upstream '{upstream.id}': source folder {path} {problem}")
    probe = _run(["-C", str(path), "rev-parse", "--is-inside-work-tree"])
    if probe.returncode != 0:
        raise BadInput(_not_in_git(upstream, path, probe.stderr))
    here = path.resolve()
    if probe.stdout.strip() == "true":
        top = Path(_output(["-C", str(path), "rev-parse", "--show-toplevel"], f"git in {path}"))
        top = top.resolve()
        if top == here:
            return _Remote(str(here))  # the repository itself: mirrored like any other
        return _Subfolder(top, here.relative_to(top).as_posix())
    git_dir = _output(["-C", str(path), "rev-parse", "--absolute-git-dir"], f"git in {path}")
    if Path(git_dir).resolve() == here:
        return _Remote(str(here))  # a bare repository
    raise BadInput(f"upstream '{upstream.id}': {path} is inside the git directory {git_dir}")


def _not_in_git(upstream: Upstream, path: Path, stderr: str) -> str:
    # Anything but the plain "not a repository" (e.g. git's "dubious ownership") is worth showing.
    said = "" if "not a git repository" in stderr else f" (git: {_tail(stderr, 1)})"
    return (
        f"upstream '{upstream.id}': {path} is not in a git repository{said}; sources are built "
        "from git commits so that a build can be repeated: commit them with "
        f"`git init && git add -A && git commit -m 'Import'` in {path}"
    )


@contextlib.contextmanager
def _resolved(
    upstream: Upstream, *, cache_dir: Path, wanted: str | None, log: Log
) -> Iterator[_Found]:
    """The commit to build; a mirror stays locked until the caller has exported it."""
    place = _locate(upstream)
    if isinstance(place, _Subfolder):
        yield _find_in_subfolder(upstream, place, wanted=wanted, log=log)
        return
    mirror = _mirror_path(cache_dir, place.source)
    with _locked(mirror):
        yield _find_in_mirror(upstream, place.source, mirror, wanted=wanted, log=log)


# --------------------------------------------------------------------------- resolving


def _commit_by_prefix(repo: Sequence[str], prefix: str) -> list[str]:
    """Every commit whose SHA starts with prefix (rev-parse alone would also accept a ref
    named like the prefix, and would not say whether it failed on no match or on several)."""
    listed = _output([*repo, "rev-parse", f"--disambiguate={prefix}"], f"looking up {prefix}")
    if not listed:
        return []
    kinds = _output(
        [*repo, "cat-file", "--batch-check=%(objecttype) %(objectname)"],
        f"looking up {prefix}", stdin=listed + "\n",
    )
    return [line.split()[1] for line in kinds.splitlines() if line.startswith("commit ")]


def _single_commit(upstream: Upstream, repo: Sequence[str], prefix: str) -> str | None:
    commits = _commit_by_prefix(repo, prefix)
    if len(commits) > 1:
        listed = ", ".join(sorted(commits))
        raise BadInput(
            f"upstream '{upstream.id}': revision '{prefix}' is ambiguous ({listed}); "
            "give more hex digits"
        )
    return commits[0] if commits else None


def _branch_head(upstream: Upstream, repo: Sequence[str], shown: str) -> str:
    ref = f"refs/heads/{upstream.branch}"
    result = _run([*repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
    if result.returncode == 0:
        return result.stdout.strip()
    known = _output([*repo, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads"],
                    "listing branches").split()
    raise BadInput(
        f"upstream '{upstream.id}': branch '{upstream.branch}' not found in {shown}"
        + did_you_mean(upstream.branch, known)
    )


def _find_in_mirror(
    upstream: Upstream, source: str, mirror: Path, *, wanted: str | None, log: Log
) -> _Found:
    repo = (f"--git-dir={mirror}",)
    shown = redact_url(source)
    if wanted and mirror.is_dir():
        sha = _single_commit(upstream, repo, wanted)
        if sha is not None:
            log(f"using cached revision {sha} of {shown} (no fetch needed)")
            return _Found(repo, mirror, sha)
    _update_mirror(mirror, source, log)
    if wanted is None:
        sha = _branch_head(upstream, repo, shown)
        log(f"branch '{upstream.branch}' of {shown} is at {sha}")
        return _Found(repo, mirror, sha)
    found = _single_commit(upstream, repo, wanted)
    if found is None:
        raise BadInput(
            f"upstream '{upstream.id}': revision '{wanted}' not found in {shown}; "
            f"is it pushed to branch '{upstream.branch}'?"
        )
    return _Found(repo, mirror, found)


def _find_in_subfolder(
    upstream: Upstream, place: _Subfolder, *, wanted: str | None, log: Log
) -> _Found:
    # Literal pathspecs: a folder named with `*` or `:(...)` is a name, not a pattern.
    repo = ("-C", str(place.top), "--literal-pathspecs")
    if wanted is None:
        sha = _last_commit(upstream, repo, place)
        _warn_if_shallow(repo, place, log)
    else:
        found = _single_commit(upstream, repo, wanted)
        if found is None:
            raise BadInput(
                f"upstream '{upstream.id}': revision '{wanted}' not found in {place.top}; "
                "is it committed there?"
            )
        sha = found
    _check_folder_at(upstream, repo, place, sha)
    dirty = _has_changes(repo, place)
    if dirty:
        log(
            f"warning: {place.subdir} has uncommitted changes in {place.top}; building the "
            f"committed revision {sha[:12]} without them (commit them to build them)"
        )
    log(f"using {place.subdir} of {place.top} at {sha}")
    return _Found(repo, place.top, sha, subdir=place.subdir, dirty=dirty)


def _last_commit(upstream: Upstream, repo: Sequence[str], place: _Subfolder) -> str:
    result = _run([*repo, "log", "-1", "--format=%H", "HEAD", "--", place.subdir])
    sha = result.stdout.strip()
    if result.returncode != 0 or not sha:
        raise BadInput(
            f"upstream '{upstream.id}': {place.subdir} has no commit in {place.top}; sources are "
            "built from git commits so that a build can be repeated: "
            f"`git add {place.subdir} && git commit` there"
        )
    return sha


def _check_folder_at(upstream: Upstream, repo: Sequence[str], place: _Subfolder, sha: str) -> None:
    # An older revision may predate the folder; the last commit touching it may have deleted it.
    kind = _run([*repo, "cat-file", "-t", f"{sha}:{place.subdir}"]).stdout.strip()
    if kind != "tree":
        raise BadInput(
            f"upstream '{upstream.id}': {place.subdir} is not a folder at revision {sha[:12]} "
            f"of {place.top}"
        )


def _has_changes(repo: Sequence[str], place: _Subfolder) -> bool:
    status = _output(
        [*repo, "status", "--porcelain", "--untracked-files=normal", "--", place.subdir],
        f"git status in {place.top}",
    )
    return bool(status)


def _warn_if_shallow(repo: Sequence[str], place: _Subfolder, log: Log) -> None:
    # In a shallow clone (CI's default) the last commit touching the folder may lie beyond the
    # cut, and git names the cut instead: another revision and SOURCE_DATE_EPOCH for one tree.
    if _output([*repo, "rev-parse", "--is-shallow-repository"], "git rev-parse") == "true":
        log(
            f"warning: {place.top} is a shallow clone; the revision of {place.subdir} may differ "
            "from a full clone's (fetch the full history for a repeatable build)"
        )


# --------------------------------------------------------------------------- the mirror


def _mirror_path(cache_dir: Path, source: str) -> Path:
    # Keyed without credentials: a new token must not start a new cache.
    key = redact_url(source)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_dir.absolute() / "git" / f"{_safe_name(key)}-{digest}.git"


def _safe_name(url: str) -> str:
    last = re.split(r"[/:\\]", url.rstrip("/"))[-1].removesuffix(".git")
    return re.sub(r"[^A-Za-z0-9._-]+", "-", last).strip(".-")[:40] or "repo"


@contextlib.contextmanager
def _locked(mirror: Path) -> Iterator[None]:
    """Hold the mirror's lock: parallel builds of one upstream must not fetch into it at once."""
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with open(mirror.with_name(f"{mirror.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _update_mirror(mirror: Path, source: str, log: Log) -> None:
    shown = redact_url(source)
    if mirror.is_dir():
        log(f"fetching {shown} into cache {mirror}")
        _fetch(mirror, source)
        return
    log(f"fetching {shown} into new cache {mirror}")
    for leftover in mirror.parent.glob(f"{mirror.name}.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)  # an interrupted first fetch; we hold the lock
    # Fetched under a temporary name and renamed when complete: no half cache, ever.
    temporary = Path(tempfile.mkdtemp(prefix=f"{mirror.name}.tmp-", dir=mirror.parent))
    try:
        _output(["init", "--bare", "--quiet", "--template=", str(temporary)],
                f"cannot create the cache {temporary}")
        _fetch(temporary, source)
        temporary.rename(mirror)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _fetch(git_dir: Path, source: str) -> None:
    # The URL goes on the command line, not into the cache's config; its credentials go
    # through the environment (see _credentials_apart): a token stays off disk and out of `ps`.
    url, credentials = _credentials_apart(source)
    args = [f"--git-dir={git_dir}", "fetch", "--prune", "--quiet", "--", url, *_REFSPECS]
    result = _run(args, env=credentials)
    if result.returncode != 0:
        said = _scrub(_tail(result.stderr), source)
        kind = FetchUnreachable if _UNREACHABLE.search(said) else FetchRefused
        raise kind(f"cannot fetch {redact_url(source)}: {said}")


# --------------------------------------------------------------------------- the export


def _export_tree(upstream: Upstream, found: _Found, *, dest: Path, log: Log) -> SourceTree:
    commit_time = int(_output([*found.repo, "show", "-s", "--format=%ct", found.sha],
                              f"reading commit {found.sha}"))
    # --git-path also finds the objects of a linked work tree; it may print a relative path.
    objects = found.base / _output(
        [*found.repo, "rev-parse", "--git-path", "objects"], "finding the repository's objects"
    )
    dest = dest.absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Exported and checked beside dest, then renamed: a failure leaves dest as it was.
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        log(f"exporting {found.treeish} to {dest}")
        _extract(objects, found.treeish, staging)
        _stamp(staging)
        version = _read_version(upstream, staging, found.sha)
        staging.chmod(0o755)
        _move_into(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return SourceTree(
        path=dest, url=redact_url(upstream.url), ref=upstream.branch, revision=found.sha,
        commit_time=commit_time, version=version, subdir=found.subdir, dirty=found.dirty,
    )


def _stamp(root: Path) -> None:
    """Give every exported entry EXPORT_MTIME, whatever time `git archive` gave it."""
    times = (EXPORT_MTIME, EXPORT_MTIME)
    for folder, folders, files in os.walk(root):
        for name in (*files, *folders):
            os.utime(os.path.join(folder, name), times, follow_symlinks=False)
    os.utime(root, times)


def _move_into(staging: Path, dest: Path) -> None:
    try:
        staging.rename(dest)  # replaces an empty folder in one step
    except OSError as error:
        raise BadInput(f"cannot export the source to {dest}: {error.strerror}") from None


def _extract(objects: Path, treeish: str, into: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="ninfer-kits-export-") as scratch:
        shadow = _shadow_repository(Path(scratch), objects)
        _untar([f"--git-dir={shadow}", "archive", "--format=tar", treeish], into, treeish)


def _shadow_repository(scratch: Path, objects: Path) -> Path:
    """A throwaway bare repository that borrows `objects` and exports trees as committed.

    It carries none of the source repository's config or attributes, and writing to it
    never touches a user's repository.
    """
    shadow = scratch / "shadow.git"
    _output(["init", "--bare", "--quiet", "--template=", str(shadow)],
            "cannot create a scratch repository")
    (shadow / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (shadow / "objects" / "info" / "alternates").write_text(f"{objects}\n", encoding="utf-8")
    (shadow / "info").mkdir(exist_ok=True)
    (shadow / "info" / "attributes").write_text(_PLAIN_EXPORT, encoding="utf-8")
    return shadow


def _untar(args: Sequence[str], into: Path, treeish: str) -> None:
    """Stream `git archive` into a safe extraction; git's error wins over tarfile's."""
    problem: tarfile.TarError | None = None
    with tempfile.TemporaryFile() as errors:
        process = _start(_command(*args), stdin=subprocess.DEVNULL, stderr=errors)
        assert process.stdout is not None
        try:
            with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
                # Refuses absolute names, `..`, links leaving the tree, devices.
                extract_all(archive, into, policy="data")
        except tarfile.TarError as error:
            problem = error
        finally:
            process.stdout.close()
            try:
                code = process.wait()
            finally:  # interrupted too: git and what it started end before the export does
                children.end_session(process)
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    if isinstance(problem, UnsafeMember):
        raise BadInput(f"the source tree at {treeish} has an unsafe entry: {problem}")
    if code != 0:
        raise CheckFailed(f"git archive {treeish} failed: {_tail(stderr)}")
    if problem is not None:
        raise CheckFailed(f"cannot read the archive of {treeish}: {problem}")


def _read_version(upstream: Upstream, tree: Path, sha: str) -> str | None:
    name = upstream.version_file
    if name is None:
        return None
    problem = relative_path_problem(name)
    path = tree / name
    inside = path.is_file() and path.resolve().is_relative_to(tree.resolve())
    if problem or not inside:
        raise BadInput(
            f"upstream '{upstream.id}': version_file '{name}' not found at revision {sha[:12]}"
        )
    version = path.read_text(encoding="utf-8", errors="replace").strip()
    if not version or any(c.isspace() or not c.isprintable() for c in version):
        raise BadInput(
            f"upstream '{upstream.id}': {name} at {sha[:8]} does not hold one version "
            f"string: {version[:80]!r}"
        )
    if upstream.version is not None and version != upstream.version:
        raise CheckFailed(
            f"upstream '{upstream.id}': {name} at {sha[:8]} is '{version}', "
            f"matrix.toml expects '{upstream.version}'"
        )
    return version
