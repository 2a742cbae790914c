"""The kit fetched is the kit asked for (issue 38 item 3): another kit's release, its own
checksums and even its signature good, is refused wherever it is presented in place of the one
asked for, in every mode: a folder (--from DIR), the GitHub API (tests/github_server.py), B2's
friendly URLs, the kit index, and --auto. Refused by the tarball's name, by the sha256 the
ledger or the index records, or, once unpacked and before anything lands in DEST, by
kit/BUILDINFO.txt's kit, revision and flavour (for a tag nothing records, by the matrix's
templates). Each refusal: exit 1, a message naming what differs, nothing changed outside DEST
and nothing left in it."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from github_server import GitHubServer
from ninfer_kits.inspector.elf import read_elf
from ninfer_kits.inspector.floor import kit_floor
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.publish.needs import needs_of
from ninfer_kits.release import kitindex, ledger
from ninfer_kits.release.ledger import LedgerFlavour
from ninfer_kits.release.signatures import NAMESPACE
from test_fetch import (
    ASSET,
    KIT,
    REPOSITORY,
    TAG,
    RangeServer,
    checkout,
    cli,
    kit_info,
    make_kit,
    publish_folder,
    write_ledger,
)
from unsigned import unsigned_matrix

# The case: the example-jit kit's release, presented for the example kit's tag.
EXAMPLE_TAG = "example-v0.3.0-linux-sm86"
JIT_TAG, JIT_ASSET = "example-jit-v0.3.0-linux-sm86", "ninfer-example-jit-kit-v0.3.0-sm86.tar.gz"
OLDER = "b" * 40  # the revision of an older build of the same kit
IDENTITY = "release@ninfer-kits"


def _kit(place: Path, info: BuildInfo) -> Path:
    return make_kit(place, filler=1000, info=info)


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small releases (a few kB each): `genuine` (kit ninfer-3090-sm86 at TAG), `older` (the
    same kit at another revision, under the same tag and tarball name), `other` (another kit,
    ninfer-all-sm86, under the same tag and tarball name), `jit` (example-jit, as published)."""
    place = tmp_path_factory.mktemp("identity")
    infos = {"genuine": kit_info(), "older": dataclasses.replace(kit_info(), revision=OLDER),
             "other": kit_info("ninfer-all-sm86")}
    made = {name: publish_folder(_kit(place / name, info), place / name / "dist", info=info)
            for name, info in infos.items()}
    jit = dataclasses.replace(kit_info("example-jit"), version="0.3.0",
                              card="any GPU of compute capability 8.6 or newer")
    made["jit"] = publish_folder(_kit(place / "jit", jit), place / "jit" / "dist",
                                 tag=JIT_TAG, asset=JIT_ASSET, info=jit)
    return made


