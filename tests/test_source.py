"""The source stage on real git repositories: resolving, fetching, caching, exporting."""

from __future__ import annotations

import base64
import hashlib
import itertools
import os
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ninfer_kits.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_ENVIRONMENT,
    BadInput,
    CheckFailed,
)
from ninfer_kits.matrix import CudaVersion, Upstream, load_matrix
from ninfer_kits.pipeline.git import redact_url
from ninfer_kits.pipeline.mirror import FetchFailed, FetchRefused, FetchUnreachable
from ninfer_kits.pipeline.source import EXPORT_MTIME, SourceTree, fetch_source

from tools import TOOLCHAIN_TC

T1, T2, T3, T4 = 1_700_000_000, 1_700_086_400, 1_700_172_800, 1_700_259_200

MAIN_FILES = {
    ".gitattributes", "README.md", "VERSION", "link", "src/main.c", "tools/run.sh",
}


def git(repo: Path, *args: str, when: int = T1, stdin: str | None = None) -> str:
    """Run git as a test author at a fixed date, without the tester's own config."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_AUTHOR_DATE": f"{when} +0000", "GIT_COMMITTER_DATE": f"{when} +0000",
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
    }
    result = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, input=stdin, capture_output=True, text=True,
        check=False,
    )
    assert result.returncode == 0, f"git {args}: {result.stderr}"
    return result.stdout.strip()


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def commit(repo: Path, message: str, when: int) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, when=when)
    return git(repo, "rev-parse", "HEAD")


def make_upstream(url: str, **changes: object) -> Upstream:
    upstream = Upstream(
        id="eng", repository="owner/eng", url=url, branch="main", version_file="VERSION",
        archs=("sm_86",), min_cuda=CudaVersion.parse("13.0"), licenses=("LICENSE",),
        targets=(("eng", "apps/eng"),),
    )
    return replace(upstream, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Origin:
    """The upstream repository the tests fetch from, and the commits it holds."""

    path: Path
    first: str
    second: str
    release: str

    @property
    def file_url(self) -> str:
        return self.path.as_uri()


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    """main: two commits (VERSION 0.1.0, then 0.2.0); release/v1 branches off the first."""
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, {
        "README.md": "# engine\n", "VERSION": "0.1.0\n", "src/main.c": "int main(void) {}\n",
        "tools/run.sh": "#!/bin/sh\necho run\n",
    })
    (repo / "tools" / "run.sh").chmod(0o755)
    (repo / "link").symlink_to("README.md")
    first = commit(repo, "first", T1)
    # export-ignore would make `git archive` drop README.md; a checkout keeps it, so must we.
    write(repo, {
        "VERSION": "0.2.0\n", "src/main.c": "int main(void) { return 0; }\n",
        ".gitattributes": "README.md export-ignore\n",
    })
    second = commit(repo, "second", T2)
    git(repo, "checkout", "-q", "-b", "release/v1", first)
    write(repo, {"VERSION": "1.0.0\n"})
    release = commit(repo, "release", T3)
    git(repo, "checkout", "-q", "main")
    return Origin(repo, first, second, release)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def files_in(root: Path) -> set[str]:
    return {
        path.relative_to(root).as_posix() for path in root.rglob("*")
        if path.is_file() or path.is_symlink()
    }


def fetch(
    upstream: Upstream, cache: Path, dest: Path, **options: object
) -> SourceTree:
    return fetch_source(upstream, cache_dir=cache, dest=dest, **options)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- resolving


def test_branch_head_resolves_to_the_full_sha(origin: Origin, cache: Path, tmp_path: Path) -> None:
    tree = fetch(make_upstream(origin.file_url), cache, tmp_path / "out")
    assert tree.revision == origin.second
    assert len(tree.revision) == 40
    assert (tree.ref, tree.url, tree.subdir, tree.dirty) == ("main", origin.file_url, None, False)
    assert tree.version == "0.2.0"
    assert tree.template_inputs().rev8 == origin.second[:8]


def test_a_branch_with_a_slash(origin: Origin, cache: Path, tmp_path: Path) -> None:
    upstream = make_upstream(origin.file_url, branch="release/v1")
    tree = fetch(upstream, cache, tmp_path / "out")
    assert (tree.revision, tree.version, tree.ref) == (origin.release, "1.0.0", "release/v1")


def test_pinned_short_sha_resolves(origin: Origin, cache: Path, tmp_path: Path) -> None:
    upstream = make_upstream(origin.file_url, revision=origin.first[:7].upper())
    tree = fetch(upstream, cache, tmp_path / "out")
    assert (tree.revision, tree.version) == (origin.first, "0.1.0")


def test_explicit_revision_wins_over_the_pinned_one(
    origin: Origin, cache: Path, tmp_path: Path
) -> None:
    upstream = make_upstream(origin.file_url, revision=origin.first[:12])
    tree = fetch(upstream, cache, tmp_path / "out", revision=origin.release[:10])
    assert (tree.revision, tree.version) == (origin.release, "1.0.0")
    assert fetch(upstream, cache, tmp_path / "pinned").revision == origin.first
    assert fetch(upstream, cache, tmp_path / "second",
                 revision=origin.second).revision == origin.second


def test_missing_revision_names_revision_url_and_branch(
    origin: Origin, cache: Path, tmp_path: Path
) -> None:
    upstream = make_upstream(origin.file_url, revision="deadbeef")
    with pytest.raises(BadInput) as caught:
        fetch(upstream, cache, tmp_path / "out")
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert str(caught.value) == (
        f"upstream 'eng': revision 'deadbeef' not found in {origin.file_url}; "
        "is it pushed to branch 'main'?"
    )
    assert not (tmp_path / "out").exists()


def test_missing_branch_suggests_one(origin: Origin, cache: Path, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"branch 'mian' not found in .*did you mean 'main'\?"):
        fetch(make_upstream(origin.file_url, branch="mian"), cache, tmp_path / "out")


@pytest.mark.parametrize("revision", ["v1.0", "abc12", "--upload-pack=x", ""])
def test_a_revision_must_be_hex(origin: Origin, cache: Path, tmp_path: Path, revision: str) -> None:
    with pytest.raises(BadInput, match="expected 7 to 40 hex digits"):
        fetch(make_upstream(origin.file_url), cache, tmp_path / "out", revision=revision)


def colliding_commits(tree: str) -> tuple[str, str]:
    """Two commit objects whose SHAs share their first 7 hex digits (a birthday search)."""
    seen: dict[str, str] = {}
    for n in itertools.count():
        body = (
            f"tree {tree}\nauthor T <t@example.com> {T1} +0000\n"
            f"committer T <t@example.com> {T1} +0000\n\ncollision {n}\n"
        )
        data = body.encode()
        prefix = hashlib.sha1(b"commit %d\0" % len(data) + data).hexdigest()[:7]
        if prefix in seen:
            return seen[prefix], body
        seen[prefix] = body
    raise AssertionError  # unreachable


def test_an_ambiguous_short_sha_is_refused(origin: Origin, cache: Path, tmp_path: Path) -> None:
    tree = git(origin.path, "rev-parse", "HEAD^{tree}")
    shas = []
    for i, body in enumerate(colliding_commits(tree)):
        sha = git(origin.path, "hash-object", "-t", "commit", "-w", "--stdin", stdin=body)
        git(origin.path, "update-ref", f"refs/heads/twin{i}", sha)
        shas.append(sha)
    assert shas[0][:7] == shas[1][:7] and shas[0] != shas[1]
    upstream = make_upstream(origin.file_url, version_file=None)
    with pytest.raises(BadInput, match=f"revision '{shas[0][:7]}' is ambiguous") as caught:
        fetch(upstream, cache, tmp_path / "out", revision=shas[0][:7])
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert shas[0] in str(caught.value) and shas[1] in str(caught.value)
    # One more digit tells them apart, unless the two share it too.
    if shas[0][7] != shas[1][7]:
        found = fetch(upstream, cache, tmp_path / "eight", revision=shas[1][:8])
        assert found.revision == shas[1]


# --------------------------------------------------------------------------- fetching


@pytest.mark.parametrize("form", ["file-url", "path", "relative-path"])
def test_file_urls_and_paths_both_work(
    origin: Origin, cache: Path, tmp_path: Path, form: str
) -> None:
    url = {"file-url": origin.file_url, "path": str(origin.path), "relative-path": "origin"}[form]
    upstream = make_upstream(url, base_dir=tmp_path)
    tree = fetch(upstream, cache, tmp_path / "out")
    assert (tree.revision, tree.url, tree.subdir) == (origin.second, url, None)
    mirrors = sorted(p.name for p in (cache / "git").iterdir())
    assert len(mirrors) == 2 and mirrors[0].startswith("origin-") and mirrors[1].endswith(".lock")
    assert mirrors[0].endswith(".git") and len(mirrors[0]) == len("origin-0123456789ab.git")


def test_url_overrides_the_matrix_url(
    origin: Origin, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = make_upstream("https://example.invalid/owner/eng.git", base_dir=tmp_path / "x")
    tree = fetch(upstream, cache, tmp_path / "out", url=str(origin.path))
    assert (tree.revision, tree.url) == (origin.second, str(origin.path))
    # A relative path on the command line is read from the current folder.
    monkeypatch.chdir(origin.path / "src")
    tree = fetch(upstream, cache, tmp_path / "out2", url="..", revision=origin.first)
    assert (tree.revision, tree.url) == (origin.first, "..")


def test_a_new_commit_is_fetched(origin: Origin, cache: Path, tmp_path: Path) -> None:
    upstream = make_upstream(origin.file_url)
    assert fetch(upstream, cache, tmp_path / "before").revision == origin.second
    write(origin.path, {"VERSION": "0.3.0\n"})
    third = commit(origin.path, "third", T4)
    log = Recorder()
    tree = fetch(upstream, cache, tmp_path / "out", log=log)
    assert (tree.revision, tree.version) == (third, "0.3.0")
    assert "fetching " in log.text


def test_a_pinned_revision_builds_offline_from_the_cache(
    origin: Origin, cache: Path, tmp_path: Path
) -> None:
    short = make_upstream(origin.file_url, revision=origin.first[:8])
    fetch(short, cache, tmp_path / "one")
    shutil.rmtree(origin.path)
    for i, pinned in enumerate((short, replace(short, revision=origin.second))):
        log = Recorder()
        tree = fetch(pinned, cache, tmp_path / f"offline{i}", log=log)
        assert tree.revision in (origin.first, origin.second)
        assert "using cached revision" in log.text and "fetching" not in log.text
    with pytest.raises(FetchRefused, match="cannot fetch file://") as caught:
        fetch(make_upstream(origin.file_url), cache, tmp_path / "head")  # a head needs the network
    assert isinstance(caught.value, FetchFailed) and caught.value.exit_code == EXIT_BAD_INPUT


def test_credentials_never_show(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The port must be reached directly, and refuse; a proxy would answer instead.
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    log = Recorder()
    url = "https://user:secret@127.0.0.1:9/x.git"
    with pytest.raises(FetchUnreachable) as caught:
        fetch(make_upstream(url), cache, tmp_path / "out", log=log)
    assert caught.value.exit_code == EXIT_ENVIRONMENT  # the network's fault, not the input's
    message = str(caught.value)
    assert message.startswith("cannot fetch https://127.0.0.1:9/x.git: ")
    assert "secret" not in message and "user" not in message
    assert "secret" not in log.text and "https://127.0.0.1:9/x.git" in log.text
    # An interrupted first fetch leaves no half cache behind, only the lock file.
    assert [p.suffix for p in (cache / "git").iterdir()] == [".lock"]


CANARY = "ghp_c4nary0f0r0ninfer0kits0tests"


class _GitServer(ThreadingHTTPServer):
    """Smart HTTP in front of `git http-backend`, answering only with the right Authorization,
    and looking at every process's command line for the canary while git waits for it."""

    daemon_threads = True

    def __init__(self, root: Path, expected: str) -> None:
        super().__init__(("127.0.0.1", 0), _GitHandler)
        self.root, self.expected = root, expected
        self.seen: list[str | None] = []
        self.leaks: list[str] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _GitHandler(BaseHTTPRequestHandler):
    server: _GitServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        auth = self.headers.get("Authorization")
        self.server.seen.append(auth)
        self.server.leaks += command_lines_holding(CANARY)
        if auth != self.server.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(self.server.root),
               "GIT_HTTP_EXPORT_ALL": "1", "REQUEST_METHOD": self.command, "PATH_INFO": path,
               "QUERY_STRING": query, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(length), "REMOTE_ADDR": "127.0.0.1",
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
        body = self.rfile.read(length) if length else b""
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                             check=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(": ")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def command_lines_holding(secret: str) -> list[str]:
    """Every process command line (what `ps` shows to any user) that holds `secret`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile
        if secret.encode() in argv:
            shown = argv.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{proc.name}: {shown}")
    return found


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """127.0.0.1 must be reached directly; a proxy would answer instead."""
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_a_token_never_reaches_a_command_line_a_message_or_the_cache(
    origin: Origin, cache: Path, tmp_path: Path, no_proxy: None
) -> None:
    """`--source https://user:TOKEN@host/...`: git gets the URL without the token and an
    Authorization header through its environment; `ps` never shows the token (sampled while
    git waits for each answer), nor does any message, log line or file of the cache."""
    served = tmp_path / "srv"
    served.mkdir()
    git(served, "clone", "-q", "--bare", str(origin.path), "eng.git")
    token = base64.b64encode(f"ci:{CANARY}".encode()).decode()
    server = _GitServer(served, f"Basic {token}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        clean = f"http://127.0.0.1:{server.port}/eng.git"
        log = Recorder()
        tree = fetch(make_upstream(f"http://ci:{CANARY}@127.0.0.1:{server.port}/eng.git"),
                     cache, tmp_path / "out", log=log)
        assert (tree.revision, tree.url) == (origin.second, clean)
        assert server.seen and set(server.seen) == {server.expected}, server.seen
        assert server.leaks == []
        assert CANARY not in log.text and clean in log.text
        for path in cache.rglob("*"):
            assert path.is_dir() or CANARY.encode() not in path.read_bytes(), path
        # A token the server refuses: bad input, and the message names the URL without it.
        wrong = "ghp_wr0ng0t0ken0for0ninfer0kits"
        with pytest.raises(FetchRefused) as caught:
            fetch(make_upstream(f"https://{wrong}@127.0.0.1:{server.port}/eng.git".replace(
                "https", "http")), tmp_path / "cache2", tmp_path / "out2", log=log)
        assert caught.value.exit_code == EXIT_BAD_INPUT
        assert str(caught.value).startswith(f"cannot fetch {clean}: ")
        assert wrong not in str(caught.value) and wrong not in log.text
        assert server.seen[-1] == "Basic " + base64.b64encode(f"{wrong}:".encode()).decode()
        assert command_lines_holding(wrong) == [] and server.leaks == []
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:secret@host/x.git", "https://host/x.git"),
    ("https://ghp_token@github.com/o/r.git", "https://github.com/o/r.git"),
    ("https://u:p@ss@host/x", "https://host/x"),
    ("http://u:p@host:8080", "http://host:8080"),
    ("ssh://u:pw@host/x.git", "ssh://host/x.git"),
    ("ssh://git@host/x.git", "ssh://git@host/x.git"),
    ("git@github.com:o/r.git", "git@github.com:o/r.git"),
    ("https://host/path@v1/x.git", "https://host/path@v1/x.git"),
    ("/srv/git/a@b", "/srv/git/a@b"),
])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_parallel_fetches_share_one_cache(origin: Origin, cache: Path, tmp_path: Path) -> None:
    upstream = make_upstream(origin.file_url)
    with ThreadPoolExecutor(4) as pool:
        trees = list(pool.map(lambda i: fetch(upstream, cache, tmp_path / f"out{i}"), range(4)))
    assert {tree.revision for tree in trees} == {origin.second}
    assert len(list((cache / "git").glob("*.git"))) == 1


# --------------------------------------------------------------------------- exporting


def test_the_export_is_exactly_the_committed_tree(
    origin: Origin, cache: Path, tmp_path: Path
) -> None:
    write(origin.path, {"untracked.txt": "not committed\n", "src/main.c": "changed\n"})
    tree = fetch(make_upstream(str(origin.path)), cache, tmp_path / "out")
    assert tree.path == tmp_path / "out"
    assert files_in(tree.path) == MAIN_FILES
    assert not (tree.path / ".git").exists()
    assert (tree.path / "src" / "main.c").read_text() == "int main(void) { return 0; }\n"
    assert (tree.path / "link").is_symlink() and os.readlink(tree.path / "link") == "README.md"
    assert (tree.path / "tools" / "run.sh").stat().st_mode & 0o100
    assert not (tree.path / "README.md").stat().st_mode & 0o100


def test_commit_time_is_the_committer_date(origin: Origin, cache: Path, tmp_path: Path) -> None:
    """The commit time is the build's SOURCE_DATE_EPOCH; the files' mtimes are one fixed time
    whatever the commit's, so that an unchanged file's object (nvcc -lineinfo records its
    mtime) is the same in every revision, as a compiler cache or a kept build tree reuses it."""
    upstream = make_upstream(origin.file_url)
    later = fetch(upstream, cache, tmp_path / "a")
    earlier = fetch(upstream, cache, tmp_path / "b", revision=origin.first)
    assert (later.commit_time, earlier.commit_time) == (T2, T1)
    for tree in (later, earlier):
        entries = [tree.path, *tree.path.rglob("*")]
        assert {int(entry.lstat().st_mtime) for entry in entries} == {EXPORT_MTIME}


def test_an_empty_dest_is_used_and_a_full_one_refused(
    origin: Origin, cache: Path, tmp_path: Path
) -> None:
    upstream = make_upstream(origin.file_url)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert fetch(upstream, cache, empty).path == empty
    with pytest.raises(BadInput, match="the folder is not empty") as caught:
        fetch(upstream, cache, empty)
    assert caught.value.exit_code == EXIT_BAD_INPUT
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadInput, match="not a folder"):
        fetch(upstream, cache, tmp_path / "file")


def test_the_user_environment_does_not_leak_in(
    origin: Origin, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("post-checkout", "reference-transaction", "post-merge"):
        (hooks / hook).write_text("#!/bin/sh\nexit 1\n")
        (hooks / hook).chmod(0o755)
    config = tmp_path / "gitconfig"
    config.write_text(
        f"[core]\n\tautocrlf = true\n\thooksPath = {hooks}\n[color]\n\tui = always\n"
        "[log]\n\tshowSignature = true\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path / "nowhere"))
    tree = fetch(make_upstream(origin.file_url), cache, tmp_path / "out")
    assert tree.commit_time == T2
    assert (tree.path / "VERSION").read_bytes() == b"0.2.0\n"


@pytest.mark.parametrize("target", ["../../outside", "/etc/passwd"])
def test_a_link_out_of_the_tree_is_refused(cache: Path, tmp_path: Path, target: str) -> None:
    repo = tmp_path / "evil"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "escape").symlink_to(target)
    commit(repo, "escape", T1)
    with pytest.raises(BadInput, match="unsafe entry") as caught:
        fetch(make_upstream(str(repo), version_file=None), cache, tmp_path / "out")
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "outside").exists()


# --------------------------------------------------------------------------- the version


def test_the_version_must_match_the_matrix(origin: Origin, cache: Path, tmp_path: Path) -> None:
    upstream = make_upstream(origin.file_url, version="0.2.0")
    assert fetch(upstream, cache, tmp_path / "ok").version == "0.2.0"
    wrong = replace(upstream, version="0.6.1-rtx3090")
    with pytest.raises(CheckFailed) as caught:
        fetch(wrong, cache, tmp_path / "bad")
    assert caught.value.exit_code == EXIT_CHECK_FAILED
    assert str(caught.value).endswith(
        f"VERSION at {origin.second[:8]} is '0.2.0', matrix.toml expects '0.6.1-rtx3090'"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "ok", "origin"]


def test_the_version_is_the_pinned_revisions(origin: Origin, cache: Path,
                                             tmp_path: Path) -> None:
    """matrix.toml's version holds for its pinned revision, given in full or short; another
    revision (--revision, as a maintainer trying an upstream patch) has its own VERSION's."""
    upstream = make_upstream(origin.file_url, revision=origin.first[:8], version="0.1.0")
    assert fetch(upstream, cache, tmp_path / "pinned").version == "0.1.0"
    assert fetch(upstream, cache, tmp_path / "full", revision=origin.first).version == "0.1.0"
    other = fetch(upstream, cache, tmp_path / "other", revision=origin.second[:10])
    assert (other.revision, other.version) == (origin.second, "0.2.0")
    wrong = replace(upstream, version="0.6.1-rtx3090")
    with pytest.raises(CheckFailed, match=r"is '0\.1\.0', matrix\.toml expects '0\.6\.1-rtx3090'"):
        fetch(wrong, cache, tmp_path / "bad", revision=origin.first.upper())


