"""A real Debian source archive for the tests (no tests here), served over HTTP on 127.0.0.1.

Debian's own archive cannot be reached in full from this project's machines, so a test that
publishes a portable kit serves the source packages the kit owes itself, the way the tests
serve a local GitHub: real `dpkg-source` packages with the names and versions the kit's
SOURCES.json records, a real `dpkg-scansources` index, a Release signed as InRelease with a
throwaway gpg key, whose public keyring the test hands to publish through matrix.toml's
[publish.sources] (`keyring`, `mirror`, `snapshot`), as a user would. Beside it, a stand-in
for snapshot.debian.org: its machine API (/mr/package/<name>/<version>/srcfiles?fileinfo=1)
and dated archive trees (/archive/<archive>/<timestamp>/), for versions the pool no longer has.
"""

from __future__ import annotations

import dataclasses
import email.utils
import hashlib
import http.server
import json
import shutil
import subprocess
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ninfer_kits.kit.owed_sources import OwedSources, read

from tools import missing

SUITE, COMPONENT = "trixie", "main"
SNAPSHOT_ARCHIVE, FIRST_SEEN = "debian", "20240102T030405Z"


def _need_tools() -> None:
    for name in ("dpkg-source", "dpkg-scansources", "apt-get", "gpg"):
        if shutil.which(name) is None:
            missing(f"{name} (dpkg-dev, apt, gnupg)")


@dataclasses.dataclass(frozen=True)
class Key:
    secret: Path  # the exported secret key, imported into a fresh homedir to sign
    keyring: Path  # the public keyring (binary, .gpg): what apt is given


@contextmanager
def _gnupg() -> Iterator[list[str]]:
    """gpg on a homedir of its own, under a short path: its agent's socket lives there and a
    socket path is limited to 108 bytes (pytest's folders under xdist pass that); the agent
    it starts is stopped and the homedir removed after the block."""
    home = Path(tempfile.mkdtemp(prefix="nk-gpg-"))
    try:
        yield ["gpg", "--homedir", str(home), "--batch", "--quiet"]
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False,
                       capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def make_key(folder: Path) -> Key:
    """A throwaway signing key (ed25519, no passphrase): its secret and its public keyring."""
    _need_tools()
    folder.mkdir(parents=True, exist_ok=True)
    with _gnupg() as gpg:
        subprocess.run([*gpg, "--passphrase", "", "--quick-gen-key",
                        "Test Archive <archive@example.org>", "ed25519", "sign", "never"],
                       check=True, capture_output=True)
        keyring, secret = folder / "test-archive.gpg", folder / "test-archive.secret"
        keyring.write_bytes(subprocess.run([*gpg, "--export"], check=True,
                                           capture_output=True).stdout)
        secret.write_bytes(subprocess.run([*gpg, "--export-secret-keys"], check=True,
                                          capture_output=True).stdout)
    return Key(secret, keyring)


def source_package(work: Path, name: str, version: str) -> list[Path]:
    """A real source package `name` at `version` (epoch allowed): 3.0 (quilt) with an orig
    tarball where the version has a Debian revision, 3.0 (native) otherwise. Its files."""
    bare = version.partition(":")[2] or version
    upstream, _, revision = bare.rpartition("-") if "-" in bare else (bare, "", "")
    tree = work / f"{name}-{upstream}"
    shutil.rmtree(tree, ignore_errors=True)
    (tree / "debian/source").mkdir(parents=True)
    (tree / "README").write_text(f"{name} {version}: the test's stand-in for its source\n")
    if revision:
        subprocess.run(["tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0", "-cJf",
                        str(work / f"{name}_{upstream}.orig.tar.xz"), "--exclude=debian",
                        tree.name], cwd=work, check=True)
    (tree / "debian/source/format").write_text("3.0 (quilt)\n" if revision else
                                               "3.0 (native)\n")
    (tree / "debian/control").write_text(f"Source: {name}\nMaintainer: T <t@example.org>\n\n"
                                         f"Package: lib{name}-test\nArchitecture: all\n"
                                         "Description: t\n t\n")
    (tree / "debian/changelog").write_text(
        f"{name} ({version}) unstable; urgency=low\n\n  * t\n\n"
        " -- T <t@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n")
    subprocess.run(["dpkg-source", "-b", tree.name], cwd=work, check=True, capture_output=True)
    shutil.rmtree(tree)
    made = [path for path in work.iterdir() if path.name.startswith(f"{name}_")]
    return [path for path in made if upstream in path.name]


def write_archive(top: Path, key: Key, packages: list[tuple[str, str]], work: Path,
                  suites: tuple[tuple[str, tuple[str, ...]], ...] = ((SUITE, (COMPONENT,)),)
                  ) -> None:
    """An archive at `top` (pool/main/, dists/<suite>/ for each of `suites`: (suite, its
    components)) holding `packages` (name, version), its Sources index made by
    dpkg-scansources (the same in every suite and component) and each suite's InRelease
    signed with `key`."""
    pool = top / "pool" / COMPONENT
    pool.mkdir(parents=True, exist_ok=True)
    for name, version in packages:
        build = work / f"build-{name}"
        build.mkdir(parents=True, exist_ok=True)
        for path in source_package(build, name, version):
            shutil.move(path, pool / path.name)
    index = subprocess.run(["dpkg-scansources", f"pool/{COMPONENT}", "/dev/null"], cwd=top,
                           check=True, capture_output=True, text=True).stdout
    for suite, components in suites:
        for component in components:
            sources = top / "dists" / suite / component / "source" / "Sources"
            sources.parent.mkdir(parents=True, exist_ok=True)
            sources.write_text(index)
        sign_release(top / "dists" / suite, key, suite, components)