def _presented(release: Path, where: Path, tag: str = TAG) -> Path:
    """A copy of `release` at where/<tag>/ (as a folder, or to serve)."""
    copy = where / tag
    shutil.copytree(release, copy)
    return copy


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every file (its bytes) and link (its target) under root, and every folder."""
    seen: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            key = str(path.relative_to(root))
            seen[key] = (f"-> {os.readlink(path)}" if path.is_symlink() else
                         "folder" if path.is_dir() else path.read_bytes())
    return seen


@contextmanager
def guarded(tmp_path: Path) -> Iterator[Path]:
    """DEST (tmp_path/place/box, not there yet) among canaries: after the block, nothing under
    tmp_path changed (releases, ledgers, canaries) and DEST is gone, as a refused fetch that
    made it leaves it."""
    place = tmp_path / "place"
    place.mkdir()
    (place / "canary").write_text("canary\n")
    (place / "box.part").write_text("a neighbour of DEST\n")
    before = _tree(tmp_path)
    dest = place / "box"
    yield dest
    assert not dest.exists(), sorted(p.name for p in dest.iterdir())
    assert _tree(tmp_path) == before


def refused(done: subprocess.CompletedProcess[str], *said: str) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    for words in said:
        assert words in done.stderr, done.stderr


# --------------------------------------------------------------------------- --from DIR


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_another_kits_signed_release_in_a_folder_is_not_taken_for_the_tag(
        tmp_path: Path, releases: dict[str, Path]) -> None:
    """The issue's case: example-jit's release, validly signed, in the folder of example's tag
    (which nothing here records): the matrix makes example-jit's build another tag."""
    folder = _presented(releases["jit"], tmp_path / "dist", EXAMPLE_TAG)
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)],
                   check=True, stdin=subprocess.DEVNULL)
    subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", NAMESPACE,
                    str(folder / "SHA256SUMS")], check=True, capture_output=True)
    matrix = tmp_path / "checkout" / "matrix.toml"
    matrix.parent.mkdir()
    kind, blob = key.with_name("key.pub").read_text().split()[:2]
    (matrix.parent / "allowed_signers").write_text(
        f'{IDENTITY} namespaces="{NAMESPACE}" {kind} {blob}\n')
    matrix.write_text(unsigned_matrix().read_text() + '\n[publish.signing]\n'
                      f'allowed_signers = "allowed_signers"\nidentity = "{IDENTITY}"\n')
    with guarded(tmp_path) as dest:
        done = cli("fetch", EXAMPLE_TAG, "--from", str(folder.parent), "--dest", str(dest),
                   "--matrix", str(matrix))
        refused(done, f"{JIT_ASSET} from folder {folder} is not the release {EXAMPLE_TAG}: its "
                      f"kit/BUILDINFO.txt says kit example-jit at revision {'a' * 40}, version "
                      f"0.3.0, whose tag is {JIT_TAG}, not {EXAMPLE_TAG}",
                "Nothing was unpacked into DEST")


def test_a_folder_without_the_recorded_tarball_offers_no_other(
        tmp_path: Path, releases: dict[str, Path]) -> None:
    """The ledger names the tarball: a folder holding another (its one tarball) is refused
    before anything is read from it, where fetch once took "the only tarball"."""
    matrix = checkout(tmp_path, "http://127.0.0.1:9")
    write_ledger(matrix, releases["genuine"], {"github": "http://127.0.0.1:9/gh"})
    folder = _presented(releases["jit"], tmp_path / "dist")
    with guarded(tmp_path) as dest:
        done = cli("fetch", KIT, "--from", str(folder.parent), "--dest", str(dest),
                   "--matrix", str(matrix))
        refused(done, f"folder {folder} has no {ASSET}, the tarball of the release {TAG} of kit "
                      f"{KIT} (it holds BUILDINFO.txt, SHA1SUMS, SHA256SUMS, build.log, "
                      f"{JIT_ASSET}): no other tarball is taken in its place")


def test_a_folder_is_held_to_the_ledgers_sha256(tmp_path: Path,
                                                releases: dict[str, Path]) -> None:
    """docs/fetch.md: with --from DIR the ledger's sha256 is compared too. An older build
    under the same name, its SHA256SUMS its own, into a DEST holding the kit fetched before:
    refused, and DEST stays as it was."""
    matrix = checkout(tmp_path, "http://127.0.0.1:9")
    ledger_path = write_ledger(matrix, releases["genuine"], {"github": "http://127.0.0.1:9/gh"})
    good = _presented(releases["genuine"], tmp_path / "good")
    dest = tmp_path / "box"
    first = cli("fetch", KIT, "--from", str(good.parent), "--dest", str(dest),
                "--matrix", str(matrix))
    assert first.returncode == 0, first.stderr
    assert (f"SHA256SUMS ok, SHA1SUMS ok, the ledger agrees, kit/BUILDINFO.txt is kit {KIT} at "
            f"aaaaaaaaaaaa, as the ledger records") in first.stderr
    folder = _presented(releases["older"], tmp_path / "dist")
    before = _tree(tmp_path)
    done = cli("fetch", KIT, "--from", str(folder.parent), "--dest", str(dest),
               "--matrix", str(matrix))
    listed = hashlib.sha256((folder / ASSET).read_bytes()).hexdigest()
    recorded = hashlib.sha256((good / ASSET).read_bytes()).hexdigest()
    refused(done, f"{ASSET}: SHA256SUMS says {listed}, the ledger {ledger_path} records "
                  f"{recorded} for the release {TAG} of kit {KIT}: not the kit asked for")
    assert _tree(tmp_path) == before


