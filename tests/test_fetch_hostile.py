"""fetch against hostile input: each case an archive, a server or a command line built to do
harm (a symlink chain out of DEST, an endless body, an asset named `../x`, a tar header
damaged in mid-archive, a token asked to travel over plain HTTP, a Retry-After that is not a
number), and what fetch must do instead."""

from __future__ import annotations

import email.utils
import gzip
import hashlib
import io
import json
import os
import tarfile
import time
from pathlib import Path

import pytest

from ninfer_kits.fetch.http import Client
from ninfer_kits.kit import buildinfo
from test_fetch import (
    ASSET,
    KIT,
    TAG,
    RangeServer,
    _member,
    _release_of,
    _served,
    _tarball,
    checkout,
    cli,
    kit_info,
    make_kit,
    publish_folder,
    write_ledger,
)
from unsigned import unsigned_matrix

CANARY = "ghp_hostileCANARY0123456789abcdefghijkl"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    place = tmp_path_factory.mktemp("fetch-hostile")
    return publish_folder(make_kit(place / "tree", filler=1 << 20), place / "dist")


def fetch_dir(folder: Path, dest: Path) -> tuple[int, str]:
    done = cli("fetch", TAG, "--from", str(folder.parent), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    return done.returncode, done.stderr


def assert_nothing_left(dest: Path) -> None:
    """A failed fetch into a DEST it made leaves no DEST at all (nor the folders above it that
    it made)."""
    assert not dest.exists(), sorted(p.name for p in dest.iterdir())
    assert not dest.parent.exists()


# --------------------------------------------------------------------------- links


@pytest.mark.parametrize("members", [
    pytest.param([_member("kit/", tarfile.DIRTYPE), _member("kit/l1", tarfile.SYMTYPE, link="."),
                  _member("kit/escape", tarfile.SYMTYPE, link="l1/l1/l1/../../../etc")],
                 id="a chain through a link to ."),
    pytest.param([_member("kit/", tarfile.DIRTYPE),
                  _member("kit/escape", tarfile.SYMTYPE, link="a/a/../../../x"),
                  _member("kit/a", tarfile.SYMTYPE, link=".")],
                 id="the link that makes it leave comes after"),
    pytest.param([_member("kit/", tarfile.DIRTYPE), _member("kit/d/", tarfile.DIRTYPE),
                  _member("kit/d/up", tarfile.SYMTYPE, link=".."),
                  _member("kit/out", tarfile.SYMTYPE, link="d/up/d/up/../..")],
                 id="a chain through a link to .."),
])
def test_a_symlink_that_leaves_dest_through_another_link_is_refused(
        tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    folder = _release_of(tmp_path, _tarball(members))
    dest = tmp_path / "inside" / "box"
    code, err = fetch_dir(folder, dest)
    assert code == 2, err
    assert "resolves outside the folder it is unpacked into" in err
    assert_nothing_left(dest)


def test_a_hardlink_through_a_link_is_refused(tmp_path: Path) -> None:
    folder = _release_of(tmp_path, _tarball([
        _member("kit/", tarfile.DIRTYPE), _member("kit/f", data=b"f"),
        _member("kit/l1", tarfile.SYMTYPE, link="."),
        _member("kit/h", tarfile.LNKTYPE, link="kit/l1/f")]))
    code, err = fetch_dir(folder, tmp_path / "inside" / "box")
    assert code == 2 and "hardlink" in err, err


def test_links_that_stay_inside_are_kept(tmp_path: Path) -> None:
    info = buildinfo.render(kit_info(), with_run=False).encode()
    folder = _release_of(tmp_path, _tarball([
        _member("kit/", tarfile.DIRTYPE), _member("kit/lib/", tarfile.DIRTYPE),
        _member("kit/lib/libx.so.1", data=b"x"), _member("kit/BUILDINFO.txt", data=info),
        _member("kit/lib/libx.so", tarfile.SYMTYPE, link="libx.so.1"),
        _member("kit/here", tarfile.SYMTYPE, link="."),
        _member("kit/top", tarfile.SYMTYPE, link="here/here/lib/../BUILDINFO.txt"),
        _member("kit/h", tarfile.LNKTYPE, link="kit/lib/libx.so.1")]))
    dest = tmp_path / "box"
    _, err = fetch_dir(folder, dest)
    assert "refused" not in err and "unpacked" in err, err  # (verify: not a whole kit)
    assert (dest / "kit" / "top").read_bytes() == info
    assert (dest / "kit" / "lib" / "libx.so").read_bytes() == b"x"


# --------------------------------------------------------------------------- a tar header


def test_a_corrupt_header_in_mid_archive_is_an_error_not_the_end(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for info, data in [_member("kit/", tarfile.DIRTYPE), _member("kit/a", data=b"a" * 700),
                           _member("kit/b", data=b"b"), _member("kit/c", data=b"c")]:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = bytearray(buffer.getvalue())
    second = 512 * 2 + 1024  # kit/, kit/a's header and its two blocks
    assert raw[second:second + 5] == b"kit/b"
    raw[second + 148:second + 156] = b"0000000\0"  # a wrong header checksum
    folder = _release_of(tmp_path, gzip.compress(bytes(raw), mtime=0))
    dest = tmp_path / "inside" / "box"
    code, err = fetch_dir(folder, dest)
    assert code == 2, err
    assert f"corrupt tar header at byte {second}" in err
    assert_nothing_left(dest)


# --------------------------------------------------------------------------- the download


def test_an_endless_body_without_content_length_stops_past_the_recorded_size(
        tmp_path: Path, release: Path, server: RangeServer) -> None:
    matrix, copy = _served(tmp_path, release, server)
    write_ledger(matrix, copy, {"github": f"{server.url}/gh"})
    server.state.endless.add(f"/gh/{ASSET}")
    size = (copy / ASSET).stat().st_size
    dest = tmp_path / "new" / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest), timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"larger than the recorded {size} bytes" in done.stderr
    assert server.state.endless_sent < 64 << 20
    assert_nothing_left(dest)


def test_the_download_stops_when_extraction_refuses_the_archive(
        tmp_path: Path, server: RangeServer) -> None:
    junk = b"\x1f\x8b\x08\x00" + os.urandom(24 << 20)  # gzip's magic, then not gzip
    folder = _release_of(tmp_path, junk)
    server.add_folder(folder, "/gh")
    server.state.rate = 1 << 20  # 24 s for the whole body
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, folder, {"github": f"{server.url}/gh"})
    started = time.monotonic()
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(tmp_path / "box"))
    assert done.returncode == 2, done.stderr
    assert "not a readable gzip tarball" in done.stderr
    assert time.monotonic() - started < 15
    assert not (tmp_path / "box").exists()


