"""fetch against a hostile network: URLs from an API answer, a ledger or a kit index that name
this machine's files (or ftp://, or plain http to a host nobody named), redirects off https,
files of a --from folder that are links, FIFOs or huge, a server that drips, resets the
connection mid-body or answers Range with other bytes. Each case asserts the exit status, the
one message, no traceback, nothing changed beside DEST and nothing left in it (but the .part a
download keeps to resume from, where that is the point)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from test_fetch import (
    ASSET,
    KIT,
    TAG,
    Handler,
    RangeServer,
    checkout,
    cli,
    file_sha256,
    make_kit,
    publish_folder,
    write_ledger,
)
from test_fetch_pyz import build_pyz, run_pyz

CANARY = "ninfer-kits-environ-CANARY-7f3a"  # in fetch's environment: never in its output
SECRET = "sig-SECRET-0d9e"  # in a URL's query: never in a message


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    place = tmp_path_factory.mktemp("fetch-hostile-net")
    return publish_folder(make_kit(place / "tree", filler=1 << 20), place / "dist")


# --------------------------------------------------------------------------- a hostile server


@dataclass
class Misbehaviour:
    resets: dict[str, list[int]] = field(default_factory=dict)  # path → per request: RST after
    drips: dict[str, int] = field(default_factory=dict)  # path → bytes sent at full speed once,
    # then one byte every DRIP seconds
    drop_drips: bool = False  # a drip closes its connection after three bytes
    bad_range: int | None = None  # a Range request answered 206 from byte 0, or 416


DRIP = 0.1


class HostileHandler(Handler):
    server: HostileServer

    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        body = self.server.state.files.get(path)
        if self.headers.get("Range") and self.server.hostile.bad_range and body is not None:
            self._bad_range(path, body, self.server.hostile.bad_range)
        else:
            super().do_GET()

    def _bad_range(self, path: str, body: bytes, status: int) -> None:
        from test_fetch import Seen

        self.server.state.seen.append(Seen(path, dict(self.headers), ""))
        self.send_response(status)
        if status == 416:
            self.send_header("Content-Range", f"bytes */{len(body)}")
            body = b""
        else:  # the whole file, said to be the range asked for
            self.send_header("Content-Range", f"bytes 0-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client hung up: its right
            return

    def _send(self, data: bytes, drop: int | None) -> None:
        path = urllib.parse.urlsplit(self.path).path
        hostile = self.server.hostile
        try:
            if hostile.resets.get(path):
                self._reset(data[:hostile.resets[path].pop(0)])
            elif path in hostile.drips:
                self._drip(data, path)
            else:
                super()._send(data, drop)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _reset(self, data: bytes) -> None:
        """Part of the body, then a TCP reset (SO_LINGER 0), not a FIN."""
        self.wfile.write(data)
        self.wfile.flush()
        time.sleep(0.2)
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _drip(self, data: bytes, path: str) -> None:
        fast, self.server.hostile.drips[path] = self.server.hostile.drips[path], 0
        self.wfile.write(data[:fast])
        self.wfile.flush()
        for count, offset in enumerate(range(fast, min(len(data), fast + 300)), start=1):
            time.sleep(DRIP)
            self.wfile.write(data[offset:offset + 1])
            self.wfile.flush()
            if self.server.hostile.drop_drips and count == 3:
                break
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


class HostileServer(RangeServer):
    """RangeServer, misbehaving as `hostile` says (by default not at all); it stops in a
    twentieth of a second, not half of one."""

    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = HostileHandler
        self.hostile = Misbehaviour()
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)


@pytest.fixture
def server() -> Iterator[HostileServer]:
    """In place of conftest's RangeServer, for every test here."""
    with HostileServer() as running:
        running.thread.start()
        yield running
        running.shutdown()


# --------------------------------------------------------------------------- what must hold


