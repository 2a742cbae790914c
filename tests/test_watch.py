"""`ninfer-kits watch` against the local GitHub server: conditional requests (a second run with
nothing changed answers only 304s, counted on the server), exactly the kits of a moved upstream
stale, pins and the ledger, the build matrix in $GITHUB_OUTPUT, and the faults: a deleted
branch, a renamed repository (301), a private repository without a token, rate limits with
Retry-After, a ledger file that does not parse."""

from __future__ import annotations

import datetime
import email.utils
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from github_server import GitHubServer
from ninfer_kits import cli
from ninfer_kits.matrix import load_matrix
from ninfer_kits.matrix.inputs import kit_inputs
from ninfer_kits.release import ledger

HEAD_A = "a" * 40
HEAD_B = "b" * 40
PIN_C = "c" * 40
TOKEN = "ghp_watchtoken0123456789canary"

MATRIX = """
schema = 1

[upstreams.alpha]
repository = "up/alpha"
url = "https://github.com/up/alpha.git"
branch = "main"
archs = ["sm_86"]
min_cuda = "13.0"
licenses = ["LICENSE"]
targets = { "ninfer" = "apps/ninfer" }

[upstreams.beta]
repository = "up/beta"
url = "https://github.com/up/beta.git"
branch = "release/v1"
archs = ["sm_86", "sm_89"]
min_cuda = "13.0"
licenses = ["LICENSE"]
targets = { "ninfer" = "apps/ninfer" }

[upstreams.gamma]
repository = "up/gamma"
url = "https://github.com/up/gamma.git"
branch = "main"
revision = "%(pin)s"
archs = ["sm_86"]
min_cuda = "13.0"
licenses = ["LICENSE"]
targets = { "ninfer" = "apps/ninfer" }

[toolchains.tc]
dockerfile = "dockerfiles/toolchain-cuda-ubuntu.Dockerfile"
base_image = "nvidia/cuda:13.1.2-devel-ubuntu24.04"
cuda = "13.1.2"
runtime_dockerfile = "dockerfiles/runtime-ubuntu.Dockerfile"
runtime_base_image = "nvidia/cuda:13.1.2-runtime-ubuntu24.04"

[kits.alpha-sm86]
upstream = "alpha"
arch = "sm_86"
toolchain = "tc"
card = "RTX 3090"
tag = "alpha-{arch_id}-{rev8}"
asset = "alpha-{rev12}-{arch_id}.tar.gz"

[kits.beta-sm86]
upstream = "beta"
arch = "sm_86"
toolchain = "tc"
card = "RTX 3090"
tag = "beta-{arch_id}-{rev8}"
asset = "beta-{rev12}-{arch_id}.tar.gz"

[kits.beta-sm89]
upstream = "beta"
arch = "sm_89"
toolchain = "tc"
card = "RTX 4090"
tag = "beta-{arch_id}-{rev8}"
asset = "beta-{rev12}-{arch_id}.tar.gz"

[kits.gamma-sm86]
upstream = "gamma"
arch = "sm_86"
toolchain = "tc"
card = "RTX 3090"
tag = "gamma-{arch_id}-{rev8}"
asset = "gamma-{rev12}-{arch_id}.tar.gz"
"""

KITS = {"alpha-sm86": ("up/alpha", "sm_86"), "beta-sm86": ("up/beta", "sm_86"),
        "beta-sm89": ("up/beta", "sm_89"), "gamma-sm86": ("up/gamma", "sm_86")}


