"""The local GitHub server (tests/github_server.py), driven by PyGithub unmodified and by plain
HTTP: what the publish tests rely on. Every release and release-asset JSON the server answers
in these tests is validated against GitHub's OpenAPI description (tests/data/openapi)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

github = pytest.importorskip("github")
requests = pytest.importorskip("requests")
jsonschema = pytest.importorskip("jsonschema")

from github import GithubException  # noqa: E402

from github_server import Event, GitHubServer, Snapshot  # noqa: E402

OPENAPI = Path(__file__).parent / "data" / "openapi" / "github-releases.json"
REPO = "ninfer/kits"
TOKEN = "ghp_canary0123456789abcdefghijklmnopqrstu"  # must never appear in anything the server logs
VALIDATED: Counter[str] = Counter()


# ---------------------------------------------------------------------------------------------
# GitHub's schemas, OpenAPI 3.0 → JSON Schema


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 `nullable: true` → a JSON Schema type union (and `null` in an enum)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable"):
        if "$ref" in out:
            return {"anyOf": [out, {"type": "null"}]}
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def _formats() -> Any:
    checker = jsonschema.FormatChecker()

    @checker.checks("uri")
    def uri(value: object) -> bool:
        if not isinstance(value, str):  # a format constrains strings only
            return True
        parts = urllib.parse.urlsplit(value)
        return bool(parts.scheme and parts.netloc)

    @checker.checks("date-time")
    def date_time(value: object) -> bool:
        if not isinstance(value, str):
            return True
        text = value
        pattern = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"
        return bool(re.fullmatch(pattern, text)) and bool(datetime.fromisoformat(text))

    return checker


SPEC = json.loads(OPENAPI.read_text())
SCHEMAS = _json_schema(SPEC["components"]["schemas"])
FORMATS = _formats()


def validator(name: str) -> Any:
    schema = {"$ref": f"#/components/schemas/{name}", "components": {"schemas": SCHEMAS}}
    return jsonschema.Draft202012Validator(schema, format_checker=FORMATS)


def schema_errors(name: str, instance: Any) -> list[str]:
    """What does not validate, except the asset state `starter` (GitHub answers it for an
    upload that failed; the published enum has only `uploaded` and `open`)."""
    errors = []
    for error in validator(name).iter_errors(instance):
        path = list(error.absolute_path)
        if error.validator == "enum" and path[-1:] == ["state"] and error.instance == "starter":
            continue
        errors.append(f"{name} at {path}: {error.message}")
    return errors


def validate_events(events: list[Event]) -> None:
    problems = []
    for event in events:
        if event.kind != "request" or event.schema is None:
            continue
        name = event.schema.removesuffix("[]")
        items = event.body if event.schema.endswith("[]") else [event.body]
        for item in items:
            problems += [f"{event.name} ({event.status}): {e}" for e in schema_errors(name, item)]
            VALIDATED[name] += 1
    assert not problems, "\n".join(problems[:20])


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    """A server with REPO and a token that can write it; on the way out, every release, asset
    and error JSON it answered is validated, and the token must appear in none of its events."""
    with GitHubServer() as srv:
        srv.add_repo(REPO)
        srv.add_token(TOKEN, scopes=("repo", "workflow"))
        yield srv
        validate_events(srv.events)
        assert TOKEN not in repr(srv.events)


@pytest.fixture
def gh(server: GitHubServer) -> Any:
    return server.client(TOKEN)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, size in (("kit.tar.gz", 300_000), ("BUILDINFO.txt", 700), ("SHA256SUMS", 120)):
        path = tmp_path / name
        path.write_bytes(bytes((i * 7 + len(name)) % 251 for i in range(size)))
        out[name] = path
    return out


def draft(gh: Any, tag: str = "v1.0-kit") -> Any:
    return gh.get_repo(REPO).create_git_release(tag, tag, "notes", draft=True)


def statuses(server: GitHubServer, method: str, path: str) -> list[int | None]:
    return [e.status for e in server.requests(method, path)]


def api(server: GitHubServer, method: str, path: str, token: str | None = TOKEN,
        **kwargs: Any) -> Any:
    headers = kwargs.pop("headers", {})
    if token is not None:
        headers["Authorization"] = f"token {token}"
    return requests.request(method, f"{server.base_url}{path}", headers=headers,
                            allow_redirects=False, timeout=10, **kwargs)


# ---------------------------------------------------------------------------------------------
# Releases and assets through PyGithub


def test_draft_upload_publish_and_read_back(server: GitHubServer, gh: Any,
                                            files: dict[str, Path]) -> None:
    repo = gh.get_repo(REPO)
    rel = draft(gh)
    assert rel.draft and rel.published_at is None and rel.tarball_url is None
    assert re.search(r"/releases/tag/untagged-[0-9a-f]{20}$", rel.html_url)
    assert rel.upload_url.startswith(f"{server.base_url.removesuffix('/api/v3')}/api/uploads/")

    for path in files.values():
        asset = rel.upload_asset(str(path), label=f"the {path.name}")
        assert asset.state == "uploaded" and asset.size == path.stat().st_size
        assert asset.digest == f"sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"
        assert "/releases/download/untagged-" in asset.browser_download_url
    assert asset.label == "the SHA256SUMS"
    assert rel.get_assets().totalCount == 3
    assert {a.name: a.content_type for a in rel.get_assets()} == {
        "kit.tar.gz": "application/x-tar", "BUILDINFO.txt": "text/plain",
        "SHA256SUMS": "application/octet-stream"}

    # a draft: listed (its author can push), not found by tag
    assert [r.id for r in repo.get_releases()] == [rel.id]
    with pytest.raises(github.UnknownObjectException):
        repo.get_release("v1.0-kit")
    with pytest.raises(github.UnknownObjectException):
        repo.get_latest_release()

    published = rel.update_release("v1.0-kit", "final notes")  # draft=False is always sent
    assert not published.draft and published.published_at is not None
    assert published.html_url.endswith("/releases/tag/v1.0-kit")
    by_tag = repo.get_release("v1.0-kit")
    assert by_tag.id == rel.id and by_tag.body == "final notes"
    assert repo.get_latest_release().id == rel.id
    assert all("/releases/download/v1.0-kit/" in a.browser_download_url
               for a in by_tag.assets)
    # publishing made the tag, at the head of the target branch
    head = api(server, "GET", f"/repos/{REPO}/commits/main",
               headers={"Accept": "application/vnd.github.sha"}).text
    assert api(server, "GET", f"/repos/{REPO}/commits/v1.0-kit",
               headers={"Accept": "application/vnd.github.sha"}).text == head

    kit = next(a for a in by_tag.assets if a.name == "kit.tar.gz")
    kit.download_asset(str(files["kit.tar.gz"].parent / "back"))
    assert (files["kit.tar.gz"].parent / "back").read_bytes() == files["kit.tar.gz"].read_bytes()
    assert repo.get_release(rel.id).assets[0].download_count == 1

    assert kit.delete_asset()
    assert sorted(a.name for a in repo.get_release(rel.id).get_assets()) == [
        "BUILDINFO.txt", "SHA256SUMS"]
    by_tag.delete_release()
    assert repo.get_releases().totalCount == 0
    changes = [e.name for e in server.events if e.kind == "change"]
    assert changes == ["release.created"] + ["asset.started", "asset.uploaded"] * 3 + [
        "release.updated", "release.published", "asset.deleted", "release.deleted"]


def test_duplicate_tag_and_asset_name_are_422_already_exists(server: GitHubServer, gh: Any,
                                                             tmp_path: Path) -> None:
    repo = gh.get_repo(REPO)
    first = repo.create_git_release("v2", "v2", "", draft=False)
    with pytest.raises(GithubException) as caught:
        repo.create_git_release("v2", "again", "", draft=False)
    assert caught.value.status == 422
    assert caught.value.data["errors"] == [
        {"resource": "Release", "code": "already_exists", "field": "tag_name"}]

    # drafts do not conflict (GitHub allows several drafts of one tag) until one is published
    one, two = draft(gh, "v3"), draft(gh, "v3")
    assert one.id != two.id
    one.update_release("v3", "")
    with pytest.raises(GithubException) as caught:
        two.update_release("v3", "")
    assert caught.value.status == 422 and caught.value.data["errors"][0]["field"] == "tag_name"

    path = tmp_path / "kit.tar.gz"
    path.write_bytes(b"kit")
    first.upload_asset(str(path))
    with pytest.raises(GithubException) as caught:
        first.upload_asset(str(path))
    assert caught.value.status == 422
    assert caught.value.data["errors"] == [
        {"resource": "ReleaseAsset", "code": "already_exists", "field": "name"}]
    # GitHub renames special characters
    assert first.upload_asset(str(path), name="a kit (1).tar.gz").name == "a.kit..1..tar.gz"


def test_duplicate_drafts_can_be_refused() -> None:
    with GitHubServer(duplicate_drafts=False) as server:
        server.add_repo(REPO)
        server.add_token(TOKEN)
        gh = server.client(TOKEN)
        draft(gh, "v1")
        with pytest.raises(GithubException) as caught:
            draft(gh, "v1")
        assert caught.value.status == 422
        validate_events(server.events)


def test_pagination_over_more_than_100_assets(server: GitHubServer, gh: Any) -> None:
    rel = draft(gh)
    names = [f"part-{i:03d}.bin" for i in range(205)]
    for name in names:
        server.add_asset(REPO, rel.id, name, name.encode())
    assert [a.name for a in rel.get_assets()] == names  # 30 a page: 7 pages
    assert len(server.requests("GET", r"/releases/\d+/assets$")) == 7

    wide = server.client(TOKEN, per_page=100)
    assert [a.name for a in wide.get_repo(REPO).get_release(rel.id).get_assets()] == names
    assert len(server.requests("GET", r"/releases/\d+/assets$")) == 7 + 3

    answer = api(server, "GET", f"/repos/{REPO}/releases/{rel.id}/assets",
                 params={"per_page": 500, "page": 2})
    assert len(answer.json()) == 100  # per_page is at most 100
    links = {rel_: url for url, rel_ in re.findall(r'<([^>]+)>; rel="(\w+)"',
                                                   answer.headers["Link"])}
    assert set(links) == {"next", "last", "prev", "first"}
    assert links["next"].startswith(server.base_url) and "page=3" in links["next"]
    assert "page=3" in links["last"] and "page=1" in links["first"]
    assert len(requests.get(links["last"], headers={"Authorization": f"token {TOKEN}"},
                            timeout=10).json()) == 5


def test_pagination_of_releases_newest_first(server: GitHubServer, gh: Any) -> None:
    ids = [server.add_release(REPO, f"v0.{i}") for i in range(35)]
    listed = [r.id for r in gh.get_repo(REPO).get_releases()]
    assert listed == ids[::-1]


# ---------------------------------------------------------------------------------------------
# Conditional requests, rate limits, authentication


def test_if_none_match_answers_304_and_is_not_counted(server: GitHubServer, gh: Any) -> None:
    rel = draft(gh)
    assert rel.update() is False  # PyGithub's conditional GET: 304
    assert statuses(server, "GET", rf"/releases/{rel.id}$") == [304]

    first = api(server, "GET", f"/repos/{REPO}/releases/{rel.id}")
    etag, remaining = first.headers["ETag"], int(first.headers["X-RateLimit-Remaining"])
    again = api(server, "GET", f"/repos/{REPO}/releases/{rel.id}",
                headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert int(again.headers["X-RateLimit-Remaining"]) == remaining
    assert again.headers["ETag"] == etag

    server.add_asset(REPO, rel.id, "new.bin", b"new")
    changed = api(server, "GET", f"/repos/{REPO}/releases/{rel.id}",
                  headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert int(changed.headers["X-RateLimit-Remaining"]) == remaining - 1
    assert rel.update() is True and [a.name for a in rel.assets] == ["new.bin"]


def test_rate_limit_headers_and_primary_limit(server: GitHubServer, gh: Any) -> None:
    answer = api(server, "GET", f"/repos/{REPO}")
    for name in ("Limit", "Remaining", "Reset", "Used", "Resource"):
        assert f"X-RateLimit-{name}" in answer.headers
    assert answer.headers["X-RateLimit-Resource"] == "core"
    assert answer.headers["X-OAuth-Scopes"] == "repo, workflow"
    used = int(answer.headers["X-RateLimit-Used"])
    assert gh.get_rate_limit().resources.core.used == used  # /rate_limit itself is free
    assert gh.get_rate_limit().resources.core.used == used
    assert server.rate_limit(TOKEN) == (5000 - used, used)

    server.set_rate_limit(TOKEN, remaining=0, reset_in=600)
    with pytest.raises(github.RateLimitExceededException):
        server.client(TOKEN, retries=None).get_repo(REPO)
    limited = api(server, "GET", f"/repos/{REPO}")
    assert limited.status_code == 403 and limited.headers["X-RateLimit-Remaining"] == "0"
    assert api(server, "GET", "/rate_limit").json()["resources"]["core"]["remaining"] == 0


def test_rate_limit_exceeds_max_wait(server: GitHubServer) -> None:
    server.set_rate_limit(TOKEN, remaining=0, reset_in=600)
    retry = github.GithubRetry(total=2, max_rate_limit_wait=5)
    client = github.Github(base_url=server.base_url, auth=github.Auth.Token(TOKEN), retry=retry)
    with pytest.raises(github.RateLimitExceededException):
        client.get_repo(REPO)


def test_authentication(server: GitHubServer) -> None:
    server.add_repo("ninfer/secret", private=True)
    server.add_repo("other/readonly", writable=False)
    server.add_token("read-classic", scopes=("read:org",))
    server.add_token("read-fine", permissions={"contents": "read", "metadata": "read"})
    server.add_token("write-fine", permissions={"contents": "write"})

    with pytest.raises(github.BadCredentialsException):
        server.client("not-a-token").get_repo(REPO)
    anonymous = server.client(None)
    assert anonymous.get_repo(REPO).permissions is None  # public: readable without a token
    with pytest.raises(github.UnknownObjectException):
        anonymous.get_repo("ninfer/secret")
    with pytest.raises(GithubException) as caught:
        anonymous.get_repo(REPO).create_git_release("v1", "v1", "")
    assert caught.value.status == 401 and caught.value.data["message"] == "Requires authentication"
    with pytest.raises(github.UnknownObjectException):
        server.client(TOKEN).get_repo("ninfer/missing")

    # the user can push (permissions.push), the classic token lacks the scope: 404 on writes
    classic = server.client("read-classic")
    assert classic.get_repo(REPO).permissions.push
    with pytest.raises(github.UnknownObjectException):
        classic.get_repo(REPO).create_git_release("v1", "v1", "")
    assert classic.oauth_scopes == ["read:org"]
    with pytest.raises(github.UnknownObjectException):
        classic.get_repo("ninfer/secret")

    fine = server.client("read-fine")
    with pytest.raises(GithubException) as caught:
        fine.get_repo(REPO).create_git_release("v1", "v1", "")
    assert caught.value.status == 403
    assert caught.value.data["message"] == "Resource not accessible by personal access token"
    assert caught.value.headers["x-accepted-github-permissions"] == "contents=write"
    assert fine.oauth_scopes is None
    assert server.client("write-fine").get_repo(REPO).create_git_release("v9", "v9", "").id

    readonly = server.client(TOKEN).get_repo("other/readonly")
    assert not readonly.permissions.push
    with pytest.raises(github.UnknownObjectException):
        readonly.create_git_release("v1", "v1", "")

    # drafts are seen only by those who can push
    hidden = draft(server.client(TOKEN), "v5")
    assert [r.tag_name for r in anonymous.get_repo(REPO).get_releases()] == ["v9"]
    with pytest.raises(github.UnknownObjectException):
        classic.get_repo(REPO).get_release(hidden.id)
    assert server.client("write-fine").get_user().login == "ninfer-bot"


def test_commits_ref_as_bare_sha(server: GitHubServer) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    server.set_branch(REPO, "release", sha)
    accept = {"Accept": "application/vnd.github.sha"}
    answer = api(server, "GET", f"/repos/{REPO}/commits/release", headers=accept)
    assert answer.status_code == 200 and answer.text == sha
    assert answer.headers["Content-Type"].startswith("application/vnd.github.sha")
    again = api(server, "GET", f"/repos/{REPO}/commits/release",
                headers=accept | {"If-None-Match": answer.headers["ETag"]})
    assert again.status_code == 304
    assert again.headers["X-RateLimit-Used"] == answer.headers["X-RateLimit-Used"]
    server.set_branch(REPO, "release", "f" * 40)
    moved = api(server, "GET", f"/repos/{REPO}/commits/release",
                headers=accept | {"If-None-Match": answer.headers["ETag"]})
    assert moved.status_code == 200 and moved.text == "f" * 40
    assert api(server, "GET", f"/repos/{REPO}/commits/release").json()["sha"] == "f" * 40
    assert server.client(TOKEN).get_repo(REPO).get_commit("release").sha == "f" * 40
    assert api(server, "GET", f"/repos/{REPO}/commits/nope", headers=accept).status_code == 422


# ---------------------------------------------------------------------------------------------
# Downloads and the two layouts


def test_downloads_are_302_to_storage(server: GitHubServer) -> None:
    data = bytes(range(256)) * 400
    rid = server.add_release(REPO, "v1", assets={"kit.tar.gz": data})
    asset = api(server, "GET", f"/repos/{REPO}/releases/{rid}").json()["assets"][0]

    browser = requests.get(asset["browser_download_url"], allow_redirects=False, timeout=10)
    assert browser.status_code == 302
    location = browser.headers["Location"]
    assert location.startswith(server.storage_base)
    assert requests.get(asset["browser_download_url"], timeout=10).content == data  # anonymous

    via_api = api(server, "GET", f"/repos/{REPO}/releases/assets/{asset['id']}",
                  headers={"Accept": "application/octet-stream"})
    assert via_api.status_code == 302
    assert via_api.headers["Location"].startswith(server.storage_base)

    part = requests.get(location, headers={"Range": "bytes=1000-"}, timeout=10)
    assert part.status_code == 206 and part.content == data[1000:]
    assert part.headers["Content-Range"] == f"bytes 1000-{len(data) - 1}/{len(data)}"
    assert requests.get(location, headers={"Range": "bytes=-10"}, timeout=10).content == data[-10:]
    assert requests.get(location, headers={"Range": f"bytes={len(data)}-"},
                        timeout=10).status_code == 416
    assert requests.head(location, timeout=10).headers["Content-Length"] == str(len(data))
    forged = location.replace("signature=", "signature=0")
    assert requests.get(forged, timeout=10).status_code == 403
    assert api(server, "GET", f"/repos/{REPO}/releases/{rid}").json()["assets"][0][
        "download_count"] == 3

    # a draft's assets: only for those who can push, under its untagged-… name
    did = server.add_release(REPO, "v2", draft=True, assets={"kit.tar.gz": b"draft"})
    url = api(server, "GET", f"/repos/{REPO}/releases/{did}").json()["assets"][0][
        "browser_download_url"]
    assert "/untagged-" in url
    assert requests.get(url, timeout=10).status_code == 404
    assert requests.get(url, headers={"Authorization": f"token {TOKEN}"},
                        timeout=10).content == b"draft"


def test_dotcom_layout_uploads_and_storage_on_their_own_ports(tmp_path: Path) -> None:
    """As github.com: upload_url on the upload host, downloads redirected to the storage host.
    PyGithub refuses both (an absolute URL on the API's host must be on its port), which is why
    the default layout serves them on the API's port, as GitHub Enterprise Server does."""
    with GitHubServer(layout="dotcom") as server:
        server.add_repo(REPO)
        server.add_token(TOKEN)
        gh = server.client(TOKEN)
        rel = draft(gh)
        upload = urllib.parse.urlsplit(rel.upload_url)
        assert upload.port == server.upload_port != server.api_port
        assert upload.path.startswith("/api/uploads/repos/")

        answer = requests.post(rel.upload_url.split("{")[0], params={"name": "kit.tar.gz"},
                               data=b"kit-bytes", timeout=10,
                               headers={"Authorization": f"token {TOKEN}",
                                        "Content-Type": "application/gzip"})
        assert answer.status_code == 201 and answer.json()["state"] == "uploaded"
        assert answer.headers["X-RateLimit-Resource"] == "core"
        # the API port does not take uploads in this layout, the upload port serves nothing else
        assert requests.post(f"{server.web_url}{upload.path}", params={"name": "x"}, data=b"x",
                             headers={"Authorization": f"token {TOKEN}"},
                             timeout=10).status_code == 404
        assert requests.get(f"http://127.0.0.1:{server.upload_port}/api/v3/repos/{REPO}",
                            timeout=10).status_code == 404

        redirect = api(server, "GET", f"/repos/{REPO}/releases/assets/{answer.json()['id']}",
                       headers={"Accept": "application/octet-stream"})
        assert urllib.parse.urlsplit(redirect.headers["Location"]).port == server.storage_port
        assert requests.get(redirect.headers["Location"], timeout=10).content == b"kit-bytes"

        path = tmp_path / "other.bin"
        path.write_bytes(b"x")
        with pytest.raises(AssertionError):
            rel.upload_asset(str(path))  # PyGithub: Requester.__assertUrlAllowed
        asset = gh.get_repo(REPO).get_release(rel.id).assets[0]
        with pytest.raises(AssertionError):
            asset.download_asset(str(tmp_path / "back"))
        validate_events(server.events)


def test_asset_size_limit_is_refused_before_the_body(tmp_path: Path) -> None:
    with GitHubServer(max_asset_size=1000) as server:
        server.add_repo(REPO)
        server.add_token(TOKEN)
        rel = draft(server.client(TOKEN))
        path = tmp_path / "big.bin"
        path.write_bytes(b"x" * 5000)
        with pytest.raises(GithubException) as caught:
            rel.upload_asset(str(path))
        assert caught.value.status == 422
        assert caught.value.data["errors"][0]["field"] == "size"
        assert server.snapshot().of(REPO)[0].assets == ()
        validate_events(server.events)


def test_immutable_release_refuses_changes(tmp_path: Path) -> None:
    with GitHubServer() as server:
        server.add_repo(REPO, immutable_releases=True)
        server.add_token(TOKEN)
        rel = draft(server.client(TOKEN))
        path = tmp_path / "kit.tar.gz"
        path.write_bytes(b"kit")
        asset = rel.upload_asset(str(path))
        rel = rel.update_release("v1", "")
        assert rel.raw_data["immutable"] is True
        for change in (lambda: rel.upload_asset(str(path), name="more"), asset.delete_asset,
                       lambda: rel.update_release("v1", "other notes")):
            with pytest.raises(GithubException) as caught:
                change()
            assert caught.value.status == 422
        validate_events(server.events)


def test_concurrent_uploads(server: GitHubServer, gh: Any) -> None:
    rel = draft(gh)
    blobs = {f"part-{i}.bin": bytes([i]) * (50_000 + i) for i in range(12)}

    failures: list[BaseException] = []

    def upload(name: str) -> None:
        data = blobs[name]
        try:
            server.client(TOKEN).get_repo(REPO).get_release(rel.id).upload_asset_from_memory(
                io.BytesIO(data), len(data), name)
        except BaseException as failure:
            failures.append(failure)

    threads = [threading.Thread(target=upload, args=(name,)) for name in blobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    view = server.snapshot().of(REPO)[0]
    assert {a.name: a.data for a in view.assets} == blobs
    assert all(a.state == "uploaded" for a in view.assets)


# ---------------------------------------------------------------------------------------------
# Faults


def test_fault_5xx_is_retried_by_pygithub(server: GitHubServer, gh: Any) -> None:
    fault = server.faults.status(502, method="POST", path=r"/releases$")
    rel = draft(gh)
    assert fault.fired == 1 and fault.done and server.faults.pending == []
    assert statuses(server, "POST", r"/releases$") == [502, 201]
    assert [r.id for r in gh.get_repo(REPO).get_releases()] == [rel.id]
    assert [e.name for e in server.events if e.kind == "fault"] == ["status"]


def test_fault_500_mid_upload_leaves_a_starter_asset(server: GitHubServer, gh: Any,
                                                     files: dict[str, Path]) -> None:
    rel = draft(gh)
    server.faults.status(500, method="POST", path=r"/assets$")
    with pytest.raises(GithubException) as caught:
        rel.upload_asset(str(files["kit.tar.gz"]))
    # PyGithub retried the POST; the failed upload's asset holds the name
    assert statuses(server, "POST", r"/assets$") == [500, 422]
    assert caught.value.status == 422
    (asset,) = rel.get_assets()
    assert (asset.state, asset.size, asset.digest) == ("starter", 0, None)
    assert requests.get(asset.browser_download_url, timeout=10,
                        headers={"Authorization": f"token {TOKEN}"}).status_code == 404
    asset.delete_asset()
    assert rel.upload_asset(str(files["kit.tar.gz"])).state == "uploaded"


def test_fault_dropped_connection_mid_upload(server: GitHubServer, files: dict[str, Path]) -> None:
    rel = draft(server.client(TOKEN, retries=None))
    server.faults.drop(after_bytes=1000, method="POST", path=r"/assets$")
    with pytest.raises(requests.exceptions.ConnectionError):
        rel.upload_asset(str(files["kit.tar.gz"]))
    (asset,) = server.snapshot().of(REPO)[0].assets
    assert asset.state == "starter"
    assert statuses(server, "POST", r"/assets$") == []  # no answer was sent

    # PyGithub's retry sends the whole body again, and meets the name the failure holds
    server.faults.drop(after_bytes=1000, method="POST", path=r"/assets$")
    with pytest.raises(GithubException) as caught:
        rel = server.client(TOKEN).get_repo(REPO).get_release(rel.id)
        rel.upload_asset(str(files["kit.tar.gz"]), name="again.tar.gz")
    assert caught.value.status == 422
    assert statuses(server, "POST", r"/assets$") == [422]


def test_fault_dropped_connection_is_retried(server: GitHubServer, gh: Any) -> None:
    server.faults.drop(method="GET", path=r"/repos/[^/]+/[^/]+$", times=2)
    assert gh.get_repo(REPO).full_name == REPO
    assert statuses(server, "GET", r"/repos/[^/]+/[^/]+$") == [200]
    assert [e.name for e in server.events if e.kind == "fault"] == ["drop", "drop"]


def test_fault_secondary_rate_limit_waits_retry_after(server: GitHubServer, gh: Any) -> None:
    server.faults.secondary_rate_limit(retry_after=1, method="POST", path=r"/releases$")
    start = time.monotonic()
    draft(gh)
    assert time.monotonic() - start >= 1
    assert statuses(server, "POST", r"/releases$") == [403, 201]
    (limited,) = [e for e in server.requests("POST") if e.status == 403]
    assert limited.body["message"].startswith("You have exceeded a secondary rate limit")

    server.faults.secondary_rate_limit(retry_after=30, method="GET")
    with pytest.raises(github.RateLimitExceededException) as caught:
        server.client(TOKEN, retries=None).get_repo(REPO)
    assert caught.value.headers["retry-after"] == "30"


def test_fault_429_is_retried(server: GitHubServer, gh: Any) -> None:
    server.faults.too_many_requests(retry_after=1, method="GET", path=r"/releases$")
    assert gh.get_repo(REPO).get_releases().totalCount == 0
    assert statuses(server, "GET", r"/releases$") == [429, 200]


def test_fault_delay_times_out_after_the_change(server: GitHubServer) -> None:
    server.faults.delay(2.0, method="POST", path=r"/releases$")
    impatient = server.client(TOKEN, retries=None, timeout=1)
    with pytest.raises(requests.exceptions.Timeout):
        draft(impatient)
    time.sleep(1.5)
    assert [r.draft for r in server.snapshot().of(REPO)] == [True]  # it was created anyway


def test_fault_apply_then_502_makes_the_retry_a_422(server: GitHubServer, gh: Any,
                                                     files: dict[str, Path]) -> None:
    server.faults.apply_then_status(502, method="POST", path=r"/releases$")
    with pytest.raises(GithubException) as caught:
        gh.get_repo(REPO).create_git_release("v1", "v1", "", draft=False)
    assert caught.value.status == 422
    assert statuses(server, "POST", r"/releases$") == [502, 422]
    assert [r.tag_name for r in server.snapshot().of(REPO)] == ["v1"]

    # a draft does not conflict: the retry makes a second one, as on GitHub
    server.faults.apply_then_status(502, method="POST", path=r"/releases$")
    rel = draft(gh, "v2")
    assert [r.draft for r in server.snapshot().of(REPO) if r.tag_name == "v2"] == [True, True]

    server.faults.apply_then_status(502, method="POST", path=r"/assets$")
    with pytest.raises(GithubException) as caught:
        rel.upload_asset(str(files["SHA256SUMS"]))
    assert caught.value.status == 422
    (asset,) = server.snapshot().of(REPO)[-1].assets  # in the order made: `rel` is the last
    assert asset.state == "uploaded" and asset.data == files["SHA256SUMS"].read_bytes()


def test_fault_apply_then_drop(server: GitHubServer) -> None:
    gh = server.client(TOKEN, retries=None)
    rel = draft(gh)
    server.faults.apply_then_drop(method="PATCH")
    with pytest.raises(requests.exceptions.ConnectionError):
        rel.update_release("v1.0-kit", "")
    assert gh.get_repo(REPO).get_release("v1.0-kit").id == rel.id
    (patch,) = server.requests("PATCH")
    assert patch.status == 200 and patch.detail == {"dropped": True}


def test_fault_drop_mid_download_then_resume(server: GitHubServer) -> None:
    data = bytes(range(256)) * 4096
    rid = server.add_release(REPO, "v1", assets={"kit.tar.gz": data})
    url = api(server, "GET", f"/repos/{REPO}/releases/{rid}").json()["assets"][0][
        "browser_download_url"]
    server.faults.drop(after_bytes=300_000, method="GET", path=r"^/api/storage/")
    got = bytearray()
    with pytest.raises(requests.exceptions.RequestException):  # noqa: SIM117
        with requests.get(url, stream=True, timeout=10) as answer:
            for chunk in answer.iter_content(4096):
                got += chunk
    assert 300_000 - 4096 < len(got) <= 300_000  # what was sent arrives (whole chunks)
    rest = requests.get(url, headers={"Range": f"bytes={len(got)}-"}, timeout=10)
    assert rest.status_code == 206 and bytes(got) + rest.content == data


def test_fault_schedule_counts_matching_requests(server: GitHubServer) -> None:
    fault = server.faults.status(500, method="GET", path=r"/releases$", nth=2, times=2)
    other = server.faults.status(503, method="GET", path=r"/releases$", nth=1)
    repo = server.client(TOKEN, retries=3).get_repo(REPO)
    assert repo.get_releases().totalCount == 0  # 1st: `other`, 2nd and 3rd: `fault`, then 200
    assert statuses(server, "GET", r"/releases$") == [503, 500, 500, 200]
    assert (fault.seen, fault.fired, other.seen, other.fired) == (4, 2, 4, 1)
    server.faults.clear()
    assert list(server.faults) == []


# ---------------------------------------------------------------------------------------------
# Events and snapshots


def test_observer_sees_every_state(server: GitHubServer, gh: Any, files: dict[str, Path]) -> None:
    seen: list[tuple[str, Snapshot]] = []

    def never_published_incomplete(event: Event, snap: Snapshot) -> None:
        seen.append((event.name, snap))
        rel = snap.published(REPO, "v1.0-kit")
        if rel is not None:
            assert {a.name for a in rel.assets if a.state == "uploaded"} == set(files)

    server.observe(never_published_incomplete)
    rel = draft(gh)
    for path in files.values():
        rel.upload_asset(str(path))
    rel.update_release("v1.0-kit", "")
    assert [name for name, _ in seen][-2:] == ["release.updated", "release.published"]
    started = [snap for name, snap in seen if name == "asset.started"]
    assert started[0].of(REPO)[0].assets[0].state == "starter"  # listed while uploading
    final = server.snapshot().published(REPO, "v1.0-kit")
    assert final is not None and final.asset("SHA256SUMS").data == files["SHA256SUMS"].read_bytes()


def test_observer_failure_fails_the_server() -> None:
    with pytest.raises(AssertionError, match="observer failed"), GitHubServer() as server:
        server.add_repo(REPO)
        server.add_token(TOKEN)

        def refuse(event: Event, snap: Snapshot) -> None:
            raise AssertionError("no releases here")

        server.observe(refuse)
        draft(server.client(TOKEN))


def test_events_log_requests_without_tokens(server: GitHubServer, gh: Any) -> None:
    draft(gh)
    kinds = Counter(e.kind for e in server.events)
    assert kinds["request"] == 2 and kinds["change"] == 1
    create = server.requests("POST")[0]
    assert (create.status, create.who, create.schema) == (201, "ninfer-bot", "release")
    assert create.body["tag_name"] == "v1.0-kit"
    assert [e.seq for e in server.events] == list(range(1, len(server.events) + 1))


# ---------------------------------------------------------------------------------------------
# The schemas themselves


def test_openapi_fixture_is_what_extract_made() -> None:
    origin = SPEC["x-extracted-from"]
    assert origin["package"].startswith("@octokit/openapi@")
    assert set(SPEC["components"]["schemas"]) == {
        "release", "release-asset", "simple-user", "nullable-simple-user", "reaction-rollup",
        "basic-error", "validation-error"}
    assert "digest" in SPEC["components"]["schemas"]["release-asset"]["required"]


def test_validation_is_not_vacuous(server: GitHubServer, gh: Any) -> None:
    rel = draft(gh)
    server.add_asset(REPO, rel.id, "kit.tar.gz", b"kit")
    body = api(server, "GET", f"/repos/{REPO}/releases/{rel.id}").json()
    assert schema_errors("release", body) == []
    assert schema_errors("release-asset", body["assets"][0]) == []
    broken = dict(body["assets"][0])
    del broken["digest"]
    broken["size"] = "3"
    broken["created_at"] = "yesterday"
    assert len(schema_errors("release-asset", broken)) == 3
    assert schema_errors("release", body | {"published_at": "2024-13-01"}) != []
    assert schema_errors("release", body | {"tarball_url": "not a uri"}) != []


def test_every_release_json_carries_its_schema(server: GitHubServer, gh: Any,
                                               files: dict[str, Path]) -> None:
    """No release or asset answer escapes validation: each 2xx JSON answer of a release route
    names its schema."""
    rel = draft(gh)
    rel.upload_asset(str(files["SHA256SUMS"]))
    rel.update_release("v1.0-kit", "")
    repo = gh.get_repo(REPO)
    list(repo.get_releases())
    asset = repo.get_release("v1.0-kit").assets[0]
    list(repo.get_release(rel.id).get_assets())
    asset.update_asset("SHA256SUMS", "checksums")
    server.faults.status(500, method="POST", path=r"/assets$", times=3)
    with pytest.raises(requests.exceptions.RetryError):  # 3 × 500: PyGithub gives up
        rel.upload_asset(str(files["BUILDINFO.txt"]))
    api(server, "GET", f"/repos/{REPO}/releases/{rel.id}")
    for event in server.requests(path=r"/releases"):
        if event.status in (200, 201) and event.body is not None:
            assert event.schema in ("release", "release[]", "release-asset", "release-asset[]")
    validate_events(server.events)
    assert VALIDATED["release"] and VALIDATED["release-asset"]
    starters = [a for r in server.snapshot().of(REPO) for a in r.assets if a.state == "starter"]
    assert len(starters) == 1
    listed = api(server, "GET", f"/repos/{REPO}/releases/{rel.id}/assets").json()
    (error,) = validator("release-asset").iter_errors(listed[-1])
    assert list(error.path) == ["state"] and error.instance == "starter"


# -- git over smart HTTP (add_git_remote) ------------------------------------------------------


def _git(*args: str, cwd: Path, header: str | None = None) -> Any:
    import subprocess

    config = ["-c", f"http.extraheader={header}"] if header else []
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "credential.helper=", *config, *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(cwd),
                               "GIT_TERMINAL_PROMPT": "0"})


