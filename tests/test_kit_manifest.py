"""kit/MANIFEST.json: a kit tarball lists its own files, and `verify` of an unpacked kit checks
every file against it, naming what changed, what is missing and what was added (exit 1). Where
the tarball sits beside kit/ (fetch's DEST), the tarball's manifest is the one trusted, so that
editing a file and kit/MANIFEST.json together is caught too. The kits are real (a compiled
program, packed by the build's own pack_kit), published and fetched by the real commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ninfer_kits.errors import EXIT_CHECK_FAILED
from ninfer_kits.kit import kitdir, kitmanifest
from ninfer_kits.kit.kitmanifest import ManifestMismatch
from ninfer_kits.pipeline.pack import pack_kit
from ninfer_kits.verify.kit import open_kit
from test_publish_support import ASSET, PORTABLE, TAG, cli, compile_program, make_kit, matrix_file
from unsigned import unsigned_env, unsigned_matrix


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> kitdir.KitDir:
    """dist/<tag>/ as `build` makes it: both tarballs carry kit/MANIFEST.json."""
    place = tmp_path_factory.mktemp("built")
    return make_kit(place / "dist", compile_program(place), portable=True, manifest=True)


@pytest.fixture(scope="module")
def published(built: kitdir.KitDir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    place = tmp_path_factory.mktemp("published")
    done = cli("publish", built.path, "--to", "local", "--out", place / "out", "--matrix",
               matrix_file(place, portable=True), "--cache-dir", place / "cache")
    assert done.returncode == 0, done.stderr
    return place / "out" / TAG


def _fetch(published: Path, dest: Path, *more: str) -> Path:
    done = cli("fetch", TAG, "--from", published.parent, "--dest", dest, "--matrix",
               unsigned_matrix(), *more)
    assert done.returncode in (0, 4), done.stderr  # verify's verdict: no NVIDIA driver here
    assert (dest / "kit" / kitmanifest.NAME).is_file()
    return dest


@pytest.fixture(scope="module")
def fetched(published: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fetch's DEST: kit/ unpacked beside the plain tarball (read-only: copy to change)."""
    return _fetch(published, tmp_path_factory.mktemp("fetched") / "box")


def _copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / folder.name
    shutil.copytree(folder, target, symlinks=True)
    return target


def _state(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under `folder` with its size and mtime: what verify must leave as it was."""
    return {str(path.relative_to(folder)): (path.lstat().st_size, path.lstat().st_mtime_ns)
            for path in folder.rglob("*")}


def _verify_refuses(dest: Path, *said: str) -> None:
    """`verify DEST` exits 1 naming each of `said`, with no traceback, and changes nothing."""
    before = _state(dest)
    done = cli("verify", dest, env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED, done.stdout + done.stderr
    assert f"{dest / 'kit'} is not as {ASSET} lists it: " in done.stderr
    for words in said:
        assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert _state(dest) == before


# --------------------------------------------------------------------------- the manifest


def test_the_manifest_is_in_every_tarball_deterministic_and_lists_every_file(
        built: kitdir.KitDir, tmp_path: Path) -> None:
    data = kitmanifest.from_tarball(built.tarball)
    assert data is not None
    document = json.loads(data)
    files = document["files"]
    assert document["format"] == 1 and list(files) == sorted(files)
    assert sorted(files) == ["kit/BUILDINFO.txt", "kit/LICENSE", "kit/NOTICE", "kit/bin/ninfer",
                             "kit/bin/ninfer-serve"]  # not itself
    assert files["kit/bin/ninfer"]["executable"] and not files["kit/LICENSE"]["executable"]
    portable = kitmanifest.from_tarball(built.path / PORTABLE)
    assert portable is not None and "kit/lib/libbundled.so.1" in json.loads(portable)["files"]
    # the same tree, packed again elsewhere and later: the same bytes; a link is its target
    tree = tmp_path / "kit"
    shutil.copytree(_unpack(built.tarball, tmp_path / "unpacked") / "kit", tree, symlinks=True)
    (tree / "lib").mkdir()
    (tree / "lib" / "libx.so.1").write_bytes(b"x")
    (tree / "lib" / "libx.so").symlink_to("libx.so.1")
    first = pack_kit(tree, tmp_path / "a.tar.gz", mtime=1700000000, threads=1)
    os.utime(tree / "LICENSE", (1, 1))
    second = pack_kit(tree, tmp_path / "b.tar.gz", mtime=1700000000, threads=1)
    assert first.sha256 == second.sha256
    assert json.loads((tree / kitmanifest.NAME).read_bytes())["files"]["kit/lib/libx.so"] == \
        {"link": "libx.so.1"}


def _unpack(tarball: Path, into: Path) -> Path:
    """As a user does, with tar (Python 3.11.2's tarfile has no extraction filters)."""
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(into)], check=True)
    return into


# --------------------------------------------------------------------------- verify of DEST


def test_a_fetched_kit_is_checked_file_by_file(fetched: Path) -> None:
    with open_kit(fetched) as kit:
        assert f"; kit/ as {ASSET} lists it (5 files); " in kit.checked
    done = cli("verify", fetched, env=unsigned_env())
    assert done.returncode in (0, 4) and f"kit/ as {ASSET} lists it (5 files)" in done.stdout


Damage = Callable[[Path], None]