def publish(root: Path, kit: str, revision: str, day: int = 1,
            toolchain: str = "tc", inputs: bool = False) -> Path:
    """A ledger entry of `kit` built from `revision`; with `inputs`, recording the inputs the
    matrix in `root` gives it now (as a build and publish write them)."""
    repository, arch = KITS[kit]
    made = kit_inputs(load_matrix(root / "matrix.toml").kit(kit), revision) if inputs else None
    tag = f"{kit}-{revision[:8]}"
    asset = f"{kit}-{revision[:12]}.tar.gz"
    entry = ledger.LedgerEntry(
        tag=tag, kit=kit, card="card", upstream=repository,
        upstream_url=f"https://github.com/{repository}.git", revision=revision, version="",
        arch=arch, cuda_version="13.1.115", toolchain=toolchain, asset=asset,
        published_at=datetime.datetime(2026, 1, day, tzinfo=datetime.UTC),
        stores=(ledger.LedgerStore(name="local", location=str(root / "out")),),
        assets=(ledger.LedgerAsset(name=asset, size=1, sha256="0" * 64, sha1="0" * 40,
                                   urls=(("local", "file:///x"),)),),
        floor=(), inputs=made.digest if made else None,
        input_parts=made.short_parts() if made else ())
    path = ledger.path_for(root / "releases", tag)
    ledger.write(path, entry)
    return path


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    with GitHubServer() as github:
        github.add_token(TOKEN)
        github.add_repo("up/alpha", default_branch="main", head=HEAD_A)
        github.add_repo("up/beta", default_branch="release/v1", head=HEAD_B)
        github.add_repo("up/gamma", default_branch="main", head=PIN_C)
        yield github


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "matrix.toml").write_text(MATRIX % {"pin": PIN_C}, encoding="utf-8")
    for kit, head in (("alpha-sm86", HEAD_A), ("beta-sm86", HEAD_B), ("beta-sm89", HEAD_B),
                      ("gamma-sm86", PIN_C)):
        publish(tmp_path, kit, head)
    return tmp_path


def watch(root: Path, server: GitHubServer | str, capsys: pytest.CaptureFixture[str],
          monkeypatch: pytest.MonkeyPatch, *args: str,
          token: str | None = TOKEN) -> tuple[int, str, str, dict[str, str]]:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("NINFER_KITS_RETRY_SCALE", "0.001")  # the real backoff, in milliseconds
    if token:
        monkeypatch.setenv("GH_TOKEN", token)
    output = root / "github_output"
    output.write_text("", encoding="utf-8")
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    api = server if isinstance(server, str) else server.base_url
    code = cli.main(["watch", "--matrix", str(root / "matrix.toml"), "--api", api,
                     "--state", str(root / "state.json"), "--github-output", *args])
    out, err = capsys.readouterr()
    values = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert TOKEN not in out + err + output.read_text()
    if (root / "state.json").exists():
        assert TOKEN not in (root / "state.json").read_text()
    return code, out, err, values


def stale_kits(values: dict[str, str]) -> list[str]:
    return [entry["kit"] for entry in json.loads(values["matrix"])["include"]]


def commit_requests(server: GitHubServer) -> list[int | None]:
    return [event.status for event in server.requests("GET", r"/commits/")]