def test_a_missing_version_file_names_file_and_revision(
    origin: Origin, cache: Path, tmp_path: Path
) -> None:
    upstream = make_upstream(origin.file_url, version_file="meta/VERSION")
    expected = f"'meta/VERSION' not found at revision {origin.second[:12]}"
    with pytest.raises(BadInput, match=expected):
        fetch(upstream, cache, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_no_version_file_no_version(origin: Origin, cache: Path, tmp_path: Path) -> None:
    tree = fetch(make_upstream(origin.file_url, version_file=None), cache, tmp_path / "out")
    assert tree.version is None


# --------------------------------------------------------------------------- a folder in a repo


@dataclass(frozen=True)
class Outer:
    path: Path
    engine_commit: str
    later: str


@pytest.fixture
def outer(tmp_path: Path) -> Outer:
    """A repository holding examples/engine; its last commit touches only the README."""
    repo = tmp_path / "outer"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "work")
    write(repo, {
        "README.md": "outer\n",
        "examples/engine/VERSION": "0.0.1\n",
        "examples/engine/src/a.c": "int a;\n",
        "examples/other/x.c": "int x;\n",
    })
    engine_commit = commit(repo, "engine", T1)
    write(repo, {"README.md": "outer, later\n"})
    later = commit(repo, "later", T2)
    return Outer(repo, engine_commit, later)