@dataclass
class Around:
    """DEST in a folder of canary files: nothing there may change."""

    place: Path
    dest: Path
    before: dict[str, bytes]

    def unchanged_beside_dest(self) -> None:
        now = {name: data for name, data in snapshot(self.place).items()
               if not name.startswith(f"{self.dest.name}/") and name != self.dest.name}
        assert now == self.before

    def nothing_left(self) -> None:
        """A refused fetch into a DEST it made leaves no DEST."""
        self.unchanged_beside_dest()
        assert not self.dest.exists(), sorted(p.name for p in self.dest.iterdir())


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): b"<folder>" if path.is_dir() else path.read_bytes()
            for path in sorted(folder.rglob("*"))}


def around(tmp_path: Path) -> Around:
    place = tmp_path / "place"
    (place / "beside").mkdir(parents=True)
    (place / "canary.txt").write_text("keep me\n")
    (place / "beside" / "canary.bin").write_bytes(os.urandom(64))
    return Around(place, place / "box", snapshot(place))


def one_error(done: subprocess.CompletedProcess[str], status: int) -> str:
    """The one error line of a refused fetch (exit `status`, no traceback, no secret)."""
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr
    output = done.stdout + done.stderr
    assert CANARY not in output and SECRET not in output and "PATH=" not in output
    errors = [line for line in done.stderr.splitlines() if line.startswith("ninfer-kits: error")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def fetch(matrix: Path, dest: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest), "--index", "none",
               *more, env={"NINFER_KITS_CANARY": CANARY}, timeout=60)


def served(tmp_path: Path, release: Path, server: RangeServer) -> Path:
    """The release on `server` under /gh/, and a checkout whose ledger names it there."""
    server.add_folder(release, "/gh")
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, release, {"github": f"{server.url}/gh"})
    return matrix


# --------------------------------------------------------------------------- only http(s)

REFUSED = "refused (fetch opens https:// URLs only"


def _api_release(server: RangeServer, urls: dict[str, str]) -> None:
    """The API's release TAG (of KIT's repository), with SHA256SUMS and ASSET at `urls`."""
    listed = [{"name": name, "size": 100, "state": "uploaded", "url": url,
               "browser_download_url": url} for name, url in urls.items()]
    server.state.files[f"/repos/ninfer-kits/ninfer-kits/releases/tags/{TAG}"] = json.dumps(
        {"tag_name": TAG, "assets": listed}).encode()
    server.state.files["/sums"] = f"{'0' * 64}  {ASSET}\n".encode()