# --------------------------------------------------------------------------- the API's answers


def _api_release(server: RangeServer, tag: str, assets: dict[str, bytes]) -> None:
    listed = []
    for number, (name, data) in enumerate(assets.items(), start=1):
        server.state.files[f"/dl/{number}"] = data
        listed.append({"name": name, "size": len(data), "state": "uploaded",
                       "url": f"{server.url}/dl/{number}",
                       "browser_download_url": f"{server.url}/dl/{number}"})
    server.state.files[f"/repos/o/r/releases/tags/{tag}"] = json.dumps(
        {"tag_name": tag, "assets": listed}).encode()


@pytest.mark.parametrize("name", ["../evil.tar.gz", "/tmp/evil.tar.gz", "a/evil.tar.gz", ".."])
def test_an_asset_name_from_the_api_is_a_plain_file_name(
        tmp_path: Path, server: RangeServer, name: str) -> None:
    data = _tarball([_member("kit/", tarfile.DIRTYPE), _member("kit/a", data=b"a")])
    _api_release(server, "v9-hostile", {
        name: data, "SHA256SUMS": f"{hashlib.sha256(data).hexdigest()}  {name}\n".encode()})
    dest = tmp_path / "place" / "box"
    done = cli("fetch", "v9-hostile", "--api", server.url, "--repository", "o/r",
               "--dest", str(dest), "--matrix", str(unsigned_matrix()))
    assert done.returncode == 2, done.stderr
    assert "not a plain file name" in done.stderr
    assert not (tmp_path / "place").exists() and not (tmp_path / "evil.tar.gz").exists()


# --------------------------------------------------------------------------- tokens


@pytest.mark.parametrize("api", ["http://192.0.2.1:9", "http://api.example.com/api/v3"])
def test_no_token_over_plain_http_to_another_host(tmp_path: Path, api: str) -> None:
    started = time.monotonic()
    done = cli("fetch", "v9-hostile", "--api", api, "--repository", "o/r",
               "--dest", str(tmp_path / "box"), "--matrix", str(unsigned_matrix()),
               env={"GITHUB_TOKEN": CANARY}, timeout=30)
    assert done.returncode == 2, done.stderr
    assert "plain http would send the token in clear" in done.stderr
    assert CANARY not in done.stdout + done.stderr
    assert time.monotonic() - started < 20  # refused before any connection
    assert not (tmp_path / "box").exists()


def test_plain_http_without_a_token_or_to_loopback_is_allowed(
        tmp_path: Path, server: RangeServer) -> None:
    done = cli("fetch", "v9-none", "--api", server.url, "--repository", "o/r",
               "--dest", str(tmp_path / "box"), "--matrix", str(unsigned_matrix()),
               env={"GITHUB_TOKEN": CANARY})
    assert done.returncode == 2 and "has no published release v9-none" in done.stderr
    # the API's answer needed the token (the kit index before it, fetched without one, is
    # not there: 404)
    index, api = server.state.seen[:2]
    assert index.path == "/o/r/raw/HEAD/releases/index.json"
    assert "Authorization" not in index.headers
    assert api.headers["Authorization"] == f"Bearer {CANARY}"


# --------------------------------------------------------------------------- Retry-After


