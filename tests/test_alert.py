"""`ninfer-kits alert` against the local GitHub server's issues API: a failing kit opens one
issue (label, marker, step, log), the same failure again writes nothing, a changed failure one
comment, `--fixed` closes it with a comment naming the run; found by label and marker, not by
title (a maintainer may retitle it), past the first page; transient 5xx and dropped
connections retried without a second issue or comment; a token that cannot write issues, or
none, or no repository, one line and exit 2, the token never shown. Every issue, comment and
label the server answers is validated against GitHub's OpenAPI schemas (@octokit/openapi)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("github")
jsonschema = pytest.importorskip("jsonschema")

from github_server import GitHubServer  # noqa: E402
from ninfer_kits import cli  # noqa: E402
from ninfer_kits.alert.issues import LABEL, last_state, marker, with_state  # noqa: E402
from test_github_server import FORMATS, _json_schema  # noqa: E402

REPO = "ninfer/kits"
TOKEN = "ghp_alertcanary0123456789abcdefghijklmn"
KIT = "example-sm86"
RUN = "https://github.example/ninfer/kits/actions/runs/4242"
OPENAPI = Path(__file__).parent / "data" / "openapi" / "github-issues.json"
SCHEMAS = _json_schema(json.loads(OPENAPI.read_text())["components"]["schemas"])


def schema_errors(name: str, instance: Any) -> list[str]:
    schema = {"$ref": f"#/components/schemas/{name}", "components": {"schemas": SCHEMAS}}
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMATS)
    return [f"{name} at {list(e.absolute_path)}: {e.message}"
            for e in validator.iter_errors(instance)]


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    with GitHubServer() as github:
        github.add_repo(REPO)
        github.add_token(TOKEN, scopes=("repo",))
        yield github
        problems = []
        for event in github.events:
            if event.kind != "request" or event.schema is None:
                continue
            name = event.schema.removesuffix("[]")
            items = event.body if event.schema.endswith("[]") else [event.body]
            for item in items:
                problems += [f"{event.name}: {p}" for p in schema_errors(name, item)]
        assert not problems, "\n".join(problems[:10])


def alert(server: GitHubServer, capsys: pytest.CaptureFixture[str],
          monkeypatch: pytest.MonkeyPatch, *args: str, token: str | None = TOKEN,
          repository: str | None = REPO, actions: bool = False) -> tuple[int, str, str]:
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_ACTIONS", "GITHUB_REPOSITORY",
                 "GITHUB_API_URL", "GITHUB_SERVER_URL", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT",
                 "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    if token is not None:
        monkeypatch.setenv("GITHUB_TOKEN", token)
    if repository is not None:
        monkeypatch.setenv("GITHUB_REPOSITORY", repository)
    if actions:
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("NINFER_KITS_GITHUB_API", server.base_url)
    monkeypatch.setenv("NINFER_KITS_RETRY_SCALE", "0.001")
    code = cli.main(["alert", *args])
    out, err = capsys.readouterr()
    if token:
        assert token not in out + err
    return code, out, err


def writes(server: GitHubServer) -> list[str]:
    return [e.name for e in server.requests() if e.method in ("POST", "PATCH", "DELETE")]


def test_a_failing_kit_opens_one_issue_and_the_same_failure_again_writes_nothing(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = alert(server, capsys, monkeypatch, KIT, "--failed", "build",
                           "--detail", "ninja: build stopped: subcommand failed.", "--log", RUN)
    assert code == 0, err
    [issue] = server.issue_views(REPO)
    assert out == f"kit {KIT}: opened issue #1 ({server.web_url}/{REPO}/issues/1)\n"
    assert (issue.title, issue.state, issue.labels, issue.comments) == (
        f"rebuild failing: {KIT}", "open", (LABEL,), ())
    assert issue.body is not None
    assert marker(KIT) in issue.body.splitlines()
    assert "- step: `build`" in issue.body and f"- log: {RUN}" in issue.body
    assert "ninja: build stopped: subcommand failed." in issue.body
    before = len(writes(server))

    for run in range(2):  # every 6 hours, the same failure (another run's log): no writes
        code, out, _ = alert(server, capsys, monkeypatch, KIT, "--failed", "build", "--detail",
                             "ninja: build stopped: subcommand failed.", "--log", f"{RUN}{run}")
        assert code == 0
        assert out.startswith(f"kit {KIT}: issue #1 already says so; nothing written")
    assert len(writes(server)) == before
    assert len(server.issue_views(REPO)) == 1


def test_a_changed_failure_comments_once_and_keeps_what_a_maintainer_wrote(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    alert(server, capsys, monkeypatch, KIT, "--failed", "build", "--log", RUN)
    # A maintainer retitles it and adds a note: it is still the kit's issue.
    gh = server.client(TOKEN)
    issue = gh.get_repo(REPO).get_issue(1)
    issue.edit(title="CUDA 13.1 broke the example", body=f"{issue.body}\nLooking at it. -- m\n")

    detail = "tag example-sm86-abc: the release holds other bytes (sha256 1111 != 2222)"
    for _ in range(3):
        code, _, err = alert(server, capsys, monkeypatch, KIT, "--failed", "publish",
                             "--detail", detail, "--log", RUN)
        assert code == 0, err
    [view] = server.issue_views(REPO)
    assert view.title == "CUDA 13.1 broke the example"
    assert len(view.comments) == 1  # three alerts, one change
    assert "- step: `publish`" in view.comments[0] and detail in view.comments[0]
    assert view.body is not None and "Looking at it. -- m" in view.body
    assert last_state(view.body) is not None
    # back to the build failing: a change again
    alert(server, capsys, monkeypatch, KIT, "--failed", "build", "--log", RUN)
    assert len(server.issue_views(REPO)[0].comments) == 2


def test_fixed_closes_the_issue_with_a_comment_naming_the_run(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    alert(server, capsys, monkeypatch, KIT, "--failed", "build")
    code, out, err = _fixed_in_run(server, capsys, monkeypatch)
    assert code == 0, err
    [view] = server.issue_views(REPO)
    assert (view.state, view.state_reason) == ("closed", "completed")
    assert view.comments[-1].startswith(
        f"Fixed: kit `{KIT}` rebuilt in https://github.example/{REPO}/actions/runs/777")
    assert out == f"kit {KIT}: closed issue #1 ({server.web_url}/{REPO}/issues/1)\n"

    before = len(writes(server))
    code, out, _ = alert(server, capsys, monkeypatch, KIT, "--fixed")
    assert (code, out) == (0, f"kit {KIT}: no open issue; nothing to close\n")
    assert len(writes(server)) == before

    alert(server, capsys, monkeypatch, KIT, "--failed", "build")  # failing again: a new issue
    assert [(v.number, v.state) for v in server.issue_views(REPO)] == [(1, "closed"),
                                                                       (2, "open")]


def _fixed_in_run(server: GitHubServer, capsys: pytest.CaptureFixture[str],
                  monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """`alert KIT --fixed` as a step of Actions run 777 sees it (the run from the env)."""
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_ACTIONS", "GITHUB_API_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_RUN_ID", "777")
    monkeypatch.setenv("NINFER_KITS_GITHUB_API", server.base_url)
    code = cli.main(["alert", KIT, "--fixed"])
    out, err = capsys.readouterr()
    return code, out, err


def test_only_the_kits_labelled_issue_with_its_marker_is_taken_past_the_first_page(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the kit's own issue, then 120 newer labelled issues of other kits (the list is newest
    # first, 100 a page: the kit's is on page 2), an unlabelled issue with its title and
    # marker, and a labelled one whose marker names a kit whose name starts like it
    own = server.add_issue(REPO, "renamed by a maintainer",
                           f"old text\n{marker(KIT)}\n{with_state('', '0' * 16)}",
                           labels=(LABEL,))
    for n in range(120):
        server.add_issue(REPO, f"rebuild failing: other{n}", marker(f"other{n}"),
                         labels=(LABEL,))
    server.add_issue(REPO, f"rebuild failing: {KIT}", marker(KIT))
    server.add_issue(REPO, f"rebuild failing: {KIT}x", marker(f"{KIT}x"), labels=(LABEL,))

    code, out, err = alert(server, capsys, monkeypatch, KIT, "--failed", "build")
    assert code == 0, err
    assert out.startswith(f"kit {KIT}: the failure changed; commented on issue #{own} ")
    assert len(server.issue_views(REPO)) == 123  # none opened
    assert len(server.requests("GET", r"/issues$")) == 2  # it followed Link to page 2


def test_transient_failures_are_retried_and_never_make_a_second_issue_or_comment(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    server.faults.status(502, method="GET", path=r"/issues$")
    server.faults.apply_then_drop(method="POST", path=r"/issues$")  # made, but no answer
    code, _, err = alert(server, capsys, monkeypatch, KIT, "--failed", "build")
    assert code == 0, err
    assert len(server.issue_views(REPO)) == 1
    assert len(server.requests("POST", r"/issues$")) == 1  # the retry found it instead

    server.faults.apply_then_drop(method="POST", path=r"/issues/1/comments$")
    server.faults.status(503, method="PATCH", path=r"/issues/1$")
    code, out, err = alert(server, capsys, monkeypatch, KIT, "--failed", "smoke",
                           "--detail", "exit 139")
    assert code == 0, err
    [view] = server.issue_views(REPO)
    assert len(view.comments) == 1
    assert all(f.done for f in server.faults)
    code, out, _ = alert(server, capsys, monkeypatch, KIT, "--failed", "smoke",
                         "--detail", "exit 139")
    assert "nothing written" in out  # the body's state was written after the 503


def test_github_failing_for_good_is_exit_3(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    server.faults.status(502, method="GET", path=r"/issues$", times=100)
    code, _, err = alert(server, capsys, monkeypatch, KIT, "--failed", "build")
    assert code == 3
    assert err.splitlines()[-1].startswith("ninfer-kits: error: GitHub: listing the open issues")
    assert "Traceback" not in err


def test_a_token_that_cannot_write_issues_is_named_exit_2_and_annotated(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    contents_only = "github_pat_contentsonly0123456789abcdef"
    server.add_token(contents_only, permissions={"contents": "write", "metadata": "read"})
    code, out, err = alert(server, capsys, monkeypatch, KIT, "--failed", "build",
                           token=contents_only, actions=True)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert lines[0].startswith(f"::error title=ninfer-kits alert {KIT}::GitHub: opening an "
                               f"issue for kit {KIT} on {REPO}: the token from GITHUB_TOKEN "
                               f"cannot write its issues (HTTP 403")
    assert "permissions: issues: write" in lines[-1]
    assert len(lines) == 2 and lines[-1].startswith("ninfer-kits: error: ")
    assert server.issue_views(REPO) == []


@pytest.mark.parametrize(("token", "repository", "args", "says"), [
    (None, REPO, ("--failed", "build"), "alert: no GitHub token: set GITHUB_TOKEN"),
    (TOKEN, None, ("--failed", "build"), "alert: no repository: set GITHUB_REPOSITORY"),
    (TOKEN, "not-a-repo", ("--failed", "build"), "alert: repository 'not-a-repo' is not"),
    (TOKEN, REPO, ("--fixed", "--detail", "x"), "alert: --detail goes with --failed"),
    (TOKEN, REPO, ("--failed", " "), "alert: --failed STEP: the step is empty"),
])
def test_bad_input_is_one_line_and_exit_2(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, token: str | None, repository: str | None,
        args: tuple[str, ...], says: str) -> None:
    code, out, err = alert(server, capsys, monkeypatch, KIT, *args, token=token,
                           repository=repository)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"ninfer-kits: error: {err.splitlines()[0][20:]}"]
    assert err.startswith(f"ninfer-kits: error: {says}")
    assert server.requests() == []


def test_a_refused_token_is_exit_2_and_never_shown(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = "ghp_notknown0123456789abcdefghijklmnop"
    code, out, err = alert(server, capsys, monkeypatch, KIT, "--failed", "build", token=unknown)
    assert (code, out) == (2, "")
    assert "was refused" in err and unknown not in err


def test_a_secret_in_the_detail_never_reaches_the_issue(
        server: GitHubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = alert(server, capsys, monkeypatch, KIT, "--failed", "publish", "--detail",
                         f"curl -H 'Authorization: token {TOKEN}' failed\n<!-- x --> ```",
                         "--log", f"https://user:{TOKEN}@ci.example/run")
    assert code == 0, err
    body = server.issue_views(REPO)[0].body or ""
    assert TOKEN not in body and "***" in body
    assert "<!-- x" not in body  # no HTML comment opens inside the detail


# ---------------------------------------------------------------------------------------------
# The server's issues API itself, as GitHub answers


def test_the_issues_schemas_are_what_extract_made() -> None:
    spec = json.loads(OPENAPI.read_text())
    origin = spec["x-extracted-from"]
    assert origin["package"].startswith("@octokit/openapi@")
    assert origin["roots"] == ["issue", "issue-comment", "label", "basic-error",
                               "validation-error"]
    assert {"issue", "issue-comment", "label"} <= set(spec["components"]["schemas"])


def test_the_server_filters_pages_and_refuses_as_github_does(server: GitHubServer) -> None:
    import requests

    api = f"{server.base_url}/repos/{REPO}"
    auth = {"Authorization": f"token {TOKEN}"}
    for n in range(5):
        server.add_issue(REPO, f"i{n}", labels=("a",) if n % 2 else ("a", "b"),
                         state="closed" if n == 4 else "open")
    got = requests.get(f"{api}/issues", params={"labels": "a,b", "per_page": "1"},
                       headers=auth, timeout=10)
    assert [i["title"] for i in got.json()] == ["i2"]  # open, both labels, newest first
    assert 'rel="next"' in got.headers["Link"]
    nxt = requests.get(got.links["next"]["url"], headers=auth, timeout=10)
    assert [i["title"] for i in nxt.json()] == ["i0"]
    closed = requests.get(f"{api}/issues", params={"state": "closed"}, headers=auth, timeout=10)
    assert [(i["title"], i["state_reason"]) for i in closed.json()] == [("i4", "completed")]
    assert len(requests.get(f"{api}/issues", params={"state": "all"}, headers=auth,
                            timeout=10).json()) == 5

    refused = [requests.patch(f"{api}/issues/1", json={"state_reason": "done"}, headers=auth,
                              timeout=10),
               requests.post(f"{api}/issues/1/comments", json={"body": ""}, headers=auth,
                             timeout=10),
               requests.post(f"{api}/labels", json={"name": "a"}, headers=auth, timeout=10),
               requests.post(f"{api}/issues", json={"body": "no title"}, headers=auth,
                             timeout=10)]
    assert [(r.status_code, r.json()["errors"][0]["code"]) for r in refused] == [
        (422, "invalid"), (422, "missing_field"), (422, "already_exists"),
        (422, "missing_field")]
    anonymous = requests.post(f"{api}/issues", json={"title": "x"}, timeout=10)
    assert anonymous.status_code == 401
    reopened = requests.patch(f"{api}/issues/5", json={"state": "open"}, headers=auth,
                              timeout=10).json()
    assert (reopened["state"], reopened["state_reason"], reopened["closed_at"]) == (
        "open", "reopened", None)
    assert requests.get(f"{api}/issues/99", headers=auth, timeout=10).status_code == 404