@pytest.mark.parametrize(("asset", "url", "why"), [
    ("SHA256SUMS", "/proc/self/environ", "not an https:// URL"),
    ("SHA256SUMS", "file:///proc/self/environ", "not an https:// URL"),
    ("SHA256SUMS", "/dev/zero", "not an https:// URL"),
    ("SHA256SUMS", "{fifo}", "not an https:// URL"),
    ("SHA256SUMS", "ftp://127.0.0.1:1/SHA256SUMS", "not an https:// URL"),
    ("SHA256SUMS", "data:,0000", "not an https:// URL"),
    ("SHA256SUMS", "http://localhost:{port}/sums", "plain http to localhost"),
    (ASSET, "file:///dev/zero", "not an https:// URL"),
    (ASSET, "/proc/self/environ", "not an https:// URL"),
], ids=lambda value: str(value).replace("/", "|"))
def test_an_api_url_that_is_not_https_is_refused(tmp_path: Path, server: HostileServer,
                                                 asset: str, url: str, why: str) -> None:
    """The API's browser_download_url read a local file (and printed its first line), grew
    without bound on /dev/zero, blocked on a FIFO; http is for the host --api names."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    url = url.format(fifo=fifo, port=server.server_address[1])
    _api_release(server, {"SHA256SUMS": f"{server.url}/sums", ASSET: f"{server.url}/x",
                          asset: url})
    box = around(tmp_path)
    started = time.monotonic()
    error = one_error(fetch(checkout(tmp_path, server.url), box.dest), 2)
    assert f"{url}: {why}" in error and REFUSED in error
    assert time.monotonic() - started < 30
    box.nothing_left()


@pytest.mark.parametrize("target", [
    "ftp://127.0.0.1:1/kit.tar.gz", f"file:///etc/passwd?token={SECRET}",
    f"http://localhost:{{port}}/gh/{ASSET}?sig={SECRET}"])
def test_a_redirect_off_https_is_refused(tmp_path: Path, release: Path, server: HostileServer,
                                         target: str) -> None:
    """urllib follows a redirect to ftp:// and names a file:// one raw; plain http to a host
    nobody named is refused as a first URL would be."""
    matrix = served(tmp_path, release, server)
    target = target.format(port=server.server_address[1])
    server.state.redirects[f"/gh/{ASSET}"] = target
    box = around(tmp_path)
    error = one_error(fetch(matrix, box.dest), 2)
    shown_target = target.partition("?")[0]
    assert f"{server.url}/gh/{ASSET} redirects to {shown_target}: " in error and REFUSED in error
    box.nothing_left()


@pytest.mark.parametrize("where", ["the ledger", "the kit index"])
def test_ledger_and_index_urls_must_be_https(tmp_path: Path, release: Path, server: HostileServer,
                                             where: str) -> None:
    """A ledger or kit index naming file:// or a plain-http host nobody named."""
    matrix = checkout(tmp_path, server.url)
    more: tuple[str, ...] = ()
    if where == "the ledger":
        write_ledger(matrix, release, {"github": "file:///proc/self"})
        url = "file:///proc/self/SHA256SUMS"
    else:
        from ninfer_kits.release import kitindex, ledger

        publisher = checkout(tmp_path / "publisher", server.url)
        write_ledger(publisher, release, {"github": "http://localhost:1/gh"})
        index = tmp_path / "index.json"
        index.write_bytes(kitindex.render(kitindex.document(
            ledger.read_all(publisher.parent / "releases"))))
        more, url = ("--index", str(index)), "http://localhost:1/gh/SHA256SUMS"
    box = around(tmp_path)
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(box.dest),
               *(more or ("--index", "none")), env={"NINFER_KITS_CANARY": CANARY})
    assert f"{url}: " in one_error(done, 2)
    box.nothing_left()


@pytest.mark.parametrize("case", ["SHA256SUMS links to /proc", "the tarball links to /proc",
                                  "the tarball links to a copy", "SHA256SUMS is 5 GB",
                                  "the tarball is a FIFO", "SHA256SUMS is a FIFO"])
def test_a_from_folder_gives_regular_files_only(tmp_path: Path, release: Path,
                                                case: str) -> None:
    """--from DIR, the one origin read from this machine: never through a symlink, never a
    FIFO or a device, never more than a small file's bound."""
    folder = tmp_path / "dist" / TAG
    shutil.copytree(release, folder)
    name = "SHA256SUMS" if case.startswith("SHA256SUMS") else ASSET
    path = folder / name
    path.unlink()
    if "links to /proc" in case:
        path.symlink_to("/proc/self/environ")
    elif "links to a copy" in case:
        shutil.copy(release / ASSET, tmp_path / "copy.tar.gz")
        path.symlink_to(tmp_path / "copy.tar.gz")
    elif "FIFO" in case:
        os.mkfifo(path)
    else:
        with path.open("wb") as sparse:
            sparse.truncate(5 << 30)
    box = around(tmp_path)
    done = cli("fetch", TAG, "--from", str(folder.parent), "--dest", str(box.dest), "--matrix",
               str(checkout(tmp_path, "https://api.github.com")),
               env={"NINFER_KITS_CANARY": CANARY}, timeout=60)
    error = one_error(done, 2)
    if "links" in case:
        assert f"{path}: a symbolic link; fetch --from reads regular files only" in error
    elif "5 GB" in case:
        assert f"{path}: 5368709120 bytes, larger than the 4194304 bytes" in error
    box.nothing_left()