def test_a_retry_after_that_is_not_a_number(server: RangeServer) -> None:
    waits: list[float] = []
    client = Client(attempts=3, sleep=waits.append, servers=(server.url,))
    server.state.files["/f"] = b"ok"
    server.state.retry_after = "soon, maybe"
    server.state.status["/f"] = [429]
    assert client.get_bytes(f"{server.url}/f") == b"ok"
    assert waits == [0.5]  # the default backoff
    server.state.retry_after = email.utils.formatdate(time.time() + 20, usegmt=True)
    server.state.status["/f"] = [503, 403]
    assert client.get_bytes(f"{server.url}/f") == b"ok"
    assert waits[1] == 0.5 and 15 < waits[2] <= 21  # until the date


# --------------------------------------------------------------------------- DEST


def test_a_failed_fetch_leaves_no_dest(tmp_path: Path, release: Path,
                                       server: RangeServer) -> None:
    matrix, copy = _served(tmp_path, release, server)
    write_ledger(matrix, copy, {"github": f"{server.url}/gh"})
    server.state.corrupt[f"/gh/{ASSET}"] = (copy / ASSET).stat().st_size // 2
    dest = tmp_path / "new" / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 1, done.stderr
    assert_nothing_left(dest)
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "mine").write_text("x")
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(kept))
    assert done.returncode == 1
    assert sorted(p.name for p in kept.iterdir()) == ["mine"]  # a DEST that was there stays


def test_an_endless_body_of_no_recorded_size_stops_after_the_archive(
        tmp_path: Path, release: Path, server: RangeServer, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """B2 without the ledger: no size is recorded anywhere, so the archive's end bounds it."""
    server.add_folder(release, f"/file/ninfer-kits/kits/{TAG}")
    server.state.endless.add(f"/file/ninfer-kits/kits/{TAG}/{ASSET}")
    matrix = checkout(tmp_path, server.url)
    dest = tmp_path / "new" / "box"
    done = cli("fetch", KIT, "--from", "b2", "--matrix", str(matrix), "--dest", str(dest),
               env={"NINFER_KITS_B2_URL": server.url}, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "the server sends more than the archive holds" in done.stderr
    assert server.state.endless_sent < 64 << 20
    assert_nothing_left(dest)


def test_the_token_never_rides_plain_http_even_to_its_own_host() -> None:
    """An API answer (or a ledger) may name an asset URL on the API's host and port over plain
    http (`http://api.example.com:443/…`): the token stays home."""
    client = Client(token=CANARY, token_hosts=("https://api.example.com",))
    secure = client._request("https://api.example.com/repos/o/r/releases/assets/1", {})
    plain = client._request("http://api.example.com:443/repos/o/r/releases/assets/1", {})
    assert secure.unredirected_hdrs["Authorization"] == f"Bearer {CANARY}"
    assert "Authorization" not in plain.unredirected_hdrs and "Authorization" not in plain.headers


def test_a_download_of_no_recorded_size_waits_for_a_slow_extractor(
        tmp_path: Path, server: RangeServer) -> None:
    """However slow the reading side is (a loaded machine), a body of no recorded size runs at
    most `ahead` bytes past it, and the time it waits is not held against the server's pace."""
    import threading

    from ninfer_kits.fetch.download import CHUNK, Downloader, Feed, GrowingFile, HttpSource
    from ninfer_kits.fetch.http import Pace

    server.state.files["/endless"] = b"body"
    server.state.endless.add("/endless")
    ahead = 2 << 20
    feed = Feed(ahead=ahead)
    part = tmp_path / "endless.part"
    downloader = Downloader(HttpSource(Client(servers=[server.url]), f"{server.url}/endless"), part,
                            expected_size=None, sha1=False, feed=feed,
                            pace=Pace(rate=1 << 20, window=0.5))
    thread = threading.Thread(target=downloader.run, daemon=True)
    thread.start()
    worst = 0
    feed.wait_for(0)  # the part file is there
    with part.open("rb") as handle:
        reader = GrowingFile(handle.fileno(), feed)
        buffer = memoryview(bytearray(256 << 10))
        read = 0
        while read < 12 << 20:  # 48 slow reads, 1.2 s: longer than the pace's window
            read += reader.readinto(buffer)
            time.sleep(0.025)
            worst = max(worst, feed.written - read)
    downloader.limit = feed.written + (1 << 20)  # the extractor found the archive's end:
    feed.release()                                # the limit bounds the rest
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert isinstance(feed.error, Exception) and "sends more than the archive" in str(feed.error)
    assert worst <= ahead + CHUNK, worst
    # what the kernel takes in for us past what we read: both ends' socket buffers, which
    # autotuning grows up to tcp_rmem's and tcp_wmem's maxima (32 MiB on some machines)
    buffers = sum(int(Path(f"/proc/sys/net/ipv4/{name}").read_text().split()[2])
                  for name in ("tcp_rmem", "tcp_wmem"))
    assert server.state.endless_sent < read + ahead + 2 * CHUNK + buffers + (1 << 20)