def test_nothing_changed_twice_costs_only_304s(root: Path, server: GitHubServer,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _, values = watch(root, server, capsys, monkeypatch)
    assert code == 0 and values == {"matrix": '{"include":[]}', "stale": "0"}
    assert commit_requests(server) == [200, 200]  # alpha and beta; gamma is pinned
    used = server.rate_limit(TOKEN)[1]
    code, out, err, values = watch(root, server, capsys, monkeypatch)
    assert code == 0 and values["stale"] == "0" and "0 of 4 kits stale" in out
    assert "up/beta release/v1 at bbbbbbbbbbbb, unchanged (304)" in err
    assert commit_requests(server) == [200, 200, 304, 304]
    assert server.rate_limit(TOKEN)[1] == used  # a 304 costs no rate limit


def test_one_upstream_moved_makes_exactly_its_kits_stale(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    watch(root, server, capsys, monkeypatch)
    moved = "d" * 40
    server.set_branch("up/beta", "release/v1", moved)
    code, _out, _, values = watch(root, server, capsys, monkeypatch)
    assert code == 0 and values["stale"] == "2"
    assert stale_kits(values) == ["beta-sm86", "beta-sm89"]
    include = json.loads(values["matrix"])["include"]
    assert {entry["revision"] for entry in include} == {moved}
    assert "runner" not in include[0]  # the workflow chooses it (NINFER_KITS_BUILD_RUNNER)
    assert "new head of release/v1" in include[0]["reason"]
    assert commit_requests(server) == [200, 200, 304, 200]
    # Built and published: nothing stale any more.
    publish(root, "beta-sm86", moved, day=2)
    publish(root, "beta-sm89", moved, day=2)
    code, _, _, values = watch(root, server, capsys, monkeypatch)
    assert code == 0 and values["stale"] == "0"


def test_a_release_built_on_a_host_is_not_stale_for_its_toolchain(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A kit built with the local builder records `toolchain: host`, no matrix toolchain: it is
    not "toolchain changed: host → tc" on every run (the local build would never end it)."""
    publish(root, "beta-sm89", HEAD_B, day=3, toolchain="host")
    code, _out, _, values = watch(root, server, capsys, monkeypatch)
    assert code == 0
    reasons = {e["kit"]: e["reason"] for e in json.loads(values["matrix"])["include"]}
    assert "beta-sm89" not in reasons, reasons
    publish(root, "beta-sm89", HEAD_B, day=4, toolchain="old-tc")  # a matrix toolchain still is
    code, _out, _, values = watch(root, server, capsys, monkeypatch)
    reasons = {e["kit"]: e["reason"] for e in json.loads(values["matrix"])["include"]}
    assert reasons["beta-sm89"].startswith("toolchain changed: old-tc → tc"), reasons


def test_new_pin_missing_release_toolchain_and_a_dispatched_revision(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = (root / "matrix.toml").read_text().replace(PIN_C, "e" * 12)
    (root / "matrix.toml").write_text(text)
    (root / "releases" / f"alpha-sm86-{HEAD_A[:8]}.toml").unlink()
    publish(root, "beta-sm89", HEAD_B, day=3, toolchain="old-tc")
    code, _out, _, values = watch(root, server, capsys, monkeypatch)
    assert code == 0
    reasons = {e["kit"]: e["reason"] for e in json.loads(values["matrix"])["include"]}
    assert set(reasons) == {"alpha-sm86", "beta-sm89", "gamma-sm86"}
    assert reasons["alpha-sm86"].startswith("missing release")
    assert reasons["beta-sm89"].startswith("toolchain changed: old-tc → tc")
    assert reasons["gamma-sm86"].startswith("new pin: eeeeeeeeeeee")
    before = len(commit_requests(server))
    code, _, _, values = watch(root, server, capsys, monkeypatch, "beta-sm86",
                               "--revision", "f" * 40)
    assert code == 0 and stale_kits(values) == ["beta-sm86"]
    assert json.loads(values["matrix"])["include"][0]["reason"].startswith("requested revision")
    assert len(commit_requests(server)) == before  # a dispatched revision asks nobody


def test_a_deleted_branch_is_reported_and_the_others_still_compared(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = (root / "matrix.toml").read_text().replace('branch = "release/v1"',
                                                      'branch = "release/gone"')
    (root / "matrix.toml").write_text(text)
    server.set_branch("up/alpha", "main", "d" * 40)
    code, _out, err, values = watch(root, server, capsys, monkeypatch)
    assert code == 1
    assert "upstream beta: up/beta branch 'release/gone': no such branch" in err
    assert stale_kits(values) == ["alpha-sm86"]


def test_a_private_repository_without_a_token(root: Path, server: GitHubServer,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    server.add_repo("up/alpha", default_branch="main", head=HEAD_A, private=True)
    code, _, err, values = watch(root, server, capsys, monkeypatch, token=None)
    assert code == 1 and values["stale"] == "0"
    assert "upstream alpha: up/alpha branch 'main': repository not found: 404" in err
    assert "set GITHUB_TOKEN or GH_TOKEN" in err
    code, _, err, values = watch(root, server, capsys, monkeypatch)
    assert code == 0, err


def test_rate_limits_are_waited_out_within_the_bound(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    server.faults.too_many_requests(retry_after=1)
    server.faults.secondary_rate_limit(retry_after=1, nth=2)
    code, _, err, _values = watch(root, server, capsys, monkeypatch)
    assert code == 0, err
    assert sorted(s for s in commit_requests(server) if s is not None) == [200, 200, 403, 429]
    server.faults.too_many_requests(retry_after=120)
    code, _, err, _ = watch(root, server, capsys, monkeypatch, "--max-wait", "5")
    assert code == 1
    assert "rate limited (429)" in err and "wait 120 s" in err


class _Moved(http.server.BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:
        self.send_response(301)
        self.send_header("Location", self.target + self.path.replace("/up/old-alpha/",
                                                                     "/up/alpha/"))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_renamed_repository_is_followed_and_reported(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    api_path = server.base_url.split("127.0.0.1:", 1)[1].split("/", 1)[1]
    _Moved.target = server.web_url
    moved = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Moved)
    thread = threading.Thread(target=moved.serve_forever, daemon=True)
    thread.start()
    try:
        text = (root / "matrix.toml").read_text().replace('"up/alpha"', '"up/old-alpha"')
        (root / "matrix.toml").write_text(text)
        port = moved.server_address[1]
        code, _, err, values = watch(root, f"http://127.0.0.1:{port}/{api_path}", capsys,
                                     monkeypatch, "alpha-sm86", token=None)
    finally:
        moved.shutdown()
        moved.server_close()
    assert code == 0, err
    assert "repository up/old-alpha moved to up/alpha (301, followed)" in err
    assert values["stale"] == "0"


def test_a_ledger_file_that_does_not_parse_is_named(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    broken = root / "releases" / "broken.toml"
    broken.write_text("format = 1\ntag = [\n")
    code, _, err, _ = watch(root, server, capsys, monkeypatch)
    assert code == 2
    assert str(broken) in err and "invalid TOML" in err
    assert commit_requests(server) == []


def test_a_broken_state_file_is_named(root: Path, server: GitHubServer,
                                      capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "state.json").write_text("{not json")
    code, _, err, _ = watch(root, server, capsys, monkeypatch)
    assert code == 2 and "state.json" in err and "delete it" in err


def test_a_runner_in_matrix_toml_is_refused_naming_the_variable(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    base = (root / "matrix.toml").read_text()
    (root / "matrix.toml").write_text(base + '\n[publish]\nrunner = ["self-hosted", "gpu"]\n')
    code, _, err, _ = watch(root, server, capsys, monkeypatch)
    assert code == 2 and "key 'runner'" in err and "NINFER_KITS_BUILD_RUNNER" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def _unused_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_a_network_or_service_failure_exits_3_as_readmes_table_says(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens: no upstream can be read, and that is the network's doing (3), not a
    # deleted branch (1). The run still writes the matrix of what it could compare.
    code, out, err, values = watch(root, f"http://127.0.0.1:{_unused_port()}", capsys,
                                   monkeypatch)
    assert code == 3, err
    assert "upstream alpha: up/alpha branch 'main': http://127.0.0.1:" in err
    assert "did not answer after 4 tries: ConnectionError" in err and "Traceback" not in err
    assert values["stale"] == "0" and "2 upstreams could not be read" in out
    # GitHub failing (a 502 that does not pass) is the service's: 3 as well.
    server.faults.status(502, method="GET", path="/commits/", times=100)
    code, _, err, _ = watch(root, server, capsys, monkeypatch)
    assert code == 3 and "the API answered 502" in err, err


class _Echo(http.server.BaseHTTPRequestHandler):
    """A hostile API: its error message quotes the request's Authorization header and a URL
    with credentials."""

    def do_GET(self) -> None:
        body = json.dumps({"message": f"Bad credentials: {self.headers.get('Authorization')} "
                                      f"(see https://robot:hunter2secret@mirror.example/x)"})
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_what_the_server_says_back_is_redacted(root: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    echo = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=echo.serve_forever, daemon=True)
    thread.start()
    try:
        code, out, err, _ = watch(root, f"http://127.0.0.1:{echo.server_address[1]}", capsys,
                                  monkeypatch, "alpha-sm86")  # asserts TOKEN is not shown
    finally:
        echo.shutdown()
        echo.server_close()
    assert code == 1
    assert "refused: 403 Bad credentials: Bearer ***" in err
    assert "hunter2secret" not in out + err and "https://***@mirror.example/x" in err


@pytest.mark.parametrize("how", ["--api", "env"])
def test_no_token_over_plain_http_to_another_host(root: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  how: str) -> None:
    api = "http://192.0.2.1:9/api/v3"
    if how == "env":
        monkeypatch.setenv("NINFER_KITS_GITHUB_API", api)
        monkeypatch.setenv("GH_TOKEN", TOKEN)
        code = cli.main(["watch", "--matrix", str(root / "matrix.toml")])
        out, err = capsys.readouterr()
        assert "($NINFER_KITS_GITHUB_API)" in err
    else:
        code, out, err, _ = watch(root, api, capsys, monkeypatch)
        assert "(--api)" in err
    assert code == 2
    assert "plain http would send the token in clear" in err
    assert TOKEN not in out + err


class _LimitedOnce(http.server.BaseHTTPRequestHandler):
    """429 with Retry-After as an HTTP date (`retry_after` s ahead) once, then the head."""

    retry_after = 2.0
    answered: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        if not self.answered:
            self.answered.append(429)
            when = email.utils.formatdate(time.time() + self.retry_after, usegmt=True)
            self.send_response(429)
            self.send_header("Retry-After", when)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.answered.append(200)
        self.send_response(200)
        self.send_header("Content-Length", "40")
        self.end_headers()
        self.wfile.write(HEAD_A.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_a_retry_after_date_is_waited_until(root: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    limited = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LimitedOnce)
    thread = threading.Thread(target=limited.serve_forever, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        code, _, err, values = watch(root, f"http://127.0.0.1:{limited.server_address[1]}",
                                     capsys, monkeypatch, "alpha-sm86", "--max-wait", "10")
    finally:
        limited.shutdown()
        limited.server_close()
    assert code == 0, err
    assert _LimitedOnce.answered == [429, 200] and values["stale"] == "0"
    assert 0.5 < time.monotonic() - started < 9


# --------------------------------------------------------------------------- inputs (issue 20)

TC2 = """
[toolchains.tc2]
dockerfile = "docker/tc2.Dockerfile"
base_image = "debian:trixie"
cuda = "13.0.88"
build_args = { CUDA_WHEELS = "13.0" }
runtime_dockerfile = "docker/tc2.Dockerfile"
runtime_base_image = "debian:trixie-slim"
runtime_packages = ["libavformat61"]
"""


def _edit(root: Path, old: str, new: str) -> None:
    path = root / "matrix.toml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.fixture
def built(root: Path) -> Path:
    """Every kit released from the matrix as it is, inputs recorded; gamma on its own
    toolchain, whose Dockerfile COPYs a file from beside it."""
    (root / "docker").mkdir()
    (root / "docker" / "tc2.Dockerfile").write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY host-ca.crt setup.sh /tmp/\n")
    (root / "docker" / "setup.sh").write_text("echo one\n")
    text = (root / "matrix.toml").read_text() + TC2
    text = text.replace('gamma-{arch_id}-{rev8}"', 'gamma-{arch_id}-{rev8}"', 1)
    head, _, kit = text.rpartition("[kits.gamma-sm86]")
    (root / "matrix.toml").write_text(
        head + "[kits.gamma-sm86]" + kit.replace('toolchain = "tc"', 'toolchain = "tc2"'))
    for kit_id, head_sha in (("alpha-sm86", HEAD_A), ("beta-sm86", HEAD_B),
                             ("beta-sm89", HEAD_B), ("gamma-sm86", PIN_C)):
        publish(root, kit_id, head_sha, day=2, toolchain="tc2" if kit_id == "gamma-sm86"
                else "tc", inputs=True)
    return root


def _reasons(values: dict[str, str]) -> dict[str, str]:
    return {e["kit"]: e["reason"] for e in json.loads(values["matrix"])["include"]}


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda r: _edit(r, 'cuda = "13.0.88"', 'cuda = "13.0.99"'),
     {"gamma-sm86": "inputs changed: toolchain tc2"}),
    (lambda r: _edit(r, 'base_image = "nvidia/cuda:13.1.2-devel-ubuntu24.04"',
                     'base_image = "nvidia/cuda:13.1.3-devel-ubuntu24.04"'),
     {kit: "inputs changed: toolchain tc" for kit in ("alpha-sm86", "beta-sm86", "beta-sm89")}),
    (lambda r: (r / "docker" / "tc2.Dockerfile").write_text("FROM debian\n"),
     {"gamma-sm86": "inputs changed: toolchain tc2, runtime tc2"}),
    (lambda r: (r / "docker" / "setup.sh").write_text("echo two\n"),
     {"gamma-sm86": "inputs changed: toolchain tc2, runtime tc2"}),
    (lambda r: _edit(r, 'runtime_packages = ["libavformat61"]',
                     'runtime_packages = ["libavformat62"]'),
     {"gamma-sm86": "inputs changed: runtime tc2"}),
    (lambda r: _edit(r, 'targets = { "ninfer" = "apps/ninfer" }\n\n[upstreams.beta]',
                     'targets = { "ninfer" = "apps/ninfer" }\ncmake_options = { X = "1" }\n\n'
                     '[upstreams.beta]'),
     {"alpha-sm86": "inputs changed: cmake_options"}),
    (lambda r: _edit(r, 'card = "RTX 4090"\ntag = "beta-{arch_id}-{rev8}"',
                     'card = "RTX 4090"\ncmake_options = { Y = "2" }\n'
                     'tag = "beta-{arch_id}-{rev8}"'),
     {"beta-sm89": "inputs changed: cmake_options"}),
    (lambda r: _edit(r, 'branch = "release/v1"\narchs = ["sm_86", "sm_89"]\nmin_cuda = "13.0"\n'
                     'licenses = ["LICENSE"]', 'branch = "release/v1"\narchs = ["sm_86", "sm_89"]'
                     '\nmin_cuda = "13.0"\nlicenses = ["LICENSE", "NOTICE"]'),
     {kit: "inputs changed: licenses" for kit in ("beta-sm86", "beta-sm89")}),
    (lambda r: (r / "docker" / "host-ca.crt").write_text("this machine's CAs"), {}),
    (lambda r: None, {}),
])
def test_an_edit_in_place_makes_exactly_the_affected_kits_stale(
        built: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, edit: object, expected: dict[str, str]) -> None:
    """The heads and pins do not move: only what makes a kit changed, in matrix.toml or in
    a file its toolchain's Dockerfile COPYs; the reason names the parts."""
    edit(built)  # type: ignore[operator]
    code, _out, err, values = watch(built, server, capsys, monkeypatch)
    assert code == 0, err
    reasons = _reasons(values)
    assert set(reasons) == set(expected), reasons
    for kit, why in expected.items():
        assert reasons[kit] == f"{why} ({kit}-{dict(KITS_HEADS)[kit][:8]})"
    assert values["stale"] == str(len(expected))


KITS_HEADS = (("alpha-sm86", HEAD_A), ("beta-sm86", HEAD_B), ("beta-sm89", HEAD_B),
              ("gamma-sm86", PIN_C))


def test_releases_without_inputs_are_not_rebuilt_for_them(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger written before inputs were recorded: upgrading rebuilds nothing, whatever
    the matrix says now; a host build is not judged on the toolchain's images, only on the
    rest."""
    _edit(root, 'cuda = "13.1.2"', 'cuda = "13.1.3"')
    _edit(root, 'licenses = ["LICENSE"]', 'licenses = ["COPYING"]')
    code, _, err, values = watch(root, server, capsys, monkeypatch)
    assert code == 0 and values["stale"] == "0", err
    publish(root, "alpha-sm86", HEAD_A, day=3, toolchain="host", inputs=True)
    _edit(root, 'cuda = "13.1.3"', 'cuda = "13.1.4"')
    code, _, err, values = watch(root, server, capsys, monkeypatch)
    assert code == 0 and values["stale"] == "0", err
    _edit(root, 'licenses = ["COPYING"]', 'licenses = ["COPYING", "NOTICE"]')
    code, _, err, values = watch(root, server, capsys, monkeypatch)
    assert _reasons(values) == {"alpha-sm86": f"inputs changed: licenses (alpha-sm86-"
                                              f"{HEAD_A[:8]})"}


def test_dispatch_all_force_and_a_revision_for_one_kit_only(
        built: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err, values = watch(built, server, capsys, monkeypatch, "all")
    assert code == 0 and values["stale"] == "0", err
    code, _, err, values = watch(built, server, capsys, monkeypatch, "all", "--force")
    assert code == 0, err
    include = json.loads(values["matrix"])["include"]
    assert [e["kit"] for e in include] == [kit for kit, _ in KITS_HEADS]
    assert {e["reason"] for e in include} == {"forced by dispatch"}
    gamma = include[-1]
    assert (gamma["toolchain"], gamma["revision"]) == ("tc2", PIN_C)
    inputs = kit_inputs(load_matrix(built / "matrix.toml").kit("gamma-sm86"), PIN_C)
    assert gamma["cache_key"] == f"ccache-gamma-sm86-tc2-{inputs.parts['toolchain'][:16]}"
    keys = {e["cache_key"] for e in include}
    assert len(keys) == 4  # per kit AND toolchain: two kits of one toolchain share none
    code, _, err, values = watch(built, server, capsys, monkeypatch, "beta-sm89", "--force",
                                 "--revision", "f" * 12)
    assert code == 0 and _reasons(values) == {"beta-sm89": "forced by dispatch"}, err
    assert json.loads(values["matrix"])["include"][0]["revision"] == "f" * 12
    for kits in ((), ("all",), ("beta-sm86", "beta-sm89")):
        code, _out, err, _ = watch(built, server, capsys, monkeypatch, *kits,
                                  "--revision", "f" * 40)
        assert code == 2 and "--revision" in err and "exactly one KIT" in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_one_transient_failure_is_retried_a_lasting_one_exits_3(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    server.faults.status(502, method="GET", path="/commits/")
    server.faults.drop(method="GET", path="/commits/", nth=2)
    server.faults.status(503, method="GET", path="/commits/", nth=3)
    code, _, err, values = watch(root, server, capsys, monkeypatch)
    assert code == 0 and values["stale"] == "0", err
    assert commit_requests(server)[-2:] == [200, 200]
    server.set_branch("up/alpha", "main", "d" * 40)
    server.faults.status(502, method="GET", path="up/alpha/commits/", times=100)
    code, out, err, values = watch(root, server, capsys, monkeypatch)
    assert code == 3
    assert "upstream alpha: up/alpha branch 'main': the API answered 502" in err
    assert stale_kits(values) == [] and "1 upstreams could not be read" in out
    assert len(server.requests("GET", r"up/alpha/commits/")) >= 4


@pytest.mark.parametrize("text", ["[]", "3", '"x"', "null"])
def test_a_state_file_of_the_wrong_shape_is_named(
        root: Path, server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    (root / "state.json").write_text(text)
    code, _, err, _ = watch(root, server, capsys, monkeypatch)
    assert code == 2 and "state.json" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