def test_a_folder_builds_from_its_last_commit(outer: Outer, cache: Path, tmp_path: Path) -> None:
    upstream = make_upstream("examples/engine", base_dir=outer.path)
    log = Recorder()
    tree = fetch(upstream, cache, tmp_path / "out", log=log)
    assert (tree.revision, tree.commit_time) == (outer.engine_commit, T1)
    assert (tree.subdir, tree.dirty, tree.version) == ("examples/engine", False, "0.0.1")
    assert (tree.url, tree.ref) == ("examples/engine", "main")
    assert files_in(tree.path) == {"VERSION", "src/a.c"}
    assert "warning" not in log.text
    assert not cache.exists()  # the enclosing repository itself is read; nothing is mirrored
    # git archive stamps a subfolder's tree with the current time; nvcc -lineinfo records
    # source mtimes in device code, so every entry carries the one fixed export time instead.
    entries = [tree.path, *tree.path.rglob("*")]
    assert {int(entry.lstat().st_mtime) for entry in entries} == {EXPORT_MTIME}


def test_a_dirty_folder_builds_the_commit_and_warns(
    outer: Outer, cache: Path, tmp_path: Path
) -> None:
    write(outer.path, {"examples/engine/src/a.c": "int a = 1;\n", "examples/engine/new.c": ""})
    write(outer.path, {"examples/other/x.c": "changed elsewhere\n"})
    log = Recorder()
    upstream = make_upstream("examples/engine", base_dir=outer.path)
    tree = fetch(upstream, cache, tmp_path / "out", log=log)
    assert (tree.revision, tree.dirty) == (outer.engine_commit, True)
    assert (tree.path / "src" / "a.c").read_text() == "int a;\n"
    assert files_in(tree.path) == {"VERSION", "src/a.c"}
    assert "warning: examples/engine has uncommitted changes" in log.text


