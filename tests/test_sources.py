"""The source debt of a portable kit, recorded at build and paid at publish (owed_sources,
pipeline.copyleft's record, publish.sources): the record's format, a build root's record made
with no network, and publishes against a real signed source archive and a stand-in snapshot
archive served on 127.0.0.1 (tests/source_archive.py)."""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import source_archive
from ninfer_kits.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, ConfigError
from ninfer_kits.kit import kitdir, owed_sources
from ninfer_kits.kit.owed_sources import Archive, Keyring, OwedPackage, OwedSources
from ninfer_kits.matrix import load_matrix
from ninfer_kits.pipeline import copyleft
from ninfer_kits.release.checksums import read_sha256sums
from source_archive import Key, Served
from test_publish_support import TAG, cli, make_kit, matrix_file

OWED = (("ffmpeg", "7:7.1.5-0+deb13u1"), ("tiny", "1.0"))
GONE = ("oldlib", "2:0.9-1")  # only in the snapshot


def _record(*packages: tuple[str, str]) -> OwedSources:
    """As a build on Debian records it: deb.debian.org and a keyring of its own (another
    throwaway key's, which does not sign the test's mirror)."""
    archive = Archive("http://deb.debian.org/debian", ("trixie", "trixie-updates"), ("main",),
                      ("debian-archive-keyring.gpg",))
    return OwedSources((archive,), (Keyring("debian-archive-keyring.gpg", _other_key()),),
                       tuple(OwedPackage(name, version, (f"lib{name}1",), "LGPL-2.1+")
                             for name, version in packages))


@functools.cache
def _other_key() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        return source_archive.make_key(Path(folder)).keyring.read_bytes()


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Key:
    return source_archive.make_key(tmp_path_factory.mktemp("key"))


@pytest.fixture()
def served(tmp_path: Path, key: Key) -> Iterator[Served]:
    """The archive holding OWED, and the snapshot holding GONE, on 127.0.0.1."""
    folder = tmp_path / "served"
    source_archive.write_archive(folder / "debian", key, list(OWED), tmp_path / "work")
    source_archive.snapshot_tree(folder, key, [GONE], tmp_path / "work-snapshot")
    with source_archive.serving(folder) as server:
        yield server


def _publish(kit_dir: Path, matrix: Path, out: Path, cache: Path,
             *more: str) -> subprocess.CompletedProcess[str]:
    return cli("publish", kit_dir, "--to", "local", "--out", out, "--matrix", matrix,
               "--cache-dir", cache, *more)


# ---------------------------------------------------------------------------- the record


def test_the_record_reads_back_and_refuses_every_wrong_field(tmp_path: Path) -> None:
    record = _record(*OWED)
    data = owed_sources.render(record)
    assert owed_sources.parse(data, "x") == record and owed_sources.render(record) == data
    document = json.loads(data)

    def refused(change: dict[str, object], says: str) -> None:
        bad = json.dumps({**document, **change}).encode()
        with pytest.raises(owed_sources.BadRecord, match=says) as caught:
            owed_sources.parse(bad, "dist/x/SOURCES.json")
        assert "dist/x/SOURCES.json" in str(caught.value)
        assert caught.value.exit_code == EXIT_BAD_INPUT

    refused({"schema": 2}, "schema 2")
    refused({"extra": 1}, "exactly")
    archive = document["archives"][0]
    refused({"archives": [{**archive, "uri": "http://x/ y"}]}, r"archives\[0\]\.uri")
    refused({"archives": [{**archive, "uri": "cdrom:[Debian 12]/"}]}, r"archives\[0\]\.uri")
    refused({"archives": [{**archive, "keyrings": ["other.gpg"]}]}, "not in keyrings")
    refused({"archives": [{**archive, "suites": ["a b"]}]}, r"suites\[0\]")
    keyring = document["keyrings"][0]
    refused({"keyrings": [{**keyring, "sha256": "0" * 64}]}, "its bytes' sha256")
    refused({"keyrings": [{**keyring, "base64": "!!"}]}, r"keyrings\[0\]\.base64")
    package = document["packages"][0]
    refused({"packages": [{**package, "version": "1.0; rm"}]}, r"packages\[0\]\.version")
    refused({"packages": [{**package, "name": "../x"}]}, r"packages\[0\]\.name")
    refused({"archives": []}, "archives: none")
    with pytest.raises(owed_sources.BadRecord, match="larger than"):
        owed_sources.parse(b" " * (owed_sources.MAX_BYTES + 1), "x")
    with pytest.raises(owed_sources.BadRecord, match="not JSON"):
        owed_sources.parse(b"{", "x")