# --------------------------------------------------------------------------- GitHub


def _assets(release: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(release.iterdir())
            if path.name != "build.log"}


def _github_fetch(matrix: Path, dest: Path, *more: str,
                  token: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli("fetch", KIT, "--matrix", str(matrix), "--dest", str(dest), "--index", "none",
               *more, env={"GITHUB_TOKEN": token} if token else None)


def test_the_api_release_of_another_kit_under_the_tarballs_name(
        tmp_path: Path, releases: dict[str, Path]) -> None:
    """No ledger: the GitHub release of the tag holds another kit's tarball under the asked
    name (its GitHub digest and SHA256SUMS agree with it): refused once unpacked."""
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, TAG, assets=_assets(releases["other"]))
        matrix = checkout(tmp_path, server.base_url)
        with guarded(tmp_path) as dest:
            refused(_github_fetch(matrix, dest),
                    f"{ASSET} from GitHub {REPOSITORY} release {TAG} is not the release {TAG} "
                    f"of kit {KIT}: its kit/BUILDINFO.txt says kit ninfer-all-sm86, not {KIT}")


def test_the_api_release_without_the_tarball(tmp_path: Path,
                                             releases: dict[str, Path]) -> None:
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, TAG, assets=_assets(releases["jit"]))
        matrix = checkout(tmp_path, server.base_url)
        with guarded(tmp_path) as dest:
            refused(_github_fetch(matrix, dest),
                    f"GitHub {REPOSITORY} release {TAG} has no {ASSET}, the tarball of the "
                    f"release {TAG} of kit {KIT} (it holds BUILDINFO.txt, SHA1SUMS, SHA256SUMS, "
                    f"{JIT_ASSET})")


def test_githubs_digest_does_not_stand_in_for_the_ledgers(tmp_path: Path,
                                                          releases: dict[str, Path]) -> None:
    """With a token fetch reads the API, whose digest of each asset is the server's word; the
    ledger's sha256 is still compared, and an older build that GitHub vouches for is refused."""
    token = "ghp_identityTOKEN0123456789abcdefghijklmno"
    with GitHubServer() as server:
        server.add_repo(REPOSITORY, private=True)
        server.add_token(token)
        server.add_release(REPOSITORY, TAG, assets=_assets(releases["older"]))
        matrix = checkout(tmp_path, server.base_url)
        write_ledger(matrix, releases["genuine"], {
            "github": f"{server.web_url}/{REPOSITORY}/releases/download/{TAG}"})
        with guarded(tmp_path) as dest:
            done = _github_fetch(matrix, dest, token=token)
            refused(done, f"{ASSET}: SHA256SUMS says ", ", the ledger ",
                    f"for the release {TAG} of kit {KIT}: not the kit asked for")
            assert token not in done.stdout + done.stderr


# --------------------------------------------------------------------------- B2, the index


def test_b2_without_a_ledger_serves_another_kit(tmp_path: Path, releases: dict[str, Path],
                                                server: RangeServer) -> None:
    """B2's friendly URLs, no ledger: the names come from the matrix, the bytes from the
    bucket, which holds another kit under them."""
    server.add_folder(releases["other"], f"/file/ninfer-kits/kits/{TAG}")
    matrix = checkout(tmp_path, server.url)
    with guarded(tmp_path) as dest:
        done = cli("fetch", KIT, "--from", "b2", "--matrix", str(matrix), "--dest", str(dest),
                   "--index", "none", env={"NINFER_KITS_B2_URL": server.url})
        refused(done, f"{ASSET} from B2 bucket ninfer-kits, kits/{TAG}/ is not the release "
                      f"{TAG} of kit {KIT}: its kit/BUILDINFO.txt says kit ninfer-all-sm86")