def test_a_folder_at_an_explicit_revision(outer: Outer, cache: Path, tmp_path: Path) -> None:
    write(outer.path, {"examples/engine/VERSION": "0.0.2\n"})
    newer = commit(outer.path, "bump", T3)
    upstream = make_upstream("examples/engine", base_dir=outer.path)
    assert fetch(upstream, cache, tmp_path / "new").revision == newer
    old = fetch(upstream, cache, tmp_path / "old", revision=outer.engine_commit[:9])
    assert (old.revision, old.version, old.commit_time) == (outer.engine_commit, "0.0.1", T1)
    assert fetch(upstream, cache, tmp_path / "again").revision == newer
    with pytest.raises(BadInput, match=r"revision 'deadbeef' not found in .*is it committed there"):
        fetch(upstream, cache, tmp_path / "none", revision="deadbeef")


def test_a_folder_must_exist_at_the_revision(outer: Outer, cache: Path, tmp_path: Path) -> None:
    write(outer.path, {"examples/late/VERSION": "1\n"})
    commit(outer.path, "late", T3)
    upstream = make_upstream("examples/late", base_dir=outer.path)
    assert fetch(upstream, cache, tmp_path / "now").version == "1"
    before = f"examples/late is not a folder at revision {outer.later[:12]}"
    with pytest.raises(BadInput, match=before):
        fetch(upstream, cache, tmp_path / "before", revision=outer.later)
    git(outer.path, "rm", "-q", "-r", "--cached", "examples/late")  # deleted, still on disk
    git(outer.path, "commit", "-q", "-m", "unlate", when=T4)
    with pytest.raises(BadInput, match="examples/late is not a folder at revision"):
        fetch(upstream, cache, tmp_path / "deleted")


