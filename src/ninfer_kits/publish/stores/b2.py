"""The `b2` store's client on b2sdk: `<prefix><tag>/<asset>` in the bucket, every upload with
its SHA-1 (docs/publish.md, stage 9). B2 has no drafts: SHA256SUMS, uploaded last, makes a
release complete, and --replace hides it first so that it never names a file being replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from b2sdk.v2 import B2Api, InMemoryAccountInfo
from b2sdk.v2.exception import (
    AlreadyFailed,
    B2ConnectionError,
    B2Error,
    B2RequestTimeout,
    BucketNotAllowed,
    InvalidAuthToken,
    MaxRetriesExceeded,
    NonExistentBucket,
    RequestTimeout,
    RestrictedBucket,
    ServiceError,
    TooManyRequests,
    Unauthorized,
)

from ninfer_kits.errors import BadInput
from ninfer_kits.kit.kitdir import SHA256SUMS
from ninfer_kits.log import Reporter
from ninfer_kits.net.remote import Secret
from ninfer_kits.net.retry import RetryPolicy, ServiceFailed, Transient
from ninfer_kits.publish.store import (
    Asset,
    Found,
    Presence,
    Release,
    StoreRecord,
    VerifyFailed,
)
from ninfer_kits.stores.b2 import B2Target

T = TypeVar("T")

MAX_ASSET_SIZE = 10 * 10**12  # B2's largest file: 10 TB
LARGE_FILE_SHA1 = "large_file_sha1"
SHA256_INFO = "sha256"
# list (compare), write (upload, hide), delete (cancel an unfinished large file: writeFiles)
NEEDED_CAPABILITIES = ("listFiles", "writeFiles")


class B2Store:
    name = "b2"
    max_asset_size: int | None = MAX_ASSET_SIZE

    def __init__(self, target: B2Target, key_id: str, key: Secret, *, retry: RetryPolicy,
                 reporter: Reporter, api: B2Api | None = None) -> None:
        self.target = target
        self._key_id = key_id
        self._key = key
        self._retry = retry
        self._reporter = reporter
        self._api = api if api is not None else B2Api(InMemoryAccountInfo())
        self._bucket: Any = None
        self._tag = ""

    def describe(self) -> str:
        return f"B2 bucket {self.target.bucket} under {self.target.prefix or '/'}"

    def download_base(self, tag: str) -> str:
        return str(self.bucket.get_download_url(f"{self.target.prefix}{tag}"))

    def key_of(self, name: str) -> str:
        return f"{self.target.prefix}{self._tag}/{name}"

    def _call(self, what: str, operation: Callable[[], T]) -> T:
        try:
            return self._retry.call(f"B2: {what}", operation, transient, self._reporter)
        except B2Error as error:
            raise ServiceFailed(f"B2: {what}: {error}") from None

    def preflight(self) -> None:
        bucket = self.target.bucket
        try:
            self._retry.call("B2: authorizing the key", lambda: self._api.authorize_account(
                "production", self._key_id, self._key.value), transient, self._reporter)
        except (InvalidAuthToken, Unauthorized) as error:
            raise BadInput(f"B2: the application key ({self._key.source}) was refused: "
                           f"{error}; check B2_APPLICATION_KEY_ID and B2_APPLICATION_KEY") from None
        except B2Error as error:
            raise ServiceFailed(f"B2: authorizing the key: {error}") from None
        allowed = self._api.account_info.get_allowed() or {}
        capabilities = set(allowed.get("capabilities") or ())
        lacking = [name for name in NEEDED_CAPABILITIES if name not in capabilities]
        if lacking:
            raise BadInput(f"B2: the application key cannot write bucket {bucket}: it lacks "
                           f"the capabilit{'y' if len(lacking) == 1 else 'ies'} "
                           f"{', '.join(lacking)}")
        only = allowed.get("bucketName")
        if only is not None and only != bucket:
            raise BadInput(f"B2: the application key is restricted to bucket {only}, not "
                           f"{bucket}")
        prefix = allowed.get("namePrefix")
        if prefix and not self.target.prefix.startswith(prefix):
            raise BadInput(f"B2: the application key may only write names starting with "
                           f"{prefix!r}, and the matrix's prefix is {self.target.prefix!r}")
        try:
            self._bucket = self._retry.call(f"B2: opening bucket {bucket}",
                                            lambda: self._api.get_bucket_by_name(bucket),
                                            transient, self._reporter)
        except (NonExistentBucket, BucketNotAllowed, RestrictedBucket):
            raise BadInput(f"B2: bucket {bucket} does not exist, or the application key "
                           f"cannot see it") from None
        except B2Error as error:
            raise ServiceFailed(f"B2: opening bucket {bucket}: {error}") from None

    @property
    def bucket(self) -> Any:
        if self._bucket is None:
            self.preflight()
        return self._bucket

    def _listed(self, name: str) -> Any | None:
        """The latest visible version of `<prefix><tag>/<name>`, or None (hidden: absent)."""
        folder = f"{self.target.prefix}{self._tag}/"
        return self._call(f"listing {folder}", lambda: next(
            (version for version, _ in self.bucket.ls(folder, recursive=True)
             if version.file_name == folder + name), None))

    def inspect(self, release: Release) -> Found:
        self._tag = release.tag
        presence = {asset.name: _presence(self._listed(asset.name), asset)
                    for asset in release.assets}
        unfinished = [item.file_name for item in self._unfinished()]
        notes = tuple(f"B2: an unfinished large file {name} (an interrupted upload) will be "
                      f"cancelled" for name in unfinished)
        held = {name: (getattr(self._listed(name), "file_info", None) or {}).get(SHA256_INFO)
                for name, state in presence.items() if state is Presence.DIFFERENT}
        return Found(published=presence.get(SHA256SUMS, Presence.ABSENT) is not Presence.ABSENT,
                     assets=presence, notes=notes,
                     held_sha256={name: str(sha256) for name, sha256 in held.items() if sha256})

    def download(self, name: str, dest: Path) -> None:
        key = self.key_of(name)
        self._call(f"downloading {key}", lambda: self.bucket.download_file_by_name(key).save_to(
            str(dest)))

    def _unfinished(self, name: str | None = None) -> list[Any]:
        prefix = self.key_of(name) if name else f"{self.target.prefix}{self._tag}/"
        return self._call(f"listing unfinished large files under {prefix}", lambda: [
            item for item in self.bucket.list_unfinished_large_files(prefix=prefix)
            if name is None or item.file_name == prefix])

    def _cancel_unfinished(self, name: str) -> None:
        for item in self._unfinished(name):
            file_id: str = item.file_id
            self._reporter.info(f"B2: cancelling the unfinished large file {item.file_name}")
            self._call(f"cancelling {item.file_name}",
                       lambda: self._api.cancel_large_file(file_id))  # noqa: B023

    def unpublish(self) -> None:
        if self._listed(SHA256SUMS) is not None:
            self._reporter.warning(f"B2: --replace: hiding {self.key_of(SHA256SUMS)} until the "
                                   f"files it names are replaced")
            self._call(f"hiding {self.key_of(SHA256SUMS)}",
                       lambda: self.bucket.hide_file(self.key_of(SHA256SUMS)))

    def put(self, asset: Asset, *, replace: bool) -> None:
        key = self.key_of(asset.name)
        info = {LARGE_FILE_SHA1: asset.sha1, SHA256_INFO: asset.sha256}
        progress = self._reporter.progress(f"B2: uploading {asset.name}")
        listener = _Listener(progress, asset.size)

        def upload() -> None:
            self._cancel_unfinished(asset.name)
            try:
                self.bucket.upload_local_file(str(asset.path), key,
                                              content_type=asset.content_type, file_info=info,
                                              sha1_sum=asset.sha1, progress_listener=listener)
            except BaseException:
                self._cancel_unfinished_quietly(asset.name)
                raise

        self._call(f"uploading {key}", upload)

    def _cancel_unfinished_quietly(self, name: str) -> None:
        try:
            for item in self.bucket.list_unfinished_large_files(prefix=self.key_of(name)):
                if item.file_name == self.key_of(name):
                    self._api.cancel_large_file(item.file_id)
        except B2Error as error:
            self._reporter.warning(f"B2: could not cancel an unfinished upload of "
                                   f"{self.key_of(name)} ({error}); the next run will")

    def verify(self, asset: Asset) -> None:
        listed = self._listed(asset.name)
        if _presence(listed, asset) is not Presence.SAME:
            shown = "missing" if listed is None else (
                f"{listed.size:,} bytes, SHA-1 {_sha1(listed)}, sha256 "
                f"{(listed.file_info or {}).get(SHA256_INFO)}")
            raise VerifyFailed(f"B2: {self.key_of(asset.name)} is not the kit's file after "
                               f"upload ({shown}; the kit's: {asset.size:,} bytes, SHA-1 "
                               f"{asset.sha1}, sha256 {asset.sha256})")

    def finish(self, release: Release) -> StoreRecord:
        folder = f"b2://{self.target.bucket}/{self.target.prefix}{release.tag}/"
        return StoreRecord(
            store=self.name, location=folder,
            urls={asset.name: self.bucket.get_download_url(self.key_of(asset.name))
                  for asset in release.assets},
            details=(("bucket", self.target.bucket),
                     ("prefix", f"{self.target.prefix}{release.tag}/")))


class _Listener:
    """b2sdk's progress-listener interface, onto our Progress."""

    def __init__(self, progress: Any, total: int) -> None:
        self._progress, self._total, self._lock = progress, total, threading.Lock()

    def __enter__(self) -> _Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_total_bytes(self, total_byte_count: int) -> None:
        self._total = total_byte_count

    def bytes_completed(self, byte_count: int) -> None:
        with self._lock:
            self._progress.bytes(byte_count, self._total)

    def close(self) -> None:
        return None