def _flip(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


@pytest.mark.parametrize(("damage", "said"), [
    (lambda kit: _flip(kit / "bin" / "ninfer"), ["changed: kit/bin/ninfer (content)"]),
    (lambda kit: (kit / "NOTICE").unlink(), ["missing: kit/NOTICE"]),
    (lambda kit: (kit / "bin" / "helper").write_text("#!/bin/sh\n"), ["added: kit/bin/helper"]),
    (lambda kit: (kit / "bin" / "ninfer-serve").chmod(0o644),
     ["changed: kit/bin/ninfer-serve (executable bit)"]),
    (lambda kit: ((kit / "LICENSE").unlink(), (kit / "LICENSE").symlink_to("NOTICE")),
     ["changed: kit/LICENSE (a link instead of a file)"]),
    # a file and kit/MANIFEST.json edited together: the tarball's manifest is the one trusted
    (lambda kit: (_flip(kit / "bin" / "ninfer"), kitmanifest.write(kit)),
     ["changed: kit/MANIFEST.json (content), kit/bin/ninfer (content)"]),
    (lambda kit: (kit / kitmanifest.NAME).unlink(), ["missing: kit/MANIFEST.json"]),
    (lambda kit: ((kit / "NOTICE").unlink(), (kit / "extra\x1b]0;x\x07").write_text("x"),
                  _flip(kit / "BUILDINFO.txt")),
     ["changed: kit/BUILDINFO.txt (content); missing: kit/NOTICE; added: kit/extra\\x1b]0;x\\x07"]),
], ids=["content", "missing", "added", "mode", "file-to-link", "file-and-manifest",
        "no-manifest", "all-three-escaped"])
def test_a_changed_unpacked_kit_is_refused_naming_what(fetched: Path, tmp_path: Path,
                                                       damage: Damage, said: list[str]) -> None:
    dest = _copy(fetched, tmp_path)
    damage(dest / "kit")
    _verify_refuses(dest, *said)
    with pytest.raises(ManifestMismatch), open_kit(dest):
        pass


def test_the_portable_kit_is_checked_against_its_own_tarballs_manifest(
        published: Path, tmp_path: Path) -> None:
    dest = _fetch(published, tmp_path / "box", "--portable")
    with open_kit(dest) as kit:
        assert f"kit/ as {PORTABLE} lists it (7 files)" in kit.checked
    (dest / "kit" / "lib" / "libbundled.so.1").write_bytes(b"not the library")
    done = cli("verify", dest, env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED
    assert f"is not as {PORTABLE} lists it: changed: kit/lib/libbundled.so.1 (content)" \
        in done.stderr


def test_beside_both_tarballs_kit_is_the_one_it_matches(published: Path, tmp_path: Path) -> None:
    """A release's assets with one tarball unpacked beside them (`tar xzf` of the notes)."""
    folder = _copy(published, tmp_path)
    (folder / "RELEASE.md").unlink()
    _unpack(folder / PORTABLE, folder)
    with open_kit(folder) as kit:
        assert f"kit/ as {PORTABLE} lists it (7 files)" in kit.checked
    (folder / "kit" / "NOTICE").unlink()
    done = cli("verify", folder, env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED
    assert f"is not as {PORTABLE} lists it: missing: kit/NOTICE" in done.stderr


# --------------------------------------------------------------------------- no tarball beside


def test_an_unpacked_kit_alone_is_checked_against_its_own_manifest(fetched: Path,
                                                                   tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    shutil.copytree(fetched / "kit", alone / "kit", symlinks=True)
    with open_kit(alone) as kit:
        assert kit.checked == ("an unpacked kit: kit/ as its own kit/MANIFEST.json lists it "
                               "(5 files; no tarball beside it vouches for that list)")
    _flip(alone / "kit" / "bin" / "ninfer")
    done = cli("verify", alone, env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED
    assert (f"{alone / 'kit'} is not as its own kit/MANIFEST.json lists it: changed: "
            f"kit/bin/ninfer (content)") in done.stderr


def test_a_kit_packed_before_manifests_still_verifies_saying_so(tmp_path: Path) -> None:
    old = make_kit(tmp_path / "dist", compile_program(tmp_path))
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--from", old.path.parent, "--dest", dest, "--matrix",
               unsigned_matrix())
    assert done.returncode in (0, 4), done.stderr
    again = cli("verify", dest, env=unsigned_env())
    assert again.returncode == done.returncode
    assert (f"kit/ not checked file by file: {ASSET} carries no kit/MANIFEST.json (packed "
            f"before kits listed their files)") in again.stdout
    (dest / "kit" / kitmanifest.NAME).write_text('{"format": 1, "files": {}}\n')  # planted
    planted = cli("verify", dest, env=unsigned_env())
    assert planted.returncode == done.returncode and "not checked file by file" in planted.stdout


def test_a_manifest_that_is_not_one_is_a_failed_check(fetched: Path, tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    shutil.copytree(fetched / "kit", alone / "kit", symlinks=True)
    (alone / "kit" / kitmanifest.NAME).write_text("[" * 100_000)
    done = cli("verify", alone, env=unsigned_env())
    assert done.returncode == EXIT_CHECK_FAILED and "Traceback" not in done.stderr
    assert "its own kit/MANIFEST.json: kit/MANIFEST.json is not a kit manifest" in done.stderr
