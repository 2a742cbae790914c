"""The source stage: export one commit's tree (never a work tree, so one revision gives the same
source everywhere; submodules out of scope). `mirror` finds the commit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from ninfer_kits.errors import BadInput, CheckFailed
from ninfer_kits.files.tarsafe import UnsafeMember, extract_all
from ninfer_kits.host import children
from ninfer_kits.matrix import RevisionFacts, Upstream, relative_path_problem
from ninfer_kits.pipeline import git
from ninfer_kits.pipeline.mirror import Found, Log, resolved

_HEX_REVISION = re.compile(r"[0-9a-fA-F]{7,40}")

# Every exported file's mtime (1980-01-01), not the commit's nor git archive's (a tree's files
# get now): nvcc -lineinfo writes it into the device code, and a cached object must depend on
# the file's content alone (docs/build.md).
EXPORT_MTIME: Final = 315_532_800

# `git archive` honours export-ignore and export-subst from the tree's .gitattributes. A build
# must see what a checkout sees, and export-subst (`$Format:%d$`) would make the tree depend on
# the refs of the day. info/attributes outranks every .gitattributes in the tree.
_PLAIN_EXPORT: Final = "* -export-ignore -export-subst\n"


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


def fetch_source(
    upstream: Upstream, *, cache_dir: Path, dest: Path, revision: str | None = None,
    url: str | None = None, log: Log | None = None,
) -> SourceTree:
    """Export the upstream's tree at `revision` (else its pin, else its branch's head) into the new
    or empty `dest`; `url` replaces the upstream's URL."""
    say = log or (lambda _: None)
    upstream = _with_url(upstream, url)
    _check_dest(dest)
    wanted = _wanted_revision(upstream, revision)
    with resolved(upstream, cache_dir=cache_dir, wanted=wanted, log=say) as found:
        pinned = upstream.revision is not None and found.sha.startswith(upstream.revision.lower())
        if revision is not None and not pinned:
            # matrix.toml's version is that of the revision it builds: another one (--revision,
            # as a maintainer trying an upstream patch) has the version its own file says.
            upstream = replace(upstream, version=None)
        return _export_tree(upstream, found, dest=dest, log=say)


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


def _export_tree(upstream: Upstream, found: Found, *, dest: Path, log: Log) -> SourceTree:
    commit_time = int(git.output([*found.repo, "show", "-s", "--format=%ct", found.sha],
                              f"reading commit {found.sha}"))
    # --git-path also finds the objects of a linked work tree; it may print a relative path.
    objects = found.base / git.output(
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
        path=dest, url=git.redact_url(upstream.url), ref=upstream.branch, revision=found.sha,
        commit_time=commit_time, version=version, subdir=found.subdir, dirty=found.dirty,
    )


def _stamp(root: Path) -> None:
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
    """A throwaway bare repository borrowing `objects`: none of the source repository's config or
    attributes, and no write to a user's repository."""
    shadow = scratch / "shadow.git"
    git.output(["init", "--bare", "--quiet", "--template=", str(shadow)],
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
        process = git.start(git.command(*args), stdin=subprocess.DEVNULL, stderr=errors)
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
        raise CheckFailed(f"git archive {treeish} failed: {git.tail(stderr)}")
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