def sign_release(dists: Path, key: Key, suite: str = SUITE,
                 components: tuple[str, ...] = (COMPONENT,)) -> None:
    """dists/<suite>/InRelease: the Release that lists each index's sha256, clear-signed."""
    rows = [f" {hashlib.sha256(path.read_bytes()).hexdigest()} {path.stat().st_size} "
            f"{path.relative_to(dists)}" for path in sorted(dists.rglob("Sources"))]
    release = dists / "Release"
    release.write_text(f"Origin: Test\nLabel: Test\nSuite: {suite}\nCodename: {suite}\n"
                       f"Date: {email.utils.formatdate(usegmt=True)}\n"
                       f"Architectures: amd64 source\nComponents: {' '.join(components)}\n"
                       "SHA256:\n" + "\n".join(rows) + "\n")
    (dists / "InRelease").unlink(missing_ok=True)
    with _gnupg() as gpg:
        subprocess.run([*gpg, "--import", str(key.secret)], check=True, capture_output=True)
        subprocess.run([*gpg, "--yes", "--clearsign", "-o", str(dists / "InRelease"),
                        str(release)], check=True, capture_output=True)


def snapshot_tree(root: Path, key: Key, packages: list[tuple[str, str]], work: Path) -> None:
    """The stand-in snapshot's archive of `packages`: root/archive/debian/<FIRST_SEEN>/."""
    write_archive(root / "archive" / SNAPSHOT_ARCHIVE / FIRST_SEEN, key, packages, work)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Files under the server's folder, and snapshot's machine API answered from its
    archive/ tree."""

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the requests are kept in server.requests

    def do_GET(self) -> None:
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        parts = urllib.parse.urlsplit(self.path)
        words = [urllib.parse.unquote(word) for word in parts.path.split("/")]
        if words[1:3] == ["mr", "package"] and len(words) == 6 and words[5] == "srcfiles":
            self._srcfiles(words[3], words[4])
            return
        super().do_GET()

    def _srcfiles(self, name: str, version: str) -> None:
        bare = version.partition(":")[2] or version
        top = Path(self.directory) / "archive" / SNAPSHOT_ARCHIVE / FIRST_SEEN
        dsc = top / "pool" / COMPONENT / f"{name}_{bare}.dsc"
        if not dsc.is_file():
            self.send_error(404, "No such source package")
            return
        files = [dsc, *(dsc.parent / line.split()[2] for line in _checksums(dsc))]
        fileinfo, result = {}, []
        for path in files:
            sha1 = hashlib.sha1(path.read_bytes()).hexdigest()
            result.append({"hash": sha1})
            fileinfo[sha1] = [{"archive_name": SNAPSHOT_ARCHIVE, "first_seen": FIRST_SEEN,
                               "name": path.name, "path": f"/pool/{COMPONENT}",
                               "size": path.stat().st_size}]
        body = json.dumps({"_comment": "stand-in", "package": name, "version": version,
                           "result": result, "fileinfo": fileinfo}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _checksums(dsc: Path) -> list[str]:
    text = dsc.read_text()
    block = text.split("Checksums-Sha256:\n", 1)[1]
    return [line for line in block.splitlines() if line.startswith(" ")][:10]


@dataclasses.dataclass(frozen=True)
class Served:
    url: str  # http://127.0.0.1:PORT
    folder: Path
    requests: list[str]

    @property
    def mirror(self) -> str:
        return f"{self.url}/debian"

    def fetched(self) -> list[str]:
        """The source files' paths asked for so far (the pool's and the snapshot's)."""
        return [path for path in self.requests if "/pool/" in path]


@contextmanager
def serving(folder: Path) -> Iterator[Served]:
    """An HTTP server on 127.0.0.1 serving `folder`: debian/ (the archive), archive/ (the
    snapshot's trees) and the snapshot's /mr/ API."""
    requests: list[str] = []

    def handler(*args: object, **kwargs: object) -> _Handler:
        return _Handler(*args, directory=str(folder), **kwargs)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)  # type: ignore[arg-type]
    server.requests = requests  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{server.server_address[1]}", folder, requests)
    finally:
        server.shutdown()
        server.server_close()


def owed_of(kit_dir: Path) -> list[tuple[str, str]]:
    """(name, version) of each package the kit folder's SOURCES.json owes."""
    record: OwedSources = read(kit_dir / "SOURCES.json")
    return [(package.name, package.version) for package in record.packages]


def sources_table(served: Served, key: Key, *, mirror: bool = True) -> str:
    """matrix.toml's [publish.sources] for the served archive and snapshot, trusting `key`."""
    lines = ["\n[publish.sources]\n", f'keyring = "{key.keyring}"\n',
             f'snapshot = "{served.url}"\n']
    if mirror:
        lines.append(f'mirror = "{served.mirror}"\n')
    return "".join(lines)


@contextmanager
def archive_for(kit_dir: Path, folder: Path) -> Iterator[str]:
    """For a kit a real build made: an archive serving every package its SOURCES.json owes
    (and a snapshot with none), on 127.0.0.1 while the block runs; yields the
    [publish.sources] table to append to the matrix publish reads ("" for a kit that owes
    none)."""
    if not (kit_dir / "SOURCES.json").is_file():
        yield ""
        return
    key = make_key(folder / "key")
    record = read(kit_dir / "SOURCES.json")
    suites: dict[str, set[str]] = {}
    for archive in record.archives:  # every suite the kit's archives have, as the mirror
        for suite in archive.suites:
            suites.setdefault(suite, set()).update(archive.components or (COMPONENT,))
    write_archive(folder / "served" / "debian", key, owed_of(kit_dir), folder / "work",
                  tuple((suite, tuple(sorted(c))) for suite, c in sorted(suites.items())))
    with serving(folder / "served") as served:
        yield sources_table(served, key)