def _basic(token: str, user: str = "x-access-token") -> str:
    import base64

    return "AUTHORIZATION: basic " + base64.b64encode(f"{user}:{token}".encode()).decode()


def test_git_remote_clones_anonymously_and_pushes_only_with_a_token_that_may_write(
        tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    _git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    with GitHubServer() as server:
        server.add_repo("kits/ledger")
        server.add_token("ghp_writer")
        server.add_token("ghp_reader", can_write=False)
        url = server.add_git_remote("kits/ledger", bare)
        assert url == f"{server.web_url}/kits/ledger.git"
        work = tmp_path / "work"
        assert _git("clone", "-q", url, str(work), cwd=tmp_path).returncode == 0
        (work / "a.toml").write_text("x = 1\n")
        _git("add", "a.toml", cwd=work)
        _git("commit", "-qm", "a", cwd=work)
        anonymous = _git("push", "origin", "HEAD:main", cwd=work)
        assert anonymous.returncode != 0 and "could not read Username" in anonymous.stderr
        reader = _git("push", "origin", "HEAD:main", cwd=work, header=_basic("ghp_reader"))
        assert reader.returncode != 0 and "403" in reader.stderr
        wrong_user = _git("push", "origin", "HEAD:main", cwd=work,
                          header=_basic("ghp_writer", "someone"))
        assert wrong_user.returncode != 0
        pushed = _git("push", "origin", "HEAD:main", cwd=work, header=_basic("ghp_writer"))
        assert pushed.returncode == 0, pushed.stderr
        assert _git("log", "--format=%s", "main", cwd=bare).stdout.split() == ["a"]
        # A second clone, anonymous, sees the push; a racing push that is not a fast-forward
        # is refused, as GitHub refuses it.
        other = tmp_path / "other"
        assert _git("clone", "-q", url, str(other), cwd=tmp_path).returncode == 0
        assert (other / "a.toml").read_text() == "x = 1\n"
        (work / "b.toml").write_text("y = 2\n")
        _git("add", "b.toml", cwd=work)
        _git("commit", "-qm", "b", cwd=work)
        assert _git("push", "origin", "HEAD:main", cwd=work,
                    header=_basic("ghp_writer")).returncode == 0
        (other / "c.toml").write_text("z = 3\n")
        _git("add", "c.toml", cwd=other)
        _git("commit", "-qm", "c", cwd=other)
        raced = _git("push", "origin", "HEAD:main", cwd=other, header=_basic("ghp_writer"))
        assert raced.returncode != 0 and "rejected" in raced.stderr
        assert [e.name for e in server.events if e.name == "git.push"] == ["git.push"] * 2
        server.add_repo("kits/private", private=True)
        hidden = tmp_path / "private.git"
        _git("init", "-q", "--bare", "-b", "main", str(hidden), cwd=tmp_path)
        private = server.add_git_remote("kits/private", hidden)
        assert _git("ls-remote", private, cwd=tmp_path).returncode != 0
        assert _git("ls-remote", private, cwd=tmp_path,
                    header=_basic("ghp_writer")).returncode == 0
    assert not server.errors


# -- pull requests (toolchains.yml) ------------------------------------------------------------


def test_pull_requests_open_from_a_pushed_branch_with_githubs_refusals(tmp_path: Path) -> None:
    """What toolchains.yml's propose step does through the API (the branch pushed over git,
    then POST /pulls; GET /pulls?head=OWNER:BRANCH finds an open one), with GitHub's answers:
    one open pull request per head and base, none without commits between them or for a branch
    that does not exist, none for a token without pull_requests=write; numbered with the
    repository's issues."""
    bare = tmp_path / "remote.git"
    _git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    with GitHubServer() as server:
        server.add_repo("kits/ledger")
        server.add_token("ghs_actions", permissions={"contents": "write",
                                                     "pull_requests": "write"})
        server.add_token("ghs_no_pulls", permissions={"contents": "write", "issues": "write"})
        url = server.add_git_remote("kits/ledger", bare)
        work = tmp_path / "work"
        _git("clone", "-q", url, str(work), cwd=tmp_path)
        (work / "matrix.toml").write_text("schema = 1\n")
        _git("add", "-A", cwd=work)
        _git("commit", "-qm", "main", cwd=work)
        _git("push", "-q", "origin", "HEAD:main", cwd=work, header=_basic("ghs_actions"))
        _git("push", "-q", "origin", "HEAD:refs/heads/same", cwd=work,
             header=_basic("ghs_actions"))
        (work / "matrix.toml").write_text('schema = 1\nimage = "x@sha256:00"\n')
        _git("commit", "-qam", "pins", cwd=work)
        _git("push", "-q", "origin", "HEAD:refs/heads/pins", cwd=work,
             header=_basic("ghs_actions"))
        head = _git("rev-parse", "HEAD", cwd=work).stdout.strip()
        server.add_issue("kits/ledger", "an issue first")
        repo = server.client("ghs_actions").get_repo("kits/ledger")
        pull = repo.create_pull(base="main", head="pins", title="new pins", body="why")
        assert (pull.number, pull.state, pull.head.ref, pull.head.sha, pull.base.ref) == \
            (2, "open", "pins", head, "main")
        assert [p.number for p in repo.get_pulls(state="open", head="kits:pins")] == [2]
        assert list(repo.get_pulls(state="open", head="kits:other")) == []
        assert repo.get_pull(2).title == "new pins"
        refusals = {
            "already": dict(base="main", head="kits:pins", title="again"),
            "no commits": dict(base="main", head="same", title="nothing"),
            "missing": dict(base="main", head="no-such-branch", title="nowhere"),
        }
        for what, arguments in refusals.items():
            with pytest.raises(GithubException) as refused:
                repo.create_pull(**arguments)  # type: ignore[arg-type]
            assert refused.value.status == 422, what
        said = str(refused.value.data)
        assert "head" in said and "invalid" in said
        with pytest.raises(GithubException) as forbidden:
            server.client("ghs_no_pulls").get_repo("kits/ledger").create_pull(
                base="main", head="pins", title="x")
        assert forbidden.value.status == 403
        assert [(v.number, v.head, v.head_sha) for v in server.pull_views("kits/ledger")] == \
            [(2, "pins", head)]
    assert not server.errors