def test_a_folder_through_the_matrix(outer: Outer, cache: Path, tmp_path: Path) -> None:
    (outer.path / "matrix.toml").write_text(MATRIX, encoding="utf-8")
    upstream = load_matrix(outer.path / "matrix.toml").upstream("example")
    tree = fetch(upstream, cache, tmp_path / "out")
    assert (tree.revision, tree.subdir) == (outer.engine_commit, "examples/engine")
    assert tree.version == "0.0.1"
    # The matrix file itself is not committed, and lies outside the folder: not dirty.
    assert not tree.dirty


def test_an_uncommitted_folder_is_refused(outer: Outer, cache: Path, tmp_path: Path) -> None:
    write(outer.path, {"examples/fresh/VERSION": "1\n"})
    with pytest.raises(BadInput, match=r"examples/fresh has no commit in .*git commit"):
        fetch(make_upstream("examples/fresh", base_dir=outer.path), cache, tmp_path / "out")


def test_a_folder_outside_any_repository_is_refused(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    write(tmp_path / "plain", {"VERSION": "1\n"})
    with pytest.raises(BadInput) as caught:
        fetch(make_upstream("plain", base_dir=tmp_path), cache, tmp_path / "out")
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert "is not in a git repository" in message and "git init && git add -A" in message
    with pytest.raises(BadInput, match=r"source folder .*missing does not exist"):
        fetch(make_upstream("missing", base_dir=tmp_path), cache, tmp_path / "out")


MATRIX = """\
schema = 1

[upstreams.example]
repository = "ninfer-kits/example-engine"
url = "examples/engine"
branch = "main"
version_file = "VERSION"
archs = ["sm_86"]
min_cuda = "13.0"
licenses = ["LICENSE"]
targets = { "ninfer" = "apps/ninfer" }

""" + TOOLCHAIN_TC + """
[kits.example]
upstream = "example"
arch = "sm_86"
toolchain = "tc"
card = "any sm_86 GPU"
tag = "example-v{version}-linux-{arch_id}"
asset = "ninfer-example-kit-v{version}-{arch_id}.tar.gz"
"""