def _index(tmp_path: Path, release: Path, base: str, **change: object) -> Path:
    """index.json recording `release` at TAG (as publish would), then changed by `change`;
    its flavour needs what the kit's program needs (glibc)."""
    publisher = checkout(tmp_path / "publisher", base)
    write_ledger(publisher, release, {"github": f"{base}/gh"})
    needs = needs_of(kit_floor([read_elf(release.parents[1] / "kit" / "bin" / "app")]))
    entries = [dataclasses.replace(entry, flavours=(
        LedgerFlavour(flavour="plain", asset=ASSET, needs=needs),), **change)
        for entry in ledger.read_all(publisher.parent / "releases")]
    path = tmp_path / "index.json"
    path.write_bytes(kitindex.render(kitindex.document(entries)))
    return path


def test_an_index_that_records_another_revision(tmp_path: Path, releases: dict[str, Path],
                                                server: RangeServer) -> None:
    """The kit index (controlled by whoever serves it) records the tag as the genuine
    revision, with the sha256 of an older build it also serves: the sha256 agrees, and
    kit/BUILDINFO.txt's revision does not."""
    server.add_folder(releases["older"], "/gh")
    index = _index(tmp_path, releases["older"], server.url, revision="a" * 40)
    user = checkout(tmp_path / "user", server.url)
    with guarded(tmp_path) as dest:
        done = cli("fetch", TAG, "--matrix", str(user), "--index", str(index),
                   "--dest", str(dest))
        refused(done, f"is not the release {TAG} of kit {KIT}: its kit/BUILDINFO.txt says "
                      f"revision {OLDER}, where the kit index {index} records {'a' * 40}")


def test_auto_binds_the_fetch_to_the_release_it_chose(tmp_path: Path,
                                                      releases: dict[str, Path]) -> None:
    """--auto chooses a release from the index; fetched from a folder (which reads no index of
    its own), it is still that release: a folder holding another build is refused."""
    index = _index(tmp_path, releases["genuine"], "http://127.0.0.1:9")
    user = checkout(tmp_path / "user", "http://127.0.0.1:9")
    folder = _presented(releases["older"], tmp_path / "dist")
    with guarded(tmp_path) as dest:
        done = cli("fetch", "--auto", "--root", "/", "--from", str(folder.parent),
                   "--index", str(index), "--matrix", str(user), "--dest", str(dest))
        refused(done, f"chosen: {TAG} (plain)", f"{ASSET}: SHA256SUMS says ",
                f"the kit index {index} records ")


# --------------------------------------------------------------------------- nothing raw


ESCAPE = "\x1b]0;owned\x07\x1b[2J"  # a terminal title, then a cleared screen
ESCAPED = "\\x1b]0;owned\\x07\\x1b[2J"


def shown_escaped(done: subprocess.CompletedProcess[str]) -> None:
    out = done.stdout + done.stderr
    assert "\x1b" not in out and "\x07" not in out, out
    assert ESCAPED in out, out


def test_a_checksum_name_with_an_escape_sequence_is_shown_escaped(
        tmp_path: Path, releases: dict[str, Path]) -> None:
    folder = _presented(releases["genuine"], tmp_path / "dist")
    with (folder / "SHA256SUMS").open("a") as sums:
        sums.write(f"{'0' * 64}  {ESCAPE}.tar.gz\n")
    with guarded(tmp_path) as dest:
        done = cli("fetch", TAG, "--from", str(folder.parent), "--dest", str(dest),
                   "--matrix", str(unsigned_matrix()))
        refused(done, f"folder {folder}: SHA256SUMS:3: the name ", " holds a control "
                      "character: refused")
        shown_escaped(done)
    verified = cli("verify", str(folder), "--matrix", str(unsigned_matrix()))
    assert verified.returncode == 1 and "SHA256SUMS:3: the name " in verified.stderr
    shown_escaped(verified)