@pytest.mark.parametrize("how", ["says so", "sends on"])
def test_a_small_file_over_http_is_bounded_before_it_is_read(
        tmp_path: Path, release: Path, server: HostileServer, how: str) -> None:
    matrix = served(tmp_path, release, server)
    server.state.files["/gh/SHA256SUMS"] = bytes(5 << 20)
    if how == "sends on":  # no Content-Length, zeros without end
        server.state.endless.add("/gh/SHA256SUMS")
    box = around(tmp_path)
    error = one_error(fetch(matrix, box.dest), 2)
    size = "5242880 bytes, larger" if how == "says so" else "larger"
    assert f"{server.url}/gh/SHA256SUMS: {size} than the 4194304 bytes" in error
    assert server.state.endless_sent < 64 << 20
    box.nothing_left()


def test_the_pyz_refuses_a_local_path_from_the_api(tmp_path: Path, server: HostileServer) -> None:
    """The zipapp runs the same fetch: one hostile case through it."""
    pyz = build_pyz(tmp_path / "ninfer-kits.pyz")
    _api_release(server, {"SHA256SUMS": "/proc/self/environ", ASSET: f"{server.url}/x"})
    box = around(tmp_path)
    done = run_pyz(pyz, "fetch", KIT, "--matrix", str(checkout(tmp_path, server.url)),
                   "--index", "none", "--dest", str(box.dest), cwd=tmp_path)
    assert "/proc/self/environ: not an https:// URL" in one_error(done, 2)
    box.nothing_left()


# --------------------------------------------------------------------------- bounded, resumable