STATUS = """\
Package: libavcodec61
Status: install ok installed
Source: ffmpeg (7:7.1.5-0+deb13u1)
Version: 7:7.1.5-0+deb13u1

Package: libssl3t64
Status: install ok installed
Source: openssl
Version: 3.5.1-1
"""


def _build_root(tmp_path: Path) -> Path:
    """A build root as a toolchain image has it: dpkg status, deb822 and one-line apt sources,
    a signed-by keyring and trusted.gpg.d."""
    root = tmp_path / "root"
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(STATUS)
    apt = root / "etc/apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "trusted.gpg.d").mkdir()
    (apt / "trusted.gpg.d/vendor.asc").write_text("vendor key\n")
    (root / "usr/share/keyrings").mkdir(parents=True)
    (root / "usr/share/keyrings/debian-archive-keyring.gpg").write_bytes(b"\x99debian keys")
    (apt / "sources.list.d/debian.sources").write_text(
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie trixie-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb\nEnabled: no\nURIs: http://off\nSuites: x\nComponents: main\n")
    (apt / "sources.list").write_text("# comment\ndeb https://vendor.example.org/repo ./\n"
                                      "deb file:/srv/local stable main\n"
                                      "deb-src http://example.org/x y z\n")
    return root


RECORD_IN_CHILD = """\
import sys
from pathlib import Path
from ninfer_kits.kit import owed_sources
from ninfer_kits.pipeline import copyleft
from ninfer_kits.pipeline.provenance import Origin
root = Path(sys.argv[1])
origins = [Origin(name, "1", "dpkg", "x", "/x") for name in ("libavcodec61", "libssl3t64")]
obligations = copyleft.classify(origins, root, copyleft.load_verdicts())
sys.stdout.buffer.write(owed_sources.render(copyleft.owed_record(obligations, root)))
sys.stdout.write(copyleft.readme_section(obligations, "v1"))
"""


def test_the_build_records_what_is_owed_with_no_network(tmp_path: Path) -> None:
    """The build's classification and record, run in a network namespace of its own
    (`unshare -rn`: only a loopback that is down), so nothing could be fetched."""
    root = _build_root(tmp_path)
    done = subprocess.run(["unshare", "-rn", sys.executable, "-c", RECORD_IN_CHILD, str(root)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    record_text, readme = done.stdout.split("\n}\n", 1)
    record = owed_sources.parse((record_text + "\n}\n").encode(), "stdout")
    assert [(p.name, p.version, p.binaries) for p in record.packages] == [
        ("ffmpeg", "7:7.1.5-0+deb13u1", ("libavcodec61",))]  # openssl owes a notice only
    assert record.packages[0].licence == copyleft.load_verdicts().of("dpkg", "ffmpeg").licence  # type: ignore[union-attr]
    assert [(a.uri, a.suites, a.components, a.keyrings) for a in record.archives] == [
        ("https://vendor.example.org/repo", ("./",), (), ("vendor.asc",)),
        ("file:/srv/local", ("stable",), ("main",), ("vendor.asc",)),  # a mirror may stand in
        ("http://deb.debian.org/debian", ("trixie", "trixie-updates"), ("main",),
         ("debian-archive-keyring.gpg",))]
    assert [a.fetchable for a in record.archives] == [True, False, True]
    assert {k.name: k.data for k in record.keyrings} == {
        "debian-archive-keyring.gpg": b"\x99debian keys", "vendor.asc": b"vendor key\n"}
    # the README names package, version and licence; the sha256s are the release's SHA256SUMS'
    assert "ffmpeg 7:7.1.5-0+deb13u1 (source of libavcodec61)\n  licence:  " in readme
    assert "release's SHA256SUMS lists each file with its sha256" in readme
    assert "Written statement" in readme and "sha256:" not in readme


# ---------------------------------------------------------------------------- publishing


def test_publish_fetches_the_owed_sources_caches_and_uploads_them(
        program: Path, tmp_path: Path, key: Key, served: Served) -> None:
    kit = make_kit(tmp_path / "dist", program, portable=True, owed=_record(*OWED))
    matrix = matrix_file(tmp_path, portable=True,
                         sources=source_archive.sources_table(served, key))
    started = time.monotonic()
    first = _publish(kit.path, matrix, tmp_path / "out", tmp_path / "cache")
    print(f"\nfirst publish (fetching 2 packages) {time.monotonic() - started:.1f} s")
    assert first.returncode == 0, first.stderr
    assert "sources: fetched ffmpeg 7:7.1.5-0+deb13u1" in first.stderr
    release = tmp_path / "out" / TAG
    sums = read_sha256sums(release / kitdir.SHA256SUMS)
    owed = sorted(name for name in sums if name.startswith("sources/"))
    assert owed == ["sources/ffmpeg_7.1.5-0+deb13u1.debian.tar.xz",
                    "sources/ffmpeg_7.1.5-0+deb13u1.dsc", "sources/ffmpeg_7.1.5.orig.tar.xz",
                    "sources/tiny_1.0.dsc", "sources/tiny_1.0.tar.xz"]
    assert kitdir.OWED in sums and (release / kitdir.OWED).is_file()
    for name in owed:  # published flat, byte for byte the archive's
        flat = name.removeprefix("sources/")
        assert (release / flat).read_bytes() == \
            (served.folder / "debian/pool/main" / flat).read_bytes()
    assert kitdir.read_kit_dir(release).sources == tuple(owed)  # every hash checked
    fetched = list(served.fetched())
    assert len(fetched) == 5
    # a second publish (another folder) takes them from the cache, rechecked: no request
    second = _publish(kit.path, matrix, tmp_path / "again", tmp_path / "cache")
    assert second.returncode == 0, second.stderr
    assert "2 source packages, all in the cache" in second.stderr
    assert served.fetched() == fetched
    assert read_sha256sums(tmp_path / "again" / TAG / kitdir.SHA256SUMS) == sums
    # a cached file that no longer checks is fetched again
    (tmp_path / "cache/sources/tiny_1.0/tiny_1.0.tar.xz").write_bytes(b"changed in the cache")
    third = _publish(kit.path, matrix, tmp_path / "third", tmp_path / "cache")
    assert third.returncode == 0, third.stderr
    assert "fetching 1 source package(s) with apt-get (cached: 1)" in third.stderr
    assert served.fetched()[len(fetched):] == ["/debian/pool/main/tiny_1.0.dsc",
                                               "/debian/pool/main/tiny_1.0.tar.xz"]


def test_a_version_the_pool_dropped_comes_from_the_snapshot_archive(
        program: Path, tmp_path: Path, key: Key, served: Served) -> None:
    kit = make_kit(tmp_path / "dist", program, portable=True, owed=_record(OWED[1], GONE))
    matrix = matrix_file(tmp_path, portable=True,
                         sources=source_archive.sources_table(served, key))
    done = _publish(kit.path, matrix, tmp_path / "out", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert any(path.startswith("/mr/package/oldlib/2%3A0.9-1/srcfiles?fileinfo=1")
               for path in served.requests)
    snapshot = f"/archive/debian/{source_archive.FIRST_SEEN}/pool/main/oldlib_0.9-1.dsc"
    assert snapshot in served.fetched()
    sums = read_sha256sums(tmp_path / "out" / TAG / kitdir.SHA256SUMS)
    assert "sources/oldlib_0.9.orig.tar.xz" in sums and "sources/tiny_1.0.dsc" in sums


def test_a_package_found_nowhere_stops_the_publish_naming_every_url(
        program: Path, tmp_path: Path, key: Key, served: Served) -> None:
    kit = make_kit(tmp_path / "dist", program, portable=True,
                   owed=_record(OWED[1], ("nowhere", "3.1-4")))
    matrix = matrix_file(tmp_path, portable=True,
                         sources=source_archive.sources_table(served, key))
    done = _publish(kit.path, matrix, tmp_path / "out", tmp_path / "cache")
    assert done.returncode == EXIT_ENVIRONMENT, done.stderr
    message = done.stderr
    assert "source package nowhere 3.1-4 (of the bundled libnowhere1)" in message
    assert served.mirror in message
    assert f"{served.url}/mr/package/nowhere/3.1-4/srcfiles?fileinfo=1" in message
    assert "nothing was published" in message and "Traceback" not in message
    assert not (tmp_path / "out" / TAG).exists()


def test_an_archive_publish_cannot_ask_needs_a_mirror_in_its_place(
        program: Path, tmp_path: Path, key: Key, served: Served) -> None:
    """A build host whose apt reads a mirror list (GitHub's Ubuntu runners: mirror+file:) or a
    local folder: the build records it; publish says what to name, and fetches once it is."""
    listed = Archive("mirror+file:/etc/apt/apt-mirrors.txt", ("trixie",), ("main",),
                     ("debian-archive-keyring.gpg",))
    record = dataclasses.replace(_record(OWED[1]), archives=(listed,))
    kit = make_kit(tmp_path / "dist", program, portable=True, owed=record)
    (tmp_path / "bare").mkdir()
    bare = matrix_file(tmp_path / "bare", portable=True,
                       sources=source_archive.sources_table(served, key, mirror=False))
    done = _publish(kit.path, bare, tmp_path / "out", tmp_path / "cache")
    assert done.returncode == EXIT_ENVIRONMENT, done.stderr
    assert ("mirror+file:/etc/apt/apt-mirrors.txt (not http(s): name a mirror in its place)"
            in done.stderr), done.stderr
    matrix = matrix_file(tmp_path, portable=True,
                         sources=source_archive.sources_table(served, key))
    done = _publish(kit.path, matrix, tmp_path / "out", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "sources/tiny_1.0.dsc" in read_sha256sums(tmp_path / "out" / TAG / kitdir.SHA256SUMS)


def test_a_file_the_index_lists_but_the_pool_lacks_is_looked_for_in_the_snapshot(
        program: Path, tmp_path: Path, key: Key, served: Served) -> None:
    """deb.debian.org's way when a version is superseded: 404 from the pool."""
    kit = make_kit(tmp_path / "dist", program, portable=True, owed=_record(OWED[1]))
    matrix = matrix_file(tmp_path, portable=True,
                         sources=source_archive.sources_table(served, key))
    (served.folder / "debian/pool/main/tiny_1.0.tar.xz").unlink()
    done = _publish(kit.path, matrix, tmp_path / "out", tmp_path / "cache")
    assert done.returncode == EXIT_ENVIRONMENT, done.stderr
    assert "404" in done.stderr and "/mr/package/tiny/1.0/srcfiles" in done.stderr
    assert "source package tiny 1.0 (of the bundled libtiny1) is in none" in done.stderr


def test_a_file_that_does_not_match_the_signed_index_stops_the_publish(
        program: Path, tmp_path: Path, key: Key, served: Served) -> None:
    kit = make_kit(tmp_path / "dist", program, portable=True, owed=_record(OWED[1]))
    matrix = matrix_file(tmp_path, portable=True,
                         sources=source_archive.sources_table(served, key))
    tarball = served.folder / "debian/pool/main/tiny_1.0.tar.xz"
    tarball.write_bytes(b"not what the signed index says" + tarball.read_bytes()[30:])
    done = _publish(kit.path, matrix, tmp_path / "out", tmp_path / "cache")
    assert done.returncode == EXIT_CHECK_FAILED, done.stderr
    assert "tiny 1.0" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / TAG).exists()
    assert not (tmp_path / "cache/sources/tiny_1.0").exists()


def test_an_archive_whose_signature_is_not_trusted_is_not_read(
        program: Path, tmp_path: Path, key: Key, served: Served) -> None:
    """Without the keyring, the archive's index is not read: the package is found nowhere."""
    kit = make_kit(tmp_path / "dist", program, portable=True, owed=_record(OWED[1]))
    table = source_archive.sources_table(served, key).replace(f'keyring = "{key.keyring}"\n', "")
    matrix = matrix_file(tmp_path, portable=True, sources=table)
    done = _publish(kit.path, matrix, tmp_path / "out", tmp_path / "cache")
    assert done.returncode == EXIT_ENVIRONMENT, done.stderr
    assert "apt-get update" in done.stderr and "tiny 1.0" in done.stderr
    assert not any("/pool/" in path for path in served.requests)


def test_a_dry_run_names_the_owed_packages_and_stays_offline(
        program: Path, tmp_path: Path, key: Key, served: Served) -> None:
    kit = make_kit(tmp_path / "dist", program, portable=True, owed=_record(*OWED))
    matrix = matrix_file(tmp_path, portable=True,
                         sources=source_archive.sources_table(served, key))
    done = cli("publish", kit.path, "--dry-run", "--out", tmp_path / "dry", "--matrix", matrix,
               "--cache-dir", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "owes 2 Debian source packages; a publish fetches them" in done.stderr
    assert "ffmpeg 7:7.1.5-0+deb13u1, tiny 1.0" in done.stderr
    assert served.requests == []


def test_a_kit_an_older_version_built_without_its_sources_is_refused(
        program: Path, tmp_path: Path) -> None:
    readme = (f"{kitdir.SOURCES_NOT_FETCHED}\n{'-' * len(kitdir.SOURCES_NOT_FETCHED)}\n\n"
              "... it must not be distributed.\n  libx 1.0-1 (LGPL-2.1+)\n")
    kit = make_kit(tmp_path / "dist", program, portable=True, portable_readme=readme)
    done = _publish(kit.path, matrix_file(tmp_path, portable=True), tmp_path / "out",
                    tmp_path / "cache")
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert "NINFER_KITS_NO_SOURCES=1" in done.stderr and "nothing was published" in done.stderr
    assert "Build the kit again" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("table", "key", "says"), [
    ('mirror = "ftp://x/debian"\n', "mirror", "expected http(s)://HOST"),
    ('snapshot = "https://u:p@snapshot.example.org"\n', "snapshot", "credentials"),
    ('keyring = "absent.gpg"\n', "keyring", "absent.gpg"),
    ('keyring = "matrix.toml"\n', "keyring", "ends in .gpg"),
    ('mirrors = "https://x"\n', "mirrors", "unknown key"),
])
def test_a_bad_sources_table_is_refused_naming_the_key(tmp_path: Path, table: str, key: str,
                                                       says: str) -> None:
    matrix = matrix_file(tmp_path, sources=f"\n[publish.sources]\n{table}")
    with pytest.raises(ConfigError) as caught:
        load_matrix(matrix)
    assert key in str(caught.value) and says in str(caught.value), str(caught.value)