def test_crlf_checksums_are_read_as_sha256sum_reads_them(
        tmp_path: Path, releases: dict[str, Path]) -> None:
    """`sha256sum -c` (coreutils) accepts a SHA256SUMS with CRLF line ends; so does fetch,
    where it once said "does not list k.tar.gz (it lists k.tar.gz\\r)" without the \\r."""
    folder = _presented(releases["genuine"], tmp_path / "dist")
    sums = folder / "SHA256SUMS"
    for name in ("BUILDINFO.txt", "SHA1SUMS"):  # SHA256SUMS alone is the case
        (folder / name).unlink()
    sums.write_bytes(b"".join(line + b"\r\n" for line in sums.read_bytes().splitlines()
                              if ASSET.encode() in line))
    assert subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=folder,
                          capture_output=True).returncode == 0
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--from", str(folder.parent), "--dest", str(dest),
               "--matrix", str(unsigned_matrix()))
    assert "error" not in done.stderr and (dest / "kit" / "bin" / "app").is_file(), done.stderr
    assert "SHA256SUMS ok" in done.stderr


def test_an_api_asset_name_with_an_escape_sequence(tmp_path: Path,
                                                   releases: dict[str, Path]) -> None:
    assets = _assets(releases["genuine"])
    assets[f"{ESCAPE}.tar.gz"] = assets.pop(ASSET)
    with GitHubServer() as server:
        server.add_repo(REPOSITORY)
        server.add_release(REPOSITORY, "v9-escape", assets=assets)
        matrix = checkout(tmp_path, server.base_url)
        with guarded(tmp_path) as dest:
            done = cli("fetch", "v9-escape", "--matrix", str(matrix), "--dest", str(dest),
                       "--index", "none")
            assert done.returncode == 2, done.stderr
            assert "not a plain file name (a path, '.', '..' or a control character)" in \
                done.stderr
            shown_escaped(done)


def test_index_text_with_an_escape_sequence(tmp_path: Path, releases: dict[str, Path]) -> None:
    index = _index(tmp_path, releases["genuine"], "http://127.0.0.1:9", card=ESCAPE)
    user = checkout(tmp_path / "user", "http://127.0.0.1:9")
    with guarded(tmp_path) as dest:
        for command in (("fetch", TAG, "--dest", str(dest)), ("fetch", "--auto", "--dry-run")):
            done = cli(*command, "--matrix", str(user), "--index", str(index))
            assert done.returncode == 2, done.stderr
            assert f"the kit index {index}: release {TAG} holds a control character in " in \
                done.stderr
            shown_escaped(done)


def test_a_servers_reason_phrase_is_shown_escaped() -> None:
    import http.server
    import threading

    from ninfer_kits.fetch.http import Client, HttpFailure

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(418, ESCAPE)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        with pytest.raises(HttpFailure) as failure:
            url = f"http://127.0.0.1:{port}"
            Client(attempts=1, servers=(url,)).get_bytes(f"{url}/k.tar.gz")
        server.shutdown()
    said = str(failure.value)
    assert "\x1b" not in said and f"HTTP 418 {ESCAPED}" in said, said


def test_verifys_table_shows_a_kits_names_escaped(tmp_path: Path) -> None:
    """A soname inside the kit's own ELF file reaches verify's table escaped."""
    kit = make_kit(tmp_path / "tree", filler=100, needs=f"libx{ESCAPE}.so.1")
    done = cli("verify", str(kit.parent))
    assert done.returncode == 4 and f"libx{ESCAPED}.so.1" in done.stdout, done.stdout
    shown_escaped(done)