def paced_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with a Pace of at least 1000 bytes/s over every second (the real one asks 4 KiB/s
    over every minute: too long to wait for here)."""
    script = ("import runpy, ninfer_kits.fetch.http as http; http.MIN_RATE = 1000; "
              "http.RATE_WINDOW = 1.0; runpy.run_module('ninfer_kits', run_name='__main__', "
              "alter_sys=True)")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GITHUB_TOKEN", "GH_TOKEN", "NINFER_KITS_MATRIX")}
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          check=False, env=env, timeout=60)


def _with_query(matrix: Path) -> None:
    """The ledger's tarball URL with a signed storage URL's query."""
    path = matrix.parent / "releases" / f"{TAG}.toml"
    text = path.read_text()
    assert text.count(f"/gh/{ASSET}\"") == 1
    path.write_text(text.replace(f"/gh/{ASSET}\"", f"/gh/{ASSET}?sig={SECRET}\""))


@pytest.mark.parametrize("drops", [False, True], ids=["a drip", "a drip that reconnects"])
def test_a_download_that_drips_stops_and_keeps_its_part_to_resume(
        tmp_path: Path, release: Path, server: HostileServer, drops: bool) -> None:
    """A byte every tenth of a second never trips the per-read timeout; reconnecting after
    three bytes each time must not reset the count."""
    matrix = served(tmp_path, release, server)
    _with_query(matrix)
    server.hostile.drips[f"/gh/{ASSET}"] = 64 << 10
    server.hostile.drop_drips = drops
    box = around(tmp_path)
    started = time.monotonic()
    done = paced_cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(box.dest))
    assert time.monotonic() - started < 20
    error = one_error(done, 3)
    part = box.dest / f".{ASSET}.part"
    have = part.stat().st_size
    assert f"error: {server.url}/gh/{ASSET}: too slow: " in error
    assert "under the 1000 bytes/s a download must keep up" in error
    assert f"(stopped at byte {have}; {part.name} is kept: run the same command again" in error
    assert (64 << 10) < have < (64 << 10) + 100
    box.unchanged_beside_dest()
    assert sorted(p.name for p in box.dest.iterdir()) == [part.name, f"{part.name}.sha256"]
    server.hostile.drips.clear()
    again = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(box.dest))
    assert again.returncode == 0, again.stderr
    assert f"resuming {ASSET} from byte {have}" in again.stderr
    assert server.requests_for(f"/gh/{ASSET}")[-1].headers["Range"] == f"bytes={have}-"
    assert file_sha256(box.dest / ASSET) == file_sha256(release / ASSET)


def test_a_small_file_that_drips_stops(tmp_path: Path, release: Path,
                                       server: HostileServer) -> None:
    matrix = served(tmp_path, release, server)
    server.hostile.drips["/gh/SHA256SUMS"] = 0
    box = around(tmp_path)
    error = one_error(paced_cli("fetch", KIT, "--matrix", str(matrix), "--dest",
                                str(box.dest)), 3)
    assert f"{server.url}/gh/SHA256SUMS: too slow: " in error
    box.nothing_left()


def test_a_connection_reset_mid_body_resumes_with_range(tmp_path: Path, release: Path,
                                                        server: HostileServer) -> None:
    """A TCP reset (not a FIN) lost the bytes of the read it interrupted, up to 1 MiB, and the
    resume restarted from byte 0: a read is now one recv at most."""
    matrix = served(tmp_path, release, server)
    size = (release / ASSET).stat().st_size
    server.hostile.resets[f"/gh/{ASSET}"] = [size // 2]
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(tmp_path / "box"))
    assert done.returncode == 0, done.stderr
    asked = [seen.headers.get("Range") for seen in server.requests_for(f"/gh/{ASSET}")]
    assert asked == [None, f"bytes={size // 2}-"]
    assert "downloaded, 1 reconnect)" in done.stderr
    assert file_sha256(tmp_path / "box" / ASSET) == file_sha256(release / ASSET)


def _stale_part(dest: Path, release: Path, prefix_of: Path | None = None) -> int:
    """DEST with the .part a killed fetch leaves: the first half of the tarball, or of
    `prefix_of` (another kit's tarball: bytes that unpack as well, up to where they end)."""
    data = (release / ASSET).read_bytes()
    half = len(data) // 2
    dest.mkdir(parents=True)
    (dest / f".{ASSET}.part").write_bytes((prefix_of or release / ASSET).read_bytes()[:half])
    (dest / f".{ASSET}.part.sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
    return half


@pytest.mark.parametrize("answer", [206, 416], ids=["a wrong Content-Range", "416"])
def test_a_range_the_server_will_not_answer_falls_back_to_the_whole_file(
        tmp_path: Path, release: Path, server: HostileServer, answer: int) -> None:
    """It failed every fetch into that DEST alike (exit 3), for as long as the .part was
    there."""
    matrix = served(tmp_path, release, server)
    server.hostile.bad_range = answer
    dest = tmp_path / "box"
    half = _stale_part(dest, release)
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    asked = [seen.headers.get("Range") for seen in server.requests_for(f"/gh/{ASSET}")]
    assert asked == [f"bytes={half}-", None]
    assert f"resuming {ASSET} from byte {half}" in done.stderr
    assert file_sha256(dest / ASSET) == file_sha256(release / ASSET)
    assert not [p.name for p in dest.iterdir() if p.name.startswith(".")]


def test_a_stale_part_of_other_bytes_is_deleted_not_resumed_forever(
        tmp_path: Path, release: Path, server: HostileServer) -> None:
    """The file changed on the server since the .part was written: what was there is kept
    (the extractor has read it), the rest comes whole, and the bytes do not unpack or do not
    match; either refusal deletes the .part, and the next fetch downloads the file whole."""
    matrix = served(tmp_path, release, server)
    server.hostile.bad_range = 206
    other = publish_folder(make_kit(tmp_path / "other", filler=1 << 20), tmp_path / "dist")
    dest = tmp_path / "box"
    _stale_part(dest, release, prefix_of=other / ASSET)
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    # which check sees the joined bytes first, the extractor or the sha256, is a race
    error = one_error(done, 2 if "(the download was stopped at byte" in done.stderr else 1)
    assert "checksum mismatch" in error or error.startswith(f"ninfer-kits: error: {ASSET}: ")
    assert "deleted" in error
    assert list(dest.iterdir()) == []
    again = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert again.returncode == 0, again.stderr
    assert server.requests_for(f"/gh/{ASSET}")[-1].headers.get("Range") is None
