"""Publishing to Backblaze B2 through b2sdk, on b2sdk's own RawSimulator: SHA-1 on every upload,
large files in parts with `large_file_sha1`, unfinished large files cancelled, preflight of
the key, conflicts, and B2 before the GitHub draft."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from b2sdk.v2 import RawSimulator
from b2sdk.v2.exception import ServiceError

from github_server import GitHubServer
from ninfer_kits.errors import BadInput
from ninfer_kits.kit import kitdir
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.net.retry import ServiceFailed
from ninfer_kits.publish.holdings import PublishConflict
from ninfer_kits.release import ledger
from ninfer_kits.stores.b2 import B2Target
from test_publish_github import asset_bytes
from test_publish_support import (
    ASSET,
    B2_CANARY,
    CANARY,
    TAG,
    Captured,
    b2_simulator,
    b2_store,
    github_store,
    load,
    make_kit,
    matrix_file,
    publish,
)

NAMES = (ASSET, "BUILDINFO.txt", "SHA1SUMS", "ninfer-kits.pyz", "SHA256SUMS")
PREFIX = f"kits/{TAG}/"


class Recording(RawSimulator):  # type: ignore[misc]
    """The simulator, counting uploads, failing parts on demand, calling a hook per upload."""

    parts = 0
    files = 0
    fail_parts = 0  # how many part uploads fail with a 503 from now on
    hook: Callable[[str], None] | None = None

    def upload_part(self, upload_url: str, upload_auth_token: str, part_number: int,
                    *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        if cls.fail_parts:
            cls.fail_parts -= 1
            raise ServiceError("503 service unavailable (injected)")
        cls.parts += 1
        return super().upload_part(upload_url, upload_auth_token, part_number, *args, **kwargs)

    def start_large_file(self, api_url: str, account_auth_token: str, bucket_id: str,
                         file_name: str, *args: Any, **kwargs: Any) -> Any:
        if type(self).hook is not None:
            type(self).hook(file_name)  # type: ignore[misc]
        return super().start_large_file(api_url, account_auth_token, bucket_id, file_name,
                                        *args, **kwargs)

    def upload_file(self, upload_url: str, upload_auth_token: str, file_name: str,
                    *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        cls.files += 1
        if cls.hook is not None:
            cls.hook(file_name)
        return super().upload_file(upload_url, upload_auth_token, file_name, *args, **kwargs)


@pytest.fixture
def sim() -> Iterator[tuple[Any, str, str]]:
    Recording.parts = Recording.files = Recording.fail_parts = 0
    Recording.hook = None
    api, key_id, _ = b2_simulator(Recording)
    api.session.raw_api.key_id_to_key[key_id].key = B2_CANARY  # a known key: the canary
    yield api, key_id, B2_CANARY
    Recording.hook = None


def run(sim: tuple[Any, str, str], kit: kitdir.KitDir, tmp: Path,
        captured: Captured | None = None, **options: Any) -> Any:
    captured = captured or Captured()
    api, key_id, key = sim
    store = b2_store(api, key_id, key, captured.reporter)
    matrix = load(matrix_file(tmp, b2=B2Target(bucket="ninfer-kits", prefix="kits/")))
    return publish(kit.path, matrix, [store], tmp, captured.reporter, **options)


def listed(api: Any) -> dict[str, Any]:
    bucket = api.get_bucket_by_name("ninfer-kits")
    return {version.file_name.removeprefix(PREFIX): version
            for version, _ in bucket.ls(PREFIX, recursive=True)}


def download(api: Any, name: str) -> bytes:
    bucket = api.get_bucket_by_name("ninfer-kits")
    out = bytearray()
    downloaded = bucket.download_file_by_name(PREFIX + name)
    with downloaded.response as response:
        for chunk in response.iter_content(1 << 16):
            out += chunk
    return bytes(out)


def assert_complete(api: Any, kit: kitdir.KitDir) -> None:
    files = listed(api)
    assert sorted(files) == sorted(NAMES)
    for name in NAMES:
        data = asset_bytes(kit, name)
        version = files[name]
        sha1 = version.content_sha1 if version.content_sha1 != "none" else \
            version.file_info["large_file_sha1"]
        assert (version.size, sha1) == (len(data), hashlib.sha1(data).hexdigest()), name
        assert version.file_info["sha256"] == hashlib.sha256(data).hexdigest()
        assert download(api, name) == data


def test_every_file_goes_up_with_its_sha1_and_large_ones_in_parts(
        sim: tuple[Any, str, str], kit: kitdir.KitDir, tmp_path: Path) -> None:
    outcome = run(sim, kit, tmp_path)
    api = sim[0]
    assert_complete(api, kit)
    files = listed(api)
    # The simulator sends anything of 400 bytes or more as a large file: the tarball and
    # BUILDINFO.txt went up in parts, each with its SHA-1; the whole file's SHA-1 is ours.
    assert kit.size > 400 and Recording.parts > 2
    assert files[ASSET].content_sha1 == "none"
    assert files[ASSET].file_info["large_file_sha1"] == kit.sha1
    assert files["SHA1SUMS"].content_sha1 == hashlib.sha1(
        (kit.path / "SHA1SUMS").read_bytes()).hexdigest()
    entry = ledger.read(outcome.ledger)
    assert entry.url() == f"http://download.example.com/file/ninfer-kits/{PREFIX}{ASSET}"
    assert dict(entry.stores[0].details) == {"bucket": "ninfer-kits", "prefix": PREFIX}
    assert entry.stores[0].location == f"b2://ninfer-kits/{PREFIX}"


def test_sha256sums_goes_up_last_and_a_rerun_uploads_nothing(
        sim: tuple[Any, str, str], kit: kitdir.KitDir, tmp_path: Path) -> None:
    order: list[str] = []
    Recording.hook = order.append
    run(sim, kit, tmp_path)
    assert [name.removeprefix(PREFIX) for name in order] == list(NAMES)
    order.clear()
    again = run(sim, kit, tmp_path)
    assert order == [] and not again.changed


def test_a_failed_large_upload_is_cancelled_and_a_rerun_completes(
        sim: tuple[Any, str, str], kit: kitdir.KitDir, tmp_path: Path) -> None:
    Recording.fail_parts = 10_000
    with pytest.raises(ServiceFailed, match=rf"B2: uploading {PREFIX}{ASSET}: still failing"):
        run(sim, kit, tmp_path)
    bucket = sim[0].get_bucket_by_name("ninfer-kits")
    assert list(bucket.list_unfinished_large_files(prefix=PREFIX)) == []
    assert listed(sim[0]) == {}
    Recording.fail_parts = 3  # b2sdk retries a failed part itself
    run(sim, kit, tmp_path)
    assert_complete(sim[0], kit)


def test_an_unfinished_large_file_left_behind_is_cancelled(
        sim: tuple[Any, str, str], kit: kitdir.KitDir, tmp_path: Path) -> None:
    bucket = sim[0].get_bucket_by_name("ninfer-kits")
    started = sim[0].session.start_large_file(bucket.id_, PREFIX + ASSET, "application/gzip", {})
    left_id = started["fileId"]
    captured = Captured()
    run(sim, kit, tmp_path, captured)
    assert f"B2: cancelling the unfinished large file {PREFIX}{ASSET}" in captured.all()
    assert left_id not in [f.file_id for f in bucket.list_unfinished_large_files()]
    assert_complete(sim[0], kit)


def test_transient_errors_on_small_uploads_are_retried(sim: tuple[Any, str, str],
                                                        kit: kitdir.KitDir,
                                                        tmp_path: Path) -> None:
    raw = sim[0].session.raw_api
    raw.set_upload_errors([ServiceError("503 (injected)") for _ in range(12)])
    run(sim, kit, tmp_path)
    assert_complete(sim[0], kit)


def test_other_content_is_refused_and_replace_hides_sha256sums_first(
        sim: tuple[Any, str, str], kit: kitdir.KitDir, program: Path, tmp_path: Path) -> None:
    run(sim, kit, tmp_path)
    other = make_kit(tmp_path / "other", program, payload=b"another build")
    with pytest.raises(PublishConflict, match=r"B2 bucket ninfer-kits under kits/: "
                       rf"{ASSET} is sha256 {kit.sha256} there, {other.sha256} in this build"):
        run(sim, other, tmp_path)
    bucket = sim[0].get_bucket_by_name("ninfer-kits")
    seen: list[tuple[str, bool]] = []

    def sums_visible(name: str) -> None:
        names = [version.file_name for version, _ in bucket.ls(PREFIX, recursive=True)]
        seen.append((name, PREFIX + "SHA256SUMS" in names))

    Recording.hook = sums_visible
    captured = Captured()
    run(sim, other, tmp_path, captured, replace=True)
    assert "hiding kits/example-v0.3.0-linux-sm86/SHA256SUMS" in captured.all()
    # while the tarball and SHA1SUMS were replaced, no SHA256SUMS named the old ones
    assert [visible for name, visible in seen if not name.endswith("SHA256SUMS")] == \
        [False, False]
    assert_complete(sim[0], other)


@pytest.mark.parametrize(("key", "message"), [
    ({"wrong": True}, r"B2: the application key \(B2_APPLICATION_KEY\) was refused"),
    ({"capabilities": ["listFiles", "readFiles"]},
     r"cannot write bucket ninfer-kits: it lacks the capability writeFiles"),
    ({"capabilities": ["listFiles", "writeFiles"], "bucket": "elsewhere"},
     r"restricted to bucket elsewhere, not ninfer-kits"),
    ({"capabilities": ["listFiles", "writeFiles"], "name_prefix": "other/"},
     r"may only write names starting with 'other/'"),
    ({"target": "missing-bucket"}, r"bucket missing-bucket does not exist, or the "
                                    r"application key cannot see it"),
])
def test_preflight_checks_the_key_can_write_the_bucket(
        sim: tuple[Any, str, str], kit: kitdir.KitDir, tmp_path: Path, key: dict[str, Any],
        message: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api, key_id, secret = sim
    api.create_bucket("elsewhere", "allPrivate")
    if "capabilities" in key:
        bucket = api.get_bucket_by_name(key.get("bucket", "ninfer-kits"))
        made = api.create_key(key["capabilities"], "publish-test", bucket_id=bucket.id_,
                              name_prefix=key.get("name_prefix"))
        key_id = made.id_
        api.session.raw_api.key_id_to_key[key_id].key = B2_CANARY
    if key.get("wrong"):
        secret = B2_CANARY[::-1]
    captured = Captured()
    store = b2_store(api, key_id, secret, captured.reporter,
                     target=B2Target(bucket=key.get("target", "ninfer-kits"), prefix="kits/"))
    matrix = load(matrix_file(tmp_path, b2=B2Target(bucket="ninfer-kits", prefix="kits/")))
    with pytest.raises(BadInput, match=message) as caught:
        publish(kit.path, matrix, [store], tmp_path, captured.reporter)
    assert listed(api) == {}
    text = str(caught.value) + captured.all() + caplog.text
    assert B2_CANARY not in text and B2_CANARY[::-1] not in text


def test_b2_is_complete_before_the_github_draft_exists(sim: tuple[Any, str, str],
                                                       kit: kitdir.KitDir,
                                                       tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api, key_id, key = sim
    with GitHubServer() as server:
        server.add_repo("o/r")
        server.add_token(CANARY)
        changes_at_b2_upload: list[int] = []
        Recording.hook = lambda name: changes_at_b2_upload.append(
            sum(1 for e in server.events if e.kind == "change"))
        captured = Captured()
        stores = [b2_store(api, key_id, key, captured.reporter),
                  github_store(server, "o/r", CANARY, captured.reporter)]
        matrix = load(matrix_file(tmp_path, b2=B2Target(bucket="ninfer-kits", prefix="kits/"),
                                  github=GitHubTarget(repository="o/r", api=server.base_url)))
        outcome = publish(kit.path, matrix, stores, tmp_path, captured.reporter)
        assert changes_at_b2_upload == [0] * len(NAMES)  # no draft yet while B2 filled up
        assert server.snapshot().published("o/r", TAG) is not None
        assert_complete(api, kit)
        entry = ledger.read(outcome.ledger)
        assert [store.name for store in entry.stores] == ["b2", "github"]
        assert [store for store, _ in entry.assets[0].urls] == ["b2", "github"]
        body = server.snapshot().published("o/r", TAG).body  # type: ignore[union-attr]
        assert f"{server.web_url}/o/r/releases/download/{TAG}/{ASSET}" in body
        text = captured.all() + caplog.text + ledger.render(entry)
        assert CANARY not in text and B2_CANARY not in text