def _sha1(listed: Any) -> str | None:
    """The whole file's SHA-1: content_sha1 (small) or large_file_sha1 (b2sdk prefixes an
    unverified one with 'unverified:')."""
    sha1 = getattr(listed, "content_sha1", None)
    if sha1 and sha1 != "none":
        return str(sha1).removeprefix("unverified:")
    info = getattr(listed, "file_info", None) or {}
    value = info.get(LARGE_FILE_SHA1)
    return str(value) if value else None


def _presence(listed: Any | None, asset: Asset) -> Presence:
    if listed is None:
        return Presence.ABSENT
    sha256 = (getattr(listed, "file_info", None) or {}).get(SHA256_INFO)
    same = listed.size == asset.size and _sha1(listed) == asset.sha1 and \
        sha256 in (None, asset.sha256)
    return Presence.SAME if same else Presence.DIFFERENT


def transient(error: BaseException) -> Transient | None:
    """Whether a failed B2 call may pass when tried again, and the wait asked for."""
    if isinstance(error, TooManyRequests):
        return Transient("rate limited (HTTP 429)", error.retry_after_seconds)
    # b2sdk gave up on a part: one more try of ours cancels the file and starts again
    if isinstance(error, ServiceError | RequestTimeout | B2ConnectionError | B2RequestTimeout
                  | MaxRetriesExceeded | AlreadyFailed):
        return Transient(f"{type(error).__name__}", getattr(error, "retry_after_seconds", None))
    if isinstance(error, B2Error) and error.should_retry_http():
        return Transient(type(error).__name__, getattr(error, "retry_after_seconds", None))
    if isinstance(error, ConnectionError | TimeoutError):
        return Transient(f"connection failed ({type(error).__name__})")
    return None
