"""Which commit to build, and the repository that holds it: a bare mirror in the cache, fetched
under a lock, used without fetching when it has the pinned revision (a rebuild works offline);
a folder inside a local repository is built from its last commit touching it."""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ninfer_kits.config.tables import did_you_mean
from ninfer_kits.errors import BadInput, EnvironmentFailure, NinferKitsError
from ninfer_kits.files import locks
from ninfer_kits.matrix import Upstream
from ninfer_kits.pipeline import git

Log = Callable[[str], None]

# Branches and tags, not every ref: a forge's pull-request refs would multiply the cache.
_REFSPECS: Final = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")

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
class Found:
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
    probe = git.run(["-C", str(path), "rev-parse", "--is-inside-work-tree"])
    if probe.returncode != 0:
        raise BadInput(_not_in_git(upstream, path, probe.stderr))
    here = path.resolve()
    if probe.stdout.strip() == "true":
        top = Path(git.output(["-C", str(path), "rev-parse", "--show-toplevel"], f"git in {path}"))
        top = top.resolve()
        if top == here:
            return _Remote(str(here))  # the repository itself: mirrored like any other
        return _Subfolder(top, here.relative_to(top).as_posix())
    git_dir = git.output(["-C", str(path), "rev-parse", "--absolute-git-dir"], f"git in {path}")
    if Path(git_dir).resolve() == here:
        return _Remote(str(here))  # a bare repository
    raise BadInput(f"upstream '{upstream.id}': {path} is inside the git directory {git_dir}")


def _not_in_git(upstream: Upstream, path: Path, stderr: str) -> str:
    # Anything but the plain "not a repository" (e.g. git's "dubious ownership") is worth showing.
    said = "" if "not a git repository" in stderr else f" (git: {git.tail(stderr, 1)})"
    return (
        f"upstream '{upstream.id}': {path} is not in a git repository{said}; sources are built "
        "from git commits so that a build can be repeated: commit them with "
        f"`git init && git add -A && git commit -m 'Import'` in {path}"
    )


@contextlib.contextmanager
def resolved(
    upstream: Upstream, *, cache_dir: Path, wanted: str | None, log: Log
) -> Iterator[Found]:
    """The commit to build; a mirror stays locked until the caller has exported it."""
    place = _locate(upstream)
    if isinstance(place, _Subfolder):
        yield _find_in_subfolder(upstream, place, wanted=wanted, log=log)
        return
    mirror = _mirror_path(cache_dir, place.source)
    mirror.parent.mkdir(parents=True, exist_ok=True)
    # parallel builds of one upstream must not fetch into its mirror at once
    with locks.held(mirror.with_name(f"{mirror.name}.lock"), wait=None):
        yield _find_in_mirror(upstream, place.source, mirror, wanted=wanted, log=log)


def _commit_by_prefix(repo: Sequence[str], prefix: str) -> list[str]:
    """Every commit whose SHA starts with prefix (rev-parse would also take a ref so named)."""
    listed = git.output([*repo, "rev-parse", f"--disambiguate={prefix}"], f"looking up {prefix}")
    if not listed:
        return []
    kinds = git.output(
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
    result = git.run([*repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
    if result.returncode == 0:
        return result.stdout.strip()
    known = git.output([*repo, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads"],
                    "listing branches").split()
    raise BadInput(
        f"upstream '{upstream.id}': branch '{upstream.branch}' not found in {shown}"
        + did_you_mean(upstream.branch, known)
    )


def _find_in_mirror(
    upstream: Upstream, source: str, mirror: Path, *, wanted: str | None, log: Log
) -> Found:
    repo = (f"--git-dir={mirror}",)
    shown = git.redact_url(source)
    if wanted and mirror.is_dir():
        sha = _single_commit(upstream, repo, wanted)
        if sha is not None:
            log(f"using cached revision {sha} of {shown} (no fetch needed)")
            return Found(repo, mirror, sha)
    _update_mirror(mirror, source, log)
    if wanted is None:
        sha = _branch_head(upstream, repo, shown)
        log(f"branch '{upstream.branch}' of {shown} is at {sha}")
        return Found(repo, mirror, sha)
    found = _single_commit(upstream, repo, wanted)
    if found is None:
        raise BadInput(
            f"upstream '{upstream.id}': revision '{wanted}' not found in {shown}; "
            f"is it pushed to branch '{upstream.branch}'?"
        )
    return Found(repo, mirror, found)


def _find_in_subfolder(
    upstream: Upstream, place: _Subfolder, *, wanted: str | None, log: Log
) -> Found:
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
    dirty = bool(git.output([*repo, "status", "--porcelain", "--untracked-files=normal", "--",
                             place.subdir], f"git status in {place.top}"))
    if dirty:
        log(
            f"warning: {place.subdir} has uncommitted changes in {place.top}; building the "
            f"committed revision {sha[:12]} without them (commit them to build them)"
        )
    log(f"using {place.subdir} of {place.top} at {sha}")
    return Found(repo, place.top, sha, subdir=place.subdir, dirty=dirty)


def _last_commit(upstream: Upstream, repo: Sequence[str], place: _Subfolder) -> str:
    result = git.run([*repo, "log", "-1", "--format=%H", "HEAD", "--", place.subdir])
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
    kind = git.run([*repo, "cat-file", "-t", f"{sha}:{place.subdir}"]).stdout.strip()
    if kind != "tree":
        raise BadInput(
            f"upstream '{upstream.id}': {place.subdir} is not a folder at revision {sha[:12]} "
            f"of {place.top}"
        )


def _warn_if_shallow(repo: Sequence[str], place: _Subfolder, log: Log) -> None:
    # In a shallow clone (CI's default) the last commit touching the folder may lie beyond the
    # cut, and git names the cut instead: another revision and SOURCE_DATE_EPOCH for one tree.
    if git.output([*repo, "rev-parse", "--is-shallow-repository"], "git rev-parse") == "true":
        log(
            f"warning: {place.top} is a shallow clone; the revision of {place.subdir} may differ "
            "from a full clone's (fetch the full history for a repeatable build)"
        )


def _mirror_path(cache_dir: Path, source: str) -> Path:
    # Keyed without credentials: a new token must not start a new cache.
    key = git.redact_url(source)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_dir.absolute() / "git" / f"{_safe_name(key)}-{digest}.git"


def _safe_name(url: str) -> str:
    last = re.split(r"[/:\\]", url.rstrip("/"))[-1].removesuffix(".git")
    return re.sub(r"[^A-Za-z0-9._-]+", "-", last).strip(".-")[:40] or "repo"


def _update_mirror(mirror: Path, source: str, log: Log) -> None:
    shown = git.redact_url(source)
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
        git.output(["init", "--bare", "--quiet", "--template=", str(temporary)],
                f"cannot create the cache {temporary}")
        _fetch(temporary, source)
        temporary.rename(mirror)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _fetch(git_dir: Path, source: str) -> None:
    # The URL goes on the command line, not into the cache's config; its credentials go
    # through the environment (see git.credentials_apart): a token stays off disk and out of `ps`.
    url, credentials = git.credentials_apart(source)
    args = [f"--git-dir={git_dir}", "fetch", "--prune", "--quiet", "--", url, *_REFSPECS]
    result = git.run(args, env=credentials)
    if result.returncode != 0:
        said = git.scrub(git.tail(result.stderr), source)
        kind = FetchUnreachable if _UNREACHABLE.search(said) else FetchRefused
        raise kind(f"cannot fetch {git.redact_url(source)}: {said}")
