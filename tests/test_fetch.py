"""fetch and kit-url: a kit released on a real HTTP server (Range, redirects, dropped
connections, a killed client), a dist-shaped folder, a ledger and a matrix; what must never
happen (an unchecked kit unpacked, a half file under the final name, a write outside DEST)."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import http.server
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput, CheckFailed
from ninfer_kits.fetch import locate
from ninfer_kits.fetch.download import Aborted, Feed, GrowingFile
from ninfer_kits.fetch.fetch import Fetcher
from ninfer_kits.fetch.http import Client, HttpFailure, NotFound
from ninfer_kits.kit import buildinfo, flavours, kitdir
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.log import Reporter
from ninfer_kits.pipeline.pack import pack_tree
from ninfer_kits.release import ledger
from ninfer_kits.release.checksums import SHA1, parse_sums, render_sums
from unsigned import unsigned_matrix

from tools import ROOT, tool

TAG = "v0.6.1-rtx3090-linux-sm86"  # what kit ninfer-3090-sm86 of matrix.toml renders
ASSET = "ninfer-3090-kit-v0.6.1-sm86.tar.gz"
PORTABLE = "ninfer-3090-kit-v0.6.1-sm86-portable.tar.gz"  # flavours.PORTABLE.asset(ASSET)
KIT = "ninfer-3090-sm86"
REPOSITORY = "ninfer-kits/ninfer-kits"
MTIME = 1_700_000_000


# --------------------------------------------------------------------------- a kit and a release


def kit_info(kit: str = KIT) -> BuildInfo:
    return BuildInfo(
        kit=kit, card="RTX 3090", upstream="Don-Chad/ninfer-3090",
        upstream_url="https://github.com/Don-Chad/ninfer-3090.git", tracked_ref="main",
        revision="a" * 40, version="0.6.1-rtx3090", arch="sm_86", cuda_version="",
        host_compiler="GNU 12.2.0", cmake_version="3.31.6", cmake_options="-DA=1",
        builder="local", toolchain="tc", base_image="none", base_image_digest="none",
        source_date_epoch=MTIME, pipeline_version="0.1.0", pipeline_revision="b" * 40,
        glibc_floor="2.2.5", sonames="libc.so.6", runpath="none", sass="none", ptx="none",
    )


def make_kit(folder: Path, *, filler: int = 3 << 20, needs: str | None = None,
             info: BuildInfo | None = None) -> Path:
    """folder/kit/: bin/app (C, libc only; or also `needs`, a library not shipped),
    BUILDINFO.txt (`info`, else kit_info()), LICENSE, lib/ with `filler` bytes of
    incompressible data and a symlink."""
    kit = folder / "kit"
    (kit / "bin").mkdir(parents=True)
    (kit / "lib").mkdir()
    source = folder / "app.c"
    source.write_text("int main(void) { return 0; }\n")
    command = [tool("gcc"), "-O1", "-o", str(kit / "bin" / "app"), str(source)]
    if needs:
        (folder / "n.c").write_text("int n(void) { return 1; }\n")
        subprocess.run([tool("gcc"), "-shared", "-fPIC", f"-Wl,-soname,{needs}", "-o",
                        str(folder / needs), str(folder / "n.c")], check=True)
        (folder / "app.c").write_text("int n(void);\nint main(void) { return n(); }\n")
        command += [str(folder / needs)]
    subprocess.run(command, check=True)
    (kit / "BUILDINFO.txt").write_text(buildinfo.render(info or kit_info(), with_run=False))
    (kit / "LICENSE").write_text("Apache-2.0\n")
    (kit / "lib" / "libfiller.so.1").write_bytes(os.urandom(filler))
    (kit / "lib" / "libfiller.so").symlink_to("libfiller.so.1")
    return kit


def make_portable(kit: Path) -> Path:
    """The portable flavour of make_kit's kit/, beside it (portable/kit/): a bundled library in
    kit/lib/, its copyright file in kit/third_party/, its own BUILDINFO.txt."""
    portable = kit.parent / "portable" / "kit"
    shutil.copytree(kit, portable, symlinks=True)
    library = b"bundled library bytes\n"
    (portable / "lib" / "libbundled.so.1").write_bytes(library)
    (portable / "third_party" / "libbundled1").mkdir(parents=True)
    (portable / "third_party" / "libbundled1" / "copyright").write_text("License: MIT\n")
    own = dataclasses.replace(kit_info(), flavour="portable", bundled=(
        ("libbundled.so.1", hashlib.sha256(library).hexdigest(), "libbundled1 1.0-1 (dpkg)",
         "MIT", "kit/third_party/libbundled1/copyright"),))
    (portable / "BUILDINFO.txt").write_text(buildinfo.render(own, with_run=False))
    return portable


def publish_folder(kit: Path, dist: Path, tag: str = TAG, asset: str = ASSET,
                   portable: Path | None = None, info: BuildInfo | None = None) -> Path:
    """dist/<tag>/ as `build` writes it: tarball, BUILDINFO.txt (`info`, else kit_info()),
    SHA256SUMS, SHA1SUMS, build.log; with `portable` (a kit/ tree, make_portable) also the
    portable sibling."""
    folder = dist / tag
    folder.mkdir(parents=True)
    packed = {asset: pack_tree(kit, folder / asset, mtime=MTIME)}
    info = info or kit_info()
    if portable is not None:
        sibling = flavours.PORTABLE.asset(asset)
        packed[sibling] = pack_tree(portable, folder / sibling, mtime=MTIME)
        info = dataclasses.replace(info, flavour_assets=(("portable", sibling),))
    text = buildinfo.render(info, with_run=True).encode()
    (folder / "BUILDINFO.txt").write_bytes(text)
    sums = {name: file.sha256 for name, file in packed.items()}
    sums["BUILDINFO.txt"] = hashlib.sha256(text).hexdigest()
    (folder / "SHA256SUMS").write_text("".join(f"{sums[n]}  {n}\n" for n in sorted(sums)))
    (folder / "SHA1SUMS").write_text(render_sums(
        {name: file.sha1 for name, file in packed.items()}, SHA1))
    (folder / "build.log").write_text("built\n")
    return folder


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/<TAG>/ of a small kit (about 3 MB)."""
    place = tmp_path_factory.mktemp("fetch-release")
    return publish_folder(make_kit(place / "tree"), place / "dist")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/<TAG>/ of a small kit with its portable sibling."""
    place = tmp_path_factory.mktemp("fetch-pair")
    kit = make_kit(place / "tree", filler=1 << 20)
    folder = publish_folder(kit, place / "dist", portable=make_portable(kit))
    assert kitdir.read_kit_dir(folder).portable is not None  # the kit folder contract
    return folder


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- a real HTTP server


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    host: str


@dataclass
class ServerState:
    files: dict[str, bytes] = field(default_factory=dict)  # URL path → body
    redirects: dict[str, str] = field(default_factory=dict)  # URL path → Location
    drops: dict[str, list[int]] = field(default_factory=dict)  # path → per request: drop after
    corrupt: dict[str, int] = field(default_factory=dict)  # path → offset of a flipped byte
    status: dict[str, list[int]] = field(default_factory=dict)  # path → statuses to answer first
    ignore_range: bool = False
    rate: int = 0  # bytes per second of a body (0: as fast as possible)
    endless: set[str] = field(default_factory=set)  # paths: the body, then zeros without end,
    # with no Content-Length (until the client hangs up)
    retry_after: str = "0"  # what a 429 or 403 says in Retry-After
    seen: list[Seen] = field(default_factory=list)
    endless_sent: int = 0  # bytes of zeros sent after an endless body


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RangeServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        state = self.server.state
        path = urllib.parse.urlsplit(self.path).path
        state.seen.append(Seen(path, dict(self.headers), self.headers.get("Host", "")))
        if state.status.get(path):
            code = state.status[path].pop(0)
            self.send_response(code)
            if code in (429, 403):
                self.send_header("Retry-After", state.retry_after)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path in state.redirects:
            self.send_response(302)
            self.send_header("Location", state.redirects[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = state.files.get(path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path in state.endless:
            self._endless(body)
            return
        if path in state.corrupt:
            spot = state.corrupt[path]
            body = body[:spot] + bytes([body[spot] ^ 0xFF]) + body[spot + 1:]
        start = 0
        wanted = self.headers.get("Range", "")
        if wanted.startswith("bytes=") and wanted.endswith("-") and not state.ignore_range:
            start = int(wanted[6:-1])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        drop = state.drops[path].pop(0) if state.drops.get(path) else None
        self._send(body[start:], drop)

    def _endless(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        zeros = bytes(64 << 10)
        try:
            self.wfile.write(body)
            while True:
                self.wfile.write(zeros)
                self.server.state.endless_sent += len(zeros)
        except OSError:
            return

    def _send(self, data: bytes, drop: int | None) -> None:
        limit = len(data) if drop is None else min(drop, len(data))
        step = 64 << 10
        try:
            for offset in range(0, limit, step):
                self.wfile.write(data[offset:min(offset + step, limit)])
                if self.server.state.rate:
                    time.sleep(step / self.server.state.rate)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        if drop is not None:  # the connection dies mid-body
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)


class RangeServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = ServerState()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def add_folder(self, folder: Path, prefix: str) -> None:
        for path in folder.iterdir():
            if path.is_file():
                self.state.files[f"{prefix}/{path.name}"] = path.read_bytes()

    def requests_for(self, path: str) -> list[Seen]:
        return [seen for seen in self.state.seen if seen.path == path]


# --------------------------------------------------------------------------- matrix and ledger


def checkout(tmp: Path, api: str, repository: str = REPOSITORY) -> Path:
    """A matrix.toml like the repository's, whose [publish.github] points at `api`, with an
    empty releases/ beside it."""
    text = (ROOT / "matrix.toml").read_text()
    head, _, _ = text.partition("\n[publish]")
    folder = tmp / "checkout"
    (folder / "releases").mkdir(parents=True)
    (folder / "matrix.toml").write_text(
        f"{head}\n[publish]\nledger = \"commit\"\n\n[publish.github]\n"
        f"repository = \"{repository}\"\napi = \"{api}\"\n\n[publish.b2]\n"
        f"bucket = \"ninfer-kits\"\nprefix = \"kits/\"\n")
    return folder / "matrix.toml"


def write_ledger(matrix: Path, release: Path, urls: dict[str, str], *, tag: str = TAG,
                 kit: str = KIT, time: str = "2026-11-30T08:00:00+00:00",
                 sha256: str | None = None, sha1: str | None = None) -> Path:
    """releases/<tag>.toml as publish writes it (its own renderer): each asset of the release
    folder with its size, hashes and a URL per store (`urls`: store → folder URL)."""
    assets = []
    for path in sorted(release.iterdir()):
        if path.name == "build.log":
            continue
        data = path.read_bytes()
        digest = sha256 if sha256 and path.name.endswith(".tar.gz") else \
            hashlib.sha256(data).hexdigest()
        assets.append(ledger.LedgerAsset(
            name=path.name, size=len(data), sha256=digest,
            sha1=sha1 if sha1 and path.name.endswith(".tar.gz") else
            hashlib.sha1(data).hexdigest(),
            urls=tuple((store, f"{base}/{path.name}") for store, base in urls.items())))
    stores = tuple(ledger.LedgerStore(
        name=store, location=base,
        details=(("repository", REPOSITORY),) if store == "github" else ())
        for store, base in urls.items())
    tarballs = [a for a in assets if a.name.endswith(".tar.gz")]
    plain = next(a for a in tarballs if not a.name.endswith("-portable.tar.gz"))
    portable = next((a for a in tarballs if a.name == flavours.PORTABLE.asset(plain.name)), None)
    entry = ledger.LedgerEntry(
        tag=tag, kit=kit, card="RTX 3090", upstream="Don-Chad/ninfer-3090",
        upstream_url="https://github.com/Don-Chad/ninfer-3090.git", revision="a" * 40,
        version="0.6.1-rtx3090", arch="sm_86", cuda_version="", toolchain="tc",
        asset=plain.name, published_at=datetime.datetime.fromisoformat(time), stores=stores,
        assets=tuple(assets), floor=(("x86-64 Linux, glibc ≥ 2.34", "GLIBC_2.34"),),
        tarballs=(ledger.LedgerTarball(flavour="portable", asset=portable.name,
                                       sha256=portable.sha256, size=portable.size),)
        if portable else ())
    path = ledger.path_for(matrix.parent / "releases", tag)
    ledger.write(path, entry)
    return path


def ctx_for(matrix: Path) -> locate.Context:
    return locate.context(matrix)


def quiet() -> Reporter:
    return Reporter(io.StringIO(), mode="plain")


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("GITHUB_TOKEN", "GH_TOKEN", "NINFER_KITS_MATRIX")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "ninfer_kits", *args], capture_output=True,
                          text=True, check=False, cwd=cwd, env=environment, timeout=timeout)


def leftovers(dest: Path) -> list[str]:
    """Anything fetch leaves in DEST besides the finished files (a failed fetch into a DEST it
    made leaves no DEST)."""
    if not dest.exists():
        return []
    return sorted(p.name for p in dest.iterdir() if p.name.startswith("."))


# --------------------------------------------------------------------------- fetch: the good path


def test_fetch_from_a_dist_folder_unpacks_checks_and_verifies(tmp_path: Path,
                                                               release: Path) -> None:
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--from", str(release.parent), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    assert done.returncode == 0, done.stderr
    assert (dest / "kit" / "bin" / "app").is_file()
    assert os.access(dest / "kit" / "bin" / "app", os.X_OK)
    assert os.readlink(dest / "kit" / "lib" / "libfiller.so") == "libfiller.so.1"
    assert file_sha256(dest / ASSET) == file_sha256(release / ASSET)
    for name in ("SHA256SUMS", "SHA1SUMS", "BUILDINFO.txt"):
        assert (dest / name).read_bytes() == (release / name).read_bytes()
    assert not (dest / "build.log").exists() and leftovers(dest) == []
    # `sha256sum -c SHA256SUMS` works in DEST, as the release notes say
    assert subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dest, capture_output=True,
                          check=False).returncode == 0
    # verify's table follows, on stdout; the exit status is verify's on the same folder
    assert "| Requirement" in done.stdout and "SHA256SUMS ok" in done.stdout
    again = cli("verify", str(dest), "--matrix", str(unsigned_matrix()))
    assert again.returncode == done.returncode == 0
    assert f"release   folder {release}" in done.stderr


def test_fetch_by_kit_name_over_http_from_the_ledger(tmp_path: Path, release: Path,
                                                    server: RangeServer) -> None:
    server.add_folder(release, "/gh")
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, release, {"github": f"{server.url}/gh", "b2": f"{server.url}/b2"})
    dest = tmp_path / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    assert file_sha256(dest / ASSET) == file_sha256(release / ASSET)
    assert [s.path for s in server.state.seen if s.path.endswith(ASSET)] == [f"/gh/{ASSET}"]
    assert "SHA256SUMS ok, SHA1SUMS ok, the ledger agrees" in done.stderr
    # no API call: the ledger named every URL
    assert not any(s.path.startswith("/repos/") for s in server.state.seen)


def test_fetch_from_b2_urls_of_the_ledger(tmp_path: Path, release: Path,
                                          server: RangeServer) -> None:
    server.add_folder(release, "/file/ninfer-kits/kits/" + TAG)
    matrix = checkout(tmp_path, server.url)
    base = f"{server.url}/file/ninfer-kits/kits/{TAG}"
    write_ledger(matrix, release, {"github": f"{server.url}/nothing-here", "b2": base})
    done = cli("fetch", TAG, "--from", "b2", "--matrix", str(matrix), "--dest",
               str(tmp_path / "box"))
    assert done.returncode == 0, done.stderr
    assert not any(s.path.startswith("/nothing-here") for s in server.state.seen)


def test_exit_status_is_verifys(tmp_path: Path) -> None:
    """A kit that needs a library this host lacks: fetched fine, verify says it will not run
    here (exit 4, not 1: nothing was refused)."""
    folder = publish_folder(make_kit(tmp_path / "tree", filler=1000,
                                     needs="libninfer-kits-absent.so.1"), tmp_path / "dist")
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--from", str(folder.parent), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    assert done.returncode == 4, done.stderr
    assert "libninfer-kits-absent.so.1" in done.stdout and "missing" in done.stdout
    assert (dest / "kit" / "bin" / "app").is_file()  # fetched and checked: it is the host
    assert cli("verify", str(dest), "--matrix", str(unsigned_matrix())).returncode == 4


def test_a_second_fetch_reuses_the_checked_tarball_and_replaces_the_kit(
        tmp_path: Path, release: Path, server: RangeServer) -> None:
    server.add_folder(release, "/gh")
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, release, {"github": f"{server.url}/gh"})
    dest = tmp_path / "box"
    assert cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest)).returncode == 0
    (dest / "kit" / "stray").write_text("left by hand")
    again = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert again.returncode == 0, again.stderr
    assert "already here, checked" in again.stderr
    assert len(server.requests_for(f"/gh/{ASSET}")) == 1
    assert not (dest / "kit" / "stray").exists() and leftovers(dest) == []


def test_a_folder_named_kit_that_is_not_a_kit_is_not_replaced(tmp_path: Path,
                                                             release: Path) -> None:
    dest = tmp_path / "box"
    (dest / "kit").mkdir(parents=True)
    (dest / "kit" / "mine.txt").write_text("keep me")
    done = cli("fetch", TAG, "--from", str(release.parent), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    assert done.returncode == 2 and "is not a kit" in done.stderr
    assert (dest / "kit" / "mine.txt").read_text() == "keep me"
    assert not (dest / ASSET).exists()


# --------------------------------------------------------------------------- --portable


def test_fetch_portable_from_a_dist_folder_unpacks_the_portable_kit(tmp_path: Path,
                                                                   pair: Path) -> None:
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--portable", "--from", str(pair.parent), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    assert done.returncode == 0, done.stderr
    assert file_sha256(dest / PORTABLE) == file_sha256(pair / PORTABLE)
    assert not (dest / ASSET).exists()
    assert (dest / "kit" / "lib" / "libbundled.so.1").is_file()
    assert (dest / "kit" / "third_party" / "libbundled1" / "copyright").is_file()
    inner = buildinfo.read(dest / "kit" / "BUILDINFO.txt")
    assert inner.flavour == "portable" and inner.bundled[0][0] == "libbundled.so.1"
    assert buildinfo.read(dest / "BUILDINFO.txt").asset_of("portable") == PORTABLE
    assert "SHA256SUMS ok, SHA1SUMS ok" in done.stderr
    assert f"tarball   {dest / PORTABLE}" in done.stderr
    assert leftovers(dest) == []
    # SHA256SUMS and SHA1SUMS list both tarballs; DEST holds one of them
    for tool_name, sums in (("sha256sum", "SHA256SUMS"), ("sha1sum", "SHA1SUMS")):
        assert subprocess.run([tool_name, "-c", "--ignore-missing", sums], cwd=dest,
                              capture_output=True, check=False).returncode == 0
    assert cli("verify", str(dest), "--matrix", str(unsigned_matrix())).returncode == \
        done.returncode == 0


def test_fetch_without_portable_takes_the_plain_kit_of_a_pair(tmp_path: Path,
                                                             pair: Path) -> None:
    """A tag nothing records, named as a tag: the plain tarball is told from its sibling by
    pairing, not by which one is listed first (and bound to the tag by the matrix after)."""
    other = tmp_path / "dist" / TAG
    shutil.copytree(pair, other)
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--from", str(other.parent), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    assert done.returncode == 0, done.stderr
    assert (dest / ASSET).is_file() and not (dest / PORTABLE).exists()
    assert not (dest / "kit" / "third_party").exists()
    portable = cli("fetch", TAG, "--portable", "--from", str(other.parent), "--dest",
                   str(tmp_path / "box2"), "--matrix", str(unsigned_matrix()))
    assert portable.returncode == 0, portable.stderr
    assert (tmp_path / "box2" / "kit" / "third_party").is_dir()


def test_fetch_portable_over_http_checks_its_hash(tmp_path: Path, pair: Path,
                                                  server: RangeServer) -> None:
    server.add_folder(pair, "/gh")
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, pair, {"github": f"{server.url}/gh"})
    entry = ledger.read(matrix.parent / "releases" / f"{TAG}.toml")
    assert entry.tarball_of("portable").asset == PORTABLE
    server.state.corrupt[f"/gh/{PORTABLE}"] = (pair / PORTABLE).stat().st_size // 2
    dest = tmp_path / "box"
    bad = cli("fetch", KIT, "--portable", "--matrix", str(matrix), "--dest", str(dest))
    assert bad.returncode == 1, bad.stderr
    assert f"{PORTABLE} from" in bad.stderr and "checksum mismatch" in bad.stderr
    assert not (dest / "kit").exists() and not (dest / PORTABLE).exists()
    assert leftovers(dest) == []
    del server.state.corrupt[f"/gh/{PORTABLE}"]
    done = cli("fetch", KIT, "--portable", "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    assert "SHA256SUMS ok, SHA1SUMS ok, the ledger agrees" in done.stderr
    assert file_sha256(dest / PORTABLE) == file_sha256(pair / PORTABLE)
    assert server.requests_for(f"/gh/{ASSET}") == []  # only the portable tarball came
    assert (dest / "kit" / "lib" / "libbundled.so.1").is_file()


def test_fetch_portable_resumes_a_dropped_download(tmp_path: Path, pair: Path,
                                                   server: RangeServer) -> None:
    size = (pair / PORTABLE).stat().st_size
    server.add_folder(pair, "/gh")
    server.state.drops[f"/gh/{PORTABLE}"] = [size // 3]
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, pair, {"github": f"{server.url}/gh"})
    done = cli("fetch", KIT, "--portable", "--matrix", str(matrix), "--dest",
               str(tmp_path / "box"))
    assert done.returncode == 0, done.stderr
    asked = [s.headers.get("Range") for s in server.requests_for(f"/gh/{PORTABLE}")]
    assert asked == [None, f"bytes={size // 3}-"] and "1 reconnect" in done.stderr


def test_portable_of_a_release_without_one_is_bad_input_naming_it(
        tmp_path: Path, release: Path, server: RangeServer) -> None:
    # a folder
    done = cli("fetch", TAG, "--portable", "--from", str(release.parent), "--dest",
               str(tmp_path / "box"), "--matrix", str(unsigned_matrix()))
    assert done.returncode == 2, done.stderr
    assert f"error: release {TAG} has no portable kit" in done.stderr
    assert f"no {PORTABLE} among its files" in done.stderr
    assert not (tmp_path / "box" / "kit").exists()
    # the ledger
    server.add_folder(release, "/gh")
    matrix = checkout(tmp_path, server.url)
    recorded = write_ledger(matrix, release, {"github": f"{server.url}/gh"})
    for command in ("fetch", "kit-url"):
        done = cli(command, KIT, "--portable", "--matrix", str(matrix), "--dest" if
                   command == "fetch" else "--from", str(tmp_path / "box") if
                   command == "fetch" else "github")
        assert done.returncode == 2, done.stderr
        assert f"release {TAG} has no portable kit" in done.stderr
        assert f"the ledger {recorded} records none" in done.stderr
        assert "Traceback" not in done.stderr
    assert not any(s.path.endswith(".tar.gz") for s in server.state.seen)


def test_kit_url_portable(tmp_path: Path, pair: Path) -> None:
    matrix = checkout(tmp_path, "https://api.github.com")
    portable = 'asset = "ninfer-3090-kit-v{version_core}-{arch_id}.tar.gz"\nportable = true\n'
    text = matrix.read_text()
    assert portable in text  # matrix.toml builds the 3090 kit portable
    # no ledger, a kit the matrix does not build portable
    matrix.write_text(text.replace(portable, portable.removesuffix("portable = true\n")))
    done = cli("kit-url", KIT, "--portable", "--matrix", str(matrix))
    assert done.returncode == 2
    assert (f"release {TAG} has no portable kit (GitHub {REPOSITORY} release {TAG}: kit {KIT} "
            f"is not built portable") in done.stderr
    # no ledger, the matrix builds it portable: the URL by the pattern
    matrix.write_text(text)
    done = cli("kit-url", KIT, "--portable", "--matrix", str(matrix))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"https://github.com/{REPOSITORY}/releases/download/{TAG}/{PORTABLE}\n"
    every = cli("kit-url", KIT, "--all", "--matrix", str(matrix)).stdout.splitlines()
    assert every[0].endswith(f"/{ASSET}") and any(u.endswith(f"/{PORTABLE}") for u in every)
    b2 = cli("kit-url", KIT, "--portable", "--from", "b2", "--matrix", str(matrix),
             env={"NINFER_KITS_B2_URL": "https://f001.backblazeb2.com"})
    assert b2.stdout == f"https://f001.backblazeb2.com/file/ninfer-kits/kits/{TAG}/{PORTABLE}\n"
    # the ledger
    write_ledger(matrix, pair, {"github": "https://example.invalid/gh"})
    done = cli("kit-url", KIT, "--portable", "--matrix", str(matrix))
    assert done.stdout == f"https://example.invalid/gh/{PORTABLE}\n"
    assert cli("kit-url", KIT, "--matrix", str(matrix)).stdout == \
        f"https://example.invalid/gh/{ASSET}\n"
    listed = cli("kit-url", KIT, "--all", "--portable", "--matrix", str(matrix)).stdout
    assert listed.splitlines()[0] == f"https://example.invalid/gh/{PORTABLE}"


# --------------------------------------------------------------------------- resuming


def test_a_connection_dropped_mid_body_is_resumed_with_range(tmp_path: Path, release: Path,
                                                            server: RangeServer) -> None:
    size = (release / ASSET).stat().st_size
    server.add_folder(release, "/gh")
    server.state.drops[f"/gh/{ASSET}"] = [size * 2 // 5, size * 3 // 4 - size * 2 // 5]
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, release, {"github": f"{server.url}/gh"})
    dest = tmp_path / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    asked = [s.headers.get("Range") for s in server.requests_for(f"/gh/{ASSET}")]
    assert asked == [None, f"bytes={size * 2 // 5}-", f"bytes={size * 3 // 4}-"]
    assert "2 reconnects" in done.stderr
    assert file_sha256(dest / ASSET) == file_sha256(release / ASSET)


def _kill_when_part_grows(process: subprocess.Popen[str], part: Path, at_least: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if part.is_file() and part.stat().st_size >= at_least:
            process.send_signal(signal.SIGKILL)
            process.wait()
            return part.stat().st_size
        if process.poll() is not None:
            raise AssertionError(f"fetch ended before it could be killed: {process.returncode}")
        time.sleep(0.01)
    process.kill()
    raise AssertionError("the download did not grow")


@pytest.mark.parametrize("ignore_range", [False, True])
def test_a_killed_fetch_resumes_where_it_stopped(tmp_path: Path, server: RangeServer,
                                                 ignore_range: bool) -> None:
    folder = publish_folder(make_kit(tmp_path / "tree", filler=8 << 20), tmp_path / "dist")
    server.add_folder(folder, "/gh")
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, folder, {"github": f"{server.url}/gh"})
    dest = tmp_path / "box"
    server.state.rate = 8 << 20  # a second or so for the whole tarball
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN")}
    process = subprocess.Popen([sys.executable, "-m", "ninfer_kits", "fetch", KIT, "--matrix",
                                str(matrix), "--dest", str(dest)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    part = dest / f".{ASSET}.part"
    had = _kill_when_part_grows(process, part, 2 << 20)
    assert not (dest / ASSET).exists() and not (dest / "kit").exists()
    server.state.rate = 0
    server.state.ignore_range = ignore_range
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    last = server.requests_for(f"/gh/{ASSET}")[-1]
    assert last.headers.get("Range") == f"bytes={had}-"
    assert f"resuming {ASSET} from byte {had}" in done.stderr
    assert file_sha256(dest / ASSET) == file_sha256(folder / ASSET)
    assert leftovers(dest) == []
    # the killed run's staging folder went with it; nothing but the finished files is left
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        ["kit", ASSET, "SHA256SUMS", "SHA1SUMS", "BUILDINFO.txt"])


def test_a_part_file_meant_for_other_bytes_is_not_resumed(tmp_path: Path, release: Path,
                                                         server: RangeServer) -> None:
    server.add_folder(release, "/gh")
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, release, {"github": f"{server.url}/gh"})
    dest = tmp_path / "box"
    dest.mkdir()
    (dest / f".{ASSET}.part").write_bytes(b"x" * 1000)
    (dest / f".{ASSET}.part.sha256").write_text("0" * 64 + "\n")
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 0, done.stderr
    assert server.requests_for(f"/gh/{ASSET}")[0].headers.get("Range") is None


# --------------------------------------------------------------------------- checksums


def _served(tmp_path: Path, release: Path, server: RangeServer) -> tuple[Path, Path]:
    copy = tmp_path / "served"
    shutil.copytree(release, copy)
    server.add_folder(copy, "/gh")
    matrix = checkout(tmp_path, server.url)
    return matrix, copy


def _nothing_unpacked(dest: Path) -> None:
    assert not (dest / "kit").exists()
    assert not (dest / ASSET).exists()
    assert leftovers(dest) == []  # no .part, no staging folder


def test_a_corrupted_download_leaves_nothing(tmp_path: Path, release: Path,
                                             server: RangeServer) -> None:
    matrix, copy = _served(tmp_path, release, server)
    write_ledger(matrix, copy, {"github": f"{server.url}/gh"})
    server.state.corrupt[f"/gh/{ASSET}"] = (copy / ASSET).stat().st_size // 2
    dest = tmp_path / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 1, done.stderr
    assert "checksum mismatch" in done.stderr and "nothing was unpacked" in done.stderr
    _nothing_unpacked(dest)


def test_a_download_whose_gzip_crc_is_wrong_is_refused_by_its_sha256(
        tmp_path: Path, release: Path, server: RangeServer) -> None:
    """fetch leaves gzip's CRC-32 unchecked while it unpacks (the download's sha256 covers every
    byte): a flipped CRC, with deflate data that still inflates, must still place nothing."""
    matrix, copy = _served(tmp_path, release, server)
    write_ledger(matrix, copy, {"github": f"{server.url}/gh"})
    inflate = zlib.decompressobj(31)
    inflate.decompress((copy / ASSET).read_bytes())
    first_member_end = (copy / ASSET).stat().st_size - len(inflate.unused_data)
    server.state.corrupt[f"/gh/{ASSET}"] = first_member_end - 8  # the first member's CRC-32
    dest = tmp_path / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 1, done.stderr
    assert "checksum mismatch" in done.stderr and "nothing was unpacked" in done.stderr
    _nothing_unpacked(dest)


def test_sha256sums_that_disagree_with_the_tarball(tmp_path: Path, release: Path) -> None:
    copy = tmp_path / "dist" / TAG
    shutil.copytree(release, copy)
    sums = copy / "SHA256SUMS"
    sums.write_bytes(sums.read_bytes().replace(file_sha256(copy / ASSET).encode(), b"f" * 64))
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--from", str(copy), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    assert done.returncode == 1 and "checksum mismatch" in done.stderr, done.stderr
    _nothing_unpacked(dest)


@pytest.mark.parametrize("case", ["no SHA256SUMS", "not listed", "ledger disagrees",
                                  "SHA1SUMS disagrees", "ledger's sha1 disagrees",
                                  "BUILDINFO.txt altered"])
def test_checksums_cannot_be_skipped(tmp_path: Path, release: Path, server: RangeServer,
                                     case: str) -> None:
    matrix, copy = _served(tmp_path, release, server)
    ledger_sha = None
    if case == "no SHA256SUMS":
        del server.state.files["/gh/SHA256SUMS"]
    elif case == "not listed":
        server.state.files["/gh/SHA256SUMS"] = b"".join(
            line + b"\n" for line in (copy / "SHA256SUMS").read_bytes().splitlines()
            if ASSET.encode() not in line)
    elif case == "ledger disagrees":
        ledger_sha = "e" * 64
    elif case == "SHA1SUMS disagrees":
        server.state.files["/gh/SHA1SUMS"] = f"{'0' * 40}  {ASSET}\n".encode()
    elif case == "ledger's sha1 disagrees":  # and no SHA1SUMS: the downloaded bytes' sha1
        del server.state.files["/gh/SHA1SUMS"]
    else:
        server.state.files["/gh/BUILDINFO.txt"] += b"# one more line\n"
    write_ledger(matrix, copy, {"github": f"{server.url}/gh"}, sha256=ledger_sha,
                 sha1="0" * 40 if case == "ledger's sha1 disagrees" else None)
    dest = tmp_path / "box"
    done = cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest))
    assert done.returncode == 1, done.stderr
    _nothing_unpacked(dest)
    # the one way out is the signature's, and it says what it is; the checksums have none
    options = cli("fetch", "--help").stdout.replace("--insecure-no-signature", "")
    assert "--no-" not in options and "--insecure" not in options and "--skip" not in options


# --------------------------------------------------------------------------- unsafe archives


def _tarball(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"",
            link: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755
    info.linkname = link
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


def _release_of(tmp_path: Path, data: bytes) -> Path:
    folder = tmp_path / "dist" / TAG
    folder.mkdir(parents=True)
    (folder / ASSET).write_bytes(data)
    (folder / "SHA256SUMS").write_text(f"{hashlib.sha256(data).hexdigest()}  {ASSET}\n")
    return folder


@pytest.mark.parametrize(("members", "words"), [
    ([_member("kit/", tarfile.DIRTYPE), _member("kit/t", tarfile.SYMTYPE, link="."),
      _member("kit/s", tarfile.SYMTYPE, link="t/../.."),
      _member("kit/s/escaped", data=b"out")], "resolves outside the folder"),
    ([_member("kit/", tarfile.DIRTYPE), _member("kit/up", tarfile.SYMTYPE, link=".."),
      _member("kit/up/x", data=b"x")], "nothing is written through a link"),
    ([_member("kit/a", data=b"a"), _member("elsewhere/b", data=b"b")], "outside kit/"),
    ([_member("../kit/a", data=b"a")], "'..'"),
    ([_member("/kit/a", data=b"a")], "absolute"),
    ([_member("kit/l", tarfile.SYMTYPE, link="/etc/passwd")], "outside the archive"),
    ([_member("kit/h", tarfile.LNKTYPE, link="/etc/passwd")], "hardlink"),
    ([_member("kit/fifo", tarfile.FIFOTYPE)], "FIFO"),
    ([_member("kit/a", data=b"a"), _member("kit/a", data=b"b")], "twice"),
    ([_member("kit/a", data=b"a"), _member("kit/a/b", data=b"b")], "is a file"),
])
def test_unsafe_archives_are_refused_and_leave_nothing(
        tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]],
        words: str) -> None:
    folder = _release_of(tmp_path, _tarball(members))
    dest = tmp_path / "inside" / "box"
    done = cli("fetch", TAG, "--from", str(folder.parent), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    assert done.returncode == 2, done.stderr
    assert words in done.stderr
    assert not (tmp_path / "inside").exists()  # the fetch made DEST (and inside/): both gone


def test_setuid_and_group_write_bits_are_dropped(tmp_path: Path) -> None:
    info, data = _member("kit/bin/app", data=b"#!/bin/sh\n")
    info.mode = 0o6777
    text = buildinfo.render(kit_info(), with_run=False).encode()
    folder = _release_of(tmp_path, _tarball([(info, data),
                                             _member("kit/BUILDINFO.txt", data=text)]))
    release = locate.locate(TAG, str(folder.parent), ctx_for(ROOT / "matrix.toml"))
    Fetcher(Client(), quiet()).fetch(release, tmp_path / "box")
    assert (tmp_path / "box" / "kit" / "bin" / "app").stat().st_mode & 0o7777 == 0o755


# --------------------------------------------------------------------------- the parts


def test_growing_file_waits_for_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "f"
    feed = Feed()
    fd_w = os.open(path, os.O_WRONLY | os.O_CREAT)
    fd_r = os.open(path, os.O_RDONLY)
    reader = io.BufferedReader(GrowingFile(fd_r, feed))
    got: list[bytes] = []
    thread = threading.Thread(target=lambda: got.append(reader.read()))
    thread.start()
    for part in (b"abc", b"defg"):
        time.sleep(0.05)
        os.write(fd_w, part)
        feed.advance(len(part))
    assert thread.is_alive()  # not finished: it waits for more
    feed.finish()
    thread.join(5)
    assert got == [b"abcdefg"]
    failed = Feed()
    failed.finish(OSError("boom"))
    with pytest.raises(Aborted):
        GrowingFile(fd_r, failed).read(1)
    os.close(fd_w)
    os.close(fd_r)


def test_parse_sums() -> None:
    text = f"{'A' * 64}  name.tar.gz\n{'b' * 64} *BUILDINFO.txt\n\n"
    assert parse_sums(text, 64, "x") == {"name.tar.gz": "a" * 64, "BUILDINFO.txt": "b" * 64}
    with pytest.raises(CheckFailed, match="x:1: not a checksum line"):
        parse_sums("abc  name\n", 64, "x")


def test_the_token_goes_to_the_api_host_only_and_never_across_a_redirect(
        server: RangeServer) -> None:
    with RangeServer() as storage:
        storage.thread.start()
        storage.state.files["/blob"] = b"data"
        server.state.redirects["/repos/o/r/releases/assets/1"] = f"{storage.url}/blob?sig=s3cr"
        client = Client(token="canary-token-123", token_hosts=(server.url,),
                        servers=(server.url,))
        assert client.get_bytes(f"{server.url}/repos/o/r/releases/assets/1",
                                accept="application/octet-stream") == b"data"
        assert server.state.seen[0].headers["Authorization"] == "Bearer canary-token-123"
        assert "Authorization" not in storage.state.seen[0].headers
        client.get_bytes(f"{storage.url}/blob")
        assert "Authorization" not in storage.state.seen[1].headers
        storage.shutdown()


def test_retries_on_5xx_and_rate_limits_then_gives_up(server: RangeServer) -> None:
    waits: list[float] = []
    client = Client(attempts=3, sleep=waits.append, servers=(server.url,))
    server.state.files["/f"] = b"ok"
    server.state.status["/f"] = [503, 429]
    assert client.get_bytes(f"{server.url}/f") == b"ok"
    assert waits == [0.5, 0.0]  # backoff, then Retry-After: 0
    server.state.status["/f"] = [502, 502, 502]
    with pytest.raises(HttpFailure, match=r"HTTP 502 .*after 3 attempts"):
        client.get_bytes(f"{server.url}/f")
    with pytest.raises(NotFound):
        client.get_bytes(f"{server.url}/missing")
    server.state.status["/f"] = [401]
    with pytest.raises(HttpFailure, match="set GITHUB_TOKEN or GH_TOKEN"):
        client.get_bytes(f"{server.url}/f")


def test_a_dead_server_is_the_environments_failure(tmp_path: Path, release: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    matrix = checkout(tmp_path, f"http://127.0.0.1:{port}")
    write_ledger(matrix, release, {"github": f"http://127.0.0.1:{port}/gh"})
    client = Client(attempts=2, sleep=lambda _: None, servers=(f"http://127.0.0.1:{port}",))
    located = locate.locate(KIT, "github", ctx_for(matrix), client)
    with pytest.raises(HttpFailure, match="refused"):
        Fetcher(client, quiet()).fetch(located, tmp_path / "box")


def test_progress_is_a_live_line_on_a_terminal_and_plain_lines_elsewhere(
        tmp_path: Path, release: Path, server: RangeServer) -> None:
    server.add_folder(release, "/gh")
    matrix = checkout(tmp_path, server.url)
    write_ledger(matrix, release, {"github": f"{server.url}/gh"})
    for mode in ("tty", "plain"):
        stream = io.StringIO()
        client = Client(servers=(server.url,))
        located = locate.locate(KIT, "github", ctx_for(matrix), client)
        Fetcher(client, Reporter(stream, mode=mode)).fetch(located, tmp_path / mode)
        text = stream.getvalue()
        assert f"downloaded {ASSET}" in text
        if mode == "tty":
            assert f"\r\033[Kdownloading {ASSET}" in text and " MB " in text
        else:
            assert "\r" not in text and "\033" not in text


# --------------------------------------------------------------------------- kit-url


def test_kit_url_from_the_ledger_and_from_the_matrix(tmp_path: Path, release: Path) -> None:
    matrix = checkout(tmp_path, "https://api.github.com")
    done = cli("kit-url", KIT, "--matrix", str(matrix))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"https://github.com/{REPOSITORY}/releases/download/{TAG}/"
                           f"{ASSET}\n")
    assert "not in the ledger" in done.stderr
    seed = cli("kit-url", "ninfer-sm120a", "--matrix", str(matrix))
    assert seed.stdout.strip().endswith(
        "/releases/download/rtx5090-linux-sm120a-feaf4dd0/"
        "ninfer-5090-kit-feaf4dd0983f-sm120a.tar.gz")
    b2 = "https://f004.backblazeb2.com/file/ninfer-kits/kits/" + TAG
    write_ledger(matrix, release, {"github": "https://example.invalid/gh", "b2": b2})
    assert cli("kit-url", KIT, "--matrix", str(matrix)).stdout == \
        f"https://example.invalid/gh/{ASSET}\n"
    assert cli("kit-url", TAG, "--from", "b2", "--matrix", str(matrix)).stdout == \
        f"{b2}/{ASSET}\n"
    every = cli("kit-url", KIT, "--all", "--matrix", str(matrix)).stdout.splitlines()
    assert every[0].endswith(ASSET) and any(u.endswith("/SHA256SUMS") for u in every)


def test_kit_url_for_a_tag_that_needs_a_build_reads_the_ledger(tmp_path: Path,
                                                                release: Path) -> None:
    matrix = checkout(tmp_path, "https://api.github.com")
    # no kit index: the ledger alone (one that does not answer is the network's failure, 3)
    done = cli("kit-url", "example", "--matrix", str(matrix), "--index", "none")
    assert done.returncode == 2
    assert "needs {version_core}" in done.stderr
    assert "name the release's tag instead of the kit" in done.stderr
    for tag, when in (("example-v0.4.0-linux-sm86", "2026-11-30T00:00:00+00:00"),
                      ("example-v0.3.0-linux-sm86", "2026-11-01T00:00:00+00:00")):
        write_ledger(matrix, release, {"github": f"https://h/{tag}"}, tag=tag, kit="example",
                     time=when)
    done = cli("kit-url", "example", "--matrix", str(matrix))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"https://h/example-v0.4.0-linux-sm86/{ASSET}\n"
    assert "needs {version_core}" in done.stderr and "example-v0.4.0-linux-sm86" in done.stderr


def test_kit_url_on_github_enterprise_and_b2_without_a_ledger(tmp_path: Path) -> None:
    matrix = checkout(tmp_path, "https://ghe.example.com/api/v3", repository="team/kits")
    done = cli("kit-url", KIT, "--matrix", str(matrix))
    assert done.stdout == f"https://ghe.example.com/team/kits/releases/download/{TAG}/{ASSET}\n"
    # no kit index (one that does not answer, as ghe.example.com here, is the network's: 3)
    done = cli("kit-url", KIT, "--from", "b2", "--matrix", str(matrix), "--index", "none")
    assert done.returncode == 2 and "NINFER_KITS_B2_URL" in done.stderr
    done = cli("kit-url", KIT, "--from", "b2", "--matrix", str(matrix),
               env={"NINFER_KITS_B2_URL": "https://f001.backblazeb2.com"})
    assert done.stdout == f"https://f001.backblazeb2.com/file/ninfer-kits/kits/{TAG}/{ASSET}\n"


def test_unknown_names_and_origins(tmp_path: Path) -> None:
    matrix = checkout(tmp_path, "https://api.github.com")
    assert cli("fetch", KIT, "--from", "s3", "--matrix", str(matrix)).returncode == 2
    with pytest.raises(BadInput, match="no GitHub repository"):
        locate.locate("some-tag", "github", locate.context(None), Client())


def test_ledger_entries_are_read_strictly(tmp_path: Path, release: Path) -> None:
    matrix = checkout(tmp_path, "https://api.github.com")
    entry = write_ledger(matrix, release, {"github": "https://h"})
    entry.write_text(entry.read_text().replace(f'tag = "{TAG}"', 'tag = "other"'))
    done = cli("kit-url", KIT, "--matrix", str(matrix))
    assert done.returncode == 2 and "not its file name" in done.stderr
    entry.write_text(entry.read_text().replace("sha1 = ", "sha1_ = "))
    done = cli("kit-url", KIT, "--matrix", str(matrix))
    assert done.returncode == 2 and "sha1" in done.stderr



def test_a_reader_that_stops_early_does_not_leave_the_inflater_running() -> None:
    """A fetch that fails early (a member refused) closes the stream: the thread inflating
    ahead, blocked on its full queue, is freed and ends."""
    import gzip

    from ninfer_kits.inspector.decompress import Prefetched, gunzip_chunks

    data = io.BytesIO(gzip.compress(bytes(256 << 20), compresslevel=1))
    reader = Prefetched(gunzip_chunks(data))  # type: ignore[arg-type]
    assert reader.read(10) == bytes(10)
    reader.close()
    assert reader._thread is not None and not reader._thread.is_alive()
